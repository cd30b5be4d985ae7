//! The run-time tripwire with real shells (dash, busybox ash, bash) and a
//! fake `kubectl` (`helm`, `flux`) on PATH: every way of masking a failed
//! cluster command ends not-`ok`, and the same scripts record `ok` when the
//! commands work.
//!
//! With the `failpoints` feature (as CI runs the suite), the runner's
//! pre-run text scan is switched off for these runs
//! (`MIGRATE_TEST_SKIP_PRERUN_SCAN`), so what is proven is the run-time
//! guarantee alone: each masked failure is caught while the script runs and
//! recorded with reason `masked-failure`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::shells::{self, Shell};
use common::{migrate, parse};

/// What kubectl printed to stderr when the API server was down (recorded
/// from the real kubectl, tests/fixtures/kubectl-errors/).
fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/kubectl-errors")
        .join(format!("{name}.txt"))
}

/// A fake cluster command: `FAKE_CLUSTER=ok` answers like a healthy
/// cluster, `fail` prints `FAKE_STDERR` (a recorded kubectl error) and exits
/// 1. Every call is appended to `$SCRATCH/calls`.
const FAKE: &str = r#"#!/bin/sh
echo "$(basename "$0") $*" >> "$SCRATCH/calls"
case "${FAKE_CLUSTER:-fail}" in
ok)
    case "$*" in
    *"-f -"*) cat > "$SCRATCH/stdin-seen" ;;
    esac
    printf 'namespace/default\nnamespace/kube-system\n'
    exit 0 ;;
*)
    cat "$FAKE_STDERR" >&2
    exit 1 ;;
esac
"#;

struct Scratch {
    dir: tempfile::TempDir,
}

impl Scratch {
    fn new() -> Self {
        let s = Scratch {
            dir: tempfile::tempdir().unwrap(),
        };
        let bin = s.bin();
        std::fs::create_dir_all(&bin).unwrap();
        for name in ["kubectl", "helm", "flux", "mykube", "oc"] {
            s.write_exec(&bin.join(name), FAKE);
        }
        for d in [
            "tree/pre-apply",
            "tree/background",
            "tree/order.d",
            "tree/lib",
        ] {
            std::fs::create_dir_all(s.path().join(d)).unwrap();
        }
        common::empty_file_ledger(&s.path().join("ledger.json"));
        s
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn bin(&self) -> PathBuf {
        self.path().join("fakebin")
    }

    fn tree(&self) -> PathBuf {
        self.path().join("tree")
    }

    fn write_exec(&self, path: &Path, text: &str) {
        use std::os::unix::fs::PermissionsExt;
        std::fs::write(path, text).unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    /// Writes the scripts (in this order) under `shell`, with `on_error`.
    fn scripts(&self, shell: &Shell, on_error: &str, scripts: &[(&str, &str)]) {
        let mut order = String::new();
        for (slug, body) in scripts {
            std::fs::write(
                self.tree().join("pre-apply").join(slug),
                format!(
                    "#!{}\n# cozystack-migration: tier=pre-apply\n# cozystack-migration: on-error={on_error}\nset -eu\n{body}\n",
                    shell.shebang
                ),
            )
            .unwrap();
            order.push_str(slug);
            order.push('\n');
        }
        std::fs::write(self.tree().join("order.d/00001-v1"), order).unwrap();
    }

    fn lib(&self, name: &str, text: &str) {
        std::fs::write(self.tree().join("lib").join(name), text).unwrap();
    }

    /// `migrate run` with the fake commands first on PATH.
    fn command(&self, shell: &Shell, cluster: &str, stderr_fixture: &str) -> Command {
        let mut cmd = migrate();
        let path = format!(
            "{}:{}",
            self.bin().display(),
            std::env::var("PATH").unwrap_or_default()
        );
        cmd.args(["run", self.tree().to_str().unwrap(), "--ledger"])
            .arg(format!(
                "file:{}",
                self.path().join("ledger.json").display()
            ))
            .args(["--allow-interpreter", &shell.shebang, "--output", "json"])
            .env("PATH", path)
            .env("SCRATCH", self.path())
            .env("FAKE_CLUSTER", cluster)
            .env("FAKE_STDERR", fixture(stderr_fixture))
            .env_remove("MIGRATE_CLUSTER_COMMANDS")
            .env_remove("KUBECTL");
        if cfg!(feature = "failpoints") {
            cmd.env("MIGRATE_TEST_SKIP_PRERUN_SCAN", "1");
        }
        cmd
    }

    fn run(&self, shell: &Shell, cluster: &str) -> (i32, serde_json::Value, String) {
        parse(
            self.command(shell, cluster, "connection-refused")
                .output()
                .unwrap(),
        )
    }

    fn entries(&self) -> Vec<serde_json::Value> {
        let (_, doc, _) = common::json(&[
            "status",
            "--ledger",
            &format!("file:{}", self.path().join("ledger.json").display()),
        ]);
        doc["entries"].as_array().unwrap().clone()
    }

    fn entry(&self, slug: &str) -> serde_json::Value {
        self.entries()
            .into_iter()
            .find(|e| e["slug"] == slug)
            .unwrap_or_else(|| panic!("no entry for {slug}"))
    }

    fn calls(&self) -> Vec<String> {
        std::fs::read_to_string(self.path().join("calls"))
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }
}

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
        let expected_reason = if cfg!(feature = "failpoints") {
            // Unscanned: either errexit saw it (bash pipefail) or the tripwire did.
            reason == "masked-failure" || reason.starts_with("exit-status-")
        } else {
            !reason.is_empty()
        };
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
#[cfg_attr(
    not(feature = "failpoints"),
    ignore = "run with --features failpoints (as CI does): the pre-run scan would refuse these scripts before the tripwire is reached"
)]
fn every_masked_cluster_command_failure_is_recorded_failed_under_dash_and_the_same_scripts_pass_on_a_working_cluster()
 {
    let n = every_masking_class_fails_then_passes(&shells::dash());
    eprintln!("dash: {n} masking classes");
}

