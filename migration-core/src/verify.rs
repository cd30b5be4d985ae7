//! Verification: the upgrade-lane assertion that nothing was silently skipped.

use crate::entry::EntryState;
use crate::ledger::{LedgerSnapshot, Record};
use crate::manifest::Manifest;
use crate::slug::Slug;
use crate::tree::MigrationsTree;
use crate::version::Version;

/// Why a slug fails verification. Its message is the line the `verify`
/// document gives it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VerifyProblem {
    /// A non-retired manifest slug with no entry at all.
    #[error("'{slug}' ({batch}) has no ledger entry")]
    Missing {
        /// The slug.
        slug: Slug,
        /// Its batch.
        batch: String,
    },
    /// An entry that cannot be read.
    #[error("'{slug}': ledger key '{key}' is corrupt")]
    Corrupt {
        /// The slug.
        slug: Slug,
        /// The ledger key.
        key: String,
    },
    /// A slug recorded `not-yet`: it has not done its work here, and the
    /// next run executes it again. Fails with or without `since`, retired
    /// lines included; a revoked slug is exempt (it must not run at all).
    #[error(
        "'{slug}' ({batch}) is 'not-yet' ({reason}, {attempts} attempt(s)): it has not done its work on this cluster; the next run executes it again"
    )]
    NotYet {
        /// The slug.
        slug: Slug,
        /// Its batch.
        batch: String,
        /// The entry's reason (`exit-status-75`, `requirement-not-yet`).
        reason: String,
        /// The entry's attempts.
        attempts: u32,
    },
    /// A slug first shipped after the `since` release that is not `ok`.
    #[error("'{slug}' ({batch}) shipped after the baseline release but is '{state}', not 'ok'")]
    NotOk {
        /// The slug.
        slug: Slug,
        /// Its batch.
        batch: String,
        /// What it is instead.
        state: EntryState,
    },
}

/// The result of [`verify`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Verification {
    /// Slugs checked.
    pub checked: usize,
    /// Every problem found; empty means the ledger passes.
    pub problems: Vec<VerifyProblem>,
}

