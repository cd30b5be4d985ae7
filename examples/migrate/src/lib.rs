//! Programs built on the migration engine.
//!
//! The `migrate` command (the CLI that platform engineers and CI use, and
//! the hook runner inside the pre-upgrade Job) is assembled from these
//! modules; the binaries stay thin.

#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

pub mod cli;
pub mod convert;
pub mod exit;
pub mod git;
pub mod index;
pub mod lint;
pub mod render;
pub mod report;
pub mod runner;
pub mod scaffold;
pub mod shell;
pub mod spec;
pub mod tripwire;

/// `migrate --version`: the package version and the commit the binary was
/// built from (`unknown` outside a git checkout; see build.rs).
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("MIGRATE_BUILD_COMMIT"),
    ")"
);
