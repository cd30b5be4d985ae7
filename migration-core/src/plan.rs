//! Planning: what runs, what is seeded, and what is refused (CONTRACT.md §6).
//!
//! [`plan`] is a pure function of the tree, the ledger snapshot and the
//! request. It performs every check before anything runs and returns either
//! a [`Plan`] (the seeding writes and the pending migrations, in order) or a
//! [`PlanError`] listing every fatal problem. Nothing is written here; the
//! [`crate::migrator::Migrator`] applies a plan's seeding through a ledger.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::path::PathBuf;

use crate::digest::Sha256Digest;
use crate::entry::{EntryState, LedgerEntry};
use crate::header::{OnError, Tier};
use crate::ledger::{LedgerSnapshot, LegacyVersion, Record};
use crate::manifest::{Manifest, Position};
use crate::slug::Slug;
use crate::time::Timestamp;
use crate::tree::{MigrationsTree, Script};

/// Which tier(s) a run covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TierSelection {
    /// One tier.
    One(Tier),
    /// Both tiers (planning and verification; a runner runs one tier).
    All,
}

impl TierSelection {
    /// True when `tier` is selected.
    pub fn includes(self, tier: Tier) -> bool {
        match self {
            TierSelection::One(t) => t == tier,
            TierSelection::All => true,
        }
    }
}

impl fmt::Display for TierSelection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TierSelection::One(t) => t.fmt(f),
            TierSelection::All => f.write_str("all"),
        }
    }
}

/// What the caller asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanRequest {
    /// The tier(s) being run.
    pub tiers: TierSelection,
    /// `ONLY=<slug>`: run exactly this slug, even if recorded.
    pub only: Option<Slug>,
}

impl PlanRequest {
    /// A normal run of one tier.
    pub fn tier(tier: Tier) -> Self {
        PlanRequest {
            tiers: TierSelection::One(tier),
            only: None,
        }
    }
}

/// Facts from outside the tree and the ledger.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanContext {
    /// Timestamp for seeded entries.
    pub now: Timestamp,
    /// The image the run executes from, recorded in seeded entries.
    pub image: Option<String>,
    /// Shebang lines (without `#!`) a script may use, compared exactly.
    pub allowed_interpreters: Vec<String>,
}

impl PlanContext {
    /// The default allowed shebangs: `/bin/sh` and `/bin/bash`.
    pub fn default_interpreters() -> Vec<String> {
        vec!["/bin/sh".to_owned(), "/bin/bash".to_owned()]
    }

    /// A context at `now` with default interpreters and no image.
    pub fn at(now: Timestamp) -> Self {
        PlanContext {
            now,
            image: None,
            allowed_interpreters: Self::default_interpreters(),
        }
    }
}

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
    /// The existing entry, for an `ONLY` re-run (its `attempts` is carried on).
    pub previous: Option<LedgerEntry>,
    /// Slugs it requires (all placed before it).
    pub requires: Vec<Slug>,
    /// Requirements already known to be unmet: the migration must not run,
    /// and the runner treats it as failed under its `on-error` policy.
    pub unmet: Vec<(Slug, Unmet)>,
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

/// A recorded slug whose script changed on disk since it was recorded. It is
/// never re-run; this is reported so that somebody looks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChecksumMismatch {
    /// The slug.
    pub slug: Slug,
    /// The checksum in the ledger.
    pub recorded: Sha256Digest,
    /// The checksum on disk.
    pub on_disk: Sha256Digest,
}

/// Something worth telling a person that does not stop the run.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Warning {
    /// A ledger key `m.<x>` whose remainder is not a slug.
    UnreadableKey {
        /// The key.
        key: String,
        /// Why.
        reason: String,
    },
    /// A corrupt record for a slug this run does not act on.
    CorruptOffPath {
        /// The ledger key.
        key: String,
        /// Why it is corrupt.
        reason: String,
    },
    /// The `version` key is not an integer, and there is no legacy map, so it
    /// does not matter for this run.
    CorruptVersionIgnored {
        /// The stored value.
        raw: String,
    },
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Warning::UnreadableKey { key, reason } => {
                write!(f, "ledger key '{key}' is ignored: {reason}")
            }
            Warning::CorruptOffPath { key, reason } => {
                write!(
                    f,
                    "ledger key '{key}' is corrupt ({reason}); this run does not act on it"
                )
            }
            Warning::CorruptVersionIgnored { raw } => {
                write!(
                    f,
                    "ledger 'version' value {raw:?} is not an integer (ignored: the tree has no legacy-map)"
                )
            }
        }
    }
}

