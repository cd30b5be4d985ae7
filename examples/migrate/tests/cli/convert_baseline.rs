//! Frozen legacy scripts run: `migrate convert` writes what lint would still
//! block in them to a reviewed `lint-baseline` (one entry per finding, with
//! its reason, bound to the file's bytes); lint lists each accepted finding,
//! the pre-run scan lets the script run, and the run-time tripwire still
//! guards it. Any edit of the script voids its entries.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use common::numbered::write;
use common::{Repo, git, json, migrate};

/// Slot 1 ignores a kubectl failure (`|| true`): a finding lint blocks.
const MASKS: &str = "#!/bin/sh\nset -eu\nkubectl get ns -o name || true\necho masked-probe-done\nkubectl create configmap -n cozy-system cozystack-version --from-literal=version=2 --dry-run=client -o yaml | kubectl apply -f-\n";

const CLEAN: &str = "#!/bin/sh\nset -eu\nkubectl annotate ns default converted=yes --overwrite\nkubectl create configmap -n cozy-system cozystack-version --from-literal=version=3 --dry-run=client -o yaml | kubectl apply -f-\n";

/// The numbered history converted with --rewrite into `<dir>/tree`,
/// committed, with its manifest: (report, tree).
fn converted(dir: &Path) -> (serde_json::Value, PathBuf) {
    converted_with(dir, MASKS)
}

