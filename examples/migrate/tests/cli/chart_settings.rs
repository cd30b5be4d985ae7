//! The chart's pod settings, the hook's RBAC and the files' names, with the
//! real `helm` and API server (`MIGRATE_TEST_KUBECONFIG`, `MIGRATE_TEST_HELM`);
//! unset, each test prints that it skipped (under `CI=true` it fails).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::chart::{
    CHART, complete_hook_job, helm_release, helm_upgrade, ledger_data, objects, real_cluster,
    real_cluster_in, run,
};
use serde_json::Value;
use test_apiserver::real::{RealCluster, unique_name};

const SA: &str = "platform-migrations-hook";

/// Runs `command`; (success, stdout, stderr).
fn output(mut command: Command) -> (bool, String, String) {
    let out = command.output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `helm template --is-upgrade` of the committed chart in `ns` with `sets`: an
/// upgrade where lookup sees no ledger, so the hook renders.
fn template(cluster: &RealCluster, ns: &str, sets: &[&str]) -> (bool, String, String) {
    let mut helm = cluster.helm();
    helm.args([
        "template",
        "platform",
        CHART,
        "--is-upgrade",
        "--namespace",
        ns,
    ]);
    for set in sets {
        helm.args(["--set", set]);
    }
    output(helm)
}

fn one<'a>(objects: &'a [Value], kind: &str) -> &'a Value {
    let found: Vec<&Value> = objects.iter().filter(|o| o["kind"] == kind).collect();
    assert_eq!(found.len(), 1, "{kind}: {found:?}");
    found[0]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs MIGRATE_TEST_KUBECONFIG (examples/kube-testenv)"]
async fn the_hook_and_operator_pods_carry_the_pod_settings_of_the_values_and_the_server_accepts_them()
 {
    let (cluster, ns) =
        test_apiserver::or_skip!(real_cluster_in("the chart's pod settings", "chart-pods").await);
    let (success, yaml, stderr) = template(
        &cluster,
        &ns,
        &[
            "imagePullSecrets[0].name=registry-credentials",
            "nodeSelector.kubernetes\\.io/os=linux",
            "tolerations[0].key=dedicated",
            "tolerations[0].operator=Exists",
            "tolerations[0].effect=NoSchedule",
            "podAnnotations.example\\.com/team=platform",
        ],
    );
    assert!(success, "{stderr}");
    let all = objects(&cluster, &yaml);
    let job = one(&all, "Job");
    let deployment = one(&all, "Deployment");
    for (what, template) in [
        ("hook Job", &job["spec"]["template"]),
        ("operator", &deployment["spec"]["template"]),
    ] {
        let pod = &template["spec"];
        assert_eq!(
            template["metadata"]["annotations"]["example.com/team"], "platform",
            "{what}"
        );
        assert_eq!(
            pod["imagePullSecrets"][0]["name"], "registry-credentials",
            "{what}"
        );
        assert_eq!(pod["nodeSelector"]["kubernetes.io/os"], "linux", "{what}");
        assert_eq!(pod["tolerations"][0]["key"], "dedicated", "{what}");
        assert_eq!(pod["securityContext"]["runAsNonRoot"], true, "{what}");
        let container = &pod["containers"][0];
        assert_eq!(
            container["securityContext"]["readOnlyRootFilesystem"], true,
            "{what}"
        );
        assert_eq!(
            container["securityContext"]["capabilities"]["drop"][0], "ALL",
            "{what}"
        );
        assert_eq!(container["volumeMounts"][0]["mountPath"], "/tmp", "{what}");
        assert!(pod["volumes"][0]["emptyDir"].is_object(), "{what}");
    }
    // The API server validates them as it would at install.
    let out =
        cluster.kubectl_with_stdin(&["apply", "--dry-run=server", "-n", &ns, "-f", "-"], &yaml);
    common::assert_success(&out, "kubectl apply --dry-run=server");
}

