//! The file ledger's journal: one record per mutation, crashes at every
//! step of an append and of a compaction (simulated by cutting or damaging
//! the file at chosen offsets), separate processes, the older and newer
//! formats, the lock sidecar, the budget.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use ledger_memory::{DEFAULT_FILE_BUDGET_BYTES, FileLedger, MemoryLedger};
use migration_core::testing::{sample_entry, slug};
use migration_core::{
    EntryState, Ledger, LedgerEntry, LedgerError, Lock, ManualClock, Timestamp, WriteMode,
};

const TAG: &str = "migration-ledger/v2\n";

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
}

fn scratch() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.json");
    (dir, path)
}

/// Bytes of NUL tail a writer may leave after the last record (twice the
/// step it grows the file by, `journal::PREALLOCATE_BYTES`).
const MAX_TAIL: u64 = 16 * 1024;

/// The file without the NUL tail the writer preallocates: the records, as
/// a reader sees them (a record never ends in NUL: it ends in a newline).
fn bytes(path: &Path) -> Vec<u8> {
    let mut file = std::fs::read(path).unwrap();
    let records = file.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
    assert!(
        (file.len() - records) as u64 <= MAX_TAIL,
        "{} bytes of NUL tail",
        file.len() - records
    );
    file.truncate(records);
    file
}

/// Offsets at which each record line starts (the tag excluded).
fn record_starts(file: &[u8]) -> Vec<usize> {
    assert!(file.starts_with(TAG.as_bytes()));
    let mut starts = vec![TAG.len()];
    for (i, b) in file.iter().enumerate().skip(TAG.len()) {
        if *b == b'\n' && i + 1 < file.len() {
            starts.push(i + 1);
        }
    }
    starts
}

/// A ledger with a snapshot of two entries and then three appended
/// records: a write, an attempt mark, another write.
/// Panics unless `err` says the ledger is unreadable; `context` says where.
#[track_caller]
fn assert_unreadable(err: &LedgerError, context: impl std::fmt::Display) {
    assert!(
        matches!(err, LedgerError::Unreadable { .. }),
        "{context}: expected Unreadable, got {err:?}"
    );
}

fn journaled(path: &Path) -> FileLedger {
    let ledger = FileLedger::new(path);
    let rt = rt();
    rt.block_on(ledger.create(&[
        (slug(0), sample_entry(EntryState::Ok, 0)),
        (slug(1), sample_entry(EntryState::Legacy, 1)),
    ]))
    .unwrap();
    rt.block_on(ledger.write(
        &[(slug(2), sample_entry(EntryState::Ok, 2))],
        WriteMode::Replace,
    ))
    .unwrap();
    rt.block_on(ledger.note_attempt(&slug(3), "run-1", 0))
        .unwrap();
    rt.block_on(ledger.write(
        &[(slug(3), sample_entry(EntryState::Failed, 3))],
        WriteMode::Replace,
    ))
    .unwrap();
    ledger
}

fn read_raw(
    path: &Path,
) -> Result<Option<std::collections::BTreeMap<String, String>>, LedgerError> {
    // A fresh handle each time: nothing cached.
    FileLedger::new(path).raw_data()
}

#[test]
fn every_write_and_attempt_mark_appends_exactly_one_record() {
    let (_dir, path) = scratch();
    let ledger = journaled(&path);
    let file = bytes(&path);
    assert_eq!(
        record_starts(&file).len(),
        4,
        "a snapshot and three appended records"
    );
    let rt = rt();
    // Repeating an attempt mark with the same token writes nothing.
    rt.block_on(ledger.note_attempt(&slug(3), "run-1", 0))
        .unwrap();
    // An only-if-absent write of present keys writes nothing.
    rt.block_on(ledger.write(
        &[(slug(0), sample_entry(EntryState::Legacy, 0))],
        WriteMode::OnlyIfAbsent,
    ))
    .unwrap();
    assert_eq!(bytes(&path), file, "no-op calls must not touch the file");
    // A multi-key write is one record (atomic).
    rt.block_on(ledger.write(
        &[
            (slug(5), sample_entry(EntryState::Ok, 5)),
            (slug(6), sample_entry(EntryState::Ok, 6)),
        ],
        WriteMode::Replace,
    ))
    .unwrap();
    let after = bytes(&path);
    assert!(
        after.starts_with(&file),
        "appends never rewrite what is there"
    );
    assert_eq!(record_starts(&after).len(), 5);
}

