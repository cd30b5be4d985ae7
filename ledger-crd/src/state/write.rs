//! One status write: the JSON Patch that sets the given entries, attempt marks
//! and condition on top of the object that was read, and the size it leaves.

use std::collections::BTreeMap;

use migration_core::Timestamp;
use serde_json::{Map, Value, json};

use super::tally::{Tally, upsert_condition};
use super::{READY, View, json_size};

/// What one status write sets, beyond what every write recomputes.
#[derive(Debug, Default)]
pub(crate) struct StatusWrite {
    /// Entries to store, by slug, replacing what is there.
    pub(crate) entries: Map<String, Value>,
    /// Attempt marks to store, by slug.
    pub(crate) attempts: Map<String, Value>,
    /// Last failures to store, by slug.
    pub(crate) failures: Map<String, Value>,
    /// Slugs whose stored last failure the write removes (each one the
    /// object holds: removing an absent member is an error in a JSON Patch).
    pub(crate) cleared_failures: Vec<String>,
    /// New shared records to store, by id.
    pub(crate) contexts: Map<String, Value>,
    /// A condition to set (not `Ready`), as `{type, status, reason, message}`.
    pub(crate) condition: Option<Value>,
    /// The run lock: `None` leaves it, `Some(None)` removes it,
    /// `Some(Some(lock))` stores `lock`.
    pub(crate) lock: Option<Option<Value>>,
}

/// A status write ready to send: the JSON Patch, and the object it would
/// leave behind.
#[derive(Debug)]
pub(crate) struct PlannedWrite {
    pub(crate) ops: Vec<Value>,
    /// Bytes the stored object would take after the write, server-maintained
    /// field ownership included.
    pub(crate) would_be_bytes: u64,
}

