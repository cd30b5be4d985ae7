//! The hook runner: executes pending migrations safely (CONTRACT.md §6, §7).
//!
//! One run: take the run lock (waiting a bounded time), plan and seed,
//! refuse before anything runs if the plan or a pending script is unsafe,
//! then run each pending script in manifest order under errexit, in its own
//! process group, streaming its output prefixed with the slug, with a
//! timeout, and record each outcome itself. The lock is released on every
//! exit path.
//!
//! How fail-fast is guaranteed: scripts run with errexit (`-e`, plus
//! `-o pipefail` under bash). errexit cannot see everything: a command
//! substitution used as a `for` word list that fails yields zero iterations
//! and status 0, and `kubectl ... || true` turns a failure into success. So
//! before anything runs, every pending script is scanned for those patterns
//! (and for writes to the ledger), and the run is refused if one is found.
//! A runner that cannot tell whether a script did its work does not run it.

#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

use std::time::{Duration, Instant};

use migration_core::header::Tier;
use migration_core::{
    Clock, LedgerError, LedgerSnapshot, LockKeeper, LockedLedger, MigrateError, MigrationsTree,
    Migrator, Plan, PlanRequest, Prepared, Slug, TierSelection,
};
use tokio::sync::watch;

use migrate_lint::LintConfig;

mod child;
mod console;
mod lock;
mod outcome;
mod process;
mod scan;
mod steps;
pub mod tripwire;

/// Why a run is a fresh install: the ledger does not exist (the report's
/// `fresh_install_reason`, and the words of the CLI's notice).
pub fn fresh_install_reason(ledger: &str) -> String {
    format!("{ledger} does not exist")
}

pub use console::Console;
use lock::{Replanning, acquire, unrecorded, wait_for_lock};
pub use outcome::{LockLostAt, MigrationResult, Outcome, RunError, RunReport};
use process::Scripts;
pub use process::{command_for, escalate};
pub use scan::{scan, scan_all};
use steps::steps;

/// Rules whose findings make the runner refuse a script: patterns that let a
/// failed script report success, and writes to the ledger.
pub const UNSAFE_AT_RUNTIME: &[&str] = migrate_lint::BLOCKING_RULES;

/// Everything a run needs besides the tree and the ledger.
#[derive(Debug, Clone)]
pub struct RunConfig {
    /// The tier to run.
    pub tier: Tier,
    /// `ONLY=<slug>`: re-run exactly this slug.
    pub only: Option<Slug>,
    /// The image the scripts run from, recorded in entries.
    pub image: Option<String>,
    /// The namespace passed to scripts as `MIGRATION_NAMESPACE` (the
    /// program's `--namespace`; [`RunConfig::new`] leaves it empty).
    pub namespace: String,
    /// Per-script time limit.
    pub timeout: Duration,
    /// Time between SIGTERM and SIGKILL when stopping a script.
    pub grace: Duration,
    /// Lifetime of the run lock; renewed every third of it.
    pub lock_ttl: Duration,
    /// How long to wait for another runner's lock before giving up.
    pub lock_wait: Duration,
    /// Who holds the lock (pod name, host and pid).
    pub holder: String,
    /// Bytes of output kept for a failure's `message`.
    pub tail_bytes: usize,
    /// Allowed shebang lines.
    pub allowed_interpreters: Vec<String>,
    /// Settings for the pre-run safety scan.
    pub lint: LintConfig,
    /// The run-time tripwire: cluster commands and the shim binary.
    pub tripwire: crate::tripwire::TripwireConfig,
    /// Refuse when no ledger exists instead of seeding a fresh install
    /// (`--require-existing-ledger`).
    pub require_existing_ledger: bool,
}

impl RunConfig {
    /// Defaults for `tier`: 15-minute timeout, 10-second grace, 60-second
    /// lock renewed every 20 seconds, up to 5 minutes waiting for the lock,
    /// a 4 KiB failure tail.
    pub fn new(tier: Tier, holder: String) -> Self {
        RunConfig {
            tier,
            only: None,
            image: None,
            namespace: String::new(),
            timeout: Duration::from_secs(15 * 60),
            grace: Duration::from_secs(10),
            lock_ttl: Duration::from_secs(60),
            lock_wait: Duration::from_secs(300),
            holder,
            tail_bytes: 4096,
            allowed_interpreters: migration_core::PlanContext::default_interpreters(),
            lint: LintConfig::default(),
            tripwire: crate::tripwire::TripwireConfig::default(),
            require_existing_ledger: false,
        }
    }
}

