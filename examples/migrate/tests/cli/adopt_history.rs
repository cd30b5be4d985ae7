//! `migrate adopt --helm-history FILE` / `--helm-release NAMESPACE/NAME`:
//! the platform's Helm release history, with the `legacy-releases` file
//! `convert` writes, answers which content of a diverged slot a cluster ran
//! (CONTRACT.md §6.2); what it cannot answer reruns, saying why; an
//! unreadable history is bad input.
//!
//! The fixture is `common::numbered::history()`: v1.0.0 holds slots 1 and
//! 2; the release branch's v1.0.1 adds slot 3 as `3-v1-0-1`; main's
//! v1.1.0-rc.1, rc.2 and v1.1.0 hold another slot 3 (`3-v1-1-0-rc-1`) and
//! slot 4. Main's tree is converted and adopted.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use std::path::{Path, PathBuf};

use common::numbered::{Released, history};
use common::{by_slug, fields, file_spec, migrate, parse, strings};

/// Main's line converted with `--rewrite`, committed, with its manifest.
type Converted = Released;

fn converted() -> Converted {
    converted_with(&[])
}

/// Main's line converted with `--rewrite` and `extra`.
fn converted_with(extra: &[&str]) -> Converted {
    let mut args = vec!["--rewrite"];
    args.extend_from_slice(extra);
    Released::new(history(), tempfile::tempdir().unwrap(), &args)
}

/// `helm history -o json` of `(revision, status, chart version)`, the chart
/// named as a platform's (`platform-1.0.1`).
fn helm_json(revisions: &[(u64, &str, &str)]) -> String {
    let doc: Vec<serde_json::Value> = revisions
        .iter()
        .map(|(r, status, v)| {
            serde_json::json!({
                "revision": r,
                "updated": "2026-03-04T05:06:07.123456789Z",
                "status": status,
                "chart": format!("platform-{v}"),
                "app_version": "",
                "description": if *r == 1 { "Install complete" } else { "Upgrade complete" },
            })
        })
        .collect();
    serde_json::to_string_pretty(&doc).unwrap()
}

/// `migrate adopt TREE --legacy-version VERSION --ledger <its file> EXTRA...
/// --output json`, with `stdin` on its standard input.
fn adopt(
    c: &Converted,
    version: &str,
    extra: &[&str],
    stdin: &str,
) -> (i32, serde_json::Value, String) {
    parse(common::output_with_stdin(
        migrate()
            .arg("adopt")
            .arg(c.tree())
            .args(["--legacy-version", version, "--ledger"])
            .arg(file_spec(&c.ledger()))
            .args(extra)
            .args(["--output", "json"])
            .env_remove("MIGRATE_HELM"),
        stdin,
    ))
}

/// Adopts with the history in a file.
fn adopt_with_file(
    c: &Converted,
    version: &str,
    history: &str,
) -> (i32, serde_json::Value, String) {
    let file = c.file("history.json");
    std::fs::write(&file, history).unwrap();
    adopt(c, version, &["--helm-history", file.to_str().unwrap()], "")
}

/// [`adopt_with_file`], which must succeed: its document.
fn adopted(c: &Converted, version: &str, history: &str) -> serde_json::Value {
    let (code, doc, err) = adopt_with_file(c, version, history);
    assert_eq!(code, 0, "{err}\n{doc}");
    doc
}

/// [`adopted`] from the `helm history` of `revisions` (see [`helm_json`]).
fn adopted_at(c: &Converted, version: &str, revisions: &[(u64, &str, &str)]) -> serde_json::Value {
    adopted(c, version, &helm_json(revisions))
}

/// [`adopted_at`] on a fresh [`converted`] tree: the tree and the document.
fn adopted_fresh(version: &str, revisions: &[(u64, &str, &str)]) -> (Converted, serde_json::Value) {
    let c = converted();
    let doc = adopted_at(&c, version, revisions);
    (c, doc)
}

