//! The run lock and the run's writes, as the run drives them:
//! waiting for a lock another runner holds, noting an attempt (the write
//! that also carries the outcomes decided before it, and the first time
//! takes the lock), and naming the migration whose outcome a failed
//! write leaves unconfirmed (CONTRACT.md §5.5, §7.2).

use std::time::{Duration, Instant};

use crate::ledger::LedgerError;
use crate::lock::LockKeeper;
use crate::migrator::MigrateError;
use crate::plan::PendingMigration;
use crate::run::Run;
use crate::slug::Slug;

use super::{Console, Executor, LockLostAt, RunError, RunReport, RunSettings};

/// One pause while another runner holds the lock (`cause`): gives up once
/// `--lock-wait` has passed since the run started, or on an interrupt.
pub(super) async fn wait_for_lock(
    cause: LedgerError,
    config: &RunSettings,
    console: &dyn Console,
    executor: &mut dyn Executor,
    started: Instant,
    announced: &mut bool,
) -> Result<(), RunError> {
    let waited = started.elapsed();
    if waited >= config.lock_wait {
        return Err(RunError::LockBusy { cause, waited });
    }
    if !*announced {
        console.progress(&format!("waiting for the run lock: {cause}"));
        *announced = true;
    }
    let pause = Duration::from_millis(500).min(config.lock_wait - waited);
    executor.pause(pause).await;
    if executor.interrupted() {
        return Err(RunError::Interrupted {
            slug: None,
            report: Box::new(empty_report(config)),
        });
    }
    Ok(())
}

fn empty_report(config: &RunSettings) -> RunReport {
    RunReport {
        tier: config.tier.to_string(),
        only: config.only.as_ref().map(ToString::to_string),
        fresh_install: false,
        fresh_install_reason: None,
        seeded: 0,
        pending: 0,
        results: Vec::new(),
        elapsed_ms: 0,
    }
}

/// A write of outcomes that could not be confirmed, naming the migration
/// (the one the error names, else `first`, the first outcome it carried).
pub(super) fn unrecorded(cause: MigrateError, first: Option<Slug>) -> RunError {
    let slug = match &cause {
        MigrateError::Unconfirmed { slug, .. } => Some(slug.clone()),
        _ => first,
    };
    match (slug, cause) {
        (Some(slug), cause) => RunError::Unrecorded { slug, cause },
        (None, MigrateError::Ledger(e)) => RunError::Ledger(e),
        (None, cause) => RunError::Migrate(cause),
    }
}

/// A token unique to one execution: holder, slug, wall-clock nanoseconds and
/// a process-wide counter. It must differ between executions even when the
/// injected clock stands still, or a re-run would not count.
fn attempt_token(holder: &str, slug: &Slug) -> String {
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("{holder}/{slug}/{nanos}/{n}")
}

/// Notes a started execution under a token unique to it; the same write
/// records the outcomes decided before it.
pub(super) async fn note_attempt(
    run: &mut Run<'_, '_>,
    pending: &PendingMigration,
    holder: &str,
    keeper: &mut LockKeeper<'_>,
) -> Result<u32, RunError> {
    let token = attempt_token(holder, &pending.slug);
    run.note_attempt(pending, &token, keeper)
        .await
        .map_err(|e| match e {
            // The write proving the lock found it lost: the script does not start.
            MigrateError::Ledger(cause @ LedgerError::LockLost { .. }) => RunError::LockLost {
                slug: pending.slug.clone(),
                at: LockLostAt::Before,
                cause,
                unrecorded: Vec::new(),
            },
            MigrateError::Ledger(e) => RunError::Ledger(e),
            MigrateError::Unconfirmed { ref slug, .. } => RunError::Unrecorded {
                slug: slug.clone(),
                cause: e.clone(),
            },
            other => RunError::Migrate(other),
        })
}

/// The console of a run that may plan again before its first write takes
/// the lock (held by another runner: every half second until it is free):
/// a progress line an earlier round printed is not printed again, so a
/// waiting run does not repeat its plan twice a second; a line that
/// differs (the plan changed) is printed.
pub(super) struct Replanning<'c> {
    inner: &'c dyn Console,
    seen: std::sync::Mutex<std::collections::HashSet<String>>,
}

impl<'c> Replanning<'c> {
    pub(super) fn new(inner: &'c dyn Console) -> Self {
        Replanning {
            inner,
            seen: std::sync::Mutex::default(),
        }
    }
}

impl Console for Replanning<'_> {
    fn script_line(&self, slug: &Slug, line: &str) {
        self.inner.script_line(slug, line);
    }

    fn progress(&self, line: &str) {
        let fresh = self
            .seen
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(line.to_owned());
        if fresh {
            self.inner.progress(line);
        }
    }

    fn step(&self, n: usize, total: usize, slug: &Slug, line: &str) {
        self.inner.step(n, total, slug, line);
    }
}
