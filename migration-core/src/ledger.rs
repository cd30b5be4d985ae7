//! The storage trait every ledger backend implements, and what it returns.
//!
//! The trait is storage only: read and conditional write; the run lock
//! lives in the stored object and rides on a run's writes
//! ([`Ledger::write_step`]). Planning,
//! seeding, reconciliation and verification live in [`mod@crate::plan`] and
//! [`crate::migrator`], written once over this trait.

use std::collections::BTreeMap;
use std::fmt;

use async_trait::async_trait;

pub use crate::lease::Lease;

mod builder;
pub use builder::{SharedRecordRewritten, SnapshotBuilder};

use crate::digest::Sha256Digest;
use crate::entry::{Contexts, CorruptEntry, LedgerEntry};
use crate::keys::{self, Key};
use crate::last_failure::LastFailure;
use crate::slug::Slug;
use crate::step::{StepReport, StepWrite};
use crate::time::Timestamp;

/// The durable count of started executions of one slug, written before each
/// execution so that a crash between a script's effect and its record still
/// counts: `{"count":2,"token":"<fingerprint>"}`. The token makes noting one
/// execution idempotent when a reply is lost and the call is repeated: all
/// it must do is differ from the token of any other execution of the slug,
/// so what is stored is a fixed-size [`fingerprint`] of the caller's token
/// (16 hex digits, 64 bits), whatever that token's length. Engines that
/// stored the token itself are read the same way.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AttemptMark {
    /// Executions started so far.
    pub count: u32,
    /// The [`fingerprint`] of the token of the execution that last
    /// incremented the count (or, written by an older engine, that token).
    pub token: String,
}

/// Refuses a write that names one slug twice, before anything is stored:
/// which of the two entries would be the truth? Every backend calls this
/// first in [`Ledger::create`], [`Ledger::write`] and
/// [`Ledger::write_step`], so the refusal and its message are the same
/// everywhere: [`LedgerError::Permanent`] naming the slug's key.
pub fn refuse_repeated_slugs(
    ledger: &str,
    operation: &'static str,
    entries: &[(Slug, LedgerEntry)],
) -> Result<(), LedgerError> {
    let mut seen = std::collections::HashSet::with_capacity(entries.len());
    match entries.iter().find(|(slug, _)| !seen.insert(slug)) {
        None => Ok(()),
        Some((slug, _)) => Err(LedgerError::Permanent {
            ledger: ledger.to_owned(),
            operation,
            message: format!(
                "key {}: slug '{slug}' appears twice in one write",
                keys::entry_key(slug)
            ),
        }),
    }
}

/// The hex digits of a token's SHA-256 an attempt mark keeps.
pub const FINGERPRINT_HEX_DIGITS: usize = 16;

/// What an attempt mark stores of an execution's token: the first
/// [`FINGERPRINT_HEX_DIGITS`] hex digits of its SHA-256. Two different
/// tokens of one slug collide with probability 2^-64.
pub fn fingerprint(token: &str) -> String {
    let mut hex = Sha256Digest::of(token.as_bytes()).to_string();
    hex.truncate(FINGERPRINT_HEX_DIGITS);
    hex
}

