//! Existence probes that took any failure as "absent"
//! (`if ! kubectl get crd X >/dev/null 2>&1; then ...; exit 0; fi`,
//! `if kubectl get crd X ...; then ...; fi`, `kubectl get crd X ... ||
//! continue`: the reference platform's slots 50 and 51) are converted to
//! accept only the answer they meant: on a cluster without the CRD the converted script ends
//! ok, counting one tolerated call, under dash, busybox ash and bash; on a
//! cluster that refuses the call (Forbidden) it fails instead of skipping.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use common::Repo;
use common::numbered::write;

const PROBE: &str = "#!/bin/sh\nset -eu\nif ! kubectl get crd widgets.example.com >/dev/null 2>&1; then\n  echo \"no widgets CRD; nothing to migrate\"\n  exit 0\nfi\nif kubectl get crd gadgets.example.com >/dev/null 2>&1; then\n  kubectl label gadgets.example.com --all -A migrated=yes\nfi\nfor crd in a.example.com b.example.com; do\n  kubectl get crd \"$crd\" >/dev/null 2>&1 || continue\n  kubectl annotate crd \"$crd\" seen=yes\ndone\nkubectl label widgets.example.com --all -A migrated=yes\n";

const FAKE_KUBECTL: &str = r#"#!/bin/sh
echo "kubectl $*" >> "$SCRATCH/calls"
case "$FAKE_SCENARIO:$*" in
absent:"get crd widgets.example.com"*)
  echo 'Error from server (NotFound): customresourcedefinitions.apiextensions.k8s.io "widgets.example.com" not found' >&2; exit 1 ;;
present:"get crd gadgets.example.com"*|present:"get crd b.example.com"*)
  echo "Error from server (NotFound): customresourcedefinitions.apiextensions.k8s.io \"${3}\" not found" >&2; exit 1 ;;
forbidden:"get crd widgets.example.com"*)
  echo 'Error from server (Forbidden): customresourcedefinitions.apiextensions.k8s.io "widgets.example.com" is forbidden: User "system:serviceaccount:cozy-system:cozystack-migrations" cannot get resource "customresourcedefinitions"' >&2; exit 1 ;;
esac
exit 0
"#;

/// `migrate run` of the converted tree under `shebang` in `scenario`:
/// (exit code, JSON, calls the fake saw).
fn run(tree: &Path, shebang: &str, scenario: &str) -> (i32, serde_json::Value, String) {
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("tree");
    assert!(
        std::process::Command::new("cp")
            .arg("-R")
            .arg(tree)
            .arg(&copy)
            .status()
            .unwrap()
            .success()
    );
    let script = copy.join("pre-apply/1");
    let text = std::fs::read_to_string(&script).unwrap();
    let (_, rest) = text.split_once('\n').unwrap();
    std::fs::write(&script, format!("#!{shebang}\n{rest}")).unwrap();
    std::fs::create_dir_all(copy.join("order.d")).unwrap();
    std::fs::write(copy.join("order.d/00001-v1"), "1\n").unwrap();
    let bin = dir.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::write(bin.join("kubectl"), FAKE_KUBECTL).unwrap();
    std::fs::set_permissions(bin.join("kubectl"), std::fs::Permissions::from_mode(0o755)).unwrap();
    let ledger = dir.path().join("ledger");
    common::empty_file_ledger(&ledger);
    let out = common::migrate()
        .arg("run")
        .arg(&copy)
        .arg("--ledger")
        .arg(common::file_spec(&ledger))
        .args(["--tier", "pre-apply", "--allow-interpreter", shebang])
        .args(["--output", "json"])
        .env(
            "PATH",
            format!("{}:{}", bin.display(), std::env::var("PATH").unwrap()),
        )
        .env("SCRATCH", dir.path())
        .env("FAKE_SCENARIO", scenario)
        .env_remove("MIGRATE_CLUSTER_COMMANDS")
        .env_remove("KUBECTL")
        .output()
        .unwrap();
    let (code, doc, _) = common::parse(out);
    let calls = std::fs::read_to_string(dir.path().join("calls")).unwrap_or_default();
    (code, doc, calls)
}

#[test]
fn an_existence_probe_accepts_only_the_absent_crd_and_a_forbidden_probe_fails() {
    let repo = Repo::new();
    write(&repo, "1", PROBE);
    repo.release("v1.0.0");
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("converted");
    let (code, report, err) = common::numbered::convert(&repo, &tree, &["--rewrite"]);
    assert_eq!(code, 0, "{err}\n{report}");
    let converted = std::fs::read_to_string(tree.join("pre-apply/1")).unwrap();
    assert!(
        converted.contains("migrate-tolerate --not-found -- kubectl get crd widgets.example.com"),
        "{converted}"
    );
    // The behaviour check ran the original and the conversion alike.
    assert_eq!(
        report["scripts"][0]["behaviour"]["result"], "passed",
        "{report:#}"
    );
    for shell in common::shells::all() {
        let (code, doc, calls) = run(&tree, &shell.shebang, "absent");
        assert_eq!(code, 0, "{}: {doc}", shell.shebang);
        assert_eq!(
            doc["results"][0]["outcome"], "ok",
            "{}: {doc}",
            shell.shebang
        );
        assert_eq!(
            doc["results"][0]["cluster_commands"]["tolerated"], 1,
            "{}: {doc}",
            shell.shebang
        );
        assert!(!calls.contains("label"), "{}: {calls}", shell.shebang);

        // The widgets CRD there, the gadgets CRD and b absent: each
        // probe takes the path it took before, two answers tolerated.
        let (code, doc, calls) = run(&tree, &shell.shebang, "present");
        assert_eq!(code, 0, "{}: {doc}", shell.shebang);
        assert_eq!(
            doc["results"][0]["cluster_commands"]["tolerated"], 2,
            "{}: {doc}",
            shell.shebang
        );
        for (seen, call) in [
            (true, "label widgets.example.com"),
            (false, "label gadgets"),
            (true, "annotate crd a.example.com"),
            (false, "annotate crd b.example.com"),
        ] {
            assert_eq!(
                calls.contains(call),
                seen,
                "{}: {call}: {calls}",
                shell.shebang
            );
        }

        let (code, doc, calls) = run(&tree, &shell.shebang, "forbidden");
        assert_ne!(
            code, 0,
            "{}: a Forbidden probe was taken as absent: {doc}",
            shell.shebang
        );
        assert!(!calls.contains("label"), "{}: {calls}", shell.shebang);
    }
}
