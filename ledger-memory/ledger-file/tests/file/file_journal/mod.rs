//! The file ledger's journal: one record per mutation, crashes at every
//! step of an append and of a compaction (simulated by cutting or damaging
//! the file at chosen offsets), separate processes, the older and newer
//! formats, the lock sidecar, the budget.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use ledger_file::{DEFAULT_FILE_BUDGET_BYTES, FileLedger};
use ledger_memory::MemoryLedger;
use migration_core::step::{AttemptNote, StepMode, StepWrite};
use migration_core::testing::{entries, sample_entry, sample_record, slug};
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

/// Panics unless `err` says the ledger is unreadable; `context` says where.
#[track_caller]
fn assert_unreadable(err: &LedgerError, context: impl std::fmt::Display) {
    assert!(
        matches!(err, LedgerError::Unreadable { .. }),
        "{context}: expected Unreadable, got {err:?}"
    );
}

/// A ledger with a snapshot of two entries and then three appended
/// records: a write, an attempt mark, another write.
fn journaled(path: &Path) -> FileLedger {
    let ledger = FileLedger::new(path);
    let rt = rt();
    rt.block_on(ledger.create(&[
        sample_record(0, EntryState::Ok),
        sample_record(1, EntryState::Legacy),
    ]))
    .unwrap();
    rt.block_on(ledger.write(&entries(2..3, EntryState::Ok), WriteMode::Replace))
        .unwrap();
    rt.block_on(ledger.note_attempt(&slug(3), "run-1", 0))
        .unwrap();
    rt.block_on(ledger.write(&entries(3..4, EntryState::Failed), WriteMode::Replace))
        .unwrap();
    ledger
}

/// A scratch `journaled` ledger and a runtime to drive it: the directory
/// (kept alive), the path, the ledger and the runtime.
fn journaled_with_runtime() -> (
    tempfile::TempDir,
    PathBuf,
    FileLedger,
    tokio::runtime::Runtime,
) {
    let (dir, path) = scratch();
    let ledger = journaled(&path);
    (dir, path, ledger, rt())
}

/// A [`journaled`] ledger in a scratch directory (kept while the first
/// value lives): its path, its records as [`bytes`], and where the last
/// record starts.
fn journaled_file() -> (tempfile::TempDir, PathBuf, Vec<u8>, usize) {
    let (dir, path) = scratch();
    journaled(&path);
    let file = bytes(&path);
    let last = *record_starts(&file).last().unwrap();
    (dir, path, file, last)
}

fn read_raw(path: &Path) -> Result<Option<BTreeMap<String, String>>, LedgerError> {
    // A fresh handle each time: nothing cached.
    FileLedger::new(path).raw_data()
}

/// What a reader finds after a crash that left only the first `len` bytes of `file` at
/// `path`: the prefix, followed by the NULs the writer wrote it into (it writes
/// records only into zeros already on disk), is written over whatever is there and
/// read with a fresh handle.
fn read_cut(
    path: &Path,
    file: &[u8],
    len: usize,
) -> Result<Option<BTreeMap<String, String>>, LedgerError> {
    let mut torn = file[..len].to_vec();
    torn.resize((file.len() + 1).next_multiple_of(8 * 1024), 0);
    std::fs::write(path, &torn).unwrap();
    read_raw(path)
}

/// Writes `file` cut after `len` bytes and zero-filled to `size` bytes (a
/// torn append into a preallocated tail) to `path`; what a reader then
/// reads.
fn read_torn(path: &Path, file: &[u8], len: usize, size: usize) -> BTreeMap<String, String> {
    let mut torn = file[..len].to_vec();
    torn.resize(size, 0);
    std::fs::write(path, &torn).unwrap();
    read_raw(path).unwrap().unwrap()
}

// ---- the budget ----

/// Panics unless a fresh read of `path` is unreadable naming the file and
/// `offset`, and a writer refuses it too, leaving it unchanged; `what`
/// says which damage.
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
    // And says what to do next: restore it, or keep the records before the
    // damage (a command that does exactly that), then verify.
    assert!(
        text.contains("restore")
            && text.contains(&format!("head -c {offset} "))
            && text.contains("migrate verify"),
        "{what}: no next step in: {text}"
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

/// A run's step: `record` replaced and the attempt of `next` noted.
fn step_of<'a>(
    records: &'a [(migration_core::Slug, LedgerEntry)],
    next: &'a migration_core::Slug,
    token: &'a str,
) -> StepWrite<'a> {
    StepWrite {
        records,
        attempt: Some(AttemptNote {
            slug: next,
            token,
            floor: 0,
        }),
        mode: StepMode::Overwrite,
        failure: None,
    }
}

mod compaction;
mod damage;
mod formats;
mod processes;
mod records;
mod truncation;