#[test]
fn the_run_lock_never_touches_the_ledger_file() {
    let (_dir, path) = scratch();
    let ledger = journaled(&path);
    let before = bytes(&path);
    let inode = std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(&path).unwrap());
    let rt = rt();
    let lease = rt
        .block_on(ledger.acquire("runner", Duration::from_secs(60)))
        .unwrap();
    let lease = rt
        .block_on(ledger.renew(&lease, Duration::from_secs(60)))
        .unwrap();
    rt.block_on(ledger.release(&lease)).unwrap();
    assert_eq!(bytes(&path), before);
    assert_eq!(
        std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(&path).unwrap()),
        inode,
        "the lock must not replace the ledger file"
    );
    let sidecar = std::fs::read_to_string(path.with_file_name("ledger.json.lock")).unwrap();
    assert!(
        sidecar.contains("\"format\":\"migration-lock/v1\""),
        "{sidecar}"
    );
}

#[test]
fn a_crash_at_every_byte_of_an_append_loses_only_that_record() {
    let (_dir, path) = scratch();
    journaled(&path);
    let file = bytes(&path);
    let last = *record_starts(&file).last().unwrap();
    std::fs::write(&path, &file[..last]).unwrap();
    let without_last = read_raw(&path).unwrap().unwrap();
    std::fs::write(&path, &file).unwrap();
    let with_last = read_raw(&path).unwrap().unwrap();
    assert_ne!(without_last, with_last);
    let rt = rt();
    for cut in last..file.len() {
        // The append was cut after `cut` bytes: never acknowledged.
        std::fs::write(&path, &file[..cut]).unwrap();
        assert_eq!(
            read_raw(&path).unwrap().unwrap(),
            without_last,
            "cut at {cut}: a torn final record is dropped, nothing else"
        );
        // The next writer truncates the torn bytes and appends after them.
        let ledger = FileLedger::new(&path);
        rt.block_on(ledger.note_attempt(&slug(9), "after-crash", 0))
            .unwrap();
        let repaired = bytes(&path);
        assert!(repaired.starts_with(&file[..last]), "cut at {cut}");
        assert_eq!(record_starts(&repaired).len(), record_starts(&file).len());
        let raw = read_raw(&path).unwrap().unwrap();
        assert!(raw.contains_key("a.s-9"), "cut at {cut}");
        assert_eq!(raw.len(), without_last.len() + 1, "cut at {cut}");
    }
    // The whole record, newline included, is acknowledged and kept.
    std::fs::write(&path, &file).unwrap();
    assert_eq!(read_raw(&path).unwrap().unwrap(), with_last);
}

#[test]
fn appends_go_into_the_preallocated_tail_and_the_file_grows_only_by_whole_steps() {
    let (_dir, path) = scratch();
    let ledger = journaled(&path);
    let rt = rt();
    let step = MAX_TAIL / 2;
    let mut growths = 0;
    let mut len = std::fs::metadata(&path).unwrap().len();
    for i in 0..300 {
        rt.block_on(ledger.note_attempt(&slug(10 + i), "run-1", 0))
            .unwrap();
        let now = std::fs::metadata(&path).unwrap().len();
        assert_eq!(now % step, 0, "append {i}: {now} bytes");
        if now != len {
            growths += 1;
        }
        len = now;
    }
    let records = bytes(&path).len() as u64;
    // At least a step of records between two growths: at most one append
    // in a step's worth of bytes pays for growing the file.
    assert!(
        growths <= records / step + 1,
        "{growths} growths, {records} bytes"
    );
    assert_eq!(record_starts(&bytes(&path)).len(), 4 + 300);
}

