//! The run lock, kept in the ledger object's `status.lock`, and the run's
//! step write that takes, proves, renews and releases it.
//!
//! `status.lock` holds the lease as `{holder, token, acquired, renewed,
//! ttl_seconds}` ([`StoredLock`], the same record the ConfigMap keeps in an
//! annotation), with the rules of [`migration_kube::object_lock`]. Every
//! change of it is a status write conditional on the `resourceVersion` it
//! was decided on, so two takers cannot both win, and a change of the
//! ledger's entries and of its lock is one request.
//!
//! Why in the status and not in an annotation: every engine write goes to
//! the status subresource, which keeps nothing of a request but its status,
//! so only a status field can ride on those writes. Why in the object and
//! not in the Lease beside it: a Lease costs a take and a release that no
//! ledger write can carry, so a run of K migrations could not go below
//! K + 4 requests; in the object the run's first write takes the lock
//! (conditional on the revision it planned on), every write renews it, and
//! its last releases it: K + 3 with the read and the check of the Lease that
//! runners of older releases still lock through
//! ([`LeaseLock::refuse_if_held_by_another`]). The object must exist
//! ([`LedgerError::NotFound`] before): a fresh install is a create that
//! never overwrites and runs nothing, so it needs no lock.
//!
//! [`LeaseLock::refuse_if_held_by_another`]: migration_kube::LeaseLock::refuse_if_held_by_another

use std::time::Duration;

use async_trait::async_trait;
use migration_core::keys;
use migration_core::ledger::AttemptMark;
use migration_core::step::{StepMode, StepReport, StepWrite};
use migration_core::{Lease, LedgerError};
use migration_kube::Step;
use migration_kube::object_lock::{LockWrite, ObjectLock, StoredLock, new_token};
use serde_json::Value;

use crate::CrdLedger;
use crate::ledger::put_entry;
use crate::state::{self, StatusWrite, View};

