//! What the file ledger's test files share: the conformance harness over a ledger file in a
//! fresh temporary directory.

#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use ledger_file::{DEFAULT_FILE_BUDGET_BYTES, FileLedger};
use migration_core::ledger::WriteMode;
use migration_core::testing::fixtures::shared_clock;
use migration_core::testing::{Harness, sample_record};
use migration_core::{EntryState, Ledger, LedgerEntry, LockedLedger, ManualClock, Slug};

/// A file ledger at `<temp dir>/state/ledger.json` (the directory made by the first write),
/// its lock expiry following a manual clock, with the size budget `budget` (the file ledger's
/// own default where `None`). Every [`Harness::ledger`] call is a new handle: separate objects
/// sharing only the file.
pub struct FileHarness {
    _dir: tempfile::TempDir,
    /// The ledger file.
    pub path: PathBuf,
    clock: Arc<ManualClock>,
    budget: Option<u64>,
}

impl FileHarness {
    /// A harness on a new temporary directory.
    pub fn new(budget: Option<u64>) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state").join("ledger.json");
        Self {
            _dir: dir,
            path,
            clock: shared_clock(),
            budget,
        }
    }

    fn budget(&self) -> u64 {
        self.budget.unwrap_or(DEFAULT_FILE_BUDGET_BYTES)
    }
}

#[async_trait]
impl Harness for FileHarness {
    async fn ledger(&self) -> Arc<dyn LockedLedger> {
        Arc::new(
            FileLedger::with_clock(&self.path, self.clock.clone()).with_budget(Some(self.budget())),
        )
    }
    async fn plant_raw(&self, key: &str, value: &str) {
        FileLedger::new(&self.path).put_raw(key, value).unwrap();
    }
    async fn raw(&self, key: &str) -> Option<String> {
        FileLedger::new(&self.path)
            .raw_data()
            .unwrap()
            .and_then(|d| d.get(key).cloned())
    }
    fn advance_clock(&self, by: Duration) {
        self.clock.advance(by);
    }
    fn budget_bytes(&self) -> Option<u64> {
        Some(self.budget())
    }
    /// The write appended, then torn as a crash tears an append: the second
    /// half of its record, newline included, back to the NULs it was
    /// written into.
    async fn plant_half_applied(&self, entries: &[(Slug, LedgerEntry)]) -> bool {
        self.ledger()
            .await
            .write(entries, WriteMode::Replace)
            .await
            .unwrap();
        let mut file = std::fs::read(&self.path).unwrap();
        let end = file.iter().position(|&b| b == 0).unwrap_or(file.len());
        assert_eq!(file[end - 1], b'\n', "the append ends in its newline");
        let start = file[..end - 1]
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |i| i + 1);
        let record = String::from_utf8_lossy(&file[start..end]);
        assert!(
            entries
                .iter()
                .all(|(slug, _)| record.contains(&format!("\"m.{slug}\""))),
            "the last record is the write's: {record}"
        );
        file[(start + end) / 2..end].fill(0);
        std::fs::write(&self.path, &file).unwrap();
        true
    }
}

/// A file ledger at `path`, created holding `s-1` in `state`.
pub async fn created_with_one_record(path: &Path, state: EntryState) -> FileLedger {
    let ledger = FileLedger::new(path);
    ledger.create(&[sample_record(1, state)]).await.unwrap();
    ledger
}
