//! `migrate-tolerate` against kubectl's real error texts
//! (tests/fixtures/kubectl-errors/, recorded from the real kubectl): each
//! accepted class is accepted only by its own flag, each refused class is
//! refused whatever flags are given, and only transient classes are retried.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/kubectl-errors");

/// Answers a flag may accept: (fixture, class, flag).
const ACCEPTED: &[(&str, &str, &str)] = &[
    ("not-found", "not-found", "--not-found"),
    ("delete-not-found", "not-found", "--not-found"),
    ("resource-type-not-served", "not-served", "--not-served"),
    (
        "resource-type-not-served-in-group",
        "not-served",
        "--not-served",
    ),
    (
        "resource-type-not-served-in-version",
        "not-served",
        "--not-served",
    ),
    (
        "resource-type-not-served-in-group-and-version",
        "not-served",
        "--not-served",
    ),
    (
        "explain-resource-type-not-served",
        "not-served",
        "--not-served",
    ),
    ("no-matches-for-kind", "not-served", "--not-served"),
    ("already-exists", "already-exists", "--already-exists"),
    (
        "already-exists-from-file",
        "already-exists",
        "--already-exists",
    ),
    ("conflict", "conflict", "--conflict"),
];

/// Failures no flag accepts: (fixture, class, transient).
const REFUSED: &[(&str, &str, bool)] = &[
    ("connection-refused", "unreachable", true),
    ("client-timeout", "timeout", true),
    ("server-timeout", "timeout", true),
    ("etcd-request-timeout", "timeout", true),
    ("too-many-requests", "throttled", true),
    ("internal-error", "server-error", true),
    ("service-unavailable", "server-error", true),
    ("etcd-leader-changed", "server-error", true),
    ("forbidden", "forbidden", false),
    ("unauthorized", "unauthorized", false),
    ("invalid", "unknown", false),
];

const ALL_FLAGS: [&str; 4] = [
    "--not-found",
    "--not-served",
    "--already-exists",
    "--conflict",
];

struct Helper {
    dir: tempfile::TempDir,
}

