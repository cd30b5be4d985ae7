//! Planning: what runs, what is seeded, and what is refused (CONTRACT.md §6).
//!
//! [`plan`] is a pure function of the tree, the ledger snapshot and the
//! request. It performs every check before anything runs and returns either
//! a [`Plan`] (the seeding writes and the pending migrations, in order) or a
//! [`PlanError`] listing every fatal problem. Nothing is written here; the
//! [`crate::migrator::Migrator`] applies a plan's seeding through a ledger.
//!
//! Each step lives in its own module and they run in this order, so that a
//! refusal lists every problem in the order the steps found them:
//!
//! - always first, the tree against the manifest (`consistency`);
//! - step 1, fresh install: seed every manifest slug, run nothing (`seed`);
//! - on an existing ledger, step 2, legacy seeding (`seed`); then corrupt
//!   records and step 3, the retention floor (`ledger_checks`);
//! - step 4, the walk over the manifest (`pending`, with `requires`).

mod consistency;
mod ledger_checks;
mod lines;
mod pending;
mod refusal;
mod request;
mod requires;
mod seed;
mod warning;

pub use pending::{PendingMigration, SkipReason, Skipped};
pub use refusal::{PlanError, Refusal};
pub use request::{PlanContext, PlanRequest, TierSelection};
pub use requires::Unmet;
pub use seed::{DIVERGED_RERUN, SeedEntry, SeedKind, SeedMode};
pub use warning::{ChecksumMismatch, Warning};

use crate::ledger::LedgerSnapshot;
use crate::manifest::Manifest;
use crate::slug::Slug;
use crate::tree::MigrationsTree;
use lines::Lines;
use seed::Seeding;

/// The result of planning: what to seed, what to run, and what was skipped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// The request planned for.
    pub request: PlanRequest,
    /// No ledger object existed.
    pub fresh_install: bool,
    /// How to write [`Plan::seed`].
    pub seed_mode: SeedMode,
    /// Entries to write before anything runs.
    pub seed: Vec<SeedEntry>,
    /// Migrations to execute, in manifest order.
    pub pending: Vec<PendingMigration>,
    /// Manifest slugs not pending, and why.
    pub skipped: Vec<Skipped>,
    /// Recorded slugs whose script changed since.
    pub checksum_mismatches: Vec<ChecksumMismatch>,
    /// Non-fatal observations.
    pub warnings: Vec<Warning>,
}

impl Plan {
    /// Number of seed entries of `kind`.
    pub fn seeded(&self, kind: SeedKind) -> usize {
        self.seed.iter().filter(|s| s.kind == kind).count()
    }
}

/// Plans a run (CONTRACT.md §6). `ledger` is `None` when no ledger object exists.
pub fn plan(
    tree: &MigrationsTree,
    ledger: Option<&LedgerSnapshot>,
    request: &PlanRequest,
    context: &PlanContext,
) -> Result<Plan, PlanError> {
    let _span = tracing::debug_span!("plan", tiers = %request.tiers, only = ?request.only.as_ref().map(Slug::as_str)).entered();
    let Some(manifest) = tree.manifest() else {
        return Err(PlanError {
            problems: vec![Refusal::NoManifest {
                root: tree.root().display().to_string(),
            }],
        });
    };
    let lines = Lines::index(tree, manifest, ledger);
    let problems = consistency::consistency_problems(tree, manifest, &lines);
    let planner = Planner {
        tree,
        manifest,
        request,
        context,
        lines,
        problems,
        warnings: Vec::new(),
    };
    match ledger {
        None => planner.fresh_install(),
        Some(snapshot) => planner.upgrade(snapshot),
    }
}

/// One planning pass: its inputs, and the problems and warnings the steps
/// have found so far.
struct Planner<'a> {
    tree: &'a MigrationsTree,
    manifest: &'a Manifest,
    request: &'a PlanRequest,
    context: &'a PlanContext,
    lines: Lines<'a>,
    problems: Vec<Refusal>,
    warnings: Vec<Warning>,
}

impl<'a> Planner<'a> {
    /// Steps 2 to 4, on an existing ledger.
    fn upgrade(mut self, snapshot: &'a LedgerSnapshot) -> Result<Plan, PlanError> {
        self.warnings = snapshot
            .unreadable_keys
            .iter()
            .map(|c| Warning::UnreadableKey {
                key: c.key.clone(),
                reason: c.reason.clone(),
            })
            .collect();
        let mut seeding = Seeding::default();
        self.seed_legacy(snapshot, &mut seeding);
        self.check_corrupt_records(snapshot);
        self.check_retention_floor(&seeding);
        let walk = self.walk(snapshot, &mut seeding);
        if !self.problems.is_empty() {
            return Err(PlanError {
                problems: self.problems,
            });
        }
        tracing::debug!(
            pending = walk.pending.len(),
            seeded = seeding.entries.len(),
            "planned"
        );
        Ok(Plan {
            request: self.request.clone(),
            fresh_install: false,
            seed_mode: SeedMode::IfAbsent,
            seed: seeding.entries,
            pending: walk.pending,
            skipped: walk.skipped,
            checksum_mismatches: walk.checksum_mismatches,
            warnings: self.warnings,
        })
    }
}
