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

use std::time::{Duration, Instant};

use migration_core::header::Tier;
use migration_core::plan::PendingMigration;
use migration_core::run::{NOT_YET, REQUIREMENT_NOT_YET, REQUIREMENT_UNMET, previous_attempts};
use migration_core::{
    Clock, EntryState, LedgerError, LedgerSnapshot, LockKeeper, LockedLedger, MigrateError,
    MigrationsTree, Migrator, Outcome as CoreOutcome, Plan, PlanRequest, Prepared, Run, Slug, Step,
    TierSelection, Verdict,
};
use tokio::sync::watch;

use crate::lint::{Finding, Level, LintConfig, lint_pending};

mod console;
mod lock;
mod outcome;
mod process;

pub use console::{Console, StdConsole};
use lock::{Replanning, acquire, note_attempt, unrecorded, wait_for_lock};
pub use outcome::{MigrationResult, Outcome, RunError, RunReport};
pub use process::escalate;
use process::{Exec, execute};

/// Rules whose findings make the runner refuse a script: patterns that let a
/// failed script report success, and writes to the ledger.
pub const UNSAFE_AT_RUNTIME: &[&str] = crate::lint::BLOCKING_RULES;

/// Everything a run needs besides the tree and the ledger.
#[derive(Debug, Clone)]
pub struct RunConfig {
    /// The tier to run.
    pub tier: Tier,
    /// `ONLY=<slug>`: re-run exactly this slug.
    pub only: Option<Slug>,
    /// The image the scripts run from, recorded in entries.
    pub image: Option<String>,
    /// The namespace passed to scripts as `MIGRATION_NAMESPACE`.
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
            namespace: migration_kube::defaults::NAMESPACE.into(),
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

/// Test-only crash points (feature `failpoints`): when `MIGRATE_FAILPOINT`
/// names this point, the process kills itself with SIGKILL, as a node
/// failure or OOM kill would, without unwinding or releasing anything. The
/// reliability suite uses it to crash the real binary at every step
/// boundary. Without the feature this compiles to nothing.
fn failpoint(point: &str) {
    #[cfg(feature = "failpoints")]
    if std::env::var("MIGRATE_FAILPOINT").is_ok_and(|v| v == point) {
        let _ = nix::sys::signal::kill(nix::unistd::getpid(), nix::sys::signal::Signal::SIGKILL);
    }
    #[cfg(not(feature = "failpoints"))]
    let _ = point;
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
pub async fn run(
    tree: &MigrationsTree,
    ledger: &dyn LockedLedger,
    clock: &dyn Clock,
    config: &RunConfig,
    console: &dyn Console,
    interrupt: watch::Receiver<bool>,
) -> Result<RunReport, RunError> {
    let started = Instant::now();
    run_locked(
        tree, ledger, None, clock, config, console, interrupt, started,
    )
    .await
}

/// [`run`] for a caller that has already read the ledger without the lock
/// (`migrate run` reads it while the tree loads); `read` is what that read
/// gave. When the plan on it has nothing to do ([`Migrator::idle_plan`]:
/// nothing pending, nothing to seed, not a fresh install), the run ends
/// there, having written nothing and taken no lock (CONTRACT.md §5.5).
/// Otherwise it is [`run`]: the lock is taken and the ledger read again,
/// and only the plan on that read runs anything. A ledger that keeps its
/// lock in the ledger object plans on `read` instead of reading again:
/// its lock is taken on the revision read. A failed read is not reported
/// from here: the run reads again and fails there, as [`run`] would.
#[allow(clippy::too_many_arguments)]
pub async fn run_after_read(
    tree: &MigrationsTree,
    ledger: &dyn LockedLedger,
    read: &Result<Option<LedgerSnapshot>, LedgerError>,
    clock: &dyn Clock,
    config: &RunConfig,
    console: &dyn Console,
    interrupt: watch::Receiver<bool>,
) -> Result<RunReport, RunError> {
    let started = Instant::now();
    let mut read = read.as_ref().ok().map(Option::as_ref);
    if let Some(snapshot) = read {
        let migrator = migrator(tree, ledger, clock, config);
        if let Some(plan) = migrator.idle_plan(snapshot, &request(config)) {
            let report = announce(&migrator, &plan, 0, config, console);
            return Ok(finished(report, started, console));
        }
    }
    if !ledger.kept_in_ledger() {
        read = None;
    }
    run_locked(
        tree, ledger, read, clock, config, console, interrupt, started,
    )
    .await
}

/// [`run`], planning first on `read` when it is given (a lock kept in the
/// ledger object only, see [`Migrator::prepare_after`]).
#[allow(clippy::too_many_arguments)]
async fn run_locked(
    tree: &MigrationsTree,
    ledger: &dyn LockedLedger,
    mut read: Option<Option<&LedgerSnapshot>>,
    clock: &dyn Clock,
    config: &RunConfig,
    console: &dyn Console,
    mut interrupt: watch::Receiver<bool>,
    started: Instant,
) -> Result<RunReport, RunError> {
    failpoint("before-lock");
    let mut keeper = if ledger.kept_in_ledger() {
        LockKeeper::deferred(ledger, &config.holder, config.lock_ttl)
    } else {
        acquire(ledger, config, console, &mut interrupt, started).await?
    };
    failpoint("after-lock");
    let migrator = migrator(tree, ledger, clock, config);
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

/// The migrator of a run configured by `config`.
fn migrator<'a>(
    tree: &'a MigrationsTree,
    ledger: &'a dyn LockedLedger,
    clock: &'a dyn Clock,
    config: &RunConfig,
) -> Migrator<'a> {
    Migrator::new(tree, ledger, clock)
        .with_image(config.image.clone())
        .with_allowed_interpreters(config.allowed_interpreters.clone())
        .with_require_existing_ledger(config.require_existing_ledger)
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

    let findings: Vec<Finding> = plan
        .pending
        .iter()
        .flat_map(|p| scan(tree, p, &config.lint))
        .collect();
    if !findings.is_empty() {
        return Err(RunError::Unsafe { findings });
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
    let outcome = steps(
        tree, &mut run, keeper, config, console, interrupt, started, report,
    )
    .await;
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
    // (and a lock kept in the ledger released with them).
    let unwritten = run.unwritten().next().cloned();
    match (outcome, run.close(keeper).await) {
        (outcome, Ok(())) => outcome,
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
            .then(|| crate::report::fresh_install_reason(&migrator.ledger().describe())),
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

/// The pending migrations, in order, until the plan is done or the run
/// must stop.
#[allow(clippy::too_many_arguments)]
async fn steps(
    tree: &MigrationsTree,
    run: &mut Run<'_, '_>,
    keeper: &mut LockKeeper<'_>,
    config: &RunConfig,
    console: &dyn Console,
    interrupt: &mut watch::Receiver<bool>,
    started: Instant,
    mut report: RunReport,
) -> Result<RunReport, RunError> {
    // `[n/N]` progress: N is what the plan holds, n counts steps taken.
    let (total, mut step_no) = (report.pending, 0usize);
    // The tripwire is armed once per run, at the first script that runs
    // (a run with nothing to execute never pays for it); each execution
    // gets its own report (crate::tripwire::arm).
    let mut wire: Option<crate::tripwire::Tripwire> = None;
    while let Some(step) = run.next_step().map_err(RunError::NoRoom)? {
        if *interrupt.borrow() {
            report.elapsed_ms = started.elapsed().as_millis();
            return Err(RunError::Interrupted {
                slug: None,
                report: Box::new(report),
            });
        }
        let begun = Instant::now();
        let pending = step.pending().clone();
        step_no += 1;
        let mut cluster_commands = None;
        let (attempts, outcome) = match step {
            Step::Blocked { unmet, .. } => {
                console.progress(&format!("{}: not run: {}", pending.slug, unmet.join("; ")));
                (previous_attempts(&pending), CoreOutcome::Blocked { unmet })
            }
            Step::Deferred { waiting_for, .. } => {
                console.progress(&format!(
                    "{}: not yet: waits for {}",
                    pending.slug,
                    waiting_for.join("; ")
                ));
                (
                    previous_attempts(&pending),
                    CoreOutcome::Deferred { waiting_for },
                )
            }
            Step::Execute(_) => {
                failpoint(&format!("before-script:{}", pending.slug));
                // The attempt is noted right before the spawn, with nothing
                // that can fail in between: a crash in that instant
                // over-counts by one, which errs on the safe side (attempts
                // never under-count executions).
                let attempts = note_attempt(run, &pending, &config.holder, keeper).await?;
                console.step(
                    step_no,
                    total,
                    &pending.slug,
                    &format!(
                        "running {} ({}, on-error={}, attempt {attempts})",
                        pending.slug, pending.batch, pending.on_error
                    ),
                );
                let shebang = tree
                    .script(&pending.slug)
                    .map_or("/bin/sh", |sc| sc.header.shebang.as_str());
                let outcome = match execute(
                    tree.root(),
                    shebang,
                    &pending,
                    config,
                    attempts,
                    console,
                    interrupt,
                    keeper,
                    &mut wire,
                )
                .await?
                {
                    Exec::Success(calls) => {
                        failpoint(&format!("after-script:{}", pending.slug));
                        // Tripwire hook 3 of 3: tolerated cluster-command
                        // failures are counted in the entry's message and
                        // in the run report.
                        cluster_commands = Some(calls.summary());
                        match calls.ok_message() {
                            Some(message) => CoreOutcome::SucceededNoting { message },
                            None => CoreOutcome::Succeeded,
                        }
                    }
                    Exec::NotYet { tail } => CoreOutcome::NotYet { message: tail },
                    Exec::Failed { reason, tail } => CoreOutcome::Failed {
                        reason,
                        message: tail,
                    },
                    Exec::Interrupted => {
                        report.results.push(result(
                            &pending,
                            Outcome::Interrupted,
                            Some("interrupted".into()),
                            attempts,
                            begun,
                        ));
                        report.elapsed_ms = started.elapsed().as_millis();
                        return Err(RunError::Interrupted {
                            slug: Some(pending.slug.clone()),
                            report: Box::new(report),
                        });
                    }
                    Exec::LockLost(cause) => {
                        return Err(RunError::LockLost {
                            slug: pending.slug.clone(),
                            cause,
                        });
                    }
                };
                (attempts, outcome)
            }
        };
        let failure = match &outcome {
            CoreOutcome::Succeeded | CoreOutcome::SucceededNoting { .. } => None,
            CoreOutcome::Failed { reason, .. } => Some((Outcome::Failed, reason.clone())),
            CoreOutcome::Blocked { .. } => Some((Outcome::Blocked, REQUIREMENT_UNMET.to_owned())),
            CoreOutcome::NotYet { .. } => Some((Outcome::NotYet, NOT_YET.to_owned())),
            CoreOutcome::Deferred { .. } => Some((Outcome::NotYet, REQUIREMENT_NOT_YET.to_owned())),
        };
        let verdict = run
            .finish(&pending, attempts, outcome)
            .await
            .map_err(|cause| RunError::Unrecorded {
                slug: pending.slug.clone(),
                cause,
            })?;
        match verdict {
            Verdict::Abort { reason, message } => {
                return Err(aborted(
                    report, &pending, reason, message, attempts, begun, started,
                ));
            }
            Verdict::Recorded(EntryState::Ok) => {
                failpoint(&format!("after-record:{}", pending.slug));
                let tolerated = cluster_commands
                    .as_ref()
                    .filter(|c| c.tolerated > 0)
                    .map(|c| format!(" ({} tolerated cluster-command failures)", c.tolerated))
                    .unwrap_or_default();
                console.progress(&format!(
                    "{} ok in {:.1}s{tolerated}",
                    pending.slug,
                    begun.elapsed().as_secs_f64()
                ));
                let mut done = result(&pending, Outcome::Ok, None, attempts, begun);
                done.cluster_commands = cluster_commands;
                report.results.push(done);
            }
            Verdict::Recorded(_) => {
                let (outcome, reason) = failure.unwrap_or((Outcome::Failed, String::new()));
                if outcome == Outcome::Failed {
                    console.progress(&format!(
                        "{} failed ({reason}); on-error=warn: recorded, continuing",
                        pending.slug
                    ));
                } else if outcome == Outcome::NotYet {
                    console.progress(&format!(
                        "{} not yet ({reason}): recorded not-yet, it runs again next time; continuing",
                        pending.slug
                    ));
                }
                report
                    .results
                    .push(result(&pending, outcome, Some(reason), attempts, begun));
            }
        }
        // Between scripts, keep the lock fresh before going on.
        keeper
            .renew_if_due()
            .await
            .map_err(|cause| RunError::LockLost {
                slug: pending.slug.clone(),
                cause,
            })?;
    }
    Ok(finished(report, started, console))
}

/// The pre-run safety scan of one pending script and the `lib/` helpers it
/// sources (made public for `plan`). The bytes scanned must be
/// the bytes the plan checksummed: a script that cannot be read, or changed
/// since the tree was loaded, is refused rather than run unscanned.
pub fn scan(tree: &MigrationsTree, pending: &PendingMigration, lint: &LintConfig) -> Vec<Finding> {
    // Test-only (feature `failpoints`): run unscanned, so the tripwire suite
    // proves the run-time guarantee on its own (tests/tripwire.rs).
    #[cfg(feature = "failpoints")]
    if std::env::var_os("MIGRATE_TEST_SKIP_PRERUN_SCAN").is_some() {
        return Vec::new();
    }
    let file = pending.relative_path.display().to_string();
    let refuse = |message: String| {
        vec![Finding {
            file: file.clone(),
            line: None,
            rule: "changed-on-disk",
            level: Level::Error,
            message,
        }]
    };
    match std::fs::read(tree.root().join(&pending.relative_path)) {
        Err(e) => refuse(format!("cannot be read before running: {e}")),
        Ok(bytes) if migration_core::Sha256Digest::of(&bytes) != pending.sha256 => {
            refuse("changed on disk since the tree was loaded; load it again".into())
        }
        Ok(bytes) => lint_pending(tree.root(), &file, &bytes, lint)
            .into_iter()
            .filter(|f| f.level == Level::Error && UNSAFE_AT_RUNTIME.contains(&f.rule))
            .collect(),
    }
}

/// Ends the run for an `on-error=abort` failure: nothing is recorded.
fn aborted(
    mut report: RunReport,
    pending: &PendingMigration,
    reason: String,
    tail: String,
    attempts: u32,
    begun: Instant,
    started: Instant,
) -> RunError {
    report.results.push(result(
        pending,
        Outcome::Aborted,
        Some(reason.clone()),
        attempts,
        begun,
    ));
    report.elapsed_ms = started.elapsed().as_millis();
    RunError::MigrationFailed {
        slug: pending.slug.clone(),
        reason,
        tail,
        report: Box::new(report),
    }
}

fn result(
    p: &PendingMigration,
    outcome: Outcome,
    reason: Option<String>,
    attempts: u32,
    begun: Instant,
) -> MigrationResult {
    MigrationResult {
        slug: p.slug.to_string(),
        outcome,
        reason,
        attempts,
        duration_ms: begun.elapsed().as_millis(),
        cluster_commands: None,
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_script_changed_or_removed_after_loading_is_refused_not_run_unscanned() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("pre-apply")).unwrap();
        std::fs::create_dir_all(root.join("order.d")).unwrap();
        let header = "#!/bin/sh\n# cozystack-migration: tier=pre-apply\n# cozystack-migration: on-error=abort\n";
        std::fs::write(root.join("pre-apply/a"), format!("{header}echo safe\n")).unwrap();
        std::fs::write(root.join("order.d/00001-v1"), "a\n").unwrap();
        let tree = MigrationsTree::load(root).unwrap();
        let snapshot = migration_core::LedgerSnapshot::default();
        let plan = migration_core::plan(
            &tree,
            Some(&snapshot),
            &PlanRequest::tier(Tier::PreApply),
            &migration_core::PlanContext::at(migration_core::Timestamp::from_unix(0)),
        )
        .unwrap();
        let pending = &plan.pending[0];
        assert!(scan(&tree, pending, &LintConfig::default()).is_empty());
        std::fs::write(
            root.join("pre-apply/a"),
            format!("{header}for x in $(false); do :; done\n"),
        )
        .unwrap();
        let findings = scan(&tree, pending, &LintConfig::default());
        assert_eq!(findings.len(), 1);
        assert_eq!(findings[0].rule, "changed-on-disk");
        std::fs::remove_file(root.join("pre-apply/a")).unwrap();
        assert!(
            scan(&tree, pending, &LintConfig::default())[0]
                .message
                .contains("cannot be read")
        );
    }
}
