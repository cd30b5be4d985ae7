//! The run lock, kept in the ledger ConfigMap itself.
//!
//! One annotation, [`LOCK_ANNOTATION`], holds the lease as compact JSON:
//! `{"holder":"<pod>","token":"<tenure>","acquired":"<RFC 3339>","renewed":"<RFC 3339>","ttl_seconds":60}`.
//! It lapses at `renewed + ttl_seconds`, judged on the acquirer's clock as a
//! Lease's `renewTime + leaseDurationSeconds` is. Every change is a merge
//! patch carrying the `resourceVersion` it was decided on, so two takers
//! cannot both win, and a change of the ledger's data and of its lock can be
//! one request.
//!
//! Why here and not in a Lease beside the ConfigMap: a run must hold the
//! lock while it writes, and a Lease costs two requests of its own (take,
//! release) that no ledger write can carry. In the object, the run's first
//! write takes it (conditional on the revision the run planned on, which is
//! what taking it before reading used to guarantee) and its last releases
//! it. Semantics are the other backends' (the conformance suite checks):
//! free, expired or already ours can be taken; held is
//! [`LedgerError::LockHeld`] naming the holder; a renewal or a write under a
//! lease someone else now holds is [`LedgerError::LockLost`]; releasing a
//! lease no longer ours leaves the holder alone (the rules are
//! [`migration_core::fence`]'s, shared with the custom-resource
//! ledger's `status.lock`). The ConfigMap must exist
//! ([`LedgerError::NotFound`] before): a fresh install is one create, which
//! never overwrites and runs nothing, so it needs no lock.

use k8s_openapi::api::core::v1::ConfigMap;
use migration_core::LedgerError;
use migration_core::fence::{ObjectLock, StoredLock};

use crate::ConfigMapLedger;

/// The annotation of the ledger ConfigMap that holds its run lock.
pub const LOCK_ANNOTATION: &str = "migrations.cozystack.io/run-lock";

impl ConfigMapLedger {
    /// The lock of `cm` as the shared rules see it ([`migration_core::fence`]);
    /// an annotation that does not parse fails closed (nobody can tell who
    /// holds it).
    pub(crate) fn object_lock<'a>(
        &'a self,
        cm: &'a ConfigMap,
        operation: &'static str,
    ) -> Result<ObjectLock<'a>, LedgerError> {
        let annotation = cm.metadata.annotations.as_ref();
        let stored = match annotation.and_then(|a| a.get(LOCK_ANNOTATION)) {
            None => None,
            Some(raw) => Some(serde_json::from_str::<StoredLock>(raw).map_err(|e| {
                LedgerError::Permanent {
                    ledger: self.handle.writer.ledger.clone(),
                    operation,
                    message: format!(
                        "annotation {LOCK_ANNOTATION} is not a run lock ({e}): {}",
                        raw.chars().take(200).collect::<String>()
                    ),
                }
            })?),
        };
        Ok(ObjectLock {
            ledger: &self.handle.writer.ledger,
            stored,
            revision: cm.metadata.resource_version.as_deref(),
            now: self.handle.clock.now(),
        })
    }
}
