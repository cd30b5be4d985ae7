//! A snapshot built while a journal is replayed: each stored key is decoded
//! as it arrives, so the raw `key → string` data is never held whole.

use std::collections::BTreeMap;

use super::{AttemptMark, LedgerSnapshot, Record};
use crate::entry::{Contexts, LedgerEntry};
use crate::filling::FillingMap;
use crate::keys::{self, Key};
use crate::slug::Slug;

/// One entry's decoded record, or (when it did not decode against the
/// shared records known so far) its raw value, decoded again at the end
/// against the final ones. The stored value's length is kept for the size.
#[derive(Debug)]
struct Slot {
    record: Pending,
    value_bytes: u32,
}

#[derive(Debug)]
enum Pending {
    Decoded(Box<LedgerEntry>),
    Deferred(Box<str>),
}

/// Builds the [`LedgerSnapshot`] of a ledger whose keys arrive one write at
/// a time, later writes replacing earlier ones (a journal's replay), with
/// exactly the result of [`LedgerSnapshot::from_raw_data`] on the final
/// data, but without holding that data: an entry (`m.<slug>`) is decoded
/// when it is stored, and an attempt mark (`a.<slug>`) kept as its count.
/// Only the rare keys (`version`, shared records, keys that are not a
/// slug's, values that do not decode, other owners' keys) are kept raw.
///
/// An entry decoded against a shared record that a later write changes
/// would be stale; none of this engine's writers ever change one (a record
/// is written once, under a new id), so the builder then gives up
/// ([`SharedRecordRewritten`]) and the caller decodes the raw data instead.
#[derive(Debug, Default)]
pub struct SnapshotBuilder {
    records: FillingMap<Slug, Slot>,
    /// Count and stored value length of each readable attempt mark.
    attempts: FillingMap<Slug, (u32, u32)>,
    /// Every other key, raw.
    others: BTreeMap<String, String>,
    contexts: Contexts,
    rewritten: Option<String>,
    /// The slugs of the last two attempt marks stored: this engine writes
    /// a slug's mark one or two writes before its entry, so the entry
    /// finds its slug's shared text here without a search.
    last_marked: [Option<Slug>; 2],
}

/// A write changed a shared record after entries may have been decoded
/// against it: [`SnapshotBuilder`] cannot give the final data's snapshot.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the shared record 'c.{id}' was rewritten after entries naming it were read")]
pub struct SharedRecordRewritten {
    /// The record's id (its key is `c.<id>`).
    pub id: String,
}

fn len32(s: &str) -> u32 {
    u32::try_from(s.len()).unwrap_or(u32::MAX)
}

impl SnapshotBuilder {
    /// An empty ledger object.
    pub fn new() -> Self {
        SnapshotBuilder::default()
    }

    /// Stores `value` under `key`, replacing what the key held.
    pub fn put(&mut self, key: String, value: String) {
        match keys::parse(&key) {
            Key::Entry(Ok(slug)) => {
                let value_bytes = len32(&value);
                let record = match LedgerEntry::decode_in(&key, &value, &self.contexts) {
                    Ok(entry) => Pending::Decoded(Box::new(entry)),
                    Err(_) => Pending::Deferred(value.into_boxed_str()),
                };
                // A slug with an attempt mark shares the mark's copy of its
                // text, as in `from_raw_data` (`finish` shares the rest).
                let slug = match self.last_marked.iter().flatten().find(|m| **m == slug) {
                    Some(shared) => shared.clone(),
                    None => slug,
                };
                self.records.insert(
                    slug,
                    Slot {
                        record,
                        value_bytes,
                    },
                );
            }
            Key::Attempt(Ok(slug)) => match AttemptMark::decode(&key, &value) {
                Ok(mark) => {
                    self.others.remove(&key);
                    self.last_marked.rotate_left(1);
                    self.last_marked[1] = Some(slug.clone());
                    self.attempts.insert(slug, (mark.count, len32(&value)));
                }
                // Kept raw, so the final decoding reports it unreadable in
                // key order with the rest.
                Err(_) => {
                    self.attempts.remove(&slug);
                    self.others.insert(key, value);
                }
            },
            Key::Context(Ok(id)) => {
                let changed = self
                    .others
                    .get(&key)
                    .is_some_and(|old| *old != value && !self.records.is_empty());
                if changed && self.rewritten.is_none() {
                    self.rewritten = Some(id.clone());
                }
                self.contexts.insert_raw(&id, &value);
                self.others.insert(key, value);
            }
            // A cleared last failure is no key at all, as in the object
            // the journal's writer keeps.
            Key::Failure(_) if keys::is_clearing(&key, &value) => {
                self.others.remove(&key);
            }
            _ => {
                self.others.insert(key, value);
            }
        }
    }

    /// Bytes a ConfigMap would count for the data stored so far: every key
    /// plus every value.
    pub fn bytes(&self) -> u64 {
        let stored = |prefix: &str, slug: &Slug, value: u32| {
            (prefix.len() + slug.as_str().len()) as u64 + u64::from(value)
        };
        let records: u64 = self
            .records
            .iter()
            .map(|(slug, slot)| stored(keys::ENTRY_PREFIX, slug, slot.value_bytes))
            .sum();
        let attempts: u64 = self
            .attempts
            .iter()
            .map(|(slug, (_, value))| stored(keys::ATTEMPT_PREFIX, slug, *value))
            .sum();
        let others: u64 = self
            .others
            .iter()
            .map(|(k, v)| (k.len() + v.len()) as u64)
            .sum();
        records + attempts + others
    }

    /// The snapshot of the data stored, at `revision`; `Err` when a shared
    /// record was rewritten (decode the raw data instead).
    pub fn finish(self, revision: Option<String>) -> Result<LedgerSnapshot, SharedRecordRewritten> {
        if let Some(id) = self.rewritten {
            return Err(SharedRecordRewritten { id });
        }
        let SnapshotBuilder {
            records,
            attempts,
            others,
            contexts,
            ..
        } = self;
        // The rare keys go through the one decoding of raw data (version,
        // unreadable keys in key order, the shared records' problems).
        let mut snapshot = LedgerSnapshot::from_raw_data(others, revision);
        // Collected whole (sorted, then built): full nodes.
        snapshot.attempts_started = attempts
            .into_unordered()
            .map(|(slug, (count, _))| (slug, count))
            .collect();
        // Every slug with an attempt mark shares the mark's copy of its
        // text (one walk of both, in key order).
        let mut marked = snapshot.attempts_started.keys().peekable();
        snapshot.records = records
            .finish()
            .into_iter()
            .map(|(slug, slot)| {
                while marked.next_if(|m| **m < slug).is_some() {}
                let slug = match marked.peek() {
                    Some(m) if **m == slug => (*m).clone(),
                    _ => slug,
                };
                let record = match slot.record {
                    Pending::Decoded(entry) => Record::Entry(entry),
                    Pending::Deferred(raw) => Record::decoded(LedgerEntry::decode_in(
                        &keys::entry_key(&slug),
                        &raw,
                        &contexts,
                    )),
                };
                (slug, record)
            })
            .collect();
        Ok(snapshot)
    }
}
