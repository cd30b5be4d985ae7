//! The ledger as one object: the stored state the in-memory and the file
//! ledger keep, and the rules every operation follows on it (the same rules
//! the Kubernetes backends follow on their object, which the conformance
//! suite checks).
//!
//! The ledger object mirrors a ConfigMap: `data` maps `version`, `m.<slug>`,
//! `a.<slug>`, `f.<slug>` and `c.<id>` keys to strings, each entry being its compact
//! JSON naming a shared record (CONTRACT.md §5.2). Keeping
//! raw strings (not typed entries) is what lets tests plant corrupt values
//! and lets the file ledger be rendered as a ConfigMap without translation.
//!
//! Every mutation is split in two: a *plan* computed against the current
//! state (all checks, the budget included, and the exact keys to store),
//! and the [`Change`] it returns, applied only once stored. The memory
//! ledger applies it at once; the file ledger first appends it to its
//! journal and applies it after the fsync. Sizes are kept incrementally, so
//! an operation costs in proportion to the keys it writes, not to the
//! ledger.

use crate::fence::{LOCK_KEY, ObjectLock, StoredLock};
use std::collections::BTreeMap;
use std::time::Duration;

use crate::entry::{ContextIndex, Placement};
use crate::keys;
use crate::last_failure::LastFailure;
use crate::ledger::{
    AttemptMark, Lease, LedgerError, LedgerSnapshot, Usage, WriteMode, WriteReport,
};
use crate::step::{AttemptNote, FailureNote, StepMode, StepReport, StepWrite};
use crate::{LedgerEntry, Slug, Timestamp};
use serde::{Deserialize, Serialize};

/// The ledger object: its keys and a revision counter, with the size a
/// ConfigMap would count kept up to date.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Object {
    revision: u64,
    data: BTreeMap<String, String>,
    /// Bytes of every key plus every value.
    bytes: u64,
    /// Keys with the `m.` prefix.
    entries: usize,
    /// The shared records, kept up to date so that a write files its new
    /// ones without scanning the ledger.
    contexts: ContextIndex,
}

/// Whether storing `value` under `key` removes the key: a cleared last
/// failure ([`keys::is_clearing`]) or a released run lock (an empty
/// [`LOCK_KEY`]).
fn clears(key: &str, value: &str) -> bool {
    keys::is_clearing(key, value) || (key == LOCK_KEY && value.is_empty())
}

fn key_size(key: &str, value: &str) -> u64 {
    // The run lock is not data: it counts towards no budget (a run must
    // always be able to take and release it), as a ConfigMap's annotation
    // is outside its `data`.
    if key == LOCK_KEY {
        return 0;
    }
    (key.len() + value.len()) as u64
}

impl Object {
    /// An object holding `data` at `revision`.
    pub fn new(revision: u64, data: BTreeMap<String, String>) -> Self {
        let bytes = data.iter().map(|(k, v)| key_size(k, v)).sum();
        let entries = data.keys().filter(|k| keys::is_entry_key(k)).count();
        let contexts = ContextIndex::of_flat(&data);
        Object {
            revision,
            data,
            bytes,
            entries,
            contexts,
        }
    }

    /// The revision, raised by every stored change (a ConfigMap's
    /// `resourceVersion`, as a number).
    pub fn revision(&self) -> u64 {
        self.revision
    }

    /// Every key and its raw value.
    pub fn data(&self) -> &BTreeMap<String, String> {
        &self.data
    }

    /// Bytes a ConfigMap would count: every key plus every value.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Number of keys.
    pub fn keys(&self) -> usize {
        self.data.len()
    }

    /// The size after storing `puts` (each key at most once; a clearing
    /// put, [`keys::is_clearing`], removes its key).
    fn bytes_after(&self, puts: &[(String, String)]) -> u64 {
        puts.iter().fold(self.bytes, |acc, (k, v)| {
            let old = self.data.get(k).map_or(0, |old| key_size(k, old));
            if clears(k, v) {
                acc - old
            } else {
                acc - old + key_size(k, v)
            }
        })
    }

