//! Ledger entries: the JSON record kept per slug (CONTRACT.md §5), its two
//! stored forms (CONTRACT.md §5.2) and the shared records compact entries name
//! ([`context`]).

mod codec;
pub mod context;
mod extra;

use serde_json::Value;

use crate::digest::Sha256Digest;
use crate::time::Timestamp;

use codec::{COMPACT_FIELDS, Compact, FULL_FIELDS, Fields, Full};
pub use context::{
    Context, ContextIndex, Contexts, PlaceContext, Placement, SharedRecord, StoredSize,
};
pub use extra::Extra;

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

spelled!(EntryState, String, |s: &str| format!("unknown state {s:?}"));

/// One ledger record.
///
/// What an entry says, whichever of its two stored forms (CONTRACT.md §5.2)
/// it was read from: the full form
/// `{"state":"ok","at":"…","sha256":"…","lib_sha256":"…","batch":"…","image":"…","attempts":1}`
/// ([`LedgerEntry::encode`], serde's view), or the compact form
/// `{"s":"ok","t":"…","h":"…","c":"2","n":1}` whose `image`, `lib_sha256` and
/// `batch` are in the shared record `c` names ([`LedgerEntry::stored`]), with
/// the reason and message for `failed` and `not-yet`. Optional fields are
/// omitted when unknown (a `legacy` entry has no checksum). Fields this
/// version does not know are kept in [`LedgerEntry::extra`] and written back
/// unchanged, so an older engine never strips what a newer one recorded.
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
    /// Fields this version does not know, preserved verbatim (a map; see
    /// [`Extra`]).
    pub extra: Extra,
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
            extra: Extra::new(),
        }
    }

    /// Encodes the entry in the full form, self-contained (CONTRACT.md §5.2):
    /// what `migrate status` shows and what any engine reads.
    pub fn encode(&self) -> String {
        // Serialising our own types into a String cannot fail; the fallback
        // exists only to avoid a panic path.
        serde_json::to_string(self)
            .unwrap_or_else(|e| format!("{{\"encode-error\":{:?}}}", e.to_string()))
    }

    /// Encodes the entry in the compact form, its shared fields left to the
    /// record `context` names (`None`: no record; the entry then has no
    /// image, `lib/` digest or batch).
    pub fn encode_compact(&self, context: Option<&str>) -> String {
        serde_json::to_string(&Compact {
            entry: self,
            context,
        })
        .unwrap_or_else(|e| format!("{{\"encode-error\":{:?}}}", e.to_string()))
    }

    /// The compact form as a JSON value (for backends that store objects).
    pub fn compact_value(&self, context: Option<&str>) -> Value {
        serde_json::to_value(Compact {
            entry: self,
            context,
        })
        .unwrap_or(Value::Null)
    }

    /// True when the compact form can hold this entry: no unknown field
    /// carries a name of either form (an unknown `n` kept from a full-form
    /// entry would read back as the attempt count). Otherwise the entry is
    /// stored in the full form.
    pub fn fits_compact(&self) -> bool {
        !self
            .extra
            .keys()
            .any(|k| COMPACT_FIELDS.contains(&k.as_str()) || FULL_FIELDS.contains(&k.as_str()))
    }

    /// How this entry is stored by a backend that writes new entries: the
    /// compact form naming its shared record, placed in `index` (with the
    /// record to store beside it when it is new), or the full form when the
    /// compact one cannot hold it.
    pub fn stored(&self, index: &mut impl PlaceContext) -> StoredEntry {
        if !self.fits_compact() {
            return StoredEntry {
                value: self.encode(),
                contexts: Vec::new(),
            };
        }
        let placed = Context::of(self).map(|c| index.place(&c));
        let value = self.encode_compact(placed.as_ref().map(|p| p.id.as_str()));
        StoredEntry {
            value,
            contexts: placed.map(|p| p.new_records).unwrap_or_default(),
        }
    }

    /// Decodes a self-contained stored value: the full form, or a compact
    /// one that names no shared record. Anything that is not a well-formed
    /// entry is [`CorruptEntry`] naming `key`: never "absent", never
    /// "present".
    pub fn decode(key: &str, raw: &str) -> Result<Self, CorruptEntry> {
        Self::decode_in(key, raw, Contexts::none())
    }

    /// Decodes a stored value of either form, resolving a compact entry's
    /// shared record in `contexts`; a reference to a record that is missing
    /// or unreadable makes the entry corrupt, naming both keys.
    pub fn decode_in(key: &str, raw: &str, contexts: &Contexts) -> Result<Self, CorruptEntry> {
        // What every engine before the compact form wrote starts so: read it
        // straight into typed fields (the general path files every field
        // first, which costs a quarter more).
        if raw.starts_with(r#"{"state":"#) {
            return serde_json::from_str::<Full>(raw)
                .map(|full| full.0)
                .map_err(|e| CorruptEntry::new(key, raw, e.to_string()));
        }
        serde_json::from_str::<Fields>(raw)
            .map_err(|e| e.to_string())
            .and_then(|fields| fields.into_entry(contexts))
            .map_err(|reason| CorruptEntry::new(key, raw, reason))
    }

    /// Decodes an already-parsed JSON value (for backends that store typed
    /// objects), self-contained as for [`LedgerEntry::decode`].
    pub fn from_value(key: &str, value: Value) -> Result<Self, CorruptEntry> {
        Self::from_value_in(key, value, Contexts::none())
    }

    /// Decodes an already-parsed JSON value, resolving shared records in
    /// `contexts` as [`LedgerEntry::decode_in`] does.
    pub fn from_value_in(
        key: &str,
        value: Value,
        contexts: &Contexts,
    ) -> Result<Self, CorruptEntry> {
        match value {
            Value::Object(map) => Fields::of_map(map.clone())
                .into_entry(contexts)
                .map_err(|reason| CorruptEntry::new(key, &Value::Object(map).to_string(), reason)),
            other => {
                let reason = serde_json::from_value::<Fields>(other.clone())
                    .err()
                    .map_or_else(|| "not an object".to_owned(), |e| e.to_string());
                Err(CorruptEntry::new(key, &other.to_string(), reason))
            }
        }
    }
}

/// The `key → value` data that stores `entries` in a new flat ledger (a
/// ConfigMap's `data`, as `migrate seed-fresh --render` prints it): each
/// entry in its stored form under `m.<slug>`, and the shared records they
/// name under `c.<id>`. A slug given twice keeps its last entry.
pub fn flat_data<'a>(
    entries: impl IntoIterator<Item = (&'a crate::Slug, &'a LedgerEntry)>,
) -> std::collections::BTreeMap<String, String> {
    let mut index = ContextIndex::default();
    let mut data = std::collections::BTreeMap::new();
    for (slug, entry) in entries {
        let stored = entry.stored(&mut index);
        for (id, text) in stored.contexts {
            data.insert(crate::keys::context_key(id), text);
        }
        data.insert(crate::keys::entry_key(slug), stored.value);
    }
    data
}

/// How one entry is stored (see [`LedgerEntry::stored`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredEntry {
    /// The entry's stored value.
    pub value: String,
    /// New shared records to store in the same write: id (key `c.<id>`)
    /// and text of each.
    pub contexts: Vec<(String, String)>,
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
    fn an_entry_takes_at_most_192_bytes_inline() {
        // A snapshot holds one per migration (10^5 and more): the unknown
        // fields, nearly always none, are one pointer (they were a 72-byte
        // map, and the entry 256 bytes).
        assert!(
            std::mem::size_of::<LedgerEntry>() <= 192,
            "{}",
            std::mem::size_of::<LedgerEntry>()
        );
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