/// Test-only crash and stall points (feature `failpoints`): when
/// `MIGRATE_FAILPOINT` names this point, the process kills itself with
/// SIGKILL, as a node failure or OOM kill would, without unwinding or
/// releasing anything; when `MIGRATE_STALLPOINT` names it, the process
/// stops itself with SIGSTOP, as a frozen node or a throttled pod would,
/// and goes on where it was when the test sends SIGCONT (its lease may
/// have lapsed meanwhile). The reliability suite uses them to crash and
/// stall the real binary at every step boundary. Without the feature this
/// compiles to nothing.
fn failpoint(point: &str) {
    #[cfg(feature = "failpoints")]
    {
        use nix::sys::signal::{Signal, kill};
        if std::env::var("MIGRATE_FAILPOINT").is_ok_and(|v| v == point) {
            let _ = kill(nix::unistd::getpid(), Signal::SIGKILL);
        }
        if std::env::var("MIGRATE_STALLPOINT").is_ok_and(|v| v == point) {
            let _ = kill(nix::unistd::getpid(), Signal::SIGSTOP);
        }
    }
    #[cfg(not(feature = "failpoints"))]
    let _ = point;
}

/// One run of a tier: the tree, its ledger, the clock entries are stamped
/// with, the settings, and where progress goes. Built by the caller and
/// used once, by [`Runner::run`] or [`Runner::run_after_read`].
#[derive(Clone, Copy)]
pub struct Runner<'a> {
    /// The loaded tree.
    pub tree: &'a MigrationsTree,
    /// The ledger, with its run lock.
    pub ledger: &'a dyn LockedLedger,
    /// The clock entries and lock times are read from.
    pub clock: &'a dyn Clock,
    /// The run's settings.
    pub config: &'a RunConfig,
    /// Where progress and the scripts' output go.
    pub console: &'a dyn Console,
}

impl<'a> Runner<'a> {
    /// A run on the system clock.
    pub fn new(
        tree: &'a MigrationsTree,
        ledger: &'a dyn LockedLedger,
        config: &'a RunConfig,
        console: &'a dyn Console,
    ) -> Self {
        Runner {
            tree,
            ledger,
            clock: &migration_core::SystemClock,
            config,
            console,
        }
    }

    /// The same run on `clock` (tests move time by hand).
    pub fn with_clock(self, clock: &'a dyn Clock) -> Self {
        Runner { clock, ..self }
    }

    /// Runs the tier. `interrupt` turns true on SIGTERM/SIGINT (the binary
    /// wires the signals; tests flip it directly).
    ///
    /// Where the lock lives decides when it is taken (CONTRACT.md §5.5): a lock
    /// beside the ledger (a Lease, a lock file) now, before reading; one kept in
    /// the ledger object by the run's first write, on the revision the run
    /// planned on. That write may find the lock held (wait, then plan again) or
    /// the ledger changed since it was read (plan again); nothing has been
    /// written or executed by then.
    pub async fn run(self, interrupt: watch::Receiver<bool>) -> Result<RunReport, RunError> {
        let started = Instant::now();
        self.run_locked(None, interrupt, started).await
    }

    /// [`Runner::run`] for a caller that has already read the ledger without
    /// the lock (`migrate run` reads it while the tree loads); `read` is what
    /// that read gave. When the plan on it has nothing to do
    /// ([`Migrator::idle_plan`]: nothing pending, nothing to seed, not a fresh
    /// install), the run ends there, having written nothing and taken no lock
    /// (CONTRACT.md §5.5). Otherwise it is [`Runner::run`]: the lock is taken
    /// and the ledger read again, and only the plan on that read runs
    /// anything. A ledger that keeps its lock in the ledger object plans on
    /// `read` instead of reading again: its lock is taken on the revision
    /// read. A failed read is not reported from here: the run reads again and
    /// fails there, as [`Runner::run`] would.
    pub async fn run_after_read(
        self,
        read: &Result<Option<LedgerSnapshot>, LedgerError>,
        interrupt: watch::Receiver<bool>,
    ) -> Result<RunReport, RunError> {
        let started = Instant::now();
        let mut read = read.as_ref().ok().map(Option::as_ref);
        if let Some(snapshot) = read {
            let migrator = self.migrator();
            if let Some(plan) = migrator.idle_plan(snapshot, &request(self.config)) {
                let report = announce(&migrator, &plan, 0, self.config, self.console);
                return Ok(finished(report, started, self.console));
            }
        }
        if !self.ledger.kept_in_ledger() {
            read = None;
        }
        self.run_locked(read, interrupt, started).await
    }