    /// The clearing puts of the last failures of `written` (slugs whose
    /// entries a write stores) that the object holds: an entry's write
    /// removes its slug's last failure in the same change.
    fn clear_failures<'s>(
        &self,
        written: impl IntoIterator<Item = &'s Slug>,
    ) -> Vec<(String, String)> {
        written
            .into_iter()
            .map(keys::failure_key)
            .filter(|key| self.data.contains_key(key))
            .map(|key| (key, keys::CLEARED.to_owned()))
            .collect()
    }

    /// Refuses `puts` as "ledger full" when they would take the object
    /// above `budget` (bytes; `None` is unbounded).
    fn check_room_for(
        &self,
        name: &str,
        budget: Option<u64>,
        puts: &[(String, String)],
    ) -> Result<(), LedgerError> {
        check_budget(
            name,
            budget,
            self.bytes,
            self.bytes_after(puts),
            self.entries,
        )
    }

    fn insert(&mut self, key: String, value: String) {
        // A cleared last failure removes its key: the object never holds
        // one; nor an empty lock (a release).
        if clears(&key, &value) {
            if let Some(old) = self.data.remove(&key) {
                self.bytes -= key_size(&key, &old);
            }
            return;
        }
        if key == LOCK_KEY {
            self.data.insert(key, value);
            return;
        }
        let added = key_size(&key, &value);
        let value_len = value.len() as u64;
        let is_entry = keys::is_entry_key(&key);
        if let Some(id) = key.strip_prefix(keys::CONTEXT_PREFIX) {
            self.contexts.observe(id, &value);
        }
        match self.data.insert(key, value) {
            // The key was there: only the value's length changes.
            Some(old) => self.bytes = self.bytes - old.len() as u64 + value_len,
            None => {
                self.bytes += added;
                if is_entry {
                    self.entries += 1;
                }
            }
        }
    }

    /// Rebuilds the key map with full B-tree nodes. Keys replayed in
    /// ascending order (a snapshot record, a run's journal) leave every node
    /// half empty; rebuilt, the map of a large ledger takes about a fifth
    /// less.
    pub fn refill(&mut self) {
        if let Some(first) = self.data.pop_first() {
            // `append` into a non-empty map pushes both, in order, into
            // new full nodes, freeing the old ones as it goes.
            let mut full = BTreeMap::from([first]);
            full.append(&mut self.data);
            self.data = full;
        }
    }

    /// The usage of `budget` a read reports.
    fn usage(&self, budget: Option<u64>) -> Option<Usage> {
        budget.map(|budget_bytes| Usage {
            used_bytes: self.bytes,
            budget_bytes,
            record_overhead_bytes: 0,
        })
    }

    /// The snapshot a read returns, reporting the usage of `budget`.
    pub fn snapshot(&self, budget: Option<u64>) -> LedgerSnapshot {
        let mut snapshot = LedgerSnapshot::from_raw_data(
            self.data.iter().map(|(k, v)| (k.as_str(), v.as_str())),
            Some(self.revision.to_string()),
        );
        snapshot.usage = self.usage(budget);
        snapshot
    }

    /// [`Object::snapshot`], consuming the object: each raw key and value
    /// is freed once decoded, so the two are never held whole at once.
    pub fn into_snapshot(self, budget: Option<u64>) -> LedgerSnapshot {
        let usage = self.usage(budget);
        let mut snapshot =
            LedgerSnapshot::from_raw_data(self.data, Some(self.revision.to_string()));
        snapshot.usage = usage;
        snapshot
    }
}

/// A mutation planned against the current state, applied once stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// The object comes into existence holding exactly this.
    Create(Object),
    /// These keys are stored in the existing object, which moves to `revision`.
    Put {
        /// The object's revision afterwards.
        revision: u64,
        /// Keys and values, each key once.
        puts: Vec<(String, String)>,
    },
}