impl AttemptMark {
    /// Compact JSON, as stored.
    pub fn encode(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Parses a stored value; a value that does not parse is corrupt.
    pub fn decode(key: &str, raw: &str) -> Result<Self, CorruptEntry> {
        serde_json::from_str(raw).map_err(|e| CorruptEntry::new(key, raw, e.to_string()))
    }

    /// The mark after noting one more execution under `token`, starting from
    /// at least `floor` (the attempts an existing entry already records).
    /// Noting the same token twice changes nothing.
    pub fn next(current: Option<&AttemptMark>, token: &str, floor: u32) -> AttemptMark {
        let stored = fingerprint(token);
        match current {
            Some(mark) if mark.token == stored || mark.token == token => mark.clone(),
            Some(mark) => AttemptMark {
                count: mark.count.max(floor).saturating_add(1),
                token: stored,
            },
            None => AttemptMark {
                count: floor.saturating_add(1),
                token: stored,
            },
        }
    }

    /// The largest mark this engine stores: the highest count with a
    /// fingerprint (what a run reserves for it before a script runs).
    pub fn largest() -> AttemptMark {
        AttemptMark {
            count: u32::MAX,
            token: "f".repeat(FINGERPRINT_HEX_DIGITS),
        }
    }
}

/// The legacy integer `version`, as stored.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum LegacyVersion {
    /// No `version` key.
    #[default]
    Absent,
    /// A valid non-negative integer.
    Known(u64),
    /// A value that is not an integer: legacy seeding cannot be decided.
    Corrupt {
        /// The value as stored (cut to a printable length).
        raw: String,
    },
}

impl LegacyVersion {
    /// Interprets the stored string of the `version` key.
    pub fn parse(raw: &str) -> Self {
        match raw.trim().parse::<u64>() {
            Ok(v) => LegacyVersion::Known(v),
            Err(_) => LegacyVersion::Corrupt {
                raw: raw.chars().take(80).collect(),
            },
        }
    }
}

/// One slug's stored record: a valid entry, or a value that failed to parse.
///
/// Both are boxed: a snapshot holds one record per migration (10^5 and
/// more), in B-tree nodes that are never quite full, and an entry is some
/// 250 bytes, so inline the nodes' spare slots alone would cost about as
/// much as the entries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Record {
    /// A well-formed entry.
    Entry(Box<LedgerEntry>),
    /// A value that failed to parse. Neither absent nor present.
    Corrupt(Box<CorruptEntry>),
}

impl Record {
    /// The record a decoding gave: the entry, or why it is corrupt.
    pub fn decoded(decoded: Result<LedgerEntry, CorruptEntry>) -> Self {
        match decoded {
            Ok(entry) => Record::Entry(Box::new(entry)),
            Err(corrupt) => Record::Corrupt(Box::new(corrupt)),
        }
    }

    /// The entry, if this record is valid.
    pub fn entry(&self) -> Option<&LedgerEntry> {
        match self {
            Record::Entry(e) => Some(e),
            Record::Corrupt(_) => None,
        }
    }
}

/// Everything a ledger holds, read in one call.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LedgerSnapshot {
    /// The legacy integer.
    pub version: LegacyVersion,
    /// Records by slug.
    pub records: BTreeMap<Slug, Record>,
    /// Keys with the `m.` prefix whose remainder is not a slug. They belong
    /// to no migration the engine can name, so they block nothing, but they
    /// are reported: somebody wrote them by hand.
    pub unreadable_keys: Vec<CorruptEntry>,
    /// Started executions per slug (`a.<slug>` keys); more started than
    /// recorded means a run died mid-migration.
    pub attempts_started: BTreeMap<Slug, u32>,
    /// The last `on-error=abort` failure per slug (`f.<slug>` keys), until
    /// the slug's next outcome replaces it: informational, never read by
    /// planning. A value that does not parse is in
    /// [`Self::unreadable_keys`] instead (a warning).
    pub failures: BTreeMap<Slug, LastFailure>,
    /// Opaque revision of the stored object (a resourceVersion, a counter).
    pub revision: Option<String>,
    /// How full the stored object is, for backends with a size budget
    /// (`None`: the backend has none). The runner checks it before each
    /// script, so a ledger that cannot hold the outcome refuses before the
    /// script runs instead of after.
    pub usage: Option<Usage>,
}

/// How much of its size budget a stored ledger object uses, in bytes, as the
/// backend counts it (a ConfigMap: keys and values of `data` and
/// `binaryData`; a custom resource: its stored JSON with field-ownership
/// records).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Usage {
    /// Bytes stored now.
    pub used_bytes: u64,
    /// The most the object may hold.
    pub budget_bytes: u64,
    /// Bytes a new record costs beyond its key and value (ownership records,
    /// JSON punctuation, summaries), as an upper bound.
    pub record_overhead_bytes: u64,
}

