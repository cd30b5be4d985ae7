//! The run loop's rules, once: which migration comes next, whether it may
//! execute, and what its outcome records.
//!
//! A [`Run`] walks a prepared plan's pending list in manifest order. The
//! run's step loop ([`crate::drive`]) asks for the [`Run::next_step`], notes
//! the attempt right before the executor starts the script
//! ([`Run::note_attempt`]), hands the outcome back ([`Run::finish`]), and
//! closes the run on every exit path ([`Run::close`]). Everything that decides lives here: requirements
//! re-checked against the states reached earlier in the same run, the entry
//! an outcome becomes, whether `on-error` records a failure or stops the
//! run with nothing recorded, and which writes carry what.
//!
//! Writes: an outcome is not written on its own. It waits for the run's
//! next write, which is either the attempt mark of the next execution (one
//! [`Ledger::write_step`](crate::Ledger::write_step) carries both, before
//! that script starts) or the closing write. Nothing needs a durable point
//! between a record and the next attempt mark: a crash after a script's
//! effect and before its record leaves the script's attempt counted, so it
//! runs again and the count includes the lost execution (CONTRACT.md §5.3,
//! §7.6). The run lock lives in the ledger object: the first of these
//! writes takes it, on the revision the run planned on, and the closing one
//! releases it: K pending migrations cost K + 1 writes.

use std::collections::HashMap;

use crate::entry::{EntryState, LedgerEntry, StoredSize};
use crate::header::OnError;
use crate::last_failure::LastFailure;
use crate::ledger::{AttemptMark, LedgerError, LedgerSnapshot, Usage, fingerprint};
use crate::lock::LockKeeper;
use crate::migrator::{MigrateError, Migrator, Prepared, record_bytes};
use crate::plan::{PendingMigration, Plan, PlanRequest, Unmet};
use crate::slug::Slug;
use crate::step::{AttemptNote, FailureNote, StepMode, StepWrite};

/// The reason recorded for a migration that did not execute because a
/// requirement is unmet.
pub const REQUIREMENT_UNMET: &str = "requirement-unmet";

/// The exit status by which a script says "my preconditions are not met;
/// run me again next time" (EX_TEMPFAIL of `sysexits.h`): recorded
/// `not-yet`, never `ok`, whatever its `on-error` (CONTRACT.md §7.4).
pub const NOT_YET_EXIT_STATUS: i32 = 75;

/// The reason recorded for a script that exited [`NOT_YET_EXIT_STATUS`].
pub const NOT_YET: &str = "exit-status-75";

/// The reason recorded for a migration that did not execute because a
/// requirement is `not-yet`: it waits, recorded `not-yet` too.
pub const REQUIREMENT_NOT_YET: &str = "requirement-not-yet";

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
    /// Do not execute it: a requirement is `not-yet` (and none is unmet
    /// otherwise). Hand it to [`Run::finish`] with [`Outcome::Deferred`]:
    /// it is recorded `not-yet` and runs again next time.
    Deferred {
        /// The migration.
        pending: PendingMigration,
        /// Every `not-yet` requirement, as "`<target> <why>`".
        waiting_for: Vec<String>,
    },
}

impl Step {
    /// The migration this step is about.
    pub fn pending(&self) -> &PendingMigration {
        match self {
            Step::Execute(p)
            | Step::Blocked { pending: p, .. }
            | Step::Deferred { pending: p, .. } => p,
        }
    }
}

/// What the run records from, for one migration, before `on-error`
/// decides: how its script ended (the executor's
/// [`ScriptEnd`](crate::drive::ScriptEnd)), or why the run did not
/// execute it ([`Step::Blocked`], [`Step::Deferred`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The script exited 0 and nothing says its work was skipped.
    Succeeded,
    /// The script exited 0 and the executing program has something to say
    /// about it (the hook runner: cluster-command failures the script
    /// explicitly tolerated): recorded `ok`, with `message`.
    SucceededNoting {
        /// The entry's message.
        message: String,
    },
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
    /// The script exited [`NOT_YET_EXIT_STATUS`]: its preconditions are not
    /// met. Recorded `not-yet` under either `on-error`; the run goes on.
    NotYet {
        /// What explains it: the end of the script's output (and any
        /// cluster-command failure it did not acknowledge).
        message: String,
    },
    /// It was not executed because of [`Step::Deferred`]: recorded
    /// `not-yet`, reason [`REQUIREMENT_NOT_YET`].
    Deferred {
        /// The `not-yet` requirements, as listed by the step.
        waiting_for: Vec<String>,
    },
}