impl Change {
    /// Applies the change. A `Put` on an absent object creates it (only
    /// [`put_raw`] plans that, for planting test data).
    pub fn apply(self, state: &mut Option<Object>) {
        match self {
            Change::Create(object) => *state = Some(object),
            Change::Put { revision, puts } => {
                let object = state.get_or_insert_with(Object::default);
                for (k, v) in puts {
                    object.insert(k, v);
                }
                object.revision = revision;
            }
        }
    }
}

/// The keys that store `entries`: each entry's key and value, and the
/// shared records new to `contexts`, planned in `placement`. A slug named
/// twice is refused ([`crate::ledger::refuse_repeated_slugs`]). `write` decides
/// per entry whether it is stored at all.
fn encode_all(
    name: &str,
    operation: &'static str,
    entries: &[(Slug, LedgerEntry)],
    placement: &mut Placement<'_>,
    mut write: impl FnMut(&Slug, &str) -> bool,
) -> Result<Vec<(String, String)>, LedgerError> {
    crate::ledger::refuse_repeated_slugs(name, operation, entries)?;
    let mut out = Vec::with_capacity(entries.len());
    for (slug, entry) in entries {
        let key = keys::entry_key(slug);
        if !write(slug, &key) {
            continue;
        }
        let stored = entry.stored(placement);
        for (id, text) in stored.contexts {
            out.push((keys::context_key(id), text));
        }
        out.push((key, stored.value));
    }
    Ok(out)
}

fn check_budget(
    name: &str,
    budget: Option<u64>,
    current_bytes: u64,
    would_be: u64,
    entry_count: usize,
) -> Result<(), LedgerError> {
    let Some(budget) = budget else { return Ok(()) };
    if would_be > budget {
        return Err(LedgerError::Full {
            ledger: name.to_owned(),
            current_bytes,
            would_be_bytes: would_be,
            budget_bytes: budget,
            entry_count,
        });
    }
    Ok(())
}

fn not_found(name: &str, operation: &'static str) -> LedgerError {
    LedgerError::NotFound {
        ledger: name.to_owned(),
        operation,
    }
}

/// Plans [`Ledger::create`](crate::Ledger::create).
pub fn plan_create(
    name: &str,
    budget: Option<u64>,
    current: Option<&Object>,
    entries: &[(Slug, LedgerEntry)],
) -> Result<Change, LedgerError> {
    if current.is_some() {
        return Err(LedgerError::AlreadyExists {
            ledger: name.to_owned(),
        });
    }
    let none = ContextIndex::default();
    let data: BTreeMap<String, String> = encode_all(
        name,
        "create",
        entries,
        &mut Placement::new(&none),
        |_, _| true,
    )?
    .into_iter()
    .collect();
    let object = Object::new(1, data);
    check_budget(name, budget, 0, object.bytes, 0)?;
    Ok(Change::Create(object))
}

/// Plans [`Ledger::write`](crate::Ledger::write); `None` when
/// nothing is to be written.
pub fn plan_write(
    name: &str,
    budget: Option<u64>,
    current: Option<&Object>,
    entries: &[(Slug, LedgerEntry)],
    mode: WriteMode,
) -> Result<(WriteReport, Option<Change>), LedgerError> {
    let Some(object) = current else {
        // A slug named twice is refused before anything else.
        let none = ContextIndex::default();
        encode_all(
            name,
            "write",
            entries,
            &mut Placement::new(&none),
            |_, _| false,
        )?;
        return Err(not_found(name, "write"));
    };
    let mut report = WriteReport::default();
    let mut puts = encode_all(
        name,
        "write",
        entries,
        &mut Placement::new(&object.contexts),
        |slug, key| {
            if mode == WriteMode::OnlyIfAbsent && object.data.contains_key(key) {
                report.already_present.push(slug.clone());
                false
            } else {
                report.written.push(slug.clone());
                true
            }
        },
    )?;
    puts.extend(object.clear_failures(&report.written));
    object.check_room_for(name, budget, &puts)?;
    let change = (!puts.is_empty()).then(|| Change::Put {
        revision: object.revision + 1,
        puts,
    });
    Ok((report, change))
}

