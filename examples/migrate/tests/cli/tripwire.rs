//! The run-time tripwire with a real shell (dash) and a fake `kubectl`
//! (`helm`, `flux`) on PATH: what a masked failure's entry says, what
//! `on-error` does with it, `migrate-tolerate`, where the cluster commands
//! come from, and what the shims pass through, refuse and survive. (Every
//! masking class under every shell: `tripwire_masking.rs`; what holds with
//! the pre-run scan on: `tripwire_supervision.rs`.)
//!
//! Built only with the `failpoints` feature (as CI runs the suite; see the
//! `[[test]]` entry in Cargo.toml): the runner's pre-run text scan is then
//! switched off for these runs (`MIGRATE_TEST_SKIP_PRERUN_SCAN`), so what is
//! proven is the run-time guarantee alone; without it the scan would refuse
//! these scripts before the tripwire is reached.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use std::path::Path;

use common::tripwire::Scratch;
use common::{assert_contains_all, parse};

#[test]
fn a_masked_failure_names_each_failed_command_with_its_status_and_stderr() {
    let (shell, s) = Scratch::dash(
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
    assert_contains_all(
        message,
        &[
            "after 2 failed cluster-command call(s)",
            "kubectl get ns …: exit 1 [unreachable]",
            "helm list …: exit 1",
        ],
    );
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
fn under_on_error_abort_a_masked_failure_records_nothing_and_stops_the_run() {
    let (shell, s) = Scratch::dash(
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
    assert_contains_all(
        problems,
        &[
            "migration masks failed (masked-failure); nothing terminal recorded, upgrade stopped",
            "kubectl delete ns …: exit 1",
        ],
    );
    assert!(
        s.entries().is_empty(),
        "nothing recorded: {:?}",
        s.entries()
    );
    assert_eq!(doc["report"]["results"].as_array().unwrap().len(), 1);
}

#[test]
fn a_script_that_exits_non_zero_is_an_ordinary_failure() {
    let (shell, s) = Scratch::dash("warn", &[("plain", "kubectl delete ns old")]);
    s.run(&shell, "fail");
    assert_eq!(s.entry("plain")["reason"], "exit-status-1");
}

#[test]
fn a_tolerated_answer_is_recorded_ok_and_counted_in_the_message_and_the_report() {
    let (shell, s) = Scratch::dash(
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
        "1 tolerated cluster-command failure: kubectl get crd … (not-found)"
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
        err.contains("migrate-tolerate: tolerated not-found: kubectl get crd …"),
        "the tolerance is visible in the log: {err}"
    );
}

#[test]
fn the_tolerance_helper_passes_an_unreachable_server_through_as_a_failure_even_when_masked() {
    let (shell, s) = Scratch::dash(
        "warn",
        &[(
            "masked-helper",
            "migrate-tolerate --not-found --not-served --already-exists --conflict -- kubectl get crd x || true",
        )],
    );
    s.run(&shell, "fail");
    s.assert_masked(
        "masked-helper",
        "kubectl get crd …: exit 1 [unreachable] (via migrate-tolerate --not-found --not-served --already-exists --conflict)",
    );
}

#[test]
fn a_usage_error_of_the_tolerance_helper_is_a_failure_even_when_masked() {
    let (shell, s) = Scratch::dash(
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
        s.assert_masked(slug, "migrate-tolerate: ");
    }
}

#[test]
fn cluster_commands_come_from_the_flag_the_environment_and_the_tree_file() {
    let (shell, s) = Scratch::dash(
        "warn",
        &[
            ("tree-file", "oc get projects || true"),
            ("flag-and-env", "mykube get ns || true"),
        ],
    );
    std::fs::write(s.tree().join("cluster-commands"), "# ours\noc\n").unwrap();
    // Without the flag, mykube is not a cluster command.
    let (_, _, err) = parse(
        s.command(&shell, "fail", "connection-refused")
            .output()
            .unwrap(),
    );
    assert_eq!(s.entry("tree-file")["reason"], "masked-failure", "{err}");
    assert_eq!(s.entry("flag-and-env")["state"], "ok");

    for how in ["flag", "env"] {
        let s = Scratch::under(&shell, "warn", &[("flag-and-env", "mykube get ns || true")]);
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
fn a_bad_cluster_command_setting_is_a_usage_error_before_anything_runs() {
    let (shell, s) = Scratch::dash("warn", &[("a", "echo ran >> \"$SCRATCH/ran\"")]);
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
fn the_shim_passes_stdin_stdout_and_the_exit_status_through() {
    let (shell, s) = Scratch::dash(
        "abort",
        &[(
            "through",
            "out=$(kubectl apply -f - <<'EOF'\nkind: ConfigMap\nEOF\n)\necho \"got:$out\"\n[ \"$KUBECTL\" = \"$(command -v kubectl)\" ]",
        )],
    );
    s.fake_kubectl(
        "#!/bin/sh\ncat > \"$SCRATCH/stdin-seen\"\necho out-line\necho err-line >&2\nexit 0\n",
    );
    let err = s.runs_ok(&shell);
    assert_eq!(
        std::fs::read_to_string(s.path().join("stdin-seen")).unwrap(),
        "kind: ConfigMap\n"
    );
    assert!(err.contains("[through] got:out-line"), "{err}");
    assert!(err.contains("[through] err-line"), "{err}");

    // The status comes back unchanged (3 here), so `if`/`case $?` still work.
    let s = Scratch::new();
    s.fake_kubectl("#!/bin/sh\nexit 3\n");
    s.scripts(&shell, "warn", &[("status", "kubectl get x")]);
    s.run(&shell, "ok");
    assert_eq!(s.entry("status")["reason"], "exit-status-3");
}

#[test]
fn the_real_command_is_never_the_shim_itself_even_when_one_is_on_the_runners_path() {
    let (shell, s) = Scratch::dash("abort", &[("calls", "kubectl get ns -o name")]);
    // A directory of shims from an outer run, first on the runner's PATH.
    let outer = s.path().join("outer-shims");
    std::fs::create_dir_all(&outer).unwrap();
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_migrate-shim"), outer.join("kubectl")).unwrap();
    let mut cmd = s.command(&shell, "ok", "not-found");
    let path = format!("{}:{}:/usr/bin:/bin", outer.display(), s.bin().display());
    cmd.env("PATH", path);
    let (code, _, err) = parse(cmd.output().unwrap());
    assert_eq!(code, 0, "{err}");
    assert_eq!(s.calls(), ["kubectl get ns -o name"]);
}

#[test]
fn a_cluster_command_that_is_not_installed_fails_every_call() {
    let (shell, s) = Scratch::dash(
        "warn",
        &[(
            "no-flux",
            "for k in $(flux get kustomizations); do echo \"$k\"; done",
        )],
    );
    std::fs::remove_file(s.bin().join("flux")).unwrap();
    let mut cmd = s.command(&shell, "ok", "not-found");
    // Only the fake bin and the base system: no flux anywhere.
    cmd.env("PATH", format!("{}:/usr/bin:/bin", s.bin().display()));
    let (_, _, err) = parse(cmd.output().unwrap());
    if Path::new("/usr/bin/flux").exists() || Path::new("/bin/flux").exists() {
        eprintln!("SKIPPED: a real flux is installed");
        return;
    }
    eprintln!("{err}"); // shown if the assertion below fails
    s.assert_masked("no-flux", "flux get kustomizations: exit 127");
}

#[test]
fn a_script_that_removes_the_tripwire_report_fails() {
    let (shell, s) = Scratch::dash(
        "warn",
        &[(
            "cleaner",
            "rm -rf \"$(dirname \"$MIGRATE_TRIPWIRE_REPORT\")\"\nkubectl delete ns old || true",
        )],
    );
    s.run(&shell, "fail");
    s.assert_masked("cleaner", "was removed or replaced while the script ran");
}

#[test]
fn a_shim_removed_by_one_script_fails_it_and_is_restored_for_the_next() {
    let (shell, s) = Scratch::dash(
        "warn",
        &[
            ("vandal", "rm \"${KUBECTL:?}\"\nkubectl get ns || true"),
            ("after", "kubectl delete ns old || true"),
        ],
    );
    s.run(&shell, "fail");
    s.assert_masked("vandal", "was removed or replaced while the script ran");
    // Without the restored shim, `after` would call the fake kubectl
    // unguarded and be recorded ok.
    s.assert_masked("after", "kubectl delete ns …: exit 1");
}

#[test]
fn a_call_still_running_when_the_script_exits_is_a_failure_even_on_a_working_cluster() {
    let (shell, s) = Scratch::dash(
        "warn",
        // The call has started (the pause), but the script does not wait for it.
        &[(
            "not-waited",
            "kubectl delete ns old &\nsleep 0.5\necho left-it",
        )],
    );
    s.fake_kubectl("#!/bin/sh\nsleep 2\nexit 0\n");
    s.run(&shell, "ok");
    s.assert_masked("not-waited", "kubectl delete ns …: never finished");
}

#[test]
fn a_signal_sent_to_a_background_call_reaches_the_real_command_and_the_call_counts_as_failed() {
    let (shell, s) = Scratch::dash(
        "warn",
        &[(
            "port-forward",
            "kubectl port-forward svc/x 8080:80 &\npf=$!\nsleep 0.5\nkill $pf\nwait $pf || true",
        )],
    );
    s.fake_kubectl(
        "#!/bin/sh\ntrap 'echo got-term >> \"$SCRATCH/signals\"; exit 143' TERM\nsleep 5 &\nwait\n",
    );
    s.run(&shell, "ok");
    assert_eq!(
        std::fs::read_to_string(s.path().join("signals")).unwrap(),
        "got-term\n"
    );
    s.assert_masked("port-forward", "kubectl port-forward svc/x …: exit 143");
}

/// The ledger ConfigMap as a numbered script renders it (the default
/// ledger name lint and the runner guard).
const LEDGER_MANIFEST: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cozystack-version\n  namespace: cozy-system\ndata:\n  version: \"43\"\n";

#[test]
fn a_write_of_the_ledger_configmap_is_refused_whatever_feeds_the_manifest_naming_the_script_and_the_call()
 {
    let (shell, s) = Scratch::dash(
        "warn",
        &[
            (
                "from-a-variable",
                &format!(
                    "MANIFEST='{LEDGER_MANIFEST}'\nprintf '%s\\n' \"$MANIFEST\" | kubectl apply -f -"
                ),
            ),
            (
                "from-a-heredoc",
                &format!("kubectl apply -f - <<EOF\n{LEDGER_MANIFEST}EOF"),
            ),
            (
                "from-a-file",
                &format!(
                    "f=$(mktemp)\nprintf '%s' '{LEDGER_MANIFEST}' > \"$f\"\nkubectl apply --filename \"$f\""
                ),
            ),
            (
                "masked",
                &format!(
                    "printf '%s' '{LEDGER_MANIFEST}' | kubectl replace -f - || true\necho went-on"
                ),
            ),
            (
                "by-name",
                "kubectl -n cozy-system patch configmap cozystack-version --type merge -p '{}'",
            ),
        ],
    );
    let (_, _, err) = s.run(&shell, "ok");
    for slug in [
        "from-a-variable",
        "from-a-heredoc",
        "from-a-file",
        "by-name",
    ] {
        let entry = s.entry(slug);
        assert_eq!(entry["state"], "failed", "{slug}: {entry}");
        let message = entry["message"].as_str().unwrap();
        assert!(
            message.contains(&format!("refused in script {slug}: kubectl "))
                && message.contains("ledger ConfigMap cozystack-version"),
            "{slug}: {message}\n{err}"
        );
    }
    s.assert_masked("masked", "kubectl replace");
    // The real command never saw any of them.
    assert!(
        s.calls()
            .iter()
            .all(|c| !c.contains("apply") && !c.contains("replace") && !c.contains("patch")),
        "{:?}",
        s.calls()
    );
}

#[test]
fn a_manifest_of_another_object_reaches_the_real_command_whole() {
    let other = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: other\n";
    let (shell, s) = Scratch::dash(
        "abort",
        &[(
            "other",
            &format!(
                "printf '%s' '{other}' | kubectl apply -f -\nprintf '%s' '{other}' | migrate-tolerate --already-exists -- kubectl apply -f -"
            ),
        )],
    );
    s.runs_ok(&shell);
    assert_eq!(s.entry("other")["state"], "ok");
    assert_eq!(
        std::fs::read_to_string(s.path().join("stdin-seen")).unwrap(),
        other
    );
}

#[test]
fn migrate_tolerate_refuses_a_ledger_write_too_and_never_tolerates_it() {
    let (shell, s) = Scratch::dash(
        "warn",
        &[(
            "tolerated",
            &format!(
                "printf '%s' '{LEDGER_MANIFEST}' | migrate-tolerate --already-exists --conflict -- kubectl apply -f -"
            ),
        )],
    );
    s.run(&shell, "ok");
    let entry = s.entry("tolerated");
    assert_eq!(entry["state"], "failed", "{entry}");
    common::assert_contains_all(
        entry["message"].as_str().unwrap(),
        &["refused in script tolerated"],
    );
    assert!(s.calls().is_empty(), "{:?}", s.calls());
}
