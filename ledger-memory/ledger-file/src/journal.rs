//! The file ledger's on-disk format (`migration-ledger/v2`): a snapshot and
//! an append-only journal in one file, and the reader of the older
//! whole-document format (`migration-ledger/v1`).
//!
//! ```text
//! migration-ledger/v2\n                                   the format tag
//! 1c2d3e4f {"op":"object","rev":7,"data":{...}}\n        the snapshot
//! 5a6b7c8d {"op":"put","rev":8,"data":{"a.x":"..."}}\n   one line per mutation
//! ```
//!
//! Every record is one line: the CRC-32C of the JSON text in 8 lowercase
//! hex digits, a space, compact JSON (which never contains a raw newline),
//! and a newline. The first record is the `object` snapshot, written only
//! by creating the file whole (temporary file, fsync, rename, fsync of the
//! directory); each mutation appends one `put` record carrying every key it
//! stores and the object's next revision, so a multi-key write is atomic.
//! The format has no removal: the one key the engine removes, a slug's last
//! failure (`f.<slug>`), is put with an empty value, which replaying applies
//! as a removal (an older engine keeps the empty key, which reads as no
//! record; CONTRACT.md §5.3).
//!
//! Reading replays the records in order. Any prefix of a record lacks its
//! newline, so a crash during an append leaves a *torn* final line, which
//! was never acknowledged: it is dropped (and truncated by the next writer).
//! Everything else that does not check out is corrupt and the whole file is
//! unreadable, with the byte offset: a line whose checksum or JSON is
//! wrong, a revision that does not follow, a torn snapshot, and a file that
//! ends inside a record with no NUL after it (below).
//!
//! **Preallocated tail.** After the last record the file may end in NUL
//! bytes (up to twice [`PREALLOCATE_BYTES`]): the writer extends the file
//! in steps and writes each record into zeros that are already allocated
//! and on disk, so its `fdatasync` writes the record's block and nothing
//! else (an append that grows the file must also write the inode, or commit
//! the file system's journal: one more synchronous write per record). A
//! record starts with a hex digit, never NUL, so an all-NUL rest is no
//! record at all. A record torn inside that tail is a prefix followed by
//! NULs, without its newline: torn, exactly as at the end of the file. A
//! version that predates the tail reads it the same way (a final line with
//! no newline, dropped) and truncates it before appending.
//!
//! **A torn append or a file cut short.** The writer only ever writes a
//! record into NULs that are already on disk: into the tail, or, when the
//! record does not fit, after extending the file with NULs and syncing that
//! first; and it never fills the tail to the last byte. So a record a
//! crash tore is always followed by at least one NUL (where its newline was
//! to go). A file that ends inside a record with no NUL after it was cut
//! after it was written (a bad restore, a copy that stopped early, a full
//! disk during a copy), and the records after the cut were acknowledged:
//! it is refused, naming the offset, rather than read as a torn tail whose
//! loss would run those migrations again. A cut that falls exactly between
//! two records cannot be told from a file that ends there. Versions before
//! this rule could leave a torn record without NULs after it (appending at
//! the end of the file, or growing it in the same write); such a file is
//! refused too, and the message says how to cut it by hand.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Read;

use migration_core::ledger::{LedgerSnapshot, SharedRecordRewritten, SnapshotBuilder, Usage};
use serde::{Deserialize, Serialize};

use migration_core::object::{Change, LockState, Object};

/// The first line of every file in the current format.
pub(crate) const TAG: &str = "migration-ledger/v2\n";

/// What every format tag starts with.
pub(crate) const TAG_PREFIX: &str = "migration-ledger/";

/// The whole-document format read from older files (and never written).
pub(crate) const LEGACY_FORMAT: &str = "migration-ledger/v1";

/// The writer extends the file by whole steps of this many bytes (8 KiB,
/// about 35 records of a run) and leaves at least this much NUL tail after
/// every extension, so at most one append in that many bytes grows the
/// file (see the module documentation).
pub(crate) const PREALLOCATE_BYTES: u64 = 8 * 1024;

/// The file length a writer extends to when the record ending at `size`
/// does not fit the current tail: `size` plus at least
/// [`PREALLOCATE_BYTES`] of NULs, rounded up to a whole step.
pub(crate) fn preallocated_len(size: u64) -> u64 {
    (size + PREALLOCATE_BYTES).next_multiple_of(PREALLOCATE_BYTES)
}

mod crc;
pub(crate) use crc::crc32c;

