//! The entries a ledger is seeded with, pure functions of the tree (they
//! read no ledger): a fresh install's (every manifest slug
//! `skipped-fresh-install`, CONTRACT.md §6.1) and an adopted numbered
//! cluster's (`legacy`, §6.2). [`crate::Migrator`] writes them; `migrate
//! seed-fresh --render` and `migrate adopt` print them.

use std::collections::BTreeMap;

use crate::entry::{EntryState, LedgerEntry};
use crate::ledger::{LedgerSnapshot, Record};
use crate::plan::{PlanContext, PlanError, PlanRequest, plan};
use crate::slug::Slug;
use crate::tree::MigrationsTree;

/// The entries a fresh install of `tree` seeds, stamped from `context`:
/// every manifest line of either tier (retired and revoked ones included)
/// `skipped-fresh-install` (CONTRACT.md §6.1). Pure: reads no ledger. It is
/// the one definition of a fresh install's ledger: [`Migrator::seed_fresh`](crate::Migrator::seed_fresh)
/// writes it, `migrate seed-fresh --render` prints it for a chart to create
/// at install, so both hold the same entries.
pub fn fresh_install_entries(
    tree: &MigrationsTree,
    context: &PlanContext,
) -> Result<Vec<(Slug, LedgerEntry)>, PlanError> {
    let plan = plan(
        tree,
        None,
        &PlanRequest::tier(crate::header::Tier::PreApply),
        context,
    )?;
    Ok(plan.seed.into_iter().map(|s| (s.slug, s.entry)).collect())
}

/// The entries that adopt an existing cluster of a numbered runner whose
/// ledger said `version` = `legacy_version` (CONTRACT.md §6.2): each
/// `legacy-map` pair `N slug` with N below it, `legacy`. They are exactly
/// what the legacy rule seeds on such a cluster's first run, computed by the
/// same plan (so a tree the first run would refuse refuses here too).
/// Revoked slugs are left to that first run, which seeds them.
///
/// `ran` names, for diverged slots below the version (`others=` lines), the
/// content the cluster ran: each is recorded `legacy`, and this tree's
/// content of a slot whose other content ran is then an ordinary migration
/// that the first run executes. A diverged slot `ran` does not settle makes
/// the plan refuse, as it does on a first run: the integer is never guessed.
pub fn adoption_entries(
    tree: &MigrationsTree,
    legacy_version: u64,
    ran: &[Slug],
    context: &PlanContext,
) -> Result<Vec<(Slug, LedgerEntry)>, AdoptError> {
    // Which content of each diverged slot the cluster ran: the integer
    // cannot say (CONTRACT.md §6.2), so the person adopting it does.
    let mut chosen: BTreeMap<u64, &Slug> = BTreeMap::new();
    let mut ran_entries = Vec::new();
    for slug in ran {
        let pair = tree
            .legacy_map()
            .iter()
            .filter(|p| p.number < legacy_version && !p.others.is_empty())
            .find(|p| &p.slug == slug || p.others.contains(slug))
            .ok_or_else(|| AdoptError::NotDiverged {
                slug: slug.clone(),
                version: legacy_version,
            })?;
        if let Some(first) = chosen.insert(pair.number, slug) {
            return Err(AdoptError::TwoForOneSlot {
                number: pair.number,
                first: first.clone(),
                second: slug.clone(),
            });
        }
        // This tree's content goes into its legacy batch; another line's
        // content is no manifest line and has no batch here.
        let batch = (&pair.slug == slug).then(|| crate::BatchName::legacy().to_string());
        let entry = LedgerEntry {
            batch,
            ..LedgerEntry::new(EntryState::Legacy, context.now)
        };
        ran_entries.push((slug.clone(), entry));
    }
    let snapshot = LedgerSnapshot {
        version: crate::ledger::LegacyVersion::Known(legacy_version),
        records: ran_entries
            .iter()
            .map(|(s, e)| (s.clone(), Record::Entry(Box::new(e.clone()))))
            .collect(),
        ..LedgerSnapshot::default()
    };
    let plan = plan(
        tree,
        Some(&snapshot),
        &PlanRequest::tier(crate::header::Tier::PreApply),
        context,
    )?;
    let mut entries = ran_entries;
    entries.extend(
        plan.seed
            .into_iter()
            .filter(|s| s.kind == crate::plan::SeedKind::Legacy)
            .map(|s| (s.slug, s.entry)),
    );
    // In legacy-map order, as the numbered runner ran them.
    let number = |slug: &Slug| {
        tree.legacy_map()
            .iter()
            .find(|p| &p.slug == slug || p.others.contains(slug))
            .map(|p| p.number)
    };
    entries.sort_by_key(|(slug, _)| number(slug));
    Ok(entries)
}

/// Why [`adoption_entries`] cannot say what an adopted cluster ran.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AdoptError {
    /// The engine's plan for that `version` refuses (a diverged slot no
    /// `--ran` settles, among others).
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// A `--ran` slug that is no content of a diverged slot below `version`.
    #[error(
        "--ran {slug}: not a content of a diverged legacy-map slot (a line with others=) below version {version}"
    )]
    NotDiverged {
        /// The slug given.
        slug: Slug,
        /// The legacy version adopted.
        version: u64,
    },
    /// Two `--ran` slugs of one slot: a cluster ran exactly one of them.
    #[error(
        "--ran {first} and --ran {second} are both contents of legacy slot {number}; a cluster ran exactly one"
    )]
    TwoForOneSlot {
        /// The slot's integer.
        number: u64,
        /// The first slug given for it.
        first: Slug,
        /// The second.
        second: Slug,
    },
}
