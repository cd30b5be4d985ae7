use super::*;

// The bit-by-bit oracle the integration tests also use (one copy), relative to `src/journal/`.
#[path = "../../tests/oracle/crc32c.rs"]
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
    for cut in 1..put.len() {
        let parsed = parse(&bytes[..whole as usize + cut]).unwrap();
        assert_eq!(parsed.replayed.end, whole, "cut {cut}");
        assert_eq!(parsed.replayed.torn, cut as u64);
        assert_eq!(parsed.state.unwrap(), object());
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