#[test]
fn a_crash_at_every_byte_of_an_append_into_the_tail_loses_only_that_record() {
    let (_dir, path) = scratch();
    journaled(&path);
    let raw = std::fs::read(&path).unwrap();
    let file = bytes(&path);
    assert!(raw.len() > file.len(), "the file has a preallocated tail");
    let last = *record_starts(&file).last().unwrap();
    let without_last = {
        let mut cut = file[..last].to_vec();
        cut.resize(raw.len(), 0);
        std::fs::write(&path, &cut).unwrap();
        read_raw(&path).unwrap().unwrap()
    };
    let rt = rt();
    for cut in last..file.len() {
        // The record reached the disk up to `cut`; the tail after it is
        // still zeros. Never acknowledged: dropped, and the next writer
        // writes over it.
        let mut torn = file[..cut].to_vec();
        torn.resize(raw.len(), 0);
        std::fs::write(&path, &torn).unwrap();
        assert_eq!(
            read_raw(&path).unwrap().unwrap(),
            without_last,
            "cut at {cut}"
        );
        rt.block_on(FileLedger::new(&path).note_attempt(&slug(9), "after-crash", 0))
            .unwrap();
        let repaired = bytes(&path);
        assert!(repaired.starts_with(&file[..last]), "cut at {cut}");
        assert_eq!(record_starts(&repaired).len(), record_starts(&file).len());
        let raw_data = read_raw(&path).unwrap().unwrap();
        assert!(raw_data.contains_key("a.s-9"), "cut at {cut}");
        assert_eq!(raw_data.len(), without_last.len() + 1, "cut at {cut}");
    }
    // The record's end on disk without its beginning is no prefix: damage,
    // never read as absent.
    let mut holed = file.clone();
    for b in &mut holed[last..last + 16] {
        *b = 0;
    }
    holed.resize(raw.len(), 0);
    std::fs::write(&path, &holed).unwrap();
    assert_unreadable_at(&path, last, "a record whose first bytes are zeros");
}

#[test]
fn a_zero_filled_tail_is_a_torn_record() {
    // What a file system that extended the file but never wrote the data
    // shows after a power loss.
    let (_dir, path) = scratch();
    journaled(&path);
    let file = bytes(&path);
    let last = *record_starts(&file).last().unwrap();
    let mut zeroed = file.clone();
    for b in &mut zeroed[last..] {
        *b = 0;
    }
    std::fs::write(&path, &zeroed).unwrap();
    let expected = {
        std::fs::write(&path, &file[..last]).unwrap();
        read_raw(&path).unwrap()
    };
    std::fs::write(&path, &zeroed).unwrap();
    assert_eq!(read_raw(&path).unwrap(), expected);
}

fn assert_unreadable_at(path: &Path, offset: usize, what: &str) {
    let rt = rt();
    let err = rt.block_on(FileLedger::new(path).read()).unwrap_err();
    assert_unreadable(&err, what);
    let text = err.to_string();
    assert!(text.contains("ledger.json"), "{what}: {text}");
    assert!(
        text.contains(&format!("byte offset {offset}")),
        "{what}: {text}"
    );
    // A writer refuses too, and leaves the damage for a human.
    let before = bytes(path);
    let err = rt
        .block_on(FileLedger::new(path).note_attempt(&slug(9), "t", 0))
        .unwrap_err();
    assert_unreadable(&err, what);
    assert_eq!(
        bytes(path),
        before,
        "{what}: a refused write changed the file"
    );
    let err = rt.block_on(FileLedger::new(path).create(&[])).unwrap_err();
    assert_unreadable(
        &err,
        format_args!("{what}: a damaged ledger must never look absent"),
    );
}

#[test]
fn a_damaged_record_anywhere_is_unreadable_naming_the_file_and_offset() {
    let (_dir, path) = scratch();
    journaled(&path);
    let file = bytes(&path);
    let starts = record_starts(&file);
    for (i, &start) in starts.iter().enumerate() {
        let end = starts.get(i + 1).copied().unwrap_or(file.len()) - 1;
        // A flipped bit in the checksum, in the JSON, at the last byte
        // before the newline: the final record included (it is whole, so
        // it was acknowledged, and is never silently dropped).
        for at in [start, start + 12, end - 1] {
            let mut damaged = file.clone();
            damaged[at] ^= 0x01;
            std::fs::write(&path, &damaged).unwrap();
            assert_unreadable_at(&path, start, &format!("record {i}, byte {at}"));
        }
    }
    // A record lost from the middle (revisions out of sequence).
    let mut missing = file[..starts[1]].to_vec();
    missing.extend(&file[starts[2]..]);
    std::fs::write(&path, &missing).unwrap();
    assert_unreadable_at(&path, starts[1], "missing record");
    // A record repeated.
    let mut repeated = file.clone();
    repeated.extend(&file[starts[3]..]);
    std::fs::write(&path, &repeated).unwrap();
    assert_unreadable_at(&path, file.len(), "repeated record");
}

