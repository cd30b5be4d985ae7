//! The stored object read piece by piece, and the status writes computed
//! from it.
//!
//! Everything here works on the object's JSON as the API server returned it,
//! never on the typed [`crate::MigrationLedger`]: a typed decode is all or
//! nothing, and one bad value must stay one corrupt record.

use std::collections::BTreeMap;

use migration_core::keys;
use migration_core::ledger::{AttemptMark, LegacyVersion};
use migration_core::{
    CorruptEntry, EntryState, LedgerEntry, LedgerSnapshot, Record, Slug, Timestamp,
};
use serde_json::{Map, Value, json};

/// The annotation the engine puts on an object it creates for a fresh
/// install. Together with `status.initialized` it tells a seeding still in
/// progress (absent) from a ledger someone else declared (present).
pub const CREATED_BY_ANNOTATION: &str = "migrations.cozystack.io/created-by";

/// The value of [`CREATED_BY_ANNOTATION`].
pub const CREATED_BY: &str = "cozystack-migrate";

/// The condition type every status write maintains.
pub const READY: &str = "Ready";

/// How many slugs a condition message names before it says "and N more".
const NAMED_IN_MESSAGE: usize = 20;

/// Where a stored object stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lifecycle {
    /// Created by the engine for a fresh install whose status write has not
    /// landed yet: the ledger does not exist.
    Seeding,
    /// A ledger, possibly empty.
    Live,
}

/// A stored object whose containers have been checked.
#[derive(Debug)]
pub(crate) struct View<'a> {
    pub(crate) object: &'a Value,
    status: Option<&'a Map<String, Value>>,
    entries: Option<&'a Map<String, Value>>,
    attempts: Option<&'a Map<String, Value>>,
    initialized: bool,
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// The stored text of a value: a string as itself, anything else as JSON.
pub(crate) fn raw_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Serialised size of a JSON value, as the API server stores a custom resource.
pub(crate) fn json_size(v: &Value) -> u64 {
    serde_json::to_vec(v).map_or(0, |bytes| bytes.len() as u64)
}

