//! What the run asks of the program that executes scripts: the
//! [`Executor`] (spawn one script and say how it ended, tell whether the
//! run was interrupted, pause), and the pre-run [`Scan`].
//!
//! Why traits: core decides everything about a run (CONTRACT.md §5-§7) but
//! links neither a runtime nor the shell parser; the hook runner supplies
//! processes, signals, timers and the scan, and a test can supply fakes.

use std::collections::HashMap;
use std::time::Duration;

use async_trait::async_trait;

use crate::ledger::LedgerError;
use crate::lock::LockKeeper;
use crate::plan::PendingMigration;
use crate::run::Outcome;
use crate::slug::Slug;
use crate::tree::MigrationsTree;

use super::report::{CallSummary, UnsafeFinding};

/// One execution the run asks for.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct Job<'j> {
    /// The migration.
    pub pending: &'j PendingMigration,
    /// Its execution count, this one included (`MIGRATION_ATTEMPT`).
    pub attempt: u32,
    /// The script's shebang line: its interpreter.
    pub shebang: &'j str,
    /// The bytes the pre-run scan read and hashed: what runs, never the file
    /// again (it may have changed since).
    pub script: &'j [u8],
}

/// How one execution ended, as the executor saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Exec {
    /// The script ran to its end: `outcome` is [`Outcome::Succeeded`],
    /// [`Outcome::SucceededNoting`], [`Outcome::Failed`] or
    /// [`Outcome::NotYet`] (exit status
    /// [`NOT_YET_EXIT_STATUS`](crate::run::NOT_YET_EXIT_STATUS)), and the
    /// run records it.
    Ended {
        /// What it ended in.
        outcome: Outcome,
        /// What its cluster-command calls did, when they were counted.
        cluster_commands: Option<CallSummary>,
    },
    /// The run was interrupted and the script stopped: nothing is recorded.
    Interrupted,
    /// Renewing the lock while the script ran failed: the script was
    /// stopped and nothing is recorded (CONTRACT.md §5.5).
    LockLost(LedgerError),
    /// The script could not be started; `message` says why.
    Unstarted {
        /// Why.
        message: String,
    },
}

/// The program side of a run: processes, signals and time.
#[async_trait]
pub trait Executor: Send {
    /// Runs `job` to its end, renewing `keeper`'s lock every
    /// [`LockKeeper::period`] while it runs and stopping the script if a
    /// renewal fails ([`Exec::LockLost`]) or the run is interrupted
    /// ([`Exec::Interrupted`]).
    async fn execute(&mut self, job: Job<'_>, keeper: &mut LockKeeper<'_>) -> Exec;

    /// Whether the run was asked to stop (SIGTERM, SIGINT).
    fn interrupted(&self) -> bool;

    /// Waits `pause`, or less if the run is interrupted meanwhile (the run
    /// waits for another runner's lock this way).
    async fn pause(&mut self, pause: Duration);

    /// The run reached `point` (`before-lock`, `after-lock`,
    /// `after-prepare`, `before-script:<slug>`, `after-script:<slug>`,
    /// `after-record:<slug>`): the reliability suite crashes or stalls the
    /// process there. Nothing by default.
    fn checkpoint(&self, point: &str) {
        let _ = point;
    }
}

/// What the pre-run scan found, and the bytes of each script it read (by
/// slug): what the run executes.
#[derive(Debug, Clone, Default)]
pub struct Scanned {
    /// Every finding, in plan order: any one refuses the run.
    pub findings: Vec<UnsafeFinding>,
    /// The bytes scanned and hashed, per slug (absent: refused, or not
    /// read).
    pub scripts: HashMap<Slug, Vec<u8>>,
}

/// The pre-run safety scan of a plan's pending scripts, supplied by the
/// program (core does not link the shell parser).
pub trait Scan: Send + Sync {
    /// Scans `pending`, the scripts of `tree` a run is about to execute.
    fn scan(&self, tree: &MigrationsTree, pending: &[PendingMigration]) -> Scanned;
}
