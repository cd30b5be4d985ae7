//! `migrate-tolerate` against a real API server with the real `kubectl` and
//! `helm` (`MIGRATE_TEST_KUBECONFIG`, see `test_apiserver::real`; unset, the
//! test prints that it skipped): kubectl's own answers are tolerated, and
//! what only looks like one is not: a ValidatingAdmissionPolicy whose
//! message says `not found`, `already exists` or `Operation cannot be
//! fulfilled on`, a NotFound line beside `The Deployment "y" is invalid`,
//! and a helm error quoting a lookup.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

use test_apiserver::real::{HELM_VAR, KUBECTL_VAR, RealCluster, unique_name};

/// An absolute path for `name` from `var` or PATH (the helper runs the real
/// command by path).
fn tool(var: &str, name: &str) -> PathBuf {
    if let Some(p) = std::env::var_os(var) {
        return PathBuf::from(p);
    }
    std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("{name} not found: set {var}"))
}

struct Helper {
    dir: tempfile::TempDir,
    kubeconfig: PathBuf,
}

impl Helper {
    /// `migrate-tolerate FLAG -- kubectl VERB configmap NAME -n NS`.
    fn on_configmap(
        &self,
        flag: &str,
        verb: &str,
        name: &str,
        ns: &str,
    ) -> (Output, serde_json::Value) {
        self.run(
            &[flag, "--", "kubectl", verb, "configmap", name, "-n", ns],
            "",
        )
    }

    fn new(cluster: &RealCluster) -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(
            env!("CARGO_BIN_EXE_migrate-shim"),
            dir.path().join("migrate-tolerate"),
        )
        .unwrap();
        Helper {
            dir,
            kubeconfig: cluster.kubeconfig().to_owned(),
        }
    }

    fn report(&self) -> PathBuf {
        self.dir.path().join("report.jsonl")
    }

    /// `migrate-tolerate ARGS` with `stdin`: its output and the call's
    /// `end` record.
    fn run(&self, args: &[&str], stdin: &str) -> (Output, serde_json::Value) {
        use std::io::Write;
        std::fs::write(self.report(), "").unwrap();
        let mut child = Command::new(self.dir.path().join("migrate-tolerate"))
            .args(args)
            .env("KUBECONFIG", &self.kubeconfig)
            .env("MIGRATE_TRIPWIRE_REPORT", self.report())
            .env("MIGRATE_TRIPWIRE_COMMANDS", "kubectl,helm,flux")
            .env(
                "MIGRATE_TRIPWIRE_REAL_KUBECTL",
                tool(KUBECTL_VAR, "kubectl"),
            )
            .env("MIGRATE_TRIPWIRE_REAL_HELM", tool(HELM_VAR, "helm"))
            .env("HOME", self.dir.path())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let _ = child.stdin.take().unwrap().write_all(stdin.as_bytes());
        let out = child.wait_with_output().unwrap();
        let end = std::fs::read_to_string(self.report())
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .rfind(|r| r["event"] == "end")
            .expect("an end record");
        (out, end)
    }
}

#[track_caller]
fn assert_outcome(what: &str, (out, end): &(Output, serde_json::Value), outcome: &str) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(end["outcome"], outcome, "{what}: {end}\n{err}");
    let code = if outcome == "tolerated" { 0 } else { 1 };
    assert_eq!(out.status.code(), Some(code), "{what}: {err}");
}