/// Frames `json` as one record line.
pub(crate) fn frame(json: &str) -> Vec<u8> {
    let mut line = String::with_capacity(json.len() + 10);
    let _ = write!(line, "{:08x} ", crc32c(json.as_bytes()));
    line.push_str(json);
    line.push('\n');
    line.into_bytes()
}

struct Pairs<'a>(&'a [(String, String)]);

impl Serialize for Pairs<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.0.iter().map(|(k, v)| (k, v)))
    }
}

#[derive(Serialize)]
struct RecordOut<'a, D: Serialize> {
    op: &'static str,
    rev: u64,
    data: &'a D,
}

fn to_json<T: Serialize>(value: &T) -> String {
    // Maps of strings always serialize.
    serde_json::to_string(value).unwrap_or_default()
}

/// The record line that stores `change`.
pub(crate) fn encode_change(change: &Change) -> Vec<u8> {
    match change {
        Change::Create(object) => encode_object(object),
        Change::Put { revision, puts } => frame(&to_json(&RecordOut {
            op: "put",
            rev: *revision,
            data: &Pairs(puts),
        })),
    }
}

/// The snapshot record of `object`.
pub(crate) fn encode_object(object: &Object) -> Vec<u8> {
    frame(&to_json(&RecordOut {
        op: "object",
        rev: object.revision(),
        data: object.data(),
    }))
}

/// A whole file in the current format holding `object`.
pub(crate) fn encode_file(object: &Object) -> Vec<u8> {
    let mut bytes = TAG.as_bytes().to_vec();
    bytes.extend(encode_object(object));
    bytes
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RecordIn {
    op: String,
    rev: u64,
    data: BTreeMap<String, String>,
}

/// Why a file cannot be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Corrupt {
    /// Byte offset of the offending record (or 0 for the whole file).
    pub(crate) offset: u64,
    pub(crate) reason: String,
}

impl Corrupt {
    fn at(offset: u64, reason: impl Into<String>) -> Self {
        Corrupt {
            offset,
            reason: reason.into(),
        }
    }
}

/// Why a file ending inside a record is refused rather than read as a torn
/// append.
pub(crate) const CUT_SHORT: &str = "the file ends inside this record, with no NUL bytes after it: \
it was cut short (a bad restore, a copy that stopped early) and acknowledged records may be lost \
(an append a crash tore is always followed by the NULs it was written into); restore the whole \
file. Only if you know the last write was interrupted by a crash under a version older than \
this one, cut the file at this offset (truncate -s OFFSET)";

/// How far a replay got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Replayed {
    /// Offset just after the last complete record.
    pub(crate) end: u64,
    /// Bytes after `end`: a torn final record, never acknowledged.
    pub(crate) torn: u64,
}

/// What a replay builds: the ledger object with its raw keys (what a
/// writer keeps), or a snapshot decoded as the records go by (what a
/// read-only handle returns, [`Decoding`]).
pub(crate) trait Target {
    /// The revision stored so far; `None` before the snapshot record.
    fn revision(&self) -> Option<u64>;
    /// The snapshot record: the object holds exactly `data` at `revision`.
    fn snapshot(&mut self, revision: u64, data: BTreeMap<String, String>);
    /// A later record: `data` is stored, the object moves to `revision`.
    fn put(&mut self, revision: u64, data: BTreeMap<String, String>);
}

impl Target for Option<Object> {
    fn revision(&self) -> Option<u64> {
        self.as_ref().map(Object::revision)
    }

    fn snapshot(&mut self, revision: u64, data: BTreeMap<String, String>) {
        *self = Some(Object::new(revision, data));
    }

    fn put(&mut self, revision: u64, data: BTreeMap<String, String>) {
        Change::Put {
            revision,
            puts: data.into_iter().collect(),
        }
        .apply(self);
    }
}

/// A replay straight into a snapshot: no raw key map is kept, each value
/// is decoded (and freed) as its record is replayed.
#[derive(Debug, Default)]
pub(crate) struct Decoding {
    revision: Option<u64>,
    builder: SnapshotBuilder,
}

impl Decoding {
    /// The snapshot of the replayed object (`None`: there is none), its
    /// usage counted against `budget`; `Err` when the builder gave up (see
    /// [`SnapshotBuilder`]).
    pub(crate) fn finish(
        self,
        budget: Option<u64>,
    ) -> Result<Option<LedgerSnapshot>, SharedRecordRewritten> {
        let Some(revision) = self.revision else {
            return Ok(None);
        };
        let used_bytes = self.builder.bytes();
        let mut snapshot = self.builder.finish(Some(revision.to_string()))?;
        snapshot.usage = budget.map(|budget_bytes| Usage {
            used_bytes,
            budget_bytes,
            record_overhead_bytes: 0,
        });
        Ok(Some(snapshot))
    }
}

