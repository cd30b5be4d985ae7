//! # ledger-crd
//!
//! The migration ledger in a `MigrationLedger` custom resource
//! (`migrations.cozystack.io/v1alpha1`), one object per bundle, named after
//! it. It behaves exactly like every other backend (the shared conformance
//! suite proves it); this page says how it is stored and why.
//!
//! Kubernetes API level: k8s-openapi's `v1_33` (the platform's floor).
//!
//! ## Scope: cluster-scoped
//!
//! The ledger is per cluster, and the object's name identifies a bundle, so
//! a cluster-wide name is the natural key. A namespaced ledger would also be
//! deleted with its namespace (an uninstall, a `kubectl delete namespace`),
//! and the next run would then see no ledger, take the cluster for a fresh
//! install and record every migration as skipped: a silent hole. The run
//! lock is a `coordination.k8s.io/v1` Lease, `<name>-lock` in
//! [`Options::lease_namespace`] (default `cozy-system`,
//! [`defaults::NAMESPACE`]), because Leases are
//! namespaced.
//!
//! ## Layout
//!
//! - `spec` is what is declared: `bundle`, and the legacy integer `version`
//!   (int or string; read into [`LedgerSnapshot::version`], never written).
//! - `status.entries.<slug>` is one entry with exactly the fields of spec
//!   §5, stored as a JSON object (typed fields, not a JSON string);
//!   `status.attempts.<slug>` is `{count, token}` (started executions).
//!   Each value is decoded on its own, so a malformed one is a
//!   [`Record::Corrupt`](migration_core::Record::Corrupt) naming its key
//!   (`m.<slug>`), and a key that is not a slug is reported in
//!   [`LedgerSnapshot::unreadable_keys`]; neither hides anything else. A
//!   container that is not a map (`status.entries: "x"`) makes the ledger
//!   [`LedgerError::Unreadable`].
//! - `status.summary` (`ok`, `failed`, `other`, `corrupt`, `newest`) feeds the
//!   printer columns of `kubectl get migrationledgers`, and `status.conditions`
//!   carries `Ready`: `True` (reason `NoFailures`) or `False` (`MigrationsFailed`
//!   or `CorruptEntries`, the message naming the slugs). Every status write
//!   recomputes both. [`CrdLedger::set_condition`] adds other conditions.
//! - Every engine write goes to the `/status` subresource as a JSON Patch
//!   under the field manager `cozystack-migrate`, whose first operation sets
//!   the resourceVersion that was read: the API server applies it only to
//!   that exact object (409 Conflict otherwise, then a re-read and a retry,
//!   never a lost update), and an `add` replaces an entry whole (a merge
//!   patch would keep the fields of the entry it replaces, and cannot store
//!   a `null`). `spec`, labels and annotations are never written after
//!   creation.
//!
//! ## Fresh install: two requests, and what a crash between them means
//!
//! An API server ignores `.status` when it creates an object that has a
//! status subresource, so seeding a fresh install takes two requests at
//! least: create the object (`POST`, annotated
//! `migrations.cozystack.io/created-by: cozystack-migrate`), then write its
//! status (`PATCH …/status`: the entries and `initialized: true`, in one
//! write). A crash between the two leaves an object whose status is not
//! initialized. That object reads as **absent** (`Ok(None)`), so the next run
//! is still a fresh install, and [`Ledger::create`] completes it (the same
//! conditional status write, only while it is still uninitialized) instead
//! of failing. Creation answers `AlreadyExists` only for a ledger; writes and
//! attempt marks on an uninitialized object are `NotFound`, as on an absent
//! one.
//!
//! An uninitialized object counts as absent only while everything says it is
//! the engine's own unfinished seeding: the annotation is there, and there is
//! no declared `spec.version`, no entry and no attempt mark. An object a
//! chart or a human declared (no annotation), for example with the legacy
//! `version` of an old cluster, is an existing ledger, possibly empty: never
//! a fresh install. That is what the ConfigMap backend does with a
//! chart-created ConfigMap.
//!
//! ## Size budget
//!
//! etcd refuses a request above 1,572,864 bytes (`--max-request-bytes`), and
//! the API server stores a custom resource as its JSON, field-ownership
//! records (`managedFields`) included. Before every write the backend
//! computes that JSON for the object the write would leave (the stored
//! object with the patch applied locally, plus the ownership records the new
//! fields add) and refuses with [`LedgerError::Full`], sending nothing, when
//! it exceeds the budget: [`DEFAULT_BUDGET_BYTES`], the etcd limit less
//! [`BUDGET_HEADROOM_BYTES`] for what the computation cannot see (etcd's key
//! and framing, server-stamped metadata). A realistic entry takes about
//! 300 bytes with its ownership record, so some 5,000 fit.
//!
//! ## Failures
//!
//! Transient errors (429, 5xx, timeouts, connection resets) are retried with
//! bounded exponential backoff and jitter ([`RetryPolicy`]); every other
//! error fails closed with the operation, the object and the key in its
//! message. An error is never an absent ledger: a 404 counts as "no such
//! object" only when the API server names this object in it; a 404 for the
//! resource type (the CRD is not installed) is an error saying so.

