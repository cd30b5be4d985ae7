//! The ledger handle: what it holds, how an engine write becomes one
//! conditional status write, and the [`ObjectLedger`] implementation that
//! [`object_ledger_impl!`](migration_kube::object_ledger_impl) makes the
//! [`Ledger`](migration_core::Ledger) and [`Lock`](migration_core::Lock) implementations of.

use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::core::Request;
use kube::{Client, Resource};
use migration_core::entry::ContextIndex;
use migration_core::fence::{ObjectLock, StoredLock};
use migration_core::keys;
use migration_core::last_failure::LastFailure;
use migration_core::ledger::AttemptMark;
use migration_core::step::{AttemptNote, StepReport, StepWrite};
use migration_core::{LedgerEntry, LedgerError, LedgerSnapshot, Slug, WriteMode, WriteReport};
use migration_kube::object_ledger::{Conditional, ObjectHandle, ObjectLedger};
use migration_kube::{Attempts, Step, conditional_update, defaults};
use serde_json::Value;

use crate::resource::MigrationLedger;
use crate::state::{
    self, Lifecycle, PlannedWrite, StatusWrite, View, json_size, plan_status_write,
};
use crate::{Options, RECORD_OVERHEAD_BYTES};

/// The ledger in the cluster-scoped `MigrationLedger` named `name`.
#[derive(Clone)]
pub struct CrdLedger {
    pub(crate) client: Client,
    /// Requests for the `migrationledgers` collection (cluster-scoped).
    pub(crate) request: Request,
    /// The object's name (the bundle's).
    pub(crate) name: String,
    /// The size budget of the stored object, in bytes.
    pub(crate) budget: u64,
    /// The ledger's name, retries, clock (condition transition times, the
    /// lock's expiry), Lease of older runners, output Secret `<name>-output`
    /// in [`Options::lease_namespace`] (owned by the object), and last-seen
    /// copy.
    pub(crate) handle: ObjectHandle<Value>,
}

impl std::fmt::Debug for CrdLedger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.handle.writer.ledger)
    }
}

impl CrdLedger {
    /// The ledger `name` (one per bundle), with default options.
    pub fn new(client: Client, name: &str) -> Self {
        Self::with_options(client, name, Options::default())
    }

    /// The ledger `name` (one per bundle).
    pub fn with_options(client: Client, name: &str, options: Options) -> Self {
        let lease_name = options
            .lease_name
            .clone()
            .unwrap_or_else(|| defaults::lock_name(name));
        let handle = ObjectHandle::new(
            &client,
            format!("migrationledger {name}"),
            name,
            &options.lease_namespace,
            &lease_name,
            options.retry,
            options.clock,
        );
        CrdLedger {
            request: Request::new(MigrationLedger::url_path(&(), None)),
            client,
            name: name.to_owned(),
            budget: options.budget,
            handle,
        }
    }

    /// The object, as errors name it.
    pub(crate) fn object(&self) -> String {
        format!("migrationledger {}", self.name)
    }

    /// The status subresource, as errors name it.
    pub(crate) fn status_object(&self) -> String {
        format!("migrationledger {}/status", self.name)
    }

    pub(crate) fn permanent(&self, operation: &'static str, message: String) -> LedgerError {
        LedgerError::Permanent {
            ledger: self.handle.writer.ledger.clone(),
            operation,
            message,
        }
    }

    pub(crate) fn unreadable(&self, reason: String) -> LedgerError {
        LedgerError::Unreadable {
            ledger: self.handle.writer.ledger.clone(),
            reason: format!("{}: {reason}", self.object()),
        }
    }

    pub(crate) fn not_found(&self, operation: &'static str) -> LedgerError {
        LedgerError::NotFound {
            ledger: self.handle.writer.ledger.clone(),
            operation,
        }
    }