impl Usage {
    /// Bytes still free.
    pub fn free_bytes(&self) -> u64 {
        self.budget_bytes.saturating_sub(self.used_bytes)
    }
}

impl LedgerSnapshot {
    /// Builds a snapshot from a backend's raw `key → string` data, the shape
    /// of a ConfigMap: `version`, one JSON value per `m.<slug>` key, the
    /// attempt marks `a.<slug>`, the last failures `f.<slug>` and the shared
    /// records `c.<id>` compact entries name. Other keys are ignored (they
    /// belong to other owners).
    ///
    /// Owned strings (`String`) are freed as they are decoded, so a backend
    /// that hands over its raw data never holds it and the snapshot whole at
    /// once; borrowed ones (`&str`) are only read.
    pub fn from_raw_data<K: AsRef<str>, V: AsRef<str>>(
        data: impl IntoIterator<Item = (K, V)>,
        revision: Option<String>,
    ) -> Self {
        let mut snapshot = LedgerSnapshot {
            revision,
            ..LedgerSnapshot::default()
        };
        let mut contexts = Contexts::default();
        let mut attempts = Vec::new();
        let mut failures = Vec::new();
        // Entries are decoded once every shared record is known, whatever
        // order the data comes in.
        let mut entries = Vec::new();
        for (key, value) in data {
            let (k, v) = (key.as_ref(), value.as_ref());
            match keys::parse(k) {
                Key::Version => snapshot.version = LegacyVersion::parse(v),
                Key::Attempt(slug) => match (slug, AttemptMark::decode(k, v)) {
                    (Ok(slug), Ok(mark)) => attempts.push((slug, mark.count)),
                    (Err(e), _) => {
                        snapshot
                            .unreadable_keys
                            .push(CorruptEntry::new(k, v, e.to_string()))
                    }
                    (_, Err(corrupt)) => snapshot.unreadable_keys.push(corrupt),
                },
                // A cleared record is no record (CONTRACT.md §5.3).
                Key::Failure(_) if keys::is_clearing(k, v) => {}
                Key::Failure(Ok(slug)) => match LastFailure::decode(k, v) {
                    Ok(failure) => failures.push((slug, failure)),
                    Err(corrupt) => snapshot.unreadable_keys.push(corrupt),
                },
                Key::Failure(Err(e)) => snapshot.unreadable_keys.push(CorruptEntry::new(
                    k,
                    v,
                    format!("the key is not 'f.<slug>': {e}"),
                )),
                Key::Entry(Ok(slug)) => entries.push((slug, key, value)),
                Key::Entry(Err(e)) => snapshot.unreadable_keys.push(CorruptEntry::new(
                    k,
                    v,
                    format!("the key is not 'm.<slug>': {e}"),
                )),
                Key::Context(Ok(id)) => contexts.insert_raw(&id, v),
                Key::Context(Err(_)) => snapshot.unreadable_keys.push(CorruptEntry::new(
                    k,
                    v,
                    "the key is not 'c.<id>' (an id is 1 to 32 lowercase letters and digits)"
                        .to_owned(),
                )),
                Key::Foreign => {}
            }
        }
        snapshot
            .unreadable_keys
            .extend(contexts.unreadable().cloned());
        // Built whole from the collected pairs: a B-tree filled in key order
        // one insert at a time leaves every node half empty.
        snapshot.attempts_started = attempts.into_iter().collect();
        snapshot.failures = failures.into_iter().collect();
        // A slug with an attempt mark shares the mark's copy of its text
        // (the keys come sorted from every backend, so one walk finds them).
        let mut marked = snapshot.attempts_started.keys().peekable();
        let records: Vec<(Slug, Record)> = entries
            .into_iter()
            .map(|(slug, key, value)| {
                while marked.next_if(|m| **m < slug).is_some() {}
                let slug = match marked.peek() {
                    Some(m) if **m == slug => (*m).clone(),
                    _ => slug,
                };
                let decoded = LedgerEntry::decode_in(key.as_ref(), value.as_ref(), &contexts);
                (slug, Record::decoded(decoded))
            })
            .collect();
        snapshot.records = records.into_iter().collect();
        snapshot
    }

