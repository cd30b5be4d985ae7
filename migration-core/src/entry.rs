//! Ledger entries: the JSON record kept per slug (CONTRACT.md §5).

use std::fmt;
use std::str::FromStr;

use serde::de::{self, MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

use crate::digest::Sha256Digest;
use crate::time::Timestamp;

/// The outcome recorded for a slug. All but [`EntryState::NotYet`] are
/// terminal (CONTRACT.md §5.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum EntryState {
    /// The script ran and exited 0.
    Ok,
    /// The script failed under `on-error=warn`, or the background tier gave up.
    Failed,
    /// Ran before the engine existed, per the legacy integer.
    Legacy,
    /// Revoked before it ran here; it will never run.
    Revoked,
    /// The cluster was installed fresh at a release that already included it.
    SkippedFreshInstall,
    /// Not done yet, and not terminal: the script said its preconditions are
    /// not met (exit status 75), or it waits for a requirement that did.
    /// The next run executes it again; `verify` fails while it remains.
    NotYet,
}

impl EntryState {
    /// Every state, for exhaustive tests and documentation.
    pub const ALL: [EntryState; 6] = [
        EntryState::Ok,
        EntryState::Failed,
        EntryState::Legacy,
        EntryState::Revoked,
        EntryState::SkippedFreshInstall,
        EntryState::NotYet,
    ];

    /// The JSON spelling.
    pub const fn as_str(self) -> &'static str {
        match self {
            EntryState::Ok => "ok",
            EntryState::Failed => "failed",
            EntryState::Legacy => "legacy",
            EntryState::Revoked => "revoked",
            EntryState::SkippedFreshInstall => "skipped-fresh-install",
            EntryState::NotYet => "not-yet",
        }
    }

    /// True when a slug recorded in this state never runs again except by
    /// `ONLY`: every state but `not-yet`, which the next run executes.
    pub const fn is_terminal(self) -> bool {
        !matches!(self, EntryState::NotYet)
    }

    /// True when the state carries `reason` and `message` (both required):
    /// `failed` and `not-yet`.
    pub const fn needs_reason(self) -> bool {
        matches!(self, EntryState::Failed | EntryState::NotYet)
    }

    /// True when the migration's effect is in place on this cluster, so that a
    /// slug requiring it may run: `ok`, `legacy`, and `skipped-fresh-install`
    /// (a fresh install starts from a state that already includes it).
    pub const fn satisfies_requirement(self) -> bool {
        matches!(
            self,
            EntryState::Ok | EntryState::Legacy | EntryState::SkippedFreshInstall
        )
    }
}

impl fmt::Display for EntryState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for EntryState {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        EntryState::ALL
            .into_iter()
            .find(|state| state.as_str() == s)
            .ok_or_else(|| format!("unknown state {s:?}"))
    }
}

/// One ledger record.
///
/// The JSON shape is exactly CONTRACT.md §5:
/// `{"state":"ok","at":"…","sha256":"…","lib_sha256":"…","batch":"…","image":"…","attempts":1}`,
/// with `reason` and `message` for `failed` and `not-yet`. Optional fields are omitted when
/// unknown (a `legacy` entry has no checksum). Fields this version does not
/// know are kept in [`LedgerEntry::extra`] and written back unchanged, so an
/// older engine never strips what a newer one recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LedgerEntry {
    /// The outcome.
    pub state: EntryState,
    /// When it was recorded.
    pub at: Timestamp,
    /// Checksum of the script that ran (or was on disk when seeded).
    pub sha256: Option<Sha256Digest>,
    /// Digest of `lib/` when it ran.
    pub lib_sha256: Option<Sha256Digest>,
    /// The manifest batch that placed it (informational).
    pub batch: Option<String>,
    /// The image reference the script ran from.
    pub image: Option<String>,
    /// Real executions of this slug on this cluster.
    pub attempts: u32,
    /// Machine-readable failure reason (`failed`, `not-yet`).
    pub reason: Option<String>,
    /// Human-readable failure detail, e.g. the output tail (`failed`, `not-yet`; an `ok` entry may carry one too).
    pub message: Option<String>,
    /// Fields this version does not know, preserved verbatim.
    pub extra: Map<String, Value>,
}

