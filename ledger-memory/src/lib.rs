//! # ledger-memory
//!
//! The in-memory [`Ledger`](migration_core::Ledger) backend, first-class: it
//! behaves exactly like the Kubernetes backends (absent vs empty, corrupt
//! values, only-if-absent writes, the size budget, the run lock), which the
//! shared conformance suite proves. Three ways to use it:
//!
//! - [`MemoryLedger`]: in process, for property tests and dry runs;
//! - [`FileLedger`]: the same document persisted to a JSON file, the
//!   embedded default of the command-line tool, safe across processes;
//! - [`FaultyLedger`]: wraps any ledger and injects transient, permanent or
//!   lost-reply faults on chosen calls, counting every call.

#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

mod document;
mod faults;
mod file;
mod memory;

pub use faults::{Fault, FaultyLedger, Operation};
pub use file::FileLedger;
pub use memory::MemoryLedger;

/// The default size budget: a ConfigMap's 1 MiB of data, so that a dry run
/// on the memory or file ledger refuses what the cluster would refuse.
pub const DEFAULT_BUDGET_BYTES: u64 = 1024 * 1024;
