//! The ledger file replaced under a run (issue 35): a run that holds the lock and finds that the
//! file it writes to is no longer the one it read and wrote (an editor's save, `sed -i`, a
//! restore of an older copy) stops, naming the file and the records of its own that are gone;
//! it never writes on as if they had not been acknowledged.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use ledger_file::FileLedger;

use crate::common;
use migration_core::step::{AttemptNote, StepMode, StepWrite};
use migration_core::testing::{sample_entry, sample_record, slug, step};
use migration_core::{EntryState, Lease, Ledger, LedgerError, Lock, WriteMode};

/// A ledger holding `s-1` (history from before the run), with a copy of the file as it was
/// then at `<file>.bak`.
async fn ledger_with_a_backup() -> (tempfile::TempDir, PathBuf, FileLedger) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.json");
    let ledger = common::created_with_one_record(&path, EntryState::Ok).await;
    std::fs::copy(&path, backup(&path)).unwrap();
    (dir, path, ledger)
}

/// [`ledger_with_a_backup`] under `runner/run-1`'s lock, taken for a
/// minute: the directory, the path, the ledger and the lease.
async fn locked_ledger_with_a_backup() -> (tempfile::TempDir, PathBuf, FileLedger, Lease) {
    let (dir, path, ledger) = ledger_with_a_backup().await;
    let lease = ledger
        .acquire("runner/run-1", Duration::from_secs(60))
        .await
        .unwrap();
    (dir, path, ledger, lease)
}

/// Writing under the run's lease, renewed for a minute.
fn held(lease: &Lease) -> StepMode<'_> {
    StepMode::Hold {
        lease,
        ttl: Duration::from_secs(60),
    }
}

fn backup(path: &Path) -> PathBuf {
    path.with_extension("bak")
}

/// A run under the lock: it plans on its read, notes `s-2`'s attempt, records `s-2` `ok` with
/// `s-3`'s attempt (`s-3` now runs), then `replace` swaps the file, then the run's next write
/// (`s-3`'s record) is sent twice. Both answers must refuse as
/// [`assert_stopped_naming_the_file`] says; returns the first.
async fn a_run_whose_file_is_replaced_between_two_migrations(
    replace: impl FnOnce(&Path),
) -> LedgerError {
    let (_dir, path, ledger, lease) = locked_ledger_with_a_backup().await;
    ledger.read().await.unwrap().unwrap();
    let (two, three) = (slug(2), slug(3));
    ledger
        .write_step(&StepWrite {
            attempt: Some(AttemptNote {
                slug: &two,
                token: "t-2",
                floor: 0,
            }),
            ..step(&[], held(&lease))
        })
        .await
        .unwrap();
    ledger
        .write_step(&StepWrite {
            attempt: Some(AttemptNote {
                slug: &three,
                token: "t-3",
                floor: 0,
            }),
            ..step(
                &[(two.clone(), sample_entry(EntryState::Ok, 2))],
                held(&lease),
            )
        })
        .await
        .unwrap();
    replace(&path);
    let closing = [(three.clone(), sample_entry(EntryState::Ok, 3))];
    let step = step(&closing, held(&lease));
    let first = ledger
        .write_step(&step)
        .await
        .expect_err("the run wrote on into a replaced ledger file");
    let again = ledger
        .write_step(&step)
        .await
        .expect_err("a retry of the refused write went through");
    assert_stopped_naming_the_file(&path, &first, &again);
    first
}

/// Runs `command`, which must succeed.
fn succeeds(command: &mut Command) {
    let status = command.status().unwrap();
    assert!(status.success(), "{command:?}: {status}");
}

/// The file's records without its preallocated NUL tail, one line each.
fn records(path: &Path) -> Vec<Vec<u8>> {
    let bytes = std::fs::read(path).unwrap();
    let end = bytes.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
    bytes[..end]
        .split_inclusive(|&b| b == b'\n')
        .map(<[u8]>::to_vec)
        .collect()
}

