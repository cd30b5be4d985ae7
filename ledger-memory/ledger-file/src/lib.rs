//! # ledger-file
//!
//! The file-backed [`Ledger`](migration_core::Ledger), the embedded default of
//! the command-line tool: the in-memory ledger's object
//! ([`migration_core::object`]) persisted as a snapshot and an append-only,
//! checksummed journal, one fsync per mutation, safe across processes. It
//! behaves exactly like the Kubernetes backends, which the shared conformance
//! suite proves.

#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

mod file;
mod journal;

pub use file::{DEFAULT_COMPACT_MIN_BYTES, DEFAULT_FILE_BUDGET_BYTES, FileLedger};