impl LedgerEntry {
    /// A bare entry in `state` at `at`; fill the rest with struct update syntax.
    pub fn new(state: EntryState, at: Timestamp) -> Self {
        LedgerEntry {
            state,
            at,
            sha256: None,
            lib_sha256: None,
            batch: None,
            image: None,
            attempts: 0,
            reason: None,
            message: None,
            extra: Map::new(),
        }
    }

    /// Encodes the entry as compact JSON, the form every backend stores.
    pub fn encode(&self) -> String {
        // Serialising our own types into a String cannot fail; the fallback
        // exists only to avoid a panic path.
        serde_json::to_string(self)
            .unwrap_or_else(|e| format!("{{\"encode-error\":{:?}}}", e.to_string()))
    }

    /// Decodes a stored value. Anything that is not a well-formed entry is
    /// [`CorruptEntry`] naming `key`: never "absent", never "present".
    pub fn decode(key: &str, raw: &str) -> Result<Self, CorruptEntry> {
        serde_json::from_str(raw).map_err(|e| CorruptEntry::new(key, raw, e.to_string()))
    }

    /// Decodes an already-parsed JSON value (for backends that store typed objects).
    pub fn from_value(key: &str, value: Value) -> Result<Self, CorruptEntry> {
        let raw = value.to_string();
        serde_json::from_value(value).map_err(|e| CorruptEntry::new(key, &raw, e.to_string()))
    }
}

/// A stored value that is not a valid entry. The engine refuses to act on the
/// slug it belongs to.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("ledger key '{key}' is corrupt: {reason} (value starts {excerpt:?})")]
pub struct CorruptEntry {
    /// The ledger key, e.g. `m.redis-fix`.
    pub key: String,
    /// Why it failed to parse.
    pub reason: String,
    /// The first characters of the stored value.
    pub excerpt: String,
}

impl CorruptEntry {
    /// Builds the record, cutting the raw value to a printable excerpt.
    pub fn new(key: &str, raw: &str, reason: String) -> Self {
        CorruptEntry {
            key: key.chars().take(200).collect(),
            reason,
            excerpt: raw.chars().take(120).collect(),
        }
    }
}

