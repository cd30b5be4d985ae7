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

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use migration_core::header::Tier;
use migration_core::plan::PendingMigration;
use migration_core::run::{NOT_YET, REQUIREMENT_NOT_YET, REQUIREMENT_UNMET, previous_attempts};
use migration_core::{
    Clock, EntryState, LedgerError, Lock, LockKeeper, LockedLedger, MigrateError, MigrationsTree,
    Migrator, Outcome as CoreOutcome, PlanError, PlanRequest, Prepared, Run, Slug, Step,
    TierSelection, Verdict,
};
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::sync::watch;

use crate::lint::{Finding, Level, LintConfig, lint_pending};
use crate::report::sink;

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
            namespace: "cozy-system".into(),
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

/// Where progress and script output go.
pub trait Console: Send + Sync {
    /// One line of a script's output.
    fn script_line(&self, slug: &Slug, line: &str);
    /// One line of the runner's own progress.
    fn progress(&self, line: &str);
    /// The `n`th of `total` pending scripts starts (`n` counts from 1);
    /// `line` is its progress line. By default printed as progress,
    /// `[n/total]` first.
    fn step(&self, n: usize, total: usize, slug: &Slug, line: &str) {
        let _ = slug;
        self.progress(&format!("[{n}/{total}] {line}"));
    }
}

/// Prints to the process's stdout (or stderr when stdout carries a JSON
/// document).
#[derive(Debug, Clone, Copy)]
pub struct StdConsole {
    /// Send everything to stderr.
    pub stderr_only: bool,
}

impl Console for StdConsole {
    fn script_line(&self, slug: &Slug, line: &str) {
        // Nobody reading any more must not stop a script mid-way.
        if self.stderr_only {
            let event = serde_json::json!({
                "event": "output", "slug": slug.as_str(), "line": line, "text": format!("[{slug}] {line}"),
            });
            sink::stderr_line(&event.to_string());
        } else {
            sink::stdout_line(&format!("[{slug}] {line}"));
        }
    }

    fn progress(&self, line: &str) {
        // In JSON mode stderr is one JSON object per line; `text` is the
        // line text mode prints.
        if self.stderr_only {
            let event =
                serde_json::json!({"event": "progress", "text": format!("migrate: {line}")});
            sink::stderr_line(&event.to_string());
        } else {
            sink::stdout_line(&format!("migrate: {line}"));
        }
    }

    fn step(&self, n: usize, total: usize, slug: &Slug, line: &str) {
        let text = format!("migrate: [{n}/{total}] {line}");
        if self.stderr_only {
            let event = serde_json::json!({
                "event": "start", "n": n, "total": total, "slug": slug.as_str(), "text": text,
            });
            sink::stderr_line(&event.to_string());
        } else {
            sink::stdout_line(&text);
        }
    }
}

/// How one migration ended in this run.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    /// Exit 0, recorded `ok`.
    Ok,
    /// Failed under `on-error=warn`, recorded `failed`.
    Failed,
    /// Not executed because a requirement is unmet; recorded `failed` (warn).
    Blocked,
    /// Exited 75 (preconditions not met), or waits for a requirement that
    /// did: recorded `not-yet`, run again next time.
    NotYet,
    /// Failed under `on-error=abort`: nothing recorded, the run stopped.
    Aborted,
    /// Stopped by SIGTERM/SIGINT: nothing recorded, the run stopped.
    Interrupted,
}

/// One migration's result.
#[derive(Debug, Clone, serde::Serialize)]
pub struct MigrationResult {
    /// The slug.
    pub slug: String,
    /// How it ended.
    pub outcome: Outcome,
    /// Why it failed, if it did.
    pub reason: Option<String>,
    /// Executions counted so far (including this one).
    pub attempts: u32,
    /// Wall time, in milliseconds.
    pub duration_ms: u128,
    /// What the script's cluster-command calls did (scripts recorded `ok`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster_commands: Option<crate::tripwire::CallSummary>,
}

/// What a run did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct RunReport {
    /// The tier.
    pub tier: String,
    /// The ONLY slug.
    pub only: Option<String>,
    /// The ledger did not exist (nothing ran).
    pub fresh_install: bool,
    /// Why this is a fresh install (`null` when it is not).
    pub fresh_install_reason: Option<String>,
    /// Entries written before running (fresh install, legacy, revoked).
    pub seeded: usize,
    /// Migrations pending at the start.
    pub pending: usize,
    /// Per-migration results, in order.
    pub results: Vec<MigrationResult>,
    /// Wall time of the whole run, in milliseconds.
    pub elapsed_ms: u128,
}

