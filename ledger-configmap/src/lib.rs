//! # ledger-configmap
//!
//! The migration ledger stored in a ConfigMap, by default
//! `cozy-system/cozystack-version`: key `version` holds the legacy integer
//! (read, never written, by the engine), one key `m.<slug>` per entry holds
//! its compact JSON, `c.<id>` holds a shared record those entries name (the
//! image, `lib/` digest and batch a run's entries share), `a.<slug>`
//! counts started executions and `f.<slug>` keeps the last `on-error=abort`
//! failure until the slug's next entry removes it (CONTRACT.md §5).
//!
//! Kubernetes API level: k8s-openapi's `v1_33` (the platform's floor).
//!
//! Guarantees, beyond the [`Ledger`](migration_core::Ledger) trait's:
//! - Writes are JSON merge patches that name only the `m.*`/`a.*`/`f.*`/`c.*`
//!   keys they write (an `f.*` key the write removes is set to `null`), under the field manager `cozystack-migrate`, carrying the
//!   object's `resourceVersion` as a precondition. Other keys, labels and
//!   annotations are never touched; a concurrent writer causes a 409, a
//!   re-read and a retry, never a lost update.
//! - A kubectl client-side apply of `version` by another manager cannot
//!   prune `m.*` keys, because no `m.*` key is ever in its
//!   last-applied-configuration (tested).
//! - The size budget (1 MiB of `data` plus `binaryData`, keys and values) is
//!   checked before every write: an overflowing write fails with
//!   [`LedgerError::Full`] and writes nothing. The API server's own limit is
//!   1 MiB of values only (keys are not counted; proven against a real
//!   Kubernetes 1.34), so the budget refuses before the server would, and the
//!   key bytes it also counts keep the object clear of etcd's request limit.
//! - Transient errors (429, 5xx, timeouts, connection resets) are retried
//!   with bounded exponential backoff and jitter; every other error fails
//!   closed with the operation, the object and the key in its message.
//! - The run lock lives in the ConfigMap itself, in the annotation
//!   [`LOCK_ANNOTATION`] (holder, token, acquired and renewed times, TTL):
//!   a run takes it with its first write, conditional on the
//!   `resourceVersion` it planned on, renews it with every write and
//!   releases it with its last; taking it first reads the Lease
//!   `<name>-lock` that runners of older releases still lock through and
//!   waits while one holds it, so a run of K migrations costs K + 3
//!   requests ([`module@lock`]). Before the ConfigMap exists there is
//!   nothing to lock, and nothing a run does then needs it: a fresh install
//!   is one create that never overwrites.
//! - A write costs one request when this handle has seen the object before:
//!   the last object read or written is kept, and the next conditional patch
//!   is computed on it and carries its `resourceVersion`. If anyone changed
//!   the object since, the API server answers 409, the handle reads it again
//!   and recomputes; an outcome that sends no patch (nothing to write, over
//!   budget, a repeated attempt token) is always decided on a fresh read.
//!   [`Ledger::read`](migration_core::Ledger::read) always reads.

#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::Patch;
use kube::{Api, Client};
use migration_core::entry::ContextIndex;
use migration_core::fence::{ObjectLock, StoredLock};
use migration_core::keys;
use migration_core::last_failure::LastFailure;
use migration_core::ledger::AttemptMark;
use migration_core::step::{AttemptNote, StepReport, StepWrite};
use migration_core::{LedgerEntry, LedgerError, LedgerSnapshot, Slug, WriteMode, WriteReport};
use migration_kube::object_ledger::{Conditional, ObjectHandle, ObjectLedger, step_lock};
use migration_kube::{
    Attempts, Backoff, Class, Step, classify, conditional_update, defaults, ledger_error,
    patch_params, post_params,
};

pub mod lock;
pub mod manifest;

pub use lock::LOCK_ANNOTATION;

/// The Lease that runners of older releases lock ledger `name` through:
/// `<name>-lock` ([`defaults::lock_name`]), beside the ConfigMap.
pub fn older_runners_lease(name: &str) -> String {
    defaults::lock_name(name)
}

/// A ConfigMap holds at most this many bytes of data (keys plus values).
pub const CONFIGMAP_BUDGET_BYTES: u64 = 1024 * 1024;