#[test]
#[cfg_attr(
    not(feature = "failpoints"),
    ignore = "run with --features failpoints (as CI does): the pre-run scan would refuse these scripts before the tripwire is reached"
)]
fn every_masked_cluster_command_failure_is_recorded_failed_under_busybox_ash_and_the_same_scripts_pass_on_a_working_cluster()
 {
    if let Some(ash) = shells::busybox_ash() {
        let n = every_masking_class_fails_then_passes(&ash);
        eprintln!("busybox ash: {n} masking classes");
    }
}

#[test]
#[cfg_attr(
    not(feature = "failpoints"),
    ignore = "run with --features failpoints (as CI does): the pre-run scan would refuse these scripts before the tripwire is reached"
)]
fn every_masked_cluster_command_failure_is_recorded_failed_under_bash_and_the_same_scripts_pass_on_a_working_cluster()
 {
    let n = every_masking_class_fails_then_passes(&shells::bash());
    eprintln!("bash: {n} masking classes");
}

#[test]
#[cfg_attr(
    not(feature = "failpoints"),
    ignore = "run with --features failpoints (as CI does): the pre-run scan would refuse these scripts before the tripwire is reached"
)]
fn a_masked_failure_names_each_failed_command_with_its_status_and_stderr() {
    let shell = shells::dash();
    let s = Scratch::new();
    s.scripts(
        &shell,
        "warn",
        &[(
            "two-calls",
            "kubectl get ns -o name || true\nhelm list -A || true\necho done",
        )],
    );
    let (_, _, err) = s.run(&shell, "fail");
    let entry = s.entry("two-calls");
    assert_eq!(entry["reason"], "masked-failure");
    let message = entry["message"].as_str().unwrap();
    assert!(
        message.contains("after 2 failed cluster-command call(s)"),
        "{message}"
    );
    assert!(
        message.contains("kubectl get ns -o name: exit 1 [unreachable]"),
        "{message}"
    );
    assert!(message.contains("helm list -A: exit 1"), "{message}");
    assert!(
        message.contains("The connection to the server 127.0.0.1:")
            && message.contains("was refused"),
        "the stderr head is named: {message}"
    );
    let (calls, output) = message.split_once("--- output ---").unwrap();
    assert!(
        !calls.contains("memcache.go") && output.contains("memcache.go"),
        "klog chatter is left out of the calls, not the output: {message}"
    );
    assert!(message.contains("--- output ---\n"), "{message}");
    assert!(message.ends_with("done"), "{message}");
    assert!(err.contains("two-calls failed (masked-failure)"), "{err}");
}

