//! A `legacy-map` with a gap or a duplicate is an error at lint and at
//! load, named by line: a cluster past the gap ran a script no slug would
//! record.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use common::{empty_file_ledger, migrate};
use migration_core::testing::fixtures::script_text;

fn tree(legacy_map: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("pre-apply")).unwrap();
    std::fs::create_dir_all(dir.path().join("tests")).unwrap();
    std::fs::create_dir_all(dir.path().join("order.d")).unwrap();
    for slug in ["1", "2", "4"] {
        std::fs::write(
            dir.path().join("pre-apply").join(slug),
            script_text("pre-apply", "abort", &[], "echo hi"),
        )
        .unwrap();
        std::fs::write(
            dir.path().join("tests").join(format!("{slug}.sh")),
            "exit 1\n",
        )
        .unwrap();
    }
    std::fs::write(dir.path().join("order.d/00000-legacy"), "1\n2\n4\n").unwrap();
    std::fs::write(dir.path().join("legacy-map"), legacy_map).unwrap();
    dir
}

/// Asserts that `migrate COMMAND DIR [--ledger an empty file ledger]`
/// exits 2 and says `needle`.
fn assert_fails(dir: &tempfile::TempDir, command: &str, needle: &str) {
    let mut cmd = migrate();
    cmd.arg(command).arg(dir.path());
    if command != "lint" {
        cmd.args(["--ledger", &empty_file_ledger(&dir.path().join("ledger"))]);
    }
    let out = cmd.output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert!(text.contains(needle), "{needle:?} in {text}");
}

#[test]
fn a_gap_in_the_legacy_map_fails_lint_and_load_naming_both_lines() {
    let dir = tree("1 1\n2 2\n4 4\n");
    assert_fails(
        &dir,
        "lint",
        "legacy-map:3: error[list-file] integer 3 is not mapped (a gap between 2 on line 2 and 4 here)",
    );
    assert_fails(&dir, "plan", "legacy-map:3: integer 3 is not mapped");
}

#[test]
fn a_duplicate_in_the_legacy_map_fails_lint_naming_the_first_line() {
    let dir = tree("1 1\n2 2\n2 4\n");
    assert_fails(
        &dir,
        "lint",
        "legacy-map:3: error[list-file] integer 2 is already mapped on line 2",
    );
}

#[test]
fn an_other_content_that_is_a_script_of_this_tree_fails_lint_and_load() {
    let dir = tree("1 1\n2 2 others=4\n3 3\n");
    std::fs::write(
        dir.path().join("pre-apply/3"),
        script_text("pre-apply", "abort", &[], "echo hi"),
    )
    .unwrap();
    std::fs::write(dir.path().join("tests/3.sh"), "exit 1\n").unwrap();
    std::fs::write(dir.path().join("order.d/00000-legacy"), "1\n2\n3\n4\n").unwrap();
    assert_fails(
        &dir,
        "lint",
        "legacy-map:2: error[list-file] '4' is another line's content of slot 2 but a script of this tree",
    );
}
