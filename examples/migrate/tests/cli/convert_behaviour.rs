//! `migrate convert` proves, per script, that its conversion behaves as the
//! numbered original did: both run under the same recording fake cluster
//! commands (the success path, and each path where a call the original
//! branches on fails), and the only difference allowed is the version
//! stamp. Anything else makes the script `review`, naming the first call
//! that differs.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use common::Repo;
use common::numbered::write;
use common::shells::Shell;

/// The stamp, written out inline as the oldest numbered scripts have it.
fn inline_stamp(next: u64) -> String {
    format!(
        "kubectl create configmap -n cozy-system cozystack-version --from-literal=version={next} --dry-run=client -o yaml | kubectl apply -f-\n"
    )
}

/// A numbered history with `scripts` (slot 1, 2, ...) and `lib`, released
/// as v1.0.0.
fn history(lib: &[(&str, &str)], scripts: &[String]) -> Repo {
    let repo = Repo::new();
    for (rel, text) in lib {
        write(&repo, &format!("lib/{rel}"), text);
    }
    for (i, s) in scripts.iter().enumerate() {
        write(&repo, &(i + 1).to_string(), s);
    }
    repo.release("v1.0.0");
    repo
}

fn convert(repo: &Repo, extra: &[&str]) -> serde_json::Value {
    let dir = tempfile::tempdir().unwrap();
    let (code, report, err) = common::numbered::convert(repo, &dir.path().join("t"), extra);
    assert_eq!(code, 0, "{err}");
    report
}

/// [`convert`] with `--rewrite` of a history of one script, `body` under
/// `shell`, beside `lib`.
fn rewritten_under(shell: &Shell, lib: &[(&str, &str)], body: &str) -> serde_json::Value {
    let repo = history(lib, &[format!("#!{}\n{body}", shell.shebang)]);
    convert(&repo, &["--rewrite"])
}

/// Asserts that convert gave script 1 of `report` `status`.
fn assert_status(report: &serde_json::Value, shell: &Shell, status: &str) {
    assert_eq!(
        script(report, "1")["status"],
        status,
        "{}: {report}",
        shell.name
    );
}

fn script<'a>(report: &'a serde_json::Value, slug: &str) -> &'a serde_json::Value {
    common::by_slug(&report["scripts"], slug).unwrap_or_else(|| panic!("no {slug}: {report}"))
}

fn behaviour<'a>(report: &'a serde_json::Value, slug: &str) -> &'a serde_json::Value {
    &script(report, slug)["behaviour"]
}