#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

mod resource;
mod state;

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use kube::api::Patch;
use kube::core::Request;
use kube::{Client, Resource};
use migration_core::keys;
use migration_core::ledger::AttemptMark;
use migration_core::lock::Lock;
use migration_core::{
    Clock, Lease, Ledger, LedgerEntry, LedgerError, LedgerSnapshot, Slug, SystemClock, WriteMode,
    WriteReport,
};
use migration_kube::{
    Base, Class, ConditionalObject, LeaseLock, Step, after_failed_write, classify,
    conditional_update, defaults, ledger_error, patch_params, post_params,
};
use serde_json::{Map, Value, json};

use migration_kube::Backoff;
pub use migration_kube::RetryPolicy;
pub use resource::{
    GROUP, KIND, LedgerSummary, MigrationLedger, MigrationLedgerSpec, MigrationLedgerStatus,
    PLURAL, VERSION, crd, crd_manifest,
};
pub use state::{CREATED_BY, CREATED_BY_ANNOTATION, READY};

use state::{Lifecycle, PlannedWrite, StatusWrite, View, json_size, plan_status_write};

/// The most bytes etcd accepts in one request by default, which bounds the
/// stored object.
pub const ETCD_REQUEST_LIMIT_BYTES: u64 = 1_572_864;

/// What the budget keeps free below [`ETCD_REQUEST_LIMIT_BYTES`] for what the
/// size computation cannot see exactly: etcd's key and request framing, and
/// metadata the API server stamps on each write.
pub const BUDGET_HEADROOM_BYTES: u64 = 32 * 1024;

/// What one new record costs a custom-resource ledger beyond its key and
/// value, as an upper bound: its field-ownership records (a `"f:<name>":{}`
/// per field) and the JSON punctuation around it, plus room for the summary
/// and the `Ready` condition's message naming it.
pub const RECORD_OVERHEAD_BYTES: u64 = 1024;

/// The default size budget of one ledger object.
pub const DEFAULT_BUDGET_BYTES: u64 = ETCD_REQUEST_LIMIT_BYTES - BUDGET_HEADROOM_BYTES;

/// What a create request cannot show us but the API server adds to the
/// object (uid, timestamps, generation, resourceVersion, the creator's field
/// ownership record), for the budget check before the object exists.
const SERVER_METADATA_BYTES: u64 = 1024;

/// The longest condition message the Kubernetes API accepts.
const MAX_CONDITION_MESSAGE: usize = 32_768;

/// Tunables; the defaults suit production.
#[derive(Clone)]
pub struct Options {
    /// Namespace of the run-lock Lease (default [`defaults::NAMESPACE`]).
    pub lease_namespace: String,
    /// Name of the run-lock Lease (default `<name>-lock`,
    /// [`defaults::lock_name`]).
    pub lease_name: Option<String>,
    /// Size budget in bytes (default [`DEFAULT_BUDGET_BYTES`]).
    pub budget: u64,
    /// Retry policy for transient errors and precondition conflicts.
    pub retry: RetryPolicy,
    /// Clock for lock expiry and condition transition times.
    pub clock: Arc<dyn Clock>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            lease_namespace: defaults::NAMESPACE.to_owned(),
            lease_name: None,
            budget: DEFAULT_BUDGET_BYTES,
            retry: RetryPolicy::default(),
            clock: Arc::new(SystemClock),
        }
    }
}

impl std::fmt::Debug for Options {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Options")
            .field("lease_namespace", &self.lease_namespace)
            .field("lease_name", &self.lease_name)
            .field("budget", &self.budget)
            .field("retry", &self.retry)
            .finish_non_exhaustive()
    }
}

