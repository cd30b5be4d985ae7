//! A pending migration's `requires`: placed before it in the manifest, and
//! met by what the ledger holds, seeding writes or this run executes first.

use std::collections::HashSet;
use std::fmt;

use super::seed::Seeding;
use super::{Planner, Refusal};
use crate::entry::EntryState;
use crate::header::Tier;
use crate::ledger::LedgerSnapshot;
use crate::manifest::Position;
use crate::slug::Slug;
use crate::tree::Script;

/// Why a requirement of a pending migration is not met.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unmet {
    /// The target is recorded in a state that does not put its effect in place.
    Recorded(EntryState),
    /// The target is revoked: it will never run here.
    Revoked,
    /// The target belongs to the other tier and has not run yet.
    NotRun(Tier),
    /// The target ran earlier in this run and ended in a state that does
    /// not put its effect in place.
    RecordedInThisRun(EntryState),
}

impl Unmet {
    /// True when the target is `not-yet` (recorded so, or it ended so
    /// earlier in this run): its dependent waits with it, recorded
    /// `not-yet` itself, rather than failing (CONTRACT.md §7.4).
    pub fn defers(&self) -> bool {
        matches!(
            self,
            Unmet::Recorded(EntryState::NotYet) | Unmet::RecordedInThisRun(EntryState::NotYet)
        )
    }

    /// Why a target recorded `state` earlier in the same run leaves its
    /// dependents unmet, or `None` when it satisfies them.
    pub fn in_this_run(state: EntryState) -> Option<Unmet> {
        (!state.satisfies_requirement()).then_some(Unmet::RecordedInThisRun(state))
    }
}

impl fmt::Display for Unmet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unmet::Recorded(state) => write!(f, "is recorded '{state}'"),
            Unmet::Revoked => f.write_str("is revoked"),
            Unmet::NotRun(tier) => write!(f, "is in the {tier} tier and has not run"),
            Unmet::RecordedInThisRun(state) => write!(f, "is recorded '{state}' in this run"),
        }
    }
}

impl Planner<'_> {
    /// Checks the `requires` of `script` (pending as `slug`): a target the
    /// manifest does not list or places later is refused; the unmet ones
    /// among the rest are returned, and the migration will not run.
    pub(super) fn requirements(
        &mut self,
        slug: &Slug,
        script: &Script,
        snapshot: &LedgerSnapshot,
        seeding: &Seeding<'_>,
        pending_ahead: &HashSet<&Slug>,
    ) -> Vec<(Slug, Unmet)> {
        let manifest = self.manifest;
        let here = manifest
            .position(slug)
            .unwrap_or(Position { batch: 0, index: 0 });
        let mut unmet = Vec::new();
        for req in &script.header.requires {
            let target = &req.target;
            match manifest.lookup(target) {
                None => self.problems.push(Refusal::RequiresUnknown {
                    slug: slug.clone(),
                    target: target.clone(),
                }),
                Some((target_batch, _)) if manifest.position(target).is_some_and(|p| p > here) => {
                    self.problems.push(Refusal::RequiresLater {
                        slug: slug.clone(),
                        target: target.clone(),
                        target_batch: target_batch.name.to_string(),
                    });
                }
                Some(_) => {
                    if let Some(why) =
                        self.unmet_requirement(snapshot, seeding, pending_ahead, target)
                    {
                        unmet.push((target.clone(), why));
                    }
                }
            }
        }
        unmet
    }

    /// Whether a requirement that sits earlier in the manifest is unmet.
    fn unmet_requirement(
        &self,
        snapshot: &LedgerSnapshot,
        seeding: &Seeding<'_>,
        pending_ahead: &HashSet<&Slug>,
        target: &Slug,
    ) -> Option<Unmet> {
        let state = snapshot
            .entry(target)
            .map(|e| e.state)
            .or_else(|| seeding.state(target));
        match state {
            Some(state) if state.satisfies_requirement() => None,
            // A `not-yet` target pending earlier in this run is decided by
            // how it ends in this run (the run loop re-checks).
            Some(EntryState::NotYet) if pending_ahead.contains(target) => None,
            Some(EntryState::Revoked) => Some(Unmet::Revoked),
            Some(state) => Some(Unmet::Recorded(state)),
            None if pending_ahead.contains(target) => None,
            None if self.tree.is_revoked(target) => Some(Unmet::Revoked),
            // A retired target without entry is refused by the retention floor;
            // a corrupt one by the corrupt-entry check. What is left is a target
            // of the other tier that has not run.
            None => self.tree.script(target).map(|s| Unmet::NotRun(s.tier)),
        }
    }
}
