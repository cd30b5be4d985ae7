//! The step loop: each pending migration in order, its attempt noted
//! with the previous outcome, run, and its outcome recorded, until the
//! plan is done or the run must stop.

use std::collections::HashMap;
use std::time::Instant;

use crate::entry::EntryState;
use crate::lock::LockKeeper;
use crate::plan::PendingMigration;
use crate::run::{Outcome, Run, Step, Verdict, not_run, previous_attempts};
use crate::slug::Slug;
use crate::tree::MigrationsTree;

use super::waiting::note_attempt;
use super::{
    Console, Ended, Executor, Job, LockLostAt, MigrationResult, RunError, RunReport, RunSettings,
    ScriptEnd, finished,
};

/// What the step loop works with besides the run itself.
pub(super) struct Stepping<'s, 'k> {
    pub(super) tree: &'s MigrationsTree,
    pub(super) config: &'s RunSettings,
    pub(super) console: &'s dyn Console,
    pub(super) executor: &'s mut dyn Executor,
    pub(super) keeper: &'s mut LockKeeper<'k>,
    /// The bytes the pre-run scan read, per slug: what runs.
    pub(super) scripts: &'s HashMap<Slug, Vec<u8>>,
}

/// The pending migrations, in order, until the plan is done or the run
/// must stop.
pub(super) async fn steps(
    s: Stepping<'_, '_>,
    run: &mut Run<'_, '_>,
    started: Instant,
    mut report: RunReport,
) -> Result<RunReport, RunError> {
    let Stepping {
        tree,
        config,
        console,
        executor,
        keeper,
        scripts,
    } = s;
    // `[n/N]` progress: N is what the plan holds, n counts steps taken.
    let (total, mut step_no) = (report.pending, 0usize);
    while let Some(step) = run.next_step().map_err(RunError::NoRoom)? {
        if executor.interrupted() {
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
                console.progress(&format!("{}: {}", pending.slug, not_run(&unmet)));
                (previous_attempts(&pending), Outcome::Blocked { unmet })
            }
            Step::Deferred { waiting_for, .. } => {
                console.progress(&format!(
                    "{}: not yet: waits for {}",
                    pending.slug,
                    waiting_for.join("; ")
                ));
                (
                    previous_attempts(&pending),
                    Outcome::Deferred { waiting_for },
                )
            }
            Step::Execute(_) => {
                executor.checkpoint(&format!("before-script:{}", pending.slug));
                // What runs is what the scan read; a script it did not read
                // is never run unscanned.
                let Some(script) = scripts.get(&pending.slug) else {
                    return Err(RunError::Spawn {
                        slug: pending.slug.clone(),
                        message: "it was not scanned before the run; refusing to run it unscanned"
                            .into(),
                    });
                };
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
                let job = Job {
                    pending: &pending,
                    attempt: attempts,
                    shebang,
                    script,
                    // Taken or renewed by the attempt's write: held here.
                    lease_live_until: keeper.live_until().unwrap_or_else(Instant::now),
                    lease_ttl: config.lock_ttl,
                    message_limit: config.message_limit,
                };
                let outcome = match run_to_end(executor, job, keeper).await? {
                    ScriptEnd::Ran {
                        outcome,
                        cluster_commands: calls,
                    } => {
                        if Ended::recorded(&outcome) == Ended::Ok {
                            executor.checkpoint(&format!("after-script:{}", pending.slug));
                        }
                        cluster_commands = calls;
                        outcome
                    }
                    ScriptEnd::Interrupted => {
                        report.results.push(result(
                            &pending,
                            Ended::Interrupted,
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
                };
                (attempts, outcome)
            }
        };
        let ended = Ended::recorded(&outcome);
        let reason = outcome.reason().map(str::to_owned);
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
                executor.checkpoint(&format!("after-record:{}", pending.slug));
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
                let mut done = result(&pending, Ended::Ok, None, attempts, begun);
                done.cluster_commands = cluster_commands;
                report.results.push(done);
            }
            Verdict::Recorded(_) => {
                let reason = reason.unwrap_or_default();
                match ended {
                    Ended::Failed => console.progress(&format!(
                        "{} failed ({reason}); on-error=warn: recorded, continuing",
                        pending.slug
                    )),
                    Ended::NotYet => console.progress(&format!(
                        "{} not yet ({reason}): recorded not-yet, it runs again next time; continuing",
                        pending.slug
                    )),
                    _ => {}
                }
                report
                    .results
                    .push(result(&pending, ended, Some(reason), attempts, begun));
            }
        }
        // Between scripts, keep the lock fresh before going on.
        keeper
            .renew_if_due()
            .await
            .map_err(|cause| RunError::LockLost {
                slug: pending.slug.clone(),
                at: LockLostAt::After,
                cause,
                unrecorded: Vec::new(),
            })?;
    }
    Ok(finished(report, started, console))
}

/// Starts `job` and waits for its end, renewing the lock whenever it is
/// due meanwhile (the run's one renewal: between steps it is
/// [`LockKeeper::renew_if_due`], the same keeper), and telling the script
/// each time how long its lease is live. A renewal that fails stops the
/// script: the lock is lost, and nothing is recorded (CONTRACT.md §5.5).
async fn run_to_end(
    executor: &mut dyn Executor,
    job: Job<'_>,
    keeper: &mut LockKeeper<'_>,
) -> Result<ScriptEnd, RunError> {
    let slug = job.pending.slug.clone();
    let mut running = executor
        .start(job)
        .await
        .map_err(|message| RunError::Spawn {
            slug: slug.clone(),
            message,
        })?;
    loop {
        if let Some(exec) = running.wait(keeper.renewal_due()).await {
            return Ok(exec);
        }
        if !keeper.renewal_due().is_zero() {
            continue;
        }
        match keeper.renew().await {
            Ok(()) => {
                if let Some(until) = keeper.live_until() {
                    running.lease_renewed(until);
                }
            }
            Err(cause) => {
                running.stop().await;
                return Err(RunError::LockLost {
                    slug,
                    at: LockLostAt::Running,
                    cause,
                    unrecorded: Vec::new(),
                });
            }
        }
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
        Ended::Aborted,
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
    outcome: Ended,
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