/// The first run after the adoption: the contents it ran, in order.
fn first_run(c: &Converted) -> Vec<String> {
    std::fs::write(c.log(), "").unwrap();
    let out = migrate()
        .arg("run")
        .arg(c.tree())
        .arg("--ledger")
        .arg(file_spec(&c.ledger()))
        .args(["--output", "json"])
        .env("FIXTURE_LOG", c.log())
        .output()
        .unwrap();
    let (code, doc, err) = parse(out);
    assert_eq!(code, 0, "{err}\n{doc}");
    std::fs::read_to_string(c.log())
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// The ledger's entry of `slug` (`migrate status`).
fn entry(c: &Converted, slug: &str) -> serde_json::Value {
    let (code, doc, err) = common::json(&["status", "--ledger", &file_spec(&c.ledger())]);
    assert_eq!(code, 0, "{err}");
    by_slug(&doc["entries"], slug)
        .unwrap_or_else(|| panic!("no entry {slug} in {doc}"))
        .clone()
}

/// The lines of the `legacy-releases` file convert wrote, comments left
/// out.
fn legacy_releases(c: &Converted) -> Vec<String> {
    let text = std::fs::read_to_string(c.tree().join("legacy-releases")).unwrap();
    let lines = text.lines().filter(|l| !l.starts_with('#'));
    lines.map(str::to_owned).collect()
}

#[test]
fn convert_writes_which_content_of_each_diverged_slot_every_release_tag_held() {
    let c = converted();
    assert_eq!(
        legacy_releases(&c),
        [
            "v1.0.0",
            "v1.0.1 3=3-v1-0-1",
            "v1.1.0-rc.1 3=3-v1-1-0-rc-1 4=4-v1-1-0-rc-1",
            "v1.1.0-rc.2 3=3-v1-1-0-rc-1 4=4-v1-1-0-rc-2",
            "v1.1.0 3=3-v1-1-0-rc-1 4=4-v1-1-0-rc-2",
        ]
    );
}

#[test]
fn a_history_through_the_release_branch_records_its_content_and_the_first_run_runs_mains_once() {
    // Installed at v1.0.0, upgraded to v1.0.1, which ran the backport at 3.
    let (c, doc) = adopted_fresh("4", &[(1, "superseded", "1.0.0"), (2, "deployed", "1.0.1")]);
    assert_eq!(strings(&doc["legacy"]), ["1", "2", "3-v1-0-1"]);
    assert_eq!(doc["reruns"], serde_json::json!([]));
    let answered = &doc["history_answered"][0];
    assert_eq!(answered["slot"], 3);
    assert_eq!(answered["ran"], "3-v1-0-1");
    assert_eq!(answered["reason"], "helm-history");
    let recorded = entry(&c, "3-v1-0-1");
    assert_eq!(recorded["state"], "legacy");
    assert_eq!(recorded["reason"], "helm-history");
    let message = recorded["message"].as_str().unwrap();
    assert!(
        message.contains("history.json: revision 2 (platform-1.0.1, deployed")
            && message.contains("v1.0.1"),
        "{message}"
    );
    // Main's content of 3 is other content: it runs once, saying nothing
    // of a rerun; then 4.
    assert_eq!(first_run(&c), ["3-main", "4-final"]);
    assert!(common::numbered::reruns(&c.ledger()).is_empty());
}

#[test]
fn a_history_through_mains_release_records_mains_content_and_nothing_runs_again() {
    let (c, doc) = adopted_fresh("5", &[(1, "superseded", "1.0.0"), (2, "deployed", "1.1.0")]);
    assert_eq!(
        strings(&doc["legacy"]),
        ["1", "2", "3-v1-1-0-rc-1", "4-v1-1-0-rc-2"]
    );
    assert_eq!(entry(&c, "3-v1-1-0-rc-1")["reason"], "helm-history");
    assert!(first_run(&c).is_empty());
}

#[test]
fn a_history_on_stdin_through_a_release_the_tree_does_not_know_reruns_saying_why() {
    let c = converted();
    let (code, doc, err) = adopt(
        &c,
        "4",
        &["--helm-history", "-"],
        &helm_json(&[(1, "superseded", "0.9.0"), (2, "deployed", "1.0.1")]),
    );
    assert_eq!(
        code, 0,
        "history that cannot answer never refuses: {err}\n{doc}"
    );
    assert_eq!(fields(&doc["reruns"], "slug"), ["3-v1-1-0-rc-1"]);
    let message = entry(&c, "3-v1-1-0-rc-1")["message"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        message.starts_with("diverged-legacy-rerun:")
            && message.contains("the release history did not answer")
            && message.contains("--helm-history - (stdin): revision 1 (platform-0.9.0")
            && message.contains("legacy-releases"),
        "{message}"
    );
    assert_eq!(first_run(&c), ["3-main", "4-final"]);
    assert_eq!(common::numbered::reruns(&c.ledger()), ["3-v1-1-0-rc-1"]);
}

#[test]
fn an_unreadable_helm_history_is_bad_input_naming_the_file_and_revision_and_writes_nothing() {
    let c = converted();
    let (code, doc, _) =
        adopt_with_file(&c, "4", r#"[{"revision": 2, "chart": "platform-1.0.1"}]"#);
    assert_eq!(code, 2, "{doc}");
    common::assert_first_problem(&doc, "history.json: revision 2: no status");
    assert!(!c.ledger().exists());

    let (code, doc, _) = adopt_with_file(&c, "4", "Error: not json");
    assert_eq!(code, 2, "{doc}");
    common::assert_first_problem(
        &doc,
        "history.json: not the JSON array of `helm history -o json`",
    );

    let missing = c.file("nope.json");
    let (code, doc, _) = adopt(&c, "4", &["--helm-history", missing.to_str().unwrap()], "");
    assert_eq!(code, 2, "{doc}");
    common::assert_first_problem(&doc, "nope.json");
    assert!(!c.ledger().exists());
}

#[test]
fn a_failed_revision_does_not_count_and_the_adoption_says_so() {
    let c = converted();
    let history = helm_json(&[
        (1, "superseded", "1.0.0"),
        (2, "failed", "1.1.0"),
        (3, "deployed", "1.1.0"),
    ]);
    let doc = adopted(&c, "5", &history);
    common::assert_contains_all(
        doc["history_answered"][0]["message"].as_str().unwrap(),
        &["revision 3"],
    );
    let notes = strings(&doc["history_notes"]);
    assert!(
        notes.len() == 1
            && notes[0].contains("revision 2 (platform-1.1.0, failed")
            && notes[0].contains("does not count as run"),
        "{notes:?}"
    );
    // The text says it too.
    std::fs::remove_file(c.ledger()).unwrap();
    let file = c.file("history.json");
    let out = migrate()
        .arg("adopt")
        .arg(c.tree())
        .args(["--legacy-version", "5", "--ledger"])
        .arg(file_spec(&c.ledger()))
        .arg("--helm-history")
        .arg(&file)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    common::assert_contains_all(
        &text,
        &[
            "slot 3: '3-v1-1-0-rc-1' recorded legacy from the release history",
            "note: ",
            "does not count as run",
        ],
    );
}

#[test]
fn a_pre_release_revision_counts_only_with_count_prereleases() {
    // Installed at the candidate, then its release: which slot-3 content
    // ran is the candidate's, the same content; slot 4 held another.
    let history = helm_json(&[(1, "superseded", "1.1.0-rc.1"), (2, "deployed", "1.1.0")]);
    let c = converted();
    let doc = adopted(&c, "5", &history);
    assert_eq!(fields(&doc["history_answered"], "ran"), ["3-v1-1-0-rc-1"]);
    let by = |doc: &serde_json::Value| {
        doc["history_answered"][0]["message"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    assert!(by(&doc).contains("revision 2 (platform-1.1.0,"), "{doc}");
    assert!(
        strings(&doc["history_notes"])
            .iter()
            .any(|n| n.contains("--count-prereleases")),
        "{doc}"
    );
    let c = converted();
    let file = c.file("history.json");
    std::fs::write(&file, &history).unwrap();
    let (code, doc, err) = adopt(
        &c,
        "5",
        &[
            "--helm-history",
            file.to_str().unwrap(),
            "--count-prereleases",
        ],
        "",
    );
    assert_eq!(code, 0, "{err}\n{doc}");
    assert_eq!(fields(&doc["history_answered"], "ran"), ["3-v1-1-0-rc-1"]);
    assert!(
        by(&doc).contains("revision 1 (platform-1.1.0-rc.1,"),
        "{doc}"
    );
    assert_eq!(doc["history_notes"], serde_json::json!([]));
}

/// A fake `helm` in `dir`: records its arguments to `dir/helm.args`, then
/// runs `body`.
fn fake_helm(dir: &Path, body: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join("helm");
    std::fs::write(
        &path,
        format!(
            "#!/bin/sh\nprintf '%s\\n' \"$@\" > \"{}\"\n{body}\n",
            dir.join("helm.args").display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

#[test]
fn helm_release_runs_helm_history_on_the_commands_cluster_and_a_release_helm_lacks_falls_back() {
    let c = converted();
    let bin = tempfile::tempdir().unwrap();
    std::fs::write(
        bin.path().join("out.json"),
        helm_json(&[(1, "superseded", "1.0.0"), (2, "deployed", "1.0.1")]),
    )
    .unwrap();
    let helm = fake_helm(
        bin.path(),
        &format!("cat '{}'", bin.path().join("out.json").display()),
    );
    let kubeconfig = bin.path().join("kubeconfig");
    let with = |helm: &Path| {
        adopt(
            &c,
            "4",
            &[
                "--helm-release",
                "cozy-system/platform",
                "--helm",
                helm.to_str().unwrap(),
                "--kubeconfig",
                kubeconfig.to_str().unwrap(),
                "--context",
                "prod",
            ],
            "",
        )
    };
    let (code, doc, err) = with(&helm);
    assert_eq!(code, 0, "{err}\n{doc}");
    assert_eq!(fields(&doc["history_answered"], "ran"), ["3-v1-0-1"]);
    common::assert_contains_all(
        doc["history_answered"][0]["message"].as_str().unwrap(),
        &["helm history cozy-system/platform: revision 2"],
    );
    let args = std::fs::read_to_string(bin.path().join("helm.args")).unwrap();
    let args: Vec<&str> = args.lines().collect();
    assert_eq!(
        args,
        [
            "history",
            "platform",
            "--namespace",
            "cozy-system",
            "--output",
            "json",
            "--max",
            "100000",
            "--kubeconfig",
            kubeconfig.to_str().unwrap(),
            "--kube-context",
            "prod"
        ]
    );

    // A release Helm has no record of: nothing answers, nothing refuses.
    std::fs::remove_file(c.ledger()).unwrap();
    let missing = fake_helm(bin.path(), "echo 'Error: release: not found' >&2; exit 1");
    let (code, doc, err) = with(&missing);
    assert_eq!(code, 0, "{err}\n{doc}");
    assert_eq!(fields(&doc["reruns"], "slug"), ["3-v1-1-0-rc-1"]);
    assert!(
        strings(&doc["history_notes"])
            .iter()
            .any(|n| n.contains("Helm has no such release")),
        "{doc}"
    );

    // Helm failing otherwise: what was asked for cannot be read.
    std::fs::remove_file(c.ledger()).unwrap();
    let broken = fake_helm(
        bin.path(),
        "echo 'Error: Kubernetes cluster unreachable' >&2; exit 1",
    );
    let (code, doc, _) = with(&broken);
    assert_eq!(code, 1, "{doc}");
    common::assert_first_problem(&doc, "cluster unreachable");
    assert!(!c.ledger().exists());

    let (code, doc, _) = adopt(&c, "4", &["--helm-release", "platform"], "");
    assert_eq!(code, 2, "{doc}");
    common::assert_first_problem(&doc, "expected NAMESPACE/NAME");
}

#[tokio::test]
#[ignore = "needs MIGRATE_TEST_KUBECONFIG (examples/kube-testenv)"]
async fn a_real_helm_release_upgraded_through_two_versions_answers_the_adoption() {
    let cluster = test_apiserver::or_skip!(
        crate::chart::real_cluster("migrate adopt --helm-release against a real helm").await
    );
    let c = converted();
    let namespace = cluster.namespace().to_owned();
    let release = test_apiserver::real::unique_name("platform");
    // A chart of our own whose versions are the fixture's tags: installed
    // at v1.0.0, upgraded to v1.0.1 (the release branch's backport of 3).
    let chart = c.file("chart");
    common::write_files(
        &chart,
        &[(
            "templates/marker.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-marker\ndata:\n  version: {{ .Chart.Version | quote }}\n",
        )],
    );
    for (i, version) in ["1.0.0", "1.0.1"].into_iter().enumerate() {
        std::fs::write(
            chart.join("Chart.yaml"),
            format!(
                "apiVersion: v2\nname: platform\nversion: {version}\nappVersion: \"v{version}\"\n"
            ),
        )
        .unwrap();
        let verb = if i == 0 { "install" } else { "upgrade" };
        crate::chart::run({
            let mut helm = cluster.helm();
            helm.args([verb, &release])
                .arg(&chart)
                .args(["--namespace", &namespace]);
            helm
        });
    }
    let helm = std::env::var(test_apiserver::real::HELM_VAR).unwrap();
    let (code, doc, err) = adopt(
        &c,
        "4",
        &[
            "--helm-release",
            &format!("{namespace}/{release}"),
            "--helm",
            &helm,
            "--kubeconfig",
            cluster.kubeconfig().to_str().unwrap(),
        ],
        "",
    );
    crate::chart::run({
        let mut helm = cluster.helm();
        helm.args(["uninstall", &release, "--namespace", &namespace]);
        helm
    });
    assert_eq!(code, 0, "{err}\n{doc}");
    assert_eq!(
        fields(&doc["history_answered"], "ran"),
        ["3-v1-0-1"],
        "{doc}"
    );
    let message = doc["history_answered"][0]["message"].as_str().unwrap();
    assert!(
        message.contains(&format!(
            "helm history {namespace}/{release}: revision 2 (platform-1.0.1, deployed"
        )),
        "{message}"
    );
    assert_eq!(doc["reruns"], serde_json::json!([]));
    assert_eq!(first_run(&c), ["3-main", "4-final"]);
}

/// The numbered runner's targets at the fixture's tags: the release
/// branch's v1.0.1 ships its backport of slot 3 without raising the target
/// (as the reference platform's release guide asks), so only main's
/// v1.1.0 line runs slot 3.
const TARGETS: &str = "# tag target\nv1.0.0 3\nv1.0.1 3\nv1.1.0-rc.1 5\nv1.1.0-rc.2 5\nv1.1.0 5\n";

#[test]
fn with_release_targets_a_release_that_ships_a_slot_below_its_target_only_did_not_run_it() {
    let targets = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(targets.path(), TARGETS).unwrap();
    let c = converted_with(&["--release-targets", targets.path().to_str().unwrap()]);
    assert_eq!(
        legacy_releases(&c),
        [
            "v1.0.0 target=3",
            "v1.0.1 target=3 3=3-v1-0-1",
            "v1.1.0-rc.1 target=5 3=3-v1-1-0-rc-1 4=4-v1-1-0-rc-1",
            "v1.1.0-rc.2 target=5 3=3-v1-1-0-rc-1 4=4-v1-1-0-rc-2",
            "v1.1.0 target=5 3=3-v1-1-0-rc-1 4=4-v1-1-0-rc-2",
        ]
    );
    // Through the release branch's v1.0.1 (which shipped the backport but
    // did not run it) to main's v1.1.0, which ran main's content.
    let doc = adopted_at(
        &c,
        "5",
        &[
            (1, "superseded", "1.0.0"),
            (2, "superseded", "1.0.1"),
            (3, "deployed", "1.1.0"),
        ],
    );
    assert_eq!(fields(&doc["history_answered"], "ran"), ["3-v1-1-0-rc-1"]);
    common::assert_contains_all(
        doc["history_answered"][0]["message"].as_str().unwrap(),
        &["revision 3 (platform-1.1.0, deployed"],
    );
    assert!(first_run(&c).is_empty());
}

#[test]
fn a_bad_release_targets_file_is_bad_input_naming_its_line() {
    let repo = history();
    let out = tempfile::tempdir().unwrap();
    let targets = tempfile::NamedTempFile::new().unwrap();
    let convert = |text: &str| {
        std::fs::write(targets.path(), text).unwrap();
        common::numbered::convert(
            &repo,
            &out.path().join("tree"),
            &["--release-targets", targets.path().to_str().unwrap()],
        )
    };
    let name = targets.path().display().to_string();
    let (code, doc, _) = convert("v1.0.0 3\nv1.0.1\n");
    assert_eq!(code, 2, "{doc}");
    common::assert_first_problem(&doc, &format!("{name}:2: expected 'TAG TARGET'"));
    let (code, doc, _) = convert("v1.0.0 x\n");
    assert_eq!(code, 2, "{doc}");
    common::assert_first_problem(
        &doc,
        &format!("{name}:1: target \"x\" is not a decimal integer"),
    );
    let (code, doc, _) = convert("v1.0.0 3\nv1.0.0 4\n");
    assert_eq!(code, 2, "{doc}");
    common::assert_first_problem(&doc, "v1.0.0 is given already on line 1");
    let (code, doc, _) = convert("v9.9.9 3\n");
    assert_eq!(code, 2, "{doc}");
    common::assert_first_problem(
        &doc,
        &format!("{name}:1: v9.9.9 is no release tag convert read"),
    );
    assert!(!out.path().join("tree").exists());
}
