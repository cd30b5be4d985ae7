//! `migrate verify`: asserts that nothing was skipped.

use migration_core::MigrationsTree;
use migration_core::verify::verify as verify_ledger;
use migration_core::version::Version;

use super::args::VerifyArgs;
use super::{Failure, Out, open};
use crate::exit;
use crate::report::VerifyView;

/// Verifies the ledger against the tree's manifest.
pub async fn verify(args: VerifyArgs, out: &Out) -> Result<(), Failure> {
    let tree = MigrationsTree::load(&args.tree)?;
    let manifest = super::manifest_of(&tree)?;
    let since = match args.since {
        Some(tag) => Some(Version::parse(&tag).ok_or_else(|| {
            Failure::bad_input(vec![format!("--since {tag:?} is not a release version")])
        })?),
        None => None,
    };
    let ledger = open(&args.ledger).await?;
    let snapshot = ledger.read().await?;
    let result = verify_ledger(&tree, manifest, snapshot.as_ref(), since.as_ref());
    let view = VerifyView::new(&result, &ledger.describe());
    out.emit(&view, |_| view.text());
    if !view.ok {
        return Err(Failure::quiet(exit::VERIFY_FAILED));
    }
    Ok(())
}