/// The status of a condition, as Kubernetes spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConditionStatus {
    /// `True`.
    True,
    /// `False`.
    False,
    /// `Unknown`.
    Unknown,
}

impl ConditionStatus {
    /// The wire spelling.
    pub const fn as_str(self) -> &'static str {
        match self {
            ConditionStatus::True => "True",
            ConditionStatus::False => "False",
            ConditionStatus::Unknown => "Unknown",
        }
    }
}

/// A condition another controller reports on a ledger, through
/// [`CrdLedger::set_condition`] (for example the background operator's
/// per-failure-kind reasons).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LedgerCondition {
    /// The condition type: CamelCase, optionally `domain/` prefixed; not
    /// `Ready`, which the ledger maintains itself.
    pub type_: String,
    /// Its status.
    pub status: ConditionStatus,
    /// A CamelCase machine-readable reason.
    pub reason: String,
    /// Human-readable detail; cut to the 32768 bytes the API allows.
    pub message: String,
}

/// The ledger in the cluster-scoped `MigrationLedger` named `name`.
#[derive(Clone)]
pub struct CrdLedger {
    client: Client,
    request: Request,
    name: String,
    description: String,
    budget: u64,
    retry: RetryPolicy,
    clock: Arc<dyn Clock>,
    lock: LeaseLock,
}

impl std::fmt::Debug for CrdLedger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.description)
    }
}

/// Where a create stands.
enum CreateStep {
    /// Send the create.
    Post,
    /// Look at what is there.
    Reread,
    /// Write the status of this uninitialized object.
    Complete(Value),
}

fn api_status(e: &kube::Error) -> Option<&kube::core::Status> {
    match e {
        kube::Error::Api(status) => Some(status),
        _ => None,
    }
}

impl CrdLedger {
    /// The ledger `name` (one per bundle), with default options.
    pub fn new(client: Client, name: &str) -> Self {
        Self::with_options(client, name, Options::default())
    }

    /// The ledger `name` (one per bundle).
    pub fn with_options(client: Client, name: &str, options: Options) -> Self {
        let description = format!("migrationledger {name}");
        let lease_name = options
            .lease_name
            .clone()
            .unwrap_or_else(|| defaults::lock_name(name));
        let lock = LeaseLock::new(
            client.clone(),
            &options.lease_namespace,
            &lease_name,
            &description,
            options.clock.clone(),
            options.retry,
        );
        CrdLedger {
            request: Request::new(MigrationLedger::url_path(&(), None)),
            client,
            name: name.to_owned(),
            description,
            budget: options.budget,
            retry: options.retry,
            clock: options.clock,
            lock,
        }
    }

    /// The object, as errors name it.
    fn object(&self) -> String {
        format!("migrationledger {}", self.name)
    }

    /// The status subresource, as errors name it.
    fn status_object(&self) -> String {
        format!("migrationledger {}/status", self.name)
    }

    fn permanent(&self, operation: &'static str, message: String) -> LedgerError {
        LedgerError::Permanent {
            ledger: self.description.clone(),
            operation,
            message,
        }
    }

    fn unreadable(&self, reason: String) -> LedgerError {
        LedgerError::Unreadable {
            ledger: self.description.clone(),
            reason: format!("{}: {reason}", self.object()),
        }
    }

    fn not_found(&self, operation: &'static str) -> LedgerError {
        LedgerError::NotFound {
            ledger: self.description.clone(),
            operation,
        }
    }

    /// A 404 that names this object: it does not exist. Any other 404 means
    /// the API server does not serve the resource at all.
    fn is_absent(&self, e: &kube::Error) -> bool {
        api_status(e).is_some_and(|s| {
            s.code == 404 && s.details.as_ref().is_some_and(|d| d.name == self.name)
        })
    }

    /// Maps a final error, telling a missing CRD from everything else.
    fn error(&self, operation: &'static str, what: &str, e: &kube::Error) -> LedgerError {
        if classify(e) == Class::NotFound && !self.is_absent(e) {
            return self.permanent(
                operation,
                format!(
                    "{what}: the API server does not serve {PLURAL}.{GROUP}/{VERSION} ({e}); \
                     install the CustomResourceDefinition first (`migrate crd | kubectl apply -f -`)"
                ),
            );
        }
        ledger_error(&self.description, operation, what, e)
    }

