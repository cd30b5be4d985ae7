//! `migrate verify`: asserts that nothing was skipped, and (unless told
//! otherwise) that no recorded script was edited since it ran.

use std::path::Path;

use migration_core::plan::ChecksumMismatch;
use migration_core::verify::verify as verify_ledger;
use migration_core::version::Version;
use migration_core::{Manifest, MigrationsTree};

use super::args::VerifyArgs;
use super::{Failure, Out, open};
use crate::report::VerifyView;
use migrate_shared::exit;

/// Verifies the ledger against the tree's manifest.
pub async fn verify(args: VerifyArgs, out: &Out) -> Result<(), Failure> {
    let tree = MigrationsTree::load(&args.tree)?;
    let manifest = super::manifest_of(&tree)?;
    let since = match &args.since {
        Some(tag) => Some(known_release(tag, manifest, tree.root())?),
        None => None,
    };
    let ledger = open(&args.ledger, &args.cluster).await?;
    let snapshot = ledger.read().await?;
    let result = verify_ledger(&tree, manifest, snapshot.as_ref(), since.as_ref());
    // Flyway's validate: a script edited after it ran means the tree no
    // longer says what the cluster ran.
    let mismatches: Vec<ChecksumMismatch> = tree
        .scripts()
        .values()
        .filter_map(|script| {
            let entry = snapshot.as_ref()?.entry(&script.slug)?;
            let recorded = entry.sha256.filter(|r| *r != script.sha256)?;
            Some(ChecksumMismatch {
                slug: script.slug.clone(),
                recorded,
                on_disk: script.sha256,
            })
        })
        .collect();
    let view = VerifyView::new(
        &result,
        &ledger.describe(),
        mismatches,
        args.allow_checksum_mismatch,
    );
    out.emit(&view, |_| view.text());
    if !view.ok {
        return Err(Failure::quiet(exit::VERIFY_FAILED));
    }
    Ok(())
}

/// `--since TAG` as a version, once it is known to be a release: the label
/// of a manifest batch, or a tag of the repository the tree is in. An
/// unknown tag would make the check pass or fail by accident.
fn known_release(tag: &str, manifest: &Manifest, root: &Path) -> Result<Version, Failure> {
    let version = Version::parse(tag).ok_or_else(|| {
        Failure::bad_input(vec![format!("--since {tag:?} is not a release version")])
    })?;
    let in_manifest = manifest.batches().iter().any(|b| b.name.label() == tag);
    if in_manifest || migrate_repo::git::tag_exists(root, tag) {
        return Ok(version);
    }
    let labels: Vec<&str> = manifest
        .batches()
        .iter()
        .map(|b| b.name.label())
        .filter(|l| Version::parse(l).is_some())
        .collect();
    Err(Failure::bad_input(vec![format!(
        "--since {tag:?}: no such release: it is neither a batch of {}/order.d ({}) nor a tag of its git repository",
        root.display(),
        if labels.is_empty() {
            "none".to_owned()
        } else {
            labels.join(", ")
        }
    )]))
}
