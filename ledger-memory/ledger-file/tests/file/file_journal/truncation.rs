//! A file cut short inside its acknowledged records (a bad restore, a copy
//! that stopped early) is told apart from a crash during the last append:
//! the writer only ever writes a record into NUL bytes already on disk, so
//! a torn append is followed by NULs, and a file that ends inside a record
//! without them lost records that were acknowledged.

use super::*;

/// Where each record ends (the offset after its newline).
fn record_ends(file: &[u8]) -> Vec<usize> {
    let starts = record_starts(file);
    starts
        .iter()
        .skip(1)
        .copied()
        .chain(std::iter::once(file.len()))
        .collect()
}

#[test]
fn a_file_cut_inside_an_acknowledged_record_is_refused_naming_the_file_and_offset() {
    let (_dir, path, file, _last) = journaled_file();
    let starts = record_starts(&file);
    let ends = record_ends(&file);
    // Every record but the last was followed by another, acknowledged one:
    // a cut inside any of them loses acknowledged records, never a torn
    // append. (The snapshot, record 0, is covered by its own test.)
    for i in 1..starts.len() - 1 {
        for cut in [starts[i] + 1, (starts[i] + ends[i]) / 2, ends[i] - 1] {
            std::fs::write(&path, &file[..cut]).unwrap();
            assert_unreadable_at(&path, starts[i], &format!("record {i} cut at {cut}"));
            let err = rt().block_on(FileLedger::new(&path).read()).unwrap_err();
            assert!(
                err.to_string().contains("cut short"),
                "record {i} cut at {cut}: {err}"
            );
        }
    }
}

#[test]
fn a_copy_cut_at_a_block_boundary_inside_the_records_is_refused() {
    // Large records, so that a 4 KiB boundary falls inside one that an
    // acknowledged record follows.
    let (_dir, path) = scratch();
    let ledger = FileLedger::new(&path).with_budget(None);
    let rt = rt();
    rt.block_on(ledger.create(&[sample_record(0, EntryState::Ok)]))
        .unwrap();
    for i in 1..6usize {
        let mut entry = sample_entry(EntryState::Failed, i as u32);
        entry.reason = Some("exit-status-1".into());
        entry.message = Some("x".repeat(3000));
        rt.block_on(ledger.write(&[(slug(i), entry)], WriteMode::Replace))
            .unwrap();
    }
    let file = bytes(&path);
    let cut = 8192;
    let starts = record_starts(&file);
    let inside = *starts.iter().rfind(|&&s| s < cut).unwrap();
    assert!(
        starts.iter().any(|&s| s > cut),
        "an acknowledged record follows the cut"
    );
    std::fs::write(&path, &file[..cut]).unwrap();
    assert_unreadable_at(&path, inside, "a copy cut at 8 KiB");
}

#[test]
fn a_torn_last_append_followed_by_its_preallocated_zeros_is_still_dropped() {
    let (_dir, path, file, last) = journaled_file();
    let raw = std::fs::read(&path).unwrap();
    let without_last = read_torn(&path, &file, last, raw.len());
    for cut in [last + 1, (last + file.len()) / 2, file.len() - 1] {
        assert_eq!(
            read_torn(&path, &file, cut, raw.len()),
            without_last,
            "cut at {cut}"
        );
    }
}

#[test]
fn every_append_leaves_zeros_after_the_last_record() {
    // What a reader relies on to tell a torn append from a cut: the writer
    // never leaves a record ending the file (a tear in it would have no NUL
    // after it).
    let (_dir, path, ledger, rt) = journaled_with_runtime();
    for i in 0..200 {
        rt.block_on(ledger.note_attempt(&slug(10 + i), "run-1", 0))
            .unwrap();
        let raw = std::fs::read(&path).unwrap();
        assert_eq!(
            raw.last(),
            Some(&0),
            "append {i}: no NUL after the last record"
        );
    }
}