/// The refusal names the file, says it was replaced and names the run's own record that is gone
/// (`s-2`'s entry, acknowledged before the swap), and a retry is refused the same way.
fn assert_stopped_naming_the_file(path: &Path, first: &LedgerError, again: &LedgerError) {
    for error in [first, again] {
        let text = error.to_string();
        assert!(
            text.contains(&path.display().to_string()),
            "the refusal does not name the file: {text}"
        );
        assert!(
            text.contains("no longer the one this run"),
            "the refusal does not say the file was replaced: {text}"
        );
        assert!(
            text.contains("m.s-2"),
            "the refusal does not name the record that vanished: {text}"
        );
        assert!(
            !error.is_transient(),
            "a replaced file is not retried: {text}"
        );
    }
}

#[tokio::test]
async fn a_ledger_file_saved_over_by_an_editor_under_a_run_stops_the_run() {
    a_run_whose_file_is_replaced_between_two_migrations(|path| {
        // An editor's save: a new file (the last record deleted) renamed over the old one.
        let mut lines = records(path);
        lines.pop();
        let saved = path.with_extension("swp");
        std::fs::write(&saved, lines.concat()).unwrap();
        std::fs::rename(&saved, path).unwrap();
    })
    .await;
}

#[tokio::test]
async fn a_ledger_file_edited_with_sed_in_place_under_a_run_stops_the_run() {
    a_run_whose_file_is_replaced_between_two_migrations(|path| {
        succeeds(Command::new("sed").args(["-i", r#"/"m\.s-2"/d"#]).arg(path));
    })
    .await;
}

#[tokio::test]
async fn an_older_copy_of_the_ledger_file_restored_under_a_run_stops_the_run() {
    let first = a_run_whose_file_is_replaced_between_two_migrations(|path| {
        // `cp` writes into the existing file: same inode, an older revision.
        succeeds(Command::new("cp").arg(backup(path)).arg(path));
    })
    .await;
    assert!(
        first.to_string().contains("revision"),
        "the refusal does not say the revision went back: {first}"
    );
}

#[tokio::test]
async fn a_record_of_the_run_changed_by_another_process_appending_to_the_same_file_stops_the_run() {
    // The same file, read on from where the run left it (no replacement, no reload): the run's
    // own record is still looked up again, because something was appended since it last was.
    a_run_whose_file_is_replaced_between_two_migrations(|path| {
        let before = std::fs::metadata(path).unwrap();
        FileLedger::new(path).put_raw("m.s-2", "{}").unwrap();
        let after = std::fs::metadata(path).unwrap();
        assert_eq!(
            std::os::unix::fs::MetadataExt::ino(&before),
            std::os::unix::fs::MetadataExt::ino(&after),
            "the other process replaced the file instead of appending: the case tests nothing"
        );
    })
    .await;
}

#[tokio::test]
async fn a_ledger_compacted_by_another_process_under_a_run_is_not_a_replacement() {
    // Another process's compaction renames a new file into place too, but every record the run
    // stored is in it and its revision has not gone back: the run goes on.
    let (_dir, path, ledger, lease) = locked_ledger_with_a_backup().await;
    let two = slug(2);
    ledger
        .write_step(&step(
            &[(two.clone(), sample_entry(EntryState::Ok, 2))],
            held(&lease),
        ))
        .await
        .unwrap();
    let before = std::fs::metadata(&path).unwrap();
    FileLedger::new(&path).compact().unwrap();
    let after = std::fs::metadata(&path).unwrap();
    assert_ne!(
        std::os::unix::fs::MetadataExt::ino(&before),
        std::os::unix::fs::MetadataExt::ino(&after),
        "the compaction did not replace the file: the case tests nothing"
    );
    ledger
        .write(&[sample_record(3, EntryState::Ok)], WriteMode::Replace)
        .await
        .unwrap();
    ledger.release(&lease).await.unwrap();
    let records = FileLedger::new(&path)
        .read()
        .await
        .unwrap()
        .unwrap()
        .records;
    assert_eq!(records.len(), 3);
}

#[tokio::test]
async fn a_handle_that_released_its_lock_reads_a_replaced_file_as_it_is() {
    // Outside a run nothing was acknowledged to anyone: a later read follows the file.
    let (_dir, path, ledger, lease) = locked_ledger_with_a_backup().await;
    ledger
        .write(&[sample_record(2, EntryState::Ok)], WriteMode::Replace)
        .await
        .unwrap();
    ledger.release(&lease).await.unwrap();
    std::fs::copy(backup(&path), &path).unwrap();
    let records = ledger.read().await.unwrap().unwrap().records;
    assert_eq!(records.len(), 1);
}
