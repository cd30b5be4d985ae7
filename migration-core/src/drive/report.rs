//! What a run did and why it stopped: how each migration ended, the
//! report, the errors (`migrate run --json` prints the report as it is
//! serialized here).

use std::fmt;
use std::time::Duration;

use crate::ledger::LedgerError;
use crate::migrator::MigrateError;
use crate::plan::PlanError;
use crate::run::Outcome;
use crate::slug::Slug;

/// Why a run is a fresh install: the ledger does not exist (the report's
/// `fresh_install_reason`, and the words of the CLI's notice).
pub fn fresh_install_reason(ledger: &str) -> String {
    format!("{ledger} does not exist")
}

/// How one migration ended in this run: the report's word for the run's
/// conclusion (serialized kebab-case: `ok`, `failed`, `blocked`,
/// `not-yet`, `aborted`, `interrupted`). What the run recorded follows from
/// the [`Outcome`] it was handed and the `on-error`
/// [`Verdict`](crate::run::Verdict) ([`Ended::recorded`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum Ended {
    /// Exit 0, recorded `ok`.
    Ok,
    /// Failed under `on-error=warn`, recorded `failed`.
    Failed,
    /// Not executed because a requirement is unmet; recorded `failed` (warn).
    Blocked,
    /// Exited 75 (preconditions not met), or waits for a requirement that
    /// did: recorded `not-yet`, run again next time.
    NotYet,
    /// Failed under `on-error=abort`: nothing terminal recorded (only its last
    /// failure), the run stopped.
    Aborted,
    /// Stopped by SIGTERM/SIGINT: nothing recorded, the run stopped.
    Interrupted,
}

impl Ended {
    /// How a migration whose `outcome` was recorded (not aborted) ended.
    pub fn recorded(outcome: &Outcome) -> Ended {
        match outcome {
            Outcome::Succeeded | Outcome::SucceededNoting { .. } => Ended::Ok,
            Outcome::Failed { .. } => Ended::Failed,
            Outcome::Blocked { .. } => Ended::Blocked,
            Outcome::NotYet { .. } | Outcome::Deferred { .. } => Ended::NotYet,
        }
    }
}

/// What a script's cluster-command calls did, as the hook runner's
/// tripwire counted them (the report's `cluster_commands`).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct CallSummary {
    /// Calls made.
    pub calls: usize,
    /// Calls that failed (or never finished) unaccepted.
    pub failed: usize,
    /// Failures accepted by `migrate-tolerate`.
    pub tolerated: usize,
    /// Calls that succeeded after retrying a transient failure.
    pub retried: usize,
    /// The tolerated calls: command line and class.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tolerated_calls: Vec<String>,
}

/// A pattern the pre-run scan found in a pending script that could hide
/// its failure (or a write to the ledger): the run refuses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnsafeFinding {
    /// Path relative to the tree root.
    pub file: String,
    /// One-based line, where there is one.
    pub line: Option<usize>,
    /// The lint rule's id.
    pub rule: String,
    /// What is wrong and what to do.
    pub message: String,
}

impl fmt::Display for UnsafeFinding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}: [{}] {}",
            self.file,
            self.line.unwrap_or(0),
            self.rule,
            self.message
        )
    }
}

/// One migration's result.
#[derive(Debug, Clone, serde::Serialize)]
pub struct MigrationResult {
    /// The slug.
    pub slug: String,
    /// How it ended.
    pub outcome: Ended,
    /// Why it failed, if it did.
    pub reason: Option<String>,
    /// Executions counted so far (including this one).
    pub attempts: u32,
    /// Wall time, in milliseconds.
    pub duration_ms: u128,
    /// What the script's cluster-command calls did (scripts recorded `ok`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster_commands: Option<CallSummary>,
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
    fn count(&self, outcome: Ended) -> usize {
        self.results.iter().filter(|r| r.outcome == outcome).count()
    }

    /// The closing summary line.
    pub fn summary(&self) -> String {
        let not_run = self.pending - self.results.len();
        format!(
            "done: {} ok, {} failed, {} blocked, {} not yet, {} not run, in {:.1}s",
            self.count(Ended::Ok),
            self.count(Ended::Failed),
            self.count(Ended::Blocked),
            self.count(Ended::NotYet),
            not_run + self.count(Ended::Aborted) + self.count(Ended::Interrupted),
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
    #[error("refusing to run: {} unsafe pattern(s) in pending scripts:\n{}", findings.len(), findings.iter().map(|f| format!("  {f}")).collect::<Vec<_>>().join("\n"))]
    Unsafe {
        /// The findings.
        findings: Vec<UnsafeFinding>,
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
    /// Preparing or recording failed otherwise (the error names the ledger).
    #[error(transparent)]
    Migrate(MigrateError),
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
    /// The lock was lost mid-run: another runner may hold it, so this one
    /// stopped executing and writing at once (CONTRACT.md §5.5).
    #[error("lost the run lock {}: {cause}; {}", at.text(slug), unrecorded_text(unrecorded))]
    LockLost {
        /// The migration the run was at.
        slug: Slug,
        /// Where in that migration's step.
        at: LockLostAt,
        /// What told the run (a renewal, or a write, refused).
        cause: LedgerError,
        /// Outcomes decided before the loss that no write carried: the
        /// ledger was not touched after the loss, so they run again.
        unrecorded: Vec<Slug>,
    },
    /// An `on-error=abort` migration failed; nothing terminal was recorded for
    /// it (its last failure is kept, CONTRACT.md §5.3).
    #[error(
        "migration {slug} failed ({reason}); nothing terminal recorded, upgrade stopped (the ledger keeps this failure and the end of its output)\n{tail}"
    )]
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

/// Where a run found its lock lost ([`RunError::LockLost`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum LockLostAt {
    /// Proving the lock with the write that notes the migration's attempt:
    /// its script did not start.
    Before,
    /// Renewing the lock while the script ran: the script was stopped.
    Running,
    /// Renewing the lock after the migration's outcome was decided.
    After,
}

impl LockLostAt {
    /// What the run did about `slug`, in words.
    fn text(self, slug: &Slug) -> String {
        match self {
            LockLostAt::Before => {
                format!("before running {slug}, which did not start; nothing ran after the loss")
            }
            LockLostAt::Running => {
                format!("while running {slug}; stopped it, and its outcome is not recorded")
            }
            LockLostAt::After => format!("after {slug}; nothing ran after the loss"),
        }
    }
}

/// What a run that lost its lock left unrecorded, in words.
fn unrecorded_text(unrecorded: &[Slug]) -> String {
    if unrecorded.is_empty() {
        return "nothing written after the loss; every outcome decided before it is recorded"
            .to_owned();
    }
    let list: Vec<String> = unrecorded.iter().map(ToString::to_string).collect();
    format!(
        "nothing written after the loss; outcomes not recorded (they run again, migrations are safe to run twice): {}",
        list.join(", ")
    )
}
