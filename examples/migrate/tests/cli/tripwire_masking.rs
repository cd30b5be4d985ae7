//! Every way of masking a failed cluster command, under real shells (dash,
//! busybox ash, bash) and a fake `kubectl` (`helm`, `flux`) on PATH: each
//! ends not-`ok`, and the same scripts record `ok` when the commands work.
//!
//! Built only with the `failpoints` feature (as CI runs the suite; see the
//! `[[test]]` entry in Cargo.toml): the runner's pre-run text scan is then
//! switched off for these runs (`MIGRATE_TEST_SKIP_PRERUN_SCAN`), so what is
//! proven is the run-time guarantee alone; without it the scan would refuse
//! these scripts before the tripwire is reached.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use common::shells::{self, Shell};
use common::tripwire::Scratch;

/// Every way of masking a failed cluster command that errexit does not
/// see, as `(slug, body, bash only)`. Each is valid with a working cluster.
const MASKS: &[(&str, &str, bool)] = &[
    (
        "pipeline",
        r#"kubectl get ns -o name | while read -r ns; do echo "$ns"; done"#,
        false,
    ),
    ("or-true", "kubectl delete ns old || true", false),
    ("or-colon", "kubectl delete ns old || :", false),
    (
        "or-exit-0",
        "kubectl get ns -o name || exit 0\necho went-on",
        false,
    ),
    (
        "or-return-0",
        "f() {\n  kubectl delete ns old || return 0\n}\nf",
        false,
    ),
    ("or-brace-true", "kubectl delete ns old || { true; }", false),
    ("or-newline-true", "kubectl delete ns old ||\n  true", false),
    (
        "or-echo",
        r#"kubectl delete ns old || echo "could not delete old""#,
        false,
    ),
    (
        "substitution-or-true",
        r#"x=$(kubectl get ns -o name || true); echo "$x""#,
        false,
    ),
    (
        "substitution-in-local",
        "f() {\n  local x=$(kubectl get ns -o name)\n  echo \"$x\"\n}\nf",
        false,
    ),
    (
        "substitution-in-export",
        r#"export NSS=$(kubectl get ns -o name); echo "$NSS""#,
        false,
    ),
    (
        "substitution-in-case",
        "case $(kubectl get ns -o name) in\n  *kube-system*) echo has ;;\n  *) echo none ;;\nesac",
        false,
    ),
    (
        "substitution-in-test",
        r#"if [ -n "$(kubectl get ns -o name)" ]; then echo some; fi"#,
        false,
    ),
    (
        "substitution-in-bracket-test",
        r#"[ "$(kubectl get ns -o name)" = "" ] && echo none; echo went-on"#,
        false,
    ),
    (
        "for-substitution",
        r#"for ns in $(kubectl get ns -o name); do echo "$ns"; done"#,
        false,
    ),
    (
        "for-backticks",
        "for ns in `kubectl get ns -o name`; do echo \"$ns\"; done",
        false,
    ),
    (
        "for-tab-before-in",
        "for ns\tin $(kubectl get ns -o name); do echo \"$ns\"; done",
        false,
    ),
    (
        "for-newline-before-in",
        "for ns\nin $(kubectl get ns -o name)\ndo\n  echo \"$ns\"\ndone",
        false,
    ),
    (
        "for-after-semicolon",
        "true; for ns in $(kubectl get ns -o name);do echo \"$ns\";done",
        false,
    ),
    (
        "for-inside-eval",
        r#"eval 'for ns in $(kubectl get ns -o name); do echo "$ns"; done'"#,
        false,
    ),
    (
        "for-after-then",
        "if true; then for ns in $(kubectl get ns -o name); do echo \"$ns\"; done; fi",
        false,
    ),
    ("set-plus-e", "set +e\nkubectl delete ns old\nset -e", false),
    (
        "trap-exit-0",
        "trap 'exit 0' EXIT\nkubectl delete ns old",
        false,
    ),
    ("bang", "! kubectl delete ns old\necho went-on", false),
    (
        "background-and-wait",
        "kubectl delete ns old &\nwait",
        false,
    ),
    ("and-list", "kubectl get ns -o name && echo found", false),
    (
        "function-called-from-if",
        "f() {\n  kubectl delete ns old\n  echo after\n}\nif f; then echo done; fi",
        false,
    ),
    (
        "function-called-from-or",
        "f() {\n  kubectl delete ns old\n  echo after\n}\nf || echo failed",
        false,
    ),
    (
        "wrapper-function",
        "kube() {\n  kubectl --request-timeout=5s \"$@\" 2>/dev/null || echo \"kubectl $* failed\"\n}\nkube delete ns old",
        false,
    ),
    (
        "kubectl-variable",
        r#""$KUBECTL" delete ns old || true"#,
        false,
    ),
    (
        "command-builtin",
        "command kubectl delete ns old || true",
        false,
    ),
    ("env-wrapper", "env kubectl delete ns old || true", false),
    ("xargs", "echo old | xargs kubectl delete ns || true", false),
    (
        "exec-in-subshell",
        "(exec kubectl delete ns old) || true",
        false,
    ),
    ("helm", "helm status cozystack || true", false),
    ("flux", "flux reconcile source git cozystack || true", false),
    (
        "process-substitution",
        r#"while read -r ns; do echo "$ns"; done < <(kubectl get ns -o name)"#,
        true,
    ),
    (
        "mapfile",
        r#"mapfile -t nss < <(kubectl get ns -o name); echo "${#nss[@]}""#,
        true,
    ),
    (
        "lib-helper-original-bug",
        ". \"$MIGRATION_TREE/lib/k8s.sh\"\nfor_each_ns echo\ndelete_ns old",
        false,
    ),
];

