//! Compaction: a crash at every step, the file's size, and a long mix of
//! operations checked against the memory ledger.

use super::*;

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
    rt.block_on(handle.create(&entries(0..1, EntryState::Ok)))
        .unwrap();
    rt.block_on(memory.create(&entries(0..1, EntryState::Ok)))
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
            2 if next() % 2 == 0 => {
                let token = format!("t{}", next() % 3);
                let a = rt.block_on(handle.note_attempt(&slug(n), &token, 1));
                let b = rt.block_on(memory.note_attempt(&slug(n), &token, 1));
                assert_eq!(a, b, "step {step}");
            }
            2 => {
                // A run's step: the file ledger's own write, the memory
                // ledger's default (a write, then the mark).
                let token = format!("t{}", next() % 3);
                let records = [(slug(n + 1), sample_entry(EntryState::Ok, step))];
                let target = slug(n);
                let write = step_of(&records, &target, &token);
                let a = rt.block_on(handle.write_step(&write));
                let b = rt.block_on(memory.write_step(&write));
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