/// A fatal condition: the plan refuses and nothing runs.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Refusal {
    /// `order.d/` has not been generated.
    #[error("no manifest: {root}/order.d does not exist (generate it with 'migrate manifest')")]
    NoManifest {
        /// The tree root.
        root: String,
    },
    /// A script on disk that no batch lists (the manifest is stale).
    #[error("{path}: slug '{slug}' is on disk but in no manifest batch (regenerate order.d)")]
    NotInManifest {
        /// The slug.
        slug: Slug,
        /// Its path.
        path: String,
    },
    /// A manifest slug, not retired, whose script is absent.
    #[error(
        "manifest {batch} lists '{slug}' but its script is absent (and the line is not 'retired')"
    )]
    ScriptMissing {
        /// The slug.
        slug: Slug,
        /// Its batch.
        batch: String,
    },
    /// A manifest line flagged retired whose script is present.
    #[error(
        "manifest {batch} flags '{slug}' retired but its script is on disk (regenerate order.d)"
    )]
    RetiredButPresent {
        /// The slug.
        slug: Slug,
        /// Its batch.
        batch: String,
    },
    /// A legacy-map slug the manifest does not list.
    #[error("legacy-map line {line} maps {number} to '{slug}', which is in no manifest batch")]
    LegacyNotInManifest {
        /// The slug.
        slug: Slug,
        /// The integer.
        number: u64,
        /// Line in legacy-map.
        line: usize,
    },
    /// A revoked slug the manifest does not list: probably a typo.
    #[error("revoked line {line}: '{slug}' is in no manifest batch")]
    RevokedNotInManifest {
        /// The slug.
        slug: Slug,
        /// Line in `revoked`.
        line: usize,
    },
    /// An unreadable record on the path of this run.
    #[error(
        "ledger key '{key}' is corrupt ({reason}); refusing to act on '{slug}' (repair or remove the key by hand)"
    )]
    CorruptEntry {
        /// The slug.
        slug: Slug,
        /// The ledger key.
        key: String,
        /// Why it is corrupt.
        reason: String,
    },
    /// The `version` key is not an integer, so legacy seeding cannot be decided.
    #[error(
        "ledger 'version' value {raw:?} is not an integer; cannot decide which legacy migrations ran"
    )]
    CorruptVersion {
        /// The stored value.
        raw: String,
    },
    /// A retired slug this cluster never recorded: the cluster skipped the
    /// release window in which the script existed.
    #[error(
        "'{slug}' was retired but this cluster has no entry for it; upgrade through {release} (which still ships the script) first"
    )]
    RetentionFloor {
        /// The slug.
        slug: Slug,
        /// The release (batch label) that first shipped it.
        release: String,
    },
    /// A script whose shebang is not an allowed shell.
    #[error("{path}: shebang '#!{shebang}' is not an allowed interpreter (allowed: {allowed})")]
    InterpreterNotAllowed {
        /// The slug.
        slug: Slug,
        /// Its path.
        path: String,
        /// Its shebang.
        shebang: String,
        /// The allowed list.
        allowed: String,
    },
    /// A `requires` target placed after its dependent.
    #[error("'{slug}' requires '{target}', which the manifest places after it (in {target_batch})")]
    RequiresLater {
        /// The dependent.
        slug: Slug,
        /// The target.
        target: Slug,
        /// The target's batch.
        target_batch: String,
    },
    /// A `requires` target not in the manifest.
    #[error("'{slug}' requires '{target}', which is in no manifest batch")]
    RequiresUnknown {
        /// The dependent.
        slug: Slug,
        /// The target.
        target: Slug,
    },
    /// `ONLY` on a cluster with no ledger.
    #[error(
        "ONLY={slug}: the ledger does not exist yet; run without ONLY first (a fresh install seeds it)"
    )]
    OnlyWithoutLedger {
        /// The slug.
        slug: Slug,
    },
    /// `ONLY` naming a slug with no script on disk.
    #[error("ONLY={slug}: no script with that slug is in the tree{}", if *retired { " (it is retired)" } else { "" })]
    OnlyNotInTree {
        /// The slug.
        slug: Slug,
        /// It is a retired manifest slug.
        retired: bool,
    },
    /// `ONLY` naming a revoked slug.
    #[error("ONLY={slug}: the slug is revoked and must never run")]
    OnlyRevoked {
        /// The slug.
        slug: Slug,
    },
    /// `ONLY` naming a slug of the other tier.
    #[error("ONLY={slug}: the slug is in the {actual} tier, not {requested}")]
    OnlyWrongTier {
        /// The slug.
        slug: Slug,
        /// Its tier.
        actual: Tier,
        /// The tier requested.
        requested: Tier,
    },
}