    pub(crate) fn full(&self, current: Option<&View<'_>>, would_be: u64) -> LedgerError {
        LedgerError::Full {
            ledger: self.handle.writer.ledger.clone(),
            current_bytes: current.map_or(0, |v| json_size(v.object)),
            would_be_bytes: would_be,
            budget_bytes: self.budget,
            entry_count: current.map_or(0, View::entry_count),
        }
    }

    /// Adds to `write` the attempt mark that follows the one `view` stores
    /// for `note`'s slug, unless it is the same (a repeated token), and
    /// answers its count; a stored mark that does not decode fails
    /// permanently.
    pub(crate) fn next_mark(
        &self,
        operation: &'static str,
        view: &View<'_>,
        write: &mut StatusWrite,
        note: AttemptNote<'_>,
    ) -> Result<u32, LedgerError> {
        let key = keys::attempt_key(note.slug);
        let permanent = |message: String| self.permanent(operation, message);
        let stored = view
            .attempt(note.slug)
            .map(|value| state::decode_mark(&key, value))
            .transpose()
            .map_err(|c| permanent(format!("{}: {c}", self.status_object())))?;
        let next = AttemptMark::next(stored.as_ref(), note.token, note.floor);
        if stored.as_ref() != Some(&next) {
            let value =
                serde_json::to_value(&next).map_err(|e| permanent(format!("key {key}: {e}")))?;
            write.attempts.insert(note.slug.as_str().to_owned(), value);
        }
        Ok(next.count)
    }

    /// Adds the record of `slug` to `write` ([`put_entry`]); it removes the
    /// slug's last failure that `view` holds.
    pub(crate) fn put_record(
        &self,
        operation: &'static str,
        view: &View<'_>,
        write: &mut StatusWrite,
        index: &mut ContextIndex,
        slug: &Slug,
        entry: &LedgerEntry,
    ) -> Result<(), LedgerError> {
        put_entry(
            &self.handle.writer.ledger,
            operation,
            write,
            index,
            slug,
            entry,
        )?;
        if view.has_failure(slug) {
            write.cleared_failures.push(slug.as_str().to_owned());
        }
        Ok(())
    }

    /// Plans a status write on `view` and checks it against the budget.
    pub(crate) fn plan(
        &self,
        operation: &'static str,
        view: &View<'_>,
        write: &StatusWrite,
    ) -> Result<PlannedWrite, LedgerError> {
        let planned = plan_status_write(view, write, self.handle.clock.now())
            .map_err(|reason| self.unreadable(reason))?;
        if planned.would_be_bytes > self.budget {
            tracing::warn!(
                operation,
                would_be = planned.would_be_bytes,
                budget = self.budget,
                "ledger write refused: over the size budget"
            );
            return Err(self.full(Some(view), planned.would_be_bytes));
        }
        Ok(planned)
    }

