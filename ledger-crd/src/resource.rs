//! The `MigrationLedger` custom resource: its Rust type, its schema, and the
//! CRD manifest generated from them.

use std::collections::BTreeMap;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::{CustomResource, CustomResourceExt};
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Serialize};

/// The API group.
pub const GROUP: &str = "migrations.cozystack.io";
/// The API version.
pub const VERSION: &str = "v1alpha1";
/// The kind.
pub const KIND: &str = "MigrationLedger";
/// The plural resource name (`kubectl get migrationledgers`).
pub const PLURAL: &str = "migrationledgers";

/// What is declared about a ledger: written by whoever creates the object
/// (the migration engine on a fresh install, or a chart), never by the
/// engine afterwards. The object's name identifies the bundle.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
// Each printcolumn(...) repeats the same keys, which the lint takes for duplicates.
#[allow(clippy::duplicated_attributes)]
#[kube(
    group = "migrations.cozystack.io",
    version = "v1alpha1",
    kind = "MigrationLedger",
    plural = "migrationledgers",
    singular = "migrationledger",
    shortname = "mledger",
    status = "MigrationLedgerStatus",
    derive = "PartialEq",
    doc = "The applied-set ledger of one bundle's migrations on this cluster: one entry per migration slug, in the status subresource. Written by the migration engine (cozystack-migrate); never edit entries by hand.",
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status",
        description = "False when an entry is failed or corrupt"
    ),
    printcolumn(
        name = "OK",
        type_ = "integer",
        json_path = ".status.summary.ok",
        description = "Entries recorded ok"
    ),
    printcolumn(
        name = "Failed",
        type_ = "integer",
        json_path = ".status.summary.failed",
        description = "Entries recorded failed"
    ),
    printcolumn(
        name = "Other",
        type_ = "integer",
        json_path = ".status.summary.other",
        description = "Entries recorded legacy, revoked or skipped-fresh-install"
    ),
    printcolumn(
        name = "Corrupt",
        type_ = "integer",
        json_path = ".status.summary.corrupt",
        description = "Entries the engine cannot parse (it refuses to act on them)",
        priority = 1
    ),
    printcolumn(
        name = "Newest",
        type_ = "date",
        json_path = ".status.summary.newest",
        description = "When the newest entry was recorded"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct MigrationLedgerSpec {
    /// The bundle whose migrations this ledger records (informational: the
    /// object's name is the identity).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bundle: Option<String>,
    /// The legacy integer migration version of a cluster that predates the
    /// engine, if any: every legacy migration numbered below it counts as
    /// run. Read by the engine, never written by it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<IntOrString>,
}

/// What the migration engine records, written only through the status
/// subresource. Entries and attempt marks are decoded one by one, so a
/// malformed value is reported as corrupt under its own key and hides
/// nothing else.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MigrationLedgerStatus {
    /// True once the engine has written this ledger. An object the engine
    /// created for a fresh install (annotation
    /// `migrations.cozystack.io/created-by`) counts as absent until then,
    /// because an API server ignores `.status` on create and seeding takes a
    /// second request.
    #[serde(default)]
    #[schemars(transform = no_default)]
    pub initialized: bool,
    /// Entries by migration slug, each exactly the engine's ledger entry.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(schema_with = "entries_schema")]
    pub entries: BTreeMap<String, serde_json::Value>,
    /// Shared records by id: the image, `lib/` digest and batch the compact
    /// entries naming the id (`c`) share, stored once. Never removed.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(schema_with = "contexts_schema")]
    pub contexts: BTreeMap<String, serde_json::Value>,
    /// Started executions by migration slug, counted before each run.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(schema_with = "attempts_schema")]
    pub attempts: BTreeMap<String, serde_json::Value>,
    /// The last `on-error=abort` failure by migration slug: informational,
    /// non-terminal, removed by the write that records the slug's next
    /// outcome (CONTRACT.md §5.3). An installed CRD without this field
    /// prunes it: the record is then not kept, and nothing else changes.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(schema_with = "failures_schema")]
    pub failures: BTreeMap<String, serde_json::Value>,
    /// The run lock, while a run holds it: `{holder, token, acquired,
    /// renewed, ttl_seconds}`, taken by the run's first status write,
    /// renewed by each of its writes and removed by its last (CONTRACT.md
    /// §5.5). Kept here, not in an annotation, because a write of the
    /// status subresource can change nothing else: the lock then rides on
    /// the writes the run makes anyway.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "lock_schema")]
    pub lock: Option<serde_json::Value>,
    /// Counts for `kubectl get`, recomputed by every status write.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<LedgerSummary>,
    /// `Ready` (no entry is failed or corrupt), maintained by every status
    /// write, plus conditions other controllers set.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
}