/// A policy that denies creating ConfigMaps whose names start with `nf-`,
/// `ae-` or `cf-` with messages that end like NotFound, AlreadyExists and
/// Conflict answers.
fn policy(name: &str) -> String {
    format!(
        r#"apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {{name: {name}}}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - apiGroups: [""]
      apiVersions: ["v1"]
      operations: ["CREATE"]
      resources: ["configmaps"]
  validations:
  - expression: "!object.metadata.name.startsWith('nf-')"
    message: 'widget "x" not found'
  - expression: "!object.metadata.name.startsWith('ae-')"
    message: 'tenant "x" already exists'
  - expression: "!object.metadata.name.startsWith('cf-')"
    message: 'Operation cannot be fulfilled on configmaps "x": locked by the platform'
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {{name: {name}}}
spec:
  policyName: {name}
  validationActions: [Deny]
"#
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs MIGRATE_TEST_KUBECONFIG (examples/kube-testenv)"]
async fn only_kubectls_own_answers_are_tolerated_on_a_real_api_server() {
    let cluster = test_apiserver::or_skip!(
        RealCluster::from_env("migrate-tolerate against the real kubectl").await
    );
    let h = Helper::new(&cluster);
    let ns = cluster.namespace().to_owned();
    let cm = unique_name("tolerate");

    // kubectl's own answers.
    assert_outcome(
        "get of a missing ConfigMap",
        &h.on_configmap("--not-found", "get", &cm, &ns),
        "tolerated",
    );
    cluster.kubectl_ok(&["create", "configmap", &cm, "-n", &ns], "");
    assert_outcome(
        "create of an existing ConfigMap",
        &h.on_configmap("--already-exists", "create", &cm, &ns),
        "tolerated",
    );

    // An admission policy whose messages end like those answers.
    let vap = unique_name("tolerate-lookalike");
    cluster.kubectl_ok(&["apply", "-f", "-"], &policy(&vap));
    // The policy takes effect shortly after it is created.
    let probe = format!("nf-{}", unique_name("probe"));
    let mut denied = false;
    for _ in 0..60 {
        let out = cluster.kubectl_with_stdin(&["create", "configmap", &probe, "-n", &ns], "");
        if !out.status.success() {
            denied = true;
            break;
        }
        cluster.kubectl_ok(&["delete", "configmap", &probe, "-n", &ns], "");
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
    assert!(denied, "the admission policy never took effect");
    for (prefix, flag) in [
        ("nf", "--not-found"),
        ("ae", "--already-exists"),
        ("cf", "--conflict"),
    ] {
        let name = format!("{prefix}-{}", unique_name("x"));
        let created = h.on_configmap(flag, "create", &name, &ns);
        assert_outcome(
            &format!("create denied by the policy ({flag})"),
            &created,
            "failed",
        );
        let applied = h.run(
            &[flag, "--", "kubectl", "apply", "-f", "-"],
            &format!(
                "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}, namespace: {ns}}}\n"
            ),
        );
        assert_outcome(
            &format!("apply denied by the policy ({flag})"),
            &applied,
            "failed",
        );
    }

    // A NotFound next to an invalid object, in one apply.
    let two = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {cm}-x, namespace: {}}}\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: \"y\", namespace: {ns}}}\nspec:\n  selector: {{matchLabels: {{a: b}}}}\n  template:\n    metadata: {{labels: {{a: c}}}}\n    spec: {{containers: [{{name: c, image: x}}]}}\n",
        unique_name("missing-ns")
    );
    let mixed = h.run(&["--not-found", "--", "kubectl", "apply", "-f", "-"], &two);
    let err = String::from_utf8_lossy(&mixed.0.stderr).into_owned();
    assert!(err.contains("is invalid"), "{err}");
    assert!(err.contains("(NotFound)"), "{err}");
    assert_outcome("a NotFound beside an invalid Deployment", &mixed, "failed");

    // helm: its own answer, and an error that only quotes one.
    assert_outcome(
        "helm status of a missing release",
        &h.run(
            &[
                "--not-found",
                "--",
                "helm",
                "status",
                &unique_name("nope"),
                "-n",
                &ns,
            ],
            "",
        ),
        "tolerated",
    );
    let chart = h.dir.path().join("chart");
    common::write_files(
        &chart,
        &[
            (
                "Chart.yaml",
                "apiVersion: v2\nname: lookup\nversion: 0.1.0\n",
            ),
            ("templates/cm.yaml", "{{ fail \"release: not found\" }}\n"),
        ],
    );
    let release = unique_name("quoting");
    let quoting = h.run(
        &[
            "--not-found",
            "--",
            "helm",
            "install",
            &release,
            chart.to_str().unwrap(),
            "-n",
            &ns,
        ],
        "",
    );
    assert!(
        String::from_utf8_lossy(&quoting.0.stderr).contains("release: not found"),
        "{:?}",
        quoting.0
    );
    assert_outcome("a helm error quoting a lookup", &quoting, "failed");

    cluster.kubectl_ok(
        &[
            "delete",
            "validatingadmissionpolicybinding,validatingadmissionpolicy",
            &vap,
        ],
        "",
    );
    let _ = cluster.kubectl_with_stdin(&["delete", "configmap", &cm, "-n", &ns], "");
}
