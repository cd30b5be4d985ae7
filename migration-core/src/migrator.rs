//! The policy layer over a [`Ledger`]: read, plan, seed, record, reconcile.
//!
//! Backends only store; everything that decides lives here, once, so the
//! hook runner and the operator share one behaviour.

use crate::entry::LedgerEntry;
use crate::ledger::{Ledger, LedgerError, LedgerSnapshot, Usage, WriteMode};
use crate::plan::{Plan, PlanContext, PlanError, PlanRequest, SeedMode, plan};
use crate::slug::Slug;
use crate::step::{StepMode, StepReport, StepWrite};
use crate::time::Clock;
use crate::tree::MigrationsTree;

use crate::seeding::fresh_install_entries;

/// How many times preparation plans again after the ledger appeared under
/// it (another runner's fresh install won the race). Each round re-reads.
pub const PREPARE_ROUNDS: u32 = 3;

/// What went wrong while preparing or recording.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MigrateError {
    /// The plan refused; nothing ran and nothing was written.
    #[error(transparent)]
    Refused(#[from] PlanError),
    /// The ledger failed.
    #[error(transparent)]
    Ledger(#[from] LedgerError),
    /// Fresh-install seeding was asked for, but the ledger exists: seeding
    /// is only for a new cluster and never touches an existing ledger.
    #[error(
        "{ledger}: the ledger already exists; fresh-install seeding is only for a new cluster and never overwrites"
    )]
    Exists {
        /// The ledger.
        ledger: String,
    },
    /// No ledger exists, and the caller required one
    /// ([`Migrator::with_require_existing_ledger`]): the run is not treated
    /// as a fresh install, which would record every manifest slug
    /// `skipped-fresh-install` and run nothing (CONTRACT.md §6.1).
    #[error(
        "{ledger}: no ledger exists, and this run may not treat that as a fresh install (which would record every manifest slug skipped-fresh-install and run nothing); if this cluster ran migrations before, its ledger was deleted or the ledger spec names the wrong path or object: fix the spec or restore the ledger (`migrate adopt` creates it for a cluster of a numbered runner); if this is a new cluster, pass --fresh-install (MIGRATE_FRESH_INSTALL=true) or seed it with `migrate seed-fresh`"
    )]
    Absent {
        /// The ledger.
        ledger: String,
    },
    /// The ledger cannot hold the largest record the next migration can
    /// produce; it was not executed (its outcome could not be recorded, and
    /// the next run would execute it again).
    #[error(
        "{ledger}: no room to record '{slug}' before running it: its attempt mark and an entry with a full failure message need up to {need_bytes} bytes, but only {free_bytes} of the {budget_bytes}-byte budget are free ({entry_count} entries fill it); free room (retire old entries, or a larger-budget backend) and run again"
    )]
    NoRoom {
        /// The ledger.
        ledger: String,
        /// The migration that was not executed.
        slug: Slug,
        /// Bytes reserved for its records.
        need_bytes: u64,
        /// Bytes free in the budget.
        free_bytes: u64,
        /// The budget.
        budget_bytes: u64,
        /// Entries stored.
        entry_count: usize,
    },
    /// A record could not be confirmed: the write reported an error and the
    /// ledger now holds something other than what was written.
    #[error(
        "{ledger}: recording '{slug}' failed ({cause}) and the ledger does not hold the intended entry"
    )]
    Unconfirmed {
        /// The ledger.
        ledger: String,
        /// The slug.
        slug: Slug,
        /// The write error.
        cause: LedgerError,
    },
}

/// A plan whose seeding has been written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prepared {
    /// The plan (its `pending` list is what runs).
    pub plan: Plan,
    /// Slugs this call's seeding actually wrote.
    pub written: Vec<Slug>,
    /// How full the ledger was when planned, plus what the seeding wrote
    /// (`None` when the backend has no budget, or on a fresh install).
    pub usage: Option<Usage>,
    /// The ledger's revision the plan holds for, seeding included (`None`
    /// when unknown): the run lock in the ledger object is taken on it.
    pub revision: Option<String>,
}

/// Reads, plans and writes through one ledger for one tree.
#[derive(Debug)]
pub struct Migrator<'a> {
    tree: &'a MigrationsTree,
    ledger: &'a dyn Ledger,
    clock: &'a dyn Clock,
    image: Option<String>,
    allowed_interpreters: Vec<String>,
    require_existing: bool,
}

impl<'a> Migrator<'a> {
    /// A migrator over `tree` and `ledger`, stamping times from `clock`.
    pub fn new(tree: &'a MigrationsTree, ledger: &'a dyn Ledger, clock: &'a dyn Clock) -> Self {
        Migrator {
            tree,
            ledger,
            clock,
            image: None,
            allowed_interpreters: PlanContext::default_interpreters(),
            require_existing: false,
        }
    }

