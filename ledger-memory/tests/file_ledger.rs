//! File-ledger behaviour beyond the conformance suite: unreadable files,
//! parallel writers in separate threads, durability of the format.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use ledger_memory::FileLedger;
use migration_core::testing::{sample_entry, slug};
use migration_core::{EntryState, Ledger, LedgerError, WriteMode};

/// Where a test's file ledger lives: `ledger.json` in a fresh directory,
/// which the caller keeps alive.
fn scratch_ledger_path() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.json");
    (dir, path)
}

#[tokio::test]
async fn a_garbage_file_is_unreadable_never_absent() {
    let (_dir, path) = scratch_ledger_path();
    std::fs::write(&path, b"{\"format\": \"migration-ledger/v1\", \"ledg").unwrap();
    let err = FileLedger::new(&path).read().await.unwrap_err();
    assert!(matches!(err, LedgerError::Unreadable { .. }), "{err:?}");
    assert!(err.to_string().contains("ledger.json"), "{err}");
    // And a write must not replace what it cannot read.
    let err = FileLedger::new(&path).create(&[]).await.unwrap_err();
    assert!(matches!(err, LedgerError::Unreadable { .. }));
    assert!(std::fs::read_to_string(&path).unwrap().ends_with("\"ledg"));
}

#[tokio::test]
async fn an_unknown_format_tag_is_unreadable() {
    let (_dir, path) = scratch_ledger_path();
    std::fs::write(
        &path,
        br#"{"format":"migration-ledger/v9","ledger":null,"lock":null,"lock_generation":0}"#,
    )
    .unwrap();
    let err = FileLedger::new(&path).read().await.unwrap_err();
    assert!(err.to_string().contains("unknown format"), "{err}");
}

#[tokio::test]
async fn the_file_stores_entries_as_configmap_style_strings() {
    let (dir, path) = scratch_ledger_path();
    let ledger = FileLedger::new(&path);
    ledger
        .create(&[(slug(1), sample_entry(EntryState::Ok, 1))])
        .await
        .unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let stored = doc["ledger"]["data"]["m.s-1"]
        .as_str()
        .expect("entries are JSON strings");
    assert_eq!(stored, sample_entry(EntryState::Ok, 1).encode());
    assert!(
        !dir.path().read_dir().unwrap().any(|e| e
            .unwrap()
            .file_name()
            .to_string_lossy()
            .contains(".tmp."))
    );
}

#[test]
fn writers_in_parallel_threads_lose_no_update() {
    let dir = tempfile::tempdir().unwrap();
    let path = Arc::new(dir.path().join("ledger.json"));
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    rt.block_on(FileLedger::new(path.as_ref()).create(&[]))
        .unwrap();
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let path = path.clone();
            std::thread::spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .build()
                    .unwrap();
                let ledger = FileLedger::new(path.as_ref());
                for i in 0..25 {
                    let n = t * 100 + i;
                    rt.block_on(ledger.write(
                        &[(slug(n), sample_entry(EntryState::Ok, n as u32))],
                        WriteMode::OnlyIfAbsent,
                    ))
                    .unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let snapshot = rt
        .block_on(FileLedger::new(path.as_ref()).read())
        .unwrap()
        .unwrap();
    assert_eq!(
        snapshot.records.len(),
        100,
        "parallel read-modify-write cycles lost an update"
    );
}