/// Plans [`Ledger::note_attempt`](crate::Ledger::note_attempt):
/// the count, and the mark to store unless it is already stored.
pub fn plan_note_attempt(
    name: &str,
    budget: Option<u64>,
    current: Option<&Object>,
    slug: &Slug,
    token: &str,
    floor: u32,
) -> Result<(u32, Option<Change>), LedgerError> {
    let note = AttemptNote { slug, token, floor };
    let (count, change) = plan_records(name, budget, current, &[], Some(note), None, None)?;
    Ok((count.unwrap_or_default(), change))
}

/// Plans [`Ledger::note_failure`](crate::Ledger::note_failure): the
/// record to store under `f.<slug>`, unless it is stored already.
pub fn plan_note_failure(
    name: &str,
    budget: Option<u64>,
    current: Option<&Object>,
    slug: &Slug,
    failure: &LastFailure,
) -> Result<Option<Change>, LedgerError> {
    let note = FailureNote { slug, failure };
    plan_records(name, budget, current, &[], None, Some(note), None).map(|(_, change)| change)
}

/// The count `note` makes, and the mark to store unless it is stored already.
fn next_mark(
    name: &str,
    object: &Object,
    note: AttemptNote<'_>,
) -> Result<(u32, Option<(String, String)>), LedgerError> {
    let key = keys::attempt_key(note.slug);
    let stored = match object.data.get(&key) {
        Some(raw) => Some(
            AttemptMark::decode(&key, raw).map_err(|c| LedgerError::Permanent {
                ledger: name.to_owned(),
                operation: "note attempt",
                message: c.to_string(),
            })?,
        ),
        None => None,
    };
    let next = AttemptMark::next(stored.as_ref(), note.token, note.floor);
    if stored.as_ref() == Some(&next) {
        return Ok((next.count, None));
    }
    Ok((next.count, Some((key, next.encode()))))
}

/// Plans [`Ledger::write_step`](crate::Ledger::write_step): the lock
/// change the step's [`StepMode`] asks for (decided by [`ObjectLock::step`]
/// on the lock stored under [`LOCK_KEY`], at `now`; `take_token` is the
/// tenure a take creates), the records (replacing, each removing its slug's
/// last failure), the attempt mark and the last failure as one change, so
/// that one append (and one `fdatasync`) stores all or none, and the budget
/// is checked on all together. Any change, a lock-only one included, raises
/// the revision.
pub fn plan_step(
    name: &str,
    budget: Option<u64>,
    current: Option<&Object>,
    step: &StepWrite<'_>,
    now: Timestamp,
    take_token: &str,
) -> Result<(StepReport, Option<Change>), LedgerError> {
    let (lock, lease) = match (step.mode, current) {
        (StepMode::Overwrite, _) => (None, None),
        (_, None) => return Err(not_found(name, "write step")),
        (mode, Some(object)) => {
            let revision = object.revision.to_string();
            match object_lock(name, object, Some(&revision), now)?.step(&mode, take_token) {
                // A release whose reply was lost, retried: the lock is gone
                // and every record is in place, so this very write landed.
                Err(LedgerError::LockLost { .. })
                    if matches!(mode, StepMode::Release { .. })
                        && landed_already(name, object, step)? =>
                {
                    return Ok((StepReport::default(), None));
                }
                other => other?,
            }
        }
    };
    let (attempts, change) = plan_records(
        name,
        budget,
        current,
        step.records,
        step.attempt,
        step.failure,
        lock_put(lock),
    )?;
    Ok((StepReport { attempts, lease }, change))
}

/// Whether `step` would change nothing of `object`'s data: what a retried
/// write finds when its first try landed.
fn landed_already(name: &str, object: &Object, step: &StepWrite<'_>) -> Result<bool, LedgerError> {
    let planned = plan_records(
        name,
        None,
        Some(object),
        step.records,
        step.attempt,
        step.failure,
        None,
    )?;
    Ok(match planned.1 {
        None => true,
        Some(Change::Put { puts, .. }) => puts.iter().all(|(key, value)| {
            // An empty value removes the key (a last failure cleared).
            match object.data.get(key) {
                Some(stored) => stored == value,
                None => value.is_empty(),
            }
        }),
        Some(_) => false,
    })
}

