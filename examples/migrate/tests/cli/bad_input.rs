//! Bad input gets a clear error before anything runs: durations too large
//! to be meant, a ledger path that is a device or a FIFO, an index image or
//! ConfigMap name that is not one, control characters from the ledger or
//! from file names (escaped, never printed raw), and a tree without
//! `order.d/` (one code and one message from `plan` and `run`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{file_spec, json_within, migrate};

pub(crate) const HEADER: &str =
    "#!/bin/sh\n# cozystack-migration: tier=pre-apply\n# cozystack-migration: on-error=abort\n";

/// A tree with one pre-apply script `touch-marker`, which creates
/// `<dir>/marker` when it runs, and its manifest.
pub(crate) fn tree_with_marker(dir: &Path) -> PathBuf {
    let tree = dir.join("tree");
    std::fs::create_dir_all(tree.join("pre-apply")).unwrap();
    std::fs::create_dir_all(tree.join("order.d")).unwrap();
    std::fs::write(
        tree.join("pre-apply/touch-marker"),
        format!("{HEADER}: > \"{}\"\n", dir.join("marker").display()),
    )
    .unwrap();
    std::fs::write(tree.join("order.d/00001-v1"), "touch-marker\n").unwrap();
    tree
}

#[test]
fn durations_too_large_to_be_meant_are_refused_as_bad_input_before_anything_runs() {
    let cases = [
        ("--timeout", "9223372036854775807"),
        ("--timeout", "604801"),
        ("--grace", "18000000000000000"),
        ("--lock-ttl", "250000000000"),
        ("--lock-wait", "18446744073709551615"),
        ("--timeout", "0"),
    ];
    for (flag, value) in cases {
        let dir = tempfile::tempdir().unwrap();
        let tree = tree_with_marker(dir.path());
        let ledger = dir.path().join("ledger.json");
        let spec = common::empty_file_ledger(&ledger);
        let before = std::fs::read(&ledger).unwrap();
        let answer = json_within(
            Duration::from_secs(60),
            &[
                "run",
                tree.to_str().unwrap(),
                "--ledger",
                &spec,
                flag,
                value,
            ],
        );
        let what = format!("{flag} {value}");
        refused_before_running(dir.path(), &what, answer, flag);
        assert_eq!(
            std::fs::read(&ledger).unwrap(),
            before,
            "{what}: the ledger was written"
        );
    }
}

#[test]
fn the_largest_durations_allowed_are_accepted() {
    let dir = tempfile::tempdir().unwrap();
    let tree = tree_with_marker(dir.path());
    let ledger = common::empty_file_ledger(&dir.path().join("ledger.json"));
    let (code, doc, stderr) = json_within(
        Duration::from_secs(60),
        &[
            "run",
            tree.to_str().unwrap(),
            "--ledger",
            &ledger,
            "--timeout",
            "604800",
            "--grace",
            "604800",
            "--lock-ttl",
            "604800",
            "--lock-wait",
            "604800",
        ],
    );
    assert_eq!(code, 0, "{doc}\n{stderr}");
    assert!(dir.path().join("marker").exists(), "the script ran");
}

#[test]
fn a_ledger_path_that_is_a_device_or_a_fifo_is_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let tree = tree_with_marker(dir.path());
    let fifo = dir.path().join("fifo");
    common::mkfifo(&fifo);
    for (path, kind) in [
        (PathBuf::from("/dev/zero"), "character device"),
        (fifo, "FIFO"),
    ] {
        let spec = file_spec(&path);
        for args in [
            vec!["status", "--ledger", &spec],
            vec!["plan", tree.to_str().unwrap(), "--ledger", &spec],
            vec!["run", tree.to_str().unwrap(), "--ledger", &spec],
        ] {
            let (code, doc, stderr) = json_within(Duration::from_secs(20), &args);
            assert_eq!(code, 2, "{args:?}: {doc}\n{stderr}");
            let problem = doc["problems"][0].as_str().unwrap();
            assert!(
                problem.contains(&path.display().to_string()) && problem.contains(kind),
                "{args:?}: {problem}"
            );
        }
        assert!(!dir.path().join("marker").exists(), "the script ran");
    }
}

