//! Fault injection around any ledger, for tests of the policy layer.

use std::collections::VecDeque;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use migration_core::last_failure::LastFailure;
use migration_core::ledger::{Ledger, LedgerError, LedgerSnapshot, WriteMode, WriteReport};
use migration_core::lock::{Lease, Lock, LockedLedger};
use migration_core::retry::{Attempts, RetryPolicy};
use migration_core::step::{StepMode, StepReport, StepWrite};
use migration_core::{LedgerEntry, Slug};

/// A ledger operation, as counted and matched by [`FaultyLedger`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Operation {
    /// [`Ledger::read`].
    Read,
    /// [`Ledger::create`].
    Create,
    /// [`Ledger::write`].
    Write,
    /// [`Ledger::note_attempt`].
    NoteAttempt,
    /// [`Ledger::note_failure`].
    NoteFailure,
    /// [`Ledger::write_step`] under a lock (a step written
    /// [`StepMode::Overwrite`] is counted as its parts: [`Operation::Write`],
    /// [`Operation::NoteAttempt`], [`Operation::NoteFailure`]).
    WriteStep,
    /// [`Lock::acquire`].
    AcquireLock,
    /// [`Lock::renew`].
    RenewLock,
    /// [`Lock::release`].
    ReleaseLock,
}

impl Operation {
    /// The operation name used in error messages.
    pub const fn as_str(self) -> &'static str {
        match self {
            Operation::Read => "read",
            Operation::Create => "create",
            Operation::Write => "write",
            Operation::NoteAttempt => "note attempt",
            Operation::NoteFailure => "note failure",
            Operation::WriteStep => "write step",
            Operation::AcquireLock => "acquire lock",
            Operation::RenewLock => "renew lock",
            Operation::ReleaseLock => "release lock",
        }
    }
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What happens to one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Fault {
    /// Fail with a transient error before touching the store.
    Transient,
    /// Fail with a permanent error before touching the store.
    Permanent,
    /// Perform the call, then report a transient error: the effect happened
    /// but the caller never learns it (a lost reply).
    LostReply,
}

/// Wraps a ledger and makes chosen calls fail.
///
/// Faults come from three sources, checked in order: a fault pinned to the
/// Nth call overall ([`FaultyLedger::fail_call`]), a queue of per-call
/// outcomes ([`FaultyLedger::set_schedule`], one element consumed per call),
/// and per-operation queues ([`FaultyLedger::fail_next`]). Every call is
/// logged, so tests can count round trips.
#[derive(Debug, Clone)]
pub struct FaultyLedger {
    inner: Arc<dyn LockedLedger>,
    state: Arc<Mutex<FaultState>>,
    retry: RetryPolicy,
}

#[derive(Debug, Default)]
struct FaultState {
    calls: Vec<(Operation, Option<Fault>)>,
    pinned: Vec<(usize, Fault)>,
    schedule: VecDeque<Option<Fault>>,
    per_operation: Vec<(Operation, Fault)>,
}

impl FaultyLedger {
    /// Wraps `inner` with no faults; every fault reaches the caller.
    pub fn new(inner: Arc<dyn LockedLedger>) -> Self {
        FaultyLedger {
            inner,
            state: Arc::new(Mutex::new(FaultState::default())),
            retry: RetryPolicy::immediate(1),
        }
    }

    /// Behaves as a backend that retries its own transient failures under
    /// `policy`: each fault hits one request, and every request is a call in
    /// the log. This is how the Kubernetes backends treat a 500 or a dropped
    /// connection, so the policy layer above sees only what retries could
    /// not absorb.
    pub fn with_retries(mut self, policy: RetryPolicy) -> Self {
        self.retry = policy;
        self
    }

    fn state(&self) -> MutexGuard<'_, FaultState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Makes the `n`th call from now on (1-based, counting every operation
    /// since the wrapper was built) suffer `fault`.
    pub fn fail_call(&self, n: usize, fault: Fault) {
        self.state().pinned.push((n, fault));
    }

    /// Makes the next call of `operation` suffer `fault` (queued: calling
    /// this twice fails the next two calls).
    pub fn fail_next(&self, operation: Operation, fault: Fault) {
        self.state().per_operation.push((operation, fault));
    }

    /// Replaces the per-call schedule: element i decides the i-th call from
    /// now on; when it runs out, calls succeed.
    pub fn set_schedule(&self, schedule: impl IntoIterator<Item = Option<Fault>>) {
        self.state().schedule = schedule.into_iter().collect();
    }

    /// Removes every pending fault.
    pub fn clear(&self) {
        let mut state = self.state();
        state.pinned.clear();
        state.schedule.clear();
        state.per_operation.clear();
    }

    /// Every call so far, with the fault it suffered.
    pub fn calls(&self) -> Vec<(Operation, Option<Fault>)> {
        self.state().calls.clone()
    }

