//! `migrate lint`, the pre-run scan and `plan` on the shell syntax tree.
//!
//! The fixtures under `tests/fixtures/shell/` are named by scenario:
//! `masking/` holds scripts that hide a failing cluster command (each names
//! the rule it breaks in `# expect:` and, where it can run, the shell in
//! which it really exits 0 with a failing kubectl in `# masks-in:`);
//! `legitimate/` holds the forms that must never be flagged; `lib-bug/` is
//! the original data-loss bug, living in a sourced helper.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::{json, migrate, parse, placed};
use migration_core::testing::fixtures::script_text;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/shell")
}

fn demo_lib() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../demo/lib/kube.sh")
}

#[derive(Debug)]
struct Fixture {
    name: String,
    text: String,
    shebang: String,
    expect: Option<String>,
    masks_in: Option<String>,
}

fn load(kind: &str) -> Vec<Fixture> {
    let mut out: Vec<Fixture> = std::fs::read_dir(fixtures().join(kind))
        .unwrap()
        .map(|e| {
            let path = e.unwrap().path();
            let text = std::fs::read_to_string(&path).unwrap();
            let tag = |key: &str| {
                text.lines()
                    .find_map(|l| l.strip_prefix(&format!("# {key}: ")))
                    .map(str::to_owned)
            };
            Fixture {
                name: path.file_name().unwrap().to_str().unwrap().to_owned(),
                shebang: text.lines().next().unwrap()[2..].to_owned(),
                expect: tag("expect"),
                masks_in: tag("masks-in"),
                text,
            }
        })
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    assert!(!out.is_empty());
    out
}