/// The lock stored in `object`; a value that does not parse fails closed
/// (nobody can tell who holds it).
fn stored_lock(name: &str, object: &Object) -> Result<Option<StoredLock>, LedgerError> {
    object
        .data
        .get(LOCK_KEY)
        .map(|raw| {
            serde_json::from_str::<StoredLock>(raw).map_err(|e| LedgerError::Unreadable {
                ledger: name.to_owned(),
                reason: format!(
                    "key {LOCK_KEY} is not a run lock this engine reads (unknown lock format, written by a newer version?): {e}"
                ),
            })
        })
        .transpose()
}

/// The lock of `object` as the rules of [`crate::fence`] see it.
fn object_lock<'a>(
    name: &'a str,
    object: &Object,
    revision: Option<&'a str>,
    now: Timestamp,
) -> Result<ObjectLock<'a>, LedgerError> {
    Ok(ObjectLock {
        ledger: name,
        stored: stored_lock(name, object)?,
        revision,
        now,
    })
}

/// The put that stores a lock change (`None`: no change; an empty value
/// removes the lock).
fn lock_put(lock: crate::fence::LockWrite) -> Option<(String, String)> {
    lock.map(|l| {
        (
            LOCK_KEY.to_owned(),
            l.map(|l| l.encode()).unwrap_or_default(),
        )
    })
}

/// A change storing only `lock` (a lock change; `None`: none) in `object`.
fn lock_change(object: &Object, lock: crate::fence::LockWrite) -> Option<Change> {
    lock_put(lock).map(|put| Change::Put {
        revision: object.revision + 1,
        puts: vec![put],
    })
}

/// Stores `lock` alone in `object`, answering the lease it grants.
fn store_lock(object: &Object, lock: StoredLock) -> (Lease, Option<Change>) {
    (lock.lease(), lock_change(object, Some(Some(lock))))
}

/// Plans [`crate::Lock::acquire`] on the lock kept in the object: free,
/// lapsed or already `holder`'s is taken (the same tenure renewed when it
/// is `holder`'s and live, a new one with `fresh_token` otherwise); held by
/// another is [`LedgerError::LockHeld`]; no object is
/// [`LedgerError::NotFound`] (a fresh install needs no lock).
pub fn plan_lock_take(
    name: &str,
    current: Option<&Object>,
    holder: &str,
    ttl: Duration,
    now: Timestamp,
    fresh_token: &str,
) -> Result<(Lease, Option<Change>), LedgerError> {
    let object = current.ok_or_else(|| not_found(name, "acquire lock"))?;
    let taken = object_lock(name, object, None, now)?.take(holder, ttl, fresh_token)?;
    Ok(store_lock(object, taken))
}

/// Plans [`crate::Lock::renew`]: the same tenure renewed for `ttl` from
/// `now`, or [`LedgerError::LockLost`] when it is no longer `lease`'s.
pub fn plan_lock_renew(
    name: &str,
    current: Option<&Object>,
    lease: &Lease,
    ttl: Duration,
    now: Timestamp,
) -> Result<(Lease, Option<Change>), LedgerError> {
    let object = current.ok_or_else(|| LedgerError::LockLost {
        ledger: name.to_owned(),
        holder: lease.holder.clone(),
        reason: "the ledger object does not exist".into(),
    })?;
    let renewed = object_lock(name, object, None, now)?
        .require(lease)?
        .renewed(now, ttl);
    Ok(store_lock(object, renewed))
}

/// Plans [`crate::Lock::release`]: removes the lock if it is `lease`'s
/// tenure, and changes nothing otherwise (idempotent; a stale lease never
/// frees another holder's lock).
pub fn plan_lock_release(
    name: &str,
    current: Option<&Object>,
    lease: &Lease,
) -> Result<((), Option<Change>), LedgerError> {
    let Some(object) = current else {
        return Ok(((), None));
    };
    let ours = stored_lock(name, object)?.is_some_and(|l| l.is(lease));
    // Storing no lock removes it.
    Ok(((), lock_change(object, ours.then_some(None))))
}