/// Escapes a JSON Pointer reference token (RFC 6901).
fn pointer_token(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

/// Plans one status write on top of `view`: the given entries, attempt
/// marks and condition, plus `initialized`, `summary` and `Ready`
/// recomputed over the entries the object will hold.
///
/// The patch is a JSON Patch whose first operation sets the resourceVersion
/// that was read, so the API server applies it only to that exact object
/// (409 otherwise); `add` replaces a map member whole, so a replaced entry
/// keeps none of the fields of the one it replaces.
pub(crate) fn plan_status_write(
    view: &View<'_>,
    write: &StatusWrite,
    now: Timestamp,
) -> Result<PlannedWrite, String> {
    let rv = view
        .resource_version()
        .ok_or("metadata.resourceVersion is missing")?;
    let mut ops = vec![json!({"op": "replace", "path": "/metadata/resourceVersion", "value": rv})];
    if view.status.is_none() {
        ops.push(json!({"op": "add", "path": "/status", "value": {}}));
    }
    if !view.initialized {
        ops.push(json!({"op": "add", "path": "/status/initialized", "value": true}));
    }
    for (field, current, writes) in [
        ("contexts", view.contexts, &write.contexts),
        ("entries", view.entries, &write.entries),
        ("attempts", view.attempts, &write.attempts),
        ("failures", view.failures, &write.failures),
    ] {
        if writes.is_empty() {
            continue;
        }
        if current.is_none() {
            ops.push(json!({"op": "add", "path": format!("/status/{field}"), "value": writes}));
        } else {
            for (key, value) in writes {
                ops.push(json!({
                    "op": "add",
                    "path": format!("/status/{field}/{}", pointer_token(key)),
                    "value": value,
                }));
            }
        }
    }

    for slug in &write.cleared_failures {
        if view.failures.is_some_and(|f| f.contains_key(slug)) && !write.failures.contains_key(slug)
        {
            ops.push(json!({
                "op": "remove",
                "path": format!("/status/failures/{}", pointer_token(slug)),
            }));
        }
    }

    match &write.lock {
        Some(Some(lock)) => {
            ops.push(json!({"op": "add", "path": "/status/lock", "value": lock}));
        }
        // Removing an absent member is an error in a JSON Patch.
        Some(None) if view.lock.is_some() => {
            ops.push(json!({"op": "remove", "path": "/status/lock"}));
        }
        Some(None) | None => {}
    }

    let mut merged: BTreeMap<&String, &Value> = view.entries.into_iter().flatten().collect();
    merged.extend(&write.entries);
    let mut contexts = view.contexts();
    for (id, value) in &write.contexts {
        contexts.insert_value(id, value);
    }
    let tally = Tally::of(merged, &contexts);
    ops.push(json!({"op": "add", "path": "/status/summary", "value": tally.summary()}));

    let mut conditions = view.conditions();
    let generation = view.generation();
    if let Some(condition) = &write.condition {
        let mut condition = condition.clone();
        if let Some(g) = generation {
            condition["observedGeneration"] = json!(g);
        }
        upsert_condition(&mut conditions, condition, now);
    }
    let (ready, reason, message) = tally.ready();
    let mut ready_condition = json!({
        "type": READY,
        "status": if ready { "True" } else { "False" },
        "reason": reason,
        "message": message,
    });
    if let Some(g) = generation {
        ready_condition["observedGeneration"] = json!(g);
    }
    upsert_condition(&mut conditions, ready_condition, now);
    ops.push(json!({"op": "add", "path": "/status/conditions", "value": conditions}));

    let mut projected = view.object.clone();
    apply(&mut projected, &ops)?;
    let would_be_bytes = json_size(&projected) + ownership_growth(view, write);
    Ok(PlannedWrite {
        ops,
        would_be_bytes,
    })
}

/// Applies our own `add`/`replace`/`remove` operations to a local copy, to
/// measure what the API server will store.
fn apply(object: &mut Value, ops: &[Value]) -> Result<(), String> {
    for op in ops {
        let path = op.get("path").and_then(Value::as_str).unwrap_or_default();
        let remove = op.get("op").and_then(Value::as_str) == Some("remove");
        let value = op.get("value").cloned().unwrap_or(Value::Null);
        let (parent, last) = path.rsplit_once('/').ok_or("a patch path without '/'")?;
        let last = last.replace("~1", "/").replace("~0", "~");
        let target = if parent.is_empty() {
            Some(&mut *object)
        } else {
            object.pointer_mut(parent)
        };
        match target {
            Some(Value::Object(map)) if remove => {
                map.remove(&last);
            }
            Some(Value::Object(map)) => {
                map.insert(last, value);
            }
            _ => return Err(format!("the patch path {path} has no parent object")),
        }
    }
    Ok(())
}

/// The bytes the API server's field ownership records (`managedFields`)
/// grow by when our manager sets new fields. The server maintains them for
/// every write, in the same etcd value as the entries, so a budget that
/// ignored them would let the server refuse a write the engine thought
/// fitted.
///
/// The CRD declares `entries`, `attempts` and `contexts` atomic maps
/// (`x-kubernetes-map-type: atomic`), so the server records one field for
/// each map, whatever it holds: new members add nothing. An object written
/// under an older CRD, whose maps were granular, has records that name each
/// member and each member's fields (`"f:<slug>":{".":{},"f:s":{},…}`); while
/// its records still show that, each new member and new field is counted.
fn ownership_growth(view: &View<'_>, write: &StatusWrite) -> u64 {
    let fields = |value: &Value, old: Option<&Value>| -> u64 {
        let Value::Object(map) = value else {
            return 0;
        };
        let old = old.and_then(Value::as_object);
        map.keys()
            .filter(|k| old.is_none_or(|o| !o.contains_key(*k)))
            .map(|k| format!(",\"f:{k}\":{{}}").len() as u64)
            .sum()
    };
    let mut growth = 0;
    for (name, current, writes) in [
        ("entries", view.entries, &write.entries),
        ("attempts", view.attempts, &write.attempts),
        ("contexts", view.contexts, &write.contexts),
        ("failures", view.failures, &write.failures),
    ] {
        if !tracked_member_by_member(view.object, name) {
            continue;
        }
        for (key, value) in writes {
            let old = current.and_then(|c| c.get(key));
            if old.is_none() {
                growth += format!(",\"f:{key}\":{{\".\":{{}}}}").len() as u64;
            }
            growth += fields(value, old);
        }
    }
    if view.status.is_none() || write.condition.is_some() {
        // A first status write creates the manager's whole record (with its
        // timestamp and the summary and condition fields); a new condition
        // adds a keyed list item.
        growth += 512;
    }
    growth
}

/// Whether some ownership record of `object` names the members of
/// `status.<map>` one by one (the map was granular when it was written).
fn tracked_member_by_member(object: &Value, map: &str) -> bool {
    let Some(records) = object
        .pointer("/metadata/managedFields")
        .and_then(Value::as_array)
    else {
        return false;
    };
    records.iter().any(|record| {
        record
            .pointer(&format!("/fieldsV1/f:status/f:{map}"))
            .and_then(Value::as_object)
            .is_some_and(|fields| fields.keys().any(|k| k != "."))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::test_entry as entry;

    /// A write of one entry, `key` → `value`.
    fn one_entry(key: &str, value: Value) -> StatusWrite {
        let mut write = StatusWrite::default();
        write.entries.insert(key.into(), value);
        write
    }

    fn plan(object: &Value, write: &StatusWrite) -> PlannedWrite {
        let view = View::new(object).unwrap();
        plan_status_write(&view, write, Timestamp::from_unix(0)).unwrap()
    }

    /// The paths the planned operations touch, in order.
    fn paths(planned: &PlannedWrite) -> Vec<&str> {
        planned
            .ops
            .iter()
            .map(|op| op["path"].as_str().unwrap())
            .collect()
    }

    /// The bytes `planned` counts beyond the JSON of `object` patched by it:
    /// the ownership records the write adds.
    fn ownership(object: &Value, planned: &PlannedWrite) -> u64 {
        let mut projected = object.clone();
        apply(&mut projected, &planned.ops).unwrap();
        planned.would_be_bytes - json_size(&projected)
    }

    fn live(status: Value) -> Value {
        json!({
            "metadata": {"name": "x", "resourceVersion": "7", "generation": 3},
            "spec": {},
            "status": status,
        })
    }

    #[test]
    fn a_first_status_write_creates_the_status_and_later_ones_add_keys() {
        let created = json!({"metadata": {"name": "x", "resourceVersion": "5"}, "spec": {}});
        let planned = plan(
            &created,
            &one_entry("a", entry("ok", "2026-01-01T00:00:00Z")),
        );
        assert_eq!(
            paths(&planned),
            [
                "/metadata/resourceVersion",
                "/status",
                "/status/initialized",
                "/status/entries",
                "/status/summary",
                "/status/conditions"
            ]
        );
        assert_eq!(
            planned.ops[0],
            json!({"op": "replace", "path": "/metadata/resourceVersion", "value": "5"})
        );

        let object = live(
            json!({"initialized": true, "entries": {"a": entry("ok", "2026-01-01T00:00:00Z")}}),
        );
        let mut write = one_entry("b", entry("ok", "2026-01-01T00:00:00Z"));
        write
            .attempts
            .insert("b".into(), json!({"count": 1, "token": "t"}));
        let planned = plan(&object, &write);
        assert_eq!(
            paths(&planned),
            [
                "/metadata/resourceVersion",
                "/status/entries/b",
                "/status/attempts",
                "/status/summary",
                "/status/conditions"
            ]
        );
        assert_eq!(planned.ops[4]["value"][0]["observedGeneration"], 3);
    }

    /// `object` with an ownership record of our manager for `status.entries` as given.
    fn owned(mut object: Value, entries_fields: Value) -> Value {
        object["metadata"]["managedFields"] = json!([{
            "manager": "cozystack-migrate", "operation": "Update", "subresource": "status",
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:status": {".": {}, "f:entries": entries_fields}},
        }]);
        object
    }

    #[test]
    fn the_projected_size_is_the_patched_json_and_new_entries_of_an_atomic_map_add_no_ownership() {
        let object = owned(
            live(json!({"initialized": true, "entries": {}, "summary": {}, "conditions": []})),
            json!({}),
        );
        let value = entry("ok", "2026-01-01T00:00:00Z");
        let planned = plan(&object, &one_entry("new-one", value.clone()));
        let mut projected = object.clone();
        apply(&mut projected, &planned.ops).unwrap();
        assert_eq!(projected["status"]["entries"]["new-one"], value);
        assert_eq!(ownership(&object, &planned), 0);
    }

    #[test]
    fn under_records_of_a_granular_map_new_entries_and_fields_add_ownership_records() {
        // Written under a CRD whose maps were granular: the records name members and fields.
        let granular = json!({".": {}, "f:a": {".": {}, "f:state": {}, "f:at": {}}});
        let object = owned(
            live(json!({"initialized": true, "entries": {}, "summary": {}, "conditions": []})),
            granular.clone(),
        );
        let value = entry("ok", "2026-01-01T00:00:00Z");
        let planned = plan(&object, &one_entry("new-one", value));
        let expected =
            r#","f:new-one":{".":{}},"f:state":{},"f:at":{},"f:attempts":{}"#.len() as u64;
        assert_eq!(ownership(&object, &planned), expected);

        // Replacing a stored entry adds only the fields it did not have.
        let object = owned(
            live(
                json!({"initialized": true, "entries": {"a": entry("ok", "2026-01-01T00:00:00Z")}}),
            ),
            granular,
        );
        let planned = plan(
            &object,
            &one_entry("a", entry("failed", "2026-01-01T00:00:00Z")),
        );
        assert_eq!(
            ownership(&object, &planned),
            r#","f:reason":{},"f:message":{}"#.len() as u64
        );
    }

    #[test]
    fn pointer_tokens_are_escaped() {
        assert_eq!(pointer_token("a/b~c"), "a~1b~0c");
        let mut object = json!({"m": {}});
        apply(
            &mut object,
            &[json!({"op": "add", "path": "/m/a~1b~0c", "value": 1})],
        )
        .unwrap();
        assert_eq!(object, json!({"m": {"a/b~c": 1}}));
        assert!(
            apply(
                &mut object,
                &[json!({"op": "add", "path": "/nope/x", "value": 1})]
            )
            .is_err()
        );
    }
}
