//! The run lock, kept in the ledger object's `status.lock`, and the run's
//! step write that takes, proves, renews and releases it.
//!
//! `status.lock` holds the lease as `{holder, token, acquired, renewed,
//! ttl_seconds}` ([`StoredLock`], the same record the ConfigMap keeps in an
//! annotation), with the rules of [`migration_core::fence`]. Every
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

use migration_core::LedgerError;
use migration_core::fence::{ObjectLock, StoredLock};
use migration_core::step::{StepReport, StepWrite};
use migration_kube::Step;
use migration_kube::object_ledger::step_lock;
use serde_json::Value;

use crate::CrdLedger;
use crate::state::{StatusWrite, View};

impl CrdLedger {
    /// The lock of the object `view` shows, as the shared rules see it; a
    /// `status.lock` that is not a lock fails closed (nobody can tell who
    /// holds it).
    pub(crate) fn object_lock<'a>(
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
            ledger: &self.handle.writer.ledger,
            stored,
            revision: view.resource_version(),
            now: self.handle.clock.now(),
        })
    }

    /// The JSON a status write stores for `lock`.
    pub(crate) fn lock_value(
        &self,
        operation: &'static str,
        lock: &StoredLock,
    ) -> Result<Value, LedgerError> {
        serde_json::to_value(lock)
            .map_err(|e| self.permanent(operation, format!("cannot encode the run lock: {e}")))
    }

    /// One conditional status write for the whole step: the records (each
    /// removing its slug's last failure), the attempt mark, the last
    /// failure and the run lock, decided together on one base (CONTRACT.md
    /// §5.5); see [`migration_core::Ledger::write_step`].
    pub(crate) async fn step(
        &self,
        step: &StepWrite<'_>,
        take_token: &str,
    ) -> Result<StepReport, LedgerError> {
        const OP: &str = "write step";
        self.update_status(OP, |view| {
            let stored = view.entries();
            // Shared records are filed against exactly the object this
            // conditional write replaces.
            let mut index = view.context_index();
            let mut write = StatusWrite::default();
            for (slug, entry) in step.records {
                self.put_record(OP, view, &mut write, &mut index, slug, entry)?;
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
            let attempts = step
                .attempt
                .map(|note| self.next_mark(OP, view, &mut write, note))
                .transpose()?;
            let (lock, lease) =
                step_lock(&step.mode, take_token, nothing_but_cleared(&write), || {
                    self.object_lock(view, OP)
                })?;
            write.lock = lock
                .map(|lock| lock.map(|l| self.lock_value(OP, &l)).transpose())
                .transpose()?;
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