#[test]
fn a_journal_longer_than_the_piece_a_read_replays_at_once_reads_and_fails_as_a_short_one() {
    // Records of about 300 KiB: the file spans several of the 1 MiB pieces
    // a read replays at a time, with records across their boundaries.
    let (_dir, path) = scratch();
    let ledger = FileLedger::new(&path);
    for i in 0..12 {
        ledger
            .put_raw(&format!("m.big-{i:02}"), &"x".repeat(300 * 1024 + i))
            .unwrap();
    }
    let file = bytes(&path);
    assert!(file.len() > 3 << 20, "{} bytes", file.len());
    let whole = read_raw(&path).unwrap().unwrap();
    assert_eq!(whole.len(), 12);
    assert_eq!(whole["m.big-11"].len(), 300 * 1024 + 11);
    let starts = record_starts(&file);
    for (i, &start) in starts.iter().enumerate() {
        let mut damaged = file.clone();
        damaged[start + 12] ^= 0x01;
        std::fs::write(&path, &damaged).unwrap();
        assert_unreadable_at(&path, start, &format!("record {i}"));
    }
    // A torn final record is dropped, wherever the cut falls.
    let last = *starts.last().unwrap();
    let earlier = {
        std::fs::write(&path, &file[..last]).unwrap();
        read_raw(&path).unwrap()
    };
    for cut in [last + 1, (last + file.len()) / 2, file.len() - 1] {
        std::fs::write(&path, &file[..cut]).unwrap();
        assert_eq!(read_raw(&path).unwrap(), earlier, "cut at {cut}");
    }
    // One snapshot record longer than a piece reads whole.
    std::fs::write(&path, &file).unwrap();
    FileLedger::new(&path).compact().unwrap();
    assert_eq!(record_starts(&bytes(&path)).len(), 1);
    assert_eq!(read_raw(&path).unwrap().unwrap(), whole);
}

#[test]
fn a_snapshot_cut_short_is_unreadable_never_absent() {
    let (_dir, path) = scratch();
    journaled(&path);
    FileLedger::new(&path).compact().unwrap();
    let file = bytes(&path);
    assert_eq!(
        record_starts(&file).len(),
        1,
        "compaction leaves one snapshot"
    );
    for cut in TAG.len()..file.len() {
        std::fs::write(&path, &file[..cut]).unwrap();
        assert_unreadable_at(&path, TAG.len(), &format!("snapshot cut at {cut}"));
    }
    for cut in 0..TAG.len() {
        std::fs::write(&path, &file[..cut]).unwrap();
        let err = rt().block_on(FileLedger::new(&path).read()).unwrap_err();
        assert_unreadable(&err, format_args!("tag cut at {cut}"));
    }
}

#[test]
fn a_crash_at_every_step_of_a_compaction_leaves_the_same_ledger() {
    let (dir, path) = scratch();
    journaled(&path);
    let old = bytes(&path);
    let expected = read_raw(&path).unwrap();
    FileLedger::new(&path).compact().unwrap();
    let new = bytes(&path);
    assert_ne!(old, new);
    assert_eq!(read_raw(&path).unwrap(), expected);
    let tmp = dir.path().join("ledger.json.tmp.99999.0");
    // Steps 1 and 2: the temporary file is being written, or written and
    // fsynced, but not renamed: the old file is the ledger.
    for cut in (0..=new.len()).step_by(7).chain([new.len()]) {
        std::fs::write(&path, &old).unwrap();
        std::fs::write(&tmp, &new[..cut]).unwrap();
        assert_eq!(read_raw(&path).unwrap(), expected, "tmp cut at {cut}");
    }
    // The next mutation (under the flock) finds the leftover and, when it
    // compacts, removes it.
    FileLedger::new(&path).compact().unwrap();
    assert!(
        !tmp.exists(),
        "a crashed compaction's temporary file is cleaned up"
    );
    // Step 3: renamed, the directory not yet fsynced: after a power loss
    // either name may be there, and both hold the same ledger.
    for file in [&old, &new] {
        std::fs::write(&path, file).unwrap();
        assert_eq!(read_raw(&path).unwrap(), expected);
    }
}

