//! Checks of an existing ledger against the manifest: corrupt records on
//! the path of this run, and the retention floor (step 3).

use super::seed::Seeding;
use super::{Planner, Refusal, Warning};
use crate::ledger::LedgerSnapshot;
use crate::slug::Slug;

impl Planner<'_> {
    /// A corrupt record is fatal where this run acts on its slug, and only
    /// a warning elsewhere: one bad key must not block unrelated upgrades.
    pub(super) fn check_corrupt_records(&mut self, snapshot: &LedgerSnapshot) {
        let (tree, manifest, request) = (self.tree, self.manifest, self.request);
        // Which slugs this run acts on.
        let on_path = |slug: &Slug, retired: bool| -> bool {
            match &request.only {
                Some(only) => only == slug,
                None => {
                    retired
                        || tree
                            .script(slug)
                            .is_some_and(|s| request.tiers.includes(s.tier))
                }
            }
        };
        for (slug, corrupt) in snapshot.corrupt() {
            let retired = manifest.lookup(slug).is_some_and(|(_, line)| line.retired);
            if manifest.position(slug).is_some() && on_path(slug, retired) {
                self.problems.push(Refusal::CorruptEntry {
                    slug: slug.clone(),
                    key: corrupt.key.clone(),
                    reason: corrupt.reason.clone(),
                });
            } else {
                self.warnings.push(Warning::CorruptOffPath {
                    key: corrupt.key.clone(),
                    reason: corrupt.reason.clone(),
                });
            }
        }
    }

    /// Step 3, retention floor: a retired slug this cluster never recorded
    /// means it skipped the releases that shipped the script.
    pub(super) fn check_retention_floor(&mut self, seeding: &Seeding<'_>) {
        for (i, (batch, line)) in self.manifest.iter().enumerate() {
            // A retired line whose script is present is a stale manifest, refused earlier.
            if line.retired
                && self.lines.scripts[i].is_none()
                && !self.lines.revoked[i]
                && self.lines.records[i].is_none_or(never_completed)
                && !seeding.contains(&line.slug)
            {
                // A legacy script was converted before the first release of
                // the manifest, which therefore still ships it: name that one.
                let release = if batch.name.is_legacy() {
                    self.manifest
                        .batches()
                        .iter()
                        .find(|b| !b.name.is_legacy() && !b.name.is_untagged())
                        .map_or_else(
                            || "the last release that ships the script".to_owned(),
                            |b| b.name.label().to_owned(),
                        )
                } else {
                    batch.name.label().to_owned()
                };
                self.problems.push(Refusal::RetentionFloor {
                    slug: line.slug.clone(),
                    release,
                });
            }
        }
    }
}

/// A record that does not put the migration's effect in place for good: a
/// `not-yet` entry. For a retired line it counts as no record, since the
/// script that could complete it is gone.
fn never_completed(record: &crate::ledger::Record) -> bool {
    record
        .entry()
        .is_some_and(|e| e.state == crate::entry::EntryState::NotYet)
}