/// The plan refused: every fatal problem found, nothing ran or was written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("refusing to run: {} problem(s):\n{}", problems.len(), problems.iter().map(|p| format!("  {p}")).collect::<Vec<_>>().join("\n"))]
pub struct PlanError {
    /// Every fatal problem.
    pub problems: Vec<Refusal>,
}

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
    let mut problems = consistency_problems(tree, manifest, &lines);

    let Some(snapshot) = ledger else {
        // Step 1, fresh install: seed everything, run nothing.
        if let Some(slug) = &request.only {
            problems.push(Refusal::OnlyWithoutLedger { slug: slug.clone() });
        }
        if !problems.is_empty() {
            return Err(PlanError { problems });
        }
        let seed = manifest
            .iter()
            .zip(&lines.scripts)
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
            entries = manifest.len(),
            "fresh install: seeding every manifest slug"
        );
        return Ok(Plan {
            request: request.clone(),
            fresh_install: true,
            seed_mode: SeedMode::Create,
            seed,
            pending: Vec::new(),
            skipped: Vec::new(),
            checksum_mismatches: Vec::new(),
            warnings: Vec::new(),
        });
    };

    let mut warnings: Vec<Warning> = snapshot
        .unreadable_keys
        .iter()
        .map(|c| Warning::UnreadableKey {
            key: c.key.clone(),
            reason: c.reason.clone(),
        })
        .collect();
    let mut seed: Vec<SeedEntry> = Vec::new();
    // What the ledger will hold once the seeds are written.
    let mut seeded: HashMap<&Slug, EntryState> = HashMap::new();

    // Step 2, legacy seeding: per key, only where absent.
    match &snapshot.version {
        LegacyVersion::Known(version) => {
            for pair in tree.legacy_map().iter().filter(|p| p.number < *version) {
                if snapshot.record(&pair.slug).is_none() {
                    let batch = manifest.lookup(&pair.slug).map(|(b, _)| b.name.to_string());
                    seed.push(SeedEntry {
                        slug: pair.slug.clone(),
                        kind: SeedKind::Legacy,
                        entry: LedgerEntry {
                            batch,
                            ..LedgerEntry::new(EntryState::Legacy, context.now)
                        },
                    });
                    seeded.insert(&pair.slug, EntryState::Legacy);
                }
            }
        }
        LegacyVersion::Corrupt { raw } if !tree.legacy_map().is_empty() => {
            problems.push(Refusal::CorruptVersion { raw: raw.clone() });
        }
        LegacyVersion::Corrupt { raw } => {
            warnings.push(Warning::CorruptVersionIgnored { raw: raw.clone() })
        }
        LegacyVersion::Absent => {}
    }

    // Which slugs this run acts on: a corrupt record there is fatal.
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
            problems.push(Refusal::CorruptEntry {
                slug: slug.clone(),
                key: corrupt.key.clone(),
                reason: corrupt.reason.clone(),
            });
        } else {
            warnings.push(Warning::CorruptOffPath {
                key: corrupt.key.clone(),
                reason: corrupt.reason.clone(),
            });
        }
    }

    // Step 3, retention floor.
    for (i, (batch, line)) in manifest.iter().enumerate() {
        // A retired line whose script is present is a stale manifest, refused above.
        if line.retired
            && lines.scripts[i].is_none()
            && !lines.revoked[i]
            && lines.records[i].is_none()
            && !seeded.contains_key(&line.slug)
        {
            let release = if batch.name.is_legacy() {
                "a release that still ships this legacy script".to_owned()
            } else {
                batch.name.label().to_owned()
            };
            problems.push(Refusal::RetentionFloor {
                slug: line.slug.clone(),
                release,
            });
        }
    }

    // Step 4, the walk.
    let mut pending = Vec::new();
    let mut skipped = Vec::new();
    let mut checksum_mismatches = Vec::new();
    let mut pending_ahead: HashSet<&Slug> = HashSet::new();
    for (i, (batch, line)) in manifest.iter().enumerate() {
        let slug = &line.slug;
        let record = lines.records[i];
        let script = lines.scripts[i];
        if let (Some(Record::Entry(entry)), Some(script)) = (record, script)
            && let Some(recorded) = entry.sha256.filter(|r| *r != script.sha256)
        {
            checksum_mismatches.push(ChecksumMismatch {
                slug: slug.clone(),
                recorded,
                on_disk: script.sha256,
            });
        }
        if request.only.as_ref().is_some_and(|only| only != slug) {
            continue;
        }
        let is_only = request.only.as_ref() == Some(slug);
        if lines.revoked[i] {
            if record.is_none() && !seeded.contains_key(slug) {
                seed.push(SeedEntry {
                    slug: slug.clone(),
                    kind: SeedKind::Revoked,
                    entry: LedgerEntry {
                        batch: Some(batch.name.to_string()),
                        ..LedgerEntry::new(EntryState::Revoked, context.now)
                    },
                });
                seeded.insert(slug, EntryState::Revoked);
            }
            if is_only {
                problems.push(Refusal::OnlyRevoked { slug: slug.clone() });
            }
            skipped.push(Skipped {
                slug: slug.clone(),
                reason: SkipReason::Revoked,
            });
            continue;
        }
        let recorded_state = match record {
            Some(Record::Entry(e)) => Some(e.state),
            Some(Record::Corrupt(_)) => continue, // already refused or warned above
            None => seeded.get(slug).copied(),
        };
        if let (Some(state), false) = (recorded_state, is_only) {
            skipped.push(Skipped {
                slug: slug.clone(),
                reason: SkipReason::Recorded(state),
            });
            continue;
        }
        let Some(script) = script else {
            if is_only {
                problems.push(Refusal::OnlyNotInTree {
                    slug: slug.clone(),
                    retired: line.retired,
                });
            }
            skipped.push(Skipped {
                slug: slug.clone(),
                reason: SkipReason::Retired,
            });
            continue;
        };
        if !request.tiers.includes(script.tier) {
            match (is_only, request.tiers) {
                (true, TierSelection::One(requested)) => problems.push(Refusal::OnlyWrongTier {
                    slug: slug.clone(),
                    actual: script.tier,
                    requested,
                }),
                _ => skipped.push(Skipped {
                    slug: slug.clone(),
                    reason: SkipReason::OtherTier(script.tier),
                }),
            }
            continue;
        }
        if !context
            .allowed_interpreters
            .contains(&script.header.shebang)
        {
            problems.push(Refusal::InterpreterNotAllowed {
                slug: slug.clone(),
                path: script.relative_path.display().to_string(),
                shebang: script.header.shebang.clone(),
                allowed: context.allowed_interpreters.join(", "),
            });
        }
        let here = manifest
            .position(slug)
            .unwrap_or(Position { batch: 0, index: 0 });
        let mut unmet = Vec::new();
        for req in &script.header.requires {
            let target = &req.target;
            match manifest.lookup(target) {
                None => problems.push(Refusal::RequiresUnknown {
                    slug: slug.clone(),
                    target: target.clone(),
                }),
                Some((target_batch, _)) if manifest.position(target).is_some_and(|p| p > here) => {
                    problems.push(Refusal::RequiresLater {
                        slug: slug.clone(),
                        target: target.clone(),
                        target_batch: target_batch.name.to_string(),
                    });
                }
                Some(_) => {
                    if let Some(why) =
                        unmet_requirement(tree, snapshot, &seeded, &pending_ahead, target)
                    {
                        unmet.push((target.clone(), why));
                    }
                }
            }
        }
        pending_ahead.insert(slug);
        pending.push(PendingMigration {
            slug: slug.clone(),
            tier: script.tier,
            on_error: script.header.on_error,
            batch: batch.name.to_string(),
            sha256: script.sha256,
            relative_path: script.relative_path.clone(),
            previous: record.and_then(Record::entry).cloned(),
            requires: script
                .header
                .requires
                .iter()
                .map(|r| r.target.clone())
                .collect(),
            unmet,
        });
    }
    if let Some(only) = &request.only
        && manifest.position(only).is_none()
        && tree.script(only).is_none()
    {
        problems.push(Refusal::OnlyNotInTree {
            slug: only.clone(),
            retired: false,
        });
    }

    if !problems.is_empty() {
        return Err(PlanError { problems });
    }
    tracing::debug!(pending = pending.len(), seeded = seed.len(), "planned");
    Ok(Plan {
        request: request.clone(),
        fresh_install: false,
        seed_mode: SeedMode::IfAbsent,
        seed,
        pending,
        skipped,
        checksum_mismatches,
        warnings,
    })
}