    /// The record for `slug`, if any key exists for it.
    pub fn record(&self, slug: &Slug) -> Option<&Record> {
        self.records.get(slug)
    }

    /// The valid entry for `slug`, if there is one.
    pub fn entry(&self, slug: &Slug) -> Option<&LedgerEntry> {
        self.records.get(slug).and_then(Record::entry)
    }

    /// Every corrupt record, by slug.
    pub fn corrupt(&self) -> impl Iterator<Item = (&Slug, &CorruptEntry)> {
        self.records.iter().filter_map(|(slug, r)| match r {
            Record::Corrupt(c) => Some((slug, &**c)),
            Record::Entry(_) => None,
        })
    }
}

/// How [`Ledger::write`] treats keys that already exist.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WriteMode {
    /// Write only keys that do not exist yet; existing keys (valid or
    /// corrupt) are left untouched and reported. Used for seeding and
    /// revocation, which must never overwrite history.
    OnlyIfAbsent,
    /// Write every key, overwriting. Used to record a run's outcome, under
    /// the run lock.
    Replace,
}

/// What a write did, key by key.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct WriteReport {
    /// Keys this call wrote.
    pub written: Vec<Slug>,
    /// Keys left untouched because they already existed ([`WriteMode::OnlyIfAbsent`]).
    pub already_present: Vec<Slug>,
    /// The stored object's revision after the write, when the backend
    /// tells it (one whose run lock lives in the ledger object must: a run
    /// takes that lock on the revision it planned on, seeds included).
    pub revision: Option<String>,
}

/// What went wrong talking to a ledger. Backends map their own errors onto
/// these kinds; `ledger` is always the backend's [`Ledger::describe`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LedgerError {
    /// A write to a ledger object that does not exist.
    #[error("{ledger}: {operation} failed: the ledger does not exist")]
    NotFound {
        /// The ledger.
        ledger: String,
        /// The operation.
        operation: &'static str,
    },
    /// [`Ledger::create`] found the object already there; nothing was changed.
    #[error("{ledger}: create failed: the ledger already exists")]
    AlreadyExists {
        /// The ledger.
        ledger: String,
    },
    /// A conditional write kept losing races and gave up.
    #[error("{ledger}: {operation} gave up after {attempts} conflicting concurrent writes")]
    Conflict {
        /// The ledger.
        ledger: String,
        /// The operation.
        operation: &'static str,
        /// How many times it tried.
        attempts: u32,
    },
    /// The write would exceed the backend's size budget; nothing was written.
    #[error(
        "{ledger}: ledger full: the write would grow it to {would_be_bytes} bytes, above the {budget_bytes}-byte budget (now {current_bytes} bytes, {entry_count} entries)"
    )]
    Full {
        /// The ledger.
        ledger: String,
        /// Current size.
        current_bytes: u64,
        /// Size after the refused write.
        would_be_bytes: u64,
        /// The budget.
        budget_bytes: u64,
        /// Entries stored now.
        entry_count: usize,
    },
    /// A failure that may succeed if retried (after the backend's own retries).
    #[error("{ledger}: {operation} failed (transient, may be retried): {message}")]
    Transient {
        /// The ledger.
        ledger: String,
        /// The operation.
        operation: &'static str,
        /// Details.
        message: String,
    },
    /// A failure retrying will not fix: permissions, validation, bad config.
    #[error("{ledger}: {operation} failed: {message}")]
    Permanent {
        /// The ledger.
        ledger: String,
        /// The operation.
        operation: &'static str,
        /// Details.
        message: String,
    },
    /// The stored object as a whole cannot be read (not one entry: the
    /// container itself), so nothing in it can be trusted.
    #[error("{ledger}: the stored ledger is unreadable: {reason}")]
    Unreadable {
        /// The ledger.
        ledger: String,
        /// Why.
        reason: String,
    },
    /// Someone else holds the run lock.
    #[error("{ledger}: the run lock is held by {holder} until {expires_at}")]
    LockHeld {
        /// The ledger.
        ledger: String,
        /// The current holder.
        holder: String,
        /// When the holder's lease lapses unless renewed.
        expires_at: Timestamp,
    },
    /// A run's first write, conditional on the revision the run planned on,
    /// found the ledger changed since (another writer came first); nothing
    /// was written. The run plans again on what is there now.
    #[error(
        "{ledger}: write step refused: the ledger changed since it was read at revision {expected} (now {found}); plan again"
    )]
    Changed {
        /// The ledger.
        ledger: String,
        /// The revision planned on.
        expected: Box<str>,
        /// The revision found.
        found: Box<str>,
    },
    /// A renew found that this holder no longer holds the lock.
    #[error("{ledger}: the run lock was lost by {holder}: {reason}")]
    LockLost {
        /// The ledger.
        ledger: String,
        /// The holder that lost it.
        holder: String,
        /// What happened.
        reason: String,
    },
}