/// The original data-loss bug, as a sourced helper: a `for` over a
/// substitution and `|| echo`.
const LIB_HELPER: &str = r#"# shared helpers
for_each_ns() {
  for ns in $(kubectl get ns -o name); do
    "$@" "$ns"
  done
}
delete_ns() {
  kubectl delete ns "$1" || echo "could not delete $1, continuing"
}
"#;

fn cases(shell: &Shell) -> Vec<(&'static str, &'static str)> {
    MASKS
        .iter()
        .filter(|(_, _, bash_only)| shell.is_bash || !bash_only)
        .map(|(slug, body, _)| (*slug, *body))
        .collect()
}

/// Runs every masking class under `shell` (on-error=warn, so all run) with
/// a failing cluster and asserts none is recorded `ok`; then the same
/// scripts against a working cluster, all `ok`.
fn every_masking_class_fails_then_passes(shell: &Shell) -> usize {
    let cases = cases(shell);
    let s = Scratch::new();
    s.lib("k8s.sh", LIB_HELPER);
    s.scripts(shell, "warn", &cases);
    let (code, doc, err) = s.run(shell, "fail");
    assert_eq!(code, 0, "warn runs go on: {err}");
    let mut wrong = Vec::new();
    for (slug, _) in &cases {
        let entry = s.entry(slug);
        let reason = entry["reason"].as_str().unwrap_or("");
        // Unscanned: either errexit saw it (bash pipefail) or the tripwire did.
        let expected_reason = reason == "masked-failure" || reason.starts_with("exit-status-");
        if entry["state"] != "failed" || !expected_reason {
            wrong.push(format!("{slug}: {} ({reason})", entry["state"]));
        }
    }
    assert!(
        wrong.is_empty(),
        "{}: masked failures recorded as something else than failed:\n{}\n{err}",
        shell.name,
        wrong.join("\n")
    );
    let results = doc["results"].as_array().unwrap();
    assert_eq!(results.len(), cases.len());
    assert!(results.iter().all(|r| r["outcome"] == "failed"), "{doc:#}");

    // The same scripts, a healthy cluster: all ok.
    let ok = Scratch::new();
    ok.lib("k8s.sh", LIB_HELPER);
    ok.scripts(shell, "warn", &cases);
    let (code, doc, err) = ok.run(shell, "ok");
    assert_eq!(code, 0, "{err}");
    let not_ok: Vec<String> = cases
        .iter()
        .map(|(slug, _)| (slug, ok.entry(slug)))
        .filter(|(_, e)| e["state"] != "ok")
        .map(|(slug, e)| format!("{slug}: {} {}", e["reason"], e["message"]))
        .collect();
    assert!(
        not_ok.is_empty(),
        "{}: with a working cluster these were not ok:\n{}\n{err}",
        shell.name,
        not_ok.join("\n")
    );
    assert!(
        doc["results"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["outcome"] == "ok")
    );
    assert!(ok.calls().len() >= cases.len(), "{:?}", ok.calls());
    cases.len()
}

#[test]
fn every_masked_cluster_command_failure_is_recorded_failed_under_dash_and_the_same_scripts_pass_on_a_working_cluster()
 {
    let n = every_masking_class_fails_then_passes(&shells::dash());
    eprintln!("dash: {n} masking classes");
}

#[test]
fn every_masked_cluster_command_failure_is_recorded_failed_under_busybox_ash_and_the_same_scripts_pass_on_a_working_cluster()
 {
    if let Some(ash) = shells::busybox_ash() {
        let n = every_masking_class_fails_then_passes(&ash);
        eprintln!("busybox ash: {n} masking classes");
    }
}

#[test]
fn every_masked_cluster_command_failure_is_recorded_failed_under_bash_and_the_same_scripts_pass_on_a_working_cluster()
 {
    let n = every_masking_class_fails_then_passes(&shells::bash());
    eprintln!("bash: {n} masking classes");
}