impl Helper {
    /// A `migrate-tolerate` link and a fake kubectl that prints
    /// `$FIXTURE` and exits 1 while `$SCRATCH/fail-left` counts down from
    /// `$FAILS` (default: always fails).
    fn new() -> Self {
        let h = Helper {
            dir: tempfile::tempdir().unwrap(),
        };
        std::os::unix::fs::symlink(
            env!("CARGO_BIN_EXE_migrate-shim"),
            h.path().join("migrate-tolerate"),
        )
        .unwrap();
        let kubectl = h.path().join("kubectl");
        std::fs::write(
            &kubectl,
            r#"#!/bin/sh
echo attempt >> "$SCRATCH/attempts"
case "$*" in *"-f -"*) cat >> "$SCRATCH/stdin-seen" ;; esac
left=$(cat "$SCRATCH/fail-left" 2>/dev/null || echo always)
if [ "$left" = 0 ]; then echo applied; exit 0; fi
[ "$left" = always ] || echo $((left - 1)) > "$SCRATCH/fail-left"
cat "$FIXTURE" >&2
exit 1
"#,
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&kubectl, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::write(h.report(), "").unwrap();
        h
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn report(&self) -> PathBuf {
        self.path().join("report.jsonl")
    }

    fn run(&self, fixture: &str, args: &[&str], stdin: &str) -> Output {
        crate::common::output_with_stdin(
            Command::new(self.path().join("migrate-tolerate"))
                .args(args)
                .env("SCRATCH", self.path())
                .env(
                    "FIXTURE",
                    Path::new(FIXTURES).join(format!("{fixture}.txt")),
                )
                .env("MIGRATE_TRIPWIRE_REPORT", self.report())
                .env("MIGRATE_TRIPWIRE_COMMANDS", "kubectl,helm,flux")
                .env("MIGRATE_TRIPWIRE_REAL_KUBECTL", self.path().join("kubectl")),
            stdin,
        )
    }

    /// The `end` record of the last call.
    fn last_end(&self) -> serde_json::Value {
        std::fs::read_to_string(self.report())
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .rfind(|r| r["event"] == "end")
            .expect("an end record")
    }

    /// `migrate-tolerate FLAGS -- kubectl get x` against `fixture`: its
    /// output and the `end` record of the call.
    fn get_x(&self, fixture: &str, flags: &[&str]) -> (Output, serde_json::Value) {
        let out = self.run(fixture, &with_command(flags, &["kubectl", "get", "x"]), "");
        (out, self.last_end())
    }

    fn attempts(&self) -> usize {
        std::fs::read_to_string(self.path().join("attempts"))
            .unwrap_or_default()
            .lines()
            .count()
    }
}

/// Up to two retries, without waiting.
const RETRY_TWICE: &[&str] = &["--retry", "2", "--retry-delay", "0"];

/// Asserts that the call `out` against `fixture` exited `code` and that its
/// `end` record says `outcome` for the one answer class `class`.
fn assert_ended(
    fixture: &str,
    out: &Output,
    end: &serde_json::Value,
    code: i32,
    outcome: &str,
    class: &str,
) {
    assert_eq!(
        out.status.code(),
        Some(code),
        "{fixture}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(end["outcome"], outcome, "{fixture}: {end}");
    assert_eq!(
        end["classes"],
        serde_json::json!([class]),
        "{fixture}: {end}"
    );
}

fn with_command<'a>(flags: &[&'a str], command: &[&'a str]) -> Vec<&'a str> {
    let mut v = flags.to_vec();
    v.push("--");
    v.extend_from_slice(command);
    v
}

#[test]
fn each_accepted_answer_is_tolerated_by_its_own_flag_and_reported_as_tolerated() {
    for (fixture, class, flag) in ACCEPTED {
        let (out, end) = Helper::new().get_x(fixture, &[flag]);
        assert_ended(fixture, &out, &end, 0, "tolerated", class);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(
                std::fs::read_to_string(Path::new(FIXTURES).join(format!("{fixture}.txt")))
                    .unwrap()
                    .trim()
            ),
            "kubectl's stderr is passed through: {err}"
        );
        assert!(
            err.contains(&format!(
                "migrate-tolerate: tolerated {class}: kubectl get x"
            )),
            "{err}"
        );
    }
}

#[test]
fn an_accepted_answer_under_another_flag_stays_a_failure() {
    for (fixture, class, flag) in ACCEPTED {
        let others: Vec<&str> = ALL_FLAGS.iter().copied().filter(|f| f != flag).collect();
        let (out, end) = Helper::new().get_x(fixture, &others);
        assert_ended(fixture, &out, &end, 1, "failed", class);
    }
}

#[test]
fn each_refused_failure_stays_a_failure_whatever_flags_are_given() {
    for (fixture, class, _) in REFUSED {
        let (out, end) = Helper::new().get_x(fixture, &ALL_FLAGS);
        assert_ended(fixture, &out, &end, 1, "failed", class);
        assert!(
            !end["stderr"].as_array().unwrap().is_empty(),
            "{fixture}: the stderr head is reported"
        );
    }
}

#[test]
fn only_transient_failures_are_retried_and_the_retries_are_bounded() {
    for (fixture, _, transient) in REFUSED {
        let h = Helper::new();
        let out = h.run(
            fixture,
            &with_command(RETRY_TWICE, &["kubectl", "apply", "-f", "x.yaml"]),
            "",
        );
        assert_eq!(out.status.code(), Some(1), "{fixture}");
        let expected = if *transient { 3 } else { 1 };
        assert_eq!(h.attempts(), expected, "{fixture}");
        assert_eq!(h.last_end()["attempts"], expected, "{fixture}");
    }
    for (fixture, _, _) in ACCEPTED {
        let h = Helper::new();
        h.get_x(fixture, RETRY_TWICE);
        assert_eq!(h.attempts(), 1, "{fixture}: answers are not retried");
    }
}

#[test]
fn a_transient_failure_that_then_succeeds_is_a_success_with_stdin_replayed() {
    let h = Helper::new();
    std::fs::write(h.path().join("fail-left"), "2").unwrap();
    let out = h.run(
        "connection-refused",
        &[
            "--retry",
            "3",
            "--retry-delay",
            "0.01",
            "--",
            "kubectl",
            "apply",
            "-f",
            "-",
        ],
        "kind: ConfigMap\n",
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "applied\n");
    let end = h.last_end();
    assert_eq!(
        (end["outcome"].as_str(), end["attempts"].as_u64()),
        (Some("ok"), Some(3)),
        "{end}"
    );
    assert_eq!(
        std::fs::read_to_string(h.path().join("stdin-seen")).unwrap(),
        "kind: ConfigMap\n".repeat(3),
        "every attempt read the same manifest"
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("migrate-tolerate: kubectl apply … failed (unreachable); retrying in 0.0s (attempt 2 of 4)"), "{err}");
}

#[test]
fn a_failure_of_several_classes_is_tolerated_only_when_every_class_is_accepted() {
    let h = Helper::new();
    // Two objects: one not found, one forbidden.
    let both = h.path().join("both.txt");
    let text = std::fs::read_to_string(Path::new(FIXTURES).join("not-found.txt")).unwrap()
        + &std::fs::read_to_string(Path::new(FIXTURES).join("forbidden.txt")).unwrap();
    std::fs::write(&both, text).unwrap();
    let mut cmd = Command::new(h.path().join("migrate-tolerate"));
    cmd.args(["--not-found", "--", "kubectl", "get", "cm", "a", "b"])
        .env("SCRATCH", h.path())
        .env("FIXTURE", &both)
        .env("MIGRATE_TRIPWIRE_REPORT", h.report())
        .env("MIGRATE_TRIPWIRE_REAL_KUBECTL", h.path().join("kubectl"));
    let out = cmd.output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        h.last_end()["classes"],
        serde_json::json!(["not-found", "forbidden"])
    );
}