migration_kube::ledger_options! {
    budget: CONFIGMAP_BUDGET_BYTES,
    budget_doc: "Size budget in bytes (default [`CONFIGMAP_BUDGET_BYTES`]).",
    clock_doc: "Clock for lock expiry.",
}

/// The ConfigMap ledger.
#[derive(Clone)]
pub struct ConfigMapLedger {
    api: Api<ConfigMap>,
    name: String,
    budget: u64,
    /// The ledger's name, retries, clock, Lease of older runners, output
    /// Secret `<name>-output` beside the ConfigMap, and last-seen copy.
    handle: ObjectHandle<ConfigMap>,
}

impl std::fmt::Debug for ConfigMapLedger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.handle.writer.ledger)
    }
}

/// Bytes the budget counts: keys and values of `data` and `binaryData`. (The
/// API server's 1 MiB limit counts the values only, so this is never less.)
pub fn configmap_size(cm: &ConfigMap) -> u64 {
    let data: u64 = cm
        .data
        .iter()
        .flatten()
        .map(|(k, v)| (k.len() + v.len()) as u64)
        .sum();
    let binary: u64 = cm
        .binary_data
        .iter()
        .flatten()
        .map(|(k, v)| (k.len() + v.0.len()) as u64)
        .sum();
    data + binary
}

fn entry_count(cm: &ConfigMap) -> usize {
    cm.data
        .iter()
        .flatten()
        .filter(|(k, _)| keys::is_entry_key(k))
        .count()
}

impl ConfigMapLedger {
    /// The ledger in ConfigMap `namespace/name`, with default options.
    pub fn new(client: Client, namespace: &str, name: &str) -> Self {
        Self::with_options(client, namespace, name, Options::default())
    }

    /// The ledger in ConfigMap `namespace/name`.
    pub fn with_options(client: Client, namespace: &str, name: &str, options: Options) -> Self {
        let handle = ObjectHandle::new(
            &client,
            format!("configmap {namespace}/{name}"),
            name,
            namespace,
            &older_runners_lease(name),
            options.retry,
            options.clock,
        );
        ConfigMapLedger {
            api: Api::namespaced(client, namespace),
            name: name.to_owned(),
            budget: options.budget,
            handle,
        }
    }

    fn object(&self) -> String {
        format!("configmap {}", self.name)
    }

    /// Reads the object (retrying transient errors) and remembers it.
    async fn get(
        &self,
        operation: &'static str,
        attempts: &mut Attempts,
    ) -> Result<Option<Arc<ConfigMap>>, LedgerError> {
        let cm = self
            .handle
            .writer
            .retry
            .get_opt(&self.api, &self.name, attempts)
            .await
            .map_err(|e| ledger_error(&self.handle.writer.ledger, operation, &self.object(), &e))?
            .map(Arc::new);
        self.handle.remember(cm.clone());
        Ok(cm)
    }

    fn full(&self, current: &ConfigMap, would_be: u64) -> LedgerError {
        LedgerError::Full {
            ledger: self.handle.writer.ledger.clone(),
            current_bytes: configmap_size(current),
            would_be_bytes: would_be,
            budget_bytes: self.budget,
            entry_count: entry_count(current),
        }
    }

    /// The size `current` would have with `writes` applied (a clearing
    /// write, [`keys::is_clearing`], removes its key).
    fn size_after(current: &ConfigMap, writes: &BTreeMap<String, String>) -> u64 {
        let data = current.data.as_ref();
        let mut size = configmap_size(current);
        for (k, v) in writes {
            match (data.and_then(|d| d.get(k)), keys::is_clearing(k, v)) {
                (Some(old), true) => size -= (k.len() + old.len()) as u64,
                (None, true) => {}
                (Some(old), false) => size = size - old.len() as u64 + v.len() as u64,
                (None, false) => size += (k.len() + v.len()) as u64,
            }
        }
        size
    }
}

/// What one conditional merge patch of the ConfigMap changes: the write
/// [`ObjectLedger::Write`] of this backend (built only here).
#[derive(Debug)]
pub struct Change {
    /// The `data` keys to set.
    data: BTreeMap<String, String>,
    /// The lock annotation: `None` leaves it, `Some(None)` removes it,
    /// `Some(Some(value))` sets it.
    lock: Option<Option<String>>,
}

impl Change {
    fn data(data: BTreeMap<String, String>) -> Self {
        Change { data, lock: None }
    }

