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
//! install and record every migration as skipped: a silent hole.
//!
//! ## The run lock: `status.lock`
//!
//! The run lock lives in the object itself, in `status.lock`: the run's
//! first status write takes it, conditional on the resourceVersion the run
//! planned on, each of its writes renews it and proves it (a write under a
//! lock another run took is refused), and its last write releases it, so a
//! run of K migrations costs K + 3 requests, as on the ConfigMap. Runners of
//! older releases lock the ledger through a `coordination.k8s.io/v1` Lease,
//! `<name>-lock` in [`Options::lease_namespace`] (default `cozy-system`,
//! [`defaults::NAMESPACE`]); taking the lock first reads that Lease once and
//! waits while one of them holds it.
//!
//! ## Layout
//!
//! - `spec` is what is declared: `bundle`, and the legacy integer `version`
//!   (int or string; read into [`LedgerSnapshot::version`], never written).
//! - `status.entries.<slug>` is one entry with exactly the fields of spec
//!   §5.2, stored as a JSON object (typed fields, not a JSON string): the
//!   compact form naming a shared record in `status.contexts.<id>` (the
//!   image, `lib/` digest and batch a run's entries share, stored once), or
//!   the full form of older entries. `status.attempts.<slug>` is
//!   `{count, token}` (started executions). A cluster must run the CRD this
//!   engine prints (`migrate crd`): an older one has no `status.contexts`,
//!   the API server prunes it, and the entries naming its records then read
//!   as corrupt ("names the shared record `c.<id>`, which does not exist").
//!   `status.lock` is the run lock (above). Each value is decoded on its own, so a malformed one is a
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
//! and framing, server-stamped metadata). The CRD declares the three maps
//! of the status (`entries`, `attempts`, `contexts`) atomic, so the
//! ownership records name each map once instead of each member and each of
//! its fields, which had added about 160 bytes to each migration. Measured on a real
//! API server (`tests/real_cluster/density.rs`, realistic records): a
//! migration the runner recorded, with its attempt mark and a tenth of its
//! run's shared records, takes about 246 bytes, so some 6,200 fit; a
//! fresh-install entry about 171 bytes, some 8,900 (before the maps were
//! atomic: 406 and 252 bytes).
//!
//! ## Failures
//!
//! Transient errors (429, 5xx, timeouts, connection resets) are retried with
//! bounded exponential backoff and jitter ([`RetryPolicy`]); every other
//! error fails closed with the operation, the object and the key in its
//! message. An error is never an absent ledger: a 404 counts as "no such
//! object" only when the API server names this object in it; a 404 for the
//! resource type (the CRD is not installed) is an error saying so.
//!
//! Every status write is sent with `fieldValidation=Strict`. An installed
//! CRD older than this engine, whose schema lacks a field a write sets
//! (`status.lock`, `status.failures`, `status.contexts`), would have the API
//! server prune it, on that write and on every later read, and the ledger
//! would read back without it (a lock nobody sees, entries naming shared
//! records that are not there). Strict makes the server refuse the whole
//! write instead; the error names the CRD and the field and says to run
//! `migrate crd | kubectl apply -f -`. The lock rides on a run's first
//! write, so a run under an outdated CRD stops before any script, having
//! written nothing.
//!
//! [`LedgerSnapshot::version`]: migration_core::LedgerSnapshot::version
//! [`LedgerSnapshot::unreadable_keys`]: migration_core::LedgerSnapshot::unreadable_keys
//! [`LedgerError::Unreadable`]: migration_core::LedgerError::Unreadable
//! [`LedgerError::Full`]: migration_core::LedgerError::Full
//! [`Ledger::create`]: migration_core::Ledger::create

#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

mod api;
mod condition;
mod create;
mod ledger;
mod lock;
mod resource;
mod state;

use migration_kube::defaults;

pub use condition::{ConditionStatus, LedgerCondition};
pub use ledger::CrdLedger;
pub use migration_kube::RetryPolicy;
pub use resource::{
    GROUP, KIND, LedgerSummary, MigrationLedger, MigrationLedgerSpec, MigrationLedgerStatus,
    PLURAL, VERSION, crd, crd_manifest,
};
pub use state::{CREATED_BY, CREATED_BY_ANNOTATION, READY};

/// The most bytes etcd accepts in one request by default, which bounds the
/// stored object.
pub const ETCD_REQUEST_LIMIT_BYTES: u64 = 1_572_864;

/// What the budget keeps free below [`ETCD_REQUEST_LIMIT_BYTES`] for what the
/// size computation cannot see exactly: etcd's key and request framing, and
/// metadata the API server stamps on each write.
pub const BUDGET_HEADROOM_BYTES: u64 = 32 * 1024;

/// The default size budget of one ledger object.
pub const DEFAULT_BUDGET_BYTES: u64 = ETCD_REQUEST_LIMIT_BYTES - BUDGET_HEADROOM_BYTES;

/// What one new record costs a custom-resource ledger beyond its key and
/// value, as an upper bound: its field-ownership records (a `"f:<name>":{}`
/// per field) and the JSON punctuation around it, plus room for the summary
/// and the `Ready` condition's message naming it.
pub const RECORD_OVERHEAD_BYTES: u64 = 1024;

migration_kube::ledger_options! {
    budget: DEFAULT_BUDGET_BYTES,
    budget_doc: "Size budget in bytes (default [`DEFAULT_BUDGET_BYTES`]).",
    clock_doc: "Clock for lock expiry and condition transition times.",
    /// Namespace of the Lease that runners of older releases lock the
    /// ledger through (default [`defaults::NAMESPACE`]).
    lease_namespace: String = defaults::NAMESPACE.to_owned(),
    /// Name of that Lease (default `<name>-lock`, [`defaults::lock_name`]).
    lease_name: Option<String> = None,
}
