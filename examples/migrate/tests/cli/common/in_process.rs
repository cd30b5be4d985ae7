//! One run in this process, built as `migrate run` builds it: core's
//! [`Driver`] executing through the runner's [`Processes`] and scanning
//! with its [`PreRunScan`].

use migrate_runner::{PreRunScan, Processes, ScriptSettings};
use migration_core::drive::{Console, Driver, RunError, RunReport, RunSettings};
use migration_core::{
    Clock, LedgerError, LedgerSnapshot, LockedLedger, MigrationsTree, SystemClock, Tier,
};

/// A run's settings: core's, and the runner's for its scripts.
#[derive(Debug, Clone)]
pub struct InProcess {
    /// What the run decides by.
    pub settings: RunSettings,
    /// How its scripts are executed and scanned.
    pub scripts: ScriptSettings,
}

impl InProcess {
    /// A pre-apply run under `holder`, with the defaults otherwise; in
    /// process the runner's own executable is the test, so the tripwire
    /// points at the real shim binary.
    pub fn new(holder: &str) -> Self {
        let mut scripts = ScriptSettings::default();
        scripts.tripwire.shim = Some(env!("CARGO_BIN_EXE_migrate-shim").into());
        InProcess {
            settings: RunSettings::new(Tier::PreApply, holder.into()),
            scripts,
        }
    }

    /// [`Driver::run`] on the system clock, never interrupted.
    pub async fn run(
        &self,
        tree: &MigrationsTree,
        ledger: &dyn LockedLedger,
        console: &dyn Console,
    ) -> Result<RunReport, RunError> {
        self.run_on(tree, ledger, &SystemClock, console).await
    }

    /// [`Driver::run`] on `clock`, never interrupted.
    pub async fn run_on(
        &self,
        tree: &MigrationsTree,
        ledger: &dyn LockedLedger,
        clock: &dyn Clock,
        console: &dyn Console,
    ) -> Result<RunReport, RunError> {
        let (_tx, rx) = tokio::sync::watch::channel(false);
        let scan = PreRunScan::new(&self.scripts.lint);
        let mut processes = Processes::new(tree, &self.scripts, console, rx);
        self.driver(tree, ledger, clock, console, &scan)
            .run(&mut processes)
            .await
    }

    /// [`Driver::run_after_read`] on the system clock, never interrupted.
    pub async fn run_after_read(
        &self,
        tree: &MigrationsTree,
        ledger: &dyn LockedLedger,
        read: &Result<Option<LedgerSnapshot>, LedgerError>,
        console: &dyn Console,
    ) -> Result<RunReport, RunError> {
        let (_tx, rx) = tokio::sync::watch::channel(false);
        let scan = PreRunScan::new(&self.scripts.lint);
        let mut processes = Processes::new(tree, &self.scripts, console, rx);
        self.driver(tree, ledger, &SystemClock, console, &scan)
            .run_after_read(read, &mut processes)
            .await
    }

    fn driver<'a>(
        &'a self,
        tree: &'a MigrationsTree,
        ledger: &'a dyn LockedLedger,
        clock: &'a dyn Clock,
        console: &'a dyn Console,
        scan: &'a PreRunScan<'a>,
    ) -> Driver<'a> {
        Driver {
            tree,
            ledger,
            clock,
            settings: &self.settings,
            console,
            scan,
        }
    }
}
