//! The step loop: each pending migration in order, its attempt noted
//! with the previous outcome, run, and its outcome recorded, until the
//! plan is done or the run must stop.

use std::time::Instant;

use migration_core::plan::PendingMigration;
use migration_core::run::{
    NOT_YET, REQUIREMENT_NOT_YET, REQUIREMENT_UNMET, not_run, previous_attempts,
};
use migration_core::{EntryState, Outcome as CoreOutcome, Run, Step, Verdict};

use crate::lock::note_attempt;
use crate::outcome::{LockLostAt, MigrationResult, Outcome, RunError, RunReport};
use crate::process::{Exec, Scripts};
use crate::{failpoint, finished};

/// The pending migrations, in order, until the plan is done or the run
/// must stop.
pub(super) async fn steps(
    scripts: &mut Scripts<'_, '_>,
    run: &mut Run<'_, '_>,
    started: Instant,
    mut report: RunReport,
) -> Result<RunReport, RunError> {
    let (tree, config, console) = (scripts.tree, scripts.config, scripts.console);
    // `[n/N]` progress: N is what the plan holds, n counts steps taken.
    let (total, mut step_no) = (report.pending, 0usize);
    while let Some(step) = run.next_step().map_err(RunError::NoRoom)? {
        if *scripts.interrupt.borrow() {
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
                let attempts = note_attempt(run, &pending, &config.holder, scripts.keeper).await?;
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
                let outcome = match scripts.execute(shebang, &pending, attempts).await? {
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
                            at: LockLostAt::Running,
                            cause,
                            unrecorded: Vec::new(),
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
        scripts
            .keeper
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