#[test]
#[cfg_attr(
    not(feature = "failpoints"),
    ignore = "run with --features failpoints (as CI does): the pre-run scan would refuse these scripts before the tripwire is reached"
)]
fn under_on_error_abort_a_masked_failure_records_nothing_and_stops_the_run() {
    let shell = shells::dash();
    let s = Scratch::new();
    s.scripts(
        &shell,
        "abort",
        &[
            ("masks", "kubectl delete ns old || true"),
            ("later", "echo later"),
        ],
    );
    let (code, doc, err) = s.run(&shell, "fail");
    assert_eq!(code, 4, "{err}");
    assert_eq!(doc["error"], "migration-failed");
    let problems = doc["problems"][0].as_str().unwrap();
    assert!(
        problems
            .contains("migration masks failed (masked-failure); nothing recorded, upgrade stopped"),
        "{problems}"
    );
    assert!(
        problems.contains("kubectl delete ns old: exit 1"),
        "{problems}"
    );
    assert!(
        s.entries().is_empty(),
        "nothing recorded: {:?}",
        s.entries()
    );
    assert_eq!(doc["report"]["results"].as_array().unwrap().len(), 1);
}

#[test]
#[cfg_attr(
    not(feature = "failpoints"),
    ignore = "run with --features failpoints (as CI does): the pre-run scan would refuse these scripts before the tripwire is reached"
)]
fn a_script_that_exits_non_zero_is_an_ordinary_failure() {
    let shell = shells::dash();
    let s = Scratch::new();
    s.scripts(&shell, "warn", &[("plain", "kubectl delete ns old")]);
    s.run(&shell, "fail");
    assert_eq!(s.entry("plain")["reason"], "exit-status-1");
}

#[test]
#[cfg_attr(
    not(feature = "failpoints"),
    ignore = "run with --features failpoints (as CI does): the pre-run scan would refuse these scripts before the tripwire is reached"
)]
fn a_tolerated_answer_is_recorded_ok_and_counted_in_the_message_and_the_report() {
    let shell = shells::dash();
    let s = Scratch::new();
    s.scripts(
        &shell,
        "abort",
        &[(
            "fail-open",
            "crd=$(migrate-tolerate --not-found -- kubectl get crd widgets.example.com -o name)\n[ -z \"$crd\" ] && echo 'no widgets CRD: nothing to migrate'",
        )],
    );
    let out = s.command(&shell, "fail", "not-found").output().unwrap();
    let (code, doc, err) = parse(out);
    assert_eq!(code, 0, "{err}");
    let entry = s.entry("fail-open");
    assert_eq!(entry["state"], "ok");
    assert_eq!(
        entry["message"],
        "1 tolerated cluster-command failure: kubectl get crd widgets.example.com -o name (not-found)"
    );
    let counts = &doc["results"][0]["cluster_commands"];
    assert_eq!(
        (
            counts["calls"].as_u64(),
            counts["tolerated"].as_u64(),
            counts["failed"].as_u64()
        ),
        (Some(1), Some(1), Some(0)),
        "{doc:#}"
    );
    assert!(
        err.contains(
            "migrate-tolerate: tolerated not-found: kubectl get crd widgets.example.com -o name"
        ),
        "the tolerance is visible in the log: {err}"
    );
}

#[test]
#[cfg_attr(
    not(feature = "failpoints"),
    ignore = "run with --features failpoints (as CI does): the pre-run scan would refuse these scripts before the tripwire is reached"
)]
fn the_tolerance_helper_passes_an_unreachable_server_through_as_a_failure_even_when_masked() {
    let shell = shells::dash();
    let s = Scratch::new();
    s.scripts(
        &shell,
        "warn",
        &[(
            "masked-helper",
            "migrate-tolerate --not-found --not-served --already-exists --conflict -- kubectl get crd x || true",
        )],
    );
    s.run(&shell, "fail");
    let entry = s.entry("masked-helper");
    assert_eq!(entry["reason"], "masked-failure");
    let message = entry["message"].as_str().unwrap();
    assert!(
        message.contains("kubectl get crd x: exit 1 [unreachable] (via migrate-tolerate --not-found --not-served --already-exists --conflict)"),
        "{message}"
    );
}

#[test]
#[cfg_attr(
    not(feature = "failpoints"),
    ignore = "run with --features failpoints (as CI does): the pre-run scan would refuse these scripts before the tripwire is reached"
)]
fn a_usage_error_of_the_tolerance_helper_is_a_failure_even_when_masked() {
    let shell = shells::dash();
    let s = Scratch::new();
    s.scripts(
        &shell,
        "warn",
        &[
            (
                "tolerates-nothing",
                "migrate-tolerate -- kubectl get crd x || true",
            ),
            (
                "wraps-a-non-cluster-command",
                "migrate-tolerate --not-found -- sh -c 'kubectl get x' || true",
            ),
        ],
    );
    s.run(&shell, "ok");
    for slug in ["tolerates-nothing", "wraps-a-non-cluster-command"] {
        let entry = s.entry(slug);
        assert_eq!(entry["reason"], "masked-failure", "{slug}: {entry}");
        assert!(
            entry["message"]
                .as_str()
                .unwrap()
                .contains("migrate-tolerate: "),
            "{entry}"
        );
    }
}

