//! A header comment that resembles a directive but is not one (a misspelled
//! or mis-cased marker, a blank before its colon, a misspelled key, `:` in
//! place of `=`) is an error naming file and line with a "did you mean"
//! suggestion, never a silent comment that drops a requirement (issues 13
//! and 16).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use migration_core::header::parse_header;

const GOOD: &str =
    "#!/bin/sh\n# cozystack-migration: tier=pre-apply\n# cozystack-migration: on-error=abort\n";

/// The errors of a script: the good header plus `line` (line 4), then a body.
fn errors_with(line: &str) -> Vec<String> {
    let text = format!("{GOOD}{line}\nset -eu\necho hi\n");
    match parse_header(Path::new("pre-apply/x"), text.as_bytes()) {
        Ok(h) => panic!("{line:?} was accepted as {h:?}"),
        Err(errors) => errors.iter().map(ToString::to_string).collect(),
    }
}

#[test]
fn near_misses_of_the_marker_are_errors_naming_file_line_and_the_marker() {
    for line in [
        "# cozystack-migrations: requires=etcd",
        "# cozystack-migration : requires=etcd",
        "# Cozystack-Migration: requires=etcd",
        "# COZYSTACK-MIGRATION: requires=etcd",
        "# cozystack_migration: requires=etcd",
        "# cozystack-migraiton: requires=etcd",
        "#cozystackmigration: requires=etcd",
        "# cozystack-migration requires=etcd",
    ] {
        let errors = errors_with(line);
        assert_eq!(errors.len(), 1, "{line:?}: {errors:?}");
        assert!(
            errors[0].starts_with("pre-apply/x:4: ")
                && errors[0].contains("did you mean '# cozystack-migration: requires=etcd'"),
            "{line:?}: {}",
            errors[0]
        );
    }
}

#[test]
fn misspelled_or_mis_cased_keys_get_a_did_you_mean() {
    for (line, meant) in [
        ("# cozystack-migration: require=etcd", "requires"),
        ("# cozystack-migration: Requires=etcd", "requires"),
        ("# cozystack-migration: requries=etcd", "requires"),
        ("# cozystack-migration: on_error=warn", "on-error"),
        ("# cozystack-migration: tiers=pre-apply", "tier"),
    ] {
        let errors = errors_with(line);
        assert!(
            errors
                .iter()
                .any(|e| e.starts_with("pre-apply/x:4: unknown header key")
                    && e.contains(&format!("did you mean '{meant}'"))),
            "{line:?}: {errors:?}"
        );
    }
}

#[test]
fn a_colon_in_place_of_the_equals_sign_suggests_key_equals_value() {
    let errors = errors_with("# cozystack-migration: requires: etcd");
    assert!(
        errors[0].starts_with("pre-apply/x:4: malformed header directive")
            && errors[0].contains("did you mean '# cozystack-migration: requires=etcd'"),
        "{errors:?}"
    );
}

#[test]
fn plain_comments_and_waivers_in_the_header_stay_comments() {
    for line in [
        "# Relabels the tenant namespaces so the new chart adopts them.",
        "# cozystack migration scripts must be idempotent",
        "# see https://example.invalid/cozystack-migration:docs",
        "# migrate: allow for-command-substitution: the list is re-checked below",
        "# TODO: requires a newer kubectl",
        "#",
        "",
    ] {
        let text = format!("{GOOD}{line}\nset -eu\n");
        let parsed = parse_header(Path::new("pre-apply/x"), text.as_bytes());
        assert!(parsed.is_ok(), "{line:?}: {parsed:?}");
    }
}