impl Outcome {
    /// The reason recorded for it: `None` for a success, the script's own
    /// for a failure, and the fixed words of the others
    /// ([`REQUIREMENT_UNMET`], [`NOT_YET`], [`REQUIREMENT_NOT_YET`]).
    pub fn reason(&self) -> Option<&str> {
        match self {
            Outcome::Succeeded | Outcome::SucceededNoting { .. } => None,
            Outcome::Failed { reason, .. } => Some(reason),
            Outcome::Blocked { .. } => Some(REQUIREMENT_UNMET),
            Outcome::NotYet { .. } => Some(NOT_YET),
            Outcome::Deferred { .. } => Some(REQUIREMENT_NOT_YET),
        }
    }
}

/// What the run concludes for one migration ([`Run::finish`] of its
/// [`Outcome`]): recorded in a ledger state ([`EntryState`], what the
/// ledger stores), or the run stops. The report's word for it is
/// [`Ended`](crate::drive::Ended).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The outcome is recorded in this state by the run's next write (the
    /// next attempt mark, or [`Run::close`]); the run goes on.
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

/// The most bytes of output a failure's `message` holds unless the caller
/// says otherwise ([`Run::with_message_limit`]).
pub const DEFAULT_MESSAGE_LIMIT_BYTES: usize = 4096;

/// The longest attempt token [`Run::note_attempt`] accepts, so the room an
/// attempt mark takes is bounded before it is written.
pub const MAX_TOKEN_BYTES: usize = 512;

/// The longest failure reason [`Run::finish`] records, for the same reason.
pub const MAX_REASON_BYTES: usize = 64;

/// One run over a prepared plan.
#[derive(Debug)]
pub struct Run<'m, 'a> {
    migrator: &'m Migrator<'a>,
    prepared: Prepared,
    next: usize,
    /// States reached in this run, for requirements of later migrations.
    reached: HashMap<Slug, EntryState>,
    /// The ledger's fill, kept up to date with what this run writes.
    usage: Option<Usage>,
    /// What this run's records cost, each shared record counted once.
    sizes: StoredSize,
    message_limit: usize,
    /// [`largest_message_bytes`] of `message_limit`, worked out once per
    /// run instead of encoding a maximal message before every script.
    largest_message: u64,
    /// Outcomes decided but not written yet: the next write carries them.
    staged: Vec<(Slug, LedgerEntry)>,
    /// The last failure of the `on-error=abort` migration that stopped the
    /// run, for its closing write.
    failure: Option<(Slug, LastFailure)>,
}

impl<'a> Migrator<'a> {
    /// Starts a run over `prepared` (from [`Migrator::prepare`]). The caller
    /// holds the run lock for as long as the run lasts.
    pub fn begin(&self, prepared: Prepared) -> Run<'_, 'a> {
        Run {
            migrator: self,
            usage: prepared.usage,
            prepared,
            next: 0,
            reached: HashMap::new(),
            sizes: StoredSize::default(),
            message_limit: DEFAULT_MESSAGE_LIMIT_BYTES,
            largest_message: largest_message_bytes(DEFAULT_MESSAGE_LIMIT_BYTES),
            staged: Vec::new(),
            failure: None,
        }
    }

    /// The room check a run makes before its first script executes
    /// ([`Run::next_step`]'s, the same code), made for `plan` on `snapshot`
    /// without running anything: `migrate plan` and `run --dry-run` refuse
    /// where `run` would ([`MigrateError::NoRoom`]) before anything ran.
    /// What the plan's seeding would write is counted as `prepare` counts
    /// it; `message_limit` is the run's ([`Run::with_message_limit`]).
    pub fn check_room_before_first(
        &self,
        plan: &Plan,
        snapshot: Option<&LedgerSnapshot>,
        message_limit: usize,
    ) -> Result<(), MigrateError> {
        let usage = snapshot.and_then(|s| s.usage).map(|mut u| {
            let mut sizes = StoredSize::default();
            for seeded in &plan.seed {
                u.used_bytes += sizes.count(&seeded.slug, &seeded.entry, u.record_overhead_bytes);
            }
            u
        });
        if usage.is_none() {
            return Ok(());
        }
        let prepared = Prepared {
            plan: plan.clone(),
            written: plan.seed.iter().map(|s| s.slug.clone()).collect(),
            usage,
            revision: None,
        };
        let mut run = self.begin(prepared).with_message_limit(message_limit);
        while let Some(step) = run.next_step()? {
            if matches!(step, Step::Execute(_)) {
                break;
            }
        }
        Ok(())
    }