/// `kubectl auth can-i VERB RESOURCE -n NS --as=the hook's ServiceAccount`.
fn hook_can(cluster: &RealCluster, ns: &str, verb: &str, resource: &str) -> bool {
    let out = cluster.kubectl_with_stdin(
        &[
            "auth",
            "can-i",
            verb,
            resource,
            "-n",
            ns,
            &format!("--as=system:serviceaccount:{ns}:{SA}"),
        ],
        "",
    );
    String::from_utf8_lossy(&out.stdout).trim() == "yes"
}

/// A copy of the cluster's kubeconfig that acts as `user`.
fn kubeconfig_as(cluster: &RealCluster, user: &str, dir: &Path) -> PathBuf {
    let mut view = cluster.kubectl();
    view.args(["config", "view", "--raw", "--flatten", "-o", "json"]);
    let mut config: Value = serde_json::from_str(&run(view)).unwrap();
    for u in config["users"].as_array_mut().unwrap() {
        u["user"]["as"] = Value::from(user);
    }
    let path = dir.join("kubeconfig-as-hook");
    std::fs::write(&path, config.to_string()).unwrap();
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs MIGRATE_TEST_KUBECONFIG (examples/kube-testenv)"]
async fn the_hook_role_suffices_for_a_configmap_ledger_run_and_grants_no_lease_writes() {
    let (cluster, ns) =
        test_apiserver::or_skip!(real_cluster_in("the hook's Role", "chart-rbac").await);
    let (success, yaml, stderr) = template(&cluster, &ns, &[]);
    assert!(success, "{stderr}");
    let rbac: Vec<&str> = yaml
        .split("\n---")
        .filter(|d| d.contains("templates/hook.yaml"))
        .filter(|d| {
            d.contains("\nkind: ServiceAccount")
                || d.contains("\nkind: Role\n")
                || d.contains("\nkind: RoleBinding")
        })
        .collect();
    assert_eq!(rbac.len(), 3, "{yaml}");
    let out = cluster.kubectl_with_stdin(&["apply", "-n", &ns, "-f", "-"], &rbac.join("\n---\n"));
    common::assert_success(&out, "kubectl apply of the hook RBAC");

    assert!(hook_can(
        &cluster,
        &ns,
        "get",
        "configmaps/cozystack-version"
    ));
    assert!(hook_can(
        &cluster,
        &ns,
        "patch",
        "configmaps/cozystack-version"
    ));
    assert!(hook_can(
        &cluster,
        &ns,
        "get",
        "leases/cozystack-version-lock"
    ));
    for verb in ["create", "patch", "delete", "update"] {
        assert!(
            !hook_can(&cluster, &ns, verb, "leases/cozystack-version-lock"),
            "the hook may {verb} the Lease"
        );
    }
    assert!(!hook_can(&cluster, &ns, "create", "configmaps"));
    assert!(!hook_can(&cluster, &ns, "get", "configmaps/another"));

    // A real run on an old cluster's ledger (legacy version 44), as the hook's
    // ServiceAccount: every read and write it makes is allowed.
    let mut create = cluster.kubectl();
    create.args([
        "create",
        "configmap",
        "cozystack-version",
        "-n",
        &ns,
        "--from-literal=version=44",
    ]);
    run(create);
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = kubeconfig_as(
        &cluster,
        &format!("system:serviceaccount:{ns}:{SA}"),
        dir.path(),
    );
    let repo = common::Repo::demo();
    let fake = repo.tree().join("tests/fake-kubectl");
    let doc = demo_pre_apply_run(&repo, &ns, &kubeconfig, &fake);
    assert!(
        !common::fields(&doc["results"], "slug").is_empty(),
        "the run ran something: {doc:#}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs MIGRATE_TEST_KUBECONFIG (examples/kube-testenv)"]
async fn files_rendered_for_another_ledger_name_are_refused_naming_the_file_and_the_fix() {
    let cluster = test_apiserver::or_skip!(real_cluster("the chart's files and values").await);
    let (success, _, stderr) = template(&cluster, "cozy-system", &["ledger.name=platform-ledger"]);
    assert!(!success, "rendered with files for another ledger");
    common::assert_contains_all(
        &stderr,
        &[
            "files/ledger-seed.yaml: metadata.name is \"cozystack-version\" but ledger.name is \"platform-ledger\"",
            "LEDGER_NAME=platform-ledger render-files.sh",
        ],
    );
    // Rendered for those names, the chart follows them everywhere.
    let dir = tempfile::tempdir().unwrap();
    let chart = dir.path().join("chart");
    common::copy_dir(Path::new(CHART), &chart);
    let repo = common::Repo::demo();
    let mut render = Command::new("sh");
    render
        .arg(chart.join("render-files.sh"))
        .args([repo.tree().to_str().unwrap(), "ghcr.io/example/m@sha256:0000000000000000000000000000000000000000000000000000000000000000"])
        .env("MIGRATE", env!("CARGO_BIN_EXE_migrate"))
        .env("LEDGER_NAME", "platform-ledger")
        .env("INDEX_NAME", "platform-index")
        .env("NAMESPACE", "platform");
    run(render);
    let mut helm = cluster.helm();
    helm.args([
        "template",
        "p",
        chart.to_str().unwrap(),
        "--namespace",
        "platform",
    ])
    .args(["--set", "ledger.name=platform-ledger"])
    .args(["--set", "operator.indexName=platform-index"]);
    let all = objects(&cluster, &run(helm));
    let names: Vec<(&str, &str)> = all
        .iter()
        .filter(|o| o["kind"] == "ConfigMap")
        .map(|o| {
            (
                o["metadata"]["namespace"].as_str().unwrap(),
                o["metadata"]["name"].as_str().unwrap(),
            )
        })
        .collect();
    assert!(
        names.contains(&("platform", "platform-ledger")),
        "{names:?}"
    );
    assert!(names.contains(&("platform", "platform-index")), "{names:?}");
    for file in ["ledger-seed.yaml", "index.yaml"] {
        let text = std::fs::read_to_string(chart.join("files").join(file)).unwrap();
        assert!(
            !text.contains("cozy-system") && !text.contains("cozystack-"),
            "{file} still names the defaults:\n{text}"
        );
    }
}

/// What the hook Job's pod does: `migrate run` of the demo tree's
/// pre-apply tier on the `cozystack-version` ConfigMap of `ns`, through
/// `kubeconfig`, with `kubectl` as the cluster command; it must exit 0. Its
/// report.
fn demo_pre_apply_run(repo: &common::Repo, ns: &str, kubeconfig: &Path, kubectl: &Path) -> Value {
    let out = common::migrate()
        .args(["run", repo.tree().to_str().unwrap(), "--tier", "pre-apply"])
        .args(["--ledger", &format!("configmap:{ns}/cozystack-version")])
        .args(["--require-existing-ledger", "--output", "json"])
        .env("KUBECONFIG", kubeconfig)
        .env("KUBECTL", kubectl)
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env(
            "MIGRATION_IMAGE",
            "ghcr.io/example/platform-migrations@sha256:0000000000000000000000000000000000000000000000000000000000000000",
        )
        .output()
        .unwrap();
    let (code, doc, stderr) = common::parse(out);
    assert_eq!(code, 0, "{doc:#}\n{stderr}");
    doc
}

/// An umbrella chart at `dir`: `Chart.yaml`, and `templates/version.yaml` (the numbered
/// runner's `version` ConfigMap, with the keep policy) when `templates_version`; with this
/// chart vendored under `charts/` when `with_migrations`.
fn umbrella(dir: &Path, version: &str, templates_version: bool, with_migrations: bool) -> PathBuf {
    std::fs::create_dir_all(dir.join("templates")).unwrap();
    std::fs::write(
        dir.join("Chart.yaml"),
        format!("apiVersion: v2\nname: platform\nversion: {version}\n"),
    )
    .unwrap();
    if templates_version {
        std::fs::write(
            dir.join("templates/version.yaml"),
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cozystack-version\n  \
             annotations:\n    helm.sh/resource-policy: keep\ndata:\n  version: \"44\"\n",
        )
        .unwrap();
    }
    if with_migrations {
        common::copy_dir(Path::new(CHART), &dir.join("charts/platform-migrations"));
    }
    dir.to_path_buf()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs MIGRATE_TEST_KUBECONFIG (examples/kube-testenv)"]
async fn an_umbrella_that_templated_the_version_configmap_hands_it_over_to_the_chart_on_upgrade() {
    let (cluster, ns) = test_apiserver::or_skip!(
        real_cluster_in("the umbrella chart's version ConfigMap", "umbrella").await
    );
    let release = unique_name("platform");
    let dir = tempfile::tempdir().unwrap();
    // Before: the umbrella templates the numbered runner's ConfigMap (version 44).
    let before = umbrella(&dir.path().join("v1"), "1.0.0", true, false);
    // Helm's own default timeout (5m0s).
    run(helm_release(
        &cluster, "install", &release, &before, &ns, "5m0s",
    ));
    assert_eq!(ledger_data(&cluster, &ns)["version"], "44");

    // After: the umbrella drops its template and vendors this chart. The kept ConfigMap
    // becomes the ledger: not rendered again (lookup finds it), and the hook runs what the
    // legacy rule leaves pending.
    let after = umbrella(&dir.path().join("v2"), "2.0.0", false, true);
    let mut upgrade = helm_upgrade(&cluster, &release, &after, &ns)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let job_name = format!("{release}-migrations-pre-apply");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(90);
    loop {
        let out = cluster.kubectl_with_stdin(&["get", "job", &job_name, "-n", &ns], "");
        if out.status.success() {
            break;
        }
        if let Ok(Some(status)) = upgrade.try_wait() {
            let out = upgrade.wait_with_output().unwrap();
            panic!(
                "helm upgrade ended ({status}) without a hook Job: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no hook Job within 90 s"
        );
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    }
    // What the Job's pod does (the image's tree is the demo's, which files/ were rendered
    // from), then what the Job controller would write.
    let repo = common::Repo::demo();
    demo_pre_apply_run(
        &repo,
        &ns,
        cluster.kubeconfig(),
        &repo.tree().join("tests/fake-kubectl"),
    );
    complete_hook_job(&cluster, &ns, &job_name, upgrade);

    // The ConfigMap survived leaving the umbrella's manifest and is the ledger now: the legacy
    // integers below 44 recorded `legacy`, the rest run.
    let data = ledger_data(&cluster, &ns);
    assert_eq!(data["version"], "44", "{data:#}");
    let state = |slug: &str| {
        let entry: Value =
            serde_json::from_str(data[format!("m.{slug}")].as_str().unwrap_or("{}")).unwrap();
        entry["s"]
            .as_str()
            .or(entry["state"].as_str())
            .unwrap_or_default()
            .to_owned()
    };
    assert_eq!(state("flux-crds-relabel"), "legacy", "{data:#}");
    assert_eq!(state("tenant-namespace-labels"), "ok", "{data:#}");
    let mut manifest = cluster.helm();
    manifest.args(["get", "manifest", &release, "--namespace", &ns]);
    let manifest = run(manifest);
    assert!(
        !manifest.contains("name: cozystack-version\n")
            && !manifest.contains("name: 'cozystack-version'"),
        "the upgraded release renders the ledger:\n{manifest}"
    );
    // Nothing pending now: the same release again creates no Job and leaves the ledger.
    run(helm_release(
        &cluster, "upgrade", &release, &after, &ns, "5m0s",
    ));
    assert_eq!(ledger_data(&cluster, &ns), data);
}