impl<'a> View<'a> {
    /// Checks the containers; a container that is not what it must be makes
    /// the whole ledger unreadable (the `Err` says which and why).
    pub(crate) fn new(object: &'a Value) -> Result<Self, String> {
        if !object.is_object() {
            return Err(format!("the object is {}", kind_of(object)));
        }
        match object.get("spec") {
            None | Some(Value::Null | Value::Object(_)) => {}
            Some(other) => return Err(format!("spec is {}, not an object", kind_of(other))),
        }
        let status = match object.get("status") {
            None | Some(Value::Null) => None,
            Some(Value::Object(map)) => Some(map),
            Some(other) => return Err(format!("status is {}, not an object", kind_of(other))),
        };
        let map_field = |name: &str| match status.and_then(|s| s.get(name)) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Object(map)) => Ok(Some(map)),
            Some(other) => Err(format!("status.{name} is {}, not a map", kind_of(other))),
        };
        let entries = map_field("entries")?;
        let attempts = map_field("attempts")?;
        let initialized = match status.and_then(|s| s.get("initialized")) {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) => *b,
            Some(other) => {
                return Err(format!(
                    "status.initialized is {}, not a boolean",
                    kind_of(other)
                ));
            }
        };
        Ok(View {
            object,
            status,
            entries,
            attempts,
            initialized,
        })
    }

    fn created_by_engine(&self) -> bool {
        self.object
            .pointer("/metadata/annotations")
            .and_then(|a| a.get(CREATED_BY_ANNOTATION))
            .and_then(Value::as_str)
            == Some(CREATED_BY)
    }

    fn declared_version(&self) -> Option<&Value> {
        self.object
            .pointer("/spec/version")
            .filter(|v| !v.is_null())
    }

    /// A seeding in progress is positive evidence of exactly one thing: the
    /// engine created this object for a fresh install and its status write
    /// has not landed. Anything that says the cluster has history (a declared
    /// legacy version, an entry, an attempt mark) or that someone else
    /// declared the object makes it a ledger, so it can never be taken for a
    /// fresh install.
    pub(crate) fn lifecycle(&self) -> Lifecycle {
        let empty = |m: Option<&Map<String, Value>>| m.is_none_or(Map::is_empty);
        if !self.initialized
            && self.created_by_engine()
            && self.declared_version().is_none()
            && empty(self.entries)
            && empty(self.attempts)
        {
            Lifecycle::Seeding
        } else {
            Lifecycle::Live
        }
    }

    pub(crate) fn resource_version(&self) -> Option<&str> {
        self.object
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
            .filter(|rv| !rv.is_empty())
    }

    fn generation(&self) -> Option<i64> {
        self.object
            .pointer("/metadata/generation")
            .and_then(Value::as_i64)
    }

    /// The stored entries (keys as stored: slugs, or whatever a human wrote).
    pub(crate) fn entries(&self) -> Option<&'a Map<String, Value>> {
        self.entries
    }

    pub(crate) fn entry_count(&self) -> usize {
        self.entries.map_or(0, Map::len)
    }

    pub(crate) fn attempt_count(&self) -> usize {
        self.attempts.map_or(0, Map::len)
    }

    /// The stored attempt mark of `slug`, if any.
    pub(crate) fn attempt(&self, slug: &Slug) -> Option<&'a Value> {
        self.attempts.and_then(|a| a.get(slug.as_str()))
    }

    fn legacy_version(&self) -> LegacyVersion {
        match self.declared_version() {
            None => LegacyVersion::Absent,
            Some(Value::Number(n)) => match n.as_u64() {
                Some(v) => LegacyVersion::Known(v),
                None => LegacyVersion::Corrupt { raw: n.to_string() },
            },
            Some(Value::String(s)) => LegacyVersion::parse(s),
            Some(other) => LegacyVersion::Corrupt {
                raw: other.to_string().chars().take(80).collect(),
            },
        }
    }

    /// Everything the ledger holds. Each entry and attempt mark is decoded on
    /// its own, so a bad one is reported by key and hides nothing else.
    pub(crate) fn snapshot(&self) -> LedgerSnapshot {
        let mut snapshot = LedgerSnapshot {
            version: self.legacy_version(),
            revision: self.resource_version().map(str::to_owned),
            ..LedgerSnapshot::default()
        };
        for (key, value) in self.entries.into_iter().flatten() {
            let ledger_key = keys::entry_key(key);
            match Slug::parse(key) {
                Ok(slug) => {
                    let record = match LedgerEntry::from_value(&ledger_key, value.clone()) {
                        Ok(entry) => Record::Entry(entry),
                        Err(corrupt) => Record::Corrupt(corrupt),
                    };
                    snapshot.records.insert(slug, record);
                }
                Err(e) => snapshot.unreadable_keys.push(CorruptEntry::new(
                    &ledger_key,
                    &raw_text(value),
                    format!("the key is not a slug: {e}"),
                )),
            }
        }
        for (key, value) in self.attempts.into_iter().flatten() {
            let attempt_key = keys::attempt_key(key);
            match (Slug::parse(key), decode_mark(&attempt_key, value)) {
                (Ok(slug), Ok(mark)) => {
                    snapshot.attempts_started.insert(slug, mark.count);
                }
                (Err(e), _) => snapshot.unreadable_keys.push(CorruptEntry::new(
                    &attempt_key,
                    &raw_text(value),
                    format!("the key is not a slug: {e}"),
                )),
                (_, Err(corrupt)) => snapshot.unreadable_keys.push(corrupt),
            }
        }
        snapshot
    }

    /// The conditions as stored. A `conditions` that is not a list holds
    /// nothing the engine could keep, so it is treated as empty (and the next
    /// write replaces it) rather than blocking every write on a cosmetic field.
    fn conditions(&self) -> Vec<Value> {
        match self.status.and_then(|s| s.get("conditions")) {
            Some(Value::Array(items)) => items.clone(),
            None | Some(Value::Null) => Vec::new(),
            Some(other) => {
                tracing::warn!(
                    found = kind_of(other),
                    "status.conditions is not a list; replacing it"
                );
                Vec::new()
            }
        }
    }
}

/// Decodes a stored attempt mark.
pub(crate) fn decode_mark(key: &str, value: &Value) -> Result<AttemptMark, CorruptEntry> {
    serde_json::from_value(value.clone())
        .map_err(|e| CorruptEntry::new(key, &raw_text(value), e.to_string()))
}