    /// The plan on `snapshot` (`None`: no ledger object), read without the
    /// run lock, when a run on it has nothing to do: nothing pending,
    /// nothing to seed, not a fresh install, not refused. Such a run may end
    /// there without taking the lock (CONTRACT.md §5.5): it would write
    /// nothing and execute nothing, and its answer holds for the ledger as
    /// it was when read. `None` otherwise, refusals included: the caller
    /// then takes the lock and plans again on what it reads under it, and
    /// only that plan runs anything.
    pub fn idle_plan(
        &self,
        snapshot: Option<&LedgerSnapshot>,
        request: &PlanRequest,
    ) -> Option<Plan> {
        let plan = self.plan_snapshot(snapshot, request).ok()?;
        let idle = plan.pending.is_empty() && plan.seed.is_empty() && !plan.fresh_install;
        idle.then_some(plan)
    }
}

impl Run<'_, '_> {
    /// Bounds the output a failure records to `bytes` (before JSON
    /// escaping); the caller must cut its messages to it, and the room
    /// reserved before each script is computed from it.
    pub fn with_message_limit(mut self, bytes: usize) -> Self {
        self.message_limit = bytes;
        self.largest_message = largest_message_bytes(bytes);
        self
    }

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
    ///
    /// Before a migration may execute, the ledger must have room for the
    /// largest record it can produce (its attempt mark and an entry with a
    /// full failure message): otherwise this is [`MigrateError::NoRoom`] and
    /// the script must not run, since its outcome could not be recorded and
    /// the next run would execute it again.
    pub fn next_step(&mut self) -> Result<Option<Step>, MigrateError> {
        let Some(pending) = self.prepared.plan.pending.get(self.next).cloned() else {
            return Ok(None);
        };
        let mut unmet: Vec<(Slug, Unmet)> = pending.unmet.clone();
        for target in &pending.requires {
            if let Some(why) = self
                .reached
                .get(target)
                .and_then(|s| Unmet::in_this_run(*s))
            {
                unmet.push((target.clone(), why));
            }
        }
        let text = |list: &[&(Slug, Unmet)]| -> Vec<String> {
            list.iter()
                .map(|(target, why)| format!("{target} {why}"))
                .collect()
        };
        // A requirement that failed outright blocks; one that is only
        // `not-yet` makes the dependent wait with it.
        let (waiting, failed): (Vec<_>, Vec<_>) = unmet.iter().partition(|(_, why)| why.defers());
        let step = if !failed.is_empty() {
            Step::Blocked {
                unmet: text(&failed),
                pending,
            }
        } else if !waiting.is_empty() {
            Step::Deferred {
                waiting_for: text(&waiting),
                pending,
            }
        } else {
            self.check_room(&pending)?;
            Step::Execute(pending)
        };
        self.next += 1;
        Ok(Some(step))
    }

    /// Refuses when the ledger cannot hold the largest record `pending` can
    /// produce.
    fn check_room(&self, pending: &PendingMigration) -> Result<(), MigrateError> {
        let Some(usage) = self.usage else {
            return Ok(());
        };
        let need = self.largest_record_bytes(pending, &usage);
        let would_be = usage.used_bytes.saturating_add(need);
        if would_be > usage.budget_bytes {
            return Err(MigrateError::NoRoom {
                ledger: self.migrator.ledger().describe(),
                slug: pending.slug.clone(),
                need_bytes: need,
                free_bytes: usage.free_bytes(),
                budget_bytes: usage.budget_bytes,
                entry_count: self.entry_count(),
            });
        }
        Ok(())
    }

    /// Entries the ledger holds now, as far as this run knows.
    fn entry_count(&self) -> usize {
        let plan = &self.prepared.plan;
        plan.skipped
            .iter()
            .filter(|s| matches!(s.reason, crate::plan::SkipReason::Recorded(_)))
            .count()
            + self.prepared.written.len()
            + self.reached.len()
    }