impl LedgerError {
    /// True for errors worth retrying at a higher level.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            LedgerError::Transient { .. } | LedgerError::Conflict { .. }
        )
    }
}

/// Storage for one cluster's applied set.
///
/// Every method is a single logical operation on the backend's object. All
/// backends (ConfigMap, custom resource, memory, file) behave identically,
/// which the conformance suite (`testing` feature) proves.
///
/// Guarantees every implementation gives:
/// - **Fail closed.** An error is never turned into an empty answer. A value
///   that cannot be parsed is reported as [`Record::Corrupt`], never as
///   absent; a container that cannot be parsed is [`LedgerError::Unreadable`].
/// - **Atomic writes.** A call either stores all of the entries it writes or
///   none of them.
/// - **No deletes.** Nothing in this trait removes an entry, and writes touch
///   only the `m.<slug>` keys they name: other keys (`version`, other
///   owners' data, labels, annotations) are left as they are. The one
///   exception is the informational last failure (`f.<slug>`): every write
///   that stores a slug's entry removes the slug's last failure in the same
///   atomic write ([`Ledger::note_failure`]).
///
/// # Writing a backend
///
/// **Helpers.** A backend that keeps the ledger as one object (a file, a
/// row, a blob) stores [`crate::object::Object`] and plans every operation
/// with [`crate::object`]: `plan_create`, `plan_write`, `plan_note_attempt`,
/// `plan_note_failure`, `plan_step` and the lock's `plan_lock_take`,
/// `plan_lock_renew`, `plan_lock_release`. Each returns a
/// [`crate::object::Change`] to store and then apply; every rule below
/// (the compact entry format, the budget, the lock) is then already kept.
/// A backend with its own shape decides the lock with
/// [`crate::fence::ObjectLock`] and [`crate::fence::StoredLock`] (the
/// Kubernetes backends do); no Kubernetes crate is needed for either.
///
/// **Rules left to no guess.**
/// - The run lock lives in the stored object and changes only inside
///   [`Ledger::write_step`] and the [`crate::Lock`] calls, decided and
///   stored in one atomic operation with the data (a mutex, a `flock`, a
///   conditional update).
/// - A take ([`crate::step::StepMode::Take`]) starts a new tenure (a new
///   token), even for the holder of a lapsed lease. A take (or
///   [`crate::Lock::acquire`]) by the current holder of a live lease renews
///   that tenure whatever the revision now: it is the same take retried
///   after a lost reply (a run's holder is unique to the run,
///   [`crate::lock::run_holder`]), and the retry may come from outside the
///   backend, with another token ([`crate::fence::ObjectLock::step`]
///   decides this).
/// - A release ([`crate::step::StepMode::Release`]) retried after a lost
///   reply finds the lock gone and its records in place: that is its own
///   write landed, answered as success ([`crate::object::plan_step`] does
///   this; a backend of its own shape checks the same).
/// - Any change of the lock alone (a take, a renewal, a release) raises
///   the revision [`LedgerSnapshot::revision`] reports, as any data change
///   does: a run planned on the old revision must not take the lock as if
///   nothing happened.
/// - A write under a lease ([`crate::step::StepMode::Hold`],
///   [`crate::step::StepMode::Release`]) is refused with
///   [`LedgerError::LockLost`] when the lease lapsed, even if nobody took
///   the lock over since, and when it is not the lock's tenure (a stale or
///   forged release frees nothing and writes nothing).
/// - A backend with a size budget reports [`LedgerSnapshot::usage`] on
///   every read: the runner reserves room from it before a script runs.
/// - IO errors: what may succeed if tried again (a timeout, a reset, a
///   409, a 429 or 5xx, `EINTR`, `EAGAIN`) is retried by the backend a
///   bounded number of times and then [`LedgerError::Transient`]; what will
///   not (permissions, `ENOSPC`, validation, a bad path) is
///   [`LedgerError::Permanent`]; a stored object that does not parse is
///   [`LedgerError::Unreadable`], never absent.
/// - A remote store whose reply may be lost retries the same request: the
///   attempt token and the take token make a landed write recognisable, so
///   the retry answers as the lost reply would have; a write it cannot
///   confirm is an error, never success.
/// - A change a crash interrupts reads whole or not at all, and the next
///   write keeps it so: a backend with an in-between state (a torn journal
///   record, files written beside a write-ahead record) finishes or
///   discards it on the next read.
///
/// **Testing.** The conformance suite proves a backend: add
/// `migration-core = { version = "…", features = ["testing"] }`,
/// `tokio = { version = "1", features = ["rt-multi-thread", "macros"] }` and
/// `async-trait = "0.1"` to `[dev-dependencies]`, implement
/// `migration_core::testing::Harness` (a module of that feature) and
/// expand `migration_core::ledger_conformance_tests!(harness)` in a test
/// file (`Harness::plant_half_applied` for a backend that has a state
/// between starting a change and finishing it). `examples/ledger-dir` in
/// this repository is a whole backend written this way from these docs (a
/// JSON file replaced by rename under a `flock`, under 200 lines), and
/// `ledger-memory` another; its `tests/memory/broken.rs` keeps six
/// deliberately broken wrappers (no mutual exclusion, a lapsed lease
/// honoured, a stale release accepted, a lock-only change hidden from the
/// revision, no usage, a half-applied change left so) and shows the suite
/// rejects each one.
#[async_trait]
pub trait Ledger: Send + Sync + fmt::Debug {
    /// A human-readable name for messages: `configmap cozy-system/cozystack-version`.
    fn describe(&self) -> String;

