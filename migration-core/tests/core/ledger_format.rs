//! The stored format across engine versions (CONTRACT.md §5.2): entries the
//! previous engine wrote read back as the same entries, compact entries and
//! their shared records round-trip, a reference that dangles is corrupt,
//! and the previous engine (its decoder frozen below, as of commit e5c2eda)
//! refuses every compact entry instead of misreading it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use migration_core::entry::{ContextIndex, flat_data};
use migration_core::ledger::{AttemptMark, fingerprint};
use migration_core::testing::fixtures::{NOW, s};
use migration_core::{EntryState, LedgerEntry, LedgerSnapshot, Record, Sha256Digest, Slug};

/// The decoder of the engine before the compact form, frozen.
use migration_core::testing::previous_engine;

const SCRIPT_SHA: &str = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";

fn image(run: u32) -> String {
    format!(
        "ghcr.io/cozystack/cozystack/migrations:v1.7.{run}@sha256:{}",
        Sha256Digest::of(&run.to_be_bytes())
    )
}

/// An entry as the runner records it in run `run`, batch `batch`.
fn runner_entry(state: EntryState, run: u32, batch: &str) -> LedgerEntry {
    let mut entry = LedgerEntry {
        sha256: Some(Sha256Digest::parse_hex(SCRIPT_SHA).unwrap()),
        lib_sha256: Some(Sha256Digest::of(format!("lib {run}").as_bytes())),
        batch: Some(batch.to_owned()),
        image: Some(image(run)),
        attempts: 1,
        ..LedgerEntry::new(state, NOW)
    };
    if state.needs_reason() {
        entry.reason = Some("exit-status-1".into());
        entry.message = Some("Error from server (NotFound): \"x\" not found\n".into());
    }
    entry
}

fn snapshot_of(data: &BTreeMap<String, String>) -> LedgerSnapshot {
    LedgerSnapshot::from_raw_data(data.iter().map(|(k, v)| (k.as_str(), v.as_str())), None)
}

