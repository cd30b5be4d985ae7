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
//! A caller builds core's [`Driver`](migration_core::drive::Driver) with
//! its [`RunSettings`](migration_core::drive::RunSettings), this crate's
//! [`PreRunScan`] as the scan, and runs it with [`Processes`] as the
//! executor; [`ScriptSettings`] holds what only these two need.
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

use migrate_lint::LintConfig;

mod child;
mod process;
mod scan;
pub mod tripwire;

pub use process::{Processes, escalate};
pub use scan::{PreRunScan, scan, scan_all, unsafe_finding};

/// Rules whose findings make the runner refuse a script: patterns that let a
/// failed script report success, and writes to the ledger.
pub const UNSAFE_AT_RUNTIME: &[&str] = migrate_lint::BLOCKING_RULES;

/// How this crate executes and scans scripts: what [`Processes`] and
/// [`PreRunScan`] need beyond core's
/// [`RunSettings`](migration_core::drive::RunSettings) (the lease's
/// lifetime and the failure message's size reach the executor with each
/// [`Job`](migration_core::drive::Job)).
#[derive(Debug, Clone)]
pub struct ScriptSettings {
    /// The namespace passed to scripts as `MIGRATION_NAMESPACE` (the
    /// program's `--namespace`; empty by default).
    pub namespace: String,
    /// Per-script time limit.
    pub timeout: Duration,
    /// Time between SIGTERM and SIGKILL when stopping a script.
    pub grace: Duration,
    /// Settings for the pre-run safety scan; its ledger name is also the
    /// ConfigMap the shims refuse to write.
    pub lint: LintConfig,
    /// The run-time tripwire: cluster commands and the shim binary.
    pub tripwire: crate::tripwire::TripwireConfig,
}

impl Default for ScriptSettings {
    /// A 15-minute timeout, a 10-second grace, lint's and the tripwire's
    /// defaults.
    fn default() -> Self {
        ScriptSettings {
            namespace: String::new(),
            timeout: Duration::from_secs(15 * 60),
            grace: Duration::from_secs(10),
            lint: LintConfig::default(),
            tripwire: crate::tripwire::TripwireConfig::default(),
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
