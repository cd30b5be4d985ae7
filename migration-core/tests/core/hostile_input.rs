//! Reliability suite 4, hostile input: every parser is fed arbitrary bytes
//! and structured mutations. No input may panic, allocate without bound, or
//! be rejected without saying where. Figures go to
//! `target/tmp/reliability/hostile-input.txt`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use crate::common;
use migration_core::header::parse_header;
use migration_core::ledger::LedgerSnapshot;
use migration_core::tree::{parse_legacy_map, parse_revoked};
use migration_core::{LedgerEntry, Manifest, Slug, Timestamp};
use proptest::prelude::*;

/// An error message for hostile input stays readable: bounded, single-digit
/// kilobytes at most, whatever the input size.
fn bounded(message: &str) {
    assert!(
        message.len() < 2048,
        "an error message of {} bytes",
        message.len()
    );
}

/// Runs `test` as case `name` of this suite on 512 arbitrary byte strings shorter than
/// `max_len` bytes, each handed over with its number of lines (the highest line a problem
/// found in it may name).
fn check_bytes(
    name: &str,
    max_len: usize,
    test: impl Fn(Vec<u8>, usize) -> Result<(), TestCaseError>,
) {
    common::check(
        "hostile-input",
        name,
        512,
        proptest::collection::vec(any::<u8>(), 0..max_len),
        |bytes| {
            let lines = bytes.split(|&b| b == b'\n').count();
            test(bytes, lines)
        },
    );
}

fn slug_grammar_holds(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 60
        && s.split('-').all(|w| {
            !w.is_empty()
                && w.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        })
}

/// Structured mutations of a valid entry: a field removed, retyped, duplicated or replaced by junk.
fn mutated_entry() -> impl Strategy<Value = String> {
    let valid = r#"{"state":"ok","at":"2026-08-12T10:04:00Z","sha256":"ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad","batch":"00001-v1","attempts":1}"#;
    (0usize..valid.len(), 0usize..8, ".{0,12}").prop_map(move |(at, op, junk)| {
        let mut s = valid.to_owned();
        let at = (0..=at).rev().find(|i| s.is_char_boundary(*i)).unwrap_or(0);
        match op {
            0 => s.insert_str(at, &junk),
            1 => s.truncate(at),
            2 => s = s.replacen("\"ok\"", &format!("\"{junk}\""), 1),
            3 => s = s.replacen("1}", "-1}", 1),
            4 => s = s.replacen("\"attempts\":1", "\"attempts\":1,\"attempts\":2", 1),
            5 => {
                s = s.replacen(
                    "\"at\":\"2026-08-12T10:04:00Z\"",
                    &format!("\"at\":\"{junk}\""),
                    1,
                )
            }
            6 => s = s.replacen("ba78", &junk, 1),
            _ => s = s.replacen("\"state\":\"ok\",", "", 1),
        }
        s
    })
}

#[test]
fn slug_parsing_never_panics_and_accepts_exactly_the_grammar() {
    common::check(
        "hostile-input",
        "slug_parsing_never_panics_and_accepts_exactly_the_grammar",
        512,
        "\\PC{0,80}|[a-z0-9-]{0,70}",
        |input| {
            match Slug::parse(&input) {
                Ok(slug) => prop_assert!(slug_grammar_holds(slug.as_str())),
                Err(e) => {
                    prop_assert!(!slug_grammar_holds(&input));
                    bounded(&e.to_string());
                }
            }
            Ok(())
        },
    );
}

#[test]
fn header_parsing_never_panics_and_names_a_real_line() {
    check_bytes(
        "header_parsing_never_panics_and_names_a_real_line",
        400,
        |bytes, lines| {
            if let Err(errors) = parse_header(Path::new("pre-apply/x"), &bytes) {
                prop_assert!(!errors.is_empty());
                for e in errors {
                    prop_assert_eq!(e.file(), Path::new("pre-apply/x"));
                    prop_assert!(
                        e.line().is_none_or(|l| l >= 1 && l <= lines),
                        "line {:?} of {}",
                        e.line(),
                        lines
                    );
                    bounded(&e.to_string());
                }
            }
            Ok(())
        },
    );
}

#[test]
fn header_mutations_are_rejected_with_a_location() {
    common::check(
        "hostile-input",
        "header_mutations_are_rejected_with_a_location",
        512,
        (
            "#!/bin/sh\n(# cozystack-migration: [a-z=-]{0,20}\n){0,4}",
            "\\PC{0,40}",
        ),
        |(prefix, tail)| {
            let text = format!("{prefix}{tail}");
            if let Err(errors) = parse_header(Path::new("x"), text.as_bytes()) {
                for e in errors {
                    prop_assert!(e.to_string().starts_with("x"), "{}", e);
                }
            }
            Ok(())
        },
    );
}

