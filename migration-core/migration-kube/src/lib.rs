//! # migration-kube
//!
//! What the Kubernetes ledger backends share, so that the ConfigMap and the
//! custom-resource backend behave the same without depending on each other:
//!
//! - [`classify`] and [`ledger_error`]: one mapping from `kube::Error` onto
//!   the core's [`LedgerError`](migration_core::LedgerError) kinds;
//! - [`RetryPolicy`]: bounded exponential backoff with jitter for transient
//!   API errors (429, 5xx, timeouts, connection resets);
//! - [`LeaseLock`]: the run lock as a `coordination.k8s.io/v1` Lease, with
//!   holder identity, renewal and expiry.
//!
//! `migration-core` itself stays free of kube; this crate is its adapter.

#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

mod error;
mod lease;
mod retry;

pub use error::{Class, classify, ledger_error};
pub use lease::LeaseLock;
pub use retry::{Backoff, RetryPolicy};
