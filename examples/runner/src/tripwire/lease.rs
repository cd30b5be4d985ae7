//! The lease deadline: how long the run can still prove its lock is live,
//! shared by the runner with the shims and the supervisor, so that a
//! script's own cluster calls are fenced by the lock too (CONTRACT.md §5.5).
//!
//! The runner writes the deadline into the run's private report directory
//! ([`LEASE_FILE`]) before each script starts and after each renewal, and
//! tells the supervisor the same on its pipe. The deadline is read on
//! `CLOCK_BOOTTIME`, which keeps counting while processes are stopped (and
//! while the machine sleeps): a runner, a script or a whole node frozen
//! past the deadline finds it passed when it resumes. Every shim and
//! `migrate-tolerate` call made under the runner checks it before running
//! the real command ([`check`]) and refuses once it passed: the call fails
//! and is recorded failed, so the script cannot end `ok`. The supervisor
//! kills every script group still running at the deadline.
//!
//! The deadline is the instant the last renewal was asked for plus the
//! lease's lifetime, less a tenth of it ([`deadline`]): no other runner can
//! take the lock before then.

use std::path::Path;
use std::time::{Duration, Instant};

use nix::time::{ClockId, clock_gettime};

/// The file in the run's report directory that holds the deadline: whole
/// nanoseconds of `CLOCK_BOOTTIME`, in decimal.
pub const LEASE_FILE: &str = "lease";

/// Now on `CLOCK_BOOTTIME`, in nanoseconds.
pub fn now() -> u64 {
    clock_gettime(ClockId::CLOCK_BOOTTIME)
        .map(|t| {
            u64::try_from(t.tv_sec()).unwrap_or(0) * 1_000_000_000
                + u64::try_from(t.tv_nsec()).unwrap_or(0)
        })
        .unwrap_or(u64::MAX)
}

/// The deadline, on `CLOCK_BOOTTIME`, of a lease the run knows live until
/// `until` (core's [`Instant`]) for `ttl`: a tenth of the lifetime earlier,
/// for the time a call takes to reach the cluster and clocks that drift.
pub fn deadline(until: Instant, ttl: Duration) -> u64 {
    let left = until
        .saturating_duration_since(Instant::now())
        .saturating_sub(ttl / 10);
    now().saturating_add(u64::try_from(left.as_nanos()).unwrap_or(u64::MAX))
}

/// Why a call is refused: the run cannot prove its lease is live.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lapsed(pub String);

/// Checks the deadline in `dir` (the run's report directory): `Ok` while it
/// has not passed. A directory armed by the runner (it holds the
/// real-commands file) without a readable deadline refuses too.
pub fn check(dir: &Path) -> Result<(), Lapsed> {
    let text = match std::fs::read_to_string(dir.join(LEASE_FILE)) {
        Ok(t) => t,
        Err(e) => {
            return Err(Lapsed(format!(
                "the run's lease deadline cannot be read ({e})"
            )));
        }
    };
    let until: u64 = text
        .trim()
        .parse()
        .map_err(|_| Lapsed(format!("the run's lease deadline {text:?} is not a number")))?;
    let now = now();
    if now < until {
        return Ok(());
    }
    Err(Lapsed(format!(
        "the run's lock lease can no longer be proved live (its deadline passed {:.1}s ago: the runner stopped renewing it, or was frozen); another runner may hold the lock now",
        Duration::from_nanos(now - until).as_secs_f64()
    )))
}

/// The check for a call whose report file is `report`: under the runner
/// (the report's directory holds the real-commands file it writes when it
/// arms the tripwire) the deadline must not have passed; outside a run
/// (a test's own report) there is no lease to prove.
pub fn in_run(report: &Path) -> Result<(), Lapsed> {
    match report.parent() {
        Some(dir) if dir.join(super::arm::REAL_FILE).exists() => check(dir),
        _ => Ok(()),
    }
}

/// Writes `deadline` into `dir` whole (a new file renamed over the old), so
/// a shim never reads half of it.
pub fn write(dir: &Path, deadline: u64) -> std::io::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt;
    let fresh = dir.join(format!("{LEASE_FILE}.new"));
    let create = || {
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&fresh)
    };
    // A `.new` left behind (a write that failed before its rename) is
    // removed only when there is one: the rename consumes it otherwise, so
    // removing it before every write was a path walk per script for nothing.
    let mut file = match create() {
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            std::fs::remove_file(&fresh)?;
            create()?
        }
        other => other?,
    };
    file.write_all(deadline.to_string().as_bytes())?;
    std::fs::rename(&fresh, dir.join(LEASE_FILE))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deadline_in_the_future_allows_calls_and_one_past_refuses_them() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), now() + 60_000_000_000).unwrap();
        assert_eq!(check(dir.path()), Ok(()));
        write(dir.path(), now() - 1).unwrap();
        let Err(Lapsed(why)) = check(dir.path()) else {
            panic!("a passed deadline allowed a call")
        };
        assert!(why.contains("can no longer be proved live"), "{why}");
    }

    #[test]
    fn a_missing_or_garbled_deadline_refuses() {
        let dir = tempfile::tempdir().unwrap();
        assert!(check(dir.path()).is_err());
        std::fs::write(dir.path().join(LEASE_FILE), "soon").unwrap();
        assert!(check(dir.path()).is_err());
    }

    #[test]
    fn the_deadline_is_a_tenth_of_the_lifetime_before_the_lease_ends() {
        let ttl = Duration::from_secs(10);
        let before = now();
        let d = deadline(Instant::now() + ttl, ttl);
        let after = now();
        assert!(d <= after + 9_000_000_000 && d + 50_000_000 >= before + 9_000_000_000);
        assert!(deadline(Instant::now(), ttl) <= now());
    }
}