    /// Sets the lock annotation to `value`, or removes it (`None`); no data.
    fn lock(value: Option<String>) -> Self {
        Change {
            data: BTreeMap::new(),
            lock: Some(value),
        }
    }
}

/// Adds `entry` to `writes` under `key`, with the shared record it names
/// when `contexts` (the object being changed) does not hold it yet.
fn put_entry(
    writes: &mut BTreeMap<String, String>,
    contexts: &mut ContextIndex,
    key: &str,
    entry: &LedgerEntry,
) {
    let stored = entry.stored(contexts);
    for (id, text) in stored.contexts {
        writes.insert(keys::context_key(id), text);
    }
    writes.insert(key.to_owned(), stored.value);
}

/// Adds to `writes` the removal of the last failure of each of `slugs`
/// (slugs whose entries the write stores) that `existing` holds: an entry's
/// write removes its slug's last failure in the same patch.
fn clear_failures<'s>(
    writes: &mut BTreeMap<String, String>,
    existing: Option<&BTreeMap<String, String>>,
    slugs: impl IntoIterator<Item = &'s Slug>,
) {
    for slug in slugs {
        let key = keys::failure_key(slug);
        if existing.is_some_and(|d| d.contains_key(&key)) {
            writes.insert(key, keys::CLEARED.to_owned());
        }
    }
}

migration_kube::object_ledger_impl!(ConfigMapLedger);

impl ObjectLedger for ConfigMapLedger {
    type Object = ConfigMap;
    type Write = Change;

    fn handle(&self) -> &ObjectHandle<ConfigMap> {
        &self.handle
    }

    async fn read_fresh(
        &self,
        operation: &'static str,
        attempts: &mut Attempts,
    ) -> Result<Option<Arc<ConfigMap>>, LedgerError> {
        self.get(operation, attempts).await
    }

    /// One merge patch of `change` carrying `current`'s resourceVersion.
    async fn send_write(
        &self,
        current: &ConfigMap,
        change: &Change,
    ) -> Result<ConfigMap, kube::Error> {
        let mut metadata =
            serde_json::json!({ "resourceVersion": current.metadata.resource_version });
        if let Some(lock) = &change.lock {
            metadata["annotations"] = serde_json::json!({ LOCK_ANNOTATION: lock });
        }
        let mut patch = serde_json::json!({ "metadata": metadata });
        if !change.data.is_empty() {
            // A cleared last failure is removed: `null` in a merge patch.
            let data: serde_json::Map<String, serde_json::Value> = change
                .data
                .iter()
                .map(|(k, v)| {
                    let value = if keys::is_clearing(k, v) {
                        serde_json::Value::Null
                    } else {
                        serde_json::Value::String(v.clone())
                    };
                    (k.clone(), value)
                })
                .collect();
            patch["data"] = serde_json::Value::Object(data);
        }
        self.api
            .patch(&self.name, &patch_params(), &Patch::Merge(&patch))
            .await
    }

    fn final_error(&self, operation: &'static str, error: &kube::Error) -> LedgerError {
        ledger_error(&self.handle.writer.ledger, operation, &self.object(), error)
    }

    fn owner(&self, cm: &ConfigMap) -> Option<OwnerReference> {
        Some(OwnerReference {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            name: self.name.clone(),
            uid: cm.metadata.uid.clone()?,
            ..OwnerReference::default()
        })
    }

    fn stored_message(cm: &ConfigMap, key: &str) -> Option<String> {
        cm.data.as_ref()?.get(key).cloned()
    }

    async fn read_object(&self) -> Result<Option<LedgerSnapshot>, LedgerError> {
        let Some(cm) = self.get("read", &mut Attempts::new()).await? else {
            return Ok(None);
        };
        let mut snapshot = LedgerSnapshot::from_raw_data(
            cm.data
                .iter()
                .flatten()
                .map(|(k, v)| (k.as_str(), v.as_str())),
            cm.metadata.resource_version.clone(),
        );
        snapshot.usage = Some(migration_core::Usage {
            used_bytes: configmap_size(&cm),
            budget_bytes: self.budget,
            record_overhead_bytes: 0,
        });
        Ok(Some(snapshot))
    }