impl RunReport {
    fn count(&self, outcome: &Outcome) -> usize {
        self.results
            .iter()
            .filter(|r| &r.outcome == outcome)
            .count()
    }

    /// The closing summary line.
    pub fn summary(&self) -> String {
        let not_run = self.pending - self.results.len();
        format!(
            "done: {} ok, {} failed, {} blocked, {} not yet, {} not run, in {:.1}s",
            self.count(&Outcome::Ok),
            self.count(&Outcome::Failed),
            self.count(&Outcome::Blocked),
            self.count(&Outcome::NotYet),
            not_run + self.count(&Outcome::Aborted) + self.count(&Outcome::Interrupted),
            self.elapsed_ms as f64 / 1000.0
        )
    }
}

/// Why a run stopped early or did not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunError {
    /// The plan refused; nothing ran.
    #[error(transparent)]
    Refused(PlanError),
    /// A pending script has a pattern that could hide its failure; nothing ran.
    #[error("refusing to run: {} unsafe pattern(s) in pending scripts:\n{}", findings.len(), findings.iter().map(|f| format!("  {}:{}: [{}] {}", f.file, f.line.unwrap_or(0), f.rule, f.message)).collect::<Vec<_>>().join("\n"))]
    Unsafe {
        /// The findings.
        findings: Vec<Finding>,
    },
    /// The ledger failed.
    #[error(transparent)]
    Ledger(#[from] LedgerError),
    /// No ledger exists and one was required (`--require-existing-ledger`);
    /// nothing was written and nothing ran.
    #[error(transparent)]
    NoLedger(MigrateError),
    /// The ledger has no room for the next migration's records; it was not
    /// executed.
    #[error(transparent)]
    NoRoom(MigrateError),
    /// Recording an outcome failed after the script ran.
    #[error(
        "{slug} ran but its outcome could not be recorded: {cause}; the next run executes it again (migrations are safe to run twice)"
    )]
    Unrecorded {
        /// The slug.
        slug: Slug,
        /// The error.
        cause: MigrateError,
    },
    /// Another runner held the lock for longer than we were willing to wait.
    #[error("another runner holds the lock: {cause}; gave up after waiting {waited:?}")]
    LockBusy {
        /// The last refusal.
        cause: LedgerError,
        /// How long we waited.
        waited: Duration,
    },
    /// The lock was lost mid-run; the current script was stopped.
    #[error("lost the run lock while running {slug}: {cause}; stopped it and recorded nothing")]
    LockLost {
        /// The script that was running.
        slug: Slug,
        /// The renew error.
        cause: LedgerError,
    },
    /// An `on-error=abort` migration failed; nothing was recorded for it.
    #[error("migration {slug} failed ({reason}); nothing recorded, upgrade stopped\n{tail}")]
    MigrationFailed {
        /// The slug.
        slug: Slug,
        /// Why.
        reason: String,
        /// The end of its output.
        tail: String,
        /// The report up to the failure.
        report: Box<RunReport>,
    },
    /// SIGTERM or SIGINT arrived; the running script was stopped.
    #[error("{}", interrupted_text(slug.as_ref(), report))]
    Interrupted {
        /// The script that was running, if any.
        slug: Option<Slug>,
        /// The report up to the interruption.
        report: Box<RunReport>,
    },
    /// A script could not be started.
    #[error("cannot start {slug}: {message}")]
    Spawn {
        /// The slug.
        slug: Slug,
        /// Why.
        message: String,
    },
}

/// Test-only crash points (feature `failpoints`): when `MIGRATE_FAILPOINT`
/// names this point, the process kills itself with SIGKILL, as a node
/// failure or OOM kill would, without unwinding or releasing anything. The
/// reliability suite uses it to crash the real binary at every step
/// boundary. Without the feature this compiles to nothing.
fn failpoint(point: &str) {
    #[cfg(feature = "failpoints")]
    if std::env::var("MIGRATE_FAILPOINT").is_ok_and(|v| v == point) {
        let _ = nix::sys::signal::kill(nix::unistd::getpid(), Signal::SIGKILL);
    }
    #[cfg(not(feature = "failpoints"))]
    let _ = point;
}

