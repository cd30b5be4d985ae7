//! One record per mutation, appended into the preallocated tail, and a
//! crash at every byte of an append.

use super::*;

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
    rt.block_on(ledger.write(&entries(0..1, EntryState::Legacy), WriteMode::OnlyIfAbsent))
        .unwrap();
    assert_eq!(bytes(&path), file, "no-op calls must not touch the file");
    // A multi-key write is one record (atomic).
    rt.block_on(ledger.write(
        &[
            sample_record(5, EntryState::Ok),
            sample_record(6, EntryState::Ok),
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
fn a_run_step_stores_its_records_and_the_next_attempt_mark_in_one_record() {
    let (_dir, path) = scratch();
    let ledger = journaled(&path);
    let before = record_starts(&bytes(&path)).len();
    let rt = rt();
    let records = [sample_record(3, EntryState::Ok)];
    let report = rt
        .block_on(ledger.write_step(&step_of(&records, &slug(4), "run-1")))
        .unwrap();
    assert_eq!(report.attempts, Some(1));
    assert_eq!(
        record_starts(&bytes(&path)).len(),
        before + 1,
        "one append (one fdatasync) for the records and the mark"
    );
    let raw = read_raw(&path).unwrap().unwrap();
    assert!(raw.contains_key("a.s-4"));
    assert_eq!(
        rt.block_on(FileLedger::new(&path).read())
            .unwrap()
            .unwrap()
            .entry(&slug(3)),
        Some(&records[0].1)
    );
    // The same step again (a lost reply retried): nothing new to store.
    let file = bytes(&path);
    let again = rt
        .block_on(ledger.write_step(&StepWrite {
            records: &[],
            ..step_of(&records, &slug(4), "run-1")
        }))
        .unwrap();
    assert_eq!(again.attempts, Some(1));
    assert_eq!(
        bytes(&path),
        file,
        "a step with nothing new must not append"
    );
}

#[test]
fn a_crash_at_every_byte_of_a_step_stores_its_records_and_mark_together_or_not_at_all() {
    let (_dir, path, ledger, rt) = journaled_with_runtime();
    let before = read_raw(&path).unwrap().unwrap();
    let start = bytes(&path).len();
    let records = [sample_record(3, EntryState::Ok)];
    rt.block_on(ledger.write_step(&step_of(&records, &slug(4), "run-1")))
        .unwrap();
    let file = bytes(&path);
    let after = read_raw(&path).unwrap().unwrap();
    for cut in start..file.len() {
        let read = read_cut(&path, &file, cut).unwrap().unwrap();
        assert_eq!(
            read, before,
            "cut at {cut}: neither the record nor the mark"
        );
    }
    assert_eq!(read_cut(&path, &file, file.len()).unwrap().unwrap(), after);
}

#[test]
fn a_step_the_budget_cannot_hold_stores_neither_its_records_nor_its_mark() {
    let (_dir, path) = scratch();
    let rt = rt();
    let setup = FileLedger::new(&path).with_budget(None);
    rt.block_on(setup.create(&[sample_record(0, EntryState::Ok)]))
        .unwrap();
    let used = read_raw(&path)
        .unwrap()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.len() + v.len()) as u64)
        .sum::<u64>();
    let records = [sample_record(1, EntryState::Ok)];
    let record_bytes = {
        let probe_path = path.with_extension("probe");
        let probe = FileLedger::new(&probe_path).with_budget(None);
        rt.block_on(probe.create(&records)).unwrap();
        let raw = read_raw(&probe_path).unwrap().unwrap();
        raw.iter()
            .map(|(k, v)| (k.len() + v.len()) as u64)
            .sum::<u64>()
    };
    // Room for the records alone, not for the mark as well.
    let ledger = FileLedger::new(&path).with_budget(Some(used + record_bytes));
    let file = bytes(&path);
    match rt.block_on(ledger.write_step(&step_of(&records, &slug(2), "run-1"))) {
        Err(LedgerError::Full { .. }) => {}
        other => panic!("a step above the budget must be refused, got {other:?}"),
    }
    assert_eq!(bytes(&path), file, "nothing appended");
    // Records alone fit.
    rt.block_on(ledger.write_step(&StepWrite {
        attempt: None,
        ..step_of(&records, &slug(2), "run-1")
    }))
    .unwrap();
    assert!(read_raw(&path).unwrap().unwrap().contains_key("m.s-1"));
}

#[test]
fn the_run_lock_is_appended_to_the_ledger_file_and_never_replaces_it() {
    let (_dir, path) = scratch();
    let ledger = journaled(&path);
    let before = bytes(&path);
    let inode = std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(&path).unwrap());
    let rt = rt();
    let revision = |l: &FileLedger| rt.block_on(l.read()).unwrap().unwrap().revision;
    let first = revision(&ledger);
    let lease = rt
        .block_on(ledger.acquire("runner", Duration::from_secs(60)))
        .unwrap();
    // Another process sees it: the lock is in the file.
    assert!(matches!(
        rt.block_on(FileLedger::new(&path).acquire("other", Duration::from_secs(60))),
        Err(LedgerError::LockHeld { .. })
    ));
    let lease = rt
        .block_on(ledger.renew(&lease, Duration::from_secs(60)))
        .unwrap();
    rt.block_on(ledger.release(&lease)).unwrap();
    let after = bytes(&path);
    let end = |b: &[u8]| b.iter().rposition(|&c| c == b'\n').unwrap() + 1;
    assert_eq!(
        after[..end(&before)],
        before[..end(&before)],
        "the lock's records are appended after the ledger's"
    );
    assert_eq!(
        std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(&path).unwrap()),
        inode,
        "the lock must not replace the ledger file"
    );
    let raised = |r: Option<String>| r.unwrap().parse::<u64>().unwrap();
    assert_eq!(
        raised(revision(&FileLedger::new(&path))),
        raised(first) + 3,
        "each lock change raises the revision"
    );
}

