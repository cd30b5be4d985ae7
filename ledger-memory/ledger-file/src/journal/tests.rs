use super::*;

// The bit-by-bit oracle the integration tests also use (one copy), relative to `src/journal/`.
#[path = "../../tests/file/oracle/crc32c.rs"]
mod oracle;

#[test]
fn crc32c_matches_the_standard_check_value() {
    assert_eq!(crc32c(b"123456789"), 0xe306_9283);
    assert_eq!(crc32c(b""), 0);
    let long: Vec<u8> = (0..1000u32).map(|i| (i * 7) as u8).collect();
    // Slice-by-8 with its bytewise tail agrees with the bit-by-bit oracle at every split.
    for n in [0, 1, 7, 8, 9, 63, 64, 65, 1000] {
        assert_eq!(crc32c(&long[..n]), oracle::crc32c(&long[..n]), "{n}");
    }
}

fn object() -> Object {
    Object::new(
        3,
        [("m.a".to_owned(), "{\"state\":\"ok\"}\n".to_owned())]
            .into_iter()
            .collect(),
    )
}

#[test]
fn a_file_round_trips_and_a_torn_append_is_dropped() {
    let mut bytes = encode_file(&object());
    let put = encode_change(&Change::Put {
        revision: 4,
        puts: vec![("a.a".into(), "1".into())],
    });
    let whole = bytes.len() as u64;
    bytes.extend(&put);
    let parsed = parse(&bytes).unwrap();
    assert_eq!(parsed.replayed.torn, 0);
    let state = parsed.state.unwrap();
    assert_eq!(state.revision(), 4);
    assert_eq!(state.data().len(), 2);
    // Torn inside the zeros it was written into: dropped.
    for cut in 1..put.len() {
        let mut torn = bytes[..whole as usize + cut].to_vec();
        torn.resize(bytes.len() + 1, 0);
        let parsed = parse(&torn).unwrap();
        assert_eq!(parsed.replayed.end, whole, "cut {cut}");
        assert_eq!(parsed.replayed.torn, torn.len() as u64 - whole);
        assert_eq!(parsed.state.unwrap(), object());
    }
    // The same bytes with no zero after them: the file was cut short.
    for cut in 1..put.len() {
        let err = parse(&bytes[..whole as usize + cut]).unwrap_err();
        assert_eq!(err.offset, whole, "cut {cut}");
        assert_eq!(err.reason, CUT_SHORT);
    }
}

#[test]
fn a_torn_snapshot_is_corrupt_never_absent() {
    let bytes = encode_file(&object());
    for cut in TAG.len()..bytes.len() {
        let err = parse(&bytes[..cut]).unwrap_err();
        assert_eq!(err.offset, TAG.len() as u64, "cut {cut}: {err:?}");
    }
}

/// A journal that exercises every kind of key: shared records (one with a
/// base, one unreadable), compact and full entries, an entry replaced, an
/// entry naming a record that only a later write stores, corrupt values,
/// attempt marks replaced and corrupted and repaired, a key that is not a
/// slug's, `version` and another owner's key.
fn varied_journal() -> Vec<u8> {
    let ok = |h: &str, c: Option<&str>| match c {
        Some(c) => format!(r#"{{"s":"ok","t":"2026-12-01T14:50:00Z","h":"{h}","c":"{c}","n":1}}"#),
        None => format!(r#"{{"state":"ok","at":"2026-12-01T14:50:00Z","sha256":"{h}"}}"#),
    };
    let sha = "b8e4fddccbadcafcf5cb86717628d84967bf5293982bcbb837aef9799389a922";
    let mark = |n: u32| format!(r#"{{"count":{n},"token":"295fc24f40540a05"}}"#);
    let lib =
        r#"{"lib_sha256":"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"}"#;
    let puts: Vec<Vec<(String, String)>> = vec![
        vec![("a.one".into(), mark(1))],
        vec![
            ("c.1".into(), lib.into()),
            ("c.2".into(), r#"{"base":"1","batch":"00001-v1"}"#.into()),
            ("m.one".into(), ok(sha, Some("2"))),
            ("a.two".into(), mark(1)),
        ],
        vec![
            (
                "m.two".into(),
                r#"{"s":"not-yet","t":"2026-12-01T14:50:00Z","n":1}"#.into(),
            ),
            ("a.two".into(), mark(2)),
        ],
        vec![
            ("m.two".into(), ok(sha, None)),
            ("m.three".into(), ok(sha, Some("3"))),
        ],
        vec![
            ("c.3".into(), r#"{"batch":"00002-v2"}"#.into()),
            ("c.9".into(), "{".into()),
        ],
        vec![("m.four".into(), "{".into()), ("a.four".into(), "x".into())],
        vec![
            ("a.one".into(), "broken".into()),
            ("m.Bad_Key".into(), ok(sha, None)),
        ],
        vec![("a.four".into(), mark(3)), ("version".into(), "12".into())],
        vec![
            ("owner-note".into(), "kept".into()),
            ("a.Bad".into(), mark(1)),
        ],
    ];
    let mut bytes = TAG.as_bytes().to_vec();
    bytes.extend(encode_object(&Object::new(1, BTreeMap::new())));
    for (i, puts) in puts.into_iter().enumerate() {
        bytes.extend(encode_change(&Change::Put {
            revision: i as u64 + 2,
            puts,
        }));
    }
    bytes
}

#[test]
fn decoding_while_replaying_gives_the_snapshot_of_the_replayed_object() {
    let bytes = varied_journal();
    for budget in [None, Some(1 << 20)] {
        let (parsed, _) = load(&bytes[..], bytes.len() as u64).unwrap();
        let object = parsed.state.unwrap();
        let mut decoding = Decoding::default();
        let (_, replayed, _) = load_into(&bytes[..], bytes.len() as u64, &mut decoding).unwrap();
        assert_eq!(replayed, parsed.replayed);
        let decoded = decoding.finish(budget).unwrap().unwrap();
        let expected = object.snapshot(budget);
        assert_eq!(decoded, expected);
        // What the journal was built to exercise is there.
        assert_eq!(decoded.records.len(), 4);
        assert_eq!(decoded.corrupt().count(), 1);
        assert_eq!(decoded.attempts_started.len(), 2);
        assert_eq!(decoded.unreadable_keys.len(), 4);
        assert!(
            decoded
                .entry(&migration_core::Slug::parse("three").unwrap())
                .is_some()
        );
    }
}

#[test]
fn decoding_gives_up_on_a_shared_record_rewritten_after_entries_named_it() {
    let mut bytes = varied_journal();
    let rev = parse(&bytes).unwrap().state.unwrap().revision();
    bytes.extend(encode_change(&Change::Put {
        revision: rev + 1,
        puts: vec![("c.2".into(), r#"{"batch":"other"}"#.into())],
    }));
    let mut decoding = Decoding::default();
    load_into(&bytes[..], bytes.len() as u64, &mut decoding).unwrap();
    assert_eq!(decoding.finish(None).unwrap_err().id, "2");
}

#[test]
fn decoding_an_absent_object_gives_no_snapshot() {
    let bytes =
        br#"{"format":"migration-ledger/v1","ledger":null,"lock":null,"lock_generation":0}"#;
    let mut decoding = Decoding::default();
    load_into(&bytes[..], bytes.len() as u64, &mut decoding).unwrap();
    assert_eq!(decoding.finish(None).unwrap(), None);
}
