//! `migrate convert --rewrite` removes the version stamp and nothing else:
//! other functions of a helper that also stamps stay called, a helper stays
//! while a converted script still calls into it, a script's own apply of a
//! rendered ledger ConfigMap is reported for review, and a script the
//! rewrite would leave without a command is not called rewritten.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use std::path::PathBuf;

use common::Repo;
use common::numbered::{change, changes, write};

/// A helper with the stamp beside a helper that does real work.
const PLATFORM: &str = "# Platform helpers; the version stamp lives here too.\nlabel_tenants() {\n  kubectl label namespace -l tenant=true migrated=yes --overwrite\n}\n\nstamp_version() {\n  : \"${1:?stamp_version: version argument required}\"\n  kubectl create configmap cozystack-version --namespace cozy-system \\\n    --from-literal=version=\"$1\" --dry-run=client -o yaml | kubectl apply -f -\n}\n";

/// A helper rendering the ledger ConfigMap (pure) and one applying it.
const VERSION: &str = "render_version_manifest() {\n  cat <<EOF\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cozystack-version\n  namespace: cozy-system\n  labels:\n    platform.cozystack.io/no-delete: \"true\"\ndata:\n  version: \"$1\"\nEOF\n}\n\nstamp_labeled_version() {\n  render_version_manifest \"$1\" | kubectl apply -f -\n}\n";

const LABELS_THEN_STAMPS: &str =
    "#!/bin/sh\nset -eu\n. \"$(dirname \"$0\")/lib/platform.sh\"\nlabel_tenants\nstamp_version 2\n";

/// The shape of the reference platform's slot 42: renders the ledger with
/// the helper and applies it itself.
const APPLIES_RENDERED: &str = "#!/bin/sh\nset -eu\n. \"$(dirname \"$0\")/lib/version.sh\"\nMANIFEST=$(render_version_manifest 3)\nprintf '%s\\n' \"$MANIFEST\" | kubectl apply -f -\n";

fn only_stamps(next: u64) -> String {
    format!(
        "#!/bin/sh\nset -eu\n. \"$(dirname \"$0\")/lib/version.sh\"\nstamp_labeled_version {next}\n"
    )
}

/// A numbered history with `scripts` (slot 1, 2, ...) and both helpers,
/// released as v1.0.0.
fn history(scripts: &[&str]) -> Repo {
    let repo = Repo::new();
    write(&repo, "lib/platform.sh", PLATFORM);
    write(&repo, "lib/version.sh", VERSION);
    for (i, s) in scripts.iter().enumerate() {
        write(&repo, &(i + 1).to_string(), s);
    }
    repo.release("v1.0.0");
    repo
}

/// `convert --rewrite` of a [`history`] of `scripts` into a fresh
/// directory, which must succeed: the directory, the converted tree and the
/// report.
fn rewritten(scripts: &[&str]) -> (tempfile::TempDir, PathBuf, serde_json::Value) {
    let repo = history(scripts);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("t");
    let (code, report, err) = common::numbered::convert(&repo, &out, &["--rewrite"]);
    assert_eq!(code, 0, "{err}");
    (dir, out, report)
}

fn script<'a>(report: &'a serde_json::Value, slug: &str) -> &'a serde_json::Value {
    common::by_slug(&report["scripts"], slug).unwrap_or_else(|| panic!("no {slug}: {report}"))
}

#[test]
fn a_helper_beside_the_stamp_in_the_same_lib_file_stays_called_and_the_lib_stays() {
    let (_dir, out, report) = rewritten(&[LABELS_THEN_STAMPS]);
    assert_eq!(
        changes(&report, "1"),
        [
            change("lib-path", 3, true),
            change("version-stamp", 5, true)
        ]
    );
    assert_eq!(script(&report, "1")["status"], "rewritten");
    let converted = std::fs::read_to_string(out.join("pre-apply/1")).unwrap();
    assert!(
        converted.contains(". \"$MIGRATION_TREE/lib/platform.sh\"\nlabel_tenants\n"),
        "{converted}"
    );
    assert!(!converted.contains("stamp_version"), "{converted}");
    assert_eq!(
        std::fs::read_to_string(out.join("lib/platform.sh")).unwrap(),
        PLATFORM
    );
    // Nothing sources the render helper: it goes; the platform helper stays.
    assert_eq!(
        report["dropped_lib"],
        serde_json::json!(["lib/version.sh"]),
        "{report}"
    );
}

#[test]
fn a_script_applying_the_ledger_its_helper_renders_keeps_its_label_and_the_helper() {
    // The manifest sets `version` (the stamp, removed) and a label, which
    // stays as a label of the ledger object under its own key.
    let (_dir, out, report) = rewritten(&[LABELS_THEN_STAMPS, APPLIES_RENDERED, &only_stamps(4)]);
    assert_eq!(
        changes(&report, "2"),
        [
            change("lib-path", 3, true),
            change("version-stamp", 5, true)
        ]
    );
    let message = &script(&report, "2")["changes"][1]["message"];
    common::assert_contains_all(message.as_str().unwrap(), &["render_version_manifest"]);
    assert_eq!(script(&report, "2")["status"], "rewritten");
    assert_eq!(
        script(&report, "2")["behaviour"]["result"],
        "passed",
        "{report}"
    );
    // Slot 2 still calls the render function: the helper file stays.
    assert!(out.join("lib/version.sh").is_file());
    assert_eq!(report["dropped_lib"], serde_json::json!([]), "{report}");
    let converted = std::fs::read_to_string(out.join("pre-apply/2")).unwrap();
    assert!(
        converted.contains(". \"$MIGRATION_TREE/lib/version.sh\""),
        "{converted}"
    );
    assert!(
        converted.contains("\nkubectl label configmap --namespace \"cozy-system\" cozystack-version platform.cozystack.io/no-delete=true --overwrite\n"),
        "{converted}"
    );
    assert!(!converted.contains("kubectl apply"), "{converted}");
}

#[test]
fn a_helper_nothing_calls_into_after_the_rewrite_is_dropped() {
    let (_dir, out, report) = rewritten(&[LABELS_THEN_STAMPS, &only_stamps(3)]);
    assert_eq!(
        report["dropped_lib"],
        serde_json::json!(["lib/version.sh"]),
        "{report}"
    );
    assert!(!out.join("lib/version.sh").exists());
    assert!(out.join("lib/platform.sh").is_file());
}

#[test]
fn a_script_the_rewrite_leaves_without_a_command_is_reviewed_not_rewritten() {
    let (_dir, _, report) = rewritten(&[LABELS_THEN_STAMPS, &only_stamps(3)]);
    assert_eq!(
        changes(&report, "2"),
        [
            change("no-command-left", 1, false),
            change("version-stamp", 3, true),
            change("version-stamp", 4, true)
        ]
    );
    assert_eq!(script(&report, "2")["status"], "review");
}