    /// Number of calls of `operation` so far.
    pub fn count(&self, operation: Operation) -> usize {
        self.state()
            .calls
            .iter()
            .filter(|(op, _)| *op == operation)
            .count()
    }

    /// Forgets the call log (faults stay).
    pub fn reset_calls(&self) {
        self.state().calls.clear();
    }

    fn decide(&self, operation: Operation) -> Option<Fault> {
        let mut state = self.state();
        let n = state.calls.len() + 1;
        let fault = if let Some(i) = state.pinned.iter().position(|(at, _)| *at == n) {
            Some(state.pinned.remove(i).1)
        } else if let Some(scheduled) = state.schedule.pop_front() {
            scheduled
        } else {
            let queued = state
                .per_operation
                .iter()
                .position(|(op, _)| *op == operation);
            queued.map(|i| state.per_operation.remove(i).1)
        };
        state.calls.push((operation, fault));
        fault
    }

    fn error(&self, operation: Operation, fault: Fault) -> LedgerError {
        let ledger = self.inner.describe();
        match fault {
            Fault::Transient => LedgerError::Transient {
                ledger,
                operation: operation.as_str(),
                message: "injected transient fault".to_owned(),
            },
            Fault::Permanent => LedgerError::Permanent {
                ledger,
                operation: operation.as_str(),
                message: "injected permanent fault".to_owned(),
            },
            Fault::LostReply => LedgerError::Transient {
                ledger,
                operation: operation.as_str(),
                message: "injected lost reply (the call took effect)".to_owned(),
            },
        }
    }

    async fn call<T, F, Fut>(&self, operation: Operation, mut request: F) -> Result<T, LedgerError>
    where
        T: Send,
        F: FnMut() -> Fut + Send,
        Fut: std::future::Future<Output = Result<T, LedgerError>> + Send,
    {
        // Immediate by policy in every test: no timer to wait on.
        let pause = |_| std::future::ready(());
        let transient = LedgerError::is_transient;
        self.retry
            .run(&mut Attempts::new(), transient, pause, || {
                let fault = self.decide(operation);
                let run = request();
                async move {
                    match fault {
                        None => run.await,
                        Some(Fault::LostReply) => {
                            // The effect happens; the answer does not arrive.
                            let _ = run.await;
                            Err(self.error(operation, Fault::LostReply))
                        }
                        Some(fault) => Err(self.error(operation, fault)),
                    }
                }
            })
            .await
    }
}

#[async_trait]
impl Ledger for FaultyLedger {
    fn describe(&self) -> String {
        self.inner.describe()
    }

    async fn read(&self) -> Result<Option<LedgerSnapshot>, LedgerError> {
        self.call(Operation::Read, || self.inner.read()).await
    }

    async fn create(&self, entries: &[(Slug, LedgerEntry)]) -> Result<(), LedgerError> {
        self.call(Operation::Create, || self.inner.create(entries))
            .await
    }

    async fn write(
        &self,
        entries: &[(Slug, LedgerEntry)],
        mode: WriteMode,
    ) -> Result<WriteReport, LedgerError> {
        self.call(Operation::Write, || self.inner.write(entries, mode))
            .await
    }

    async fn note_attempt(&self, slug: &Slug, token: &str, floor: u32) -> Result<u32, LedgerError> {
        self.call(Operation::NoteAttempt, || {
            self.inner.note_attempt(slug, token, floor)
        })
        .await
    }

    async fn note_failure(&self, slug: &Slug, failure: &LastFailure) -> Result<(), LedgerError> {
        self.call(Operation::NoteFailure, || {
            self.inner.note_failure(slug, failure)
        })
        .await
    }

    async fn write_step(&self, step: &StepWrite<'_>) -> Result<StepReport, LedgerError> {
        if step.mode == StepMode::Overwrite {
            // Its parts, each a call that can fail on its own.
            let mut attempts = None;
            if !step.records.is_empty() {
                self.write(step.records, WriteMode::Replace).await?;
            }
            if let Some(a) = step.attempt {
                attempts = Some(self.note_attempt(a.slug, a.token, a.floor).await?);
            }
            if let Some(f) = step.failure {
                self.note_failure(f.slug, f.failure).await?;
            }
            return Ok(StepReport {
                attempts,
                lease: None,
            });
        }
        self.call(Operation::WriteStep, || self.inner.write_step(step))
            .await
    }
}

#[async_trait]
impl Lock for FaultyLedger {
    async fn acquire(&self, holder: &str, ttl: Duration) -> Result<Lease, LedgerError> {
        self.call(Operation::AcquireLock, || self.inner.acquire(holder, ttl))
            .await
    }

    async fn renew(&self, lease: &Lease, ttl: Duration) -> Result<Lease, LedgerError> {
        self.call(Operation::RenewLock, || self.inner.renew(lease, ttl))
            .await
    }

    async fn release(&self, lease: &Lease) -> Result<(), LedgerError> {
        self.call(Operation::ReleaseLock, || self.inner.release(lease))
            .await
    }
}
