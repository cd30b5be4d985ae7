//! Header parsing, problem by problem.

use std::path::Path;

use super::*;

fn parse(text: &str) -> Result<Header, Vec<HeaderError>> {
    parse_header(Path::new("pre-apply/x"), text.as_bytes())
}

fn only_error(text: &str) -> HeaderError {
    let mut errors = parse(text).unwrap_err();
    assert_eq!(errors.len(), 1, "{errors:?}");
    errors.remove(0)
}

/// Asserts that `text` has exactly one header error and that it matches the pattern.
macro_rules! assert_only_error {
    ($text:expr, $pattern:pat $(if $guard:expr)?) => {{
        let e = only_error($text);
        assert!(matches!(e, $pattern $(if $guard)?), "{e:?}");
    }};
}

#[test]
fn parses_a_complete_header() {
    let h = parse(
        "#!/bin/sh\n# cozystack-migration: tier=pre-apply\n# cozystack-migration: on-error=abort\n\
         # cozystack-migration: requires=etcd-crds-precreate\n#   cozystack-migration:requires = other\nset -eu\necho hi\n",
    )
    .unwrap();
    assert_eq!(h.shebang, "/bin/sh");
    assert_eq!(h.tier, Tier::PreApply);
    assert_eq!(h.on_error, OnError::Abort);
    let targets: Vec<_> = h
        .requires
        .iter()
        .map(|r| (r.target.as_str(), r.line))
        .collect();
    assert_eq!(targets, [("etcd-crds-precreate", 4), ("other", 5)]);
}

#[test]
fn plain_comments_and_blank_lines_may_sit_between_directives() {
    let h = parse("#!/usr/bin/env bash\n# Relabels PVCs.\n\n# cozystack-migration: tier=background\n#\n# cozystack-migration: on-error=warn\n").unwrap();
    assert_eq!(h.interpreter(), "/usr/bin/env");
    assert_eq!((h.tier, h.on_error), (Tier::Background, OnError::Warn));
}

#[test]
fn missing_shebang_names_line_one() {
    let e = only_error("# cozystack-migration: tier=pre-apply\n");
    assert!(matches!(e, HeaderError::MissingShebang { .. }));
    assert_eq!(e.line(), Some(1));
    assert!(e.to_string().starts_with("pre-apply/x:1:"), "{e}");
}

#[test]
fn empty_file_has_no_shebang() {
    assert_only_error!("", HeaderError::MissingShebang { .. });
    assert_only_error!("#!   \n", HeaderError::MissingShebang { .. });
}

#[test]
fn missing_keys_are_each_reported() {
    let errors = parse("#!/bin/sh\necho hi\n").unwrap_err();
    assert_eq!(missing_keys(&errors), ["tier", "on-error"]);
}

/// The keys `errors` say are missing; any other error fails the test.
fn missing_keys(errors: &[HeaderError]) -> Vec<&'static str> {
    errors
        .iter()
        .map(|e| match e {
            HeaderError::MissingKey { key, .. } => *key,
            other => panic!("unexpected {other:?}"),
        })
        .collect()
}

#[test]
fn duplicated_key_names_both_lines() {
    let e = only_error(
        "#!/bin/sh\n# cozystack-migration: tier=pre-apply\n# cozystack-migration: on-error=warn\n# cozystack-migration: tier=pre-apply\n",
    );
    assert_eq!(
        e,
        HeaderError::DuplicateKey {
            file: "pre-apply/x".into(),
            line: 4,
            key: "tier".into(),
            first_line: 2
        }
    );
}

#[test]
fn unknown_key_is_an_error_with_its_line() {
    assert_only_error!(
        "#!/bin/sh\n# cozystack-migration: tier=pre-apply\n# cozystack-migration: on-error=warn\n# cozystack-migration: retries=3\n",
        HeaderError::UnknownKey { line: 4, ref key, .. } if key == "retries"
    );
}

#[test]
fn directive_without_equals_is_malformed_and_the_key_stays_missing() {
    let errors = parse(
        "#!/bin/sh\n# cozystack-migration: tier pre-apply\n# cozystack-migration: on-error=warn\n",
    )
    .unwrap_err();
    assert!(
        matches!(errors[0], HeaderError::Malformed { line: 2, .. }),
        "{errors:?}"
    );
    assert!(
        matches!(errors[1], HeaderError::MissingKey { key: "tier", .. }),
        "{errors:?}"
    );
    assert_eq!(errors.len(), 2);
}

#[test]
fn bad_values_are_invalid_not_missing() {
    let errors = parse(
        "#!/bin/sh\n# cozystack-migration: tier=later\n# cozystack-migration: on-error=ignore\n# cozystack-migration: requires=Bad_Slug\n",
    )
    .unwrap_err();
    let lines: Vec<_> = errors
        .iter()
        .map(|e| match e {
            HeaderError::InvalidValue { key, line, .. } => (*key, *line),
            other => panic!("unexpected {other:?}"),
        })
        .collect();
    assert_eq!(lines, [("tier", 2), ("on-error", 3), ("requires", 4)]);
}

#[test]
fn a_trailing_comment_after_a_value_is_rejected_rather_than_guessed() {
    assert_only_error!(
        "#!/bin/sh\n# cozystack-migration: tier=pre-apply   # blocking\n# cozystack-migration: on-error=warn\n",
        HeaderError::InvalidValue {
            key: "tier",
            line: 2,
            ..
        }
    );
}