#[test]
fn compaction_keeps_the_file_proportional_to_the_live_data() {
    let (_dir, path) = scratch();
    let ledger = FileLedger::new(&path).with_compact_min(0);
    let memory = MemoryLedger::with_clock_and_budget(Arc::new(migration_core::SystemClock), None);
    let rt = rt();
    rt.block_on(ledger.create(&[])).unwrap();
    rt.block_on(memory.create(&[])).unwrap();
    let mut largest = 0;
    let mut compactions = 0;
    let mut last_len = 0;
    for round in 0..400u32 {
        // One image throughout: a new image per write would add a shared
        // record each time (never removed), and the live data would grow.
        let batch = [(
            slug((round % 5) as usize),
            LedgerEntry {
                image: sample_entry(EntryState::Failed, 0).image,
                ..sample_entry(EntryState::Failed, round)
            },
        )];
        rt.block_on(ledger.write(&batch, WriteMode::Replace))
            .unwrap();
        rt.block_on(memory.write(&batch, WriteMode::Replace))
            .unwrap();
        let token = format!("t{round}");
        let a = rt
            .block_on(ledger.note_attempt(&slug(7), &token, 0))
            .unwrap();
        let b = rt
            .block_on(memory.note_attempt(&slug(7), &token, 0))
            .unwrap();
        assert_eq!(a, b);
        let len = bytes(&path).len() as u64;
        if len < last_len {
            compactions += 1;
        }
        last_len = len;
        largest = largest.max(len);
        let file = std::fs::metadata(&path).unwrap().len();
        assert!(file <= len + MAX_TAIL, "file {file}, records {len}");
    }
    assert!(compactions > 10, "{compactions} compactions");
    let live: u64 = memory
        .raw_data()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.len() + v.len()) as u64)
        .sum();
    assert!(largest < 3 * live + 4096, "largest {largest}, live {live}");
    assert_eq!(read_raw(&path).unwrap(), memory.raw_data());
    assert_eq!(ledger.raw_data().unwrap(), memory.raw_data());
}

/// A deterministic mix of every mutation, through handles that come and
/// go, with compactions forced often, gives exactly what the memory ledger
/// holds.
#[test]
fn any_mix_of_operations_matches_the_memory_ledger() {
    let (_dir, path) = scratch();
    let memory = MemoryLedger::with_clock_and_budget(Arc::new(migration_core::SystemClock), None);
    let rt = rt();
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let mut handle = FileLedger::new(&path)
        .with_compact_min(2048)
        .with_budget(None);
    rt.block_on(handle.create(&[(slug(0), sample_entry(EntryState::Ok, 0))]))
        .unwrap();
    rt.block_on(memory.create(&[(slug(0), sample_entry(EntryState::Ok, 0))]))
        .unwrap();
    for step in 0..300 {
        if next() % 7 == 0 {
            handle = FileLedger::new(&path)
                .with_compact_min(2048)
                .with_budget(None);
        }
        let n = (next() % 12) as usize;
        match next() % 4 {
            0 | 1 => {
                let mode = if next() % 2 == 0 {
                    WriteMode::Replace
                } else {
                    WriteMode::OnlyIfAbsent
                };
                let batch = [
                    (slug(n), sample_entry(EntryState::Ok, step)),
                    (slug(n + 20), sample_entry(EntryState::Failed, step)),
                ];
                let a = rt.block_on(handle.write(&batch, mode)).unwrap();
                let b = rt.block_on(memory.write(&batch, mode)).unwrap();
                assert_eq!(a, b, "step {step}");
            }
            2 => {
                let token = format!("t{}", next() % 3);
                let a = rt.block_on(handle.note_attempt(&slug(n), &token, 1));
                let b = rt.block_on(memory.note_attempt(&slug(n), &token, 1));
                assert_eq!(a, b, "step {step}");
            }
            _ => {
                if next() % 5 == 0 {
                    handle.compact().unwrap();
                }
                let a = rt.block_on(handle.read()).unwrap().unwrap();
                let b = rt.block_on(memory.read()).unwrap().unwrap();
                assert_eq!(a.records, b.records, "step {step}");
                assert_eq!(a.attempts_started, b.attempts_started, "step {step}");
            }
        }
    }
    assert_eq!(read_raw(&path).unwrap(), memory.raw_data());
}

