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
//! [`migration_kube::object_lock`]'s, shared with the custom-resource
//! ledger's `status.lock`). The ConfigMap must exist
//! ([`LedgerError::NotFound`] before): a fresh install is one create, which
//! never overwrites and runs nothing, so it needs no lock.

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use migration_core::step::StepMode;
use migration_core::{Lease, LedgerError};
use migration_kube::object_lock::{ObjectLock, StoredLock};
use migration_kube::{Step, conditional_update};

use crate::{Change, Conditional, ConfigMapLedger};

pub(crate) use migration_kube::object_lock::new_token;

/// The annotation of the ledger ConfigMap that holds its run lock.
pub const LOCK_ANNOTATION: &str = "migrations.cozystack.io/run-lock";

/// What a lock change does to the annotation, and the lease it leaves.
type LockChange = (Option<Option<String>>, Option<Lease>);

impl ConfigMapLedger {
    /// The lock stored on `cm`; an annotation that does not parse fails
    /// closed (nobody can tell who holds it).
    fn stored_lock(
        &self,
        cm: &ConfigMap,
        operation: &'static str,
    ) -> Result<Option<StoredLock>, LedgerError> {
        let Some(raw) = cm
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(LOCK_ANNOTATION))
        else {
            return Ok(None);
        };
        serde_json::from_str(raw)
            .map(Some)
            .map_err(|e| LedgerError::Permanent {
                ledger: self.writer.ledger.clone(),
                operation,
                message: format!(
                    "annotation {LOCK_ANNOTATION} is not a run lock ({e}): {}",
                    raw.chars().take(200).collect::<String>()
                ),
            })
    }

    /// The lock of `cm` as the shared rules see it
    /// ([`migration_kube::object_lock`]).
    fn object_lock<'a>(
        &'a self,
        cm: &'a ConfigMap,
        operation: &'static str,
    ) -> Result<ObjectLock<'a>, LedgerError> {
        Ok(ObjectLock {
            ledger: &self.writer.ledger,
            stored: self.stored_lock(cm, operation)?,
            revision: cm.metadata.resource_version.as_deref(),
            now: self.clock.now(),
        })
    }

    /// What `step` does to the lock on `cm`: the annotation change and the
    /// lease it leaves, or the refusal ([`ObjectLock::step`]).
    pub(crate) fn lock_step(
        &self,
        cm: &ConfigMap,
        step: &StepMode<'_>,
        take_token: &str,
        operation: &'static str,
    ) -> Result<LockChange, LedgerError> {
        if *step == StepMode::Overwrite {
            return Ok((None, None));
        }
        let (write, lease) = self.object_lock(cm, operation)?.step(step, take_token)?;
        Ok((write.map(|lock| lock.map(|l| l.encode())), lease))
    }

    /// Takes the lock; see [`migration_core::Lock::acquire`].
    async fn take(&self, holder: &str, ttl: Duration) -> Result<Lease, LedgerError> {
        const OP: &str = "acquire lock";
        self.older_runners.refuse_if_held_by_another(holder).await?;
        let fresh_token = new_token(self.clock.now());
        conditional_update(&Conditional(self), OP, |cm| {
            let taken = self.object_lock(cm, OP)?.take(holder, ttl, &fresh_token)?;
            let lease = taken.lease();
            Ok(Step::Write(Change::lock(Some(taken.encode())), lease))
        })
        .await
    }

    /// Renews a held lock; see [`migration_core::Lock::renew`].
    async fn extend(&self, lease: &Lease, ttl: Duration) -> Result<Lease, LedgerError> {
        const OP: &str = "renew lock";
        let result = conditional_update(&Conditional(self), OP, |cm| {
            let renewed = self
                .object_lock(cm, OP)?
                .require(lease)?
                .renewed(self.clock.now(), ttl);
            let lease = renewed.lease();
            Ok(Step::Write(Change::lock(Some(renewed.encode())), lease))
        })
        .await;
        match result {
            Err(LedgerError::NotFound { .. }) => Err(LedgerError::LockLost {
                ledger: self.writer.ledger.clone(),
                holder: lease.holder.clone(),
                reason: "the ledger object was deleted".into(),
            }),
            other => other,
        }
    }

    /// Releases a held lock; see [`migration_core::Lock::release`].
    async fn free(&self, lease: &Lease) -> Result<(), LedgerError> {
        const OP: &str = "release lock";
        let result = conditional_update(&Conditional(self), OP, |cm| {
            let stored = self.stored_lock(cm, OP)?;
            if !stored.as_ref().is_some_and(|l| l.is(lease)) {
                return Ok(Step::Done(()));
            }
            Ok(Step::Write(Change::lock(None), ()))
        })
        .await;
        match result {
            Err(LedgerError::NotFound { .. }) => Ok(()),
            other => other,
        }
    }
}

#[async_trait::async_trait]
impl migration_core::Lock for ConfigMapLedger {
    async fn acquire(&self, holder: &str, ttl: Duration) -> Result<Lease, LedgerError> {
        self.take(holder, ttl).await
    }

    async fn renew(&self, lease: &Lease, ttl: Duration) -> Result<Lease, LedgerError> {
        self.extend(lease, ttl).await
    }

    async fn release(&self, lease: &Lease) -> Result<(), LedgerError> {
        self.free(lease).await
    }
}