    /// Reads everything in one call.
    ///
    /// `Ok(None)` means no ledger object exists (a fresh install); an object
    /// that exists with no entries is `Ok(Some(snapshot))` with empty records.
    /// Idempotent and side-effect free.
    async fn read(&self) -> Result<Option<LedgerSnapshot>, LedgerError>;

    /// Creates the ledger object holding exactly `entries`, in one write.
    ///
    /// If the object already exists, returns [`LedgerError::AlreadyExists`]
    /// and changes nothing: creation never overwrites. A slug named twice is
    /// refused ([`refuse_repeated_slugs`]) and nothing is written.
    async fn create(&self, entries: &[(Slug, LedgerEntry)]) -> Result<(), LedgerError>;

    /// Writes `entries` into the existing ledger, atomically.
    ///
    /// With [`WriteMode::OnlyIfAbsent`] keys that exist (valid or corrupt)
    /// are skipped and listed in [`WriteReport::already_present`]; the check
    /// and the write are one conditional operation, retried internally on
    /// conflict a bounded number of times ([`LedgerError::Conflict`] after
    /// that). Repeating the same call is therefore idempotent. With
    /// [`WriteMode::Replace`] every key is written. A missing ledger object
    /// is [`LedgerError::NotFound`]; exceeding the size budget is
    /// [`LedgerError::Full`] and writes nothing.
    async fn write(
        &self,
        entries: &[(Slug, LedgerEntry)],
        mode: WriteMode,
    ) -> Result<WriteReport, LedgerError>;

