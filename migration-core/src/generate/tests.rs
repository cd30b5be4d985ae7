//! Generation, case by case, through the pure function.

use std::collections::BTreeMap;

use super::*;
use crate::digest::Sha256Digest;
use crate::header::Tier;
use crate::slug::Slug;
use crate::testing::fixtures::s;

fn info(content: &str, requires: &[&str]) -> ScriptInfo {
    ScriptInfo {
        tier: Tier::PreApply,
        sha256: Sha256Digest::of(content.as_bytes()),
        requires: requires.iter().map(|r| s(r)).collect(),
    }
}

fn tag(name: &str, scripts: &[(&str, &str, &[&str])]) -> TagTree {
    TagTree {
        tag: name.into(),
        scripts: scripts
            .iter()
            .map(|(slug, content, req)| (s(slug), info(content, req)))
            .collect(),
    }
}

fn disk(scripts: &[(&str, &str, &[&str])]) -> BTreeMap<Slug, ScriptInfo> {
    scripts
        .iter()
        .map(|(slug, content, req)| (s(slug), info(content, req)))
        .collect()
}

/// The batches `history` generates (it must), as (file name, body) pairs.
fn batches(history: &ReleaseHistory) -> Vec<(String, String)> {
    generate(history).unwrap().render()
}

/// Expected batches as (file name, body) pairs, owned to compare with [`batches`].
fn owned(batches: &[(&str, &str)]) -> Vec<(String, String)> {
    batches
        .iter()
        .map(|(name, body)| ((*name).to_owned(), (*body).to_owned()))
        .collect()
}

#[test]
fn a_slug_that_leaves_the_line_and_returns_changed_is_caught_with_both_tags() {
    let history = ReleaseHistory {
        line: vec![
            tag("v1.0.0", &[("a", "x", &[]), ("b", "b", &[])]),
            tag("v1.1.0", &[("b", "b", &[])]),
            tag("v1.2.0", &[("a", "y", &[]), ("b", "b", &[])]),
            tag("v1.3.0", &[("a", "y", &[]), ("b", "b", &[])]),
        ],
        disk: disk(&[("a", "y", &[]), ("b", "b", &[])]),
        ..ReleaseHistory::default()
    };
    let problems = generate(&history).unwrap_err().problems;
    assert_eq!(
        problems,
        [
            GenerateProblem::ContentChanged {
                slug: s("a"),
                first: Place::Tag("v1.0.0".into()),
                first_sha: Sha256Digest::of(b"x"),
                second: Place::Tag("v1.2.0".into()),
                second_sha: Sha256Digest::of(b"y"),
            },
            // Coming back at all is refused too, changed or not.
            GenerateProblem::RetiredReadded {
                slug: s("a"),
                retired_in: "v1.1.0".into(),
            }
        ]
    );
}

#[test]
fn requires_come_from_the_first_tag_that_ships_the_slug() {
    // `a` requires `b` from v1.1.0 on (and on disk), but shipped first in
    // v1.0.0 without it: the first place decides, so v1.0.0 stays
    // alphabetical. Unchanged tags add nothing; `e` is untagged and its
    // requires come from the disk.
    let history = ReleaseHistory {
        line: vec![
            tag("v1.0.0", &[("a", "a", &[]), ("b", "b", &[])]),
            tag("v1.1.0", &[("a", "a", &["b"]), ("b", "b", &[])]),
            tag(
                "v1.2.0",
                &[("a", "a", &["b"]), ("b", "b", &[]), ("d", "d", &[])],
            ),
            tag(
                "v1.2.1",
                &[("a", "a", &["b"]), ("b", "b", &[]), ("d", "d", &[])],
            ),
        ],
        disk: disk(&[
            ("a", "a", &["b"]),
            ("b", "b", &[]),
            ("d", "d", &[]),
            ("e", "e", &["f"]),
            ("f", "f", &[]),
        ]),
        ..ReleaseHistory::default()
    };
    assert_eq!(
        batches(&history),
        owned(&[
            ("00001-v1.0.0", "a\nb\n"),
            ("00003-v1.2.0", "d\n"),
            ("99999-untagged", "f\ne\n"),
        ])
    );
}

#[test]
fn each_slug_goes_to_the_first_tag_that_ships_it() {
    let history = ReleaseHistory {
        line: vec![
            tag("v1.0.0", &[("b", "b", &[]), ("a", "a", &[])]),
            tag(
                "v1.1.0",
                &[("a", "a", &[]), ("b", "b", &[]), ("c", "c", &[])],
            ),
            tag(
                "v1.1.1",
                &[("a", "a", &[]), ("b", "b", &[]), ("c", "c", &[])],
            ),
        ],
        disk: disk(&[
            ("a", "a", &[]),
            ("b", "b", &[]),
            ("c", "c", &[]),
            ("d", "d", &[]),
        ]),
        ..ReleaseHistory::default()
    };
    assert_eq!(
        batches(&history),
        owned(&[
            ("00001-v1.0.0", "a\nb\n"),
            ("00002-v1.1.0", "c\n"),
            ("99999-untagged", "d\n"),
        ])
    );
}

