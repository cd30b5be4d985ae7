//! The two stored forms of an entry (CONTRACT.md §5.2) and the one decoder
//! that reads both.
//!
//! - The **full** form, `{"state":…,"at":…,"sha256":…,"lib_sha256":…,"batch":…,"image":…,"attempts":…}`,
//!   is self-contained. Every entry written before the compact form existed
//!   is in it, and it is what [`LedgerEntry::encode`] produces.
//! - The **compact** form, `{"s":…,"t":…,"h":…,"c":…,"n":…}`, names what the
//!   entries of a run share (`image`, `lib_sha256`, `batch`) by the id of a
//!   shared record (`c.<id>`, [`super::context`]). Its state field is `s`, not
//!   `state`, on purpose: an engine that predates it finds no `state` and
//!   reports the entry corrupt, so a downgrade refuses instead of reading an
//!   entry whose image, `lib/` digest and batch it cannot see.
//!
//! The form is told by the state field's name; a value carrying both names
//! is ambiguous and corrupt.

use std::fmt;

use serde::de::{self, DeserializeOwned, MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

use crate::digest::Sha256Digest;
use crate::time::Timestamp;

use super::context::{Context, Contexts};
use super::{EntryState, LedgerEntry};

/// Field names of the full form, in the order they are written.
pub(super) const FULL_FIELDS: [&str; 9] = [
    "state",
    "at",
    "sha256",
    "lib_sha256",
    "batch",
    "image",
    "attempts",
    "reason",
    "message",
];

/// Field names of the compact form, in the order they are written: state,
/// time (`at`), hash (the script's SHA-256), context id, number of attempts,
/// reason, message.
pub(super) const COMPACT_FIELDS: [&str; 7] = ["s", "t", "h", "c", "n", "r", "m"];

const F_STATE: usize = 0;
const F_AT: usize = 1;
const F_SHA: usize = 2;
const F_LIB: usize = 3;
const F_BATCH: usize = 4;
const F_IMAGE: usize = 5;
const F_ATTEMPTS: usize = 6;
const F_REASON: usize = 7;
const F_MESSAGE: usize = 8;

const C_STATE: usize = 0;
const C_AT: usize = 1;
const C_SHA: usize = 2;
const C_CONTEXT: usize = 3;
const C_ATTEMPTS: usize = 4;
const C_REASON: usize = 5;
const C_MESSAGE: usize = 6;

/// An entry's fields as read, before its form is known. Known names are
/// kept as raw values so that a compact-form name inside a full-form entry
/// (an unknown field there) goes back to `extra` untouched.
#[derive(Debug, Default)]
pub(super) struct Fields {
    full: [Option<Value>; 9],
    compact: [Option<Value>; 7],
    extra: Map<String, Value>,
}

fn duplicate(key: &str) -> String {
    format!("duplicate field '{key}'")
}

impl Fields {
    /// Files one field; a key seen twice is ambiguous (which value is the
    /// truth?) and refused, known or not.
    fn put(&mut self, key: String, value: Value) -> Result<(), String> {
        let slot = if let Some(i) = FULL_FIELDS.iter().position(|f| *f == key) {
            &mut self.full[i]
        } else if let Some(i) = COMPACT_FIELDS.iter().position(|f| *f == key) {
            &mut self.compact[i]
        } else {
            return match self.extra.insert(key.clone(), value) {
                Some(_) => Err(duplicate(&key)),
                None => Ok(()),
            };
        };
        if slot.is_some() {
            return Err(duplicate(&key));
        }
        *slot = Some(value);
        Ok(())
    }

    /// The fields of an already-parsed object (a custom resource's value).
    pub(super) fn of_map(map: Map<String, Value>) -> Self {
        let mut fields = Fields::default();
        for (key, value) in map {
            // A map has no duplicate keys.
            let _ = fields.put(key, value);
        }
        fields
    }

    /// The entry these fields make, resolving a compact entry's context id
    /// in `contexts`. `Err` says why it is corrupt.
    pub(super) fn into_entry(self, contexts: &Contexts) -> Result<LedgerEntry, String> {
        let full = self.full[F_STATE].is_some();
        let compact = self.compact[C_STATE].is_some();
        match (full, compact) {
            (true, true) => Err("both 'state' and 's': the form is ambiguous".to_owned()),
            (false, true) => self.compact_entry(contexts),
            _ => self.full_entry(),
        }
    }

    fn full_entry(self) -> Result<LedgerEntry, String> {
        let [
            state,
            at,
            sha256,
            lib,
            batch,
            image,
            attempts,
            reason,
            message,
        ] = self.full;
        let mut extra = self.extra;
        // In the full form the compact names are unknown fields, kept as
        // they were (an old entry decodes exactly as it always did).
        for (name, value) in COMPACT_FIELDS.iter().zip(self.compact) {
            if let Some(value) = value {
                extra.insert((*name).to_owned(), value);
            }
        }
        finish(Parts {
            state: state.ok_or("missing field `state`")?,
            at: at.ok_or("missing field `at`")?,
            sha256,
            lib_sha256: typed(lib)?,
            batch: typed(batch)?,
            image: typed(image)?,
            attempts,
            reason,
            message,
            extra,
        })
    }

    fn compact_entry(self, contexts: &Contexts) -> Result<LedgerEntry, String> {
        if let Some(i) = self.full.iter().position(Option::is_some) {
            return Err(format!(
                "a compact entry ('s') must not carry the full-form field '{}'",
                FULL_FIELDS[i]
            ));
        }
        let [state, at, sha256, context, attempts, reason, message] = self.compact;
        let context = match typed::<String>(context)? {
            Some(id) => contexts.resolve(&id)?,
            None => Context::default(),
        };
        finish(Parts {
            state: state.ok_or("missing field `s`")?,
            at: at.ok_or("missing field `t`")?,
            sha256,
            lib_sha256: context.lib_sha256,
            batch: context.batch,
            image: context.image,
            attempts,
            reason,
            message,
            extra: self.extra,
        })
    }
}

/// The fields of either form, with the context already resolved.
struct Parts {
    state: Value,
    at: Value,
    sha256: Option<Value>,
    lib_sha256: Option<crate::Sha256Digest>,
    batch: Option<String>,
    image: Option<String>,
    attempts: Option<Value>,
    reason: Option<Value>,
    message: Option<Value>,
    extra: Map<String, Value>,
}

fn typed<T: DeserializeOwned>(value: Option<Value>) -> Result<Option<T>, String> {
    value
        .map(|v| T::deserialize(v).map_err(|e| e.to_string()))
        .transpose()
}

fn finish(parts: Parts) -> Result<LedgerEntry, String> {
    let state: String = typed(Some(parts.state))?.unwrap_or_default();
    let state = state.parse::<EntryState>()?;
    let reason: Option<String> = typed(parts.reason)?;
    let message: Option<String> = typed(parts.message)?;
    if state.needs_reason() {
        if reason.is_none() {
            return Err(format!("a {state} entry must carry 'reason'"));
        }
        if message.is_none() {
            return Err(format!("a {state} entry must carry 'message'"));
        }
    }
    Ok(LedgerEntry {
        state,
        at: typed(Some(parts.at))?.ok_or("missing field `at`")?,
        sha256: typed(parts.sha256)?,
        lib_sha256: parts.lib_sha256,
        batch: parts.batch,
        image: parts.image,
        attempts: typed(parts.attempts)?.unwrap_or(0),
        reason,
        message,
        extra: parts.extra.into(),
    })
}

/// Reads a JSON object into [`Fields`], refusing duplicate keys.
struct FieldsVisitor;

impl<'de> Deserialize<'de> for Fields {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(FieldsVisitor)
    }
}