    /// Durably counts one started execution of `slug` and returns the count.
    ///
    /// Called before a script runs, so a crash after the script's effect but
    /// before its record still counts the execution. The new count is
    /// `max(stored, floor) + 1`, where `floor` is what an existing entry
    /// already records. Idempotent per `token`: repeating the call with the
    /// token that last incremented returns the same count without
    /// incrementing (a lost reply retried is not a second execution). Stored
    /// beside the entries (ConfigMap key `a.<slug>`); the ledger must exist
    /// ([`LedgerError::NotFound`] otherwise).
    async fn note_attempt(&self, slug: &Slug, token: &str, floor: u32) -> Result<u32, LedgerError>;

    /// Stores `failure` as the last failure of `slug` (`f.<slug>`),
    /// replacing any stored one; the ledger must exist
    /// ([`LedgerError::NotFound`] otherwise). The record is informational and
    /// non-terminal: the next write that stores the slug's entry removes it
    /// in the same atomic write, and a later failure replaces it. It counts
    /// towards the size budget ([`LedgerError::Full`]).
    async fn note_failure(&self, slug: &Slug, failure: &LastFailure) -> Result<(), LedgerError>;

    /// The output tail a stored message names ([`crate::kept_output::KeptAt`]), for a backend
    /// that keeps tails outside its object (the Kubernetes backends keep them in a Secret,
    /// CONTRACT.md §5.2). `Ok(None)`: this backend keeps tails in its entries (the default),
    /// the message names none of this ledger's, or the tail is no longer kept. A backend reads
    /// only its own Secret, whatever a message names.
    async fn kept_output(&self, message: &str) -> Result<Option<String>, LedgerError> {
        let _ = message;
        Ok(None)
    }

    /// Writes one step of a run ([`StepWrite`]): its records, replacing, the
    /// attempt mark of the execution about to start and the last failure of
    /// an `on-error=abort` migration, under its [`crate::step::StepMode`]
    /// (the condition, and the change of the run lock kept in the object),
    /// as one atomic conditional write.
    ///
    /// Every backend that a run uses overrides it: the condition and the
    /// lock change must be decided in the same atomic operation as the
    /// write, which only the backend can do ([`crate::object::plan_step`]
    /// plans it for an object kept whole; [`crate::fence::ObjectLock::step`]
    /// decides the lock for any other). The default serves
    /// [`crate::step::StepMode::Overwrite`] only, as up to three operations
    /// ([`Self::write`], [`Self::note_attempt`], [`Self::note_failure`]), and
    /// refuses any other mode as a permanent error.
    async fn write_step(&self, step: &StepWrite<'_>) -> Result<StepReport, LedgerError> {
        if step.mode != crate::step::StepMode::Overwrite {
            return Err(LedgerError::Permanent {
                ledger: self.describe(),
                operation: "write step",
                message: "this ledger cannot hold a run lock in its writes".into(),
            });
        }
        if !step.records.is_empty() {
            self.write(step.records, WriteMode::Replace).await?;
        }
        let attempts = match step.attempt {
            Some(a) => Some(self.note_attempt(a.slug, a.token, a.floor).await?),
            None => None,
        };
        if let Some(f) = step.failure {
            self.note_failure(f.slug, f.failure).await?;
        }
        Ok(StepReport {
            attempts,
            lease: None,
        })
    }
}

#[cfg(test)]
mod tests;
