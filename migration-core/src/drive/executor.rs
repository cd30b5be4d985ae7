//! What the run asks of the program that executes scripts: the
//! [`Executor`] (start one script, tell whether the run was interrupted,
//! pause), the [`Running`] script it hands back (wait a while for its end,
//! learn the lease was renewed, stop it), and the pre-run [`Scan`].
//!
//! Why traits: core decides everything about a run (CONTRACT.md §5-§7) but
//! links neither a runtime nor the shell parser; the hook runner supplies
//! processes, signals, timers and the scan, and a test can supply fakes.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use async_trait::async_trait;

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
    /// Until when the run's lease is known to be live (the instant the
    /// last renewal was asked for, plus its lifetime): past it, nothing the
    /// script does may reach the cluster (CONTRACT.md §5.5).
    pub lease_live_until: Instant,
    /// The lease's lifetime ([`RunSettings::lock_ttl`](super::RunSettings)):
    /// the fence keeps a tenth of it as margin before
    /// [`Job::lease_live_until`].
    pub lease_ttl: Duration,
    /// Bytes of output a failure's recorded message keeps
    /// ([`RunSettings::message_limit`](super::RunSettings)): the end of
    /// its output the executor needs to keep.
    pub message_limit: usize,
}

/// What the script's process did, as the executor saw it: the one type
/// the executor hands the run. The run turns it into what it records
/// ([`Outcome`], then [`Verdict`](crate::run::Verdict) and the ledger's
/// [`EntryState`](crate::EntryState)) and what it reports
/// ([`Ended`](super::Ended)).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ScriptEnd {
    /// The script ran to its end (or its time limit): `outcome` is
    /// [`Outcome::Succeeded`], [`Outcome::SucceededNoting`],
    /// [`Outcome::Failed`] or [`Outcome::NotYet`] (exit status
    /// [`NOT_YET_EXIT_STATUS`](crate::run::NOT_YET_EXIT_STATUS)), and the
    /// run records it.
    Ran {
        /// What it ended in.
        outcome: Outcome,
        /// What its cluster-command calls did, when they were counted.
        cluster_commands: Option<CallSummary>,
    },
    /// The run was interrupted and the script stopped: nothing is recorded.
    Interrupted,
}

/// The program side of a run: processes, signals and time.
///
/// The run renews its lock itself ([`Running::wait`] gives it the turns):
/// an executor never sees the lock, only how long the lease is known to be
/// live ([`Job::lease_live_until`], [`Running::lease_renewed`]), which it
/// passes to whatever fences the script's own effects.
#[async_trait]
pub trait Executor: Send {
    /// Starts `job`. An error is a script that could not be started, saying
    /// why.
    async fn start<'e>(&'e mut self, job: Job<'_>) -> Result<Box<dyn Running + 'e>, String>;

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

/// A script [`Executor::start`] started, until it ends.
#[async_trait]
pub trait Running: Send {
    /// Waits up to `at_most` for the script to end: `Some` once it ended
    /// (on its own, at its time limit, or stopped because the run was
    /// interrupted), `None` while it still runs. The run calls it again
    /// after renewing its lock, so a stop in progress (the grace between
    /// SIGTERM and SIGKILL) keeps the lock renewed through it.
    async fn wait(&mut self, at_most: Duration) -> Option<ScriptEnd>;

    /// The lock was just renewed: the lease is live until `until`, and the
    /// script's cluster calls may go on until then (CONTRACT.md §5.5).
    fn lease_renewed(&mut self, until: Instant);

    /// Stops the script, its lock lost: SIGTERM, and SIGKILL before the
    /// lease can lapse at the latest; returns once it is gone.
    async fn stop(&mut self);
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