impl<'de> Visitor<'de> for FieldsVisitor {
    type Value = Fields;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a ledger entry object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Fields, A::Error> {
        let mut fields = Fields::default();
        while let Some(key) = map.next_key::<String>()? {
            let value: Value = map.next_value()?;
            fields.put(key, value).map_err(de::Error::custom)?;
        }
        Ok(fields)
    }
}

/// Writes `value` under `key` when there is one: both stored forms leave a
/// field with no value out.
fn put_some<M: SerializeMap, T: Serialize + ?Sized>(
    map: &mut M,
    key: &str,
    value: Option<&T>,
) -> Result<(), M::Error> {
    match value {
        Some(value) => map.serialize_entry(key, value),
        None => Ok(()),
    }
}

/// Ends the map of `entry` in either stored form: the failure fields under
/// that form's `reason` and `message` keys, then the fields this version
/// does not know, unchanged.
fn end_map<M: SerializeMap>(
    mut map: M,
    entry: &LedgerEntry,
    [reason, message]: [&str; 2],
) -> Result<M::Ok, M::Error> {
    put_some(&mut map, reason, entry.reason.as_ref())?;
    put_some(&mut map, message, entry.message.as_ref())?;
    for (k, v) in &entry.extra {
        map.serialize_entry(k, v)?;
    }
    map.end()
}