/// What one status write sets, beyond what every write recomputes.
#[derive(Debug, Default)]
pub(crate) struct StatusWrite {
    /// Entries to store, by slug, replacing what is there.
    pub(crate) entries: Map<String, Value>,
    /// Attempt marks to store, by slug.
    pub(crate) attempts: Map<String, Value>,
    /// A condition to set (not `Ready`), as `{type, status, reason, message}`.
    pub(crate) condition: Option<Value>,
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

/// Counts and the Ready condition over a full entry map.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Tally {
    pub(crate) ok: usize,
    pub(crate) failed: Vec<String>,
    pub(crate) other: usize,
    pub(crate) corrupt: Vec<String>,
    pub(crate) newest: Option<Timestamp>,
}

impl Tally {
    pub(crate) fn of<'v>(entries: impl IntoIterator<Item = (&'v String, &'v Value)>) -> Self {
        let mut tally = Tally::default();
        for (key, value) in entries {
            let ledger_key = keys::entry_key(key);
            let parsed = Slug::parse(key)
                .ok()
                .and_then(|_| LedgerEntry::from_value(&ledger_key, value.clone()).ok());
            let Some(entry) = parsed else {
                tally.corrupt.push(ledger_key);
                continue;
            };
            match entry.state {
                EntryState::Ok => tally.ok += 1,
                EntryState::Failed => tally.failed.push(key.clone()),
                EntryState::Legacy
                | EntryState::Revoked
                | EntryState::SkippedFreshInstall
                | EntryState::NotYet => {
                    tally.other += 1;
                }
            }
            tally.newest = tally.newest.max(Some(entry.at));
        }
        tally.failed.sort();
        tally.corrupt.sort();
        tally
    }

    pub(crate) fn summary(&self) -> Value {
        let mut summary = json!({
            "ok": self.ok,
            "failed": self.failed.len(),
            "other": self.other,
            "corrupt": self.corrupt.len(),
        });
        if let Some(newest) = self.newest {
            summary["newest"] = Value::String(newest.to_string());
        }
        summary
    }

    /// `Ready` without its timestamps: True when no entry is failed or
    /// corrupt. A corrupt entry outranks a failure as the reason, because the
    /// engine refuses to act at all while one is on its path (a key that is
    /// not a slug blocks nothing, but somebody wrote it by hand and should
    /// look).
    pub(crate) fn ready(&self) -> (bool, &'static str, String) {
        let total = self.ok + self.failed.len() + self.other + self.corrupt.len();
        let failed = (!self.failed.is_empty()).then(|| {
            format!(
                "{} failed: {}",
                plural(self.failed.len(), "migration"),
                named(&self.failed)
            )
        });
        if !self.corrupt.is_empty() {
            let mut message = format!(
                "{} corrupt: {}",
                plural(self.corrupt.len(), "entry"),
                named(&self.corrupt)
            );
            if let Some(failed) = failed {
                message.push_str("; ");
                message.push_str(&failed);
            }
            return (false, "CorruptEntries", message);
        }
        match failed {
            Some(message) => (false, "MigrationsFailed", message),
            None => (
                true,
                "NoFailures",
                format!("{}, none failed", plural(total, "entry")),
            ),
        }
    }
}

fn plural(n: usize, noun: &str) -> String {
    match (n, noun) {
        (1, _) => format!("1 {noun}"),
        (_, "entry") => format!("{n} entries"),
        _ => format!("{n} {noun}s"),
    }
}

fn named(items: &[String]) -> String {
    let shown = items
        .iter()
        .take(NAMED_IN_MESSAGE)
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join(", ");
    match items.len().saturating_sub(NAMED_IN_MESSAGE) {
        0 => shown,
        more => format!("{shown} and {more} more"),
    }
}

/// metav1.Time precision.
fn condition_time(now: Timestamp) -> Value {
    Value::String(now.truncated().to_string())
}