#[test]
fn migrate_index_refuses_an_image_or_configmap_name_that_is_not_one() {
    let dir = tempfile::tempdir().unwrap();
    let tree = tree_with_marker(dir.path());
    let tree = tree.to_str().unwrap();
    let digest = "a".repeat(64);
    let good = format!("ghcr.io/x/migrations@sha256:{digest}");
    let short = format!("ghcr.io/x/migrations@sha256:{}", &digest[..63]);
    let upper = format!("ghcr.io/x/migrations@sha256:{}", "A".repeat(64));
    let nameless = format!("@sha256:{digest}");
    let spaced = format!("ghcr.io/x/migr ations@sha256:{digest}");
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["--image", "ghcr.io/x/migrations@sha256:anything"],
            "--image",
        ),
        (vec!["--image", &short], "--image"),
        (vec!["--image", &upper], "--image"),
        (vec!["--image", &nameless], "--image"),
        (vec!["--image", &spaced], "--image"),
        (vec!["--image", "", "--allow-tag"], "--image"),
        (vec!["--image", &good, "--namespace", ""], "--namespace"),
        (
            vec!["--image", &good, "--namespace", "Cozy_System"],
            "--namespace",
        ),
        (vec!["--image", &good, "--name", ""], "--name"),
        (vec!["--image", &good, "--name", "a/b"], "--name"),
    ];
    for (extra, flag) in cases {
        let mut args = vec!["index", tree];
        args.extend(&extra);
        let (code, doc, stderr) = json_within(Duration::from_secs(20), &args);
        assert_eq!(code, 2, "{extra:?}: {doc}\n{stderr}");
        let problem = doc["problems"][0].as_str().unwrap_or_default();
        assert!(problem.contains(flag), "{extra:?}: {doc}");
    }
    let (code, doc, stderr) =
        json_within(Duration::from_secs(20), &["index", tree, "--image", &good]);
    assert_eq!(code, 0, "{doc}\n{stderr}");
    let (code, doc, stderr) = json_within(
        Duration::from_secs(20),
        &[
            "index",
            tree,
            "--image",
            "ghcr.io/x/migrations:v1",
            "--allow-tag",
        ],
    );
    assert_eq!(code, 0, "{doc}\n{stderr}");
}

/// The bytes of `text` no terminal may be handed raw: C0 controls other
/// than newline and tab, DEL, and C1 controls.
fn raw_controls(text: &str) -> Vec<char> {
    text.chars()
        .filter(|&c| c.is_control() && c != '\n' && c != '\t')
        .collect()
}

#[test]
fn control_characters_from_ledger_messages_are_escaped_in_status() {
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("tree");
    std::fs::create_dir_all(tree.join("pre-apply")).unwrap();
    std::fs::create_dir_all(tree.join("order.d")).unwrap();
    std::fs::write(
        tree.join("pre-apply/prints-escapes"),
        "#!/bin/sh\n# cozystack-migration: tier=pre-apply\n# cozystack-migration: on-error=warn\nprintf 'boom \\033]0;owned\\007 \\033[2J\\rcarriage \\302\\233 end\\n'\nexit 1\n",
    )
    .unwrap();
    std::fs::write(tree.join("order.d/00001-v1"), "prints-escapes\n").unwrap();
    let ledger = common::empty_file_ledger(&dir.path().join("ledger.json"));
    let (code, doc, stderr) = json_within(
        Duration::from_secs(60),
        &["run", tree.to_str().unwrap(), "--ledger", &ledger],
    );
    assert_eq!(code, 0, "{doc}\n{stderr}");
    for args in [
        vec!["status", "--ledger", ledger.as_str(), "prints-escapes"],
        vec!["status", "--ledger", ledger.as_str()],
    ] {
        let out = migrate().args(&args).output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{args:?}: {stdout}");
        assert!(stdout.contains("boom"), "{args:?}: {stdout}");
        assert_eq!(
            raw_controls(&stdout),
            [] as [char; 0],
            "{args:?}: {stdout:?}"
        );
        assert!(
            stdout.contains("\\x1b"),
            "{args:?}: the escape is shown: {stdout}"
        );
    }
}

#[test]
fn control_characters_in_file_names_are_escaped_in_load_errors() {
    let dir = tempfile::tempdir().unwrap();
    let tree = tree_with_marker(dir.path());
    std::fs::write(tree.join("pre-apply/bad\x1b[2Jname"), HEADER).unwrap();
    let ledger = file_spec(&dir.path().join("ledger.json"));
    for command in ["plan", "run"] {
        let out = migrate()
            .args([command, tree.to_str().unwrap(), "--ledger", &ledger])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{command}: {stderr}");
        assert!(stderr.contains("name"), "{command}: {stderr}");
        assert_eq!(
            raw_controls(&stderr),
            [] as [char; 0],
            "{command}: {stderr:?}"
        );
    }
}