    fn build_error(&self, operation: &'static str, e: impl std::fmt::Display) -> LedgerError {
        self.permanent(
            operation,
            format!("{}: cannot build the request: {e}", self.object()),
        )
    }

    /// Reads the object as the API server stores it, retrying transient
    /// errors. `attempt` counts tries across the caller's whole operation
    /// (reads and writes share the retry budget). `None` only for a 404 that
    /// names this object.
    ///
    /// Not `RetryPolicy::get_opt`: that one reads a typed object, which
    /// would make one malformed value fail the whole read, and takes any 404
    /// for an absent object, which would make a missing CRD a fresh install.
    async fn fetch(
        &self,
        operation: &'static str,
        attempt: &mut u32,
    ) -> Result<Option<Value>, LedgerError> {
        loop {
            *attempt += 1;
            let request = self
                .request
                .get(&self.name, &Default::default())
                .map_err(|e| self.build_error(operation, e))?;
            match self.client.request::<Value>(request).await {
                Ok(object) => return Ok(Some(object)),
                Err(e) if self.is_absent(&e) => return Ok(None),
                Err(e) if classify(&e) == Class::Transient && *attempt < self.retry.attempts => {
                    tracing::debug!(error = %e, attempt = *attempt, operation, "transient error reading the ledger; retrying");
                    self.retry.pause(*attempt).await;
                }
                Err(e) => return Err(self.error(operation, &self.object(), &e)),
            }
        }
    }

    async fn post(&self, body: &Value) -> Result<Value, kube::Error> {
        let params = post_params();
        let bytes = serde_json::to_vec(body).map_err(kube::Error::SerdeError)?;
        let request = self
            .request
            .create(&params, bytes)
            .map_err(kube::Error::BuildRequest)?;
        self.client.request::<Value>(request).await
    }

    /// Sends a JSON Patch to the status subresource. kube's typed JSON Patch
    /// needs another crate (`json-patch`), so this is kube's merge-patch
    /// request with the body and the content type swapped.
    async fn patch_status(&self, ops: &[Value]) -> Result<Value, kube::Error> {
        let mut request = self
            .request
            .patch_subresource(
                "status",
                &self.name,
                &patch_params(),
                &Patch::Merge(json!({})),
            )
            .map_err(kube::Error::BuildRequest)?;
        *request.body_mut() = serde_json::to_vec(ops).map_err(kube::Error::SerdeError)?;
        request.headers_mut().insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static("application/json-patch+json"),
        );
        self.client.request::<Value>(request).await
    }

    /// Decides whether to loop after a failed status write (a 404 naming
    /// the object, which vanished between our read and our write, is
    /// [`LedgerError::NotFound`]).
    async fn retry_after(
        &self,
        operation: &'static str,
        e: &kube::Error,
        attempt: u32,
    ) -> Result<(), LedgerError> {
        after_failed_write(&self.retry, &self.description, operation, e, attempt, |e| {
            self.error(operation, &self.status_object(), e)
        })
        .await
    }

    fn full(&self, current: Option<&View<'_>>, would_be: u64) -> LedgerError {
        LedgerError::Full {
            ledger: self.description.clone(),
            current_bytes: current.map_or(0, |v| json_size(v.object)),
            would_be_bytes: would_be,
            budget_bytes: self.budget,
            entry_count: current.map_or(0, View::entry_count),
        }
    }

    /// Plans a status write on `view` and checks it against the budget.
    fn plan(
        &self,
        operation: &'static str,
        view: &View<'_>,
        write: &StatusWrite,
    ) -> Result<PlannedWrite, LedgerError> {
        let planned = plan_status_write(view, write, self.clock.now())
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
    async fn update_status<T>(
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

    /// Sets a condition on the ledger's status, by type, for controllers
    /// that report on it (the background operator's per-failure-kind
    /// reasons). Entries, attempt marks and other conditions are left as they
    /// are; `summary` and `Ready` are recomputed as on every status write.
    /// The transition time moves only when the status changes;
    /// `observedGeneration` is the object's generation.
    ///
    /// `Ready` is refused: every ledger write recomputes it, so a value set
    /// here would not last. A malformed type or reason is refused before
    /// anything is sent. The ledger must exist ([`LedgerError::NotFound`]
    /// otherwise).
    pub async fn set_condition(&self, condition: &LedgerCondition) -> Result<(), LedgerError> {
        const OP: &str = "set condition";
        validate_condition(condition).map_err(|why| {
            self.permanent(
                OP,
                format!(
                    "{}: condition {:?}: {why}",
                    self.status_object(),
                    condition.type_
                ),
            )
        })?;
        let value = json!({
            "type": condition.type_,
            "status": condition.status.as_str(),
            "reason": condition.reason,
            "message": cut(&condition.message, MAX_CONDITION_MESSAGE),
        });
        self.update_status(OP, |_| {
            Ok(Step::Write(
                StatusWrite {
                    condition: Some(value.clone()),
                    ..StatusWrite::default()
                },
                (),
            ))
        })
        .await
    }

    /// The object a fresh install creates: name, the created-by marker and
    /// the declared bundle. No status: the API server would drop it.
    fn creation_body(&self) -> Value {
        json!({
            "apiVersion": format!("{GROUP}/{VERSION}"),
            "kind": KIND,
            "metadata": {
                "name": self.name,
                "annotations": { CREATED_BY_ANNOTATION: CREATED_BY },
            },
            "spec": { "bundle": self.name },
        })
    }

    /// Checks the budget of a whole fresh install before anything is sent.
    fn check_creation_budget(&self, write: &StatusWrite) -> Result<(), LedgerError> {
        let mut object = self.creation_body();
        object["metadata"]["resourceVersion"] = json!("0");
        let view = View::new(&object).map_err(|reason| self.unreadable(reason))?;
        let planned = plan_status_write(&view, write, self.clock.now())
            .map_err(|reason| self.unreadable(reason))?;
        let would_be = planned.would_be_bytes + SERVER_METADATA_BYTES;
        if would_be > self.budget {
            return Err(self.full(None, would_be));
        }
        Ok(())
    }
}

/// The ledger object as the target of conditional status writes. Every
/// base is a fresh read: the backend keeps no copy between calls.
struct Conditional<'a>(&'a CrdLedger);