impl Target for Decoding {
    fn revision(&self) -> Option<u64> {
        self.revision
    }

    /// The snapshot is only ever the first record (`apply_line`, and a
    /// whole-document file's one object), so the builder is still empty and
    /// storing the data is all there is to do.
    fn snapshot(&mut self, revision: u64, data: BTreeMap<String, String>) {
        self.put(revision, data);
    }

    fn put(&mut self, revision: u64, data: BTreeMap<String, String>) {
        self.revision = Some(revision);
        for (key, value) in data {
            self.builder.put(key, value);
        }
    }
}

/// Replays the records in `bytes` (which start at file offset `base`) onto
/// `state`. `expect_snapshot`: the first record must be the `object`
/// snapshot, and must be whole.
pub(crate) fn replay(
    bytes: &[u8],
    base: u64,
    state: &mut impl Target,
    mut expect_snapshot: bool,
) -> Result<Replayed, Corrupt> {
    let mut pos = 0usize;
    while pos < bytes.len() {
        let offset = base + pos as u64;
        let rest = &bytes[pos..];
        // A record starts with a hex digit, so only the preallocated tail
        // gets past the first test: no record, nothing torn. (The OR of
        // every byte has no early exit, so it runs on whole vectors.)
        if !expect_snapshot && rest[0] == 0 && rest.iter().fold(0, |acc, &b| acc | b) == 0 {
            break;
        }
        let Some(newline) = rest.iter().position(|&b| b == b'\n') else {
            if expect_snapshot {
                return Err(Corrupt::at(
                    offset,
                    "the snapshot record is cut short (a snapshot is only ever written whole)",
                ));
            }
            // The writer puts every record into NULs already on disk (the
            // preallocated tail, extended durably before a record that
            // does not fit), so an append a crash tore is followed by NULs
            // (at the least where its newline was to go). A file that ends
            // inside a record without them was cut short after it was
            // written: the records it lost were acknowledged.
            if rest.last() != Some(&0) {
                return Err(Corrupt::at(offset, CUT_SHORT));
            }
            return Ok(Replayed {
                end: offset,
                torn: rest.len() as u64,
            });
        };
        let line = &rest[..newline];
        apply_line(line, offset, state, expect_snapshot)?;
        expect_snapshot = false;
        pos += newline + 1;
    }
    if expect_snapshot {
        return Err(Corrupt::at(base, "no snapshot record after the format tag"));
    }
    Ok(Replayed {
        end: base + pos as u64,
        torn: 0,
    })
}

fn apply_line(
    line: &[u8],
    offset: u64,
    state: &mut impl Target,
    snapshot: bool,
) -> Result<(), Corrupt> {
    let framed = line.len() > 9 && line[8] == b' ';
    let stored = framed
        .then(|| std::str::from_utf8(&line[..8]).ok())
        .flatten()
        .filter(|hex| hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
        .and_then(|hex| u32::from_str_radix(hex, 16).ok());
    let Some(stored) = stored else {
        return Err(Corrupt::at(
            offset,
            "not a record line (expected an 8-digit checksum, a space and JSON)",
        ));
    };
    let json = &line[9..];
    let actual = crc32c(json);
    if actual != stored {
        return Err(Corrupt::at(
            offset,
            format!("checksum mismatch (stored {stored:08x}, computed {actual:08x})"),
        ));
    }
    let record: RecordIn = serde_json::from_slice(json)
        .map_err(|e| Corrupt::at(offset, format!("the record does not parse: {e}")))?;
    match (record.op.as_str(), state.revision()) {
        ("object", None) if snapshot => {
            state.snapshot(record.rev, record.data);
            Ok(())
        }
        ("object", _) => Err(Corrupt::at(
            offset,
            "an object snapshot where only the first record may be one",
        )),
        ("put", _) if snapshot => Err(Corrupt::at(
            offset,
            "the first record is not the object snapshot",
        )),
        ("put", Some(revision)) if record.rev == revision + 1 => {
            state.put(record.rev, record.data);
            Ok(())
        }
        ("put", Some(revision)) => Err(Corrupt::at(
            offset,
            format!(
                "revision {} does not follow revision {revision} (a record is missing or repeated)",
                record.rev,
            ),
        )),
        ("put", None) => Err(Corrupt::at(offset, "a put before any snapshot")),
        (op, _) => Err(Corrupt::at(
            offset,
            format!("unknown record kind {op:?} in a {} file", TAG.trim_end()),
        )),
    }
}

/// The older whole-document format: one pretty-printed JSON object, the
/// lock inside it. Read, converted on the first write, never written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct LegacyDocument {
    format: String,
    ledger: Option<LegacyObject>,
    lock: Option<migration_core::object::LockRecord>,
    lock_generation: u64,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct LegacyObject {
    revision: u64,
    data: BTreeMap<String, String>,
}

/// A file's contents, parsed (the tests' view of [`load_into`]).
#[cfg(test)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Parsed {
    pub(crate) state: Option<Object>,
    /// `Some` for a whole-document (v1) file: the lock it carried.
    pub(crate) legacy_lock: Option<LockState>,
    /// For a v2 file, how far the records go.
    pub(crate) replayed: Replayed,
}