#[test]
#[cfg_attr(
    not(feature = "failpoints"),
    ignore = "run with --features failpoints (as CI does): the pre-run scan would refuse these scripts before the tripwire is reached"
)]
fn cluster_commands_come_from_the_flag_the_environment_and_the_tree_file() {
    let shell = shells::dash();
    let s = Scratch::new();
    std::fs::write(s.tree().join("cluster-commands"), "# ours\noc\n").unwrap();
    s.scripts(
        &shell,
        "warn",
        &[
            ("tree-file", "oc get projects || true"),
            ("flag-and-env", "mykube get ns || true"),
        ],
    );
    // Without the flag, mykube is not a cluster command.
    let (_, _, err) = parse(
        s.command(&shell, "fail", "connection-refused")
            .output()
            .unwrap(),
    );
    assert_eq!(s.entry("tree-file")["reason"], "masked-failure", "{err}");
    assert_eq!(s.entry("flag-and-env")["state"], "ok");

    for how in ["flag", "env"] {
        let s = Scratch::new();
        s.scripts(&shell, "warn", &[("flag-and-env", "mykube get ns || true")]);
        let mut cmd = s.command(&shell, "fail", "connection-refused");
        if how == "flag" {
            cmd.args(["--cluster-command", "mykube"]);
        } else {
            cmd.env("MIGRATE_CLUSTER_COMMANDS", "talosctl,mykube");
        }
        let (_, _, err) = parse(cmd.output().unwrap());
        assert_eq!(
            s.entry("flag-and-env")["reason"],
            "masked-failure",
            "{how}: {err}"
        );
    }
}

#[test]
#[cfg_attr(
    not(feature = "failpoints"),
    ignore = "run with --features failpoints (as CI does): the pre-run scan would refuse these scripts before the tripwire is reached"
)]
fn a_bad_cluster_command_setting_is_a_usage_error_before_anything_runs() {
    let shell = shells::dash();
    let s = Scratch::new();
    s.scripts(&shell, "warn", &[("a", "echo ran >> \"$SCRATCH/ran\"")]);
    std::fs::write(s.tree().join("cluster-commands"), "/usr/bin/kubectl\n").unwrap();
    let (code, doc, _) = parse(s.command(&shell, "ok", "not-found").output().unwrap());
    assert_eq!(code, 2, "{doc:#}");
    assert!(
        doc["problems"][0]
            .as_str()
            .unwrap()
            .starts_with("cluster-commands:1: "),
        "{doc:#}"
    );
    assert!(!s.path().join("ran").exists());
}

#[test]
#[cfg_attr(
    not(feature = "failpoints"),
    ignore = "run with --features failpoints (as CI does): the pre-run scan would refuse these scripts before the tripwire is reached"
)]
fn the_shim_passes_stdin_stdout_and_the_exit_status_through() {
    let shell = shells::dash();
    let s = Scratch::new();
    s.write_exec(
        &s.bin().join("kubectl"),
        "#!/bin/sh\ncat > \"$SCRATCH/stdin-seen\"\necho out-line\necho err-line >&2\nexit 0\n",
    );
    s.scripts(
        &shell,
        "abort",
        &[(
            "through",
            "out=$(kubectl apply -f - <<'EOF'\nkind: ConfigMap\nEOF\n)\necho \"got:$out\"\n[ \"$KUBECTL\" = \"$(command -v kubectl)\" ]",
        )],
    );
    let (code, _, err) = s.run(&shell, "ok");
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        std::fs::read_to_string(s.path().join("stdin-seen")).unwrap(),
        "kind: ConfigMap\n"
    );
    assert!(err.contains("[through] got:out-line"), "{err}");
    assert!(err.contains("[through] err-line"), "{err}");

    // The status comes back unchanged (3 here), so `if`/`case $?` still work.
    let s = Scratch::new();
    s.write_exec(&s.bin().join("kubectl"), "#!/bin/sh\nexit 3\n");
    s.scripts(&shell, "warn", &[("status", "kubectl get x")]);
    s.run(&shell, "ok");
    assert_eq!(s.entry("status")["reason"], "exit-status-3");
}