    /// The migrator of this run, configured by its settings.
    fn migrator(&self) -> Migrator<'_> {
        Migrator::new(self.tree, self.ledger, self.clock)
            .with_image(self.config.image.clone())
            .with_allowed_interpreters(self.config.allowed_interpreters.clone())
            .with_require_existing_ledger(self.config.require_existing_ledger)
    }

    /// [`Runner::run`], planning first on `read` when it is given (a lock
    /// kept in the ledger object only, see [`Migrator::prepare_after`]).
    async fn run_locked(
        self,
        mut read: Option<Option<&LedgerSnapshot>>,
        mut interrupt: watch::Receiver<bool>,
        started: Instant,
    ) -> Result<RunReport, RunError> {
        let Runner {
            ledger,
            config,
            console,
            ..
        } = self;
        failpoint("before-lock");
        // Unique to this run, so that two runs told the same `--holder`
        // still exclude each other (CONTRACT.md §5.5).
        let holder = migration_core::lock::run_holder(&config.holder);
        let mut keeper = if ledger.kept_in_ledger() {
            LockKeeper::deferred(ledger, &holder, config.lock_ttl)
        } else {
            acquire(ledger, &holder, config, console, &mut interrupt, started).await?
        };
        failpoint("after-lock");
        let migrator = self.migrator();
        let mut announced = false;
        let mut replans = 0u32;
        let replanning = Replanning::new(console);
        let result = loop {
            let result = locked_run(
                &migrator,
                read.take(),
                &mut keeper,
                config,
                &replanning,
                &mut interrupt,
                started,
            )
            .await;
            match result {
                Err(RunError::Ledger(cause @ LedgerError::LockHeld { .. }))
                    if keeper.lease().is_none() =>
                {
                    if let Err(e) = wait_for_lock(
                        cause,
                        config,
                        console,
                        &mut interrupt,
                        started,
                        &mut announced,
                    )
                    .await
                    {
                        break Err(e);
                    }
                }
                // Another writer came between the read and the first write:
                // plan again on what is there now (a few times at least, then
                // for as long as the run would wait for the lock).
                Err(RunError::Ledger(LedgerError::Changed { .. }))
                    if keeper.lease().is_none()
                        && (replans < migration_core::migrator::PREPARE_ROUNDS
                            || started.elapsed() < config.lock_wait) =>
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
}

/// What a run configured by `config` plans for.
fn request(config: &RunConfig) -> PlanRequest {
    PlanRequest {
        tiers: TierSelection::One(config.tier),
        only: config.only.clone(),
    }
}

async fn locked_run(
    migrator: &Migrator<'_>,
    read: Option<Option<&LedgerSnapshot>>,
    keeper: &mut LockKeeper<'_>,
    config: &RunConfig,
    console: &dyn Console,
    interrupt: &mut watch::Receiver<bool>,
    started: Instant,
) -> Result<RunReport, RunError> {
    let tree = migrator.tree();
    let request = request(config);
    let prepared = migrator
        .prepare_after(read, &request)
        .await
        .map_err(|e| match e {
            MigrateError::Refused(plan) => RunError::Refused(plan),
            MigrateError::Ledger(l) => RunError::Ledger(l),
            absent @ MigrateError::Absent { .. } => RunError::NoLedger(absent),
            other => RunError::Ledger(LedgerError::Permanent {
                ledger: migrator.ledger().describe(),
                operation: "prepare",
                message: other.to_string(),
            }),
        })?;
    failpoint("after-prepare");
    let plan = prepared.plan;

    let scanned = scan::scan_all_keeping(tree, &plan.pending, &config.lint);
    if !scanned.findings.is_empty() {
        return Err(RunError::Unsafe {
            findings: scanned.findings,
        });
    }

    let report = announce(migrator, &plan, prepared.written.len(), config, console);

    let mut run = migrator
        .begin(Prepared {
            plan,
            written: prepared.written,
            usage: prepared.usage,
            revision: prepared.revision,
        })
        .with_message_limit(config.tail_bytes);
    let mut scripts = Scripts {
        tree,
        config,
        console,
        interrupt,
        keeper: &mut *keeper,
        wire: None,
        scanned: scanned.bytes,
        copies: None,
    };
    let outcome = steps(&mut scripts, &mut run, started, report).await;
    // The tripwire's supervisor ends with the run's scripts.
    drop(scripts);
    // A first write refused for the lock or a changed ledger wrote nothing:
    // the caller plans again, and the outcomes decided so far (migrations
    // that did not execute) are decided again then.
    if keeper.lease().is_none()
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
    // (and a lock kept in the ledger released with them), unless the lock is
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
        ) if keeper.lease().is_none() => Err(RunError::Ledger(e)),
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
fn announce(
    migrator: &Migrator<'_>,
    plan: &Plan,
    seeded: usize,
    config: &RunConfig,
    console: &dyn Console,
) -> RunReport {
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
            .then(|| crate::fresh_install_reason(&migrator.ledger().describe())),
        seeded,
        pending: plan.pending.len(),
        results: Vec::new(),
        elapsed_ms: 0,
    }
}

/// `report` of a run that went through its plan, with its time since
/// `started`, after printing its summary.
fn finished(mut report: RunReport, started: Instant, console: &dyn Console) -> RunReport {
    report.elapsed_ms = started.elapsed().as_millis();
    console.progress(&report.summary());
    report
}

/// What an interruption did: which script it stopped, or that none ran.
fn interrupted_text(slug: Option<&Slug>, report: &RunReport) -> String {
    match slug {
        Some(slug) => {
            format!(
                "interrupted while running {slug}; nothing recorded for the interrupted migration"
            )
        }
        None if report.results.is_empty() => {
            "interrupted before any migration started; nothing ran".to_owned()
        }
        None => format!(
            "interrupted between migrations after {} of {}; nothing was running",
            report.results.len(),
            report.pending
        ),
    }
}