    async fn note_attempt_object(&self, note: AttemptNote<'_>) -> Result<u32, LedgerError> {
        const OP: &str = "note attempt";
        conditional_update(&Conditional(self), OP, |current| {
            let mut writes = BTreeMap::new();
            let count = self.next_mark(OP, current, &mut writes, note)?;
            if writes.is_empty() {
                return Ok(Step::Done(count));
            }
            self.within_budget(current, &writes)?;
            Ok(Step::Write(Change::data(writes), count))
        })
        .await
    }

    async fn create_object(&self, entries: &[(Slug, LedgerEntry)]) -> Result<(), LedgerError> {
        const OP: &str = "create";
        migration_core::ledger::refuse_repeated_slugs(&self.handle.writer.ledger, OP, entries)?;
        let mut contexts = ContextIndex::default();
        let mut data = BTreeMap::new();
        for (slug, entry) in entries {
            put_entry(&mut data, &mut contexts, &keys::entry_key(slug), entry);
        }
        let cm = ConfigMap {
            metadata: kube::api::ObjectMeta {
                name: Some(self.name.clone()),
                ..Default::default()
            },
            data: Some(data),
            ..Default::default()
        };
        let size = configmap_size(&cm);
        if size > self.budget {
            return Err(self.full(&ConfigMap::default(), size));
        }
        let params = post_params();
        let created = self
            .handle
            .writer
            .retry
            .retry(&mut Attempts::new(), OP, &self.object(), || {
                self.api.create(&params, &cm)
            })
            .await;
        match created {
            Ok(stored) => {
                self.handle.remember(Some(Arc::new(stored)));
                Ok(())
            }
            // A retry after a lost reply lands here too: the object exists
            // (maybe ours); the caller re-reads, and nothing is overwritten.
            Err(e) if classify(&e) == Class::AlreadyExists => Err(LedgerError::AlreadyExists {
                ledger: self.handle.writer.ledger.clone(),
            }),
            Err(e) => Err(ledger_error(
                &self.handle.writer.ledger,
                OP,
                &self.object(),
                &e,
            )),
        }
    }

    async fn write_object(
        &self,
        entries: &[(Slug, LedgerEntry)],
        mode: WriteMode,
    ) -> Result<WriteReport, LedgerError> {
        const OP: &str = "write";
        let keyed: Vec<(&Slug, String, &LedgerEntry)> = entries
            .iter()
            .map(|(slug, entry)| (slug, keys::entry_key(slug), entry))
            .collect();
        conditional_update(&Conditional(self), OP, |current| {
            let existing = current.data.as_ref();
            // Shared records are filed against exactly the object this
            // conditional patch replaces.
            let mut contexts = existing.map(ContextIndex::of_flat).unwrap_or_default();
            let mut report = WriteReport::default();
            let mut writes = BTreeMap::new();
            for (slug, key, entry) in &keyed {
                if mode == WriteMode::OnlyIfAbsent && existing.is_some_and(|d| d.contains_key(key))
                {
                    report.already_present.push((*slug).clone());
                } else {
                    put_entry(&mut writes, &mut contexts, key, entry);
                    report.written.push((*slug).clone());
                }
            }
            clear_failures(&mut writes, existing, &report.written);
            if writes.is_empty() {
                return Ok(Step::Done(report));
            }
            self.within_budget(current, &writes)?;
            Ok(Step::Write(Change::data(writes), report))
        })
        .await
        .map(|mut report| {
            report.revision = self.revision();
            report
        })
    }

    async fn note_failure_object(
        &self,
        slug: &Slug,
        failure: &LastFailure,
    ) -> Result<(), LedgerError> {
        const OP: &str = "note failure";
        let key = keys::failure_key(slug);
        let value = failure.encode();
        conditional_update(&Conditional(self), OP, |current| {
            let existing = current.data.as_ref();
            if existing.and_then(|d| d.get(&key)) == Some(&value) {
                return Ok(Step::Done(()));
            }
            let writes = BTreeMap::from([(key.clone(), value.clone())]);
            self.within_budget(current, &writes)?;
            Ok(Step::Write(Change::data(writes), ()))
        })
        .await
    }