#[test]
#[cfg_attr(
    not(feature = "failpoints"),
    ignore = "run with --features failpoints (as CI does): the pre-run scan would refuse these scripts before the tripwire is reached"
)]
fn the_real_command_is_never_the_shim_itself_even_when_one_is_on_the_runners_path() {
    let shell = shells::dash();
    let s = Scratch::new();
    // A directory of shims from an outer run, first on the runner's PATH.
    let outer = s.path().join("outer-shims");
    std::fs::create_dir_all(&outer).unwrap();
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_migrate-shim"), outer.join("kubectl")).unwrap();
    s.scripts(&shell, "abort", &[("calls", "kubectl get ns -o name")]);
    let mut cmd = s.command(&shell, "ok", "not-found");
    let path = format!("{}:{}:/usr/bin:/bin", outer.display(), s.bin().display());
    cmd.env("PATH", path);
    let (code, _, err) = parse(cmd.output().unwrap());
    assert_eq!(code, 0, "{err}");
    assert_eq!(s.calls(), ["kubectl get ns -o name"]);
}

#[test]
#[cfg_attr(
    not(feature = "failpoints"),
    ignore = "run with --features failpoints (as CI does): the pre-run scan would refuse these scripts before the tripwire is reached"
)]
fn a_cluster_command_that_is_not_installed_fails_every_call() {
    let shell = shells::dash();
    let s = Scratch::new();
    std::fs::remove_file(s.bin().join("flux")).unwrap();
    s.scripts(
        &shell,
        "warn",
        &[(
            "no-flux",
            "for k in $(flux get kustomizations); do echo \"$k\"; done",
        )],
    );
    let mut cmd = s.command(&shell, "ok", "not-found");
    // Only the fake bin and the base system: no flux anywhere.
    cmd.env("PATH", format!("{}:/usr/bin:/bin", s.bin().display()));
    let (_, _, err) = parse(cmd.output().unwrap());
    if Path::new("/usr/bin/flux").exists() || Path::new("/bin/flux").exists() {
        eprintln!("SKIPPED: a real flux is installed");
        return;
    }
    let entry = s.entry("no-flux");
    assert_eq!(entry["reason"], "masked-failure", "{err}");
    assert!(
        entry["message"]
            .as_str()
            .unwrap()
            .contains("flux get kustomizations: exit 127"),
        "{entry}"
    );
}

#[test]
#[cfg_attr(
    not(feature = "failpoints"),
    ignore = "run with --features failpoints (as CI does): the pre-run scan would refuse these scripts before the tripwire is reached"
)]
fn a_script_that_removes_the_tripwire_report_fails() {
    let shell = shells::dash();
    let s = Scratch::new();
    s.scripts(
        &shell,
        "warn",
        &[(
            "cleaner",
            "rm -rf \"$(dirname \"$MIGRATE_TRIPWIRE_REPORT\")\"\nkubectl delete ns old || true",
        )],
    );
    s.run(&shell, "fail");
    let entry = s.entry("cleaner");
    assert_eq!(entry["reason"], "masked-failure");
    assert!(
        entry["message"]
            .as_str()
            .unwrap()
            .contains("was removed or replaced while the script ran"),
        "{entry}"
    );
}

#[test]
fn the_shims_are_armed_once_per_run_and_every_script_gets_a_fresh_report_of_its_own() {
    let shell = shells::dash();
    let s = Scratch::new();
    let body = "kubectl get ns\necho \"$PATH $KUBECTL\" > \"$SCRATCH/env-$MIGRATION_SLUG\"\necho \"$MIGRATE_TRIPWIRE_REPORT\" > \"$SCRATCH/report-$MIGRATION_SLUG\"";
    s.scripts(&shell, "warn", &[("first", body), ("second", body)]);
    let (code, _, err) = s.run(&shell, "ok");
    assert_eq!(code, 0, "{err}");
    let read = |name: &str| std::fs::read_to_string(s.path().join(name)).unwrap();
    assert_eq!(read("env-first"), read("env-second"));
    let (first, second) = (read("report-first"), read("report-second"));
    assert_ne!(first, second);
    // Read and removed as soon as its script was over: nothing can append
    // to it any more (the shim never creates a report).
    assert!(!Path::new(first.trim()).exists(), "{first}");
    assert_eq!(s.entry("first")["state"], "ok");
    assert_eq!(s.entry("second")["state"], "ok");
}