impl CrdLedger {
    /// The lock of the object `view` shows, as the shared rules see it; a
    /// `status.lock` that is not a lock fails closed (nobody can tell who
    /// holds it).
    fn object_lock<'a>(
        &'a self,
        view: &View<'a>,
        operation: &'static str,
    ) -> Result<ObjectLock<'a>, LedgerError> {
        let stored = match view.lock() {
            None => None,
            Some(raw) => Some(
                serde_json::from_value::<StoredLock>(raw.clone()).map_err(|e| {
                    self.permanent(
                        operation,
                        format!(
                            "{}: status.lock is not a run lock ({e}): {}",
                            self.status_object(),
                            raw.to_string().chars().take(200).collect::<String>()
                        ),
                    )
                })?,
            ),
        };
        Ok(ObjectLock {
            ledger: &self.writer.ledger,
            stored,
            revision: view.resource_version(),
            now: self.clock.now(),
        })
    }

    /// The JSON a status write stores for `lock`.
    fn lock_value(&self, operation: &'static str, lock: &StoredLock) -> Result<Value, LedgerError> {
        serde_json::to_value(lock)
            .map_err(|e| self.permanent(operation, format!("cannot encode the run lock: {e}")))
    }

    /// The status write of a lock change.
    fn lock_write(
        &self,
        operation: &'static str,
        change: LockWrite,
    ) -> Result<Option<Option<Value>>, LedgerError> {
        Ok(match change {
            None => None,
            Some(None) => Some(None),
            Some(Some(lock)) => Some(Some(self.lock_value(operation, &lock)?)),
        })
    }

    /// A write of the lock alone.
    fn only_lock(lock: Option<Value>) -> StatusWrite {
        StatusWrite {
            lock: Some(lock),
            ..StatusWrite::default()
        }
    }

    /// Takes the lock; see [`migration_core::Lock::acquire`].
    async fn take(&self, holder: &str, ttl: Duration) -> Result<Lease, LedgerError> {
        const OP: &str = "acquire lock";
        self.older_runners.refuse_if_held_by_another(holder).await?;
        let fresh_token = new_token(self.clock.now());
        self.update_status(OP, |view| {
            let taken = self
                .object_lock(view, OP)?
                .take(holder, ttl, &fresh_token)?;
            let lease = taken.lease();
            Ok(Step::Write(
                Self::only_lock(Some(self.lock_value(OP, &taken)?)),
                lease,
            ))
        })
        .await
    }

    /// Renews a held lock; see [`migration_core::Lock::renew`].
    async fn extend(&self, lease: &Lease, ttl: Duration) -> Result<Lease, LedgerError> {
        const OP: &str = "renew lock";
        let result = self
            .update_status(OP, |view| {
                let renewed = self
                    .object_lock(view, OP)?
                    .require(lease)?
                    .renewed(self.clock.now(), ttl);
                let lease = renewed.lease();
                Ok(Step::Write(
                    Self::only_lock(Some(self.lock_value(OP, &renewed)?)),
                    lease,
                ))
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
        let result = self
            .update_status(OP, |view| {
                if !self
                    .object_lock(view, OP)?
                    .stored
                    .as_ref()
                    .is_some_and(|l| l.is(lease))
                {
                    return Ok(Step::Done(()));
                }
                Ok(Step::Write(Self::only_lock(None), ()))
            })
            .await;
        match result {
            Err(LedgerError::NotFound { .. }) => Ok(()),
            other => other,
        }
    }

    /// One conditional status write for the whole step: the records (each
    /// removing its slug's last failure), the attempt mark, the last
    /// failure and the run lock, decided together on one base (CONTRACT.md
    /// §5.5); see [`migration_core::Ledger::write_step`].
    pub(crate) async fn step(&self, step: &StepWrite<'_>) -> Result<StepReport, LedgerError> {
        const OP: &str = "write step";
        migration_core::ledger::refuse_repeated_slugs(&self.writer.ledger, OP, step.records)?;
        if let StepMode::Take { holder, .. } = step.mode {
            self.older_runners.refuse_if_held_by_another(holder).await?;
        }
        // Chosen once, so a retry after a lost reply recognises its own take.
        let take_token = new_token(self.clock.now());
        self.update_status(OP, |view| {
            let stored = view.entries();
            // Shared records are filed against exactly the object this
            // conditional write replaces.
            let mut index = view.context_index();
            let mut write = StatusWrite::default();
            for (slug, entry) in step.records {
                put_entry(&self.writer.ledger, OP, &mut write, &mut index, slug, entry)?;
                if view.has_failure(slug) {
                    write.cleared_failures.push(slug.as_str().to_owned());
                }
            }
            // A record already in place (a retry after a lost reply) is not
            // written again: encoding it on the same object gives the same
            // value.
            write
                .entries
                .retain(|slug, value| stored.and_then(|s| s.get(slug)) != Some(value));
            if let Some(note) = step.failure {
                let value = note.failure.to_value();
                if view.failure(note.slug) != Some(&value) {
                    write.failures.insert(note.slug.as_str().to_owned(), value);
                }
            }
            let mut attempts = None;
            if let Some(note) = step.attempt {
                let key = keys::attempt_key(note.slug);
                let current = match view.attempt(note.slug) {
                    Some(value) => Some(state::decode_mark(&key, value).map_err(|c| {
                        self.permanent(OP, format!("{}: {c}", self.status_object()))
                    })?),
                    None => None,
                };
                let next = AttemptMark::next(current.as_ref(), note.token, note.floor);
                attempts = Some(next.count);
                if current.as_ref() != Some(&next) {
                    let value = serde_json::to_value(&next)
                        .map_err(|e| self.permanent(OP, format!("key {key}: {e}")))?;
                    write.attempts.insert(note.slug.as_str().to_owned(), value);
                }
            }
            let (lock, lease) = if step.mode == StepMode::Overwrite {
                (None, None)
            } else {
                match self.object_lock(view, OP)?.step(&step.mode, &take_token) {
                    // A release whose reply was lost: the lock is gone and
                    // every record is in place, so this very write landed.
                    Err(LedgerError::LockLost { .. })
                        if matches!(step.mode, StepMode::Release { .. })
                            && nothing_but_cleared(&write) =>
                    {
                        (None, None)
                    }
                    other => other?,
                }
            };
            write.lock = self.lock_write(OP, lock)?;
            let report = StepReport { attempts, lease };
            if nothing_but_cleared(&write) && write.lock.is_none() {
                return Ok(Step::Done(report));
            }
            Ok(Step::Write(write, report))
        })
        .await
    }
}

/// Whether `write` stores nothing: no entry, mark, last failure or shared
/// record (a cleared failure goes only with its slug's entry).
fn nothing_but_cleared(write: &StatusWrite) -> bool {
    write.entries.is_empty()
        && write.attempts.is_empty()
        && write.failures.is_empty()
        && write.contexts.is_empty()
}

#[async_trait]
impl migration_core::Lock for CrdLedger {
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