    /// With `true`, [`Self::plan`] and [`Self::prepare`] refuse with
    /// [`MigrateError::Absent`] when no ledger exists, instead of planning a
    /// fresh install: for callers that know the cluster's ledger was created
    /// at install (a chart's upgrade hook, the operator's Jobs), where an
    /// absent ledger means it was deleted or misnamed (CONTRACT.md §6.1).
    pub fn with_require_existing_ledger(mut self, require: bool) -> Self {
        self.require_existing = require;
        self
    }

    /// Records `image` as the image migrations run from.
    pub fn with_image(mut self, image: Option<String>) -> Self {
        self.image = image;
        self
    }

    /// Replaces the allowed shebang lines.
    pub fn with_allowed_interpreters(mut self, allowed: Vec<String>) -> Self {
        self.allowed_interpreters = allowed;
        self
    }

    /// The tree.
    pub fn tree(&self) -> &MigrationsTree {
        self.tree
    }

    /// The ledger.
    pub fn ledger(&self) -> &dyn Ledger {
        self.ledger
    }

    /// The plan context at the current time.
    pub fn context(&self) -> PlanContext {
        PlanContext {
            now: self.clock.now().truncated(),
            image: self.image.clone(),
            allowed_interpreters: self.allowed_interpreters.clone(),
        }
    }

    /// Reads the ledger. Transient errors were already retried by the
    /// backend; what reaches here is final.
    pub async fn read(&self) -> Result<Option<LedgerSnapshot>, LedgerError> {
        self.ledger.read().await
    }

    /// Reads the ledger for planning: an absent ledger is an error when one
    /// is required.
    async fn read_for_plan(&self) -> Result<Option<LedgerSnapshot>, MigrateError> {
        let snapshot = self.read().await?;
        self.check_exists(snapshot.as_ref())?;
        Ok(snapshot)
    }

    /// Refuses a `snapshot` that says no ledger exists where one is required.
    fn check_exists(&self, snapshot: Option<&LedgerSnapshot>) -> Result<(), MigrateError> {
        if snapshot.is_none() && self.require_existing {
            return Err(MigrateError::Absent {
                ledger: self.ledger.describe(),
            });
        }
        Ok(())
    }

    /// Reads the ledger and plans, writing nothing (a dry run).
    pub async fn plan(&self, request: &PlanRequest) -> Result<Plan, MigrateError> {
        let snapshot = self.read_for_plan().await?;
        Ok(plan(
            self.tree,
            snapshot.as_ref(),
            request,
            &self.context(),
        )?)
    }

    /// [`Self::plan`] against a snapshot the caller has read itself
    /// ([`Self::read`], or the ledger's `read` before the tree was loaded),
    /// for a caller that needs the snapshot too: one read, not two.
    pub fn plan_snapshot(
        &self,
        snapshot: Option<&LedgerSnapshot>,
        request: &PlanRequest,
    ) -> Result<Plan, MigrateError> {
        self.check_exists(snapshot)?;
        Ok(plan(self.tree, snapshot, request, &self.context())?)
    }

    /// Reads the ledger, plans, and writes the plan's seeding (fresh-install
    /// creation, legacy and revoked entries) before anything runs.
    ///
    /// A fresh-install creation that loses a race to another creator, or
    /// whose reply was lost, is re-planned against the ledger that now
    /// exists, so nothing is overwritten and nothing is seeded twice.
    pub async fn prepare(&self, request: &PlanRequest) -> Result<Prepared, MigrateError> {
        self.prepare_after(None, request).await
    }

