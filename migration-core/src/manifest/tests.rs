//! Parsing, rendering and writing manifests.

use super::*;
use crate::testing::fixtures::{assert_lines, s};

fn files(list: &[(&str, &str)]) -> Vec<(String, Vec<u8>)> {
    list.iter()
        .map(|(n, c)| (n.to_string(), c.as_bytes().to_vec()))
        .collect()
}

#[test]
fn parses_batches_in_file_name_order_whatever_the_input_order() {
    let m = Manifest::parse_files(files(&[
        ("00001-v1.7.0", "b\na retired\n"),
        ("00000-legacy", "45\n46\n"),
    ]))
    .unwrap();
    let order: Vec<_> = m
        .iter()
        .map(|(b, e)| (b.name.to_string(), e.slug.to_string(), e.retired))
        .collect();
    assert_eq!(
        order,
        [
            ("00000-legacy".into(), "45".into(), false),
            ("00000-legacy".into(), "46".into(), false),
            ("00001-v1.7.0".into(), "b".into(), false),
            ("00001-v1.7.0".into(), "a".into(), true),
        ]
    );
    assert_eq!(m.position(&s("a")), Some(Position { batch: 1, index: 1 }));
    assert_eq!(m.len(), 4);
}

#[test]
fn render_then_parse_is_the_identity_and_render_is_byte_exact() {
    let input = files(&[
        ("00000-legacy", "45\n"),
        ("00001-v1.7.0-rc.1", "x retired\ny\n"),
        ("99999-untagged", ""),
    ]);
    let m = Manifest::parse_files(input.clone()).unwrap();
    let rendered = m.render();
    let back: Vec<_> = rendered
        .iter()
        .map(|(n, c)| (n.clone(), c.as_bytes().to_vec()))
        .collect();
    assert_eq!(back, input);
    assert_eq!(Manifest::parse_files(back).unwrap(), m);
}

#[test]
fn comments_and_blank_lines_are_ignored() {
    let m = Manifest::parse_files(files(&[(
        "00001-v1",
        "# generated\n\n a  # trailing\nb retired # gone\n",
    )]))
    .unwrap();
    assert_eq!(
        m.render(),
        [("00001-v1".to_string(), "a\nb retired\n".to_string())]
    );
}

#[test]
fn a_slug_listed_twice_names_both_places() {
    let errors = Manifest::parse_files(files(&[
        ("00001-v1", "# header\na\nb\n"),
        ("00002-v2", "c\n\na\n"),
    ]))
    .unwrap_err();
    assert_eq!(errors.len(), 1);
    let text = errors[0].to_string();
    assert_eq!(text, "00002-v2:3: slug 'a' is already listed at 00001-v1:2");
}

#[test]
fn a_slug_listed_twice_in_one_file_names_both_lines_even_after_a_badly_named_file() {
    let errors = Manifest::parse_files(files(&[
        ("0000-short", "x\n"),
        ("00001-v1", "a\nb\n"),
        ("00002-v2", "c\n# again\nc\na\n"),
    ]))
    .unwrap_err();
    let text: Vec<_> = errors.iter().map(ToString::to_string).collect();
    assert_eq!(text.len(), 3, "{text:?}");
    assert!(text[0].contains("0000-short"), "{}", text[0]);
    assert_eq!(
        text[1],
        "00002-v2:3: slug 'c' is already listed at 00002-v2:1"
    );
    assert_eq!(
        text[2],
        "00002-v2:4: slug 'a' is already listed at 00001-v1:1"
    );
}

#[test]
fn unknown_flags_extra_words_and_bad_slugs_name_file_and_line() {
    let errors = Manifest::parse_files(files(&[("00001-v1", "ok\na done\nb retired now\nBad\n")]))
        .unwrap_err();
    assert_lines(
        &errors,
        &[
            "00001-v1:2: unknown flag \"done\"…",
            "00001-v1:3: too many words…",
            "00001-v1:4: slug \"Bad\"…",
        ],
    );
}

#[test]
fn bad_file_names_and_shared_sequences_are_rejected() {
    let errors = Manifest::parse_files(files(&[("1-v1", "a\n"), ("README", "")])).unwrap_err();
    assert_eq!(errors.len(), 2);
    assert!(
        errors
            .iter()
            .all(|e| matches!(e, ManifestError::BadFileName { .. }))
    );
    let errors =
        Manifest::parse_files(files(&[("00001-v1", "a\n"), ("00001-v2", "b\n")])).unwrap_err();
    assert!(matches!(
        errors[..],
        [ManifestError::DuplicateSequence { sequence: 1, .. }]
    ));
    assert!("00001-v1/x".parse::<BatchName>().is_err());
    assert!("00001-".parse::<BatchName>().is_err());
    assert!("0000a-v1".parse::<BatchName>().is_err());
}

#[test]
fn non_utf8_line_is_reported_with_its_line() {
    let errors =
        Manifest::parse_files(vec![("00001-v1".into(), b"a\n\xff\n".to_vec())]).unwrap_err();
    assert!(matches!(
        &errors[..],
        [ManifestError::BadLine { line: 2, .. }]
    ));
}

#[test]
fn write_dir_leaves_exactly_the_manifest() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("99999-untagged"), "stale\n").unwrap();
    let m = Manifest::parse_files(files(&[("00001-v1", "a\n")])).unwrap();
    m.write_dir(dir.path()).unwrap();
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(names, ["00001-v1"]);
    assert_eq!(Manifest::load_dir(dir.path()).unwrap(), m);
}

#[test]
fn order_prefix_ignores_only_the_retired_flag() {
    let early = Manifest::parse_files(files(&[("00001-v1", "a\nb\n")])).unwrap();
    let later = Manifest::parse_files(files(&[
        ("00001-v1", "a retired\nb\n"),
        ("00002-v2", "c\n"),
    ]))
    .unwrap();
    let reordered = Manifest::parse_files(files(&[("00001-v1", "b\na\n")])).unwrap();
    assert!(early.is_order_prefix_of(&later));
    assert!(!later.is_order_prefix_of(&early));
    assert!(!reordered.is_order_prefix_of(&later));
}