    /// The largest attempt mark plus the larger of a `failed` entry whose
    /// message is the limit's worth of characters that JSON escapes the most
    /// (six bytes each), with the longest reason and the most attempts, and
    /// its shared record unless this run already counted one for the same
    /// fields, and the largest last failure (what an `on-error=abort`
    /// failure stores instead of an entry, [`LastFailure::largest_bytes`]).
    ///
    /// The entry is encoded with an empty message and the message's bytes
    /// added ([`largest_message_bytes`]): a string's encoding does not
    /// depend on the fields around it, and encoding 24 KiB of escapes
    /// before every script was 4 % of a run's CPU.
    fn largest_record_bytes(&self, pending: &PendingMigration, usage: &Usage) -> u64 {
        let entry = self.entry(
            pending,
            EntryState::Failed,
            u32::MAX,
            Some(("r".repeat(MAX_REASON_BYTES), String::new())),
        );
        let recorded =
            record_bytes(&self.sizes, &pending.slug, &entry, usage) + self.largest_message;
        let image = self.migrator.context().image;
        let failure = failure_bytes(
            &pending.slug,
            LastFailure::largest_bytes(self.message_limit, MAX_REASON_BYTES, image.as_deref()),
            usage,
        );
        recorded.max(failure) + attempt_bytes(&pending.slug, &AttemptMark::largest(), usage)
    }

    /// Notes that `pending` is about to execute and returns the executions
    /// counted so far, this one included. `token` must be unique to this
    /// execution: noting twice with one token counts once, so a lost reply
    /// retried by the backend is not counted twice.
    ///
    /// The same write records the outcomes decided since the last one and
    /// takes the lock (the first time, on the revision the run planned on)
    /// or renews it. Errors that
    /// must send the caller back to planning, having written and executed
    /// nothing: [`LedgerError::LockHeld`] (wait, then prepare again) and
    /// [`LedgerError::Changed`] (prepare again), only ever from the write
    /// that would take the lock.
    pub async fn note_attempt(
        &mut self,
        pending: &PendingMigration,
        token: &str,
        keeper: &mut LockKeeper<'_>,
    ) -> Result<u32, MigrateError> {
        if token.len() > MAX_TOKEN_BYTES {
            return Err(LedgerError::Permanent {
                ledger: self.migrator.ledger().describe(),
                operation: "note attempt",
                message: format!(
                    "attempt token of {} bytes is longer than {MAX_TOKEN_BYTES}",
                    token.len()
                ),
            }
            .into());
        }
        let attempt = AttemptNote {
            slug: &pending.slug,
            token,
            floor: previous_attempts(pending),
        };
        let report = self.commit(Some(attempt), false, keeper).await?;
        let count = report.ok_or_else(|| LedgerError::Permanent {
            ledger: self.migrator.ledger().describe(),
            operation: "note attempt",
            message: format!("the write for '{}' noted no attempt", pending.slug),
        })?;
        if let Some(usage) = self.usage.as_mut() {
            let mark = AttemptMark {
                count,
                token: fingerprint(token),
            };
            usage.used_bytes += attempt_bytes(&pending.slug, &mark, usage);
        }
        Ok(count)
    }

    /// Ends the run on any path: writes the outcomes not written yet and
    /// releases the lock in the same write (a run that never took it checks
    /// it is free instead). A run
    /// with nothing left to write sends nothing here; a lock still held is
    /// then the caller's to release ([`LockKeeper::release`]).
    ///
    /// An error names the outcome that could not be confirmed
    /// ([`MigrateError::Unconfirmed`]): that migration runs again next time.
    pub async fn close(mut self, keeper: &mut LockKeeper<'_>) -> Result<(), MigrateError> {
        if self.staged.is_empty() && self.failure.is_none() {
            return Ok(());
        }
        self.commit(None, true, keeper).await.map(|_| ())
    }

    /// Slugs whose outcomes are decided but not written yet.
    pub fn unwritten(&self) -> impl Iterator<Item = &Slug> {
        self.staged.iter().map(|(slug, _)| slug)
    }

