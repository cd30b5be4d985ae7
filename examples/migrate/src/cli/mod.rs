//! The `migrate` command's subcommands, one module each; the binary only
//! parses the command line ([`args`]) and calls the one asked for.
//!
//! Each subcommand returns `Result<(), Failure>`: its document is printed
//! through [`Out`], and a [`Failure`] carries the exit code.

pub mod args;
mod crd;
mod failure;
mod index;
mod lint;
mod manifest;
mod new;
mod output;
mod plan;
mod run;
mod seed;
mod status;
mod verify;

pub use crd::crd;
pub use failure::{Failure, open};
pub use index::index;
pub use lint::lint;
pub use manifest::manifest;
pub use new::new;
pub use output::Out;
pub use plan::plan;
pub use run::run;
pub use seed::seed_fresh;
pub use status::status;
pub use verify::verify;

use migration_core::{Manifest, MigrationsTree};

/// The tree's manifest; a tree without `order.d/` is bad input for the
/// commands that read one.
fn manifest_of(tree: &MigrationsTree) -> Result<&Manifest, Failure> {
    tree.manifest().ok_or_else(|| no_manifest(tree))
}

/// The failure of a command that needs `order.d/` on a tree without one.
fn no_manifest(tree: &MigrationsTree) -> Failure {
    Failure::bad_input(vec![format!(
        "{}: no order.d/ manifest",
        tree.root().display()
    )])
}