const KNOWN_FIELDS: [&str; 9] = [
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

impl Serialize for LedgerEntry {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("state", self.state.as_str())?;
        map.serialize_entry("at", &self.at)?;
        if let Some(d) = &self.sha256 {
            map.serialize_entry("sha256", d)?;
        }
        if let Some(d) = &self.lib_sha256 {
            map.serialize_entry("lib_sha256", d)?;
        }
        if let Some(b) = &self.batch {
            map.serialize_entry("batch", b)?;
        }
        if let Some(i) = &self.image {
            map.serialize_entry("image", i)?;
        }
        map.serialize_entry("attempts", &self.attempts)?;
        if let Some(r) = &self.reason {
            map.serialize_entry("reason", r)?;
        }
        if let Some(m) = &self.message {
            map.serialize_entry("message", m)?;
        }
        for (k, v) in &self.extra {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for LedgerEntry {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(EntryVisitor)
    }
}

struct EntryVisitor;

fn set_once<T, E: de::Error>(slot: &mut Option<T>, key: &str, value: T) -> Result<(), E> {
    if slot.is_some() {
        return Err(E::custom(format!("duplicate field '{key}'")));
    }
    *slot = Some(value);
    Ok(())
}

impl<'de> Visitor<'de> for EntryVisitor {
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
        debug_assert!(extra.keys().all(|k| !KNOWN_FIELDS.contains(&k.as_str())));
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
            extra,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHA: &str = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";

    fn ok_entry() -> LedgerEntry {
        LedgerEntry {
            sha256: Some(Sha256Digest::parse_hex(SHA).unwrap()),
            lib_sha256: Some(Sha256Digest::of(b"")),
            batch: Some("00001-v1.7.0".into()),
            image: Some("ghcr.io/x/migrations@sha256:abc".into()),
            attempts: 1,
            ..LedgerEntry::new(
                EntryState::Ok,
                Timestamp::parse("2026-08-12T10:04:00Z").unwrap(),
            )
        }
    }

    #[test]
    fn encodes_exactly_the_spec_shape_in_order() {
        let json = ok_entry().encode();
        assert_eq!(
            json,
            format!(
                "{{\"state\":\"ok\",\"at\":\"2026-08-12T10:04:00Z\",\"sha256\":\"{SHA}\",\"lib_sha256\":\"{}\",\"batch\":\"00001-v1.7.0\",\"image\":\"ghcr.io/x/migrations@sha256:abc\",\"attempts\":1}}",
                Sha256Digest::of(b"")
            )
        );
    }

    #[test]
    fn every_state_round_trips_by_name() {
        for state in EntryState::ALL {
            let mut entry = LedgerEntry::new(state, Timestamp::from_unix(0));
            if state.needs_reason() {
                entry.reason = Some("exit-status".into());
                entry.message = Some("tail".into());
            }
            let json = entry.encode();
            assert!(
                json.contains(&format!("\"state\":\"{}\"", state.as_str())),
                "{json}"
            );
            assert_eq!(LedgerEntry::decode("m.x", &json).unwrap(), entry);
        }
    }

    #[test]
    fn unknown_fields_survive_a_round_trip_byte_for_byte() {
        let raw = r#"{"state":"ok","at":"2026-08-12T10:04:00Z","attempts":2,"node":"n1","extra":{"a":[1,2]}}"#;
        let entry = LedgerEntry::decode("m.x", raw).unwrap();
        assert_eq!(entry.extra.len(), 2);
        assert_eq!(entry.encode(), raw);
    }

    #[test]
    fn failed_entry_without_reason_or_message_is_corrupt() {
        let err = LedgerEntry::decode(
            "m.x",
            r#"{"state":"failed","at":"2026-08-12T10:04:00Z","message":"m"}"#,
        )
        .unwrap_err();
        assert!(err.reason.contains("reason"), "{err}");
        let err = LedgerEntry::decode(
            "m.x",
            r#"{"state":"failed","at":"2026-08-12T10:04:00Z","reason":"r"}"#,
        )
        .unwrap_err();
        assert!(err.reason.contains("message"), "{err}");
    }

    #[test]
    fn corrupt_values_name_the_key_and_say_why() {
        let cases = [
            ("", "EOF"),
            ("{not json", "key must be a string"),
            ("[]", "expected a ledger entry object"),
            (r#"{"at":"2026-08-12T10:04:00Z"}"#, "missing field `state`"),
            (r#"{"state":"ok"}"#, "missing field `at`"),
            (
                r#"{"state":"done","at":"2026-08-12T10:04:00Z"}"#,
                "unknown state",
            ),
            (r#"{"state":"ok","at":"yesterday"}"#, "RFC 3339"),
            (
                r#"{"state":"ok","at":"2026-08-12T10:04:00Z","sha256":"ABC"}"#,
                "SHA-256",
            ),
            (
                r#"{"state":"ok","at":"2026-08-12T10:04:00Z","attempts":-1}"#,
                "invalid value",
            ),
            (
                r#"{"state":"ok","state":"failed","at":"2026-08-12T10:04:00Z"}"#,
                "duplicate field 'state'",
            ),
            (
                r#"{"state":"ok","at":"2026-08-12T10:04:00Z","x":1,"x":2}"#,
                "duplicate field 'x'",
            ),
            (
                r#"{"state":"ok","at":"2026-08-12T10:04:00Z"} trailing"#,
                "trailing characters",
            ),
        ];
        for (raw, why) in cases {
            let err = LedgerEntry::decode("m.redis-fix", raw).unwrap_err();
            assert_eq!(err.key, "m.redis-fix");
            assert!(err.reason.contains(why), "{raw:?}: {}", err.reason);
            assert!(err.to_string().contains("m.redis-fix"));
        }
    }

    #[test]
    fn attempts_defaults_to_zero_when_absent() {
        let entry = LedgerEntry::decode("m.x", r#"{"state":"legacy","at":"2026-08-12T10:04:00Z"}"#)
            .unwrap();
        assert_eq!(entry.attempts, 0);
    }

    #[test]
    fn from_value_agrees_with_decode() {
        let value: Value = serde_json::from_str(&ok_entry().encode()).unwrap();
        assert_eq!(LedgerEntry::from_value("m.x", value).unwrap(), ok_entry());
        let bad = serde_json::json!({"state": 3});
        assert_eq!(LedgerEntry::from_value("m.x", bad).unwrap_err().key, "m.x");
    }

    #[test]
    fn only_effective_states_satisfy_a_requirement() {
        let satisfying: Vec<_> = EntryState::ALL
            .into_iter()
            .filter(|s| s.satisfies_requirement())
            .collect();
        assert_eq!(
            satisfying,
            [
                EntryState::Ok,
                EntryState::Legacy,
                EntryState::SkippedFreshInstall
            ]
        );
    }
}
