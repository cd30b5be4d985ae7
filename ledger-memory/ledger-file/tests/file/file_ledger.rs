//! File-ledger behaviour beyond the conformance suite: unreadable files,
//! parallel writers in separate threads, durability of the format.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use ledger_file::FileLedger;

use crate::common;
use migration_core::testing::{sample_entry, sample_record, slug};
use migration_core::{EntryState, Ledger, LedgerError, Lock, WriteMode};

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
    common::created_with_one_record(&path, EntryState::Ok).await;
    // Format `migration-ledger/v2`: a tag line, then one record per line,
    // `<crc32c> <json>`; the first record is the snapshot.
    let text = std::fs::read_to_string(&path).unwrap();
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("migration-ledger/v2"));
    let snapshot = lines.next().unwrap();
    let doc: serde_json::Value = serde_json::from_str(&snapshot[9..]).unwrap();
    assert_eq!(doc["op"], "object");
    let stored = doc["data"]["m.s-1"]
        .as_str()
        .expect("entries are JSON strings");
    // Compact, naming the shared record of its batch (`c.2`), which names
    // that of its image (`c.1`; CONTRACT.md §5.2).
    assert_eq!(
        stored,
        sample_entry(EntryState::Ok, 1).encode_compact(Some("2"))
    );
    assert_eq!(
        doc["data"]["c.2"].as_str(),
        Some(r#"{"base":"1","batch":"00001-v1.0.0"}"#)
    );
    assert!(
        doc["data"]["c.1"]
            .as_str()
            .unwrap()
            .contains("registry.example")
    );
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

#[tokio::test]
async fn a_symlinked_ledger_is_written_through_and_the_link_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    let real = dir.path().join("real");
    std::fs::create_dir(&real).unwrap();
    let target = real.join("ledger.json");
    let link = dir.path().join("ledger.json");
    // Relative, as `ln -s real/ledger.json ledger.json` makes it.
    std::os::unix::fs::symlink("real/ledger.json", &link).unwrap();
    let via_link = common::created_with_one_record(&link, EntryState::Ok).await;
    via_link
        .write(&[sample_record(2, EntryState::Ok)], WriteMode::Replace)
        .await
        .unwrap();
    via_link.note_attempt(&slug(3), "t", 0).await.unwrap();
    let lease = via_link
        .acquire("runner", std::time::Duration::from_secs(60))
        .await
        .unwrap();
    via_link.release(&lease).await.unwrap();
    assert!(
        std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink(),
        "the link was replaced by a file: the ledger forked"
    );
    let direct = FileLedger::new(&target).read().await.unwrap().unwrap();
    assert_eq!(direct.records.len(), 2, "the writes must reach the target");
    assert_eq!(direct.attempts_started.get(&slug(3)), Some(&1));
    assert_eq!(
        FileLedger::new(&link).read().await.unwrap().unwrap(),
        direct
    );
}

#[tokio::test]
async fn a_new_ledger_and_its_lock_file_are_private_to_their_owner() {
    use std::os::unix::fs::PermissionsExt;
    let (dir, path) = scratch_ledger_path();
    // The usual umask (022) must not make a failure's output tail readable
    // by every local user.
    common::created_with_one_record(&path, EntryState::Failed).await;
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&path), 0o600, "ledger.json");
    for e in std::fs::read_dir(dir.path()).unwrap() {
        let p = e.unwrap().path();
        assert_eq!(mode(&p) & 0o077, 0, "{} is readable by others", p.display());
    }
}