impl ConditionalObject for Conditional<'_> {
    type Object = Value;
    /// The JSON Patch operations of one status write.
    type Write = Vec<Value>;

    fn ledger(&self) -> &str {
        &self.0.description
    }

    fn retry(&self) -> &RetryPolicy {
        &self.0.retry
    }

    async fn base(
        &self,
        operation: &'static str,
        attempt: &mut u32,
        _first: bool,
    ) -> Result<Base<Value>, LedgerError> {
        match self.0.fetch(operation, attempt).await? {
            Some(object) => Ok(Base {
                object,
                fresh: true,
            }),
            None => Err(self.0.not_found(operation)),
        }
    }

    async fn send(&self, _base: &Value, ops: &Vec<Value>) -> Result<(), kube::Error> {
        self.0.patch_status(ops).await.map(drop)
    }

    fn final_error(&self, operation: &'static str, error: &kube::Error) -> LedgerError {
        self.0.error(operation, &self.0.status_object(), error)
    }
}

/// metav1.Condition's reason: `^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$`.
fn is_condition_reason(s: &str) -> bool {
    let bytes = s.as_bytes();
    s.len() <= 1024
        && bytes.first().is_some_and(u8::is_ascii_alphabetic)
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b',' | b':'))
        && bytes
            .last()
            .is_some_and(|b| b.is_ascii_alphanumeric() || *b == b'_')
}

/// metav1.Condition's type: an optional DNS-subdomain prefix and `/`, then a
/// qualified name; at most 316 characters in all.
fn is_condition_type(s: &str) -> bool {
    let name = match s.rsplit_once('/') {
        Some((prefix, name)) => {
            let prefix_ok = prefix.split('.').all(|label| {
                !label.is_empty()
                    && label
                        .bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                    && !label.starts_with('-')
                    && !label.ends_with('-')
            });
            if !prefix_ok {
                return false;
            }
            name
        }
        None => s,
    };
    s.len() <= 316
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && name
            .as_bytes()
            .first()
            .is_some_and(u8::is_ascii_alphanumeric)
        && name
            .as_bytes()
            .last()
            .is_some_and(u8::is_ascii_alphanumeric)
}

fn validate_condition(condition: &LedgerCondition) -> Result<(), String> {
    if condition.type_ == READY {
        return Err(
            "'Ready' is maintained by the ledger itself (every write recomputes it)".into(),
        );
    }
    if !is_condition_type(&condition.type_) {
        return Err("the type must be CamelCase, optionally prefixed 'domain/'".into());
    }
    if !is_condition_reason(&condition.reason) {
        return Err(format!(
            "reason {:?} must be a CamelCase identifier of at most 1024 characters",
            condition.reason
        ));
    }
    Ok(())
}

