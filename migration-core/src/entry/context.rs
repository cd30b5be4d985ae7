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

/// The fields entries share: what a compact entry's `c` resolves to.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Context {
    /// The manifest batch that placed the entries (informational).
    pub batch: Option<String>,
    /// The image reference the scripts ran from.
    pub image: Option<String>,
    /// Digest of `lib/` when they ran.
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

    /// How the engine stores it: the image and `lib/` digest (what a whole
    /// run shares) in one record, and the batch in a second one naming the
    /// first as its `base`, so that a run spanning many batches stores the
    /// long fields once. `(base, top)`: `base` is `None` when there is
    /// nothing to split.
    fn split(&self) -> (Option<SharedRecord>, SharedRecord) {
        let run = SharedRecord {
            base: None,
            batch: None,
            image: self.image.clone(),
            lib_sha256: self.lib_sha256,
        };
        match &self.batch {
            Some(batch) if self.image.is_some() || self.lib_sha256.is_some() => (
                Some(run),
                SharedRecord {
                    base: Some(String::new()),
                    batch: Some(batch.clone()),
                    image: None,
                    lib_sha256: None,
                },
            ),
            _ => (
                None,
                SharedRecord {
                    batch: self.batch.clone(),
                    ..run
                },
            ),
        }
    }
}

/// One stored shared record (`c.<id>`):
/// `{"base":"…","batch":"…","image":"…","lib_sha256":"…"}`, each field
/// omitted when unknown, in alphabetical order (so the stored text equals
/// what a JSON object map gives back). `base` names another record whose
/// fields this one adds to; that record must have no base of its own.
/// Unknown fields are refused: a newer engine's field could change what the
/// record means, and an entry naming a record this engine cannot fully read
/// is corrupt, never half-read.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SharedRecord {
    /// The id of the record this one adds to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base: Option<String>,
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

impl SharedRecord {
    /// Compact JSON, as stored.
    pub fn encode(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Parses a stored record; `Err` says why it is unreadable.
    pub fn decode(raw: &str) -> Result<SharedRecord, String> {
        serde_json::from_str(raw).map_err(|e| e.to_string())
    }

    /// Parses a stored record held as a JSON value (the custom resource).
    pub fn from_value(value: &Value) -> Result<SharedRecord, String> {
        SharedRecord::deserialize(value).map_err(|e| e.to_string())
    }
}

pub use crate::keys::valid_id;

/// The shared records of a ledger as read: each id with its record, or why
/// the record is unreadable. Entries are resolved against it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Contexts {
    records: BTreeMap<String, Result<SharedRecord, CorruptEntry>>,
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
        let record = SharedRecord::decode(raw)
            .map_err(|why| CorruptEntry::new(&keys::context_key(id), raw, why));
        self.records.insert(id.to_owned(), record);
    }

    /// Adds the record stored under id `id` as a JSON value.
    pub fn insert_value(&mut self, id: &str, value: &Value) {
        let record = SharedRecord::from_value(value)
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

    /// The stored record `id`; `Err` names its key and says why it cannot
    /// be used.
    fn record(&self, id: &str) -> Result<&SharedRecord, String> {
        let key = keys::context_key(id);
        match self.records.get(id) {
            Some(Ok(record)) => Ok(record),
            Some(Err(corrupt)) => Err(format!(
                "names the shared record '{key}', which is unreadable: {}",
                corrupt.reason
            )),
            None => Err(format!(
                "names the shared record '{key}', which does not exist"
            )),
        }
    }

    /// The fields the record `id` stands for, its base's included; `Err`
    /// (a dangling or unreadable reference, a base with a base, a field
    /// given twice) names the keys and says why.
    pub fn resolve(&self, id: &str) -> Result<Context, String> {
        let top = self.record(id)?;
        let mut context = Context {
            batch: top.batch.clone(),
            image: top.image.clone(),
            lib_sha256: top.lib_sha256,
        };
        let Some(base_id) = &top.base else {
            return Ok(context);
        };
        let key = keys::context_key(id);
        let base = self.record(base_id).map_err(|why| format!("{key} {why}"))?;
        let base_key = keys::context_key(base_id);
        if base.base.is_some() {
            return Err(format!(
                "names {key}, whose base {base_key} has a base of its own (one level only)"
            ));
        }
        let twice = |field: &str| {
            format!("names {key}, which gives '{field}' twice (itself and its base {base_key})")
        };
        fn merge<T: Clone>(
            slot: &mut Option<T>,
            from: &Option<T>,
            field: &str,
            twice: &dyn Fn(&str) -> String,
        ) -> Result<(), String> {
            match (slot.is_some(), from) {
                (true, Some(_)) => Err(twice(field)),
                (false, Some(v)) => {
                    *slot = Some(v.clone());
                    Ok(())
                }
                (_, None) => Ok(()),
            }
        }
        merge(&mut context.batch, &base.batch, "batch", &twice)?;
        merge(&mut context.image, &base.image, "image", &twice)?;
        merge(
            &mut context.lib_sha256,
            &base.lib_sha256,
            "lib_sha256",
            &twice,
        )?;
        Ok(context)
    }
}