/// Whether a requirement that sits earlier in the manifest is unmet.
fn unmet_requirement(
    tree: &MigrationsTree,
    snapshot: &LedgerSnapshot,
    seeded: &HashMap<&Slug, EntryState>,
    pending_ahead: &HashSet<&Slug>,
    target: &Slug,
) -> Option<Unmet> {
    let state = snapshot
        .entry(target)
        .map(|e| e.state)
        .or_else(|| seeded.get(target).copied());
    match state {
        Some(state) if state.satisfies_requirement() => None,
        Some(EntryState::Revoked) => Some(Unmet::Revoked),
        Some(state) => Some(Unmet::Recorded(state)),
        None if pending_ahead.contains(target) => None,
        None if tree.is_revoked(target) => Some(Unmet::Revoked),
        // A retired target without entry is refused by the retention floor;
        // a corrupt one by the corrupt-entry check. What is left is a target
        // of the other tier that has not run.
        None => tree.script(target).map(|s| Unmet::NotRun(s.tier)),
    }
}

/// What the tree and the ledger hold for each manifest line, by the line's
/// index in manifest order.
///
/// Built once with one hash lookup per script, record and revoked slug, so
/// that the walks over the manifest read these vectors in order instead of
/// searching the tree's and the snapshot's sorted maps for every line (which
/// made planning grow as N log N with a cache miss per level).
struct Lines<'a> {
    /// The script on disk, if any.
    scripts: Vec<Option<&'a Script>>,
    /// The ledger record, if any (always `None` without a ledger).
    records: Vec<Option<&'a Record>>,
    /// The slug is listed in `revoked`.
    revoked: Vec<bool>,
    /// Scripts on disk that no manifest line lists, in slug order.
    unlisted: Vec<&'a Script>,
}

