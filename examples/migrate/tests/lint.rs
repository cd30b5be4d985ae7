//! `migrate lint`: one test per rule, each with a tree that breaks it and
//! the clean tree that does not.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;

use common::{json, script};

/// A clean tree: two scripts with tests, a revoked list, a legacy map.
fn clean(dir: &Path) {
    for (tier, slug) in [("pre-apply", "a"), ("background", "b")] {
        std::fs::create_dir_all(dir.join(tier)).unwrap();
        std::fs::write(
            dir.join(tier).join(slug),
            script(tier, "abort", &[], "echo ok"),
        )
        .unwrap();
    }
    std::fs::create_dir_all(dir.join("tests")).unwrap();
    std::fs::write(dir.join("tests/a.sh"), "#!/bin/sh\n").unwrap();
    std::fs::write(dir.join("tests/b.sh"), "#!/bin/sh\n").unwrap();
    std::fs::write(dir.join("revoked"), "# none\n").unwrap();
    std::fs::write(dir.join("legacy-map"), "1 a\n").unwrap();
}

/// Lints `dir` and returns (exit code, rule ids found).
fn rules(dir: &Path) -> (i32, Vec<String>) {
    let (code, doc, _) = json(&["lint", dir.to_str().unwrap()]);
    let rules = doc["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["rule"].as_str().unwrap().to_owned())
        .collect();
    (code, rules)
}

fn broken(setup: impl FnOnce(&Path)) -> (i32, Vec<String>) {
    let dir = tempfile::tempdir().unwrap();
    clean(dir.path());
    setup(dir.path());
    rules(dir.path())
}

#[test]
fn a_clean_tree_has_no_findings_and_exits_zero() {
    let dir = tempfile::tempdir().unwrap();
    clean(dir.path());
    assert_eq!(rules(dir.path()), (0, vec![]));
}

#[test]
fn the_demo_tree_is_clean() {
    let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../demo");
    assert_eq!(rules(&demo), (0, vec![]));
}

fn assert_rule(result: (i32, Vec<String>), rule: &str) {
    assert_eq!(result.0, 2, "{result:?}");
    assert!(
        result.1.iter().any(|r| r == rule),
        "expected {rule}: {:?}",
        result.1
    );
}

#[test]
fn rule_slug() {
    assert_rule(
        broken(|d| {
            std::fs::write(
                d.join("pre-apply/Bad_Name.sh"),
                script("pre-apply", "abort", &[], ""),
            )
            .unwrap()
        }),
        "slug",
    );
}

#[test]
fn rule_header_missing_on_error() {
    assert_rule(
        broken(|d| {
            std::fs::write(
                d.join("pre-apply/a"),
                "#!/bin/sh\n# cozystack-migration: tier=pre-apply\n",
            )
            .unwrap()
        }),
        "header",
    );
}

#[test]
fn rule_header_missing_entirely() {
    assert_rule(
        broken(|d| std::fs::write(d.join("pre-apply/a"), "echo no header\n").unwrap()),
        "header",
    );
}

#[test]
fn rule_tier() {
    assert_rule(
        broken(|d| {
            std::fs::write(
                d.join("pre-apply/a"),
                script("background", "abort", &[], ""),
            )
            .unwrap()
        }),
        "tier",
    );
}

#[test]
fn rule_duplicate_slug() {
    assert_rule(
        broken(|d| {
            std::fs::write(
                d.join("background/a"),
                script("background", "abort", &[], ""),
            )
            .unwrap()
        }),
        "duplicate-slug",
    );
}

#[test]
fn rule_requires() {
    assert_rule(
        broken(|d| {
            std::fs::write(
                d.join("pre-apply/a"),
                script("pre-apply", "abort", &["ghost"], ""),
            )
            .unwrap()
        }),
        "requires",
    );
}

#[cfg(unix)]
#[test]
fn rule_symlink() {
    assert_rule(
        broken(|d| std::os::unix::fs::symlink("/etc/passwd", d.join("pre-apply/evil")).unwrap()),
        "symlink",
    );
}

#[test]
fn rule_size() {
    assert_rule(
        broken(|d| {
            std::fs::File::create(d.join("pre-apply/huge"))
                .unwrap()
                .set_len(2 * 1024 * 1024)
                .unwrap()
        }),
        "size",
    );
}

#[test]
fn rule_list_file() {
    assert_rule(
        broken(|d| std::fs::write(d.join("revoked"), "not a slug!\n").unwrap()),
        "list-file",
    );
}

#[test]
fn rule_manifest() {
    assert_rule(
        broken(|d| {
            std::fs::create_dir_all(d.join("order.d")).unwrap();
            std::fs::write(d.join("order.d/00001-v1"), "a\na\n").unwrap();
        }),
        "manifest",
    );
}

#[test]
fn rule_layout() {
    assert_rule(
        broken(|d| std::fs::create_dir_all(d.join("pre-apply/nested")).unwrap()),
        "layout",
    );
}

#[test]
fn rule_shell_dialect() {
    let bash = script("pre-apply", "abort", &[], "").replace("#!/bin/sh", "#!/bin/bash");
    assert_rule(
        broken(|d| std::fs::write(d.join("pre-apply/a"), &bash).unwrap()),
        "shell-dialect",
    );
    // Configurable: the same tree passes when the dialect is bash... apart from b.
    let dir = tempfile::tempdir().unwrap();
    clean(dir.path());
    std::fs::write(dir.path().join("pre-apply/a"), &bash).unwrap();
    std::fs::write(
        dir.path().join("background/b"),
        script("background", "abort", &[], "").replace("#!/bin/sh", "#!/bin/bash"),
    )
    .unwrap();
    let (code, doc, _) = json(&[
        "lint",
        dir.path().to_str().unwrap(),
        "--shebang",
        "/bin/bash",
    ]);
    assert_eq!(code, 0, "{doc}");
}

#[test]
fn rule_ledger_write() {
    assert_rule(
        broken(|d| {
            let body = "kubectl -n cozy-system patch configmap cozystack-version --type merge -p '{\"data\":{\"version\":\"46\"}}'";
            std::fs::write(
                d.join("pre-apply/a"),
                script("pre-apply", "abort", &[], body),
            )
            .unwrap()
        }),
        "ledger-write",
    );
}

#[test]
fn rule_for_command_substitution() {
    assert_rule(
        broken(|d| {
            let body = "for ns in $(kubectl get ns -o name); do kubectl label \"$ns\" a=b; done";
            std::fs::write(
                d.join("pre-apply/a"),
                script("pre-apply", "abort", &[], body),
            )
            .unwrap()
        }),
        "for-command-substitution",
    );
}

#[test]
fn rule_kubectl_error_ignored() {
    assert_rule(
        broken(|d| {
            std::fs::write(
                d.join("pre-apply/a"),
                script("pre-apply", "abort", &[], "kubectl delete ns old || true"),
            )
            .unwrap()
        }),
        "kubectl-error-ignored",
    );
}

#[test]
fn rule_kubectl_in_pipeline_is_a_warning_that_does_not_fail() {
    let (code, found) = broken(|d| {
        std::fs::write(
            d.join("pre-apply/a"),
            script("pre-apply", "abort", &[], "kubectl get ns | grep x"),
        )
        .unwrap()
    });
    assert_eq!((code, found), (0, vec!["kubectl-in-pipeline".to_owned()]));
}

#[test]
fn rule_missing_test() {
    assert_rule(
        broken(|d| std::fs::remove_file(d.join("tests/b.sh")).unwrap()),
        "missing-test",
    );
    // The tests directory is configurable.
    let dir = tempfile::tempdir().unwrap();
    clean(dir.path());
    std::fs::rename(dir.path().join("tests"), dir.path().join("spec")).unwrap();
    let (code, _, _) = json(&["lint", dir.path().to_str().unwrap(), "--tests-dir", "spec"]);
    assert_eq!(code, 0);
}

#[test]
fn findings_carry_file_line_rule_and_message() {
    let dir = tempfile::tempdir().unwrap();
    clean(dir.path());
    std::fs::write(
        dir.path().join("pre-apply/a"),
        script("pre-apply", "abort", &[], "kubectl delete ns old || :"),
    )
    .unwrap();
    let (_, doc, _) = json(&["lint", dir.path().to_str().unwrap()]);
    let f = &doc["findings"][0];
    assert_eq!(f["file"], "pre-apply/a");
    assert_eq!(f["line"], 5);
    assert_eq!(f["rule"], "kubectl-error-ignored");
    assert_eq!(f["level"], "error");
    assert!(f["message"].as_str().unwrap().contains("|| :"));
    assert_eq!(doc["errors"], 1);
}