#[test]
fn reports_live_in_a_private_directory_on_dev_shm_which_a_script_cannot_take_from_the_next_one() {
    let shell = shells::dash();
    let s = Scratch::new();
    let note = "echo \"$MIGRATE_TRIPWIRE_REPORT\" > \"$SCRATCH/report-$MIGRATION_SLUG\"\nstat -c %a \"$(dirname \"$MIGRATE_TRIPWIRE_REPORT\")\" \"$(dirname \"$(dirname \"$KUBECTL\")\")\" | tr '\\n' ' ' > \"$SCRATCH/mode-$MIGRATION_SLUG\"";
    s.scripts(
        &shell,
        "warn",
        &[
            (
                "remover",
                &format!("{note}\nrm -rf \"$(dirname \"$MIGRATE_TRIPWIRE_REPORT\")\""),
            ),
            ("after", &format!("kubectl get ns\n{note}")),
        ],
    );
    let (code, _, err) = s.run(&shell, "ok");
    assert_eq!(code, 0, "{err}");
    let read = |name: &str| std::fs::read_to_string(s.path().join(name)).unwrap();
    let shm = Path::new(migrate::tripwire::arm::REPORT_BASE);
    let shm_usable = tempfile::tempdir_in(shm).is_ok();
    for slug in ["remover", "after"] {
        let report = read(&format!("report-{slug}"));
        assert_eq!(
            Path::new(report.trim()).starts_with(shm),
            shm_usable,
            "{slug}: {report}"
        );
        // Both private: the reports' directory and the shim directory.
        assert_eq!(read(&format!("mode-{slug}")).trim(), "700 700", "{slug}");
    }
    // Removing the reports' directory fails the script that did it (its
    // report is gone) and the next script gets the directory back.
    assert_eq!(s.entry("remover")["reason"], "masked-failure");
    assert_eq!(s.entry("after")["state"], "ok", "{}", s.entry("after"));
    let dir = Path::new(read("report-after").trim())
        .parent()
        .unwrap()
        .to_path_buf();
    assert!(
        !dir.exists(),
        "the run removes its reports' directory: {}",
        dir.display()
    );
}

#[test]
#[cfg_attr(
    not(feature = "failpoints"),
    ignore = "run with --features failpoints (as CI does): the pre-run scan would refuse these scripts before the tripwire is reached"
)]
fn a_shim_removed_by_one_script_fails_it_and_is_restored_for_the_next() {
    let shell = shells::dash();
    let s = Scratch::new();
    s.scripts(
        &shell,
        "warn",
        &[
            ("vandal", "rm \"${KUBECTL:?}\"\nkubectl get ns || true"),
            ("after", "kubectl delete ns old || true"),
        ],
    );
    s.run(&shell, "fail");
    let vandal = s.entry("vandal");
    assert_eq!(vandal["reason"], "masked-failure", "{vandal}");
    assert!(
        vandal["message"]
            .as_str()
            .unwrap()
            .contains("was removed or replaced while the script ran"),
        "{vandal}"
    );
    // Without the restored shim, `after` would call the fake kubectl
    // unguarded and be recorded ok.
    let after = s.entry("after");
    assert_eq!(after["reason"], "masked-failure", "{after}");
    assert!(
        after["message"]
            .as_str()
            .unwrap()
            .contains("kubectl delete ns old: exit 1"),
        "{after}"
    );
}