impl<'a> Lines<'a> {
    fn index(
        tree: &'a MigrationsTree,
        manifest: &Manifest,
        ledger: Option<&'a LedgerSnapshot>,
    ) -> Self {
        let mut offsets = Vec::with_capacity(manifest.batches().len());
        let mut total = 0;
        for batch in manifest.batches() {
            offsets.push(total);
            total += batch.entries.len();
        }
        let line_of = |slug: &Slug| manifest.position(slug).map(|p| offsets[p.batch] + p.index);
        let mut lines = Lines {
            scripts: vec![None; total],
            records: vec![None; total],
            revoked: vec![false; total],
            unlisted: Vec::new(),
        };
        // Scripts and records are both sorted by slug: walk them together,
        // so that a slug with both costs one lookup, not two.
        let mut scripts = tree.scripts().iter().peekable();
        let mut records = ledger
            .into_iter()
            .flat_map(|snapshot| snapshot.records.iter())
            .peekable();
        loop {
            let (slug, script, record) = match (scripts.peek(), records.peek()) {
                (None, None) => break,
                (Some((s, _)), Some((r, _))) if s == r => {
                    let (slug, script) = scripts.next().unzip();
                    let record = records.next().map(|(_, record)| record);
                    (slug, script, record)
                }
                (Some((s, _)), Some((r, _))) if r < s => {
                    let (slug, record) = records.next().unzip();
                    (slug, None, record)
                }
                (Some(_), _) => {
                    let (slug, script) = scripts.next().unzip();
                    (slug, script, None)
                }
                (None, Some(_)) => {
                    let (slug, record) = records.next().unzip();
                    (slug, None, record)
                }
            };
            let Some(slug) = slug else { break };
            match line_of(slug) {
                Some(i) => {
                    lines.scripts[i] = script;
                    lines.records[i] = record;
                }
                None => lines.unlisted.extend(script),
            }
        }
        for revoked in tree.revoked() {
            if let Some(i) = line_of(&revoked.slug) {
                lines.revoked[i] = true;
            }
        }
        lines
    }
}

/// Tree-versus-manifest checks that hold for every kind of run.
fn consistency_problems(
    tree: &MigrationsTree,
    manifest: &Manifest,
    lines: &Lines<'_>,
) -> Vec<Refusal> {
    let mut problems = Vec::new();
    for script in &lines.unlisted {
        problems.push(Refusal::NotInManifest {
            slug: script.slug.clone(),
            path: script.relative_path.display().to_string(),
        });
    }
    for (i, (batch, line)) in manifest.iter().enumerate() {
        match (line.retired, lines.scripts[i].is_some()) {
            (false, false) => problems.push(Refusal::ScriptMissing {
                slug: line.slug.clone(),
                batch: batch.name.to_string(),
            }),
            (true, true) => problems.push(Refusal::RetiredButPresent {
                slug: line.slug.clone(),
                batch: batch.name.to_string(),
            }),
            _ => {}
        }
    }
    for pair in tree.legacy_map() {
        if manifest.position(&pair.slug).is_none() {
            problems.push(Refusal::LegacyNotInManifest {
                slug: pair.slug.clone(),
                number: pair.number,
                line: pair.line,
            });
        }
    }
    for revoked in tree.revoked() {
        if manifest.position(&revoked.slug).is_none() {
            problems.push(Refusal::RevokedNotInManifest {
                slug: revoked.slug.clone(),
                line: revoked.line,
            });
        }
    }
    problems
}