/// Keeps the output tail within a byte budget, by whole lines.
#[derive(Debug, Default)]
struct Tail {
    lines: VecDeque<String>,
    bytes: usize,
    cap: usize,
}

impl Tail {
    fn push(&mut self, line: &str) {
        let mut line = line.to_owned();
        if line.len() > self.cap {
            let mut cut = line.len() - self.cap;
            while !line.is_char_boundary(cut) {
                cut += 1;
            }
            line = line[cut..].to_owned();
        }
        self.bytes += line.len();
        self.lines.push_back(line);
        // The text joins lines with '\n': its size is the bytes plus one
        // separator fewer than there are lines.
        while self.bytes + self.lines.len().saturating_sub(1) > self.cap {
            match self.lines.pop_front() {
                Some(old) => self.bytes -= old.len(),
                None => break,
            }
        }
    }

    fn text(&self) -> String {
        self.lines.iter().cloned().collect::<Vec<_>>().join("\n")
    }
}

/// How one execution ended.
enum Exec {
    /// Exit 0 and no unaccepted cluster-command failure.
    Success(crate::tripwire::Calls),
    /// Exit status 75: preconditions not met; `tail` names any
    /// cluster-command failure the script did not acknowledge.
    NotYet {
        tail: String,
    },
    Failed {
        reason: String,
        tail: String,
    },
    Interrupted,
    LockLost(LedgerError),
}

/// Runs the tier. `interrupt` turns true on SIGTERM/SIGINT (the binary
/// wires the signals; tests flip it directly).
pub async fn run(
    tree: &MigrationsTree,
    ledger: &dyn LockedLedger,
    clock: &dyn Clock,
    config: &RunConfig,
    console: &dyn Console,
    mut interrupt: watch::Receiver<bool>,
) -> Result<RunReport, RunError> {
    let started = Instant::now();
    failpoint("before-lock");
    let mut keeper = acquire(ledger, config, console, &mut interrupt, started).await?;
    failpoint("after-lock");
    let migrator = Migrator::new(tree, ledger, clock)
        .with_image(config.image.clone())
        .with_allowed_interpreters(config.allowed_interpreters.clone())
        .with_require_existing_ledger(config.require_existing_ledger);
    let result = locked_run(
        &migrator,
        &mut keeper,
        config,
        console,
        &mut interrupt,
        started,
    )
    .await;
    // Released on every path; a failed release only delays the next runner
    // until the lease expires, so it is reported, not fatal.
    if let Err(e) = keeper.release().await {
        console.progress(&format!(
            "warning: could not release the run lock ({e}); it expires by itself"
        ));
    }
    result
}

async fn acquire<'l>(
    lock: &'l dyn Lock,
    config: &RunConfig,
    console: &dyn Console,
    interrupt: &mut watch::Receiver<bool>,
    started: Instant,
) -> Result<LockKeeper<'l>, RunError> {
    let mut announced = false;
    loop {
        match LockKeeper::acquire(lock, &config.holder, config.lock_ttl).await {
            Ok(keeper) => return Ok(keeper),
            Err(cause @ LedgerError::LockHeld { .. }) => {
                let waited = started.elapsed();
                if waited >= config.lock_wait {
                    return Err(RunError::LockBusy { cause, waited });
                }
                if !announced {
                    console.progress(&format!("waiting for the run lock: {cause}"));
                    announced = true;
                }
                let pause = Duration::from_millis(500).min(config.lock_wait - waited);
                tokio::select! {
                    () = tokio::time::sleep(pause) => {}
                    _ = interrupt.changed() => {}
                }
                if *interrupt.borrow() {
                    return Err(RunError::Interrupted {
                        slug: None,
                        report: Box::new(empty_report(config)),
                    });
                }
            }
            Err(e) => return Err(e.into()),
        }
    }
}

fn empty_report(config: &RunConfig) -> RunReport {
    RunReport {
        tier: config.tier.to_string(),
        only: config.only.as_ref().map(ToString::to_string),
        fresh_install: false,
        fresh_install_reason: None,
        seeded: 0,
        pending: 0,
        results: Vec::new(),
        elapsed_ms: 0,
    }
}