    /// [`Self::prepare`] whose first round plans on `read`, the ledger as
    /// the caller read it itself (`Some(None)`: no ledger object), instead
    /// of reading again; later rounds read. The run lock is taken on the
    /// revision the plan holds for, so an earlier read is as good as one
    /// made now.
    pub async fn prepare_after(
        &self,
        mut read: Option<Option<&LedgerSnapshot>>,
        request: &PlanRequest,
    ) -> Result<Prepared, MigrateError> {
        for attempt in 1..=PREPARE_ROUNDS {
            let read_now;
            let snapshot = match read.take() {
                Some(snapshot) => {
                    self.check_exists(snapshot)?;
                    snapshot
                }
                None => {
                    read_now = self.read_for_plan().await?;
                    read_now.as_ref()
                }
            };
            let plan = plan(self.tree, snapshot, request, &self.context())?;
            // A fresh install creates the ledger even when there is nothing
            // to seed: otherwise the next run would be "fresh" again and
            // record the first new migration as skipped instead of running it.
            let usage = snapshot.and_then(|s| s.usage);
            let revision = snapshot.and_then(|s| s.revision.clone());
            if plan.seed.is_empty() && !plan.fresh_install {
                return Ok(Prepared {
                    plan,
                    written: Vec::new(),
                    usage,
                    revision,
                });
            }
            let entries: Vec<(Slug, LedgerEntry)> = plan
                .seed
                .iter()
                .map(|s| (s.slug.clone(), s.entry.clone()))
                .collect();
            let result = match plan.seed_mode {
                SeedMode::Create => self
                    .ledger
                    .create(&entries)
                    .await
                    .map(|()| (entries.iter().map(|e| e.0.clone()).collect(), None)),
                SeedMode::IfAbsent => self
                    .ledger
                    .write(&entries, WriteMode::OnlyIfAbsent)
                    .await
                    .map(|report| (report.written, report.revision)),
            };
            match result {
                Ok((written, revision)) => {
                    tracing::info!(
                        written = written.len(),
                        fresh_install = plan.fresh_install,
                        "seeded ledger"
                    );
                    let usage = usage.map(|mut u| {
                        let mut sizes = crate::entry::StoredSize::default();
                        for (slug, entry) in entries.iter().filter(|(s, _)| written.contains(s)) {
                            u.used_bytes += sizes.count(slug, entry, u.record_overhead_bytes);
                        }
                        u
                    });
                    return Ok(Prepared {
                        plan,
                        written,
                        usage,
                        revision,
                    });
                }
                // Someone else created it: plan again against their ledger.
                Err(LedgerError::AlreadyExists { .. }) => {
                    tracing::info!(attempt, "ledger appeared during fresh install; re-planning");
                }
                // The backend gave up retrying, but the write may have taken
                // effect with its reply lost: re-read once and plan again,
                // which is safe because seeding never overwrites. If seeding
                // is still to do, the error stands (no retry on top of the
                // backend's).
                Err(e) if e.is_transient() => {
                    tracing::warn!(error = %e, "seeding write failed; re-reading the ledger");
                    let snapshot = self.read().await?;
                    let again = plan_again(self, snapshot.as_ref(), request)?;
                    if again.seed.is_empty() && !again.fresh_install {
                        return Ok(Prepared {
                            plan: again,
                            written: Vec::new(),
                            usage: snapshot.as_ref().and_then(|s| s.usage),
                            revision: snapshot.and_then(|s| s.revision),
                        });
                    }
                    return Err(e.into());
                }
                Err(e) => return Err(e.into()),
            }
        }
        Err(LedgerError::Conflict {
            ledger: self.ledger.describe(),
            operation: "seed",
            attempts: PREPARE_ROUNDS,
        }
        .into())
    }

    /// Records one outcome, overwriting (the caller holds the run lock).
    ///
    /// The backend retries transient errors itself. If the write still
    /// reports an error, the ledger is re-read: when it already holds exactly
    /// `entry` the reply was lost and the record stands; otherwise the record
    /// is unconfirmed. The outcome is never written twice under different
    /// contents and never assumed.
    pub async fn record(&self, slug: &Slug, entry: &LedgerEntry) -> Result<(), MigrateError> {
        record(self.ledger, slug, entry, WriteMode::Replace)
            .await
            .map(|_| ())
    }

    /// Writes one step of a run ([`Ledger::write_step`]: records, the next
    /// attempt mark, the run lock in the ledger object) and confirms
    /// its records, as [`Self::record`] does for one.
    ///
    /// The backend retries transient errors itself, and a retry that finds
    /// its own write stored answers as if the reply had come (the attempt
    /// token and the lock token make that recognisable). If the step still
    /// fails, a refusal that wrote nothing (the lock held or lost, the
    /// ledger changed since planned, full, absent) is returned as it is;
    /// otherwise the ledger is re-read once: records that are not all in
    /// place are [`MigrateError::Unconfirmed`]; records in place with an
    /// attempt to note are the write's error (the attempt is unknown, so the
    /// script must not start); records in place and nothing else to note
    /// stand, and the lease is reported unchanged (a release whose reply was
    /// lost is sent again by whoever holds the lease).
    pub async fn write_step(&self, step: &StepWrite<'_>) -> Result<StepReport, MigrateError> {
        let error = match self.ledger.write_step(step).await {
            Ok(report) => return Ok(report),
            Err(
                e @ (LedgerError::LockHeld { .. }
                | LedgerError::LockLost { .. }
                | LedgerError::Changed { .. }
                | LedgerError::Full { .. }
                | LedgerError::NotFound { .. }),
            ) => return Err(e.into()),
            Err(e) => e,
        };
        let snapshot = match self.ledger.read().await {
            Ok(Some(snapshot)) => Some(snapshot),
            Ok(None) | Err(_) => None,
        };
        let missing = step.records.iter().find(|(slug, entry)| {
            !snapshot
                .as_ref()
                .is_some_and(|snapshot| holds(snapshot, slug, entry))
        });
        if let Some((slug, _)) = missing {
            return Err(MigrateError::Unconfirmed {
                ledger: self.ledger.describe(),
                slug: slug.clone(),
                cause: error,
            });
        }
        if step.attempt.is_some() || snapshot.is_none() {
            return Err(error.into());
        }
        tracing::warn!(error = %error, "step write reply lost, but its records are in place");
        let lease = match step.mode {
            StepMode::Hold { lease, .. } | StepMode::Release { lease } => Some(lease.clone()),
            StepMode::Overwrite | StepMode::Take { .. } | StepMode::Check { .. } => None,
        };
        Ok(StepReport {
            attempts: None,
            lease,
        })
    }