/// The message of the `behaviour` change of `slug` (there must be one).
fn difference(report: &serde_json::Value, slug: &str) -> String {
    let s = script(report, slug);
    s["changes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["kind"] == "behaviour")
        .unwrap_or_else(|| panic!("no behaviour change for {slug}: {s}"))["message"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// Asserts that script 1 of `report` behaved otherwise than its original,
/// the difference naming each of `needles`: its message.
fn assert_differed(report: &serde_json::Value, needles: &[&str]) -> String {
    assert_eq!(behaviour(report, "1")["result"], "differed", "{report}");
    let message = difference(report, "1");
    common::assert_contains_all(&message, needles);
    message
}

/// A stamp-only script: a neighbour call it branches on, the stamp.
fn stamps_after_work(shell: &Shell) -> String {
    format!(
        "#!{}\nset -eu\nif kubectl get namespace tenant-root >/dev/null 2>&1; then\n  kubectl label namespace tenant-root migrated=yes --overwrite\nelse\n  echo 'no tenant-root; nothing to label'\nfi\n{}",
        shell.shebang,
        inline_stamp(2)
    )
}

#[test]
fn a_conversion_that_removes_only_the_stamp_passes_under_every_shell() {
    for shell in common::shells::all() {
        let repo = history(&[], &[stamps_after_work(&shell)]);
        for extra in [&[][..], &["--rewrite"][..]] {
            let report = convert(&repo, extra);
            let b = behaviour(&report, "1");
            assert_eq!(b["result"], "passed", "{}: {report}", shell.name);
            // The success path and the probe failing on each class it can
            // meet (not-found, forbidden, unreachable, timeout).
            assert_eq!(b["paths"], 5, "{}: {b}", shell.name);
            let status = if extra.is_empty() {
                "rewritable"
            } else {
                "rewritten"
            };
            assert_eq!(script(&report, "1")["status"], status, "{}", shell.name);
            assert_eq!(report["summary"]["behaviour"]["passed"], 1, "{report}");
        }
    }
}

#[test]
fn the_text_report_says_per_script_that_the_behaviour_check_passed_and_counts_it() {
    let shell = common::shells::dash();
    let repo = history(&[], &[stamps_after_work(&shell)]);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("t");
    let (code, text, err) = common::text(&common::numbered::convert_args(&repo, &out));
    assert_eq!(code, 0, "{err}");
    common::assert_contains_all(
        &text,
        &[
            "behaviour check: 1 passed, 0 differed, 0 could not run",
            "failure paths passed by class: forbidden 1, not-found 1, timeout 1, unreachable 1 (0 of them failing closed)",
            "platform/migrations/1 -> pre-apply/1: rewritable; behaviour: passed (5 paths)",
        ],
    );
}

/// A stamp helper that also labels the namespace, joined to the stamp by
/// `&&`: the pattern reader takes the whole function for the stamp, so the
/// rewrite removes the label with it.
const LABELS_IN_THE_STAMP: &str = "bump_version() {\n  kubectl label namespace cozy-system cozystack.io/migrated=true --overwrite && \\\n    kubectl create configmap cozystack-version -n cozy-system --from-literal=version=\"$1\" --dry-run=client -o yaml | kubectl apply -f -\n}\n";

#[test]
fn a_conversion_that_drops_a_call_beside_the_stamp_is_review_naming_the_call() {
    for shell in common::shells::all() {
        let report = rewritten_under(
            &shell,
            &[
                ("bump.sh", LABELS_IN_THE_STAMP),
                ("crd.yaml", "kind: List\n"),
            ],
            "set -eu\n. \"$(dirname \"$0\")/lib/bump.sh\"\nkubectl apply -f \"$(dirname \"$0\")/lib/crd.yaml\"\nbump_version 2\n",
        );
        assert_status(&report, &shell, "review");
        let b = behaviour(&report, "1");
        let message = assert_differed(
            &report,
            &[
                "success path",
                "call 2",
                "kubectl label namespace cozy-system cozystack.io/migrated=true --overwrite",
            ],
        );
        assert_eq!(b["difference"], message.as_str(), "{b}");
        assert_eq!(report["summary"]["behaviour"]["differed"], 1, "{report}");
    }
}

#[test]
fn a_script_whose_failure_path_differs_is_caught() {
    // No errexit: the numbered runner went on past a failed delete; the
    // engine runs every script with `-e`, so the conversion stops there.
    // The delete is in a helper, which convert's rewrite of the calls a
    // script carried past does not reach.
    for shell in common::shells::all() {
        let report = rewritten_under(
            &shell,
            &[
                ("new-hook.yaml", "kind: Job\n"),
                (
                    "cleanup.sh",
                    "cleanup() {\n  kubectl delete job old-hook -n cozy-system\n}\n",
                ),
            ],
            &format!(
                ". \"$(dirname \"$0\")/lib/cleanup.sh\"\ncleanup\nkubectl apply -f \"$(dirname \"$0\")/lib/new-hook.yaml\"\n{}",
                inline_stamp(2)
            ),
        );
        assert_status(&report, &shell, "review");
        assert_differed(
            &report,
            &[
                "when call 1 (kubectl delete job old-hook -n cozy-system) fails (not-found)",
                "call 2",
                "kubectl apply -f",
            ],
        );
    }
}

#[test]
fn a_script_without_errexit_is_rewritten_into_what_it_meant_and_passes_on_every_failure_class() {
    // The delete the numbered runner went on past: NotFound is accepted
    // through migrate-tolerate, a denial, an unreachable server or a
    // timeout now stops the script at that call (failing closed).
    for shell in common::shells::all() {
        let report = rewritten_under(
            &shell,
            &[("new-hook.yaml", "kind: Job\n")],
            &format!(
                "kubectl delete job old-hook -n cozy-system\nkubectl apply -f \"$(dirname \"$0\")/lib/new-hook.yaml\"\n{}",
                inline_stamp(2)
            ),
        );
        assert_status(&report, &shell, "rewritten");
        let b = behaviour(&report, "1");
        assert_eq!(b["result"], "passed", "{}: {b}", shell.name);
        assert_eq!(b["classes"]["not-found"], 1, "{}: {b}", shell.name);
        assert_eq!(b["classes"]["forbidden"], 2, "{}: {b}", shell.name);
        assert_eq!(b["fail_closed"], 7, "{}: {b}", shell.name);
        let totals = &report["summary"]["behaviour"];
        assert_eq!(totals["classes"]["forbidden"], 2, "{totals}");
        assert_eq!(totals["fail_closed"], 7, "{totals}");
        let diff = script(&report, "1")["diff"].as_str().unwrap().to_owned();
        assert!(
            diff.contains(
                "\n+migrate-tolerate --not-found -- kubectl delete job old-hook -n cozy-system\n"
            ),
            "{diff}"
        );
    }
}

#[test]
fn a_helper_file_dropped_while_the_script_still_calls_into_it_is_caught() {
    // The script reaches the helper through a variable, which the rewrite
    // does not read: it drops the helper as unused.
    let version = "render_version() {\n  printf 'kind: ConfigMap\\nmetadata:\\n  name: cozystack-version\\ndata:\\n  version: \"%s\"\\n' \"$1\"\n}\n";
    let text = "#!/bin/sh\nset -eu\nLIB=\"$(dirname \"$0\")/lib/\"\n. \"${LIB}version.sh\"\nkubectl get namespace cozy-system\nrender_version 2 | kubectl apply -f -\n".to_owned();
    let repo = history(&[("version.sh", version)], &[text]);
    let report = convert(&repo, &["--rewrite"]);
    assert_eq!(report["dropped_lib"][0], "lib/version.sh", "{report}");
    assert_differed(
        &report,
        &[
            "success path",
            "call 1",
            "kubectl get namespace cozy-system",
        ],
    );
}

#[test]
fn a_script_that_never_stops_calling_could_not_run_and_is_not_passed() {
    let text = format!(
        "#!/bin/sh\nset -eu\nuntil [ \"$(kubectl get deploy/x -o jsonpath='{{.status.readyReplicas}}')\" = 1 ]; do sleep 5; done\n{}",
        inline_stamp(2)
    );
    let repo = history(&[], &[text]);
    let report = convert(&repo, &["--rewrite"]);
    let b = behaviour(&report, "1");
    assert_eq!(b["result"], "could-not-run", "{b}");
    assert!(
        b["reason"].as_str().unwrap().contains("cluster calls"),
        "{b}"
    );
    assert_eq!(
        report["summary"]["behaviour"]["could_not_run"], 1,
        "{report}"
    );
    assert_eq!(report["summary"]["behaviour"]["passed"], 0, "{report}");
}

#[test]
fn no_behaviour_check_reports_every_script_skipped_never_passed() {
    let shell = common::shells::dash();
    let repo = history(&[], &[stamps_after_work(&shell)]);
    let report = convert(&repo, &["--rewrite", "--no-behaviour-check"]);
    assert_eq!(behaviour(&report, "1")["result"], "skipped", "{report}");
    assert_eq!(report["summary"]["behaviour"]["skipped"], 1, "{report}");
    assert_eq!(report["summary"]["behaviour"]["passed"], 0, "{report}");
}

#[test]
fn the_check_never_reaches_a_real_cluster_command_or_kubeconfig() {
    // A kubectl on the caller's PATH that would record being run, and a
    // KUBECONFIG the script prints: neither is seen by the script.
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let witness = dir.path().join("real-kubectl-ran");
    let real = bin.join("kubectl");
    std::fs::write(&real, format!("#!/bin/sh\ntouch '{}'\n", witness.display())).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o755)).unwrap();
    // It calls only where KUBECONFIG is gone and HOME is not the caller's.
    let text = format!(
        "#!/bin/sh\nset -eu\nif [ -z \"${{KUBECONFIG:-}}\" ] && [ \"$HOME\" != '{}' ]; then\n  kubectl get namespace tenant-root\nfi\n{}",
        dir.path().display(),
        inline_stamp(2)
    );
    let repo = history(&[], &[text]);
    let out = dir.path().join("t");
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    let output = common::migrate()
        .args(common::numbered::convert_args(&repo, &out))
        .args(["--output", "json"])
        .env("PATH", path)
        .env("KUBECONFIG", dir.path().join("admin.conf"))
        .env("HOME", dir.path())
        .output()
        .unwrap();
    let (code, report, err) = common::parse(output);
    assert_eq!(code, 0, "{err}");
    let b = behaviour(&report, "1");
    assert_eq!(b["result"], "passed", "{report}");
    // The probe and the two calls of the stamp.
    assert_eq!(b["calls"], 3, "{b}");
    assert!(!witness.exists(), "the real kubectl ran");
}