    /// One conditional status write on the live ledger: read, let `decide`
    /// look at what is stored, write what it asks for with the
    /// resourceVersion that was read as a precondition, and on a conflict or
    /// a transient error do it all again (a bounded number of times).
    pub(crate) async fn update_status<T>(
        &self,
        operation: &'static str,
        mut decide: impl FnMut(&View<'_>) -> Result<Step<StatusWrite, T>, LedgerError>,
    ) -> Result<T, LedgerError> {
        conditional_update(&Conditional(self), operation, |object| {
            let view = View::new(object).map_err(|reason| self.unreadable(reason))?;
            if view.lifecycle() == Lifecycle::Seeding {
                // A fresh install in progress: the ledger does not exist yet.
                return Err(self.not_found(operation));
            }
            Ok(match decide(&view)? {
                Step::Done(answer) => Step::Done(answer),
                Step::Write(write, answer) => {
                    Step::Write(self.plan(operation, &view, &write)?.ops, answer)
                }
            })
        })
        .await
    }
}

/// Adds `entry` to `write` as the JSON value to store under its slug, with
/// the shared record it names when `index` (the object being changed) does
/// not hold it yet.
pub(crate) fn put_entry(
    ledger: &str,
    operation: &'static str,
    write: &mut StatusWrite,
    index: &mut ContextIndex,
    slug: &Slug,
    entry: &LedgerEntry,
) -> Result<(), LedgerError> {
    let cannot = |e: serde_json::Error| LedgerError::Permanent {
        ledger: ledger.to_owned(),
        operation,
        message: format!(
            "key {}: cannot encode the entry: {e}",
            keys::entry_key(slug)
        ),
    };
    let stored = entry.stored(index);
    for (id, text) in stored.contexts {
        write
            .contexts
            .insert(id, serde_json::from_str(&text).map_err(cannot)?);
    }
    let value = serde_json::from_str(&stored.value).map_err(cannot)?;
    write.entries.insert(slug.as_str().to_owned(), value);
    Ok(())
}

/// The status write that seeds a fresh ledger with `entries`.
pub(crate) fn seed_write(
    ledger: &str,
    operation: &'static str,
    entries: &[(Slug, LedgerEntry)],
) -> Result<StatusWrite, LedgerError> {
    migration_core::ledger::refuse_repeated_slugs(ledger, operation, entries)?;
    let mut write = StatusWrite::default();
    let mut index = ContextIndex::default();
    for (slug, entry) in entries {
        put_entry(ledger, operation, &mut write, &mut index, slug, entry)?;
    }
    Ok(write)
}

migration_kube::object_ledger_impl!(CrdLedger);

impl ObjectLedger for CrdLedger {
    type Object = Value;
    /// The JSON Patch operations of one status write.
    type Write = Vec<Value>;

    fn handle(&self) -> &ObjectHandle<Value> {
        &self.handle
    }

    async fn read_fresh(
        &self,
        operation: &'static str,
        attempts: &mut Attempts,
    ) -> Result<Option<Arc<Value>>, LedgerError> {
        self.fetch(operation, attempts).await
    }

    /// One JSON Patch of the status subresource.
    async fn send_write(&self, _base: &Value, ops: &Vec<Value>) -> Result<Value, kube::Error> {
        self.patch_status(ops).await
    }

    fn final_error(&self, operation: &'static str, error: &kube::Error) -> LedgerError {
        self.error(operation, &self.status_object(), error)
    }

    fn owner(&self, object: &Value) -> Option<OwnerReference> {
        Some(OwnerReference {
            api_version: MigrationLedger::api_version(&()).into_owned(),
            kind: MigrationLedger::kind(&()).into_owned(),
            name: self.name.clone(),
            uid: object.pointer("/metadata/uid")?.as_str()?.to_owned(),
            ..OwnerReference::default()
        })
    }

    /// The stored message of an entry (either form) or a last failure.
    fn stored_message(object: &Value, key: &str) -> Option<String> {
        let (map, slug, fields) = if let Some(slug) = key.strip_prefix(keys::FAILURE_PREFIX) {
            ("failures", slug, ["message", "message"])
        } else {
            (
                "entries",
                key.strip_prefix(keys::ENTRY_PREFIX)?,
                ["m", "message"],
            )
        };
        let value = object.get("status")?.get(map)?.get(slug)?;
        fields
            .iter()
            .find_map(|f| value.get(*f)?.as_str())
            .map(str::to_owned)
    }

    async fn read_object(&self) -> Result<Option<LedgerSnapshot>, LedgerError> {
        let Some(object) = self.fetch("read", &mut Attempts::new()).await? else {
            return Ok(None);
        };
        let view = View::new(&object).map_err(|reason| self.unreadable(reason))?;
        match view.lifecycle() {
            Lifecycle::Seeding => Ok(None),
            Lifecycle::Live => {
                let mut snapshot = view.snapshot();
                snapshot.usage = Some(migration_core::Usage {
                    used_bytes: json_size(view.object),
                    budget_bytes: self.budget,
                    record_overhead_bytes: RECORD_OVERHEAD_BYTES,
                });
                Ok(Some(snapshot))
            }
        }
    }

