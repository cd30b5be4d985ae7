//! Shared records: what the entries of a run repeat (the image, the `lib/`
//! digest, the batch), stored once per distinct value under `c.<id>` and
//! named by its id from each compact entry (CONTRACT.md §5.2).
//!
//! A shared record is never removed (no ledger operation deletes), and a new
//! one is only ever added beside the entries that name it, in the same
//! atomic write, so a reference can only dangle if someone edits the ledger
//! by hand; it then makes the entry corrupt, naming both keys.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::digest::Sha256Digest;
use crate::keys;

use super::{CorruptEntry, LedgerEntry};

/// The fields entries share, as one record stores them:
/// `{"batch":"…","image":"…","lib_sha256":"…"}` (alphabetical, so the
/// compact text equals what a JSON object map gives back). Unknown fields
/// are refused: a newer engine's field could change what the record means,
/// and an entry naming a record this engine cannot fully read is corrupt,
/// never half-read.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Context {
    /// The manifest batch that placed the entries (informational).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch: Option<String>,
    /// The image reference the scripts ran from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// Digest of `lib/` when they ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lib_sha256: Option<Sha256Digest>,
}

impl Context {
    /// The shared fields of `entry`, or `None` when it has none.
    pub fn of(entry: &LedgerEntry) -> Option<Context> {
        let context = Context {
            batch: entry.batch.clone(),
            image: entry.image.clone(),
            lib_sha256: entry.lib_sha256,
        };
        (context != Context::default()).then_some(context)
    }

    /// Compact JSON, as stored.
    pub fn encode(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Parses a stored record; `Err` says why it is unreadable.
    pub fn decode(raw: &str) -> Result<Context, String> {
        serde_json::from_str(raw).map_err(|e| e.to_string())
    }

    /// Parses a stored record held as a JSON value (the custom resource).
    pub fn from_value(value: &Value) -> Result<Context, String> {
        Context::deserialize(value).map_err(|e| e.to_string())
    }
}

/// Whether `id` may name a shared record: 1 to 32 lowercase ASCII letters
/// and digits (the engine allocates decimal numbers).
pub fn valid_id(id: &str) -> bool {
    (1..=32).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_digit() || b.is_ascii_lowercase())
}

/// The shared records of a ledger as read: each id with its record, or why
/// the record is unreadable. Entries are resolved against it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Contexts {
    records: BTreeMap<String, Result<Context, CorruptEntry>>,
}

impl Contexts {
    /// No shared records (a self-contained entry resolves against it).
    pub fn none() -> &'static Contexts {
        static NONE: Contexts = Contexts {
            records: BTreeMap::new(),
        };
        &NONE
    }

    /// Adds the record stored under id `id` as text.
    pub fn insert_raw(&mut self, id: &str, raw: &str) {
        let record = Context::decode(raw)
            .map_err(|why| CorruptEntry::new(&keys::context_key(id), raw, why));
        self.records.insert(id.to_owned(), record);
    }

    /// Adds the record stored under id `id` as a JSON value.
    pub fn insert_value(&mut self, id: &str, value: &Value) {
        let record = Context::from_value(value)
            .map_err(|why| CorruptEntry::new(&keys::context_key(id), &value.to_string(), why));
        self.records.insert(id.to_owned(), record);
    }

    /// Number of records, readable or not.
    pub fn len(&self) -> usize {
        self.records.len()
    }

    /// True when there is no record.
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// The unreadable records, each naming its key (`c.<id>`).
    pub fn unreadable(&self) -> impl Iterator<Item = &CorruptEntry> {
        self.records.values().filter_map(|r| r.as_ref().err())
    }

    /// The record `id` names; `Err` (a dangling or unreadable reference)
    /// names its key and says why.
    pub fn resolve(&self, id: &str) -> Result<&Context, String> {
        let key = keys::context_key(id);
        match self.records.get(id) {
            Some(Ok(context)) => Ok(context),
            Some(Err(corrupt)) => Err(format!(
                "names the shared record '{key}', which is unreadable: {}",
                corrupt.reason
            )),
            None => Err(format!(
                "names the shared record '{key}', which does not exist"
            )),
        }
    }
}

/// Where a writer files shared records: the ones stored (by their exact
/// stored text) and the next free id. A writer builds it from the object it
/// is about to change, so ids are decided against exactly what its
/// conditional write replaces.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ContextIndex {
    by_text: HashMap<String, String>,
    next: u64,
}

/// Where an entry's shared fields are: the id of the record, and the record
/// to store beside the entry when it is new.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placed {
    /// The id the entry names.
    pub id: String,
    /// `Some(text)` when the record must be stored under `c.<id>` in the
    /// same write.
    pub new_record: Option<String>,
}