/// `s` cut to at most `max` bytes at a character boundary.
fn cut(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// The entries of one call as the JSON values to store, by slug; a slug
/// named twice is refused (which of the two would be the truth?).
fn encode(
    ledger: &str,
    operation: &'static str,
    entries: &[(Slug, LedgerEntry)],
) -> Result<Map<String, Value>, LedgerError> {
    let mut seen = HashSet::new();
    let mut out = Map::new();
    for (slug, entry) in entries {
        if !seen.insert(slug) {
            return Err(LedgerError::Permanent {
                ledger: ledger.to_owned(),
                operation,
                message: format!(
                    "key {}: slug '{slug}' appears twice in one write",
                    keys::entry_key(slug)
                ),
            });
        }
        let value = serde_json::to_value(entry).map_err(|e| LedgerError::Permanent {
            ledger: ledger.to_owned(),
            operation,
            message: format!(
                "key {}: cannot encode the entry: {e}",
                keys::entry_key(slug)
            ),
        })?;
        out.insert(slug.as_str().to_owned(), value);
    }
    Ok(out)
}

#[async_trait]
impl Ledger for CrdLedger {
    fn describe(&self) -> String {
        self.description.clone()
    }

    async fn read(&self) -> Result<Option<LedgerSnapshot>, LedgerError> {
        let Some(object) = self.fetch("read", &mut 0).await? else {
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
    async fn create(&self, entries: &[(Slug, LedgerEntry)]) -> Result<(), LedgerError> {
        const OP: &str = "create";
        let write = StatusWrite {
            entries: encode(&self.description, OP, entries)?,
            ..StatusWrite::default()
        };
        self.check_creation_budget(&write)?;
        let mut step = CreateStep::Post;
        let mut attempt = 0;
        // Set once a completing status write was sent and its outcome is
        // unknown (a lost reply): finding exactly our entries afterwards
        // means it landed.
        let mut completion_in_doubt = false;
        loop {
            step = match step {
                CreateStep::Post => {
                    attempt += 1;
                    if attempt > self.retry.attempts {
                        // The object keeps appearing and vanishing under us.
                        return Err(LedgerError::Conflict {
                            ledger: self.description.clone(),
                            operation: OP,
                            attempts: attempt - 1,
                        });
                    }
                    match self.post(&self.creation_body()).await {
                        Ok(created) => CreateStep::Complete(created),
                        // Ours after a lost reply, or someone else's: look.
                        Err(e) if classify(&e) == Class::AlreadyExists => CreateStep::Reread,
                        Err(e)
                            if classify(&e) == Class::Transient
                                && attempt < self.retry.attempts =>
                        {
                            tracing::debug!(error = %e, attempt, "transient error creating the ledger; retrying");
                            self.retry.pause(attempt).await;
                            CreateStep::Post
                        }
                        Err(e) => return Err(self.error(OP, &self.object(), &e)),
                    }
                }
                CreateStep::Reread => match self.fetch(OP, &mut attempt).await? {
                    None => CreateStep::Post,
                    Some(object) => {
                        let view = View::new(&object).map_err(|reason| self.unreadable(reason))?;
                        // After a lost reply, exactly our entries mean our
                        // write landed (or an identical one did): done.
                        let ours = completion_in_doubt
                            && view
                                .entries()
                                .map_or(write.entries.is_empty(), |e| *e == write.entries)
                            && view.attempt_count() == 0;
                        if view.lifecycle() == Lifecycle::Seeding {
                            CreateStep::Complete(object)
                        } else if ours {
                            return Ok(());
                        } else {
                            return Err(LedgerError::AlreadyExists {
                                ledger: self.description.clone(),
                            });
                        }
                    }
                },
                CreateStep::Complete(object) => {
                    let view = View::new(&object).map_err(|reason| self.unreadable(reason))?;
                    let planned = self.plan(OP, &view, &write)?;
                    attempt += 1;
                    match self.patch_status(&planned.ops).await {
                        Ok(_) => return Ok(()),
                        // Deleted under us: start over.
                        Err(e) if self.is_absent(&e) && attempt < self.retry.attempts => {
                            CreateStep::Post
                        }
                        Err(e) => {
                            if classify(&e) == Class::Transient {
                                completion_in_doubt = true;
                            }
                            self.retry_after(OP, &e, attempt).await?;
                            CreateStep::Reread
                        }
                    }
                }
            };
        }
    }

    async fn write(
        &self,
        entries: &[(Slug, LedgerEntry)],
        mode: WriteMode,
    ) -> Result<WriteReport, LedgerError> {
        const OP: &str = "write";
        let encoded = encode(&self.description, OP, entries)?;
        self.update_status(OP, |view| {
            let stored = view.entries();
            let mut report = WriteReport::default();
            let mut write = StatusWrite::default();
            for (slug, _) in entries {
                let key = slug.as_str();
                if mode == WriteMode::OnlyIfAbsent && stored.is_some_and(|s| s.contains_key(key)) {
                    report.already_present.push(slug.clone());
                } else if let Some(value) = encoded.get(key) {
                    write.entries.insert(key.to_owned(), value.clone());
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

    async fn note_attempt(&self, slug: &Slug, token: &str, floor: u32) -> Result<u32, LedgerError> {
        const OP: &str = "note attempt";
        let key = keys::attempt_key(slug);
        self.update_status(OP, |view| {
            let stored =
                match view.attempt(slug) {
                    Some(value) => Some(state::decode_mark(&key, value).map_err(|c| {
                        self.permanent(OP, format!("{}: {c}", self.status_object()))
                    })?),
                    None => None,
                };
            let next = AttemptMark::next(stored.as_ref(), token, floor);
            if stored.as_ref() == Some(&next) {
                return Ok(Step::Done(next.count));
            }
            let value = serde_json::to_value(&next)
                .map_err(|e| self.permanent(OP, format!("key {key}: {e}")))?;
            let mut write = StatusWrite::default();
            write.attempts.insert(slug.as_str().to_owned(), value);
            Ok(Step::Write(write, next.count))
        })
        .await
    }
}

#[async_trait]
impl Lock for CrdLedger {
    async fn acquire(&self, holder: &str, ttl: Duration) -> Result<Lease, LedgerError> {
        self.lock.acquire(holder, ttl).await
    }

    async fn renew(&self, lease: &Lease, ttl: Duration) -> Result<Lease, LedgerError> {
        self.lock.renew(lease, ttl).await
    }

    async fn release(&self, lease: &Lease) -> Result<(), LedgerError> {
        self.lock.release(lease).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn condition(type_: &str, reason: &str) -> LedgerCondition {
        LedgerCondition {
            type_: type_.into(),
            status: ConditionStatus::False,
            reason: reason.into(),
            message: String::new(),
        }
    }

    #[test]
    fn condition_types_and_reasons_follow_the_kubernetes_rules() {
        for ok in [
            ("BackgroundMigrations", "Timeout"),
            ("migrations.cozystack.io/Background", "Exit_Status:1"),
            ("A", "B"),
        ] {
            assert_eq!(validate_condition(&condition(ok.0, ok.1)), Ok(()), "{ok:?}");
        }
        for bad in [
            ("Ready", "Fine"),
            ("", "Fine"),
            ("has space", "Fine"),
            ("Bad.Prefix/Type", "Fine"),
            ("/Type", "Fine"),
            ("Type-", "Fine"),
            ("Type", ""),
            ("Type", "1Leading"),
            ("Type", "trailing,"),
            ("Type", "with space"),
            ("Type", "dash-ed"),
        ] {
            assert!(
                validate_condition(&condition(bad.0, bad.1)).is_err(),
                "{bad:?}"
            );
        }
        assert!(validate_condition(&condition(&"T".repeat(317), "R")).is_err());
        assert!(validate_condition(&condition("T", &"R".repeat(1025))).is_err());
    }

    #[test]
    fn messages_are_cut_at_a_character_boundary() {
        assert_eq!(cut("abc", 5), "abc");
        assert_eq!(cut("abcdef", 3), "abc");
        assert_eq!(cut("ééé", 3), "é", "never inside a character");
    }

    #[test]
    fn a_slug_twice_in_one_write_is_refused_naming_the_key() {
        let slug = Slug::parse("a").unwrap();
        let entry = LedgerEntry::new(
            migration_core::EntryState::Ok,
            migration_core::Timestamp::from_unix(0),
        );
        let err = encode(
            "migrationledger x",
            "write",
            &[(slug.clone(), entry.clone()), (slug, entry)],
        )
        .unwrap_err();
        assert!(err.to_string().contains("key m.a"), "{err}");
    }
}
