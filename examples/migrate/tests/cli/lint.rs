//! `migrate lint`: for each rule, a clean tree broken in exactly the way the
//! rule catches, and the clean tree that passes.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use std::path::Path;

use common::{fields, json};
use migration_core::testing::fixtures::{ScratchTree, TreeBuilder, script_text};
use migration_core::{OnError, Tier};

/// A clean tree: two scripts with tests, a revoked list, a legacy map.
fn clean() -> ScratchTree {
    let tree = TreeBuilder::new()
        .script_with(Tier::PreApply, "a", OnError::Abort, &[], "echo ok")
        .script_with(Tier::Background, "b", OnError::Abort, &[], "echo ok")
        .revoked("# none\n")
        .legacy_map("1 a\n")
        .scratch();
    write(&tree.root(), "tests/a.sh", "#!/bin/sh\n");
    write(&tree.root(), "tests/b.sh", "#!/bin/sh\n");
    tree
}

/// Writes `text` to `<dir>/<relative>`, creating its directory.
fn write(dir: &Path, relative: &str, text: &str) {
    let path = dir.join(relative);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// Lints `dir` with `extra` arguments and returns (exit code, rule ids found).
fn rules_with(dir: &Path, extra: &[&str]) -> (i32, Vec<String>) {
    let mut args = vec!["lint", dir.to_str().unwrap()];
    args.extend_from_slice(extra);
    let (code, doc, _) = json(&args);
    let rules = fields(&doc["findings"], "rule");
    (code, rules.into_iter().map(str::to_owned).collect())
}

/// Lints `dir` and returns (exit code, rule ids found).
fn rules(dir: &Path) -> (i32, Vec<String>) {
    rules_with(dir, &[])
}

/// Lints the clean tree after `setup` broke it.
fn broken(setup: impl FnOnce(&Path)) -> (i32, Vec<String>) {
    let tree = clean();
    setup(&tree.root());
    rules(&tree.root())
}

/// Lints the clean tree with `<relative>` (over)written as `text`.
fn with_file(relative: &str, text: &str) -> (i32, Vec<String>) {
    broken(|d| write(d, relative, text))
}

/// Lints the clean tree with pre-apply script `a` given `body`.
fn with_body(body: &str) -> (i32, Vec<String>) {
    with_file("pre-apply/a", &script_text("pre-apply", "abort", &[], body))
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
fn a_clean_tree_has_no_findings_and_exits_zero() {
    assert_eq!(rules(&clean().root()), (0, vec![]));
}

#[test]
fn the_demo_tree_is_clean() {
    let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../demo");
    assert_eq!(rules(&demo), (0, vec![]));
}

#[test]
fn a_script_named_other_than_a_slug_is_an_error() {
    assert_rule(
        with_file(
            "pre-apply/Bad_Name.sh",
            &script_text("pre-apply", "abort", &[], ""),
        ),
        "slug",
    );
}

#[test]
fn a_header_without_on_error_is_an_error() {
    assert_rule(
        with_file(
            "pre-apply/a",
            "#!/bin/sh\n# cozystack-migration: tier=pre-apply\n",
        ),
        "header",
    );
}

#[test]
fn a_script_without_a_header_is_an_error() {
    assert_rule(with_file("pre-apply/a", "echo no header\n"), "header");
}

#[test]
fn a_header_tier_other_than_the_scripts_directory_is_an_error() {
    assert_rule(
        with_file("pre-apply/a", &script_text("background", "abort", &[], "")),
        "tier",
    );
}

#[test]
fn the_same_slug_in_both_tiers_is_an_error() {
    assert_rule(
        with_file("background/a", &script_text("background", "abort", &[], "")),
        "duplicate-slug",
    );
}

#[test]
fn requiring_a_slug_nothing_knows_is_an_error() {
    assert_rule(
        with_file(
            "pre-apply/a",
            &script_text("pre-apply", "abort", &["ghost"], ""),
        ),
        "requires",
    );
}

#[cfg(unix)]
#[test]
fn a_symlink_out_of_the_tree_is_an_error() {
    assert_rule(
        broken(|d| std::os::unix::fs::symlink("/etc/passwd", d.join("pre-apply/evil")).unwrap()),
        "symlink",
    );
}

#[test]
fn a_script_above_the_size_limit_is_an_error() {
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
fn a_list_file_line_that_is_not_a_slug_is_an_error() {
    assert_rule(with_file("revoked", "not a slug!\n"), "list-file");
}

#[test]
fn a_manifest_listing_a_slug_twice_is_an_error() {
    assert_rule(with_file("order.d/00001-v1", "a\na\n"), "manifest");
}

#[test]
fn a_directory_inside_a_tier_directory_is_an_error() {
    assert_rule(
        broken(|d| std::fs::create_dir_all(d.join("pre-apply/nested")).unwrap()),
        "layout",
    );
}

#[test]
fn a_shebang_other_than_the_configured_dialect_is_an_error_and_the_dialect_is_configurable() {
    let bash = |tier: &str| script_text(tier, "abort", &[], "").replace("#!/bin/sh", "#!/bin/bash");
    assert_rule(
        with_file("pre-apply/a", &bash("pre-apply")),
        "shell-dialect",
    );
    // Configurable: the same tree passes when the dialect is bash... apart from b.
    let tree = clean();
    write(&tree.root(), "pre-apply/a", &bash("pre-apply"));
    write(&tree.root(), "background/b", &bash("background"));
    let (code, found) = rules_with(&tree.root(), &["--shebang", "/bin/bash"]);
    assert_eq!(code, 0, "{found:?}");
}

#[test]
fn a_script_writing_the_ledger_configmap_is_an_error() {
    assert_rule(
        with_body(
            "kubectl -n cozy-system patch configmap cozystack-version --type merge -p '{\"data\":{\"version\":\"46\"}}'",
        ),
        "ledger-write",
    );
}

#[test]
fn a_for_loop_over_a_command_substitution_is_an_error_because_it_fails_open() {
    assert_rule(
        with_body("for ns in $(kubectl get ns -o name); do kubectl label \"$ns\" a=b; done"),
        "for-command-substitution",
    );
}

#[test]
fn a_kubectl_failure_turned_into_success_is_an_error() {
    assert_rule(
        with_body("kubectl delete ns old || true"),
        "kubectl-error-ignored",
    );
}

#[test]
fn kubectl_in_a_pipeline_is_a_warning_that_does_not_fail_the_lint() {
    let (code, found) = with_body("kubectl get ns | grep x");
    assert_eq!((code, found), (0, vec!["kubectl-in-pipeline".to_owned()]));
}

#[test]
fn a_script_without_a_test_is_an_error_and_the_tests_directory_is_configurable() {
    assert_rule(
        broken(|d| std::fs::remove_file(d.join("tests/b.sh")).unwrap()),
        "missing-test",
    );
    // The tests directory is configurable.
    let tree = clean();
    std::fs::rename(tree.root().join("tests"), tree.root().join("spec")).unwrap();
    let (code, _) = rules_with(&tree.root(), &["--tests-dir", "spec"]);
    assert_eq!(code, 0);
}

#[test]
fn findings_carry_file_line_rule_and_message() {
    let tree = clean();
    write(
        &tree.root(),
        "pre-apply/a",
        &script_text("pre-apply", "abort", &[], "kubectl delete ns old || :"),
    );
    let (_, doc, _) = json(&["lint", tree.root().to_str().unwrap()]);
    let f = &doc["findings"][0];
    assert_eq!(f["file"], "pre-apply/a");
    assert_eq!(f["line"], 5);
    assert_eq!(f["rule"], "kubectl-error-ignored");
    assert_eq!(f["level"], "error");
    assert!(f["message"].as_str().unwrap().contains("|| :"));
    assert_eq!(doc["errors"], 1);
}
