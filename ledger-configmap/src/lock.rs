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
//! lease no longer ours leaves the holder alone. The ConfigMap must exist
//! ([`LedgerError::NotFound`] before): a fresh install is one create, which
//! never overwrites and runs nothing, so it needs no lock.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use migration_core::step::LockStep;
use migration_core::{Lease, LedgerError, Timestamp};
use migration_kube::{Step, conditional_update};

use crate::{Change, Conditional, ConfigMapLedger};

/// The annotation of the ledger ConfigMap that holds its run lock.
pub const LOCK_ANNOTATION: &str = "migrations.cozystack.io/run-lock";

/// The lock as stored in the annotation.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct StoredLock {
    holder: String,
    token: String,
    acquired: Timestamp,
    renewed: Timestamp,
    ttl_seconds: u64,
}

impl StoredLock {
    fn expires(&self) -> Timestamp {
        self.renewed.plus(Duration::from_secs(self.ttl_seconds))
    }

    fn lease(&self) -> Lease {
        Lease {
            holder: self.holder.clone(),
            token: self.token.clone(),
            acquired_at: self.acquired,
            expires_at: self.expires(),
        }
    }

    fn is(&self, lease: &Lease) -> bool {
        self.holder == lease.holder && self.token == lease.token
    }

    fn encode(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// A token for a new tenure: the time it starts and a process-wide counter,
/// so two takes by one holder never share one.
pub(crate) fn new_token(now: Timestamp) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!("{now}/{n}")
}

fn ttl_seconds(ttl: Duration) -> u64 {
    ttl.as_secs().max(1)
}

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

    /// Refuses when someone other than `holder` holds an unexpired lock.
    fn refuse_if_held(
        &self,
        stored: Option<&StoredLock>,
        holder: &str,
        now: Timestamp,
    ) -> Result<(), LedgerError> {
        match stored {
            Some(l) if l.holder != holder && now < l.expires() => Err(LedgerError::LockHeld {
                ledger: self.writer.ledger.clone(),
                holder: l.holder.clone(),
                expires_at: l.expires(),
            }),
            _ => Ok(()),
        }
    }

    /// `stored` if it is `lease`'s tenure; otherwise the lock is lost.
    fn require(
        &self,
        stored: Option<StoredLock>,
        lease: &Lease,
    ) -> Result<StoredLock, LedgerError> {
        match stored {
            Some(l) if l.is(lease) => Ok(l),
            other => Err(LedgerError::LockLost {
                ledger: self.writer.ledger.clone(),
                holder: lease.holder.clone(),
                reason: match other {
                    Some(l) => format!("now held by {}", l.holder),
                    None => "the lock was released".into(),
                },
            }),
        }
    }

    /// Refuses unless `cm` is still at `revision`, the one a run planned on.
    fn refuse_if_changed(&self, cm: &ConfigMap, revision: Option<&str>) -> Result<(), LedgerError> {
        let found = cm.metadata.resource_version.as_deref();
        if found.is_some() && found == revision {
            return Ok(());
        }
        Err(LedgerError::Changed {
            ledger: self.writer.ledger.clone(),
            expected: revision.unwrap_or("unknown").into(),
            found: found.unwrap_or("none").into(),
        })
    }

    /// What `step` does to the lock on `cm`: the annotation change and the
    /// lease it leaves, or the refusal. `take_token` is the tenure a
    /// [`LockStep::Take`] creates; finding it stored means this take already
    /// landed (a lost reply), which then needs no change.
    pub(crate) fn lock_step(
        &self,
        cm: &ConfigMap,
        step: &LockStep<'_>,
        take_token: &str,
        operation: &'static str,
    ) -> Result<LockChange, LedgerError> {
        if *step == LockStep::Separate {
            return Ok((None, None));
        }
        let stored = self.stored_lock(cm, operation)?;
        let now = self.clock.now();
        match *step {
            LockStep::Separate => Ok((None, None)),
            // This lock lives in the ledger object: a step naming a lock
            // beside it was built for another backend.
            LockStep::Beside { .. } => Err(LedgerError::Permanent {
                ledger: self.writer.ledger.clone(),
                operation,
                message: "this ledger keeps its run lock in its object, not beside it".into(),
            }),
            LockStep::Take {
                holder,
                ttl,
                revision,
            } => {
                if let Some(l) = stored
                    .as_ref()
                    .filter(|l| l.holder == holder && l.token == take_token)
                {
                    return Ok((None, Some(l.lease())));
                }
                self.refuse_if_held(stored.as_ref(), holder, now)?;
                self.refuse_if_changed(cm, revision)?;
                let taken = StoredLock {
                    holder: holder.to_owned(),
                    token: take_token.to_owned(),
                    acquired: now,
                    renewed: now,
                    ttl_seconds: ttl_seconds(ttl),
                };
                Ok((Some(Some(taken.encode())), Some(taken.lease())))
            }
            LockStep::Check { holder, revision } => {
                self.refuse_if_held(stored.as_ref(), holder, now)?;
                self.refuse_if_changed(cm, revision)?;
                Ok((None, None))
            }
            LockStep::Hold { lease, ttl } => {
                let renewed = StoredLock {
                    renewed: now,
                    ttl_seconds: ttl_seconds(ttl),
                    ..self.require(stored, lease)?
                };
                Ok((Some(Some(renewed.encode())), Some(renewed.lease())))
            }
            LockStep::Release { lease } => {
                self.require(stored, lease)?;
                Ok((Some(None), None))
            }
        }
    }

    /// Takes the lock; see [`migration_core::Lock::acquire`].
    async fn take(&self, holder: &str, ttl: Duration) -> Result<Lease, LedgerError> {
        const OP: &str = "acquire lock";
        self.older_runners.refuse_if_held_by_another(holder).await?;
        let fresh_token = new_token(self.clock.now());
        conditional_update(&Conditional(self), OP, |cm| {
            let stored = self.stored_lock(cm, OP)?;
            let now = self.clock.now();
            self.refuse_if_held(stored.as_ref(), holder, now)?;
            // Already ours and live: renew the same tenure, as a Lease does.
            let taken = match stored {
                Some(l) if l.holder == holder && now < l.expires() => StoredLock {
                    renewed: now,
                    ttl_seconds: ttl_seconds(ttl),
                    ..l
                },
                _ => StoredLock {
                    holder: holder.to_owned(),
                    token: fresh_token.clone(),
                    acquired: now,
                    renewed: now,
                    ttl_seconds: ttl_seconds(ttl),
                },
            };
            let lease = taken.lease();
            Ok(Step::Write(Change::lock(Some(taken.encode())), lease))
        })
        .await
    }

    /// Renews a held lock; see [`migration_core::Lock::renew`].
    async fn extend(&self, lease: &Lease, ttl: Duration) -> Result<Lease, LedgerError> {
        const OP: &str = "renew lock";
        let result = conditional_update(&Conditional(self), OP, |cm| {
            let stored = self.stored_lock(cm, OP)?;
            let renewed = StoredLock {
                renewed: self.clock.now(),
                ttl_seconds: ttl_seconds(ttl),
                ..self.require(stored, lease)?
            };
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

    fn kept_in_ledger(&self) -> bool {
        true
    }
}
