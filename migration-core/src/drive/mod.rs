//! One run of a tier, whole: read, plan once, take the run lock (waiting
//! while another runner holds it, renewing it between and during steps,
//! noticing its loss), refuse what the pre-run scan finds, the step loop,
//! the records, the closing write and the report (CONTRACT.md §5.5, §6,
//! §7).
//!
//! Everything that decides lives here; the program that executes scripts
//! supplies an [`Executor`] (processes, signals, time), a [`Scan`] (the
//! shell parser) and a [`Console`] (where lines go). The hook runner
//! (`migrate-runner`) is one such program; tests supply fakes.

use std::time::{Duration, Instant};

use crate::header::Tier;
use crate::ledger::{LedgerError, LedgerSnapshot};
use crate::lock::{LockKeeper, LockedLedger, run_holder};
use crate::migrator::{MigrateError, Migrator, PREPARE_ROUNDS};
use crate::plan::{Plan, PlanRequest, TierSelection};
use crate::run::DEFAULT_MESSAGE_LIMIT_BYTES;
use crate::slug::Slug;
use crate::time::Clock;
use crate::tree::MigrationsTree;

mod command;
mod console;
mod executor;
mod report;
mod steps;
mod waiting;

pub use command::ScriptCommand;
pub use console::Console;
pub use executor::{Executor, Job, Running, Scan, Scanned, ScriptEnd};
pub use report::{
    CallSummary, Ended, LockLostAt, MigrationResult, RunError, RunReport, UnsafeFinding,
    fresh_install_reason,
};

use steps::{Stepping, steps};
use waiting::{Replanning, unrecorded, wait_for_lock};

/// What a run decides by, besides the tree and the ledger.
#[derive(Debug, Clone)]
pub struct RunSettings {
    /// The tier to run.
    pub tier: Tier,
    /// `ONLY=<slug>`: re-run exactly this slug.
    pub only: Option<Slug>,
    /// The image the scripts run from, recorded in entries.
    pub image: Option<String>,
    /// Lifetime of the run lock; renewed every third of it.
    pub lock_ttl: Duration,
    /// How long to wait for another runner's lock before giving up.
    pub lock_wait: Duration,
    /// Who holds the lock (pod name, host and pid); the run takes it under
    /// a name unique to itself ([`run_holder`]).
    pub holder: String,
    /// Bytes of output a failure's recorded `message` keeps.
    pub message_limit: usize,
    /// Allowed shebang lines.
    pub allowed_interpreters: Vec<String>,
    /// Refuse when no ledger exists instead of seeding a fresh install.
    pub require_existing_ledger: bool,
}

impl RunSettings {
    /// Defaults for `tier` under `holder`: a 60-second lock renewed every
    /// 20 seconds, up to 5 minutes waiting for it, a 4 KiB failure message
    /// ([`DEFAULT_MESSAGE_LIMIT_BYTES`]), the default interpreters, and a
    /// missing ledger taken for a fresh install.
    pub fn new(tier: Tier, holder: String) -> Self {
        RunSettings {
            tier,
            only: None,
            image: None,
            lock_ttl: Duration::from_secs(60),
            lock_wait: Duration::from_secs(300),
            holder,
            message_limit: DEFAULT_MESSAGE_LIMIT_BYTES,
            allowed_interpreters: crate::PlanContext::default_interpreters(),
            require_existing_ledger: false,
        }
    }
}

/// One run of a tier: the tree, its ledger, the clock entries are stamped
/// with, the settings, where lines go, and the pre-run scan. Used once, by
/// [`Driver::run`] or [`Driver::run_after_read`].
#[derive(Clone, Copy)]
pub struct Driver<'a> {
    /// The loaded tree.
    pub tree: &'a MigrationsTree,
    /// The ledger, with its run lock.
    pub ledger: &'a dyn LockedLedger,
    /// The clock entries and lock times are read from.
    pub clock: &'a dyn Clock,
    /// The run's settings.
    pub settings: &'a RunSettings,
    /// Where progress goes.
    pub console: &'a dyn Console,
    /// The pre-run scan of the pending scripts.
    pub scan: &'a dyn Scan,
}