/// Checks that every non-retired manifest slug has a terminal entry (a
/// `not-yet` one fails, retired or not, unless the slug is revoked) and,
/// when `since` names a release, that every slug first shipped after it
/// (its batch comes after that release's batch, or is untagged) is `ok`
/// specifically, so that a fresh install cannot pass trivially. Revoked
/// slugs are exempt from the `ok` requirement.
///
/// A batch is after `since` when its label is a later version; the untagged
/// batch is always after, the legacy batch never. A label that is not a
/// version cannot be placed, so it counts as after: verification is then
/// stricter, never laxer.
pub fn verify(
    tree: &MigrationsTree,
    manifest: &Manifest,
    snapshot: Option<&LedgerSnapshot>,
    since: Option<&Version>,
) -> Verification {
    let mut result = Verification::default();
    for (batch, line) in manifest.iter() {
        let shipped_after = since.is_some_and(|since| {
            !batch.name.is_legacy()
                && (batch.name.is_untagged()
                    || Version::parse(batch.name.label()).is_none_or(|v| v > *since))
        });
        let record = snapshot.and_then(|s| s.record(&line.slug));
        let not_yet = record
            .and_then(Record::entry)
            .filter(|e| e.state == EntryState::NotYet && !tree.is_revoked(&line.slug));
        if let Some(entry) = not_yet {
            result.checked += 1;
            result.problems.push(VerifyProblem::NotYet {
                slug: line.slug.clone(),
                batch: batch.name.to_string(),
                reason: entry.reason.clone().unwrap_or_default(),
                attempts: entry.attempts,
            });
            continue;
        }
        if line.retired && !shipped_after {
            continue;
        }
        result.checked += 1;
        let batch_name = batch.name.to_string();
        match record {
            None if line.retired => {}
            None => result.problems.push(VerifyProblem::Missing {
                slug: line.slug.clone(),
                batch: batch_name,
            }),
            Some(Record::Corrupt(c)) => result.problems.push(VerifyProblem::Corrupt {
                slug: line.slug.clone(),
                key: c.key.clone(),
            }),
            Some(Record::Entry(entry)) => {
                let exempt = tree.is_revoked(&line.slug) && entry.state == EntryState::Revoked;
                if shipped_after && entry.state != EntryState::Ok && !exempt {
                    result.problems.push(VerifyProblem::NotOk {
                        slug: line.slug.clone(),
                        batch: batch_name,
                        state: entry.state,
                    });
                }
            }
        }
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::fixtures::{TreeBuilder, snapshot_of};

    fn tree(revoked: &str) -> (MigrationsTree, Manifest) {
        let tree = TreeBuilder::new()
            .pre("old")
            .pre("new")
            .pre("bad")
            .pre("next")
            .revoked(revoked)
            .manifest(&[
                ("00001-v1.0.0", "old\ngone retired\n"),
                ("00002-v1.1.0", "new\nbad\n"),
                ("99999-untagged", "next\n"),
            ])
            .build();
        let manifest = tree.manifest().unwrap().clone();
        (tree, manifest)
    }

    fn names(v: &Verification) -> Vec<String> {
        v.problems.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn every_non_retired_slug_needs_a_terminal_entry() {
        let (tree, manifest) = tree("");
        let snap = snapshot_of(&[("old", EntryState::Ok), ("new", EntryState::Failed)]);
        let v = verify(&tree, &manifest, Some(&snap), None);
        assert_eq!(v.checked, 4);
        assert_eq!(
            names(&v),
            [
                "'bad' (00002-v1.1.0) has no ledger entry",
                "'next' (99999-untagged) has no ledger entry"
            ]
        );
        assert_eq!(
            verify(&tree, &manifest, None, None).problems.len(),
            4,
            "no ledger: everything is missing"
        );
    }

    #[test]
    fn since_demands_ok_for_everything_shipped_later_so_a_fresh_install_cannot_pass() {
        let (tree, manifest) = tree("");
        // A fresh install records every slug of the tree, retired ones too.
        let fresh = snapshot_of(
            &["old", "gone", "new", "bad", "next"].map(|s| (s, EntryState::SkippedFreshInstall)),
        );
        assert!(
            verify(&tree, &manifest, Some(&fresh), None)
                .problems
                .is_empty()
        );
        let since = Version::parse("v1.0.0").unwrap();
        let v = verify(&tree, &manifest, Some(&fresh), Some(&since));
        assert_eq!(v.problems.len(), 3, "{:?}", names(&v));
        assert!(
            v.problems
                .iter()
                .all(|p| matches!(p, VerifyProblem::NotOk { .. }))
        );
    }

    #[test]
    fn revoked_slugs_recorded_revoked_pass_since() {
        let (tree, manifest) = tree("bad\n");
        let snap = snapshot_of(&[
            ("old", EntryState::Ok),
            ("new", EntryState::Ok),
            ("bad", EntryState::Revoked),
            ("next", EntryState::Ok),
        ]);
        let since = Version::parse("v1.0.0").unwrap();
        assert!(
            verify(&tree, &manifest, Some(&snap), Some(&since))
                .problems
                .is_empty()
        );
    }

    #[test]
    fn corrupt_entries_fail_verification() {
        let (tree, manifest) = tree("");
        let mut snap = snapshot_of(&[
            ("new", EntryState::Ok),
            ("bad", EntryState::Ok),
            ("next", EntryState::Ok),
        ]);
        snap.records.insert(
            Slug::parse("old").unwrap(),
            Record::Corrupt(Box::new(crate::CorruptEntry::new(
                "m.old",
                "{",
                "eof".into(),
            ))),
        );
        let v = verify(&tree, &manifest, Some(&snap), None);
        assert_eq!(names(&v), ["'old': ledger key 'm.old' is corrupt"]);
    }
}
