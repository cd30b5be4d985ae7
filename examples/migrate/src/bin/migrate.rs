//! `migrate`: manifest generation, lint, planning, running and inspecting
//! slug-identified cluster migrations. See the README for every subcommand,
//! the JSON documents and the exit codes.
//!
//! The subcommands live in [`migrate::cli`]; this binary parses the command
//! line and dispatches.

use std::process::ExitCode;

use migrate::cli::args::Command;
use migrate::cli::{self, Failure, Out};

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
        Command::Repair(args) => cli::repair(args, out).await,
        Command::Init(args) => cli::init(args, out),
        Command::Test(args) => cli::test(args, out).await,
        Command::Completions(args) => {
            cli::completions(&args);
            Ok(())
        }
        Command::Adopt(args) => cli::adopt(args, out).await,
        Command::Convert(args) => cli::convert(args, out),
    }
}

fn main() -> ExitCode {
    let cli = match cli::args::try_parse() {
        Ok(cli) => cli,
        Err(e) => return cli::usage_error(&e),
    };
    cli::init_logging(cli.verbosity);
    let out = Out::to_stdout(cli.output);
    cli::execute(&out, dispatch(cli.command, &out))
}
