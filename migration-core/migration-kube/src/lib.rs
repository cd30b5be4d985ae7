//! # migration-kube
//!
//! What the Kubernetes ledger backends share, so that the ConfigMap and the
//! custom-resource backend behave the same without depending on each other:
//!
//! - [`classify`] and [`ledger_error`]: one mapping from `kube::Error` onto
//!   the core's [`LedgerError`](migration_core::LedgerError) kinds;
//! - [`RetryPolicy`]: bounded exponential backoff with jitter for transient
//!   API errors (429, 5xx, timeouts, connection resets), the one retry layer:
//!   [`client`] builds every `kube::Client` without kube's own;
//!   [`Backoff::retry`] is the one loop that tries a request again, counting
//!   its tries in the [`Attempts`] the caller's whole operation shares;
//! - [`conditional_update`] over a [`ConditionalObject`]: the write that
//!   carries the resourceVersion it was computed from, re-read and
//!   recomputed on a 409, bounded by the [`RetryPolicy`]; and
//!   [`WriteTarget::retry_after`], the one decision of whether a
//!   failed write is tried again;
//! - [`patch_params`] and [`post_params`]: every write under the field
//!   manager [`defaults::FIELD_MANAGER`];
//! - [`defaults`]: the deployment's names (namespace, ledger, index,
//!   ServiceAccount, lock suffix, field manager);
//! - [`LeaseLock`]: the run lock as a `coordination.k8s.io/v1` Lease, with
//!   holder identity, renewal and expiry; both backends now keep their run
//!   lock in the ledger object (the rules are core's
//!   [`migration_core::fence`], for the ConfigMap's annotation and the
//!   custom resource's `status.lock` alike) and only read the Lease that
//!   runners of older releases lock through;
//! - [`object_ledger`]: what both backends do around their one object
//!   written once: the copy last seen, the output tails kept in the Secret
//!   before the write that names them, and taking, renewing and releasing
//!   the run lock it holds;
//! - [`ledger_options!`]: each backend's `Options`, whose budget, retry
//!   policy and clock are the same tunables.
//!
//! The API-fault suite and the real-server lane both backends run are test
//! support, in the `kube-ledger-testing` crate beside the test API server.
//!
//! `migration-core` itself stays free of kube; this crate is its adapter.

#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

pub mod client;
pub mod defaults;
mod error;
mod lease;
pub mod object_ledger;
mod options;
pub mod output_secret;
mod retry;
mod write;

pub use error::{Class, classify, ledger_error};
pub use lease::LeaseLock;
pub use retry::{Attempts, Backoff, RetryPolicy};
pub use write::{
    Base, ConditionalObject, Step, WriteTarget, Writer, conditional_update, patch_params,
    post_params,
};
