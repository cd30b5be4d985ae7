//! The shared backend conformance suite, run unchanged on the directory
//! ledger, as a backend author outside this repository would wire it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use ledger_dir::DirLedger;
use migration_core::ledger::WriteMode;
use migration_core::object::{self, Object};
use migration_core::testing::Harness;
use migration_core::testing::fixtures::shared_clock;
use migration_core::{LedgerEntry, LockedLedger, ManualClock, Slug};

/// The ConfigMap's budget, so the budget cases run on a small ledger.
const BUDGET: u64 = 1024 * 1024;

struct DirHarness {
    dir: tempfile::TempDir,
    clock: Arc<ManualClock>,
}

impl DirHarness {
    fn open(&self) -> DirLedger {
        DirLedger::open(self.dir.path(), self.clock.clone(), Some(BUDGET)).unwrap()
    }

    /// The stored object, read as the file says, past the backend.
    fn stored(&self) -> Option<Object> {
        let text = std::fs::read(self.open().path()).ok()?;
        let (revision, data): (u64, BTreeMap<String, String>) =
            serde_json::from_slice(&text).unwrap();
        Some(Object::new(revision, data))
    }

    fn put(&self, object: &Object, file: &str) {
        let text = serde_json::to_vec(&(object.revision(), object.data())).unwrap();
        std::fs::write(self.dir.path().join(file), text).unwrap();
    }
}

async fn dir_harness() -> DirHarness {
    DirHarness {
        dir: tempfile::tempdir().unwrap(),
        clock: shared_clock(),
    }
}

#[async_trait]
impl Harness for DirHarness {
    async fn ledger(&self) -> Arc<dyn LockedLedger> {
        Arc::new(self.open())
    }
    async fn plant_raw(&self, key: &str, value: &str) {
        let mut current = self.stored();
        object::put_raw(current.as_ref(), key, value).apply(&mut current);
        self.put(current.as_ref().unwrap(), "ledger.json");
    }
    async fn raw(&self, key: &str) -> Option<String> {
        self.stored()?.data().get(key).cloned()
    }
    fn advance_clock(&self, by: Duration) {
        self.clock.advance(by);
    }
    fn budget_bytes(&self) -> Option<u64> {
        Some(BUDGET)
    }
    /// The temporary file of a replacing write, written in full and never
    /// renamed: what a crash between the write and the rename leaves.
    async fn plant_half_applied(&self, entries: &[(Slug, LedgerEntry)]) -> bool {
        let mut current = self.stored();
        let (_, change) =
            object::plan_write("dir", None, current.as_ref(), entries, WriteMode::Replace).unwrap();
        change.unwrap().apply(&mut current);
        self.put(current.as_ref().unwrap(), "ledger.json.tmp");
        true
    }
}

mod dir {
    use super::dir_harness;
    migration_core::ledger_conformance_tests!(dir_harness);
}