/// Why a file could not be loaded.
#[derive(Debug)]
pub(crate) enum LoadError {
    /// Reading it failed.
    Io(std::io::Error),
    /// What was read does not check out.
    Corrupt(Corrupt),
}

/// How many bytes [`load`] reads at a time.
const LOAD_CHUNK_BYTES: usize = 1 << 20;

/// Appends up to `limit` more bytes of `file` to `buf`; `Ok(true)` at the
/// end of the file.
fn read_more(file: &mut impl Read, buf: &mut Vec<u8>, limit: usize) -> std::io::Result<bool> {
    buf.reserve(limit);
    let read = file.by_ref().take(limit as u64).read_to_end(buf)?;
    Ok(read < limit)
}

/// [`load_into`] the ledger object, returned parsed with the number of
/// bytes read (the tests' view).
#[cfg(test)]
pub(crate) fn load(file: impl Read, size: u64) -> Result<(Parsed, u64), LoadError> {
    let mut state = None;
    let (legacy_lock, replayed, len) = load_into(file, size, &mut state)?;
    let parsed = Parsed {
        state,
        legacy_lock,
        replayed,
    };
    Ok((parsed, len))
}

/// Reads and replays a whole file of `size` bytes (its length when opened;
/// a guess, the reader's end decides) into `state`, returning the lock of a
/// whole-document (v1) file, how far the records go and the number of
/// bytes read. A journal is replayed a piece at a time, each piece's
/// complete records as soon as they are read, so the file's bytes are
/// never all held beside what they replay into (a record longer than a
/// piece, such as a large snapshot, is held whole: it is parsed in one
/// go). Exactly as [`parse`] of the whole file: the same state, the same
/// errors at the same offsets.
pub(crate) fn load_into(
    mut file: impl Read,
    size: u64,
    state: &mut impl Target,
) -> Result<(Option<LockState>, Replayed, u64), LoadError> {
    let mut buf = Vec::new();
    // A small file is read in one piece of its own size (and the read that
    // finds its end).
    let first = (size as usize).saturating_add(1).min(LOAD_CHUNK_BYTES);
    let mut eof = read_more(&mut file, &mut buf, first).map_err(LoadError::Io)?;
    if !buf.starts_with(TAG.as_bytes()) {
        // The older whole-document format, or no ledger at all: one JSON
        // document, parsed whole.
        if !eof {
            buf.reserve_exact((size as usize).saturating_sub(buf.len()));
            file.read_to_end(&mut buf).map_err(LoadError::Io)?;
        }
        let len = buf.len() as u64;
        let (legacy_lock, replayed) = parse_into(&buf, state).map_err(LoadError::Corrupt)?;
        return Ok((legacy_lock, replayed, len));
    }
    let mut base = TAG.len() as u64;
    // Where in `buf` the bytes at `base` are.
    let mut at = TAG.len();
    let mut expect_snapshot = true;
    loop {
        let unread = &buf[at..];
        if eof {
            let replayed =
                replay(unread, base, state, expect_snapshot).map_err(LoadError::Corrupt)?;
            let len = base + unread.len() as u64;
            return Ok((None, replayed, len));
        }
        match unread.iter().rposition(|&b| b == b'\n') {
            Some(last) => {
                replay(&unread[..=last], base, state, expect_snapshot)
                    .map_err(LoadError::Corrupt)?;
                expect_snapshot = false;
                base += last as u64 + 1;
                buf.drain(..at + last + 1);
                at = 0;
                // Up to the piece's size with what is left of the last
                // record: the buffer keeps the capacity it has (asking for
                // a whole piece more would double it).
                let room = LOAD_CHUNK_BYTES.saturating_sub(buf.len()).max(1);
                eof = read_more(&mut file, &mut buf, room).map_err(LoadError::Io)?;
            }
            // One record longer than a piece: read the rest at once rather
            // than grow the buffer piece by piece.
            None => {
                let rest = (size.saturating_sub(base) as usize).max(LOAD_CHUNK_BYTES);
                eof = read_more(&mut file, &mut buf, rest).map_err(LoadError::Io)?;
            }
        }
    }
}

