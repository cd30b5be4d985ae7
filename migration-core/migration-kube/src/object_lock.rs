//! The run lock kept in the ledger object: its rules and planner now live
//! in core ([`migration_core::fence`]), so that a backend needs no
//! Kubernetes crate to keep its lock; re-exported here for the two
//! Kubernetes backends, which store it in different places (the
//! ConfigMap's annotation, the custom resource's `status.lock`) but decide
//! identically.

pub use migration_core::fence::{LockWrite, ObjectLock, StoredLock, new_token};
