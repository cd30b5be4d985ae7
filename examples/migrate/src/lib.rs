//! Programs built on the migration engine.
//!
//! The `migrate` command (the CLI that platform engineers and CI use, and
//! the hook runner inside the pre-upgrade Job): argument parsing ([`cli`])
//! and what it prints ([`report`]), over the crates that do the work:
//! `migrate-runner` (the run's process side), `migrate-lint` (shell
//! analysis), `migrate-repo` (git history, convert, scaffold) and
//! `migrate-shared` (what the operator shares). The binaries stay thin.

#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

pub mod cli;
pub mod report;

/// `migrate --version`: the package version and the commit the binary was
/// built from (`unknown` outside a git checkout; see build.rs).
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("MIGRATE_BUILD_COMMIT"),
    ")"
);