/// Parses a whole file (the tests' reference for [`load`]).
#[cfg(test)]
pub(crate) fn parse(bytes: &[u8]) -> Result<Parsed, Corrupt> {
    let mut state = None;
    let (legacy_lock, replayed) = parse_into(bytes, &mut state)?;
    Ok(Parsed {
        state,
        legacy_lock,
        replayed,
    })
}

/// [`parse`] into any [`Target`]: the lock of a whole-document (v1) file,
/// and how far the records go.
fn parse_into(
    bytes: &[u8],
    state: &mut impl Target,
) -> Result<(Option<LockState>, Replayed), Corrupt> {
    if bytes.starts_with(TAG.as_bytes()) {
        let replayed = replay(&bytes[TAG.len()..], TAG.len() as u64, state, true)?;
        return Ok((None, replayed));
    }
    if bytes.starts_with(TAG_PREFIX.as_bytes()) {
        let tag_end = bytes
            .iter()
            .position(|&b| b == b'\n')
            .unwrap_or(bytes.len());
        let tag = String::from_utf8_lossy(&bytes[..tag_end.min(80)]);
        return Err(Corrupt::at(
            0,
            format!(
                "unknown format {tag:?} (this version reads {LEGACY_FORMAT:?} and {:?}): written by a newer version? refusing to read it rather than misread it",
                TAG.trim_end()
            ),
        ));
    }
    if let Some(version) = numbered_runner_version(bytes) {
        return Err(Corrupt::at(
            0,
            format!(
                "this is a numbered runner's state ({{\"version\":\"{version}\"}}), not a ledger: a file ledger is never read as one, since guessing could skip or repeat migrations; move it aside and create the ledger with `migrate adopt --legacy-version {version} --ledger file:PATH TREE`"
            ),
        ));
    }
    let doc: LegacyDocument = serde_json::from_slice(bytes)
        .map_err(|e| Corrupt::at(0, format!("not a ledger document: {e}")))?;
    if doc.format != LEGACY_FORMAT {
        return Err(Corrupt::at(
            0,
            format!(
                "unknown format {:?} (expected {LEGACY_FORMAT:?} or {:?})",
                doc.format,
                TAG.trim_end()
            ),
        ));
    }
    if let Some(object) = doc.ledger {
        let mut data = object.data;
        // The lock a v1 document kept beside its object moves into it, so
        // an older runner's live lease is still respected.
        if let Some(lock) = &doc.lock {
            let stored = migration_core::fence::StoredLock {
                holder: lock.holder.clone(),
                token: lock.token.clone(),
                acquired: lock.acquired_at,
                renewed: lock.acquired_at,
                ttl_seconds: lock.expires_at.since(lock.acquired_at).as_secs(),
            };
            data.insert(migration_core::fence::LOCK_KEY.to_owned(), stored.encode());
        }
        state.snapshot(object.revision, data);
    }
    let legacy_lock = LockState {
        lock: doc.lock,
        generation: doc.lock_generation,
    };
    let replayed = Replayed {
        end: bytes.len() as u64,
        torn: 0,
    };
    Ok((Some(legacy_lock), replayed))
}

/// The integer of a file holding only `{"version": N}` (string or number),
/// the state a numbered runner keeps: named in the refusal, so the user
/// learns which command adopts it.
fn numbered_runner_version(bytes: &[u8]) -> Option<String> {
    let doc: BTreeMap<String, serde_json::Value> = serde_json::from_slice(bytes).ok()?;
    match (doc.len(), doc.get("version")?) {
        (1, serde_json::Value::String(v)) if v.trim().parse::<u64>().is_ok() => {
            Some(v.trim().to_owned())
        }
        (1, serde_json::Value::Number(n)) if n.is_u64() => Some(n.to_string()),
        _ => None,
    }
}

#[cfg(test)]
mod tests;
