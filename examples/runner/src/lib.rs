//! The hook runner's process side: the [`Executor`](migration_core::drive::Executor)
//! and [`Scan`](migration_core::drive::Scan) core's run drives
//! (CONTRACT.md §6, §7). Core decides everything about a run (the lock, its
//! one renewal, the plan, the records); this crate starts each script under
//! errexit in its own process group, streams its output prefixed with the
//! slug, enforces its time limit, stops it on an interrupt or when core
//! says the lock is lost, and fences its cluster calls with the run-time
//! tripwire ([`tripwire`]: the shims, `migrate-tolerate`, the supervisor
//! and the lease deadline).
//!
//! How fail-fast is guaranteed: scripts run with errexit (`-e`, plus
//! `-o pipefail` under bash). errexit cannot see everything: a command
//! substitution used as a `for` word list that fails yields zero iterations
//! and status 0, and `kubectl ... || true` turns a failure into success. So
//! before anything runs, every pending script is scanned for those patterns
//! (and for writes to the ledger), and the run is refused if one is found;
//! what the scan cannot see, the tripwire catches while the script runs.

#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

use std::time::Duration;

use migration_core::drive::{Driver, DryRun, RunSettings};
use migration_core::header::Tier;
use migration_core::{Clock, LedgerError, LedgerSnapshot, LockedLedger, MigrationsTree, Slug};
use tokio::sync::watch;

use migrate_lint::LintConfig;

mod child;
mod process;
mod scan;
pub mod tripwire;

pub use migration_core::drive::{
    Console, Ended as Outcome, LockLostAt, MigrationResult, RunError, RunReport,
    fresh_install_reason,
};
use process::Scripts;
pub use process::escalate;
pub use scan::{PreRunScan, scan, scan_all, unsafe_finding};

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

    /// What the run (core's [`Driver`]) decides by, out of these settings.
    pub fn settings(&self) -> RunSettings {
        RunSettings {
            tier: self.tier,
            only: self.only.clone(),
            image: self.image.clone(),
            lock_ttl: self.lock_ttl,
            lock_wait: self.lock_wait,
            holder: self.holder.clone(),
            message_limit: self.tail_bytes,
            allowed_interpreters: self.allowed_interpreters.clone(),
            require_existing_ledger: self.require_existing_ledger,
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
/// used once, by [`Runner::run`] or [`Runner::run_after_read`]: the run
/// itself is core's [`Driver`], executing through this crate's processes
/// and scanning with its pre-run scan.
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

    /// Runs the tier ([`Driver::run`]). `interrupt` turns true on
    /// SIGTERM/SIGINT (the binary wires the signals; tests flip it
    /// directly).
    pub async fn run(self, interrupt: watch::Receiver<bool>) -> Result<RunReport, RunError> {
        let (settings, scan) = (self.config.settings(), PreRunScan::new(&self.config.lint));
        let mut scripts = Scripts::new(self.tree, self.config, self.console, interrupt);
        self.driver(&settings, &scan).run(&mut scripts).await
    }

    /// [`Runner::run`] for a caller that has already read the ledger without
    /// the lock ([`Driver::run_after_read`]: a run with nothing to do ends
    /// on that read, having taken no lock).
    pub async fn run_after_read(
        self,
        read: &Result<Option<LedgerSnapshot>, LedgerError>,
        interrupt: watch::Receiver<bool>,
    ) -> Result<RunReport, RunError> {
        let (settings, scan) = (self.config.settings(), PreRunScan::new(&self.config.lint));
        let mut scripts = Scripts::new(self.tree, self.config, self.console, interrupt);
        self.driver(&settings, &scan)
            .run_after_read(read, &mut scripts)
            .await
    }

    /// The run without the lock and the executor ([`Driver::dry_run`]): the
    /// plan on `read` and what the pre-run scan finds; nothing written,
    /// nothing executed.
    pub async fn dry_run(
        self,
        read: &Result<Option<LedgerSnapshot>, LedgerError>,
    ) -> Result<DryRun, RunError> {
        let (settings, scan) = (self.config.settings(), PreRunScan::new(&self.config.lint));
        self.driver(&settings, &scan).dry_run(read).await
    }

    /// Core's run over this runner's tree, ledger, clock and console.
    fn driver<'d>(&self, settings: &'d RunSettings, scan: &'d PreRunScan<'d>) -> Driver<'d>
    where
        'a: 'd,
    {
        Driver {
            tree: self.tree,
            ledger: self.ledger,
            clock: self.clock,
            settings,
            console: self.console,
            scan,
        }
    }
}