impl Helper {
    /// `migrate-tolerate ARGS` against a kubectl that prints `text`.
    fn run_text(&self, text: &str, args: &[&str]) -> (Output, serde_json::Value) {
        let file = self.path().join("stderr.txt");
        std::fs::write(&file, text).unwrap();
        let out = Command::new(self.path().join("migrate-tolerate"))
            .args(args)
            .env("SCRATCH", self.path())
            .env("FIXTURE", &file)
            .env("MIGRATE_TRIPWIRE_REPORT", self.report())
            .env("MIGRATE_TRIPWIRE_COMMANDS", "kubectl,helm,flux")
            .env("MIGRATE_TRIPWIRE_REAL_KUBECTL", self.path().join("kubectl"))
            .env("MIGRATE_TRIPWIRE_REAL_HELM", self.path().join("kubectl"))
            .stdin(Stdio::null())
            .output()
            .unwrap();
        (out, self.last_end())
    }
}

/// Failures that only look like an accepted answer (issue 27): an admission
/// denial whose message ends like one, a helm error quoting a lookup, a
/// NotFound line beside a line that is no answer. (flag, command, stderr)
const LOOKALIKES: &[(&str, &str, &str)] = &[
    (
        "--not-found",
        "kubectl create configmap x",
        "error: failed to create configmap: configmaps \"x\" is forbidden: ValidatingAdmissionPolicy 'deny-x' with binding 'deny-x' denied request: widget \"x\" not found\n",
    ),
    (
        "--already-exists",
        "kubectl create configmap x",
        "error: failed to create configmap: configmaps \"x\" is forbidden: ValidatingAdmissionPolicy 'deny-x' with binding 'deny-x' denied request: tenant \"x\" already exists\n",
    ),
    (
        "--conflict",
        "kubectl apply -f x.yaml",
        "Error from server: admission webhook \"v.example.com\" denied the request: Operation cannot be fulfilled on widgets \"x\": locked\n",
    ),
    (
        "--not-found",
        "helm upgrade db ./chart",
        "Error: UPGRADE FAILED: template: c/templates/a.yaml:3:4: executing \"c/templates/a.yaml\" at <fail \"release: not found\">: error calling fail: release: not found\n",
    ),
    (
        "--not-found",
        "kubectl apply -f two.yaml",
        "Error from server (NotFound): error when deleting \"two.yaml\": deployments.apps \"x\" not found\nThe Deployment \"y\" is invalid: spec.template.metadata.labels: Invalid value: map[string]string{\"a\":\"b\"}: `selector` does not match template `labels`\n",
    ),
];

/// `migrate-tolerate FLAG -- COMMAND` of `h`, the command answering `text`:
/// it must exit `code` with the outcome `failed`.
fn fails(h: &Helper, flag: &str, command: &str, text: &str, code: i32) {
    let mut args = vec![flag, "--"];
    args.extend(command.split(' '));
    let (out, end) = h.run_text(text, &args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "{command}: {stderr}");
    assert_eq!(end["outcome"], "failed", "{command}: {end}");
}

#[test]
fn a_failure_that_only_looks_like_an_accepted_answer_is_not_tolerated() {
    for (flag, command, text) in LOOKALIKES {
        fails(&Helper::new(), flag, command, text, 1);
    }
}

#[test]
fn tolerance_is_refused_for_exec_logs_port_forward_attach_and_plugins() {
    for command in [
        "kubectl exec pod-0 -- cat /etc/missing",
        "kubectl logs pod-0",
        "kubectl port-forward svc/x 8080:80",
        "kubectl attach pod-0",
        "kubectl cnpg status db",
    ] {
        let h = Helper::new();
        let not_found = "Error from server (NotFound): pods \"x\" not found\n";
        fails(&h, "--not-found", command, not_found, 2);
        assert_eq!(h.attempts(), 0, "{command}: it never ran");
    }
}