#[test]
fn duplicate_requirement_is_an_error() {
    assert_only_error!(
        "#!/bin/sh\n# cozystack-migration: tier=pre-apply\n# cozystack-migration: on-error=warn\n# cozystack-migration: requires=a\n# cozystack-migration: requires=a\n",
        HeaderError::DuplicateRequirement {
            line: 5,
            first_line: 4,
            ..
        }
    );
}

#[test]
fn directive_below_the_header_block_is_an_error_not_ignored() {
    let e = only_error(
        "#!/bin/sh\n# cozystack-migration: tier=pre-apply\n# cozystack-migration: on-error=warn\nset -eu\n# cozystack-migration: requires=late\n",
    );
    assert_eq!(
        e,
        HeaderError::OutsideHeader {
            file: "pre-apply/x".into(),
            line: 5,
            header_end: 3
        }
    );
}

#[test]
fn crlf_files_are_rejected() {
    assert_only_error!(
        "#!/bin/sh\r\n# cozystack-migration: tier=pre-apply\r\n",
        HeaderError::CrlfLineEnding { line: 1, .. }
    );
}

#[test]
fn non_utf8_header_line_is_reported_but_binary_body_is_fine() {
    let mut bytes = b"#!/bin/sh\n# cozystack-migration: tier=pre-apply\n# cozystack-migration: on-error=warn\necho ".to_vec();
    bytes.extend_from_slice(&[0xff, 0xfe, b'\n']);
    assert!(parse_header(Path::new("x"), &bytes).is_ok());
    let bad = b"#!/bin/sh\n# caf\xe9\n# cozystack-migration: tier=pre-apply\n# cozystack-migration: on-error=warn\n";
    let errors = parse_header(Path::new("x"), bad).unwrap_err();
    assert!(
        matches!(errors[..], [HeaderError::NotUtf8 { line: 2, .. }]),
        "{errors:?}"
    );
}

#[test]
fn tier_and_on_error_round_trip_through_text() {
    for t in Tier::ALL {
        assert_eq!(t.as_str().parse::<Tier>().unwrap(), t);
    }
    for o in [OnError::Abort, OnError::Warn] {
        assert_eq!(o.as_str().parse::<OnError>().unwrap(), o);
    }
    assert!("Pre-Apply".parse::<Tier>().is_err());
}

/// The header of `text` read with the marker `word`.
fn parse_marked(word: &str, text: &str) -> Result<Header, Vec<HeaderError>> {
    let marker = HeaderMarker::new(word).unwrap();
    parse_header_with(Path::new("pre-apply/x"), text.as_bytes(), &marker)
}

#[test]
fn a_trees_own_marker_starts_its_directives() {
    let h = parse_marked(
        "acme-migration",
        "#!/bin/sh\n# acme-migration: tier=pre-apply\n# acme-migration: on-error=warn\n# acme-migration: requires=y\n",
    )
    .unwrap();
    assert_eq!((h.tier, h.on_error), (Tier::PreApply, OnError::Warn));
    assert_eq!(h.requires[0].target.as_str(), "y");
}

#[test]
fn under_another_marker_the_default_one_is_a_plain_comment_and_both_keys_are_missing() {
    let errors = parse_marked(
        "acme-migration",
        "#!/bin/sh\n# cozystack-migration: tier=pre-apply\n# cozystack-migration: on-error=abort\n",
    )
    .unwrap_err();
    assert_eq!(missing_keys(&errors), ["tier", "on-error"]);
    let text = errors[0].to_string();
    assert!(text.contains("'# acme-migration: tier=...'"), "{text}");
    assert!(
        text.contains("this tree's header marker is 'acme-migration'"),
        "{text}"
    );
}

#[test]
fn near_misses_and_stray_directives_are_judged_against_the_trees_marker() {
    let text = "#!/bin/sh\n# Acme-Migration: tier=pre-apply\n# acme-migration: on-error=abort\n";
    let errors = parse_marked("acme-migration", text).unwrap_err();
    assert!(
        matches!(&errors[0], HeaderError::NearMissMarker { suggestion, .. } if suggestion == "# acme-migration: tier=pre-apply"),
        "{errors:?}"
    );
    let stray = "#!/bin/sh\n# acme-migration: tier=pre-apply\n# acme-migration: on-error=abort\nset -eu\n# acme-migration: requires=z\n";
    let errors = parse_marked("acme-migration", stray).unwrap_err();
    assert!(
        matches!(errors[0], HeaderError::OutsideHeader { line: 5, .. }),
        "{errors:?}"
    );
    // The default marker's errors are unchanged.
    assert!(
        !only_error("#!/bin/sh\n# cozystack-migration: tier=pre-apply\n")
            .to_string()
            .contains("migrate.toml")
    );
}

#[test]
fn a_rendered_header_parses_back_to_what_was_rendered_under_any_marker() {
    let acme = HeaderMarker::new("acme-migration").unwrap();
    for marker in [HeaderMarker::default(), acme] {
        for tier in [Tier::PreApply, Tier::Background] {
            for on_error in [OnError::Abort, OnError::Warn] {
                for requires in [&[][..], &["a"][..], &["a", "b-c"][..]] {
                    let text = format!(
                        "#!/bin/sh\n{}set -eu\n",
                        render_header(&marker, tier, on_error, requires)
                    );
                    let h = parse_header_with(Path::new("s"), text.as_bytes(), &marker)
                        .unwrap_or_else(|e| panic!("{text}: {e:?}"));
                    assert_eq!((h.tier, h.on_error), (tier, on_error), "{text}");
                    let read: Vec<&str> = h.requires.iter().map(|r| r.target.as_str()).collect();
                    assert_eq!(read, requires, "{text}");
                }
            }
        }
    }
}