#[test]
fn legacy_slugs_go_only_to_the_legacy_batch_in_integer_order() {
    let history = ReleaseHistory {
        line: vec![tag(
            "v1.0.0",
            &[("z-old", "z", &[]), ("a-old", "a", &[]), ("new", "n", &[])],
        )],
        disk: disk(&[("a-old", "a", &[]), ("new", "n", &[])]),
        legacy: vec![s("z-old"), s("a-old")],
        ..ReleaseHistory::default()
    };
    assert_eq!(
        batches(&history),
        owned(&[
            ("00000-legacy", "z-old retired\na-old\n"),
            ("00001-v1.0.0", "new\n"),
        ])
    );
}

#[test]
fn a_build_exactly_at_a_tag_has_no_untagged_batch() {
    let history = ReleaseHistory {
        line: vec![tag("v1.0.0", &[("a", "a", &[])])],
        disk: disk(&[("a", "a", &[])]),
        ..ReleaseHistory::default()
    };
    let m = generate(&history).unwrap();
    assert!(m.batches().iter().all(|b| !b.name.is_untagged()));
}

#[test]
fn a_deleted_shipped_script_is_retired_not_dropped() {
    let history = ReleaseHistory {
        line: vec![tag("v1.0.0", &[("gone", "g", &[]), ("kept", "k", &[])])],
        disk: disk(&[("kept", "k", &[])]),
        ..ReleaseHistory::default()
    };
    assert_eq!(batches(&history)[0].1, "gone retired\nkept\n");
}

#[test]
fn requires_reorders_within_a_batch_and_may_point_back() {
    let history = ReleaseHistory {
        line: vec![
            tag("v1", &[("base", "b", &[])]),
            tag(
                "v2",
                &[
                    ("base", "b", &[]),
                    ("a", "a", &["z", "base"]),
                    ("z", "z", &[]),
                ],
            ),
        ],
        disk: disk(&[
            ("base", "b", &[]),
            ("a", "a", &["z", "base"]),
            ("z", "z", &[]),
        ]),
        ..ReleaseHistory::default()
    };
    assert_eq!(batches(&history)[1].1, "z\na\n");
}

#[test]
fn requires_naming_a_later_batch_or_nothing_is_an_error() {
    let history = ReleaseHistory {
        line: vec![tag("v1", &[("early", "e", &["late"])])],
        disk: disk(&[
            ("early", "e", &["late"]),
            ("late", "l", &[]),
            ("x", "x", &["ghost"]),
        ]),
        ..ReleaseHistory::default()
    };
    let err = generate(&history).unwrap_err();
    let text: Vec<String> = err.problems.iter().map(ToString::to_string).collect();
    assert_eq!(
        text,
        [
            "'early' (batch 00001-v1) requires 'late', which is only in later batch 99999-untagged",
            "'x' requires 'ghost', which is in no batch",
        ]
    );
}

#[test]
fn requires_later_names_the_target_batch_even_past_the_first_tagged_batch() {
    let history = ReleaseHistory {
        line: vec![
            tag("v1", &[("a", "a", &[])]),
            tag("v2", &[("a", "a", &[]), ("b", "b", &["c"])]),
            tag(
                "v3",
                &[("a", "a", &[]), ("b", "b", &["c"]), ("c", "c", &[])],
            ),
        ],
        disk: disk(&[("a", "a", &[]), ("b", "b", &["c"]), ("c", "c", &[])]),
        ..ReleaseHistory::default()
    };
    let err = generate(&history).unwrap_err();
    assert_eq!(
        err.problems
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>(),
        ["'b' (batch 00002-v2) requires 'c', which is only in later batch 00003-v3"]
    );
}

#[test]
fn a_cycle_names_its_slugs() {
    let history = ReleaseHistory {
        disk: disk(&[("a", "a", &["b"]), ("b", "b", &["a"])]),
        ..ReleaseHistory::default()
    };
    let err = generate(&history).unwrap_err();
    assert_eq!(err.problems.len(), 1);
    assert_eq!(
        err.problems[0].to_string(),
        "batch 99999-untagged: requires cycle: a requires b requires a"
    );
}

#[test]
fn the_immutability_guard_names_every_offending_slug_and_both_places() {
    let history = ReleaseHistory {
        line: vec![tag("v1.5.0", &[("45", "one", &[]), ("x", "x1", &[])])],
        other_tags: vec![tag("v1.6.0", &[("45", "two", &[])])],
        disk: disk(&[("45", "one", &[]), ("x", "x2", &[])]),
        ..ReleaseHistory::default()
    };
    let err = generate(&history).unwrap_err();
    let text: Vec<String> = err.problems.iter().map(ToString::to_string).collect();
    assert_eq!(text.len(), 2, "{text:?}");
    assert!(
        text[0].starts_with("'45' has different content in tag v1.5.0"),
        "{}",
        text[0]
    );
    assert!(text[0].contains("and tag v1.6.0"), "{}", text[0]);
    assert!(
        text[1].starts_with("'x' has different content in tag v1.5.0"),
        "{}",
        text[1]
    );
    assert!(text[1].contains("and the working tree"), "{}", text[1]);
}

#[test]
fn tag_names_that_cannot_be_file_names_are_refused() {
    let history = ReleaseHistory {
        line: vec![tag("release/1.0", &[("a", "a", &[])])],
        ..ReleaseHistory::default()
    };
    let err = generate(&history).unwrap_err();
    assert!(
        matches!(&err.problems[..], [GenerateProblem::BadTag { tag, .. }] if tag == "release/1.0")
    );
}