/// The full form (serde's view of a [`LedgerEntry`]).
impl Serialize for LedgerEntry {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry(FULL_FIELDS[F_STATE], self.state.as_str())?;
        map.serialize_entry(FULL_FIELDS[F_AT], &self.at)?;
        put_some(&mut map, FULL_FIELDS[F_SHA], self.sha256.as_ref())?;
        put_some(&mut map, FULL_FIELDS[F_LIB], self.lib_sha256.as_ref())?;
        put_some(&mut map, FULL_FIELDS[F_BATCH], self.batch.as_ref())?;
        put_some(&mut map, FULL_FIELDS[F_IMAGE], self.image.as_ref())?;
        map.serialize_entry(FULL_FIELDS[F_ATTEMPTS], &self.attempts)?;
        end_map(map, self, [FULL_FIELDS[F_REASON], FULL_FIELDS[F_MESSAGE]])
    }
}

/// The compact form of an entry whose shared fields are in the record
/// `context` names (`None`: it has none).
pub(super) struct Compact<'a> {
    pub(super) entry: &'a LedgerEntry,
    pub(super) context: Option<&'a str>,
}

impl Serialize for Compact<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let e = self.entry;
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry(COMPACT_FIELDS[C_STATE], e.state.as_str())?;
        map.serialize_entry(COMPACT_FIELDS[C_AT], &e.at)?;
        put_some(&mut map, COMPACT_FIELDS[C_SHA], e.sha256.as_ref())?;
        put_some(&mut map, COMPACT_FIELDS[C_CONTEXT], self.context)?;
        // Zero is what a missing count reads as, so it is left out.
        if e.attempts != 0 {
            map.serialize_entry(COMPACT_FIELDS[C_ATTEMPTS], &e.attempts)?;
        }
        end_map(
            map,
            e,
            [COMPACT_FIELDS[C_REASON], COMPACT_FIELDS[C_MESSAGE]],
        )
    }
}

/// A full-form entry decoded by [`FullVisitor`].
pub(super) struct Full(pub(super) LedgerEntry);

impl<'de> Deserialize<'de> for Full {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(FullVisitor).map(Full)
    }
}

/// The full form read straight into typed fields: the common case of a
/// ledger written before the compact form, kept as fast as it was.
struct FullVisitor;

fn set_once<T, E: de::Error>(slot: &mut Option<T>, key: &str, value: T) -> Result<(), E> {
    if slot.is_some() {
        return Err(E::custom(format!("duplicate field '{key}'")));
    }
    *slot = Some(value);
    Ok(())
}

impl<'de> Visitor<'de> for FullVisitor {
    type Value = LedgerEntry;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a ledger entry object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<LedgerEntry, A::Error> {
        let mut state: Option<EntryState> = None;
        let mut at: Option<Timestamp> = None;
        let mut sha256: Option<Sha256Digest> = None;
        let mut lib_sha256: Option<Sha256Digest> = None;
        let mut batch: Option<String> = None;
        let mut image: Option<String> = None;
        let mut attempts: Option<u32> = None;
        let mut reason: Option<String> = None;
        let mut message: Option<String> = None;
        let mut extra = Map::new();
        // A key seen twice is ambiguous: which value is the truth? Refuse it,
        // including for unknown keys, rather than silently keep the last one.
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "state" => {
                    let raw: String = map.next_value()?;
                    let parsed = raw.parse::<EntryState>().map_err(de::Error::custom)?;
                    set_once(&mut state, &key, parsed)?;
                }
                "at" => set_once(&mut at, &key, map.next_value()?)?,
                "sha256" => set_once(&mut sha256, &key, map.next_value()?)?,
                "lib_sha256" => set_once(&mut lib_sha256, &key, map.next_value()?)?,
                "batch" => set_once(&mut batch, &key, map.next_value()?)?,
                "image" => set_once(&mut image, &key, map.next_value()?)?,
                "attempts" => set_once(&mut attempts, &key, map.next_value()?)?,
                "reason" => set_once(&mut reason, &key, map.next_value()?)?,
                "message" => set_once(&mut message, &key, map.next_value()?)?,
                _ => {
                    let value: Value = map.next_value()?;
                    if extra.insert(key.clone(), value).is_some() {
                        return Err(de::Error::custom(format!("duplicate field '{key}'")));
                    }
                }
            }
        }
        let state = state.ok_or_else(|| de::Error::missing_field("state"))?;
        let at = at.ok_or_else(|| de::Error::missing_field("at"))?;
        if state.needs_reason() {
            if reason.is_none() {
                return Err(de::Error::custom(format!(
                    "a {state} entry must carry 'reason'"
                )));
            }
            if message.is_none() {
                return Err(de::Error::custom(format!(
                    "a {state} entry must carry 'message'"
                )));
            }
        }
        if extra.contains_key(COMPACT_FIELDS[C_STATE]) {
            return Err(de::Error::custom(
                "both 'state' and 's': the form is ambiguous",
            ));
        }
        Ok(LedgerEntry {
            state,
            at,
            sha256,
            lib_sha256,
            batch,
            image,
            attempts: attempts.unwrap_or(0),
            reason,
            message,
            extra: extra.into(),
        })
    }
}
