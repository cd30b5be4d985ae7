//! The shared backend conformance suite, run by the file ledger.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use common::FileHarness;
use ledger_memory::DEFAULT_BUDGET_BYTES;

async fn file_harness() -> FileHarness {
    // The budget is set to the ConfigMap's so the budget cases run on a small ledger; the file
    // ledger's own default (64 MiB) is exercised in file_journal/main.rs.
    FileHarness::new(Some(DEFAULT_BUDGET_BYTES))
}

mod file {
    use super::file_harness;
    migration_core::ledger_conformance_tests!(file_harness);
}