    /// One write of the staged outcomes and `attempt`, under the lock as the
    /// keeper holds it; `last` releases it.
    ///
    /// The fence: no write of a run lands once its lock is lost, and no
    /// script starts unless the write noting its attempt proved the lock
    /// (CONTRACT.md §5.5): the write itself is conditional on the lock in
    /// the ledger object being this run's, live.
    async fn commit(
        &mut self,
        attempt: Option<AttemptNote<'_>>,
        last: bool,
        keeper: &mut LockKeeper<'_>,
    ) -> Result<Option<u32>, MigrateError> {
        let revision = self.prepared.revision.clone();
        let held = keeper.lease().cloned();
        let mode = match &held {
            None if attempt.is_some() => StepMode::Take {
                holder: keeper.holder(),
                ttl: keeper.ttl(),
                revision: revision.as_deref(),
            },
            None => StepMode::Check {
                holder: keeper.holder(),
                revision: revision.as_deref(),
            },
            Some(lease) if last => StepMode::Release { lease },
            Some(lease) => StepMode::Hold {
                lease,
                ttl: keeper.ttl(),
            },
        };
        let step = StepWrite {
            records: &self.staged,
            attempt,
            mode,
            failure: self
                .failure
                .as_ref()
                .map(|(slug, failure)| FailureNote { slug, failure }),
        };
        let asked = std::time::Instant::now();
        let report = self.migrator.write_step(&step).await?;
        self.failure = None;
        match (mode, report.lease) {
            (StepMode::Overwrite | StepMode::Check { .. }, _) => {}
            (_, Some(lease)) => keeper.took(lease, asked),
            (_, None) => keeper.released(),
        }
        self.staged.clear();
        Ok(report.attempts)
    }

    /// Records `outcome` of `pending` (executed `attempts` times so far), or
    /// tells the caller to stop. Under `on-error=abort` a failed or blocked
    /// migration records nothing terminal: its last failure (reason, output
    /// tail, time, image, attempts) is kept for the run's closing write
    /// ([`Self::close`]), non-terminal, until the slug's next outcome
    /// replaces it. Under `warn` it is recorded `failed` and the run goes
    /// on. The record is written by the run's next write (the next
    /// [`Self::note_attempt`] or [`Self::close`]), which confirms it: a
    /// record that cannot be confirmed is an error there, never assumed
    /// written.
    pub async fn finish(
        &mut self,
        pending: &PendingMigration,
        attempts: u32,
        outcome: Outcome,
    ) -> Result<Verdict, MigrateError> {
        let mut note = None;
        let (state, failure) = match outcome {
            Outcome::Succeeded => (EntryState::Ok, None),
            Outcome::SucceededNoting { message } => {
                note = Some(recorded_message(&message, self.message_limit));
                (EntryState::Ok, None)
            }
            Outcome::Failed { reason, message } => (
                EntryState::Failed,
                Some((
                    cut_front(&reason, MAX_REASON_BYTES),
                    recorded_message(&message, self.message_limit),
                )),
            ),
            Outcome::Blocked { unmet } => (
                EntryState::Failed,
                Some((REQUIREMENT_UNMET.to_owned(), not_run(&unmet))),
            ),
            Outcome::NotYet { message } => (
                EntryState::NotYet,
                Some((
                    NOT_YET.to_owned(),
                    recorded_message(&message, self.message_limit),
                )),
            ),
            Outcome::Deferred { waiting_for } => (
                EntryState::NotYet,
                Some((REQUIREMENT_NOT_YET.to_owned(), not_run(&waiting_for))),
            ),
        };
        if let (EntryState::Failed, OnError::Abort, Some((reason, message))) =
            (state, pending.on_error, &failure)
        {
            self.stage_failure(pending, attempts, reason, message);
            return Ok(Verdict::Abort {
                reason: reason.clone(),
                message: message.clone(),
            });
        }
        let mut entry = self.entry(pending, state, attempts, failure);
        if note.is_some() {
            entry.message = note;
        }
        // A content run where it may have run before says so in its entry.
        if let (EntryState::Ok, Some(why)) = (state, &pending.rerun) {
            entry.message = Some(match entry.message.take() {
                Some(note) => format!("{why}\n{note}"),
                None => why.clone(),
            });
        }
        if let Some(usage) = self.usage.as_mut() {
            usage.used_bytes +=
                self.sizes
                    .count(&pending.slug, &entry, usage.record_overhead_bytes);
        }
        self.staged.retain(|(slug, _)| slug != &pending.slug);
        self.staged.push((pending.slug.clone(), entry));
        self.reached.insert(pending.slug.clone(), state);
        Ok(Verdict::Recorded(state))
    }