async fn locked_run(
    migrator: &Migrator<'_>,
    keeper: &mut LockKeeper<'_>,
    config: &RunConfig,
    console: &dyn Console,
    interrupt: &mut watch::Receiver<bool>,
    started: Instant,
) -> Result<RunReport, RunError> {
    let tree = migrator.tree();
    let request = PlanRequest {
        tiers: TierSelection::One(config.tier),
        only: config.only.clone(),
    };
    let prepared = migrator.prepare(&request).await.map_err(|e| match e {
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

    let mut report = RunReport {
        tier: config.tier.to_string(),
        only: config.only.as_ref().map(ToString::to_string),
        fresh_install: plan.fresh_install,
        fresh_install_reason: plan
            .fresh_install
            .then(|| crate::report::fresh_install_reason(&migrator.ledger().describe())),
        seeded: prepared.written.len(),
        pending: plan.pending.len(),
        results: Vec::new(),
        elapsed_ms: 0,
    };
    console.progress(&format!(
        "{} pending in tier {}{}, {} seeded{}",
        plan.pending.len(),
        config.tier,
        config
            .only
            .as_ref()
            .map(|o| format!(" (ONLY={o})"))
            .unwrap_or_default(),
        prepared.written.len(),
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

    let mut run = migrator
        .begin(Prepared {
            plan,
            written: prepared.written,
            usage: prepared.usage,
        })
        .with_message_limit(config.tail_bytes);
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
                let attempts = note_attempt(&mut run, &pending, &config.holder).await?;
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
    report.elapsed_ms = started.elapsed().as_millis();
    console.progress(&report.summary());
    Ok(report)
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

/// A token unique to one execution: holder, slug, wall-clock nanoseconds and
/// a process-wide counter. It must differ between executions even when the
/// injected clock stands still, or a re-run would not count.
fn attempt_token(holder: &str, slug: &Slug) -> String {
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("{holder}/{slug}/{nanos}/{n}")
}

/// Notes a started execution under a token unique to it.
async fn note_attempt(
    run: &mut Run<'_, '_>,
    pending: &PendingMigration,
    holder: &str,
) -> Result<u32, RunError> {
    let token = attempt_token(holder, &pending.slug);
    Ok(run.note_attempt(pending, &token).await?)
}

/// The interpreter command for a script: its shebang words, then errexit
/// (and pipefail for bash, which supports it), then the script path.
fn command_for(shebang: &str, path: &Path) -> tokio::process::Command {
    let mut words = shebang.split_whitespace();
    let program = words.next().unwrap_or("/bin/sh");
    let args: Vec<&str> = words.collect();
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(&args);
    let is_bash = program.ends_with("/bash") || args.first().is_some_and(|a| *a == "bash");
    cmd.arg("-e");
    if is_bash {
        cmd.args(["-o", "pipefail"]);
    }
    cmd.arg(path);
    cmd
}

fn signal_group(pgid: i32, signal: Signal) {
    // ESRCH (the group is gone) is the expected outcome after a clean exit.
    let _ = killpg(Pid::from_raw(pgid), signal);
}

async fn pump<R: AsyncRead + Unpin>(
    reader: R,
    slug: Slug,
    console: &dyn Console,
    tail: Arc<Mutex<Tail>>,
) {
    let mut reader = BufReader::new(reader);
    let mut buf = Vec::new();
    loop {
        buf.clear();
        match reader.read_until(b'\n', &mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {
                let text = String::from_utf8_lossy(&buf);
                let line = text.trim_end_matches(['\n', '\r']);
                console.script_line(&slug, line);
                tail.lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(line);
            }
        }
    }
}

#[allow(clippy::too_many_arguments)]
async fn execute(
    root: &Path,
    shebang: &str,
    pending: &PendingMigration,
    config: &RunConfig,
    attempt: u32,
    console: &dyn Console,
    interrupt: &mut watch::Receiver<bool>,
    keeper: &mut LockKeeper<'_>,
    wire: &mut Option<crate::tripwire::Tripwire>,
) -> Result<Exec, RunError> {
    let spawn_error = |e: std::io::Error| RunError::Spawn {
        slug: pending.slug.clone(),
        message: e.to_string(),
    };
    // Tripwire hook 1 of 3: cluster commands go through the runner's shim
    // (PATH, KUBECTL/HELM/FLUX and a fresh report file; see crate::tripwire).
    let armed = match wire.take() {
        Some(w) => wire.insert(w),
        None => wire.insert(
            crate::tripwire::Tripwire::arm(&config.tripwire, root, config.grace)
                .map_err(spawn_error)?,
        ),
    };
    let path: PathBuf = root.join(&pending.relative_path);
    let mut cmd = command_for(shebang, &path);
    cmd.current_dir(root)
        .env("MIGRATION_SLUG", pending.slug.as_str())
        .env("MIGRATION_TIER", pending.tier.as_str())
        .env("MIGRATION_TREE", root)
        .env("MIGRATION_NAMESPACE", &config.namespace)
        .env("MIGRATION_BATCH", &pending.batch)
        .env("MIGRATION_ATTEMPT", attempt.to_string())
        // A script's own dry-run switch must not be inherited by a real
        // run: it would exit 0 having done nothing, and be recorded `ok`.
        // A dry run is `migrate run --dry-run`, which executes nothing.
        .env_remove("MIGRATION_DRY_RUN")
        .stdin(Stdio::null())
        .process_group(0)
        .kill_on_drop(true);
    // One pipe for both streams, as `2>&1` would: the tail then holds the
    // output in the order the script wrote it.
    let (reader, writer) = std::io::pipe().map_err(spawn_error)?;
    cmd.stdout(writer.try_clone().map_err(spawn_error)?)
        .stderr(writer);
    let report = armed.guard(&mut cmd).map_err(spawn_error)?;
    let mut child = cmd.spawn().map_err(spawn_error)?;
    // Our copies of the write end must go, or the pipe never reaches EOF.
    drop(cmd);
    let output =
        tokio::net::unix::pipe::Receiver::from_owned_fd(std::os::fd::OwnedFd::from(reader))
            .map_err(spawn_error)?;
    let pgid = child
        .id()
        .and_then(|id| i32::try_from(id).ok())
        .unwrap_or(0);
    // The run's supervisor stops this group should the runner die (even
    // of SIGKILL) before the group is killed and released below.
    if let Err(e) = armed.watch(pgid) {
        signal_group(pgid, Signal::SIGKILL);
        let _ = child.wait().await;
        return Err(spawn_error(e));
    }
    let tail = Arc::new(Mutex::new(Tail {
        cap: config.tail_bytes,
        ..Tail::default()
    }));
    let readers = pump(output, pending.slug.clone(), console, tail.clone());

    let deadline = tokio::time::Instant::now() + config.timeout;
    let renew_every = keeper.period();
    let waiting = async {
        let mut renew =
            tokio::time::interval_at(tokio::time::Instant::now() + renew_every, renew_every);
        loop {
            tokio::select! {
                status = child.wait() => {
                    return match status {
                        Ok(s) if s.success() => Exec::Success(crate::tripwire::Calls::default()),
                        Ok(s) => {
                            use std::os::unix::process::ExitStatusExt;
                            let reason = match (s.code(), s.signal()) {
                                (Some(code), _) => format!("exit-status-{code}"),
                                (None, Some(sig)) => format!("signal-{sig}"),
                                _ => "unknown-exit".to_owned(),
                            };
                            Exec::Failed { reason, tail: String::new() }
                        }
                        Err(e) => Exec::Failed { reason: "wait-error".into(), tail: e.to_string() },
                    };
                }
                () = tokio::time::sleep_until(deadline) => {
                    console.progress(&format!("{} timed out after {:?}; stopping its process group", pending.slug, config.timeout));
                    stop(&mut child, pgid, config.grace).await;
                    return Exec::Failed { reason: "timeout".into(), tail: String::new() };
                }
                _ = interrupt.changed() => {
                    if *interrupt.borrow() {
                        console.progress(&format!("interrupted: forwarding SIGTERM to {} and waiting up to {:?}", pending.slug, config.grace));
                        stop(&mut child, pgid, config.grace).await;
                        return Exec::Interrupted;
                    }
                }
                _ = renew.tick() => {
                    if let Err(e) = keeper.renew().await {
                        stop(&mut child, pgid, config.grace).await;
                        return Exec::LockLost(e);
                    }
                }
            }
        }
    };
    let (exec, ()) = tokio::join!(
        async {
            let exec = waiting.await;
            // Stragglers left in the group would hold the pipes open.
            signal_group(pgid, Signal::SIGKILL);
            exec
        },
        readers
    );
    // The group is gone; a supervisor that cannot be told so is caught at
    // the next script's `watch`.
    let _ = armed.release(pgid);
    let tail = tail.lock().unwrap_or_else(PoisonError::into_inner).text();
    // Tripwire hook 2 of 3: exit 0 after an unaccepted cluster-command
    // failure is a failure (reason masked-failure), however it was masked.
    let calls = report.finish();
    if let Exec::Failed { reason, .. } = &exec
        && reason == NOT_YET
    {
        return Ok(Exec::NotYet {
            tail: not_yet_message(&calls, &tail, config.tail_bytes),
        });
    }
    if let Exec::Success(_) = exec {
        return Ok(match calls.masked_failure() {
            Some(message) => Exec::Failed {
                reason: crate::tripwire::MASKED_FAILURE.into(),
                tail: crate::tripwire::compose(&message, &tail, config.tail_bytes),
            },
            None => Exec::Success(calls),
        });
    }
    Ok(match exec {
        Exec::Failed {
            reason,
            tail: extra,
        } => Exec::Failed {
            reason,
            tail: if extra.is_empty() {
                tail
            } else {
                format!("{tail}\n{extra}")
            },
        },
        other => other,
    })
}

/// The message of a script that exited 75: that, the cluster-command calls
/// that failed unacknowledged before it (still not `ok`: the migration
/// stays `not-yet`), then the end of its output.
fn not_yet_message(calls: &crate::tripwire::Calls, tail: &str, cap: usize) -> String {
    let mut text = format!(
        "exit status {}: preconditions not met; it runs again next time\n",
        migration_core::run::NOT_YET_EXIT_STATUS
    );
    let failed: Vec<_> = calls.calls.iter().filter(|c| c.failed()).collect();
    if !failed.is_empty() {
        text.push_str(&format!(
            "{} cluster-command call(s) failed before it:\n",
            failed.len()
        ));
        for c in failed {
            text.push_str(&format!("  {}\n", c.describe()));
        }
    }
    crate::tripwire::compose(&text, tail, cap)
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

/// Set by a second SIGINT/SIGTERM: a script being stopped is killed at
/// once instead of after its grace period.
static ESCALATED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Escalates a stop in progress (or the next one) to SIGKILL at once.
pub fn escalate() {
    ESCALATED.store(true, std::sync::atomic::Ordering::SeqCst);
}

/// SIGTERM to the whole group, then SIGKILL after the grace period, or as
/// soon as [`escalate`] is called.
async fn stop(child: &mut tokio::process::Child, pgid: i32, grace: Duration) {
    signal_group(pgid, Signal::SIGTERM);
    let deadline = tokio::time::Instant::now() + grace;
    loop {
        if ESCALATED.load(std::sync::atomic::Ordering::SeqCst) {
            break;
        }
        let slice = deadline
            .saturating_duration_since(tokio::time::Instant::now())
            .min(Duration::from_millis(50));
        if slice.is_zero() {
            break;
        }
        if tokio::time::timeout(slice, child.wait()).await.is_ok() {
            return;
        }
    }
    signal_group(pgid, Signal::SIGKILL);
    let _ = child.wait().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tail_keeps_the_last_lines_within_the_budget() {
        let mut tail = Tail {
            cap: 10,
            ..Tail::default()
        };
        for line in ["one", "two", "three", "four"] {
            tail.push(line);
        }
        assert_eq!(tail.text(), "three\nfour");
        tail.push(&"é".repeat(20));
        assert!(tail.text().len() <= 10);
        assert!(tail.text().chars().all(|c| c == 'é'));
    }

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

    #[test]
    fn bash_gets_pipefail_and_sh_does_not() {
        let sh = format!("{:?}", command_for("/bin/sh", Path::new("x")).as_std());
        let bash = format!(
            "{:?}",
            command_for("/usr/bin/env bash", Path::new("x")).as_std()
        );
        assert!(sh.contains("\"-e\"") && !sh.contains("pipefail"), "{sh}");
        assert!(
            bash.contains("\"bash\" \"-e\" \"-o\" \"pipefail\""),
            "{bash}"
        );
    }
}
