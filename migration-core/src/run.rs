//! The run loop's rules, once: which migration comes next, whether it may
//! execute, and what its outcome records.
//!
//! A [`Run`] walks a prepared plan's pending list in manifest order. The
//! program that executes scripts (the hook runner, or a Job the operator
//! started) asks for the [`Run::next_step`], notes the attempt right before
//! it spawns the script ([`Run::note_attempt`]), and hands the outcome back
//! ([`Run::finish`]). Everything that decides lives here: requirements
//! re-checked against the states reached earlier in the same run, the entry
//! an outcome becomes, and whether `on-error` records a failure or stops the
//! run with nothing recorded. The caller only spawns processes and streams
//! their output.

use std::collections::HashMap;

use crate::entry::{EntryState, LedgerEntry};
use crate::header::OnError;
use crate::ledger::LedgerError;
use crate::migrator::{MigrateError, Migrator, Prepared};
use crate::plan::{PendingMigration, Plan, Unmet};
use crate::slug::Slug;

/// The reason recorded for a migration that did not execute because a
/// requirement is unmet.
pub const REQUIREMENT_UNMET: &str = "requirement-unmet";

/// What to do with the next pending migration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Execute it: note the attempt, spawn the script, then [`Run::finish`].
    Execute(PendingMigration),
    /// Do not execute it: a requirement is unmet. Hand it to
    /// [`Run::finish`] with [`Outcome::Blocked`] so `on-error` decides.
    Blocked {
        /// The migration.
        pending: PendingMigration,
        /// Every unmet requirement, as "`<target> <why>`".
        unmet: Vec<String>,
    },
}

impl Step {
    /// The migration this step is about.
    pub fn pending(&self) -> &PendingMigration {
        match self {
            Step::Execute(p) | Step::Blocked { pending: p, .. } => p,
        }
    }
}

/// How one migration ended, as the executing program saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The script exited 0 and nothing says its work was skipped.
    Succeeded,
    /// The script failed (non-zero exit, signal, timeout, a masked failure).
    Failed {
        /// A short machine-readable reason (`exit-status-1`, `timeout`, ...).
        reason: String,
        /// What explains it: the end of the script's output.
        message: String,
    },
    /// It was not executed because of [`Step::Blocked`].
    Blocked {
        /// The unmet requirements, as listed by the step.
        unmet: Vec<String>,
    },
}

/// What [`Run::finish`] did with an outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The outcome was recorded in this state; the run goes on.
    Recorded(EntryState),
    /// An `on-error=abort` migration failed or was blocked: nothing was
    /// recorded for it and the run must stop (it runs again next time).
    Abort {
        /// The reason.
        reason: String,
        /// The message.
        message: String,
    },
}

/// One run over a prepared plan.
#[derive(Debug)]
pub struct Run<'m, 'a> {
    migrator: &'m Migrator<'a>,
    prepared: Prepared,
    next: usize,
    /// States reached in this run, for requirements of later migrations.
    reached: HashMap<Slug, EntryState>,
}

impl<'a> Migrator<'a> {
    /// Starts a run over `prepared` (from [`Migrator::prepare`]). The caller
    /// holds the run lock for as long as the run lasts.
    pub fn begin(&self, prepared: Prepared) -> Run<'_, 'a> {
        Run {
            migrator: self,
            prepared,
            next: 0,
            reached: HashMap::new(),
        }
    }
}

impl Run<'_, '_> {
    /// The plan being run.
    pub fn plan(&self) -> &Plan {
        &self.prepared.plan
    }

    /// Slugs the preparation's seeding wrote.
    pub fn seeded(&self) -> &[Slug] {
        &self.prepared.written
    }

    /// The next migration and whether it may execute, or `None` when every
    /// pending migration has been handed out.
    pub fn next_step(&mut self) -> Option<Step> {
        let pending = self.prepared.plan.pending.get(self.next)?.clone();
        self.next += 1;
        let mut unmet: Vec<String> = pending
            .unmet
            .iter()
            .map(|(target, why)| format!("{target} {why}"))
            .collect();
        for target in &pending.requires {
            if let Some(why) = self
                .reached
                .get(target)
                .and_then(|s| Unmet::in_this_run(*s))
            {
                unmet.push(format!("{target} {why}"));
            }
        }
        Some(if unmet.is_empty() {
            Step::Execute(pending)
        } else {
            Step::Blocked { pending, unmet }
        })
    }

    /// Notes that `pending` is about to execute and returns the executions
    /// counted so far, this one included. `token` must be unique to this
    /// execution: noting twice with one token counts once, so a lost reply
    /// retried by the backend is not counted twice.
    pub async fn note_attempt(
        &self,
        pending: &PendingMigration,
        token: &str,
    ) -> Result<u32, LedgerError> {
        let floor = previous_attempts(pending);
        self.migrator
            .ledger()
            .note_attempt(&pending.slug, token, floor)
            .await
    }

    /// Records `outcome` of `pending` (executed `attempts` times so far), or
    /// tells the caller to stop. Under `on-error=abort` a failed or blocked
    /// migration records nothing; under `warn` it is recorded `failed` and
    /// the run goes on. A record that cannot be confirmed is an error, never
    /// assumed written.
    pub async fn finish(
        &mut self,
        pending: &PendingMigration,
        attempts: u32,
        outcome: Outcome,
    ) -> Result<Verdict, MigrateError> {
        let (state, failure) = match outcome {
            Outcome::Succeeded => (EntryState::Ok, None),
            Outcome::Failed { reason, message } => (EntryState::Failed, Some((reason, message))),
            Outcome::Blocked { unmet } => (
                EntryState::Failed,
                Some((
                    REQUIREMENT_UNMET.to_owned(),
                    format!("not run: {}", unmet.join("; ")),
                )),
            ),
        };
        if let (EntryState::Failed, OnError::Abort, Some((reason, message))) =
            (state, pending.on_error, &failure)
        {
            return Ok(Verdict::Abort {
                reason: reason.clone(),
                message: message.clone(),
            });
        }
        let entry = self.entry(pending, state, attempts, failure);
        self.migrator.record(&pending.slug, &entry).await?;
        self.reached.insert(pending.slug.clone(), state);
        Ok(Verdict::Recorded(state))
    }

    /// The entry an outcome becomes: the script's checksum, the `lib/`
    /// digest, the batch and image, and the attempt count.
    fn entry(
        &self,
        pending: &PendingMigration,
        state: EntryState,
        attempts: u32,
        failure: Option<(String, String)>,
    ) -> LedgerEntry {
        let (reason, message) = failure.map_or((None, None), |(r, m)| (Some(r), Some(m)));
        let context = self.migrator.context();
        LedgerEntry {
            sha256: Some(pending.sha256),
            lib_sha256: Some(self.migrator.tree().lib_sha256()),
            batch: Some(pending.batch.clone()),
            image: context.image,
            attempts,
            reason,
            message,
            ..LedgerEntry::new(state, context.now)
        }
    }
}

/// Executions already counted for `pending` before this run: an `ONLY`
/// re-run carries the recorded entry's count on.
pub fn previous_attempts(pending: &PendingMigration) -> u32 {
    pending.previous.as_ref().map_or(0, |e| e.attempts)
}