/// Sets `new` (which has no `lastTransitionTime`) in `conditions`, by type.
/// The transition time moves only when the status changes, as the
/// Kubernetes condition convention says.
fn upsert_condition(conditions: &mut Vec<Value>, mut new: Value, now: Timestamp) {
    let kind = new.get("type").cloned();
    let existing = conditions
        .iter()
        .position(|c| c.get("type").is_some() && c.get("type") == kind.as_ref());
    let kept_time = existing
        .and_then(|i| conditions.get(i))
        .filter(|old| old.get("status") == new.get("status"))
        .and_then(|old| old.get("lastTransitionTime"))
        .filter(|t| t.is_string())
        .cloned();
    new["lastTransitionTime"] = kept_time.unwrap_or_else(|| condition_time(now));
    match existing {
        Some(i) => conditions[i] = new,
        None => conditions.push(new),
    }
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
        ("entries", view.entries, &write.entries),
        ("attempts", view.attempts, &write.attempts),
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

    let mut merged: BTreeMap<&String, &Value> = view.entries.into_iter().flatten().collect();
    merged.extend(&write.entries);
    let tally = Tally::of(merged);
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

/// Applies our own `add`/`replace` operations to a local copy, to measure
/// what the API server will store.
fn apply(object: &mut Value, ops: &[Value]) -> Result<(), String> {
    for op in ops {
        let path = op.get("path").and_then(Value::as_str).unwrap_or_default();
        let value = op.get("value").cloned().unwrap_or(Value::Null);
        let (parent, last) = path.rsplit_once('/').ok_or("a patch path without '/'")?;
        let last = last.replace("~1", "/").replace("~0", "~");
        let target = if parent.is_empty() {
            Some(&mut *object)
        } else {
            object.pointer_mut(parent)
        };
        match target {
            Some(Value::Object(map)) => {
                map.insert(last, value);
            }
            _ => return Err(format!("the patch path {path} has no parent object")),
        }
    }
    Ok(())
}

/// The bytes the API server's field ownership records (`managedFields`)
/// grow by when our manager sets new fields: one `"f:<name>":{}` per field,
/// nested per map level. The server maintains it for every write, and it is
/// stored in the same etcd value as the entries, so a budget that ignored it
/// would let the server refuse a write the engine thought fitted.
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
    for (current, writes) in [
        (view.entries, &write.entries),
        (view.attempts, &write.attempts),
    ] {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(state: &str, at: &str) -> Value {
        let mut e = json!({"state": state, "at": at, "attempts": 1});
        if state == "failed" {
            e["reason"] = json!("exit-status-1");
            e["message"] = json!("tail");
        }
        e
    }

    fn live(status: Value) -> Value {
        json!({
            "metadata": {"name": "x", "resourceVersion": "7", "generation": 3},
            "spec": {},
            "status": status,
        })
    }

    #[test]
    fn the_tally_counts_by_outcome_and_names_failed_and_corrupt_keys() {
        let entries = json!({
            "b": entry("failed", "2026-01-02T00:00:00Z"),
            "a": entry("failed", "2026-01-01T00:00:00Z"),
            "c": entry("ok", "2026-01-03T00:00:00Z"),
            "d": entry("legacy", "2025-01-01T00:00:00Z"),
            "e": "garbage",
            "Not_Slug": entry("ok", "2027-01-01T00:00:00Z"),
        });
        let tally = Tally::of(entries.as_object().unwrap());
        assert_eq!(tally.ok, 1);
        assert_eq!(tally.failed, ["a", "b"]);
        assert_eq!(tally.other, 1);
        assert_eq!(tally.corrupt, ["m.Not_Slug", "m.e"]);
        assert_eq!(
            tally.summary()["newest"],
            "2026-01-03T00:00:00Z",
            "corrupt entries and non-slug keys have no trustworthy time"
        );
        let (ready, reason, message) = tally.ready();
        assert!(!ready);
        assert_eq!(reason, "CorruptEntries");
        assert_eq!(
            message,
            "2 entries corrupt: m.Not_Slug, m.e; 2 migrations failed: a, b"
        );
    }

    #[test]
    fn ready_is_true_only_without_failures_or_corruption() {
        let empty = Tally::default();
        assert_eq!(
            empty.ready(),
            (true, "NoFailures", "0 entries, none failed".into())
        );
        assert_eq!(
            empty.summary(),
            json!({"ok": 0, "failed": 0, "other": 0, "corrupt": 0})
        );
        let one = Tally::of(
            json!({"a": entry("ok", "2026-01-01T00:00:00Z")})
                .as_object()
                .unwrap(),
        );
        assert_eq!(
            one.ready(),
            (true, "NoFailures", "1 entry, none failed".into())
        );
        let failed = Tally::of(
            json!({"a": entry("failed", "2026-01-01T00:00:00Z")})
                .as_object()
                .unwrap(),
        );
        assert_eq!(
            failed.ready(),
            (false, "MigrationsFailed", "1 migration failed: a".into())
        );
    }

    #[test]
    fn a_first_status_write_creates_the_status_and_later_ones_add_keys() {
        let created = json!({"metadata": {"name": "x", "resourceVersion": "5"}, "spec": {}});
        let view = View::new(&created).unwrap();
        let mut write = StatusWrite::default();
        write
            .entries
            .insert("a".into(), entry("ok", "2026-01-01T00:00:00Z"));
        let planned = plan_status_write(&view, &write, Timestamp::from_unix(0)).unwrap();
        let paths: Vec<&str> = planned
            .ops
            .iter()
            .map(|op| op["path"].as_str().unwrap())
            .collect();
        assert_eq!(
            paths,
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
        let view = View::new(&object).unwrap();
        let mut write = StatusWrite::default();
        write
            .entries
            .insert("b".into(), entry("ok", "2026-01-01T00:00:00Z"));
        write
            .attempts
            .insert("b".into(), json!({"count": 1, "token": "t"}));
        let planned = plan_status_write(&view, &write, Timestamp::from_unix(0)).unwrap();
        let paths: Vec<&str> = planned
            .ops
            .iter()
            .map(|op| op["path"].as_str().unwrap())
            .collect();
        assert_eq!(
            paths,
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

    #[test]
    fn the_projected_size_is_the_patched_json_plus_new_ownership_records() {
        let object =
            live(json!({"initialized": true, "entries": {}, "summary": {}, "conditions": []}));
        let view = View::new(&object).unwrap();
        let mut write = StatusWrite::default();
        let value = entry("ok", "2026-01-01T00:00:00Z");
        write.entries.insert("new-one".into(), value.clone());
        let planned = plan_status_write(&view, &write, Timestamp::from_unix(0)).unwrap();
        let mut projected = object.clone();
        apply(&mut projected, &planned.ops).unwrap();
        assert_eq!(projected["status"]["entries"]["new-one"], value);
        let ownership = planned.would_be_bytes - json_size(&projected);
        let expected =
            r#","f:new-one":{".":{}},"f:state":{},"f:at":{},"f:attempts":{}"#.len() as u64;
        assert_eq!(ownership, expected);

        // Replacing a stored entry adds only the fields it did not have.
        let object = live(
            json!({"initialized": true, "entries": {"a": entry("ok", "2026-01-01T00:00:00Z")}}),
        );
        let view = View::new(&object).unwrap();
        let mut write = StatusWrite::default();
        write
            .entries
            .insert("a".into(), entry("failed", "2026-01-01T00:00:00Z"));
        let planned = plan_status_write(&view, &write, Timestamp::from_unix(0)).unwrap();
        let mut projected = object.clone();
        apply(&mut projected, &planned.ops).unwrap();
        let ownership = planned.would_be_bytes - json_size(&projected);
        assert_eq!(ownership, r#","f:reason":{},"f:message":{}"#.len() as u64);
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

    #[test]
    fn a_condition_keeps_its_transition_time_while_its_status_holds() {
        let mut conditions = vec![json!({"type": "Other", "status": "True"})];
        let t0 = Timestamp::from_unix(100);
        let t1 = Timestamp::from_unix(200);
        upsert_condition(
            &mut conditions,
            json!({"type": "Ready", "status": "True", "reason": "A"}),
            t0,
        );
        upsert_condition(
            &mut conditions,
            json!({"type": "Ready", "status": "True", "reason": "B"}),
            t1,
        );
        assert_eq!(conditions.len(), 2);
        assert_eq!(conditions[1]["reason"], "B");
        assert_eq!(conditions[1]["lastTransitionTime"], t0.to_string());
        upsert_condition(
            &mut conditions,
            json!({"type": "Ready", "status": "False", "reason": "C"}),
            t1,
        );
        assert_eq!(conditions[1]["lastTransitionTime"], t1.to_string());
        assert_eq!(
            conditions[0],
            json!({"type": "Other", "status": "True"}),
            "others untouched"
        );
    }
}
