//! Step 4, the walk: every manifest line in order becomes pending, skipped
//! (with the reason) or a refusal.

use std::collections::HashSet;
use std::path::PathBuf;

use super::requires::Unmet;
use super::seed::{SeedKind, Seeding};
use super::{ChecksumMismatch, Planner, Refusal, TierSelection};
use crate::digest::Sha256Digest;
use crate::entry::{EntryState, LedgerEntry};
use crate::header::{OnError, Tier};
use crate::ledger::{LedgerSnapshot, Record};
use crate::manifest::{Batch, ManifestEntry};
use crate::slug::Slug;

/// A migration the run will execute, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingMigration {
    /// The slug.
    pub slug: Slug,
    /// Its tier.
    pub tier: Tier,
    /// Its failure policy.
    pub on_error: OnError,
    /// The manifest batch that placed it.
    pub batch: String,
    /// Checksum of the script on disk now.
    pub sha256: Sha256Digest,
    /// Path relative to the tree root.
    pub relative_path: PathBuf,
    /// The existing entry, for an `ONLY` re-run or a `not-yet` slug run
    /// again (its `attempts` is carried on).
    pub previous: Option<LedgerEntry>,
    /// Slugs it requires (all placed before it).
    pub requires: Vec<Slug>,
    /// Requirements already known to be unmet: the migration must not run,
    /// and the runner treats it as failed under its `on-error` policy.
    pub unmet: Vec<(Slug, Unmet)>,
    /// Why this content runs though it may have run before (a diverged
    /// legacy slot nobody can say which content of ran, CONTRACT.md §6.2):
    /// the message of its `ok` entry.
    pub rerun: Option<String>,
}

/// Why a manifest slug is not pending.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SkipReason {
    /// It has an entry.
    Recorded(EntryState),
    /// It is revoked (and is recorded, or will be, as `revoked`).
    Revoked,
    /// Its script was deleted after shipping.
    Retired,
    /// It belongs to the tier not being run.
    OtherTier(Tier),
}

/// A manifest slug that is not pending, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    /// The slug.
    pub slug: Slug,
    /// Why.
    pub reason: SkipReason,
}

/// What the walk produces, in manifest order.
#[derive(Debug, Default)]
pub(super) struct Walk<'a> {
    /// Migrations to execute.
    pub(super) pending: Vec<PendingMigration>,
    /// Manifest slugs not pending, and why.
    pub(super) skipped: Vec<Skipped>,
    /// Recorded slugs whose script changed since.
    pub(super) checksum_mismatches: Vec<ChecksumMismatch>,
    /// Slugs already pending: a requirement on one of them is met by the time
    /// its dependent runs.
    pending_ahead: HashSet<&'a Slug>,
}

impl<'a> Walk<'a> {
    fn skip(&mut self, slug: &Slug, reason: SkipReason) {
        self.skipped.push(Skipped {
            slug: slug.clone(),
            reason,
        });
    }
}

impl<'a> Planner<'a> {
    /// Walks the manifest; seeds revoked slugs that never ran here into
    /// `seeding`.
    pub(super) fn walk(
        &mut self,
        snapshot: &LedgerSnapshot,
        seeding: &mut Seeding<'a>,
    ) -> Walk<'a> {
        let mut walk = Walk::default();
        for (i, (batch, line)) in self.manifest.iter().enumerate() {
            self.walk_line(i, batch, line, snapshot, seeding, &mut walk);
        }
        if let Some(only) = &self.request.only
            && self.manifest.position(only).is_none()
            && self.tree.script(only).is_none()
        {
            self.problems.push(Refusal::OnlyNotInTree {
                slug: only.clone(),
                retired: false,
            });
        }
        walk
    }

    /// One manifest line, the `i`th in manifest order.
    fn walk_line(
        &mut self,
        i: usize,
        batch: &Batch,
        line: &'a ManifestEntry,
        snapshot: &LedgerSnapshot,
        seeding: &mut Seeding<'a>,
        walk: &mut Walk<'a>,
    ) {
        let slug = &line.slug;
        let record = self.lines.records[i];
        let script = self.lines.scripts[i];
        if let (Some(Record::Entry(entry)), Some(script)) = (record, script)
            && let Some(recorded) = entry.sha256.filter(|r| *r != script.sha256)
        {
            walk.checksum_mismatches.push(ChecksumMismatch {
                slug: slug.clone(),
                recorded,
                on_disk: script.sha256,
            });
        }
        if self.request.only.as_ref().is_some_and(|only| only != slug) {
            return;
        }
        let is_only = self.request.only.as_ref() == Some(slug);
        if self.lines.revoked[i] {
            if record.is_none() && !seeding.contains(slug) {
                let entry = LedgerEntry {
                    batch: Some(batch.name.to_string()),
                    ..LedgerEntry::new(EntryState::Revoked, self.context.now)
                };
                seeding.add(slug, SeedKind::Revoked, entry);
            }
            if is_only {
                self.problems
                    .push(Refusal::OnlyRevoked { slug: slug.clone() });
            }
            walk.skip(slug, SkipReason::Revoked);
            return;
        }
        let recorded_state = match record {
            Some(Record::Entry(e)) => Some(e.state),
            Some(Record::Corrupt(_)) => return, // already refused or warned about
            None => seeding.state(slug),
        };
        // `not-yet` is the one state that is not terminal: its slug is
        // pending again on every run until it ends in another state.
        if let (Some(state), false) = (recorded_state, is_only)
            && state.is_terminal()
        {
            walk.skip(slug, SkipReason::Recorded(state));
            return;
        }
        let Some(script) = script else {
            if is_only {
                self.problems.push(Refusal::OnlyNotInTree {
                    slug: slug.clone(),
                    retired: line.retired,
                });
            }
            walk.skip(slug, SkipReason::Retired);
            return;
        };
        if !self.request.tiers.includes(script.tier) {
            match (is_only, self.request.tiers) {
                (true, TierSelection::One(requested)) => {
                    self.problems.push(Refusal::OnlyWrongTier {
                        slug: slug.clone(),
                        actual: script.tier,
                        requested,
                    })
                }
                _ => walk.skip(slug, SkipReason::OtherTier(script.tier)),
            }
            return;
        }
        let allowed = &self.context.allowed_interpreters;
        if !allowed.contains(&script.header.shebang) {
            self.problems.push(Refusal::InterpreterNotAllowed {
                slug: slug.clone(),
                path: script.relative_path().display().to_string(),
                shebang: script.header.shebang.clone(),
                allowed: allowed.join(", "),
            });
        }
        let unmet = self.requirements(slug, script, snapshot, seeding, &walk.pending_ahead);
        walk.pending_ahead.insert(slug);
        walk.pending.push(PendingMigration {
            slug: slug.clone(),
            tier: script.tier,
            on_error: script.header.on_error,
            batch: batch.name.to_string(),
            sha256: script.sha256,
            relative_path: script.relative_path(),
            previous: record.and_then(Record::entry).cloned(),
            requires: script
                .header
                .requires
                .iter()
                .map(|r| r.target.clone())
                .collect(),
            unmet,
            // Planned now, or recorded by an adoption that could not know
            // which content ran (`migrate adopt`).
            rerun: seeding.reruns.get(slug).cloned().or_else(|| {
                record
                    .and_then(Record::entry)
                    .filter(|e| {
                        e.state == EntryState::NotYet
                            && e.reason.as_deref() == Some(super::DIVERGED_RERUN)
                    })
                    .and_then(|e| e.message.clone())
            }),
        });
    }
}
