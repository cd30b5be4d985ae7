//! The stored object read piece by piece, and the status writes computed
//! from it.
//!
//! Everything here works on the object's JSON as the API server returned it,
//! never on the typed [`crate::MigrationLedger`]: a typed decode is all or
//! nothing, and one bad value must stay one corrupt record.

use migration_core::entry::{ContextIndex, Contexts};
use migration_core::keys;
use migration_core::last_failure::LastFailure;
use migration_core::ledger::{AttemptMark, LegacyVersion};
use migration_core::{CorruptEntry, LedgerEntry, LedgerSnapshot, Record, Slug};
use serde_json::{Map, Value};

mod tally;
mod write;

pub(crate) use write::{PlannedWrite, StatusWrite, plan_status_write};

/// The annotation the engine puts on an object it creates for a fresh
/// install. Together with `status.initialized` it tells a seeding still in
/// progress (absent) from a ledger someone else declared (present).
pub const CREATED_BY_ANNOTATION: &str = "migrations.cozystack.io/created-by";

/// The value of [`CREATED_BY_ANNOTATION`]: the engine, named as its writes
/// name it.
pub const CREATED_BY: &str = migration_kube::defaults::FIELD_MANAGER;

/// The condition type every status write maintains.
pub const READY: &str = "Ready";

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
    failures: Option<&'a Map<String, Value>>,
    contexts: Option<&'a Map<String, Value>>,
    /// `status.lock` as stored, decoded only when a lock decision needs it.
    lock: Option<&'a Value>,
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
        // The last failures are informational: a `failures` that is not a
        // map is reported as one unreadable key, never the whole ledger.
        let failures = match status.and_then(|s| s.get("failures")) {
            Some(Value::Object(map)) => Some(map),
            _ => None,
        };
        let contexts = map_field("contexts")?;
        let lock = status.and_then(|s| s.get("lock")).filter(|v| !v.is_null());
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
            failures,
            contexts,
            lock,
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
            && empty(self.failures)
            && empty(self.contexts)
        {
            Lifecycle::Seeding
        } else {
            Lifecycle::Live
        }
    }

    pub(crate) fn resource_version(&self) -> Option<&'a str> {
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

    /// The stored shared records, parsed, for resolving entries.
    pub(crate) fn contexts(&self) -> Contexts {
        let mut contexts = Contexts::default();
        for (id, value) in self.contexts.into_iter().flatten() {
            contexts.insert_value(id, value);
        }
        contexts
    }

    /// The stored shared records by their stored text, for filing new ones.
    pub(crate) fn context_index(&self) -> ContextIndex {
        let mut index = ContextIndex::default();
        for (id, value) in self.contexts.into_iter().flatten() {
            index.observe(id, &value.to_string());
        }
        index
    }

    /// The stored shared records as stored.
    pub(crate) fn stored_contexts(&self) -> Option<&'a Map<String, Value>> {
        self.contexts
    }

    /// Whether a last failure of `slug` is stored.
    pub(crate) fn has_failure(&self, slug: &Slug) -> bool {
        self.failures.is_some_and(|f| f.contains_key(slug.as_str()))
    }

    /// The stored last failure of `slug`, if any.
    pub(crate) fn failure(&self, slug: &Slug) -> Option<&'a Value> {
        self.failures.and_then(|f| f.get(slug.as_str()))
    }

    /// `status.lock` as stored, if any.
    pub(crate) fn lock(&self) -> Option<&'a Value> {
        self.lock
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
        let contexts = self.contexts();
        for (id, value) in self.contexts.into_iter().flatten() {
            if !migration_core::entry::context::valid_id(id) {
                snapshot.unreadable_keys.push(CorruptEntry::new(
                    &keys::context_key(id),
                    &raw_text(value),
                    "the key is not an id (1 to 32 lowercase letters and digits)".to_owned(),
                ));
            }
        }
        snapshot
            .unreadable_keys
            .extend(contexts.unreadable().cloned());
        for (key, value) in self.entries.into_iter().flatten() {
            let ledger_key = keys::entry_key(key);
            match Slug::parse(key) {
                Ok(slug) => {
                    let decoded = LedgerEntry::from_value_in(&ledger_key, value.clone(), &contexts);
                    snapshot.records.insert(slug, Record::decoded(decoded));
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
        if let Some(other) = self
            .status
            .and_then(|s| s.get("failures"))
            .filter(|v| !v.is_null() && !v.is_object())
        {
            snapshot.unreadable_keys.push(CorruptEntry::new(
                "status.failures",
                &raw_text(other),
                format!("status.failures is {}, not a map", kind_of(other)),
            ));
        }
        for (key, value) in self.failures.into_iter().flatten() {
            let failure_key = keys::failure_key(key);
            match Slug::parse(key) {
                Ok(slug) => match LastFailure::from_value(&failure_key, value) {
                    Ok(failure) => {
                        snapshot.failures.insert(slug, failure);
                    }
                    Err(corrupt) => snapshot.unreadable_keys.push(corrupt),
                },
                Err(e) => snapshot.unreadable_keys.push(CorruptEntry::new(
                    &failure_key,
                    &raw_text(value),
                    format!("the key is not a slug: {e}"),
                )),
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

/// A stored entry as the API server returns it, for the state modules' unit tests.
#[cfg(test)]
pub(crate) fn test_entry(state: &str, at: &str) -> Value {
    let mut e = serde_json::json!({"state": state, "at": at, "attempts": 1});
    if state == "failed" {
        e["reason"] = serde_json::json!("exit-status-1");
        e["message"] = serde_json::json!("tail");
    }
    e
}