    /// The entries a fresh install seeds: every manifest slug of either
    /// tier, `skipped-fresh-install` (revoked ones `revoked`). Pure: reads
    /// no ledger ([`fresh_install_entries`] at this migrator's context).
    pub fn fresh_install_entries(&self) -> Result<Vec<(Slug, LedgerEntry)>, PlanError> {
        fresh_install_entries(self.tree, &self.context())
    }

    /// Creates the ledger of a new cluster with [`Self::fresh_install_entries`].
    /// Refuses with [`MigrateError::Exists`] when a ledger exists (or
    /// appears meanwhile): unlike [`Self::prepare`], it never seeds into an
    /// existing ledger. Returns the slugs written.
    pub async fn seed_fresh(&self) -> Result<Vec<Slug>, MigrateError> {
        let exists = || MigrateError::Exists {
            ledger: self.ledger.describe(),
        };
        if self.read().await?.is_some() {
            return Err(exists());
        }
        let entries = self.fresh_install_entries()?;
        match self.ledger.create(&entries).await {
            Ok(()) => Ok(entries.into_iter().map(|(slug, _)| slug).collect()),
            Err(LedgerError::AlreadyExists { .. }) => Err(exists()),
            Err(e) => Err(e.into()),
        }
    }
}

/// Writes one entry through `ledger` and confirms it. The backend retries
/// transient errors itself; if the write still fails, the ledger is re-read:
/// with [`WriteMode::Replace`] the record stands only when the ledger holds
/// exactly `entry` (the reply was lost); with [`WriteMode::OnlyIfAbsent`]
/// when the slug holds any entry (ours, or one that was already there, which
/// only-if-absent never replaces). Otherwise the record is unconfirmed.
/// Returns whether the ledger now holds `entry` itself.
///
/// This is the one recording path: the runner's outcomes (through
/// [`Migrator::record`]) and the operator's give-up both use it.
pub async fn record(
    ledger: &dyn Ledger,
    slug: &Slug,
    entry: &LedgerEntry,
    mode: WriteMode,
) -> Result<bool, MigrateError> {
    let entries = [(slug.clone(), entry.clone())];
    let error = match ledger.write(&entries, mode).await {
        Ok(report) => return Ok(report.already_present.is_empty()),
        Err(e) => e,
    };
    match ledger.read().await {
        Ok(Some(snapshot)) if holds(&snapshot, slug, entry) => {
            tracing::warn!(slug = %slug, error = %error, "write reply lost, but the entry is in place");
            Ok(true)
        }
        Ok(Some(snapshot))
            if mode == WriteMode::OnlyIfAbsent && snapshot.record(slug).is_some() =>
        {
            tracing::warn!(slug = %slug, error = %error, "write failed, but the slug already holds an entry");
            Ok(false)
        }
        _ => Err(MigrateError::Unconfirmed {
            ledger: ledger.describe(),
            slug: slug.clone(),
            cause: error,
        }),
    }
}

fn holds(snapshot: &LedgerSnapshot, slug: &Slug, entry: &LedgerEntry) -> bool {
    snapshot.entry(slug) == Some(entry)
}

fn plan_again(
    migrator: &Migrator<'_>,
    snapshot: Option<&LedgerSnapshot>,
    request: &PlanRequest,
) -> Result<Plan, PlanError> {
    plan(migrator.tree, snapshot, request, &migrator.context())
}

/// The most bytes one entry can cost a ledger with `usage`: its key, its
/// stored value, its shared record unless `sizes` counted it already, and
/// the backend's per-record overhead.
pub(crate) fn record_bytes(
    sizes: &crate::entry::StoredSize,
    slug: &Slug,
    entry: &LedgerEntry,
    usage: &Usage,
) -> u64 {
    sizes.bytes(slug, entry, usage.record_overhead_bytes)
}
