//! # ledger-memory
//!
//! The in-memory [`Ledger`](migration_core::Ledger) backend, first-class: it
//! behaves exactly like the Kubernetes backends (absent vs empty, corrupt
//! values, only-if-absent writes, the size budget, the run lock), which the
//! shared conformance suite proves. Two ways to use it:
//!
//! - [`MemoryLedger`]: in process, for property tests and dry runs;
//! - [`FaultyLedger`]: wraps any ledger and injects transient, permanent or
//!   lost-reply faults on chosen calls, counting every call.
//!
//! The same ledger persisted to a file is the `ledger-file` crate beside it;
//! both keep [`migration_core::object`], the ledger as one object.

#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

mod faults;
mod memory;

pub use faults::{Fault, FaultyLedger, Operation};
pub use memory::MemoryLedger;

/// The memory ledger's default size budget: a ConfigMap's 1 MiB of data, so
/// that a dry run refuses what the cluster would refuse. The file ledger
/// has its own, larger budget.
pub const DEFAULT_BUDGET_BYTES: u64 = 1024 * 1024;