/// Where an entry's shared fields are: the id of the record it names, and
/// the records to store beside the entry because they are new.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placed {
    /// The id the entry names.
    pub id: String,
    /// `(id, text)` of each record to store under `c.<id>` in the same
    /// write (a base before the record naming it).
    pub new_records: Vec<(String, String)>,
}

/// What files shared records for a write: a [`ContextIndex`] of its own,
/// or a [`Placement`] over a borrowed one.
pub trait PlaceContext {
    /// The id of the record stored with exactly `text`, or a new id for it
    /// (noted, so the next record with that text reuses it) and `true`.
    fn file(&mut self, text: String) -> (String, bool);

    /// The record holding `context`, with the new records it needs.
    fn place(&mut self, context: &Context) -> Placed {
        let mut new_records = Vec::new();
        let mut file = |record: &SharedRecord, this: &mut Self| {
            let text = record.encode();
            let (id, new) = this.file(text.clone());
            if new {
                new_records.push((id.clone(), text));
            }
            id
        };
        let (base, mut top) = context.split();
        if let Some(base) = base {
            top.base = Some(file(&base, self));
        }
        let id = file(&top, self);
        Placed { id, new_records }
    }
}

impl PlaceContext for ContextIndex {
    fn file(&mut self, text: String) -> (String, bool) {
        if let Some(id) = self.by_text.get(&text) {
            return (id.clone(), false);
        }
        let id = self.next.max(1);
        self.next = id + 1;
        self.by_text.insert(text, id.to_string());
        (id.to_string(), true)
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
    fn file(&mut self, text: String) -> (String, bool) {
        match self.stored.by_text.get(&text) {
            Some(id) => (id.clone(), false),
            None => self.added.file(text),
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
}

/// The longest id a shared record can get: `u64::MAX` in decimal.
const MAX_ID_LEN: usize = 20;

/// Upper bounds of what storing entries costs a ledger, each shared record
/// counted once: how a run follows its ledger's usage between reads, and
/// what it reserves before a script runs.
#[derive(Debug, Clone, Default)]
pub struct StoredSize {
    counted: std::collections::HashSet<String>,
}

impl StoredSize {
    /// The shared records `context` is stored as, with the longest ids.
    fn records(context: &Context) -> Vec<SharedRecord> {
        let id = "0".repeat(MAX_ID_LEN);
        let (base, mut top) = context.split();
        if top.base.is_some() {
            top.base = Some(id);
        }
        base.into_iter().chain([top]).collect()
    }

    /// The most bytes storing `entry` under `slug` can cost, `overhead`
    /// being what the backend adds per stored record: the entry's key and
    /// stored value with the longest id, plus each shared record it needs
    /// with its key, unless the same record was counted already.
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
        let records: u64 = context
            .iter()
            .flat_map(Self::records)
            .map(|r| r.encode())
            .filter(|text| !self.counted.contains(text))
            .map(|text| (keys::context_key(&id).len() + text.len()) as u64 + overhead)
            .sum();
        key + value + overhead + records
    }

    /// [`StoredSize::bytes`], then notes the entry's shared records as
    /// counted.
    pub fn count(&mut self, slug: &crate::Slug, entry: &LedgerEntry, overhead: u64) -> u64 {
        let bytes = self.bytes(slug, entry, overhead);
        if entry.fits_compact()
            && let Some(context) = Context::of(entry)
        {
            self.counted
                .extend(Self::records(&context).iter().map(SharedRecord::encode));
        }
        bytes
    }
}
