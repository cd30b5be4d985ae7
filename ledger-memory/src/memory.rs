//! The in-memory ledger.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use migration_core::ledger::{Lease, Ledger, LedgerError, LedgerSnapshot, WriteMode, WriteReport};
use migration_core::lock::Lock;
use migration_core::{Clock, LedgerEntry, Slug, SystemClock};

use crate::DEFAULT_BUDGET_BYTES;
use migration_core::last_failure::LastFailure;
use migration_core::object::{self, Change, Object};
use migration_core::step::{StepReport, StepWrite};

/// A ledger held in memory. Clones share the same storage, like two clients
/// of one API server, so tests can race handles against each other.
///
/// It keeps raw strings per key exactly as a ConfigMap does, so corrupt
/// values can be planted with [`MemoryLedger::put_raw`], and it enforces the
/// same size budget as the ConfigMap backend by default
/// ([`DEFAULT_BUDGET_BYTES`], 1 MiB), so that a dry run refuses what the
/// cluster would refuse.
#[derive(Debug, Clone)]
pub struct MemoryLedger {
    shared: Arc<Shared>,
}

/// The object (absent before a fresh install), the run lock included
/// ([`migration_core::fence::LOCK_KEY`]).
#[derive(Debug, Default)]
struct State {
    ledger: Option<Object>,
}

#[derive(Debug)]
struct Shared {
    name: String,
    doc: Mutex<State>,
    clock: Arc<dyn Clock>,
    budget: Option<u64>,
}

impl Default for MemoryLedger {
    fn default() -> Self {
        Self::new()
    }
}

impl MemoryLedger {
    /// An absent ledger on the system clock with the default budget.
    pub fn new() -> Self {
        Self::with_clock(Arc::new(SystemClock))
    }

    /// An absent ledger whose lock expiry follows `clock`.
    pub fn with_clock(clock: Arc<dyn Clock>) -> Self {
        Self::build(clock, Some(DEFAULT_BUDGET_BYTES))
    }

    /// An absent ledger with an explicit size budget (`None`: unlimited).
    pub fn with_clock_and_budget(clock: Arc<dyn Clock>, budget: Option<u64>) -> Self {
        Self::build(clock, budget)
    }

    fn build(clock: Arc<dyn Clock>, budget: Option<u64>) -> Self {
        MemoryLedger {
            shared: Arc::new(Shared {
                name: "memory ledger".to_owned(),
                doc: Mutex::new(State::default()),
                clock,
                budget,
            }),
        }
    }

    fn doc(&self) -> MutexGuard<'_, State> {
        // A panic in another test thread must not turn into a second panic here.
        self.shared
            .doc
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Plans a mutation against the object under the lock and applies it
    /// there, so a planned change never meets a state it was not planned on.
    fn change<T>(
        &self,
        plan: impl FnOnce(
            &str,
            Option<u64>,
            Option<&Object>,
        ) -> Result<(T, Option<Change>), LedgerError>,
    ) -> Result<T, LedgerError> {
        let mut doc = self.doc();
        let (out, change) = plan(&self.shared.name, self.shared.budget, doc.ledger.as_ref())?;
        if let Some(change) = change {
            change.apply(&mut doc.ledger);
        }
        Ok(out)
    }

    /// Stores `value` under `key` verbatim, creating the ledger object if it
    /// is absent. For tests: plants corrupt values or the `version` key.
    pub fn put_raw(&self, key: &str, value: &str) {
        let mut doc = self.doc();
        object::put_raw(doc.ledger.as_ref(), key, value).apply(&mut doc.ledger);
    }

    /// The raw stored value of `key`.
    pub fn raw(&self, key: &str) -> Option<String> {
        self.doc()
            .ledger
            .as_ref()
            .and_then(|s| s.data().get(key).cloned())
    }

    /// Every raw key and value, or `None` when the object is absent.
    pub fn raw_data(&self) -> Option<std::collections::BTreeMap<String, String>> {
        self.doc().ledger.as_ref().map(|s| s.data().clone())
    }
}

#[async_trait]
impl Ledger for MemoryLedger {
    fn describe(&self) -> String {
        self.shared.name.clone()
    }

    async fn read(&self) -> Result<Option<LedgerSnapshot>, LedgerError> {
        Ok(self
            .doc()
            .ledger
            .as_ref()
            .map(|o| o.snapshot(self.shared.budget)))
    }

    async fn create(&self, entries: &[(Slug, LedgerEntry)]) -> Result<(), LedgerError> {
        self.change(|name, budget, current| {
            object::plan_create(name, budget, current, entries).map(|change| ((), Some(change)))
        })
    }

    async fn write(
        &self,
        entries: &[(Slug, LedgerEntry)],
        mode: WriteMode,
    ) -> Result<WriteReport, LedgerError> {
        self.change(|name, budget, current| {
            object::plan_write(name, budget, current, entries, mode)
        })
    }

    async fn note_attempt(&self, slug: &Slug, token: &str, floor: u32) -> Result<u32, LedgerError> {
        self.change(|name, budget, current| {
            object::plan_note_attempt(name, budget, current, slug, token, floor)
        })
    }

    async fn note_failure(&self, slug: &Slug, failure: &LastFailure) -> Result<(), LedgerError> {
        self.change(|name, budget, current| {
            object::plan_note_failure(name, budget, current, slug, failure).map(|c| ((), c))
        })
    }

    /// The step, its condition and its lock change decided and applied
    /// under the one mutex ([`object::plan_step`]).
    async fn write_step(&self, step: &StepWrite<'_>) -> Result<StepReport, LedgerError> {
        let now = self.shared.clock.now();
        let token = migration_core::fence::new_token(now);
        self.change(|name, budget, current| {
            object::plan_step(name, budget, current, step, now, &token)
        })
    }
}

#[async_trait]
impl Lock for MemoryLedger {
    async fn acquire(&self, holder: &str, ttl: Duration) -> Result<Lease, LedgerError> {
        let now = self.shared.clock.now();
        let token = migration_core::fence::new_token(now);
        self.change(|name, _, current| {
            object::plan_lock_take(name, current, holder, ttl, now, &token)
        })
    }

    async fn renew(&self, lease: &Lease, ttl: Duration) -> Result<Lease, LedgerError> {
        let now = self.shared.clock.now();
        self.change(|name, _, current| object::plan_lock_renew(name, current, lease, ttl, now))
    }

    async fn release(&self, lease: &Lease) -> Result<(), LedgerError> {
        self.change(|name, _, current| object::plan_lock_release(name, current, lease))
    }
}