/// Asserts that after `file` (of journaled records, the last starting at
/// `last`) was torn at byte `cut`, the next writer's attempt mark lands
/// after the intact records, and the ledger holds their `intact` keys and
/// the mark.
#[track_caller]
fn assert_the_next_writer_appends_after(
    rt: &tokio::runtime::Runtime,
    path: &Path,
    file: &[u8],
    last: usize,
    intact: usize,
    cut: usize,
) {
    rt.block_on(FileLedger::new(path).note_attempt(&slug(9), "after-crash", 0))
        .unwrap();
    let repaired = bytes(path);
    assert!(repaired.starts_with(&file[..last]), "cut at {cut}");
    assert_eq!(record_starts(&repaired).len(), record_starts(file).len());
    let raw = read_raw(path).unwrap().unwrap();
    assert!(raw.contains_key("a.s-9"), "cut at {cut}");
    assert_eq!(raw.len(), intact + 1, "cut at {cut}");
}

#[test]
fn a_crash_at_every_byte_of_an_append_loses_only_that_record() {
    let (_dir, path, file, last) = journaled_file();
    let without_last = read_cut(&path, &file, last).unwrap().unwrap();
    let with_last = read_cut(&path, &file, file.len()).unwrap().unwrap();
    assert_ne!(without_last, with_last);
    let rt = rt();
    for cut in last..file.len() {
        // The append was cut after `cut` bytes: never acknowledged.
        let read = read_cut(&path, &file, cut).unwrap().unwrap();
        assert_eq!(
            read, without_last,
            "cut at {cut}: a torn final record is dropped, nothing else"
        );
        // The next writer truncates the torn bytes and appends after them.
        assert_the_next_writer_appends_after(&rt, &path, &file, last, without_last.len(), cut);
    }
    // The whole record, newline included, is acknowledged and kept.
    assert_eq!(
        read_cut(&path, &file, file.len()).unwrap().unwrap(),
        with_last
    );
}

#[test]
fn appends_go_into_the_preallocated_tail_and_the_file_grows_only_by_whole_steps() {
    let (_dir, path, ledger, rt) = journaled_with_runtime();
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
    let (_dir, path, file, last) = journaled_file();
    let raw = std::fs::read(&path).unwrap();
    assert!(raw.len() > file.len(), "the file has a preallocated tail");
    let without_last = read_torn(&path, &file, last, raw.len());
    let rt = rt();
    for cut in last..file.len() {
        // The record reached the disk up to `cut`; the tail after it is
        // still zeros. Never acknowledged: dropped, and the next writer
        // writes over it.
        assert_eq!(
            read_torn(&path, &file, cut, raw.len()),
            without_last,
            "cut at {cut}"
        );
        assert_the_next_writer_appends_after(&rt, &path, &file, last, without_last.len(), cut);
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
    let (_dir, path, file, last) = journaled_file();
    let mut zeroed = file.clone();
    for b in &mut zeroed[last..] {
        *b = 0;
    }
    std::fs::write(&path, &zeroed).unwrap();
    let expected = read_cut(&path, &file, last).unwrap();
    std::fs::write(&path, &zeroed).unwrap();
    assert_eq!(read_raw(&path).unwrap(), expected);
}