    /// Creates the object, then writes its status (two requests; see the
    /// crate documentation). An object left uninitialized by an interrupted
    /// create is completed, not refused.
    async fn create_object(&self, entries: &[(Slug, LedgerEntry)]) -> Result<(), LedgerError> {
        self.seed(entries).await
    }

    async fn note_attempt_object(&self, note: AttemptNote<'_>) -> Result<u32, LedgerError> {
        const OP: &str = "note attempt";
        self.update_status(OP, |view| {
            let mut write = StatusWrite::default();
            let count = self.next_mark(OP, view, &mut write, note)?;
            Ok(if write.attempts.is_empty() {
                Step::Done(count)
            } else {
                Step::Write(write, count)
            })
        })
        .await
    }

    async fn update_lock<T: Send>(
        &self,
        operation: &'static str,
        mut decide: impl FnMut(ObjectLock<'_>) -> Result<Step<Option<StoredLock>, T>, LedgerError>
        + Send,
    ) -> Result<T, LedgerError> {
        self.update_status(operation, |view| {
            Ok(match decide(self.object_lock(view, operation)?)? {
                Step::Done(answer) => Step::Done(answer),
                Step::Write(lock, answer) => {
                    let lock = lock.map(|l| self.lock_value(operation, &l)).transpose()?;
                    Step::Write(
                        StatusWrite {
                            lock: Some(lock),
                            ..StatusWrite::default()
                        },
                        answer,
                    )
                }
            })
        })
        .await
    }

    /// One conditional status write for the whole step, the run lock in
    /// `status.lock` included; the shared
    /// [`write_step`](migration_kube::object_ledger::write_step)
    /// keeps its output tails in the Secret before (CONTRACT.md §5.2) and
    /// removes those it leaves unnamed after.
    async fn write_step_object(
        &self,
        step: &StepWrite<'_>,
        take_token: &str,
    ) -> Result<StepReport, LedgerError> {
        self.step(step, take_token).await
    }

    async fn write_object(
        &self,
        entries: &[(Slug, LedgerEntry)],
        mode: WriteMode,
    ) -> Result<WriteReport, LedgerError> {
        const OP: &str = "write";
        self.update_status(OP, |view| {
            let stored = view.entries();
            // Shared records are filed against exactly the object this
            // conditional write replaces.
            let mut index = view.context_index();
            let mut report = WriteReport::default();
            let mut write = StatusWrite::default();
            for (slug, entry) in entries {
                let key = slug.as_str();
                if mode == WriteMode::OnlyIfAbsent && stored.is_some_and(|s| s.contains_key(key)) {
                    report.already_present.push(slug.clone());
                } else {
                    self.put_record(OP, view, &mut write, &mut index, slug, entry)?;
                    report.written.push(slug.clone());
                }
            }
            Ok(if write.entries.is_empty() {
                Step::Done(report)
            } else {
                Step::Write(write, report)
            })
        })
        .await
    }

    async fn note_failure_object(
        &self,
        slug: &Slug,
        failure: &LastFailure,
    ) -> Result<(), LedgerError> {
        const OP: &str = "note failure";
        let value = failure.to_value();
        self.update_status(OP, |view| {
            if view.failure(slug) == Some(&value) {
                return Ok(Step::Done(()));
            }
            let mut write = StatusWrite::default();
            write
                .failures
                .insert(slug.as_str().to_owned(), value.clone());
            Ok(Step::Write(write, ()))
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slug_twice_in_one_write_is_refused_naming_the_key() {
        let slug = Slug::parse("a").unwrap();
        let entry = LedgerEntry::new(
            migration_core::EntryState::Ok,
            migration_core::Timestamp::from_unix(0),
        );
        let err = seed_write(
            "migrationledger x",
            "write",
            &[(slug.clone(), entry.clone()), (slug, entry)],
        )
        .unwrap_err();
        assert!(err.to_string().contains("key m.a"), "{err}");
    }
}