#[tokio::test]
async fn an_older_format_file_reads_keeps_its_lock_and_is_converted_by_the_first_write() {
    let (_dir, path) = scratch();
    let entry = sample_entry(EntryState::Ok, 1).encode();
    let legacy = serde_json::json!({
        "format": "migration-ledger/v1",
        "ledger": {"revision": 4, "data": {"version": "44", "m.s-1": entry, "a.s-1": "{\"count\":1,\"token\":\"t\"}"}},
        "lock": {"holder": "old-runner", "token": "7", "acquired_at": "2026-08-12T10:00:00Z", "expires_at": "2099-01-01T00:00:00Z"},
        "lock_generation": 7
    });
    std::fs::write(&path, serde_json::to_vec_pretty(&legacy).unwrap()).unwrap();
    let ledger = FileLedger::new(&path);
    let snapshot = ledger.read().await.unwrap().unwrap();
    assert_eq!(snapshot.version, migration_core::LegacyVersion::Known(44));
    assert_eq!(
        snapshot.entry(&slug(1)),
        Some(&sample_entry(EntryState::Ok, 1))
    );
    assert_eq!(snapshot.attempts_started.get(&slug(1)), Some(&1));
    assert_eq!(snapshot.revision.as_deref(), Some("4"));
    // The lock an older version holds is respected.
    match ledger.acquire("new-runner", Duration::from_secs(60)).await {
        Err(LedgerError::LockHeld { holder, .. }) => assert_eq!(holder, "old-runner"),
        other => panic!("the old holder's lock must hold: {other:?}"),
    }
    // The first write converts the file to the journal format.
    ledger
        .write(
            &[(slug(2), sample_entry(EntryState::Ok, 2))],
            WriteMode::Replace,
        )
        .await
        .unwrap();
    let converted = bytes(&path);
    assert!(converted.starts_with(TAG.as_bytes()));
    let again = FileLedger::new(&path).read().await.unwrap().unwrap();
    assert_eq!(again.records.len(), 2);
    assert_eq!(again.version, migration_core::LegacyVersion::Known(44));
    assert_eq!(again.revision.as_deref(), Some("5"));
    // Still held by the old runner, now through the sidecar.
    assert!(matches!(
        FileLedger::new(&path)
            .acquire("new-runner", Duration::from_secs(60))
            .await,
        Err(LedgerError::LockHeld { .. })
    ));
}

#[test]
fn an_older_reader_refuses_the_new_format_instead_of_misreading_it() {
    let (_dir, path) = scratch();
    journaled(&path);
    // The v1 reader parses the whole file as one JSON document (and maps
    // the failure to "unreadable"): the tag line makes that fail at once.
    let err = serde_json::from_slice::<serde_json::Value>(&bytes(&path)).unwrap_err();
    assert_eq!((err.line(), err.column()), (1, 1), "{err}");
}