#[test]
fn entries_the_previous_engine_stored_decode_to_the_same_entries() {
    // Values exactly as the engine at e5c2eda wrote them.
    let stored = [
        (
            "m.redis-failover-group-label",
            format!(
                r#"{{"state":"ok","at":"2026-08-12T10:04:00Z","sha256":"{SCRIPT_SHA}","lib_sha256":"{}","batch":"00042-v1.7.12","image":"{}","attempts":1}}"#,
                Sha256Digest::of(b"lib 3"),
                image(3)
            ),
            LedgerEntry {
                lib_sha256: Some(Sha256Digest::of(b"lib 3")),
                ..runner_entry(EntryState::Ok, 3, "00042-v1.7.12")
            },
        ),
        (
            "m.failed-one",
            format!(
                r#"{{"state":"failed","at":"2026-08-12T10:04:00Z","sha256":"{SCRIPT_SHA}","attempts":3,"reason":"exit-status-2","message":"boom"}}"#
            ),
            LedgerEntry {
                sha256: Some(Sha256Digest::parse_hex(SCRIPT_SHA).unwrap()),
                attempts: 3,
                reason: Some("exit-status-2".into()),
                message: Some("boom".into()),
                ..LedgerEntry::new(EntryState::Failed, NOW)
            },
        ),
        (
            "m.old-legacy",
            r#"{"state":"legacy","at":"2026-08-12T10:04:00Z","batch":"00000-legacy","attempts":0}"#
                .to_owned(),
            LedgerEntry {
                batch: Some("00000-legacy".into()),
                ..LedgerEntry::new(EntryState::Legacy, NOW)
            },
        ),
        (
            // Unknown fields, some spelled like the compact form's, stay
            // unknown fields of a full-form entry.
            "m.with-extras",
            r#"{"state":"not-yet","at":"2026-08-12T10:04:00Z","attempts":2,"reason":"exit-status-75","message":"later","n":9,"c":"1","node":"n1"}"#
                .to_owned(),
            LedgerEntry {
                attempts: 2,
                reason: Some("exit-status-75".into()),
                message: Some("later".into()),
                extra: serde_json::from_str(r#"{"n":9,"c":"1","node":"n1"}"#).unwrap(),
                ..LedgerEntry::new(EntryState::NotYet, NOW)
            },
        ),
    ];
    let mut data = BTreeMap::new();
    for (key, raw, expected) in &stored {
        assert_eq!(&LedgerEntry::decode(key, raw).unwrap(), expected, "{key}");
        data.insert((*key).to_owned(), raw.clone());
    }
    // Beside compact entries and shared records of this engine.
    data.extend(flat_data([(
        &s("new-one"),
        &runner_entry(EntryState::Ok, 4, "00043-v1.8.0"),
    )]));
    data.insert(
        "a.redis-failover-group-label".into(),
        r#"{"count":1,"token":"cozystack-migrate-7f9c4d-x2v8q/redis-failover-group-label/1786529040123456789/40"}"#.into(),
    );
    let snapshot = snapshot_of(&data);
    for (key, _, expected) in &stored {
        let slug = Slug::parse(&key[2..]).unwrap();
        assert_eq!(snapshot.entry(&slug), Some(expected), "{key}");
    }
    assert!(
        snapshot.unreadable_keys.is_empty(),
        "{:?}",
        snapshot.unreadable_keys
    );
    assert_eq!(
        snapshot.attempts_started[&s("redis-failover-group-label")],
        1
    );
    // An entry re-recorded keeps its unknown fields; those spelled like the
    // compact form's force the full form, so they cannot be misread.
    let (_, _, with_extras) = &stored[3];
    assert!(!with_extras.fits_compact());
    let again = flat_data([(&s("with-extras"), with_extras)]);
    assert_eq!(again.len(), 1);
    assert_eq!(
        snapshot_of(&again).entry(&s("with-extras")),
        Some(with_extras)
    );
}

#[test]
fn every_state_round_trips_through_the_compact_form_and_its_shared_records() {
    let mut entries = Vec::new();
    for (i, state) in EntryState::ALL.into_iter().enumerate() {
        entries.push((
            s(&format!("run-a-{i}")),
            runner_entry(state, 1, "00001-v1.0.0"),
        ));
        entries.push((
            s(&format!("run-b-{i}")),
            runner_entry(state, 2, "00002-v1.1.0"),
        ));
        entries.push((s(&format!("bare-{i}")), {
            let mut e = runner_entry(state, 1, "x");
            (e.batch, e.image, e.lib_sha256) = (None, None, None);
            e
        }));
    }
    entries.push((
        s("batch-only"),
        LedgerEntry {
            batch: Some("00000-legacy".into()),
            ..LedgerEntry::new(EntryState::Legacy, NOW)
        },
    ));
    let data = flat_data(entries.iter().map(|(s, e)| (s, e)));
    let snapshot = snapshot_of(&data);
    for (slug, entry) in &entries {
        assert_eq!(snapshot.entry(slug), Some(entry), "{slug}");
    }
    // Two runs: each run's image and lib/ digest once, each batch once on
    // top of its run, the legacy batch on its own.
    let records: Vec<&String> = data.keys().filter(|k| k.starts_with("c.")).collect();
    assert_eq!(records.len(), 5, "{records:?}");
    assert_eq!(
        data["c.2"], r#"{"base":"1","batch":"00001-v1.0.0"}"#,
        "a batch names its run's record"
    );
    assert_eq!(
        data["m.run-a-0"],
        format!(r#"{{"s":"ok","t":"2026-08-12T10:04:00Z","h":"{SCRIPT_SHA}","c":"2","n":1}}"#)
    );
    assert_eq!(
        data["m.bare-3"],
        r#"{"s":"revoked","t":"2026-08-12T10:04:00Z","h":"ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad","n":1}"#
    );
}

#[test]
fn a_writer_reuses_stored_shared_records_and_allocates_above_every_stored_id() {
    let first = flat_data([(&s("a"), &runner_entry(EntryState::Ok, 1, "00001-v1.0.0"))]);
    let mut data = first.clone();
    data.insert("c.41".into(), r#"{"batch":"hand-written"}"#.into());
    let mut index = ContextIndex::of_flat(&data);
    let same = runner_entry(EntryState::Failed, 1, "00001-v1.0.0").stored(&mut index);
    assert!(same.contexts.is_empty(), "the stored records are reused");
    assert!(same.value.contains(r#""c":"2""#), "{}", same.value);
    let other = runner_entry(EntryState::Ok, 1, "00002-v1.1.0").stored(&mut index);
    assert_eq!(
        other.contexts,
        [(
            "42".to_owned(),
            r#"{"base":"1","batch":"00002-v1.1.0"}"#.to_owned()
        )]
    );
}

#[test]
fn a_dangling_or_unreadable_shared_record_makes_the_entry_corrupt_naming_both_keys() {
    let mut data = flat_data([
        (&s("fine"), &runner_entry(EntryState::Ok, 1, "00001-v1.0.0")),
        (
            &s("on-bad-base"),
            &runner_entry(EntryState::Ok, 2, "00002-v1.1.0"),
        ),
    ]);
    let compact = |c: &str| format!(r#"{{"s":"ok","t":"2026-08-12T10:04:00Z","c":"{c}","n":1}}"#);
    data.insert("m.dangling".into(), compact("77"));
    data.insert("m.on-corrupt".into(), compact("9"));
    data.insert("c.9".into(), r#"{"batch":"b","flavour":"new"}"#.into());
    data.insert("m.on-chain".into(), compact("10"));
    data.insert("c.10".into(), r#"{"base":"2","batch":"b"}"#.into());
    data.insert("m.on-twice".into(), compact("11"));
    data.insert("c.11".into(), r#"{"base":"1","image":"again"}"#.into());
    // The base of on-bad-base's batch record is damaged by hand.
    data.insert("c.3".into(), "{".into());
    let snapshot = snapshot_of(&data);
    let reason = |slug: &str| match snapshot.record(&s(slug)) {
        Some(Record::Corrupt(c)) => {
            assert_eq!(c.key, format!("m.{slug}"));
            c.reason.clone()
        }
        other => panic!("{slug}: expected corrupt, got {other:?}"),
    };
    assert!(reason("dangling").contains("'c.77', which does not exist"));
    assert!(reason("on-corrupt").contains("'c.9', which is unreadable"));
    assert!(reason("on-chain").contains("has a base of its own"));
    assert!(reason("on-twice").contains("gives 'image' twice"));
    assert!(
        reason("on-bad-base").contains("c.3"),
        "{}",
        reason("on-bad-base")
    );
    assert!(
        snapshot.entry(&s("fine")).is_some(),
        "one bad record hides nothing else"
    );
    let unreadable = migration_core::testing::unreadable_keys(&snapshot);
    assert_eq!(
        unreadable,
        ["c.3", "c.9"],
        "unreadable shared records are reported by key"
    );
}

#[test]
fn the_previous_engine_reports_every_compact_entry_corrupt_and_reads_marks_right() {
    let entries: Vec<(Slug, LedgerEntry)> = EntryState::ALL
        .into_iter()
        .enumerate()
        .map(|(i, state)| (s(&format!("m{i}")), runner_entry(state, 1, "00001-v1.0.0")))
        .collect();
    let data = flat_data(entries.iter().map(|(s, e)| (s, e)));
    for (key, value) in data.iter().filter(|(k, _)| k.starts_with("m.")) {
        let err = previous_engine::decode(value).unwrap_err();
        // Its snapshot turns this into Record::Corrupt naming the key: the
        // plan refuses any such slug on its path (§5.4) rather than run or
        // skip it.
        assert!(err.contains("missing field `state`"), "{key}: {err}");
    }
    // Shared records are keys it does not know (another owner's: ignored).
    assert!(data.keys().any(|k| k.starts_with("c.")));
    // A mark keeps its shape: an older engine reads the count right, and its
    // own tokens never match a fingerprint, so it counts its executions.
    let mark = AttemptMark::next(None, "holder/slug/1786529040123456789/1", 2);
    let old = previous_engine::decode_mark(&mark.encode()).unwrap();
    assert_eq!((old.count, old.token.len()), (3, fingerprint("x").len()));
    // And the full form this engine still writes when the compact one
    // cannot hold an entry is exactly what it always read.
    let full = runner_entry(EntryState::Ok, 1, "b").encode();
    let old = previous_engine::decode(&full).unwrap();
    assert_eq!(old.state, EntryState::Ok);
    assert_eq!(old.at, NOW);
    assert_eq!(
        (old.sha256.is_some(), old.lib_sha256.is_some()),
        (true, true)
    );
    assert_eq!(
        (old.batch.as_deref(), old.image, old.attempts),
        (Some("b"), Some(image(1)), 1)
    );
    assert!(old.extra.is_empty());
}

#[test]
fn the_size_a_run_reserves_bounds_what_storing_the_entry_costs() {
    use migration_core::entry::StoredSize;
    let mut sizes = StoredSize::default();
    let mut index = ContextIndex::default();
    let mut entries = Vec::new();
    for run in 0..3 {
        for batch in 0..3 {
            for state in EntryState::ALL {
                entries.push(runner_entry(state, run, &format!("{batch:05}-v1.{run}.0")));
            }
        }
    }
    let mut extra = runner_entry(EntryState::Ok, 9, "b");
    extra.extra.insert("n".into(), serde_json::json!(1));
    entries.push(extra);
    for (i, entry) in entries.iter().enumerate() {
        let slug = s(&format!("slug-{i}"));
        let stored = entry.stored(&mut index);
        let actual = (2
            + slug.as_str().len()
            + stored.value.len()
            + stored
                .contexts
                .iter()
                .map(|(id, t)| 2 + id.len() + t.len())
                .sum::<usize>()) as u64;
        let bound = sizes.bytes(&slug, entry, 0);
        assert!(bound >= actual, "{i}: bound {bound} < stored {actual}");
        // Each shared record is counted once: later entries of a run and
        // batch cost about their own bytes.
        assert_eq!(sizes.count(&slug, entry, 0), bound);
        if stored.contexts.is_empty() {
            assert!(bound - actual <= 19, "{i}: {bound} vs {actual}");
        }
    }
    let largest = AttemptMark::largest().encode().len();
    assert_eq!(
        largest,
        AttemptMark::next(None, &"t".repeat(512), u32::MAX - 1)
            .encode()
            .len()
    );
}

#[test]
fn the_fast_path_for_the_full_form_agrees_with_the_general_decoder() {
    let values = [
        migration_core::testing::PREVIOUS_FORMAT_OK.to_owned(),
        r#"{"state":"not-yet","at":"2026-08-12T10:04:00Z","reason":"r","message":"m","n":3,"c":"9"}"#
            .to_owned(),
        runner_entry(EntryState::Failed, 2, "00002-v1.1.0").encode(),
    ];
    for raw in &values {
        let fast = LedgerEntry::decode("m.x", raw).unwrap();
        let value: serde_json::Value = serde_json::from_str(raw).unwrap();
        assert_eq!(
            LedgerEntry::from_value("m.x", value).unwrap(),
            fast,
            "{raw}"
        );
        // Reordered, it takes the general path and reads the same.
        let reordered = raw.replacen(r#"{"state":"#, r#"{"zz":0,"state":"#, 1);
        let mut general = LedgerEntry::decode("m.x", &reordered).unwrap();
        general.extra.remove("zz");
        assert_eq!(general, fast, "{reordered}");
    }
    for raw in [
        r#"{"state":"ok","at":"2026-08-12T10:04:00Z","s":"ok"}"#,
        r#"{"t":"2026-08-12T10:04:00Z","state":"ok","s":"ok"}"#,
    ] {
        let err = LedgerEntry::decode("m.x", raw).unwrap_err();
        assert!(err.reason.contains("ambiguous"), "{raw}: {err}");
    }
}
