//! `migrate`: manifest generation, lint, planning, running and inspecting
//! slug-identified cluster migrations. See the README for every subcommand,
//! the JSON documents and the exit codes.
//!
//! The subcommands live in [`migrate::cli`]; this binary parses the command
//! line, sets up logging and the runtime, and dispatches.

use std::io::IsTerminal;
use std::process::ExitCode;

use clap::Parser;
use migrate::cli::args::{Cli, Command};
use migrate::cli::{self, Failure, Out};
use migrate::exit;

async fn dispatch(command: Command, out: &Out) -> Result<(), Failure> {
    match command {
        Command::Plan(args) => cli::plan(args, out).await,
        Command::Manifest(args) => cli::manifest(args, out),
        Command::Lint(args) => cli::lint(args, out),
        Command::SeedFresh(args) => cli::seed_fresh(args, out).await,
        Command::Verify(args) => cli::verify(args, out).await,
        Command::New(args) => cli::new(args, out),
        Command::Run(args) => cli::run(args, out).await,
        Command::Index(args) => cli::index(args, out),
        Command::Crd => {
            cli::crd(out);
            Ok(())
        }
        Command::Status(args) => cli::status(args, out).await,
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("MIGRATE_LOG")
                .unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
    let out = Out {
        format: cli.output,
        colour: std::io::stdout().is_terminal(),
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("migrate: cannot start the async runtime: {e}");
            return ExitCode::from(exit::ENVIRONMENT);
        }
    };
    match runtime.block_on(dispatch(cli.command, &out)) {
        Ok(()) => ExitCode::from(exit::SUCCESS),
        Err(failure) => {
            out.fail(&failure);
            ExitCode::from(failure.code)
        }
    }
}