#[test]
#[cfg_attr(
    not(feature = "failpoints"),
    ignore = "run with --features failpoints (as CI does): the pre-run scan would refuse these scripts before the tripwire is reached"
)]
fn calling_a_cluster_command_by_path_is_a_lint_error_and_refused_by_run() {
    let shell = shells::dash();
    let s = Scratch::new();
    s.scripts(&shell, "abort", &[("by-path", "/usr/bin/kubectl get ns")]);
    let (code, doc, _) = common::json(&[
        "lint",
        s.tree().to_str().unwrap(),
        "--shebang",
        &shell.shebang,
    ]);
    assert_eq!(code, 2);
    let rules: Vec<&str> = doc["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["rule"].as_str().unwrap())
        .collect();
    assert!(rules.contains(&"cluster-command-path"), "{doc:#}");
    let mut cmd = s.command(&shell, "ok", "not-found");
    cmd.env_remove("MIGRATE_TEST_SKIP_PRERUN_SCAN");
    let (code, doc, _) = parse(cmd.output().unwrap());
    assert_eq!(code, 3, "{doc:#}");
    assert!(
        doc["problems"][0]
            .as_str()
            .unwrap()
            .contains("cluster-command-path"),
        "{doc:#}"
    );
}

#[test]
#[cfg_attr(
    not(feature = "failpoints"),
    ignore = "run with --features failpoints (as CI does): the pre-run scan would refuse these scripts before the tripwire is reached"
)]
fn a_call_still_running_when_the_script_exits_is_a_failure_even_on_a_working_cluster() {
    let shell = shells::dash();
    let s = Scratch::new();
    s.write_exec(&s.bin().join("kubectl"), "#!/bin/sh\nsleep 2\nexit 0\n");
    s.scripts(
        &shell,
        "warn",
        // The call has started (the pause), but the script does not wait for it.
        &[(
            "not-waited",
            "kubectl delete ns old &\nsleep 0.5\necho left-it",
        )],
    );
    s.run(&shell, "ok");
    let entry = s.entry("not-waited");
    assert_eq!(entry["reason"], "masked-failure");
    assert!(
        entry["message"]
            .as_str()
            .unwrap()
            .contains("kubectl delete ns old: never finished"),
        "{entry}"
    );
}

#[test]
#[cfg_attr(
    not(feature = "failpoints"),
    ignore = "run with --features failpoints (as CI does): the pre-run scan would refuse these scripts before the tripwire is reached"
)]
fn a_signal_sent_to_a_background_call_reaches_the_real_command_and_the_call_counts_as_failed() {
    let shell = shells::dash();
    let s = Scratch::new();
    s.write_exec(
        &s.bin().join("kubectl"),
        "#!/bin/sh\ntrap 'echo got-term >> \"$SCRATCH/signals\"; exit 143' TERM\nsleep 5 &\nwait\n",
    );
    s.scripts(
        &shell,
        "warn",
        &[(
            "port-forward",
            "kubectl port-forward svc/x 8080:80 &\npf=$!\nsleep 0.5\nkill $pf\nwait $pf || true",
        )],
    );
    s.run(&shell, "ok");
    assert_eq!(
        std::fs::read_to_string(s.path().join("signals")).unwrap(),
        "got-term\n"
    );
    let entry = s.entry("port-forward");
    assert_eq!(entry["reason"], "masked-failure");
    assert!(
        entry["message"]
            .as_str()
            .unwrap()
            .contains("kubectl port-forward svc/x 8080:80: exit 143"),
        "{entry}"
    );
}