impl<'a> Driver<'a> {
    /// Runs the tier, executing through `executor`.
    ///
    /// The lock, kept in the ledger object, is taken by the run's first
    /// write, on the revision the run planned on (CONTRACT.md §5.5). That
    /// write may find the lock held (wait, then plan again) or the ledger
    /// changed since it was read (plan again); nothing has been written or
    /// executed by then.
    pub async fn run(self, executor: &mut dyn Executor) -> Result<RunReport, RunError> {
        let started = Instant::now();
        self.run_locked(None, executor, started).await
    }

    /// [`Driver::run`] for a caller that has already read the ledger
    /// without the lock (`migrate run` reads it while the tree loads);
    /// `read` is what that read gave. When the plan on it has nothing to do
    /// ([`Migrator::idle_plan`]: nothing pending, nothing to seed, not a
    /// fresh install), the run ends there, having written nothing and taken
    /// no lock (CONTRACT.md §5.5). Otherwise it is [`Driver::run`]: the lock
    /// is taken and the ledger read again, and only the plan on that read
    /// runs anything. The run plans on `read` instead of reading again: its
    /// lock is taken on the revision read. A failed read is not reported from here: the run
    /// reads again and fails there, as [`Driver::run`] would.
    pub async fn run_after_read(
        self,
        read: &Result<Option<LedgerSnapshot>, LedgerError>,
        executor: &mut dyn Executor,
    ) -> Result<RunReport, RunError> {
        let started = Instant::now();
        let read = read.as_ref().ok().map(Option::as_ref);
        if let Some(snapshot) = read {
            let migrator = self.migrator();
            if let Some(plan) = migrator.idle_plan(snapshot, &self.request()) {
                let report = self.announce(&plan, 0, self.console);
                return Ok(finished(report, started, self.console));
            }
            // No ledger, and a plan that refuses to treat that as a fresh
            // install (or an ONLY before the ledger exists): refused on this
            // read, before the lock, so a refused run leaves nothing behind
            // (a lock beside the ledger would leave its file). A ledger
            // created since by another run is seen by the next run.
            if snapshot.is_none()
                && let Err(e) = migrator.plan_snapshot(None, &self.request())
            {
                return Err(prepare_error(e));
            }
        }
        self.run_locked(read, executor, started).await
    }

    /// The run without the lock and the executor (`migrate run --dry-run`):
    /// the plan this run would make on `read` (what the caller read without
    /// the lock), and what the pre-run scan finds in its pending scripts
    /// (any finding refuses the run: [`RunError::Unsafe`]); refused as the
    /// run would be when the ledger has no room for the first script's
    /// largest record ([`RunError::NoRoom`]). Takes no lock,
    /// writes nothing (seeding included), executes nothing. Errors are the
    /// run's: a failed read, a refused plan, a required ledger absent.
    pub async fn dry_run(
        self,
        read: &Result<Option<LedgerSnapshot>, LedgerError>,
    ) -> Result<DryRun, RunError> {
        let snapshot = read.as_ref().map_err(|e| RunError::Ledger(e.clone()))?;
        let migrator = self.migrator();
        let plan = migrator
            .plan_snapshot(snapshot.as_ref(), &self.request())
            .map_err(prepare_error)?;
        // The room check the run makes before its first script: refused here
        // where the run would refuse.
        migrator
            .check_room_before_first(&plan, snapshot.as_ref(), self.settings.message_limit)
            .map_err(RunError::NoRoom)?;
        let scanned = self.scan.scan(self.tree, &plan.pending);
        Ok(DryRun {
            plan,
            findings: scanned.findings,
        })
    }

