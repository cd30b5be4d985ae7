//! Deliberately broken backends, each a small wrapper over the memory
//! ledger breaking one rule of the trait, and the proof that the
//! conformance suite rejects every one of them: a suite that cannot fail
//! proves nothing about a backend.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use ledger_memory::{DEFAULT_BUDGET_BYTES, MemoryLedger};
use migration_core::fence::LOCK_KEY;
use migration_core::last_failure::LastFailure;
use migration_core::ledger::{LedgerSnapshot, WriteMode, WriteReport};
use migration_core::object::{self, Change, Object};
use migration_core::step::{StepMode, StepReport, StepWrite};
use migration_core::testing::{self, Harness};
use migration_core::{
    Clock, Lease, Ledger, LedgerEntry, LedgerError, Lock, LockedLedger, ManualClock, Slug,
    Timestamp,
};

/// The one rule a [`Broken`] ledger breaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rule {
    /// Plans a step on a copy and applies it later: no mutual exclusion.
    Exclusion,
    /// Judges leases on a clock that never moves: a lapsed lease still writes.
    Lapse,
    /// Releases the lock whatever lease the release carries.
    StaleRelease,
    /// Reports a revision that a change of the lock alone does not raise.
    LockRevision,
    /// Reports no usage although it has a budget.
    Usage,
    /// Leaves a change a crash interrupted half-applied: the first of its
    /// entries stored, the rest never, and no read finishes or discards it
    /// (the write-ahead record a crash-safe backend keeps is ignored).
    HalfApplied,
}

#[derive(Debug, Clone)]
struct Broken {
    inner: MemoryLedger,
    rule: Rule,
    clock: Arc<ManualClock>,
    /// Lock-only changes, hidden from the revision ([`Rule::LockRevision`]).
    hidden: Arc<AtomicU64>,
}

fn start() -> Timestamp {
    Timestamp::from_unix(1_786_529_040)
}

impl Broken {
    fn new(rule: Rule) -> Self {
        let clock = Arc::new(ManualClock::new(start()));
        // Rule::Lapse: the ledger's own clock is another, never advanced.
        let judged = if rule == Rule::Lapse {
            Arc::new(ManualClock::new(start()))
        } else {
            clock.clone()
        };
        Broken {
            inner: MemoryLedger::with_clock(judged),
            rule,
            clock,
            hidden: Arc::default(),
        }
    }

    fn shown(&self, revision: Option<String>) -> Option<String> {
        let hidden = self.hidden.load(Ordering::SeqCst);
        revision.map(|r| (r.parse::<u64>().unwrap() - hidden).to_string())
    }

    fn real(&self, revision: Option<&str>) -> Option<String> {
        let hidden = self.hidden.load(Ordering::SeqCst);
        revision.map(|r| (r.parse::<u64>().unwrap() + hidden).to_string())
    }

    /// A step planned on a copy of the object, applied after a pause.
    async fn unexcluded_step(&self, step: &StepWrite<'_>) -> Result<StepReport, LedgerError> {
        let revision = self.inner.read().await?.and_then(|s| s.revision);
        let copy = self
            .inner
            .raw_data()
            .map(|data| Object::new(revision.unwrap().parse().unwrap(), data));
        let now = self.clock.now();
        let token = migration_core::fence::new_token(now);
        let name = self.inner.describe();
        let (report, change) = object::plan_step(
            &name,
            Some(DEFAULT_BUDGET_BYTES),
            copy.as_ref(),
            step,
            now,
            &token,
        )?;
        std::thread::sleep(Duration::from_millis(20));
        if let Some(Change::Put { puts, .. }) = change {
            for (k, v) in puts {
                self.inner.put_raw(&k, &v);
            }
        }
        Ok(report)
    }
}

#[async_trait]
impl Ledger for Broken {
    fn describe(&self) -> String {
        format!("broken ({:?}) memory ledger", self.rule)
    }
    async fn read(&self) -> Result<Option<LedgerSnapshot>, LedgerError> {
        let mut snapshot = self.inner.read().await?;
        if let Some(s) = snapshot.as_mut() {
            match self.rule {
                Rule::Usage => s.usage = None,
                Rule::LockRevision => s.revision = self.shown(s.revision.take()),
                _ => {}
            }
        }
        Ok(snapshot)
    }
    async fn create(&self, entries: &[(Slug, LedgerEntry)]) -> Result<(), LedgerError> {
        self.inner.create(entries).await
    }
    async fn write(
        &self,
        entries: &[(Slug, LedgerEntry)],
        mode: WriteMode,
    ) -> Result<WriteReport, LedgerError> {
        self.inner.write(entries, mode).await
    }
    async fn note_attempt(&self, slug: &Slug, token: &str, floor: u32) -> Result<u32, LedgerError> {
        self.inner.note_attempt(slug, token, floor).await
    }
    async fn note_failure(&self, slug: &Slug, failure: &LastFailure) -> Result<(), LedgerError> {
        self.inner.note_failure(slug, failure).await
    }
    async fn write_step(&self, step: &StepWrite<'_>) -> Result<StepReport, LedgerError> {
        match (self.rule, step.mode) {
            (Rule::Exclusion, _) => self.unexcluded_step(step).await,
            (Rule::StaleRelease, StepMode::Release { .. }) => {
                let report = self
                    .inner
                    .write_step(&StepWrite {
                        mode: StepMode::Overwrite,
                        ..*step
                    })
                    .await?;
                self.inner.put_raw(LOCK_KEY, "");
                Ok(report)
            }
            (Rule::LockRevision, mode) => {
                let real;
                let mode = match mode {
                    StepMode::Take {
                        holder,
                        ttl,
                        revision,
                    } => {
                        real = self.real(revision);
                        StepMode::Take {
                            holder,
                            ttl,
                            revision: real.as_deref(),
                        }
                    }
                    StepMode::Check { holder, revision } => {
                        real = self.real(revision);
                        StepMode::Check {
                            holder,
                            revision: real.as_deref(),
                        }
                    }
                    other => other,
                };
                let report = self.inner.write_step(&StepWrite { mode, ..*step }).await?;
                let lock_only =
                    step.records.is_empty() && step.attempt.is_none() && step.failure.is_none();
                if lock_only && !matches!(mode, StepMode::Overwrite | StepMode::Check { .. }) {
                    self.hidden.fetch_add(1, Ordering::SeqCst);
                }
                Ok(report)
            }
            _ => self.inner.write_step(step).await,
        }
    }
}