/// A tree with the given pre-apply scripts, a test for each, the demo's
/// `lib/kube.sh` and a manifest listing them.
fn tree(scripts: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    for d in ["pre-apply", "background", "tests", "lib", "order.d"] {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
    std::fs::copy(demo_lib(), root.join("lib/kube.sh")).unwrap();
    let mut order = String::new();
    for (name, text) in scripts {
        std::fs::write(root.join("pre-apply").join(name), text).unwrap();
        std::fs::write(root.join(format!("tests/{name}.sh")), "#!/bin/sh\n").unwrap();
        order.push_str(&format!("{name}\n"));
    }
    std::fs::write(root.join("order.d/00001-v1"), order).unwrap();
    dir
}

/// `migrate lint --output json` with extra arguments and environment.
fn lint(root: &Path, extra: &[&str], path_env: Option<&str>) -> (i32, serde_json::Value) {
    let mut cmd = migrate();
    cmd.arg("lint")
        .arg(root)
        .args(extra)
        .args(["--output", "json"]);
    if let Some(p) = path_env {
        cmd.env("PATH", p);
    }
    let (code, doc, _) = parse(cmd.output().unwrap());
    (code, doc)
}

/// `migrate lint` without shellcheck of a tree whose one script, `a`, has
/// `body` from line 5 on: (exit code, JSON document).
fn lint_body(body: &str) -> (i32, serde_json::Value) {
    let dir = tree(&[("a", &script_text("pre-apply", "abort", &[], body))]);
    lint(dir.path(), &["--shellcheck-level", "off"], None)
}

/// [`lint_body`], which must refuse `body` (exit 2) with exactly the
/// findings `expected`, as `(rule, line)`: the document.
fn refused(body: &str, expected: &[(&str, u64)]) -> serde_json::Value {
    let (code, doc) = lint_body(body);
    assert_eq!(code, 2, "{doc}");
    let expected: Vec<(String, u64)> = expected.iter().map(|(r, l)| (r.to_string(), *l)).collect();
    assert_eq!(placed(&doc), expected, "{doc}");
    doc
}

fn rules(doc: &serde_json::Value) -> Vec<String> {
    doc["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["rule"].as_str().unwrap().to_owned())
        .collect()
}

/// Executables that always fail as an unreachable API server would.
fn failing_cluster_commands(dir: &Path) -> PathBuf {
    let bin = dir.join("failing-bin");
    std::fs::create_dir_all(&bin).unwrap();
    for name in ["kubectl", "helm", "flux"] {
        write_executable(
            &bin.join(name),
            "#!/bin/sh\necho 'error: the server is unavailable' >&2\nexit 1\n",
        );
    }
    bin
}

fn write_executable(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn on_path(program: &str) -> bool {
    std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .any(|d| d.join(program).is_file())
}

#[test]
fn every_masking_fixture_is_flagged_with_its_rule() {
    let mut wrong = Vec::new();
    for f in load("masking") {
        let expect = f.expect.clone().unwrap();
        let dir = tree(&[(&f.name, &f.text)]);
        let (code, doc) = lint(
            dir.path(),
            &["--shebang", &f.shebang, "--shellcheck-level", "off"],
            None,
        );
        let found = rules(&doc);
        let warning = expect == "kubectl-in-pipeline";
        if !found.contains(&expect) || code != if warning { 0 } else { 2 } {
            wrong.push(format!(
                "{}: expected {expect}, got {found:?} (exit {code})",
                f.name
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn no_legitimate_fixture_is_flagged() {
    let mut wrong = Vec::new();
    for f in load("legitimate") {
        let dir = tree(&[(&f.name, &f.text)]);
        let (code, doc) = lint(
            dir.path(),
            &["--shebang", &f.shebang, "--shellcheck-level", "off"],
            None,
        );
        if code != 0 || !rules(&doc).is_empty() {
            wrong.push(format!("{}: {}", f.name, doc["findings"]));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn every_masking_fixture_really_exits_0_with_a_failing_kubectl_under_errexit() {
    let scratch = tempfile::tempdir().unwrap();
    let bin = failing_cluster_commands(scratch.path());
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut wrong = Vec::new();
    for f in load("masking") {
        let Some(shell) = f.masks_in.as_deref() else {
            continue;
        };
        if !on_path(shell) {
            eprintln!("{shell} is not installed: not demonstrating {}", f.name);
            continue;
        }
        let dir = tree(&[(&f.name, &f.text)]);
        let mut cmd = Command::new(shell);
        cmd.arg("-e");
        if shell == "bash" {
            cmd.args(["-o", "pipefail"]);
        }
        let out = cmd
            .arg(format!("pre-apply/{}", f.name))
            .current_dir(dir.path())
            .env("PATH", &path)
            .env("MIGRATION_TREE", dir.path())
            .env_remove("KUBECTL")
            .output()
            .unwrap();
        if !out.status.success() {
            wrong.push(format!(
                "{} failed under {shell} -e, so it masks nothing: {}",
                f.name,
                String::from_utf8_lossy(&out.stderr)
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// Scripts whose rule is an error, all pending in one tree.
fn error_fixtures() -> Vec<Fixture> {
    load("masking")
        .into_iter()
        .filter(|f| f.expect.as_deref() != Some("kubectl-in-pipeline"))
        .collect()
}

fn refusal_lines(doc: &serde_json::Value) -> Vec<String> {
    doc["problems"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| p.as_str().unwrap().lines().map(str::to_owned))
        .collect::<Vec<_>>()
}

fn assert_every_fixture_refused(doc: &serde_json::Value, fixtures: &[Fixture]) {
    let lines = refusal_lines(doc);
    let missing: Vec<String> = fixtures
        .iter()
        .filter(|f| {
            let file = format!("pre-apply/{}:", f.name);
            let rule = format!("[{}]", f.expect.as_deref().unwrap());
            !lines.iter().any(|l| l.contains(&file) && l.contains(&rule))
        })
        .map(|f| f.name.clone())
        .collect();
    assert!(
        missing.is_empty(),
        "not refused: {missing:?}\n{}",
        lines.join("\n")
    );
}

/// A tree with every fixture of `fixtures` pending on an existing ledger:
/// (tree, ledger state directory, `--ledger` spec).
fn pending(fixtures: &[Fixture]) -> (tempfile::TempDir, tempfile::TempDir, String) {
    let scripts: Vec<(&str, &str)> = fixtures
        .iter()
        .map(|f| (f.name.as_str(), f.text.as_str()))
        .collect();
    let dir = tree(&scripts);
    let state = tempfile::tempdir().unwrap();
    let ledger = common::empty_file_ledger(&state.path().join("ledger.json"));
    (dir, state, ledger)
}

/// Every error-level masking fixture pending, after `migrate COMMAND` over
/// them exited 3 naming each one.
struct Refused {
    fixtures: Vec<Fixture>,
    /// The command's JSON document.
    doc: serde_json::Value,
    dir: tempfile::TempDir,
    /// Holds the ledger file while the test runs.
    _state: tempfile::TempDir,
    ledger: String,
}

fn refused_by(command: &str) -> Refused {
    let fixtures = error_fixtures();
    let (dir, _state, ledger) = pending(&fixtures);
    let (code, doc, _) = common::on_ledger(command, dir.path(), &ledger, &[]);
    assert_eq!(code, 3, "{doc}");
    assert_every_fixture_refused(&doc, &fixtures);
    Refused {
        fixtures,
        doc,
        dir,
        _state,
        ledger,
    }
}

#[test]
fn run_refuses_every_error_level_masking_fixture_before_anything_runs() {
    let refused = refused_by("run");
    let (_, status, _) = json(&["status", "--ledger", &refused.ledger]);
    assert!(status["entries"].as_array().unwrap().is_empty());
}

#[test]
fn plan_exits_3_with_the_plan_when_run_would_refuse_a_pending_script() {
    let refused = refused_by("plan");
    let doc = &refused.doc;
    assert_eq!(doc["error"], "refused");
    assert_eq!(doc["exit_code"], 3);
    assert_eq!(
        doc["plan"]["pending"].as_array().unwrap().len(),
        refused.fixtures.len(),
        "the plan itself is still reported"
    );
    // Text mode says so too, after the plan.
    let tree = refused.dir.path().to_str().unwrap();
    let (code, out, _) = common::text(&["plan", tree, "--ledger", &refused.ledger]);
    assert_eq!(code, 3);
    assert!(out.contains("run would refuse this plan"));
}

#[test]
fn plan_and_run_accept_every_legitimate_fixture() {
    let fixtures = load("legitimate");
    let (dir, _state, ledger) = pending(&fixtures);
    let (code, doc, _) = common::on_ledger("plan", dir.path(), &ledger, &[]);
    assert_eq!(code, 0, "{doc}");
    assert_eq!(doc["pending"].as_array().unwrap().len(), fixtures.len());
}

fn lib_bug() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let src = fixtures().join("lib-bug");
    for rel in [
        "lib/tenants.sh",
        "pre-apply/relabel-tenants",
        "tests/relabel-tenants.sh",
        "order.d/00001-v1",
    ] {
        let to = dir.path().join(rel);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(src.join(rel), to).unwrap();
    }
    std::fs::create_dir_all(dir.path().join("background")).unwrap();
    dir
}

#[test]
fn lint_refuses_the_lib_version_of_the_original_bug_at_the_helpers_lines() {
    let dir = lib_bug();
    let (code, doc) = lint(dir.path(), &["--shellcheck-level", "off"], None);
    assert_eq!(code, 2, "{doc}");
    let findings = doc["findings"].as_array().unwrap();
    let at = |rule: &str| {
        findings
            .iter()
            .find(|f| f["rule"] == rule)
            .unwrap_or_else(|| panic!("no {rule}: {doc}"))
    };
    let for_list = at("for-command-substitution");
    assert_eq!(
        (for_list["file"].as_str(), for_list["line"].as_u64()),
        (Some("lib/tenants.sh"), Some(10))
    );
    common::assert_contains_all(
        for_list["message"].as_str().unwrap(),
        &["sourced from pre-apply/relabel-tenants:6"],
    );
    let echo = at("kubectl-error-ignored");
    assert_eq!(
        (echo["file"].as_str(), echo["line"].as_u64()),
        (Some("lib/tenants.sh"), Some(11))
    );
    assert_eq!(findings.len(), 2, "one finding per problem: {doc}");
}

#[test]
fn run_and_plan_refuse_the_lib_version_of_the_original_bug_naming_the_helper() {
    let dir = lib_bug();
    let state = tempfile::tempdir().unwrap();
    let ledger = common::empty_file_ledger(&state.path().join("ledger.json"));
    let root = dir.path().to_str().unwrap();
    for command in ["plan", "run"] {
        let (code, doc, _) = json(&[command, root, "--ledger", &ledger]);
        assert_eq!(code, 3, "{command}: {doc}");
        let lines = refusal_lines(&doc);
        assert!(
            lines.iter().any(
                |l| l.contains("lib/tenants.sh:10: [for-command-substitution]")
                    && l.contains("sourced from pre-apply/relabel-tenants:6")
            ),
            "{command}: {}",
            lines.join("\n")
        );
        assert!(
            lines
                .iter()
                .any(|l| l.contains("lib/tenants.sh:11: [kubectl-error-ignored]")),
            "{command}: {}",
            lines.join("\n")
        );
    }
}

#[test]
fn lint_checks_every_lib_helper_even_one_no_script_sources() {
    let dir = tree(&[("a", &script_text("pre-apply", "abort", &[], "echo ok"))]);
    std::fs::write(
        dir.path().join("lib/unused.sh"),
        "drop_all() {\n    kubectl delete ns old || true\n}\n",
    )
    .unwrap();
    let (code, doc) = lint(dir.path(), &["--shellcheck-level", "off"], None);
    assert_eq!(code, 2);
    assert_eq!(doc["findings"][0]["file"], "lib/unused.sh");
    assert_eq!(doc["findings"][0]["line"], 2);
    assert_eq!(doc["findings"][0]["rule"], "kubectl-error-ignored");
}

#[test]
fn a_source_path_that_cannot_be_resolved_is_an_error() {
    // What the scan cannot read it cannot vouch for (issue 35): run refuses
    // it too (tests/cli/same_refusals.rs).
    let body = ". \"$HOME/helpers.sh\"\necho ok";
    let dir = tree(&[("a", &script_text("pre-apply", "abort", &[], body))]);
    let (code, doc) = lint(dir.path(), &["--shellcheck-level", "off"], None);
    assert_eq!(
        (code, rules(&doc)),
        (2, vec!["source-unresolved".to_owned()])
    );
    assert_eq!(doc["findings"][0]["level"], "error");
}

mod handled;
mod lines;
mod shellcheck;
mod waivers;