#[test]
fn a_missing_order_d_gets_one_code_and_one_message_from_plan_and_run() {
    let dir = tempfile::tempdir().unwrap();
    let tree = tree_with_marker(dir.path());
    std::fs::remove_dir_all(tree.join("order.d")).unwrap();
    let ledger = file_spec(&dir.path().join("ledger.json"));
    let mut answers = Vec::new();
    for command in [vec!["plan"], vec!["run"], vec!["run", "--dry-run"]] {
        let mut args = command.clone();
        args.extend([tree.to_str().unwrap(), "--ledger", ledger.as_str()]);
        let (code, doc, stderr) = json_within(Duration::from_secs(20), &args);
        let problems = doc["problems"].clone();
        answers.push((code, problems.clone()));
        assert_eq!(code, 2, "{command:?}: {doc}\n{stderr}");
        assert!(
            problems[0].as_str().unwrap_or_default().contains("order.d"),
            "{command:?}: {doc}"
        );
    }
    assert!(answers.windows(2).all(|w| w[0] == w[1]), "{answers:?}");
    assert!(!dir.path().join("marker").exists());
}

/// `migrate run` of the marker tree in `dir` with `extra` flags and `env`
/// (name, value) set, killed after a minute: (exit code, document, stderr).
fn run_marker(
    dir: &Path,
    extra: &[&str],
    env: &[(&str, &str)],
) -> (i32, serde_json::Value, String) {
    let tree = tree_with_marker(dir);
    let ledger = common::empty_file_ledger(&dir.join("ledger.json"));
    let mut cmd = migrate();
    cmd.args(["run", tree.to_str().unwrap(), "--ledger", &ledger])
        .args(extra)
        .args(["--output", "json"])
        .env_remove("MIGRATION_NAMESPACE")
        .env_remove("MIGRATION_IMAGE");
    for (name, value) in env {
        cmd.env(name, value);
    }
    common::output_within(&mut cmd, Duration::from_secs(60))
}

/// Asserts that the `answer` (exit code, document, stderr) of a command on
/// the marker tree in `dir` refused bad input (exit 2) naming `flag`,
/// before its script ran or its run lock was taken; `what` names the case.
fn refused_before_running(
    dir: &Path,
    what: &str,
    (code, doc, stderr): (i32, serde_json::Value, String),
    flag: &str,
) {
    assert_eq!(code, 2, "{what}: {doc}\n{stderr}");
    let text = format!("{doc}{stderr}");
    assert!(text.contains(flag), "{what}: names {flag}: {text}");
    assert!(!dir.join("marker").exists(), "{what}: the script ran");
    assert!(
        !dir.join("ledger.json.lock").exists(),
        "{what}: the run lock was taken"
    );
}

#[test]
fn an_empty_or_invalid_run_flag_is_refused_as_bad_input_before_anything_runs() {
    // (flags, environment, the flag the refusal names)
    type Case<'a> = (&'a [&'a str], &'a [(&'a str, &'a str)], &'a str);
    let cases: [Case<'_>; 5] = [
        (&["--namespace", ""], &[], "--namespace"),
        (&["--namespace", "Cozy System"], &[], "--namespace"),
        (
            &[],
            &[("MIGRATION_NAMESPACE", "Cozy System")],
            "--namespace",
        ),
        (&["--image", ""], &[], "--image"),
        (&["--allow-interpreter", ""], &[], "--allow-interpreter"),
    ];
    for (extra, env, flag) in cases {
        let dir = tempfile::tempdir().unwrap();
        let answer = run_marker(dir.path(), extra, env);
        refused_before_running(dir.path(), &format!("{extra:?} {env:?}"), answer, flag);
    }
}

#[test]
fn an_empty_migration_namespace_or_image_from_a_templated_job_means_unset() {
    let dir = tempfile::tempdir().unwrap();
    let tree = tree_with_marker(dir.path());
    // The marker script, rewritten to say which namespace it was given.
    std::fs::write(
        tree.join("pre-apply/touch-marker"),
        format!(
            "{HEADER}printf '%s' \"$MIGRATION_NAMESPACE\" > \"{}\"\n",
            dir.path().join("marker").display()
        ),
    )
    .unwrap();
    let ledger = common::empty_file_ledger(&dir.path().join("ledger.json"));
    let mut cmd = migrate();
    cmd.args(["run", tree.to_str().unwrap(), "--ledger", &ledger])
        .args(["--output", "json"])
        .env("MIGRATION_NAMESPACE", "")
        .env("MIGRATION_IMAGE", "");
    let (code, doc, stderr) = common::output_within(&mut cmd, Duration::from_secs(60));
    assert_eq!(code, 0, "{doc}\n{stderr}");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("marker")).unwrap(),
        "cozy-system",
        "an empty MIGRATION_NAMESPACE is the default"
    );
    let (code, status, stderr) =
        json_within(Duration::from_secs(20), &["status", "--ledger", &ledger]);
    assert_eq!(code, 0, "{status}\n{stderr}");
    assert!(
        !status.to_string().contains("\"image\":\"\""),
        "no empty image recorded: {status}"
    );
}
