//! The `migrate` command's subcommands, one module each; the binary only
//! parses the command line ([`args`]) and calls the one asked for.
//!
//! Each subcommand returns `Result<(), Failure>`: its document is printed
//! through [`Out`], and a [`Failure`] carries the exit code.

mod adopt;
mod adopt_history;
pub mod args;
mod cluster_commands;
mod convert;
mod crd;
mod failure;
mod index;
mod init;
mod kube_context;
mod lint;
mod manifest;
mod new;
mod output;
mod plan;
mod repair;
mod run;
mod seed;
mod settings;
mod status;
mod suggest;
mod test;
mod usage;
mod verify;

pub use adopt::adopt;
pub use convert::{ConvertArgs, convert};
pub use crd::crd;
pub use failure::{Failure, open};
pub use index::index;
pub use init::init;
pub use lint::lint;
pub use manifest::manifest;
pub use new::new;
pub use output::Out;
pub use plan::plan;
pub use repair::repair;
pub use run::run;
pub use seed::seed_fresh;
pub use status::status;
pub use test::test;
pub use usage::{completions, usage_error};
pub use verify::verify;

use std::io::IsTerminal;
use std::process::ExitCode;

use migration_core::{Manifest, MigrationsTree};

use migrate_shared::exit;

/// Logs to stderr, at the level `MIGRATE_LOG` names (else `-v`'s, `warn` by default) and
/// coloured only on a terminal: stdout carries the command's document.
pub fn init_logging(verbosity: Option<u8>) {
    // `-v N` as kubectl spells it; MIGRATE_LOG, when set, decides.
    let level = match verbosity.unwrap_or(0) {
        0 => "warn",
        1..=3 => "info",
        4..=5 => "debug",
        _ => "trace",
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("MIGRATE_LOG")
                .unwrap_or_else(|_| level.into()),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
}

/// Runs `command` to completion on a current-thread runtime (one process
/// runs one command) and turns its result into the exit code, reporting a
/// failure through `out`.
pub fn execute(out: &Out, command: impl Future<Output = Result<(), Failure>>) -> ExitCode {
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
    match runtime.block_on(command) {
        Ok(()) => ExitCode::from(exit::SUCCESS),
        Err(failure) => {
            out.fail(&failure);
            ExitCode::from(failure.code)
        }
    }
}

/// The tree's manifest; a tree without `order.d/` is bad input for the
/// commands that read one.
fn manifest_of(tree: &MigrationsTree) -> Result<&Manifest, Failure> {
    tree.manifest().ok_or_else(|| no_manifest(tree))
}

/// The failure of a command that needs `order.d/` on a tree without one:
/// bad input (the tree is incomplete, whatever the ledger holds), in the
/// plan's own words, whichever command meets it.
fn no_manifest(tree: &MigrationsTree) -> Failure {
    Failure::bad_input(vec![
        migration_core::Refusal::NoManifest {
            root: tree.root().display().to_string(),
        }
        .to_string(),
    ])
}