#[async_trait]
impl Lock for Broken {
    async fn acquire(&self, holder: &str, ttl: Duration) -> Result<Lease, LedgerError> {
        let lease = self.inner.acquire(holder, ttl).await?;
        if self.rule == Rule::LockRevision {
            self.hidden.fetch_add(1, Ordering::SeqCst);
        }
        Ok(lease)
    }
    async fn renew(&self, lease: &Lease, ttl: Duration) -> Result<Lease, LedgerError> {
        let lease = self.inner.renew(lease, ttl).await?;
        if self.rule == Rule::LockRevision {
            self.hidden.fetch_add(1, Ordering::SeqCst);
        }
        Ok(lease)
    }
    async fn release(&self, lease: &Lease) -> Result<(), LedgerError> {
        let before = self.inner.read().await?.and_then(|s| s.revision);
        self.inner.release(lease).await?;
        let after = self.inner.read().await?.and_then(|s| s.revision);
        if self.rule == Rule::LockRevision && before != after {
            self.hidden.fetch_add(1, Ordering::SeqCst);
        }
        Ok(())
    }
}

#[async_trait]
impl Harness for Broken {
    async fn ledger(&self) -> Arc<dyn LockedLedger> {
        Arc::new(self.clone())
    }
    async fn plant_raw(&self, key: &str, value: &str) {
        self.inner.put_raw(key, value);
    }
    async fn raw(&self, key: &str) -> Option<String> {
        self.inner.raw(key)
    }
    fn advance_clock(&self, by: Duration) {
        self.clock.advance(by);
    }
    fn budget_bytes(&self) -> Option<u64> {
        Some(DEFAULT_BUDGET_BYTES)
    }
    async fn plant_half_applied(&self, entries: &[(Slug, LedgerEntry)]) -> bool {
        if self.rule != Rule::HalfApplied {
            return false;
        }
        self.inner
            .write(&entries[..1], WriteMode::Replace)
            .await
            .unwrap();
        true
    }
}

/// Runs `case` on a fresh ledger broken by `rule`; whether the case failed.
macro_rules! rejects {
    ($rule:expr, $case:ident) => {{
        let outcome = tokio::spawn(async move {
            let harness = Broken::new($rule);
            testing::$case(&harness).await;
        })
        .await;
        outcome.is_err_and(|e| e.is_panic())
    }};
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_conformance_suite_rejects_every_deliberately_broken_backend() {
    let verdicts = [
        (
            Rule::Exclusion,
            rejects!(Rule::Exclusion, takers_on_real_threads_never_both_win),
        ),
        (
            Rule::Lapse,
            rejects!(
                Rule::Lapse,
                a_write_under_a_lapsed_lease_is_refused_even_if_nobody_took_the_lock
            ),
        ),
        (
            Rule::StaleRelease,
            rejects!(
                Rule::StaleRelease,
                a_stale_lease_releases_nothing_and_writes_nothing
            ),
        ),
        (
            Rule::LockRevision,
            rejects!(
                Rule::LockRevision,
                every_change_of_the_lock_alone_raises_the_revision
            ),
        ),
        (
            Rule::Usage,
            rejects!(
                Rule::Usage,
                a_budgeted_ledger_reports_its_usage_and_it_grows_with_each_write
            ),
        ),
        (
            Rule::HalfApplied,
            rejects!(
                Rule::HalfApplied,
                a_change_half_applied_by_a_crash_reads_whole_or_not_at_all
            ),
        ),
    ];
    let passed: Vec<Rule> = verdicts
        .iter()
        .filter(|(_, rejected)| !rejected)
        .map(|(rule, _)| *rule)
        .collect();
    assert!(
        passed.is_empty(),
        "the suite passed backends that break {passed:?}"
    );
}