#[test]
fn manifest_parsing_never_panics_and_names_the_file() {
    common::check(
        "hostile-input",
        "manifest_parsing_never_panics_and_names_the_file",
        512,
        proptest::collection::vec(
            ("\\PC{0,20}", proptest::collection::vec(any::<u8>(), 0..200)),
            0..5,
        ),
        |files| {
            if let Err(errors) = Manifest::parse_files(files.clone()) {
                for e in errors {
                    let text = e.to_string();
                    bounded(&text);
                    prop_assert!(
                        files.iter().any(|(name, _)| text.contains(name.as_str())
                            || text.contains(&name.chars().take(20).collect::<String>())),
                        "{}",
                        text
                    );
                }
            }
            Ok(())
        },
    );
}

#[test]
fn revoked_and_legacy_map_parsing_never_panic_and_name_their_line() {
    check_bytes(
        "revoked_and_legacy_map_parsing_never_panic_and_name_their_line",
        300,
        |bytes, lines| {
            for problems in [
                parse_revoked(Path::new("revoked"), &bytes).err(),
                parse_legacy_map(Path::new("legacy-map"), &bytes).err(),
            ]
            .into_iter()
            .flatten()
            {
                for p in problems {
                    let (file, line) = p.location();
                    prop_assert!(file.is_some());
                    prop_assert!(line.is_some_and(|l| l >= 1 && l <= lines));
                    bounded(&p.to_string());
                }
            }
            Ok(())
        },
    );
}

#[test]
fn ledger_values_are_entries_or_corrupt_never_a_panic() {
    common::check(
        "hostile-input",
        "ledger_values_are_entries_or_corrupt_never_a_panic",
        512,
        "\\PC{0,120}",
        |raw| {
            match LedgerEntry::decode("m.x", &raw) {
                Ok(entry) => {
                    prop_assert_eq!(LedgerEntry::decode("m.x", &entry.encode()).unwrap(), entry)
                }
                Err(c) => {
                    prop_assert_eq!(c.key.as_str(), "m.x");
                    bounded(&c.to_string());
                }
            }
            Ok(())
        },
    );
}

#[test]
fn mutated_entries_round_trip_or_are_corrupt() {
    common::check(
        "hostile-input",
        "mutated_entries_round_trip_or_are_corrupt",
        512,
        mutated_entry(),
        |raw| {
            if let Ok(entry) = LedgerEntry::decode("m.x", &raw) {
                prop_assert_eq!(LedgerEntry::decode("m.x", &entry.encode()).unwrap(), entry);
            }
            Ok(())
        },
    );
}

#[test]
fn a_last_failure_key_without_a_slug_is_one_unreadable_key() {
    // The case the property below once found: its accounting predated
    // last failures (`f.` keys) and counted none of them.
    let snapshot = LedgerSnapshot::from_raw_data([("f.", " ")], None);
    assert_eq!(snapshot.unreadable_keys.len(), 1);
    assert!(snapshot.failures.is_empty());
}

#[test]
fn ledger_data_with_arbitrary_keys_classifies_every_key() {
    common::check(
        "hostile-input",
        "ledger_data_with_arbitrary_keys_classifies_every_key",
        512,
        proptest::collection::btree_map("\\PC{0,16}", "\\PC{0,40}", 0..16),
        |data| {
            let snapshot = LedgerSnapshot::from_raw_data(
                data.iter().map(|(k, v)| (k.as_str(), v.as_str())),
                None,
            );
            // Entry, mark and last-failure keys land in exactly one place
            // (a cleared last failure in none); a shared record (`c.`)
            // only when it is unreadable.
            let bad_contexts = data
                .iter()
                .filter(|(k, v)| {
                    k.strip_prefix("c.").is_some_and(|id| {
                        !migration_core::entry::context::valid_id(id)
                            || migration_core::entry::SharedRecord::decode(v).is_err()
                    })
                })
                .count();
            let ledger_keys = data
                .keys()
                .filter(|k| k.starts_with("m.") || k.starts_with("a."))
                .count()
                + data
                    .iter()
                    .filter(|(k, v)| {
                        k.starts_with("f.") && !migration_core::keys::is_clearing(k, v)
                    })
                    .count()
                + bad_contexts;
            prop_assert_eq!(
                snapshot.records.len()
                    + snapshot.attempts_started.len()
                    + snapshot.failures.len()
                    + snapshot.unreadable_keys.len(),
                ledger_keys
            );
            Ok(())
        },
    );
}

#[test]
fn timestamps_never_panic() {
    common::check(
        "hostile-input",
        "timestamps_never_panic",
        512,
        "\\PC{0,40}|[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\\.[0-9]{1,12})?(Z|[+-][0-9]{2}:[0-9]{2})",
        |raw| {
            if let Ok(t) = Timestamp::parse(&raw) {
                prop_assert_eq!(Timestamp::parse(&t.to_string()).unwrap(), t);
            }
            Ok(())
        },
    );
}

#[test]
fn huge_inputs_are_rejected_with_short_messages() {
    let huge = "A".repeat(10_000_000);
    bounded(&Slug::parse(&huge).unwrap_err().to_string());
    bounded(&LedgerEntry::decode("m.x", &huge).unwrap_err().to_string());
    let errors = parse_header(Path::new("x"), huge.as_bytes()).unwrap_err();
    bounded(&errors[0].to_string());
    let problems = parse_revoked(Path::new("revoked"), huge.as_bytes()).unwrap_err();
    bounded(&problems[0].to_string());
}
