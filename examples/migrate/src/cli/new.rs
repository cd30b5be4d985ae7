//! `migrate new`: scaffolds a migration script and its test stub.

use super::args::NewArgs;
use super::{Failure, Out};
use migrate_repo::scaffold::{ScaffoldError, scaffold};
use migrate_shared::exit;

/// Writes the two files and prints where they are.
pub fn new(args: NewArgs, out: &Out) -> Result<(), Failure> {
    let made = scaffold(
        &args.tree,
        &args.slug,
        args.tier.into(),
        args.on_error.into(),
        &args.tests_dir,
    )
    .map_err(|e| {
        let code = if matches!(e, ScaffoldError::Io { .. }) {
            exit::ENVIRONMENT
        } else {
            exit::BAD_INPUT
        };
        Failure::new(code, "bad-input", vec![e.to_string()])
    })?;
    out.emit(&made, |_| {
        format!(
            "created {}\ncreated {}\n",
            made.script.display(),
            made.test.display()
        )
    });
    Ok(())
}
