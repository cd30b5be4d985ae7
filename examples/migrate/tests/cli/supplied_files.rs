//! Every file a tree or a flag supplies is read one safe way (issue 35):
//! a regular file only (a FIFO or a device is refused without being
//! opened for a blocking read), within a size bound, symlinks followed by
//! one rule, and a dangling symlink an error naming the path rather than
//! "no file". A `cluster-commands` setting naming the engine's own
//! programs is refused where it is written.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::Duration;

use crate::bad_input::tree_with_marker;
use crate::common::{self, json_within};

/// `lint`, `plan`, `run --dry-run` and `run` of `tree` on a fresh file
/// ledger in `dir`, each killed after 20 seconds: (command, exit code,
/// first problem or every finding, the whole answer).
fn every_command(dir: &Path, tree: &Path) -> Vec<(String, i32, String, String)> {
    let ledger = common::empty_file_ledger(&dir.join("ledger.json"));
    let tree = tree.to_str().unwrap();
    let mut out = Vec::new();
    for args in [
        vec!["lint", tree],
        vec!["plan", tree, "--ledger", &ledger],
        vec!["run", tree, "--ledger", &ledger, "--dry-run"],
        vec!["run", tree, "--ledger", &ledger],
    ] {
        let (code, doc, stderr) = json_within(Duration::from_secs(20), &args);
        let problem = doc["problems"][0]
            .as_str()
            .map_or_else(|| doc["findings"].to_string(), str::to_owned);
        out.push((
            args[..args.len().min(3)].join(" "),
            code,
            problem,
            format!("{doc}\n{stderr}"),
        ));
    }
    out
}

/// Asserts that every command refused the tree as bad input (exit 2) with a
/// first problem holding each of `needles`, and that nothing ran.
fn refused_as_bad_input(dir: &Path, tree: &Path, needles: &[&str]) {
    for (command, code, problem, all) in every_command(dir, tree) {
        assert_eq!(code, 2, "{command}: {all}");
        for needle in needles {
            assert!(
                problem.contains(needle),
                "{command}: {needle:?} in {problem}\n{all}"
            );
        }
    }
    assert!(!dir.join("marker").exists(), "the script ran");
}

#[test]
fn a_fifo_as_migrate_toml_is_refused_naming_it_without_blocking() {
    let dir = tempfile::tempdir().unwrap();
    let tree = tree_with_marker(dir.path());
    common::mkfifo(&tree.join("migrate.toml"));
    refused_as_bad_input(dir.path(), &tree, &["migrate.toml", "FIFO"]);
}

#[test]
fn a_migrate_toml_symlinked_to_a_device_is_refused_naming_it() {
    for device in ["/dev/null", "/dev/zero"] {
        let dir = tempfile::tempdir().unwrap();
        let tree = tree_with_marker(dir.path());
        std::os::unix::fs::symlink(device, tree.join("migrate.toml")).unwrap();
        refused_as_bad_input(dir.path(), &tree, &["migrate.toml"]);
    }
}

#[test]
fn a_dangling_symlink_in_place_of_a_tree_file_is_an_error_naming_it() {
    for name in ["cluster-commands", "migrate.toml", "revoked", "legacy-map"] {
        let dir = tempfile::tempdir().unwrap();
        let tree = tree_with_marker(dir.path());
        std::os::unix::fs::symlink("gone", tree.join(name)).unwrap();
        refused_as_bad_input(dir.path(), &tree, &[name, "dangling"]);
    }
}

#[test]
fn a_fifo_as_cluster_commands_or_lint_baseline_is_refused_without_blocking() {
    for name in ["cluster-commands", "lint-baseline"] {
        let dir = tempfile::tempdir().unwrap();
        let tree = tree_with_marker(dir.path());
        common::mkfifo(&tree.join(name));
        let (code, doc, stderr) =
            json_within(Duration::from_secs(20), &["lint", tree.to_str().unwrap()]);
        assert_eq!(code, 2, "{name}: {doc}\n{stderr}");
        let text = format!("{doc}{stderr}");
        assert!(
            text.contains(name) && text.contains("FIFO"),
            "{name}: {text}"
        );
    }
}

#[test]
fn a_cluster_commands_setting_naming_the_engines_own_program_is_refused_where_it_is_written() {
    for own in ["migrate-tolerate", "migrate"] {
        let dir = tempfile::tempdir().unwrap();
        let tree = tree_with_marker(dir.path());
        std::fs::write(
            tree.join("migrate.toml"),
            format!(
                "ledger-name = \"cozystack-version\"\ncluster-commands = [\"oc\", \"{own}\"]\n"
            ),
        )
        .unwrap();
        refused_as_bad_input(
            dir.path(),
            &tree,
            &["migrate.toml:2: key 'cluster-commands'", own],
        );
    }
}
