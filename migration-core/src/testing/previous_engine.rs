//! The entry decoder of the engine before the compact form, frozen as of
//! commit e5c2eda (`migration-core/src/entry.rs` and `ledger.rs`): what a
//! downgraded engine does with what this one writes (CONTRACT.md §5.2), and
//! the baseline the `entry` bench compares decoding with. Its rules are
//! the old ones; what it decodes into is today's [`LedgerEntry`], whose
//! fields are the old entry's (the old engine kept no others).

use serde::Deserialize;
use serde::de::{self, DeserializeSeed, MapAccess, Visitor};
use serde_json::{Map, Value};

use crate::{EntryState, LedgerEntry};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AttemptMark {
    pub count: u32,
    pub token: String,
}

pub fn decode(raw: &str) -> Result<LedgerEntry, String> {
    let mut d = serde_json::Deserializer::from_str(raw);
    EntryVisitor
        .deserialize(&mut d)
        .and_then(|entry| d.end().map(|()| entry))
        .map_err(|e| e.to_string())
}

pub fn decode_mark(raw: &str) -> Result<AttemptMark, String> {
    serde_json::from_str(raw).map_err(|e| e.to_string())
}

struct EntryVisitor;

impl<'de> DeserializeSeed<'de> for EntryVisitor {
    type Value = LedgerEntry;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<LedgerEntry, D::Error> {
        d.deserialize_map(self)
    }
}

fn set_once<T, E: de::Error>(slot: &mut Option<T>, key: &str, value: T) -> Result<(), E> {
    if slot.is_some() {
        return Err(E::custom(format!("duplicate field '{key}'")));
    }
    *slot = Some(value);
    Ok(())
}

impl<'de> Visitor<'de> for EntryVisitor {
    type Value = LedgerEntry;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a ledger entry object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<LedgerEntry, A::Error> {
        let (mut state, mut at, mut sha256, mut lib_sha256) = (None, None, None, None);
        let (mut batch, mut image, mut attempts) = (None, None, None);
        let (mut reason, mut message): (Option<String>, Option<String>) = (None, None);
        let mut extra = Map::new();
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
        let state: EntryState = state.ok_or_else(|| de::Error::missing_field("state"))?;
        let at = at.ok_or_else(|| de::Error::missing_field("at"))?;
        if state.needs_reason() && (reason.is_none() || message.is_none()) {
            return Err(de::Error::custom(format!(
                "a {state} entry must carry 'reason'"
            )));
        }
        Ok(LedgerEntry {
            state,
            at,
            sha256,
            lib_sha256,
            batch,
            image,
            attempts: attempts.unwrap_or(0),
            // It checked the reason and message (above), and kept neither.
            reason: None,
            message: None,
            extra: extra.into(),
        })
    }
}

/// What the key layout of the engine before the last failure (commit
/// 51588ca, `migration-core/src/keys.rs`) makes of a stored key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Key {
    /// `version`.
    Version,
    /// `m.<…>`.
    Entry,
    /// `a.<…>`.
    Attempt,
    /// `c.<…>`.
    Context,
    /// Anything else: another owner's data, never read, never written.
    Foreign,
}

/// The older engine's `keys::parse`, reduced to the kind of key (its
/// readers, `LedgerSnapshot::from_raw_data` and the journal's snapshot
/// builder, skip a [`Key::Foreign`] key without looking at its value).
pub fn parse_key(key: &str) -> Key {
    if key == "version" {
        Key::Version
    } else if key.starts_with("m.") {
        Key::Entry
    } else if key.starts_with("a.") {
        Key::Attempt
    } else if key.starts_with("c.") {
        Key::Context
    } else {
        Key::Foreign
    }
}