/// What files shared records for a write: a [`ContextIndex`] of its own,
/// or a [`Placement`] over a borrowed one.
pub trait PlaceContext {
    /// The record holding `context`, allocated when new (see
    /// [`ContextIndex::place`]).
    fn place(&mut self, context: &Context) -> Placed;
}

impl PlaceContext for ContextIndex {
    fn place(&mut self, context: &Context) -> Placed {
        ContextIndex::place(self, context)
    }
}

/// New shared records planned over a stored [`ContextIndex`] without
/// copying it (a backend that keeps its index up to date plans each write
/// at the cost of the records it adds, not of the ledger).
#[derive(Debug)]
pub struct Placement<'a> {
    stored: &'a ContextIndex,
    added: ContextIndex,
}

impl<'a> Placement<'a> {
    /// Plans over `stored`.
    pub fn new(stored: &'a ContextIndex) -> Self {
        Placement {
            stored,
            added: ContextIndex {
                by_text: HashMap::new(),
                next: stored.next,
            },
        }
    }
}

impl PlaceContext for Placement<'_> {
    fn place(&mut self, context: &Context) -> Placed {
        match self.stored.by_text.get(&context.encode()) {
            Some(id) => Placed {
                id: id.clone(),
                new_record: None,
            },
            None => self.added.place(context),
        }
    }
}

impl ContextIndex {
    /// Notes a stored record (its id and stored text).
    pub fn observe(&mut self, id: &str, text: &str) {
        if let Ok(n) = id.parse::<u64>() {
            self.next = self.next.max(n.saturating_add(1));
        }
        self.by_text
            .entry(text.to_owned())
            .or_insert_with(|| id.to_owned());
    }

    /// The index of the `c.*` keys of flat data (keys sorted, as in a
    /// `BTreeMap`): only the shared records are visited.
    pub fn of_flat(data: &BTreeMap<String, String>) -> Self {
        let mut index = ContextIndex::default();
        let prefix = keys::CONTEXT_PREFIX;
        for (key, value) in data.range(prefix.to_owned()..) {
            let Some(id) = key.strip_prefix(prefix) else {
                break;
            };
            index.observe(id, value);
        }
        index
    }

    /// The record holding `context`: an existing one with exactly its text,
    /// or a new one under the next id (noted here, so the next entry of the
    /// same context reuses it).
    pub fn place(&mut self, context: &Context) -> Placed {
        let text = context.encode();
        if let Some(id) = self.by_text.get(&text) {
            return Placed {
                id: id.clone(),
                new_record: None,
            };
        }
        let id = self.next.max(1).to_string();
        self.next = self.next.max(1) + 1;
        self.by_text.insert(text.clone(), id.clone());
        Placed {
            id,
            new_record: Some(text),
        }
    }
}

/// The longest id a shared record can get: `u64::MAX` in decimal.
const MAX_ID_LEN: usize = 20;

/// Upper bounds of what storing entries costs a ledger, each shared record
/// counted once: how a run follows its ledger's usage between reads, and
/// what it reserves before a script runs.
#[derive(Debug, Clone, Default)]
pub struct StoredSize {
    counted: std::collections::HashSet<Context>,
}

impl StoredSize {
    /// The most bytes storing `entry` under `slug` can cost, `overhead`
    /// being what the backend adds per stored record: the entry's key and
    /// stored value with the longest id, plus its shared record with its key
    /// unless one with the same fields was counted already.
    pub fn bytes(&self, slug: &crate::Slug, entry: &LedgerEntry, overhead: u64) -> u64 {
        let key = keys::entry_key(slug).len() as u64;
        if !entry.fits_compact() {
            return key + entry.encode().len() as u64 + overhead;
        }
        let context = Context::of(entry);
        let id = "0".repeat(MAX_ID_LEN);
        let value = entry
            .encode_compact(context.as_ref().map(|_| id.as_str()))
            .len() as u64;
        let record = match context {
            Some(c) if !self.counted.contains(&c) => {
                (keys::context_key(&id).len() + c.encode().len()) as u64 + overhead
            }
            _ => 0,
        };
        key + value + overhead + record
    }

    /// [`StoredSize::bytes`], then notes the entry's shared record as
    /// counted.
    pub fn count(&mut self, slug: &crate::Slug, entry: &LedgerEntry, overhead: u64) -> u64 {
        let bytes = self.bytes(slug, entry, overhead);
        if entry.fits_compact()
            && let Some(context) = Context::of(entry)
        {
            self.counted.insert(context);
        }
        bytes
    }
}