    /// Keeps the last failure of `pending` for the closing write, unless the
    /// ledger's budget cannot hold it: the record is informational, and a
    /// migration that executed had its room reserved ([`Self::next_step`]),
    /// so only a blocked one with a long list of requirements can miss it.
    fn stage_failure(
        &mut self,
        pending: &PendingMigration,
        attempts: u32,
        reason: &str,
        message: &str,
    ) {
        let context = self.migrator.context();
        let failure = LastFailure {
            reason: cut_front(reason, MAX_REASON_BYTES),
            // Already redacted and cut for an executed script; a blocked
            // one's list of requirements is cut to the same limit.
            message: cut_tail(message, self.message_limit),
            at: context.now,
            image: context.image,
            attempts,
        };
        if let Some(usage) = self.usage.as_mut() {
            let need = failure_bytes(&pending.slug, failure.encode().len() as u64, usage);
            if usage.used_bytes.saturating_add(need) > usage.budget_bytes {
                tracing::warn!(
                    slug = %pending.slug,
                    need_bytes = need,
                    free_bytes = usage.free_bytes(),
                    "the ledger has no room for the last failure; not kept"
                );
                return;
            }
            usage.used_bytes += need;
        }
        self.failure = Some((pending.slug.clone(), failure));
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
        // Fields this engine does not know (written by a newer one) survive
        // an `ONLY` re-run: the entry is replaced, not the knowledge in it.
        let extra = pending
            .previous
            .as_ref()
            .map(|e| e.extra.clone())
            .unwrap_or_default();
        LedgerEntry {
            extra,
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

/// Bytes a message of at most `limit` bytes adds to an encoded entry
/// beyond an empty one: `limit` characters that JSON escapes the most
/// (`\u0001`, six bytes each).
fn largest_message_bytes(limit: usize) -> u64 {
    let encoded = |text: &str| serde_json::to_string(text).map_or(0, |s| s.len() as u64);
    encoded(&"\u{1}".repeat(limit)).saturating_sub(encoded(""))
}

/// Bytes an attempt mark costs a ledger with `usage`.
fn attempt_bytes(slug: &Slug, mark: &AttemptMark, usage: &Usage) -> u64 {
    (crate::keys::attempt_key(slug).len() + mark.encode().len()) as u64
        + usage.record_overhead_bytes
}

/// Bytes a last failure whose encoding takes `value_bytes` costs a ledger
/// with `usage`.
fn failure_bytes(slug: &Slug, value_bytes: u64, usage: &Usage) -> u64 {
    crate::keys::failure_key(slug).len() as u64 + value_bytes + usage.record_overhead_bytes
}

/// The recorded message of a migration held back by its requirements (unmet
/// or `not-yet`), each listed as "`<target> <why>`"; the runner prints the
/// same words.
pub fn not_run(requirements: &[String]) -> String {
    format!("not run: {}", requirements.join("; "))
}

/// A failure's output as recorded: secret-shaped values redacted (the
/// ledger is readable by more people than the Job's log), then cut to the
/// last `limit` bytes with a note of what was redacted kept at the end.
pub(crate) fn recorded_message(output: &str, limit: usize) -> String {
    let redacted = crate::redact::redact(output);
    if redacted.count == 0 {
        return cut_tail(&redacted.text, limit);
    }
    let note = format!(
        "\n[migrate: {} secret-shaped value(s) redacted]",
        redacted.count
    );
    let body = cut_tail(&redacted.text, limit.saturating_sub(note.len()));
    cut_tail(&format!("{body}{note}"), limit)
}

/// The first `limit` bytes of `text`, on a character boundary.
fn cut_front(text: &str, limit: usize) -> String {
    let mut end = text.len().min(limit);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_owned()
}

/// The last `limit` bytes of `text`, on a character boundary: the end of a
/// script's output is what explains its failure.
fn cut_tail(text: &str, limit: usize) -> String {
    let mut start = text.len().saturating_sub(limit);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    text[start..].to_owned()
}

#[cfg(test)]
mod tests;
