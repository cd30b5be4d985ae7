//! Damaged and cut-short files: unreadable, naming the file and the offset,
//! never absent.

use super::*;

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
    let earlier = read_cut(&path, &file, last).unwrap();
    for cut in [last + 1, (last + file.len()) / 2, file.len() - 1] {
        assert_eq!(
            read_cut(&path, &file, cut).unwrap(),
            earlier,
            "cut at {cut}"
        );
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