#[tokio::test]
async fn a_newer_format_is_refused_and_left_alone() {
    let (_dir, path) = scratch();
    let newer = b"migration-ledger/v3\n00000000 {\"op\":\"object\",\"rev\":1,\"data\":{}}\n";
    std::fs::write(&path, newer).unwrap();
    let err = FileLedger::new(&path).read().await.unwrap_err();
    assert!(matches!(err, LedgerError::Unreadable { .. }), "{err:?}");
    assert!(err.to_string().contains("unknown format"), "{err}");
    assert!(err.to_string().contains("migration-ledger/v3"), "{err}");
    let err = FileLedger::new(&path)
        .write(
            &[(slug(1), sample_entry(EntryState::Ok, 1))],
            WriteMode::Replace,
        )
        .await
        .unwrap_err();
    assert!(matches!(err, LedgerError::Unreadable { .. }), "{err:?}");
    assert!(FileLedger::new(&path).compact().is_err());
    assert_eq!(bytes(&path), newer);
    // A newer lock record is refused too, not taken for a free lock.
    let (_dir2, other) = scratch();
    let body = r#"{"format":"migration-lock/v2","lock":null,"generation":0}"#;
    let crc = crc32c(body.as_bytes());
    std::fs::write(
        other.with_file_name("ledger.json.lock"),
        format!("{crc:08x} {body}\n"),
    )
    .unwrap();
    let err = FileLedger::new(&other)
        .acquire("r", Duration::from_secs(5))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("unknown lock format"), "{err}");
}

/// CRC-32C, bytewise (the test's own, independent of the library's).
fn crc32c(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in data {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0x82f6_3b78
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

#[tokio::test]
async fn a_lock_record_torn_by_its_holders_crash_reads_as_free() {
    let (_dir, path) = scratch();
    let clock = Arc::new(ManualClock::new(Timestamp::from_unix(1_786_529_040)));
    let ledger = FileLedger::with_clock(&path, clock.clone());
    ledger.acquire("a", Duration::from_secs(60)).await.unwrap();
    let sidecar = path.with_file_name("ledger.json.lock");
    let whole = bytes(&sidecar);
    for cut in 1..whole.len() - 1 {
        std::fs::write(&sidecar, &whole[..cut]).unwrap();
        let b = FileLedger::with_clock(&path, clock.clone());
        let lease = b.acquire("b", Duration::from_secs(60)).await.unwrap();
        assert_eq!(lease.holder, "b", "cut {cut}");
        b.release(&lease).await.unwrap();
    }
    std::fs::write(&sidecar, &whole).unwrap();
    assert!(matches!(
        FileLedger::with_clock(&path, clock)
            .acquire("b", Duration::from_secs(60))
            .await,
        Err(LedgerError::LockHeld { .. })
    ));
}

// ---- separate processes ----

/// Re-runs this test binary as a child doing `role`.
fn child(role: &str, path: &Path, index: usize) -> Command {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "child_process",
        "--exact",
        "--nocapture",
        "--test-threads=1",
    ])
    .env("LEDGER_CHILD_ROLE", role)
    .env("LEDGER_CHILD_PATH", path)
    .env("LEDGER_CHILD_INDEX", index.to_string())
    // The child's own libtest summary would read as this run's.
    .stdout(std::process::Stdio::null());
    cmd
}

const WRITES_PER_CHILD: usize = 40;

/// The children's side; does nothing in an ordinary test run.
#[test]
fn child_process() {
    let Ok(role) = std::env::var("LEDGER_CHILD_ROLE") else {
        return;
    };
    let path = PathBuf::from(std::env::var("LEDGER_CHILD_PATH").unwrap());
    let index: usize = std::env::var("LEDGER_CHILD_INDEX")
        .unwrap()
        .parse()
        .unwrap();
    let rt = rt();
    // Small compaction threshold: files get replaced under the others.
    let ledger = FileLedger::new(&path).with_compact_min(4096);
    match role.as_str() {
        "writer" => {
            for i in 0..WRITES_PER_CHILD {
                let n = index * 1000 + i;
                rt.block_on(ledger.note_attempt(&slug(n), &format!("c{index}"), 0))
                    .unwrap();
                rt.block_on(ledger.write(
                    &[(slug(n), sample_entry(EntryState::Ok, n as u32))],
                    WriteMode::Replace,
                ))
                .unwrap();
                // Everyone also races for one shared key.
                rt.block_on(ledger.write(
                    &[(slug(999_999), sample_entry(EntryState::Ok, index as u32))],
                    WriteMode::OnlyIfAbsent,
                ))
                .unwrap();
            }
        }
        "reader" => {
            let mut seen = 0;
            for _ in 0..200 {
                // Fresh and long-lived handles alike never see damage.
                let snapshot = rt.block_on(ledger.read()).unwrap();
                let fresh = rt.block_on(FileLedger::new(&path).read()).unwrap();
                let count = snapshot.map_or(0, |s| s.records.len());
                assert!(
                    count >= seen,
                    "a reader went back in time: {count} < {seen}"
                );
                seen = count;
                assert!(fresh.is_some());
            }
        }
        "holder" => {
            let lease = rt
                .block_on(ledger.acquire("child-holder", Duration::from_secs(600)))
                .unwrap();
            println!("HELD {}", lease.token);
            let mut line = String::new();
            std::io::stdin().read_line(&mut line).unwrap();
            rt.block_on(ledger.release(&lease)).unwrap();
        }
        other => panic!("unknown role {other}"),
    }
}