/// Keeps the API server from defaulting a field the engine alone sets.
fn no_default(schema: &mut Schema) {
    schema.remove("default");
}

/// Entry counts by outcome, for printer columns.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LedgerSummary {
    /// Entries in state `ok`.
    pub ok: i64,
    /// Entries in state `failed`.
    pub failed: i64,
    /// Entries in state `legacy`, `revoked` or `skipped-fresh-install`.
    pub other: i64,
    /// Entries that do not parse, and keys that are not slugs.
    pub corrupt: i64,
    /// The `at` of the newest valid entry (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("format" = "date-time"))]
    pub newest: Option<String>,
}

/// The schema of `status.entries`: a map from slug to an entry with exactly
/// the fields of CONTRACT.md §5.
///
/// Each field is typed, so the API server refuses a wrongly typed field and
/// `kubectl explain` documents them. The value itself has no `type` and keeps
/// unknown fields: the engine, not the schema, judges corruption, so any
/// stored value must stay representable (and reported as corrupt, naming its
/// key), and fields a newer engine records must survive an older CRD rather
/// than be pruned. No field is an enum or required for the same reason: a
/// schema that refused a newer engine's state would make the ledger
/// unwritable during an upgrade.
fn entries_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "description": "Ledger entries by migration slug.",
        "type": "object",
        "x-kubernetes-map-type": "atomic",
        "additionalProperties": {
            "description": "One ledger entry. Compact form (written by this engine): {s: state, t: when, h: sha256 of the script, c: id of the shared record in status.contexts, n: attempts}, plus r (reason) and m (message) when failed or not-yet. Full form (older entries): {state, at, sha256, lib_sha256, batch, image, attempts, reason, message}.",
            "x-kubernetes-preserve-unknown-fields": true,
            "properties": {
                "s": {
                    "description": "State (compact form): ok, failed, legacy, revoked, skipped-fresh-install or not-yet.",
                    "type": "string",
                },
                "t": {
                    "description": "When the outcome was recorded (compact form; RFC 3339).",
                    "type": "string",
                    "format": "date-time",
                },
                "h": {
                    "description": "SHA-256 of the script, hex (compact form).",
                    "type": "string",
                },
                "c": {
                    "description": "Id of the shared record in status.contexts holding image, lib_sha256 and batch (compact form).",
                    "type": "string",
                },
                "n": {
                    "description": "Real executions of this migration on this cluster (compact form; 0 when absent).",
                    "type": "integer",
                    "format": "int64",
                    "minimum": 0,
                },
                "r": {
                    "description": "Machine-readable reason (compact form; failed and not-yet).",
                    "type": "string",
                },
                "m": {
                    "description": "Detail, e.g. the tail of the output (compact form).",
                    "type": "string",
                },
                "state": {
                    "description": "ok, failed, legacy, revoked, skipped-fresh-install or not-yet.",
                    "type": "string",
                },
                "at": {
                    "description": "When the outcome was recorded (RFC 3339).",
                    "type": "string",
                    "format": "date-time",
                },
                "sha256": {
                    "description": "SHA-256 of the script that ran, hex.",
                    "type": "string",
                },
                "lib_sha256": {
                    "description": "SHA-256 of the shared lib/ directory when it ran, hex.",
                    "type": "string",
                },
                "batch": {
                    "description": "The manifest batch that placed it (informational).",
                    "type": "string",
                },
                "image": {
                    "description": "The image the script ran from.",
                    "type": "string",
                },
                "attempts": {
                    "description": "Real executions of this migration on this cluster.",
                    "type": "integer",
                    "format": "int64",
                    "minimum": 0,
                },
                "reason": {
                    "description": "Machine-readable failure reason (failed only).",
                    "type": "string",
                },
                "message": {
                    "description": "Failure detail, e.g. the tail of the output (failed only).",
                    "type": "string",
                },
            },
        },
    })
}