/// [`converted`] of a history whose slot 1 is `first` (slot 2 [`CLEAN`]).
fn converted_with(dir: &Path, first: &str) -> (serde_json::Value, PathBuf) {
    let repo = Repo::new();
    write(&repo, "1", first);
    write(&repo, "2", CLEAN);
    repo.release("v1.0.0");
    let tree = dir.join("tree");
    let (code, report, err) = common::numbered::convert(&repo, &tree, &["--rewrite"]);
    assert_eq!(code, 0, "{err}");
    git(dir, &["init", "--quiet", "-b", "main"]);
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "--quiet", "-m", "converted"]);
    let order = tree.join("order.d");
    let (code, _, err) = common::manifest_of(dir, "tree", &["--out", order.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    (report, tree)
}

fn lint(tree: &Path) -> (i32, serde_json::Value) {
    let (code, doc, _) = json(&["lint", tree.to_str().unwrap(), "--shellcheck-level", "off"]);
    (code, doc)
}

/// A file ledger of a numbered cluster at `version`.
fn numbered_ledger(path: &Path, version: u64) -> String {
    let doc = serde_json::json!({
        "format": "migration-ledger/v1",
        "ledger": {"revision": 1, "data": {"version": version.to_string()}},
        "lock": null,
        "lock_generation": 0,
    });
    std::fs::write(path, doc.to_string()).unwrap();
    common::file_spec(path)
}

/// `migrate run` of the tree with a `kubectl` on PATH that runs `body`.
fn run(tree: &Path, scratch: &Path, kubectl: &str) -> (i32, serde_json::Value, String) {
    let bin = scratch.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let fake = bin.join("kubectl");
    std::fs::write(&fake, format!("#!/bin/sh\n{kubectl}\n")).unwrap();
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let ledger = numbered_ledger(&scratch.join("ledger.json"), 1);
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    let out = migrate()
        .arg("run")
        .arg(tree)
        .args([
            "--ledger",
            &ledger,
            "--tier",
            "pre-apply",
            "--output",
            "json",
        ])
        .env("PATH", path)
        .output()
        .unwrap();
    common::parse(out)
}

#[test]
fn convert_writes_each_finding_left_in_a_frozen_script_with_its_reason_and_lint_lists_it() {
    let dir = tempfile::tempdir().unwrap();
    let (report, tree) = converted(dir.path());
    assert_eq!(report["baseline_entries"], 1, "{report}");
    let baseline = std::fs::read_to_string(tree.join("lint-baseline")).unwrap();
    let entries: Vec<&str> = baseline.lines().filter(|l| !l.starts_with('#')).collect();
    assert_eq!(entries.len(), 1, "{baseline}");
    assert!(
        entries[0].starts_with("pre-apply/1:5 kubectl-error-ignored ")
            && entries[0].contains("converted from platform/migrations/1"),
        "{baseline}"
    );
    let (code, doc) = lint(&tree);
    assert_eq!(code, 0, "{doc}");
    let accepted = &doc["baselined"];
    assert_eq!(accepted.as_array().unwrap().len(), 1, "{doc}");
    assert_eq!(accepted[0]["file"], "pre-apply/1");
    assert_eq!(accepted[0]["line"], 5);
    assert_eq!(accepted[0]["rule"], "kubectl-error-ignored");
    // Never silent: the text form names it too.
    let (_, text, _) = common::text(&["lint", tree.to_str().unwrap(), "--shellcheck-level", "off"]);
    common::assert_contains_all(&text, &["pre-apply/1:5: baselined[kubectl-error-ignored]"]);
}

/// Runs `tree` on a working cluster, which must run both scripts `ok`.
fn runs_both_ok(tree: &Path) {
    let working = tempfile::tempdir().unwrap();
    let (code, doc, err) = run(tree, working.path(), "echo ok");
    assert_eq!(code, 0, "{doc}\n{err}");
    common::assert_field_pairs(
        &doc["results"],
        "slug",
        "outcome",
        &[("1", "ok"), ("2", "ok")],
    );
}

#[test]
fn a_frozen_script_runs_past_the_scan_and_the_tripwire_still_refuses_its_masked_failure() {
    let dir = tempfile::tempdir().unwrap();
    let (_, tree) = converted(dir.path());
    runs_both_ok(&tree);
    // An unreachable API server: the `|| true` hides it from the script,
    // not from the tripwire. Nothing is recorded, the upgrade stops.
    let failing = tempfile::tempdir().unwrap();
    let (code, doc, err) = run(
        &tree,
        failing.path(),
        "echo 'The connection to the server 127.0.0.1:6443 was refused - did you specify the right host or port?' >&2\nexit 1",
    );
    assert_eq!(code, 4, "{doc}\n{err}");
    common::assert_field_pairs(
        &doc["report"]["results"],
        "slug",
        "reason",
        &[("1", "masked-failure")],
    );
}

#[test]
fn plan_shows_each_finding_the_baseline_accepts_in_a_pending_script() {
    let dir = tempfile::tempdir().unwrap();
    let (_, tree) = converted(dir.path());
    let scratch = tempfile::tempdir().unwrap();
    let ledger = numbered_ledger(&scratch.path().join("ledger.json"), 1);
    let (code, doc, err) = json(&["plan", tree.to_str().unwrap(), "--ledger", &ledger]);
    assert_eq!(code, 0, "{doc}\n{err}");
    common::assert_contains_all(
        &doc["warnings"].to_string(),
        &["pre-apply/1:5 [kubectl-error-ignored] accepted by lint-baseline:5"],
    );
}

#[test]
fn an_edited_frozen_script_loses_its_baseline_and_is_refused_again() {
    let dir = tempfile::tempdir().unwrap();
    let (_, tree) = converted(dir.path());
    let script = tree.join("pre-apply/1");
    let mut text = std::fs::read_to_string(&script).unwrap();
    text.push_str("echo edited\n");
    std::fs::write(&script, text).unwrap();
    let (code, doc) = lint(&tree);
    assert_eq!(code, 2, "{doc}");
    common::assert_field_pairs(
        &doc["findings"],
        "file",
        "rule",
        &[
            ("lint-baseline", "baseline-stale"),
            ("pre-apply/1", "kubectl-error-ignored"),
        ],
    );
    // And run refuses it before anything runs.
    let scratch = tempfile::tempdir().unwrap();
    let (code, doc, err) = run(&tree, scratch.path(), "echo ok");
    assert_eq!(
        (code, &doc["error"]),
        (3, &serde_json::json!("refused")),
        "{doc}\n{err}"
    );
    assert!(doc.to_string().contains("kubectl-error-ignored"), "{doc}");
}

/// [`converted_with`] `first`, whose `lint-baseline` must hold a line
/// `entry` accepts and which lints clean: the directory, the tree and the
/// lint document.
fn baselined_and_lints_clean(
    first: &str,
    entry: impl Fn(&str) -> bool,
) -> (tempfile::TempDir, PathBuf, serde_json::Value) {
    let dir = tempfile::tempdir().unwrap();
    let (report, tree) = converted_with(dir.path(), first);
    let baseline = std::fs::read_to_string(tree.join("lint-baseline")).unwrap();
    assert!(baseline.lines().any(entry), "{baseline}\n{report}");
    let (code, doc) = lint(&tree);
    assert_eq!(code, 0, "{doc}");
    (dir, tree, doc)
}

/// A frozen script that surfaces a partial failure as an annotation of the
/// version ConfigMap and clears it on success (the reference platform's
/// slot 46 shape), then stamps.
const ANNOTATES_LEDGER: &str = "#!/bin/sh\nset -eu\nkubectl get ns -o name\nkubectl annotate configmap --namespace cozy-system cozystack-version cozystack.io/migration-1-failed-tenants- >/dev/null\nkubectl create configmap -n cozy-system cozystack-version --from-literal=version=2 --dry-run=client -o yaml | kubectl apply -f-\n";

#[test]
fn a_frozen_script_annotating_the_ledger_outside_the_engines_keys_is_baselined_and_runs() {
    let (_dir, tree, doc) = baselined_and_lints_clean(ANNOTATES_LEDGER, |l| {
        l.starts_with("pre-apply/1:") && l.contains(" ledger-annotate ")
    });
    assert!(
        doc["baselined"]
            .as_array()
            .unwrap()
            .iter()
            .any(|b| b["rule"] == "ledger-annotate"),
        "{doc}"
    );
    runs_both_ok(&tree);
}

/// A frozen script under bash in a tree whose dialect is sh (the reference
/// platform's later slots): its shebang is what it ran under and cannot
/// change, so convert accepts the dialect finding in the open too.
const UNDER_BASH: &str = "#!/bin/bash\nset -euo pipefail\nkubectl get ns -o name\nkubectl create configmap -n cozy-system cozystack-version --from-literal=version=2 --dry-run=client -o yaml | kubectl apply -f-\n";

#[test]
fn a_frozen_script_under_another_shell_is_baselined_for_its_dialect_and_lints_clean() {
    baselined_and_lints_clean(UNDER_BASH, |l| {
        l.starts_with("pre-apply/1:1 shell-dialect ")
    });
}
