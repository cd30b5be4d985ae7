//! # ledger-memory
//!
//! The in-memory [`Ledger`](migration_core::Ledger) backend, first-class: it
//! behaves exactly like the Kubernetes backends (absent vs empty, corrupt
//! values, only-if-absent writes, the size budget, the run lock), which the
//! shared conformance suite proves. Three ways to use it:
//!
//! - [`MemoryLedger`]: in process, for property tests and dry runs;
//! - [`FileLedger`]: the same ledger persisted to a file (a snapshot and an
//!   append-only, checksummed journal, one fsync per mutation), the
//!   embedded default of the command-line tool, safe across processes;
//! - [`FaultyLedger`]: wraps any ledger and injects transient, permanent or
//!   lost-reply faults on chosen calls, counting every call.

#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

mod document;
mod faults;
mod file;
mod journal;
mod memory;

pub use faults::{Fault, FaultyLedger, Operation};
pub use file::{DEFAULT_COMPACT_MIN_BYTES, DEFAULT_FILE_BUDGET_BYTES, FileLedger};
pub use memory::MemoryLedger;

/// The memory ledger's default size budget: a ConfigMap's 1 MiB of data, so
/// that a dry run refuses what the cluster would refuse. The file ledger
/// has its own, larger budget ([`DEFAULT_FILE_BUDGET_BYTES`]).
pub const DEFAULT_BUDGET_BYTES: u64 = 1024 * 1024;
