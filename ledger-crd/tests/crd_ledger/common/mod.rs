//! What the test files share: the resource's registration on the test API
//! server, and the mapping of the conformance suite's raw keys onto the
//! object (`m.<x>` → `status.entries.<x>`, `a.<x>` → `status.attempts.<x>`,
//! `f.<x>` → `status.failures.<x>`, `version` → `spec.version`, anything else → an annotation, standing for
//! data other owners keep on the object).

#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

pub mod scenarios;

use ledger_crd::{GROUP, KIND, PLURAL, VERSION};
use migration_core::keys;
use serde_json::{Value, json};
use test_apiserver::TestApiServer;

/// The storage name of the resource on the test server.
pub const RESOURCE: &str = "migrationledgers.migrations.cozystack.io";

/// Serves `MigrationLedger` with its status subresource, as the CRD does.
pub fn register(server: &TestApiServer) {
    server.register_custom_resource(GROUP, VERSION, PLURAL, KIND, false, true);
}

/// Where a conformance-suite key lives in the object.
#[derive(Debug, Clone)]
pub enum Slot {
    Entry(String),
    Attempt(String),
    Failure(String),
    Version,
    Annotation(String),
}

pub fn slot(key: &str) -> Slot {
    if let Some(rest) = key.strip_prefix(keys::ENTRY_PREFIX) {
        Slot::Entry(rest.to_owned())
    } else if let Some(rest) = key.strip_prefix(keys::ATTEMPT_PREFIX) {
        Slot::Attempt(rest.to_owned())
    } else if let Some(rest) = key.strip_prefix(keys::FAILURE_PREFIX) {
        Slot::Failure(rest.to_owned())
    } else if key == keys::VERSION {
        Slot::Version
    } else {
        Slot::Annotation(key.to_owned())
    }
}

/// A raw value as stored "verbatim" in a JSON object: JSON if it parses,
/// else the string itself.
pub fn raw_value(slot: &Slot, value: &str) -> Value {
    match slot {
        Slot::Annotation(_) => Value::String(value.to_owned()),
        _ => serde_json::from_str(value).unwrap_or_else(|_| Value::String(value.to_owned())),
    }
}

/// The stored text of a value: a string as itself, anything else as JSON.
pub fn text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

pub fn pointer(slot: &Slot) -> String {
    match slot {
        Slot::Entry(k) => format!("/status/entries/{k}"),
        Slot::Attempt(k) => format!("/status/attempts/{k}"),
        Slot::Failure(k) => format!("/status/failures/{k}"),
        Slot::Version => "/spec/version".into(),
        Slot::Annotation(k) => format!("/metadata/annotations/{}", k.replace('/', "~1")),
    }
}

pub fn read_slot(object: &Value, slot: &Slot) -> Option<String> {
    object.pointer(&pointer(slot)).map(text)
}

/// The merge patch that plants `value` in `slot`, and whether it goes to
/// the status subresource.
pub fn planting_patch(slot: &Slot, value: Value) -> (Value, bool) {
    match slot {
        Slot::Entry(k) => (json!({"status": {"entries": {k: value}}}), true),
        Slot::Attempt(k) => (json!({"status": {"attempts": {k: value}}}), true),
        Slot::Failure(k) => (json!({"status": {"failures": {k: value}}}), true),
        Slot::Version => (json!({"spec": {"version": value}}), false),
        Slot::Annotation(k) => (json!({"metadata": {"annotations": {k: value}}}), false),
    }
}

/// Plants directly in the test server's storage.
pub fn plant(server: &TestApiServer, name: &str, key: &str, value: &str) {
    let slot = slot(key);
    let mut object = server
        .object(RESOURCE, "", name)
        .expect("the ledger exists");
    let (patch, _) = planting_patch(&slot, raw_value(&slot, value));
    merge(&mut object, &patch);
    server.put_object(RESOURCE, object).unwrap();
}

fn merge(target: &mut Value, patch: &Value) {
    match (target, patch) {
        (Value::Object(t), Value::Object(p)) => {
            for (k, v) in p {
                match t.get_mut(k) {
                    Some(existing) if v.is_object() && existing.is_object() => merge(existing, v),
                    _ => {
                        t.insert(k.clone(), v.clone());
                    }
                }
            }
        }
        (t, p) => *t = p.clone(),
    }
}

/// Reads directly from the test server's storage.
pub fn raw(server: &TestApiServer, name: &str, key: &str) -> Option<String> {
    read_slot(&server.object(RESOURCE, "", name)?, &slot(key))
}

/// Stores `MigrationLedger` `name` with `spec` and nothing else on the test server, as a chart
/// declares it (no engine annotation, no status).
pub fn declare(server: &TestApiServer, name: &str, spec: Value) {
    server
        .put_object(
            RESOURCE,
            json!({
                "apiVersion": "migrations.cozystack.io/v1alpha1", "kind": "MigrationLedger",
                "metadata": {"name": name},
                "spec": spec,
            }),
        )
        .unwrap();
}