/// The schema of `status.contexts`; untyped at the value for the same
/// reasons as [`entries_schema`].
fn contexts_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "description": "Shared records by id: what the entries naming the id share, stored once.",
        "type": "object",
        "x-kubernetes-map-type": "atomic",
        "additionalProperties": {
            "description": "{batch, image, lib_sha256}, each omitted when unknown.",
            "x-kubernetes-preserve-unknown-fields": true,
            "properties": {
                "batch": {
                    "description": "The manifest batch that placed the entries (informational).",
                    "type": "string",
                },
                "image": {
                    "description": "The image the scripts ran from.",
                    "type": "string",
                },
                "lib_sha256": {
                    "description": "SHA-256 of the shared lib/ directory when they ran, hex.",
                    "type": "string",
                },
            },
        },
    })
}

/// The schema of `status.attempts`; untyped at the value for the same
/// reasons as [`entries_schema`].
fn attempts_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "description": "Started executions by migration slug.",
        "type": "object",
        "x-kubernetes-map-type": "atomic",
        "additionalProperties": {
            "description": "{count, token}: executions started, and a fingerprint of the execution that started the last one.",
            "x-kubernetes-preserve-unknown-fields": true,
            "properties": {
                "count": {
                    "type": "integer",
                    "format": "int64",
                    "minimum": 0,
                },
                "token": {
                    "type": "string",
                },
            },
        },
    })
}

/// The schema of `status.failures`; untyped at the value for the same
/// reasons as [`entries_schema`].
fn failures_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "description": "The last on-error=abort failure by migration slug, until its next outcome is recorded (informational).",
        "type": "object",
        "x-kubernetes-map-type": "atomic",
        "additionalProperties": {
            "description": "{reason, message, at, image, attempts}: why it failed, the redacted tail of its output, when, the image it ran from and the executions counted.",
            "x-kubernetes-preserve-unknown-fields": true,
            "properties": {
                "reason": {
                    "type": "string",
                },
                "message": {
                    "type": "string",
                },
                "at": {
                    "type": "string",
                    "format": "date-time",
                },
                "image": {
                    "type": "string",
                },
                "attempts": {
                    "type": "integer",
                    "format": "int64",
                    "minimum": 0,
                },
            },
        },
    })
}

/// The schema of `status.lock`: typed fields, atomic (one ownership record
/// whatever it holds), unknown fields kept so that a newer engine's lock
/// survives an older CRD rather than being pruned into a different lock.
fn lock_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "description": "The run lock while a run holds it: who holds it, the tenure, when it was taken and last renewed, and its lifetime from the renewal. Written by the migration engine with its status writes; never edit it by hand.",
        "type": "object",
        "x-kubernetes-map-type": "atomic",
        "x-kubernetes-preserve-unknown-fields": true,
        "properties": {
            "holder": {
                "description": "The run holding the lock (its --holder and a per-run token).",
                "type": "string",
            },
            "token": {
                "description": "The tenure: new on each take by a new holder.",
                "type": "string",
            },
            "acquired": {
                "description": "When the tenure began (RFC 3339).",
                "type": "string",
                "format": "date-time",
            },
            "renewed": {
                "description": "When it was last taken or renewed (RFC 3339).",
                "type": "string",
                "format": "date-time",
            },
            "ttl_seconds": {
                "description": "Its lifetime from the last renewal, in seconds: the lock lapses at renewed + ttl_seconds.",
                "type": "integer",
                "format": "int64",
                "minimum": 0,
            },
        },
    })
}

/// The CustomResourceDefinition, generated from [`MigrationLedger`].
pub fn crd() -> CustomResourceDefinition {
    MigrationLedger::crd()
}

/// The CustomResourceDefinition as a YAML document, ready for
/// `kubectl apply -f -`. A copy is committed as
/// `ledger-crd/migrationledger.crd.yaml`; a test keeps the two equal.
pub fn crd_manifest() -> String {
    let body = match serde_saphyr::to_string(&crd()) {
        Ok(yaml) => yaml,
        // The CRD is plain data, so YAML serialisation cannot fail; JSON is
        // valid YAML, should it ever.
        Err(_) => serde_json::to_string_pretty(&crd()).unwrap_or_default(),
    };
    format!(
        "# Generated from the Rust type ledger_crd::MigrationLedger; do not edit.\n\
         # Regenerate: `migrate crd`, or UPDATE_CRD=1 cargo test -p ledger-crd --test crd_manifest\n\
         {body}"
    )
}
