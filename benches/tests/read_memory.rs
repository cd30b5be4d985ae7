//! What reading a large file ledger costs in memory (issue 17: `migrate
//! plan` at 10^5 scripts under 64 MiB plus the ledger's file). Bytes are
//! counted by the global allocator, not timed: the peak of the heap while
//! a read-only handle (what `plan` opens) reads 10^4 runner-written
//! migrations, against what the snapshot it returns keeps.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use ledger_file::FileLedger;
use migration_core::Ledger;
use migration_core::testing::realistic::fill_with_runner_writes;
use peak_alloc::PeakAlloc;

#[global_allocator]
static HEAP: PeakAlloc = PeakAlloc;

const MIGRATIONS: usize = 10_000;

#[tokio::test(flavor = "current_thread")]
async fn reading_10_000_runner_written_migrations_holds_little_more_than_the_snapshot_it_returns() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger");
    {
        let writer = FileLedger::new(&path);
        writer.create(&[]).await.unwrap();
        assert_eq!(
            fill_with_runner_writes(&writer, 50, 0, MIGRATIONS).await,
            MIGRATIONS
        );
    }
    let file = std::fs::metadata(&path).unwrap().len() as usize;

    let reader = FileLedger::new(&path);
    let before = HEAP.current_usage();
    HEAP.reset_peak_usage();
    let snapshot = reader.read().await.unwrap().unwrap();
    let peak = HEAP.peak_usage() - before;
    let kept = HEAP.current_usage() - before;

    assert_eq!(snapshot.records.len(), MIGRATIONS);
    assert_eq!(snapshot.attempts_started.len(), MIGRATIONS);
    eprintln!(
        "file {file} B; snapshot kept {kept} B ({} B per migration); peak {peak} B",
        kept / MIGRATIONS
    );
    // The goal is stated against the file's size: at most twice it at the
    // peak (it was four times: the whole file beside its replayed keys,
    // then those keys beside the snapshot decoded from them).
    assert!(
        peak <= 2 * file,
        "peak {peak} B for a file of {file} B (snapshot {kept} B)"
    );
    // The replayed keys are freed as they are decoded, and the file is
    // read a piece (1 MiB) at a time: the peak is the snapshot plus a
    // piece and what is being decoded, never the raw keys and the snapshot
    // whole at once.
    assert!(
        peak <= kept + kept / 4 + (1 << 20),
        "peak {peak} B for a snapshot of {kept} B (file {file} B)"
    );
    // Decoded as the journal is replayed, no raw key map at all: the peak
    // is the snapshot, one piece of the file and the decoder's maps (it was
    // the snapshot plus a quarter and a piece, the raw values being freed
    // only as they were decoded).
    assert!(
        peak <= kept + kept / 8 + (1 << 20),
        "peak {peak} B for a snapshot of {kept} B (file {file} B)"
    );
    // An `ok` entry without unknown fields is 192 bytes (its empty `Extra`
    // one pointer, not a 72-byte map): with its digest-pinned image and
    // batch, attempt count and full B-tree nodes about 430 bytes.
    assert!(
        kept <= 450 * MIGRATIONS,
        "the snapshot keeps {kept} B, {} B per migration",
        kept / MIGRATIONS
    );
    // One migration's boxed entry and attempt count, in full B-tree nodes
    // (about 490 bytes with a digest-pinned image): inline entries in
    // half-empty nodes took about twice that.
    assert!(
        kept <= 600 * MIGRATIONS,
        "the snapshot keeps {kept} B, {} B per migration",
        kept / MIGRATIONS
    );
}