/// The processes of group `pgid` that are still alive (zombies waiting
/// for a reaper are dead), from /proc.
fn live_members(pgid: i32) -> Vec<i32> {
    let mut live = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<i32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // `pid (comm) state ppid pgrp ...`; comm may hold spaces.
        let Some((_, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        if fields.len() > 2 && fields[0] != "Z" && fields[2] == pgid.to_string() {
            live.push(pid);
        }
    }
    live
}

fn poll_until(limit: std::time::Duration, mut done: impl FnMut() -> bool) -> bool {
    let deadline = std::time::Instant::now() + limit;
    while std::time::Instant::now() < deadline {
        if done() {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    done()
}

#[test]
fn a_script_and_its_process_group_do_not_outlive_a_runner_killed_with_sigkill() {
    let shell = shells::dash();
    let s = Scratch::new();
    // The script ignores SIGTERM, so only the run supervisor's SIGKILL
    // after the grace period can end it (and the `sleep` it started).
    s.scripts(
        &shell,
        "abort",
        &[(
            "long",
            "trap '' TERM\necho $$ > \"$SCRATCH/pid.tmp\"\nmv \"$SCRATCH/pid.tmp\" \"$SCRATCH/pid\"\nsleep 600\necho survived",
        )],
    );
    let mut runner = s.command(&shell, "ok", "not-found");
    runner
        .args(["--grace", "1"])
        .stdout(std::process::Stdio::null());
    let mut runner = runner.spawn().unwrap();
    let pid_file = s.path().join("pid");
    assert!(
        poll_until(std::time::Duration::from_secs(60), || pid_file.exists()),
        "the script never started"
    );
    let shell_pid: i32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let stat = std::fs::read_to_string(format!("/proc/{shell_pid}/stat")).unwrap();
    let pgid: i32 = stat
        .rsplit_once(')')
        .unwrap()
        .1
        .split_whitespace()
        .nth(2)
        .unwrap()
        .parse()
        .unwrap();
    assert!(
        poll_until(std::time::Duration::from_secs(10), || live_members(pgid)
            .len()
            >= 2),
        "the script's sleep never started: {:?}",
        live_members(pgid)
    );
    runner.kill().unwrap(); // SIGKILL: no handler of the runner runs.
    runner.wait().unwrap();
    // Bound: the supervisor sees its pipe close at once, then gives the
    // group the 1 s grace; the rest is room for a loaded machine.
    assert!(
        poll_until(std::time::Duration::from_secs(15), || live_members(pgid)
            .is_empty()),
        "the script's process group outlived its runner: {:?}",
        live_members(pgid)
    );
}

#[test]
fn without_the_shim_binary_beside_migrate_no_script_runs() {
    let shell = shells::dash();
    let s = Scratch::new();
    s.scripts(
        &shell,
        "warn",
        &[("guarded", "echo ran > \"$SCRATCH/ran\"")],
    );
    // A migrate executable alone in its directory (a hard link keeps
    // /proc/self/exe there; a copy where linking is not possible).
    let lone = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let exe = lone.path().join("migrate");
    std::fs::hard_link(env!("CARGO_BIN_EXE_migrate"), &exe)
        .or_else(|_| std::fs::copy(env!("CARGO_BIN_EXE_migrate"), &exe).map(|_| ()))
        .unwrap();
    let base = s.command(&shell, "ok", "not-found");
    let mut cmd = Command::new(&exe);
    cmd.args(base.get_args());
    for (k, v) in base.get_envs() {
        match v {
            Some(v) => cmd.env(k, v),
            None => cmd.env_remove(k),
        };
    }
    let (code, doc, err) = parse(cmd.output().unwrap());
    assert_ne!(code, 0, "{doc}");
    assert!(doc.to_string().contains("migrate-shim"), "{doc}\n{err}");
    assert!(!s.path().join("ran").exists(), "the script ran unguarded");
    assert!(
        s.entries()
            .iter()
            .all(|e| e["slug"] != "guarded" || e["state"] != "ok"),
        "{:?}",
        s.entries()
    );
}

/// The `(rule, line)` of every lint finding for the tree.
fn lint_findings(s: &Scratch, shell: &Shell) -> (i32, Vec<(String, u64)>) {
    let (code, doc, _) = common::json(&[
        "lint",
        s.tree().to_str().unwrap(),
        "--shebang",
        &shell.shebang,
    ]);
    let found = doc["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["rule"].as_str().unwrap().to_owned(),
                f["line"].as_u64().unwrap_or(0),
            )
        })
        .collect();
    (code, found)
}

#[test]
fn resetting_path_is_a_lint_error_naming_the_line_and_refused_by_run() {
    let shell = shells::dash();
    // Each body's reset is on the script's line 5 (after the 4 header lines).
    for body in [
        "PATH=/usr/bin:/bin kubectl get ns",
        "PATH=/usr/bin:/bin",
        "export PATH=\"/opt/bin:$PATH\"",
        "env -i kubectl get ns",
        "env PATH=/usr/bin kubectl get ns",
        "command -p kubectl get ns",
        "unset PATH",
    ] {
        let s = Scratch::new();
        s.scripts(&shell, "abort", &[("reset", body)]);
        let (code, found) = lint_findings(&s, &shell);
        assert_eq!(code, 2, "{body}: {found:?}");
        assert!(
            found.contains(&("path-reset".to_owned(), 5)),
            "{body}: {found:?}"
        );
        let mut cmd = s.command(&shell, "ok", "not-found");
        cmd.env_remove("MIGRATE_TEST_SKIP_PRERUN_SCAN");
        let (code, doc, _) = parse(cmd.output().unwrap());
        assert_eq!(code, 3, "{body}: {doc:#}");
        assert!(doc.to_string().contains("path-reset"), "{body}: {doc:#}");
        assert!(s.calls().is_empty(), "{body}: ran anyway");
    }
}

#[test]
fn appending_to_path_and_mentioning_path_are_not_lint_findings() {
    let shell = shells::dash();
    let s = Scratch::new();
    s.scripts(
        &shell,
        "abort",
        &[(
            "append",
            "PATH=\"$PATH:/opt/bin\"\nexport PATH=\"${PATH}:/usr/local/sbin\"\necho 'PATH=/usr/bin env -i'\n# PATH=/usr/bin:/bin\nenv FOO=1 kubectl get ns",
        )],
    );
    let (_, found) = lint_findings(&s, &shell);
    assert!(
        found.iter().all(|(rule, _)| rule != "path-reset"),
        "{found:?}"
    );
}
