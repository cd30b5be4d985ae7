//! Seeding: the entries a plan writes before anything runs. A fresh install
//! seeds every manifest slug (step 1); an upgrade seeds the legacy slugs
//! below the ledger's integer (step 2) and, during the walk, revoked slugs
//! that never ran here.

use std::collections::{BTreeMap, HashMap};

use super::{Plan, PlanError, Planner, Refusal, Warning};
use crate::entry::{EntryState, LedgerEntry};
use crate::ledger::{LedgerSnapshot, LegacyVersion, Record};
use crate::slug::Slug;

/// How the seeding entries of a plan are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SeedMode {
    /// Fresh install: create the ledger object with all of them in one write.
    Create,
    /// Existing ledger: write those still absent, never overwriting.
    IfAbsent,
}

/// Why a seeded entry is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SeedKind {
    /// Fresh install (`skipped-fresh-install`).
    FreshInstall,
    /// Below the legacy integer (`legacy`).
    Legacy,
    /// Revoked before it ran here (`revoked`).
    Revoked,
}

/// One entry the plan writes before anything runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeedEntry {
    /// The slug.
    pub slug: Slug,
    /// Why.
    pub kind: SeedKind,
    /// The entry to write.
    pub entry: LedgerEntry,
}

/// The seeding entries planned so far, and the state each gives its slug:
/// later steps must see what the ledger will hold once they are written.
#[derive(Debug, Default)]
pub(super) struct Seeding<'a> {
    /// The entries, in the order they were planned.
    pub(super) entries: Vec<SeedEntry>,
    states: HashMap<&'a Slug, EntryState>,
    /// Diverged legacy slots whose content that ran here is unknown: this
    /// tree's content runs, and its entry says why (CONTRACT.md §6.2).
    pub(super) reruns: BTreeMap<Slug, String>,
}

impl<'a> Seeding<'a> {
    /// Plans one seeding write for `slug`.
    pub(super) fn add(&mut self, slug: &'a Slug, kind: SeedKind, entry: LedgerEntry) {
        self.states.insert(slug, entry.state);
        self.entries.push(SeedEntry {
            slug: slug.clone(),
            kind,
            entry,
        });
    }

    /// The state seeding gives `slug`, if it seeds it.
    pub(super) fn state(&self, slug: &Slug) -> Option<EntryState> {
        self.states.get(slug).copied()
    }

    /// True when seeding writes an entry for `slug`.
    pub(super) fn contains(&self, slug: &Slug) -> bool {
        self.states.contains_key(slug)
    }
}

impl<'a> Planner<'a> {
    /// Step 1, fresh install: seed everything, run nothing.
    pub(super) fn fresh_install(mut self) -> Result<Plan, PlanError> {
        if let Some(slug) = &self.request.only {
            self.problems
                .push(Refusal::OnlyWithoutLedger { slug: slug.clone() });
        }
        if !self.problems.is_empty() {
            return Err(PlanError {
                problems: self.problems,
            });
        }
        let (tree, context) = (self.tree, self.context);
        let seed = self
            .manifest
            .iter()
            .zip(&self.lines.scripts)
            .map(|((batch, line), script)| SeedEntry {
                slug: line.slug.clone(),
                kind: SeedKind::FreshInstall,
                entry: LedgerEntry {
                    sha256: script.map(|s| s.sha256),
                    lib_sha256: Some(tree.lib_sha256()),
                    batch: Some(batch.name.to_string()),
                    image: context.image.clone(),
                    ..LedgerEntry::new(EntryState::SkippedFreshInstall, context.now)
                },
            })
            .collect();
        tracing::debug!(
            entries = self.manifest.len(),
            "fresh install: seeding every manifest slug"
        );
        Ok(Plan {
            request: self.request.clone(),
            fresh_install: true,
            seed_mode: SeedMode::Create,
            seed,
            pending: Vec::new(),
            skipped: Vec::new(),
            checksum_mismatches: Vec::new(),
            warnings: Vec::new(),
        })
    }

    /// Step 2, legacy seeding: per key, only where absent.
    pub(super) fn seed_legacy(&mut self, snapshot: &LedgerSnapshot, seeding: &mut Seeding<'a>) {
        let tree = self.tree;
        match &snapshot.version {
            LegacyVersion::Known(version) => {
                for pair in tree.legacy_map().iter().filter(|p| p.number < *version) {
                    if snapshot.record(&pair.slug).is_some() {
                        continue;
                    }
                    if !pair.others.is_empty() {
                        // A diverged slot: the integer says one of these ran,
                        // not which (CONTRACT.md §6.2). A record of another
                        // content settles it, and this tree's content is then
                        // an ordinary migration. With no record, this tree's
                        // content runs too: it ran already or it did not, and
                        // every migration is safe to run twice (§7.6), so
                        // nobody has to answer what nobody knows. Only a slot
                        // marked unsafe to repeat is refused, never guessed.
                        // Only a `legacy` record says what the numbered
                        // runner ran at the integer; another content the
                        // engine ran (a rerun on another line) says nothing
                        // about it.
                        let other_ran = pair.others.iter().any(|o| {
                            matches!(snapshot.record(o), Some(Record::Entry(e)) if e.state == EntryState::Legacy)
                        });
                        if other_ran {
                            continue;
                        }
                        if pair.unsafe_to_repeat {
                            self.problems.push(Refusal::DivergedLegacySlot {
                                number: pair.number,
                                version: *version,
                                slug: pair.slug.clone(),
                                others: pair.others.clone(),
                            });
                        } else {
                            let why = rerun_reason(pair.number, *version, &pair.slug, &pair.others);
                            self.warnings.push(Warning::DivergedLegacyRerun {
                                slug: pair.slug.clone(),
                                reason: why.clone(),
                            });
                            seeding.reruns.insert(pair.slug.clone(), why);
                        }
                        continue;
                    }
                    let batch = self
                        .manifest
                        .lookup(&pair.slug)
                        .map(|(b, _)| b.name.to_string());
                    let entry = LedgerEntry {
                        batch,
                        ..LedgerEntry::new(EntryState::Legacy, self.context.now)
                    };
                    seeding.add(&pair.slug, SeedKind::Legacy, entry);
                }
            }
            LegacyVersion::Corrupt { raw } if !tree.legacy_map().is_empty() => {
                self.problems
                    .push(Refusal::CorruptVersion { raw: raw.clone() });
            }
            LegacyVersion::Corrupt { raw } => self
                .warnings
                .push(Warning::CorruptVersionIgnored { raw: raw.clone() }),
            LegacyVersion::Absent => {}
        }
    }
}

/// What the entry of a diverged slot's content run without knowing which
/// content ran says: the machine-readable [`DIVERGED_RERUN`] and why.
pub(super) fn rerun_reason(number: u64, version: u64, slug: &Slug, others: &[Slug]) -> String {
    let others: Vec<&str> = others.iter().map(Slug::as_str).collect();
    format!(
        "{DIVERGED_RERUN}: ledger 'version' {version} says integer {number} ran, not which of its contents ({slug}, {}); none is recorded here, so this tree's content '{slug}' runs, again if it was the one (every migration is safe to run twice, CONTRACT.md 7.6)",
        others.join(", ")
    )
}

/// The word that starts the message of an entry whose content may have run
/// before under a numbered runner (`rerun_reason`).
pub const DIVERGED_RERUN: &str = "diverged-legacy-rerun";