    /// One conditional merge patch for the whole step: the records (each
    /// removing its slug's last failure), the attempt mark, the last failure
    /// and the lock annotation, decided together on one base (CONTRACT.md
    /// §5.5); the shared
    /// [`write_step`](migration_kube::object_ledger::write_step) keeps its output
    /// tails before and removes those it leaves unnamed after (§5.2).
    async fn write_step_object(
        &self,
        step: &StepWrite<'_>,
        take_token: &str,
    ) -> Result<StepReport, LedgerError> {
        const OP: &str = "write step";
        conditional_update(&Conditional(self), OP, |current| {
            let existing = current.data.as_ref();
            // Shared records are filed against exactly the object this
            // conditional patch replaces.
            let mut contexts = existing.map(ContextIndex::of_flat).unwrap_or_default();
            let mut encoded = BTreeMap::new();
            for (slug, entry) in step.records {
                put_entry(&mut encoded, &mut contexts, &keys::entry_key(slug), entry);
            }
            // A record already in place (a retry after a lost reply) is not
            // written again: encoding it on the same object gives the same text.
            let mut writes: BTreeMap<String, String> = encoded
                .into_iter()
                .filter(|(key, value)| existing.and_then(|d| d.get(key)) != Some(value))
                .collect();
            clear_failures(&mut writes, existing, step.records.iter().map(|(s, _)| s));
            if let Some(note) = step.failure {
                let key = keys::failure_key(note.slug);
                let value = note.failure.encode();
                if existing.and_then(|d| d.get(&key)) == Some(&value) {
                    writes.remove(&key);
                } else {
                    writes.insert(key, value);
                }
            }
            let attempts = step
                .attempt
                .map(|note| self.next_mark(OP, current, &mut writes, note))
                .transpose()?;
            let (lock, lease) = step_lock(&step.mode, take_token, writes.is_empty(), || {
                self.object_lock(current, OP)
            })?;
            let lock = lock.map(|lock| lock.map(|l| l.encode()));
            let report = StepReport { attempts, lease };
            if writes.is_empty() && lock.is_none() {
                return Ok(Step::Done(report));
            }
            self.within_budget(current, &writes)?;
            Ok(Step::Write(Change { data: writes, lock }, report))
        })
        .await
    }

    async fn update_lock<T: Send>(
        &self,
        operation: &'static str,
        mut decide: impl FnMut(ObjectLock<'_>) -> Result<Step<Option<StoredLock>, T>, LedgerError>
        + Send,
    ) -> Result<T, LedgerError> {
        conditional_update(&Conditional(self), operation, |cm| {
            Ok(match decide(self.object_lock(cm, operation)?)? {
                Step::Done(answer) => Step::Done(answer),
                Step::Write(lock, answer) => {
                    Step::Write(Change::lock(lock.map(|l| l.encode())), answer)
                }
            })
        })
        .await
    }
}

impl ConfigMapLedger {
    /// Adds to `writes` the attempt mark that follows the one `current`
    /// stores for `note`'s slug, unless it is the same (a repeated token),
    /// and answers its count; a stored mark that does not decode fails
    /// permanently.
    fn next_mark(
        &self,
        operation: &'static str,
        current: &ConfigMap,
        writes: &mut BTreeMap<String, String>,
        note: AttemptNote<'_>,
    ) -> Result<u32, LedgerError> {
        let key = keys::attempt_key(note.slug);
        let stored = current.data.as_ref().and_then(|d| d.get(&key));
        let stored = stored
            .map(|raw| AttemptMark::decode(&key, raw))
            .transpose()
            .map_err(|c| LedgerError::Permanent {
                ledger: self.handle.writer.ledger.clone(),
                operation,
                message: c.to_string(),
            })?;
        let next = AttemptMark::next(stored.as_ref(), note.token, note.floor);
        if stored.as_ref() != Some(&next) {
            writes.insert(key, next.encode());
        }
        Ok(next.count)
    }

    /// Refuses `writes` when `current` with them would be over the budget
    /// ([`LedgerError::Full`]).
    fn within_budget(
        &self,
        current: &ConfigMap,
        writes: &BTreeMap<String, String>,
    ) -> Result<(), LedgerError> {
        let would_be = Self::size_after(current, writes);
        if would_be > self.budget {
            return Err(self.full(current, would_be));
        }
        Ok(())
    }

    /// The `resourceVersion` of the object as last seen.
    fn revision(&self) -> Option<String> {
        self.handle
            .seen()
            .and_then(|cm| cm.metadata.resource_version.clone())
    }
}

#[cfg(test)]
mod tests;
