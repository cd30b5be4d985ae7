//! The shared backend conformance suite, run by the memory ledger.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use ledger_memory::{DEFAULT_BUDGET_BYTES, MemoryLedger};
use migration_core::testing::Harness;
use migration_core::testing::fixtures::shared_clock;
use migration_core::{LockedLedger, ManualClock};

struct MemoryHarness {
    ledger: MemoryLedger,
    clock: Arc<ManualClock>,
}

async fn memory_harness() -> MemoryHarness {
    let clock = shared_clock();
    MemoryHarness {
        ledger: MemoryLedger::with_clock(clock.clone()),
        clock,
    }
}

#[async_trait]
impl Harness for MemoryHarness {
    async fn ledger(&self) -> Arc<dyn LockedLedger> {
        Arc::new(self.ledger.clone())
    }
    async fn plant_raw(&self, key: &str, value: &str) {
        self.ledger.put_raw(key, value);
    }
    async fn raw(&self, key: &str) -> Option<String> {
        self.ledger.raw(key)
    }
    fn advance_clock(&self, by: Duration) {
        self.clock.advance(by);
    }
    fn budget_bytes(&self) -> Option<u64> {
        Some(DEFAULT_BUDGET_BYTES)
    }
}

mod memory {
    use super::memory_harness;
    migration_core::ledger_conformance_tests!(memory_harness);
}