    /// The migrator of this run, configured by its settings.
    fn migrator(&self) -> Migrator<'a> {
        Migrator::new(self.tree, self.ledger, self.clock)
            .with_image(self.settings.image.clone())
            .with_allowed_interpreters(self.settings.allowed_interpreters.clone())
            .with_require_existing_ledger(self.settings.require_existing_ledger)
    }

    /// What this run plans for.
    fn request(&self) -> PlanRequest {
        PlanRequest {
            tiers: TierSelection::One(self.settings.tier),
            only: self.settings.only.clone(),
        }
    }

    /// [`Driver::run`], planning first on `read` when it is given (see
    /// [`Migrator::prepare_after`]): takes the lock with its first write, runs (planning again while the first write finds the
    /// lock held or the ledger changed), and releases the lock on every path.
    async fn run_locked(
        self,
        mut read: Option<Option<&LedgerSnapshot>>,
        executor: &mut dyn Executor,
        started: Instant,
    ) -> Result<RunReport, RunError> {
        let (ledger, config, console) = (self.ledger, self.settings, self.console);
        executor.checkpoint("before-lock");
        // Unique to this run, so that two runs told the same `--holder`
        // still exclude each other (CONTRACT.md §5.5).
        let holder = run_holder(&config.holder);
        let mut keeper = LockKeeper::new(ledger, &holder, config.lock_ttl);
        executor.checkpoint("after-lock");
        let migrator = self.migrator();
        let mut announced = false;
        let mut replans = 0u32;
        let replanning = Replanning::new(console);
        let result = loop {
            let result = self
                .locked_run(
                    &migrator,
                    read.take(),
                    &mut keeper,
                    &replanning,
                    executor,
                    started,
                )
                .await;
            match result {
                Err(RunError::Ledger(cause @ LedgerError::LockHeld { .. }))
                    if keeper.not_taken_yet() =>
                {
                    if let Err(e) =
                        wait_for_lock(cause, config, console, executor, started, &mut announced)
                            .await
                    {
                        break Err(e);
                    }
                }
                // Another writer came between the read and the first write:
                // plan again on what is there now (a few times at least, then
                // for as long as the run would wait for the lock).
                Err(RunError::Ledger(LedgerError::Changed { .. }))
                    if keeper.not_taken_yet()
                        && (replans < PREPARE_ROUNDS || started.elapsed() < config.lock_wait) =>
                {
                    replans += 1;
                    tracing::info!(
                        replans,
                        "the ledger changed before the run took its lock; planning again"
                    );
                }
                other => break other,
            }
        };
        // Released on every path; a failed release only delays the next runner
        // until the lease expires, so it is reported, not fatal.
        if let Err(e) = keeper.release().await {
            console.progress(&format!(
                "warning: could not release the run lock ({e}); it expires by itself"
            ));
        }
        result
    }

    /// One round: prepare (plan once, seed), scan, announce, the steps, and
    /// the closing write.
    async fn locked_run(
        &self,
        migrator: &Migrator<'_>,
        read: Option<Option<&LedgerSnapshot>>,
        keeper: &mut LockKeeper<'_>,
        console: &dyn Console,
        executor: &mut dyn Executor,
        started: Instant,
    ) -> Result<RunReport, RunError> {
        let prepared = migrator
            .prepare_after(read, &self.request())
            .await
            .map_err(prepare_error)?;
        executor.checkpoint("after-prepare");
        let mut run = migrator
            .begin(prepared)
            .with_message_limit(self.settings.message_limit);
        let scanned = self.scan.scan(self.tree, &run.plan().pending);
        if !scanned.findings.is_empty() {
            return Err(RunError::Unsafe {
                findings: scanned.findings,
            });
        }
        let report = self.announce(run.plan(), run.seeded().len(), console);
        let stepping = Stepping {
            tree: self.tree,
            config: self.settings,
            console,
            executor,
            keeper: &mut *keeper,
            scripts: &scanned.scripts,
        };
        let outcome = steps(stepping, &mut run, started, report).await;
        // A first write refused for the lock or a changed ledger wrote nothing:
        // the caller plans again, and the outcomes decided so far (migrations
        // that did not execute) are decided again then.
        if keeper.not_taken_yet()
            && matches!(
                outcome,
                Err(RunError::Ledger(
                    LedgerError::LockHeld { .. } | LedgerError::Changed { .. }
                ))
            )
        {
            return outcome;
        }
        // On every path the outcomes decided and not written yet are written
        // (and the lock released with them), unless the lock is
        // lost: then the closing write is refused too, and the error says what
        // it left unrecorded.
        let unwritten_all: Vec<Slug> = run.unwritten().cloned().collect();
        let unwritten = unwritten_all.first().cloned();
        match (outcome, run.close(keeper).await) {
            (outcome, Ok(())) => outcome,
            (
                Err(RunError::LockLost {
                    slug, at, cause, ..
                }),
                Err(_),
            ) => Err(RunError::LockLost {
                slug,
                at,
                cause,
                unrecorded: unwritten_all,
            }),
            // Nothing executed (the lock was never taken) and the closing write
            // of outcomes that did not execute was refused: plan again.
            (
                _,
                Err(MigrateError::Ledger(
                    e @ (LedgerError::LockHeld { .. } | LedgerError::Changed { .. }),
                )),
            ) if keeper.not_taken_yet() => Err(RunError::Ledger(e)),
            (Ok(_), Err(cause)) => Err(unrecorded(cause, unwritten)),
            (Err(e), Err(cause)) => {
                console.progress(&format!("warning: {}", unrecorded(cause, unwritten)));
                Err(e)
            }
        }
    }

    /// The report a run of `plan` begins with (`seeded`: entries its seeding
    /// wrote), after saying what it will do and which recorded scripts changed
    /// on disk.
    fn announce(&self, plan: &Plan, seeded: usize, console: &dyn Console) -> RunReport {
        let config = self.settings;
        console.progress(&format!(
            "{} pending in tier {}{}, {seeded} seeded{}",
            plan.pending.len(),
            config.tier,
            config
                .only
                .as_ref()
                .map(|o| format!(" (ONLY={o})"))
                .unwrap_or_default(),
            if plan.fresh_install {
                " (fresh install: nothing runs)"
            } else {
                ""
            }
        ));
        for m in &plan.checksum_mismatches {
            // ONLY=slug re-runs it on purpose: saying "not re-run" would be false.
            let what = if config.only.as_ref() == Some(&m.slug) {
                "it is re-run now (ONLY)"
            } else {
                "it is not re-run"
            };
            console.progress(&format!(
                "warning: {} changed on disk since it was recorded; {what}",
                m.slug
            ));
        }
        RunReport {
            tier: config.tier.to_string(),
            only: config.only.as_ref().map(ToString::to_string),
            fresh_install: plan.fresh_install,
            fresh_install_reason: plan
                .fresh_install
                .then(|| fresh_install_reason(&self.ledger.describe())),
            seeded,
            pending: plan.pending.len(),
            results: Vec::new(),
            elapsed_ms: 0,
        }
    }
}

/// What a dry run found ([`Driver::dry_run`]).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct DryRun {
    /// The plan the run would carry out.
    pub plan: Plan,
    /// What the pre-run scan found: the run would refuse if any.
    pub findings: Vec<UnsafeFinding>,
}

/// A failed preparation (or plan) as the run reports it.
fn prepare_error(e: MigrateError) -> RunError {
    match e {
        MigrateError::Refused(plan) => RunError::Refused(plan),
        MigrateError::Ledger(l) => RunError::Ledger(l),
        absent @ MigrateError::Absent { .. } => RunError::NoLedger(absent),
        other => RunError::Migrate(other),
    }
}

/// `report` of a run that went through its plan, with its time since
/// `started`, after printing its summary.
fn finished(mut report: RunReport, started: Instant, console: &dyn Console) -> RunReport {
    report.elapsed_ms = started.elapsed().as_millis();
    console.progress(&report.summary());
    report
}