#[test]
fn writers_in_separate_processes_lose_no_update_and_readers_never_see_damage() {
    let (_dir, path) = scratch();
    rt().block_on(FileLedger::new(&path).create(&[])).unwrap();
    let mut children: Vec<_> = (0..3)
        .map(|i| child("writer", &path, i).spawn().unwrap())
        .collect();
    children.push(child("reader", &path, 9).spawn().unwrap());
    for mut c in children {
        assert!(c.wait().unwrap().success(), "a child failed");
    }
    let snapshot = rt()
        .block_on(FileLedger::new(&path).read())
        .unwrap()
        .unwrap();
    assert_eq!(snapshot.records.len(), 3 * WRITES_PER_CHILD + 1);
    assert_eq!(snapshot.attempts_started.len(), 3 * WRITES_PER_CHILD);
    assert!(snapshot.attempts_started.values().all(|&n| n == 1));
    assert_eq!(
        snapshot.revision.as_deref(),
        Some((1 + 3 * 2 * WRITES_PER_CHILD + 1).to_string().as_str()),
        "one revision per stored mutation: create, 2 per step, one race winner"
    );
}

#[test]
fn the_run_lock_excludes_another_process_until_it_releases() {
    use std::io::{BufRead, Write};
    let (_dir, path) = scratch();
    let mut holder = child("holder", &path, 0)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = std::io::BufReader::new(holder.stdout.take().unwrap());
    let mut line = String::new();
    // libtest prints "test child_process ... " before the test's own output.
    while !line.contains("HELD") {
        line.clear();
        assert!(out.read_line(&mut line).unwrap() > 0, "the holder died");
    }
    let rt = rt();
    match rt.block_on(FileLedger::new(&path).acquire("parent", Duration::from_secs(5))) {
        Err(LedgerError::LockHeld { holder, .. }) => assert_eq!(holder, "child-holder"),
        other => panic!("another process's lease must hold: {other:?}"),
    }
    // Ledger writes are not blocked by somebody else's lease (the lease
    // is advisory for runners; the flock is held only per call).
    rt.block_on(FileLedger::new(&path).create(&[])).unwrap();
    holder.stdin.take().unwrap().write_all(b"done\n").unwrap();
    assert!(holder.wait().unwrap().success());
    let lease = rt
        .block_on(FileLedger::new(&path).acquire("parent", Duration::from_secs(5)))
        .unwrap();
    assert_eq!(lease.holder, "parent");
}

// ---- the budget ----

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_budget_is_the_file_ledgers_own_64_mib() {
    assert_eq!(DEFAULT_FILE_BUDGET_BYTES, 64 * 1024 * 1024);
    let (dir, path) = scratch();
    let ledger = FileLedger::new(&path);
    assert_eq!(ledger.budget(), Some(DEFAULT_FILE_BUDGET_BYTES));
    // More than a ConfigMap's 1 MiB fits.
    let mut big = sample_entry(EntryState::Failed, 1);
    big.message = Some("x".repeat(2 * 1024 * 1024));
    ledger.create(&[(slug(1), big)]).await.unwrap();
    drop(dir);
    // And the conformance cases hold at 64 MiB.
    let harness = common::FileHarness::new(None);
    migration_core::testing::a_write_above_the_budget_is_refused_whole(&harness).await;
}