/// The records, the attempt mark, the last failure and `lock` (a put of
/// the lock key) of one step, as one change.
fn plan_records(
    name: &str,
    budget: Option<u64>,
    current: Option<&Object>,
    records: &[(Slug, LedgerEntry)],
    attempt: Option<AttemptNote<'_>>,
    failure: Option<FailureNote<'_>>,
    lock: Option<(String, String)>,
) -> Result<(Option<u32>, Option<Change>), LedgerError> {
    let mut puts = Vec::new();
    if !records.is_empty() {
        // The budget is checked below, on the records and the mark together.
        if let (_, Some(Change::Put { puts: records, .. })) =
            plan_write(name, None, current, records, WriteMode::Replace)?
        {
            puts = records;
        }
    }
    let count = match (attempt, current) {
        (None, _) => None,
        (Some(_), None) => return Err(not_found(name, "note attempt")),
        (Some(note), Some(object)) => {
            let (count, mark) = next_mark(name, object, note)?;
            puts.extend(mark);
            Some(count)
        }
    };
    match (failure, current) {
        (None, _) => {}
        (Some(_), None) => return Err(not_found(name, "note failure")),
        (Some(note), Some(object)) => {
            let key = keys::failure_key(note.slug);
            let value = note.failure.encode();
            // Each key once: the failure replaces a clearing of the same
            // slug planned above.
            puts.retain(|(k, _)| *k != key);
            if object.data.get(&key) != Some(&value) {
                puts.push((key, value));
            }
        }
    }
    let Some(object) = current.filter(|_| !puts.is_empty() || lock.is_some()) else {
        return Ok((count, None));
    };
    // The budget is the data's: a lock change alone is never refused for
    // room (a run must be able to release what it took).
    if !puts.is_empty() {
        object.check_room_for(name, budget, &puts)?;
    }
    puts.extend(lock);
    Ok((
        count,
        Some(Change::Put {
            revision: object.revision + 1,
            puts,
        }),
    ))
}

/// Plans storing `value` under `key` verbatim, creating the object if it
/// is absent (for tests and repairs; no budget).
pub fn put_raw(current: Option<&Object>, key: &str, value: &str) -> Change {
    Change::Put {
        revision: current.map_or(0, |o| o.revision) + 1,
        puts: vec![(key.to_owned(), value.to_owned())],
    }
}

/// The run lock record of a v1 file ([`LockState`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LockRecord {
    /// Who holds it (the run's holder name).
    pub holder: String,
    /// The tenure's token: a new one each time the lock changes hands.
    pub token: String,
    /// When this tenure began.
    pub acquired_at: Timestamp,
    /// When it lapses unless renewed.
    pub expires_at: Timestamp,
}

/// The run lock as a whole-document (v1) file ledger kept it beside its
/// object: read from such files only (the lock now lives in the object,
/// under [`LOCK_KEY`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LockState {
    /// The holder's record; `None` when nobody holds it.
    pub lock: Option<LockRecord>,
    /// How many tenures there have been (tokens are made from it).
    pub generation: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn sizes_follow_every_insert_and_overwrite() {
        let mut state = Some(Object::new(1, data(&[("m.a", "xx"), ("version", "4")])));
        assert_eq!(state.as_ref().unwrap().bytes(), 5 + 8);
        Change::Put {
            revision: 2,
            puts: vec![
                ("m.a".into(), "y".into()),
                ("m.b".into(), "zzz".into()),
                ("a.b".into(), "1".into()),
            ],
        }
        .apply(&mut state);
        let object = state.unwrap();
        assert_eq!(object, Object::new(2, object.data().clone()));
        assert_eq!(object.bytes(), 4 + 8 + 6 + 4);
        assert_eq!(object.entries, 2);
    }
}
