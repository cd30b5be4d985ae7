//! The Helm chart in `examples/chart/` with the real `helm` and API server
//! (`MIGRATE_TEST_KUBECONFIG`, `MIGRATE_TEST_HELM`; see `test_apiserver::real`): `lint`,
//! `template`, and install, upgrades and uninstall of a real release. Real-server tests,
//! ignored unless asked for (`-- --ignored`) and failing when asked for without the server.
//!
//! The test environment has no nodes and no controller-manager, so a hook Job never runs: the
//! test does what its pod would (`migrate run` against the same ConfigMap) and then sets the
//! Job's status as the Job controller would, which is what Helm waits for.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use migration_core::testing::fixtures::{ScratchTree, TreeBuilder};
use migration_core::{OnError, Tier, Timestamp};
use serde_json::{Value, json};
use test_apiserver::real::{HELM_VAR, RealCluster, unique_name};

pub(crate) const CHART: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../chart");
const LEDGER: &str = "cozystack-version";

/// The real-server lane with the real `helm` (the test is marked as every real-server test is,
/// see `test_apiserver::real`): an unset `MIGRATE_TEST_HELM` fails it, as an unset
/// `MIGRATE_TEST_KUBECONFIG` does, so the chart tests can never pass by not running.
pub(crate) async fn real_cluster(what: &str) -> Option<RealCluster> {
    let cluster = RealCluster::from_env(what).await;
    assert!(
        std::env::var_os(HELM_VAR).is_some(),
        "{what}: {HELM_VAR} is not set: the chart lane needs the real helm \
         (eval \"$(sh examples/kube-testenv/testenv.sh env)\" sets it)"
    );
    cluster
}

/// [`real_cluster`] and a fresh namespace on it named from `prefix`.
pub(crate) async fn real_cluster_in(what: &str, prefix: &str) -> Option<(RealCluster, String)> {
    let cluster = real_cluster(what).await?;
    let ns = unique_name(prefix);
    cluster.ensure_namespace(&ns).await;
    Some((cluster, ns))
}

/// Runs `command`, asserting it succeeds; its stdout.
pub(crate) fn run(mut command: Command) -> String {
    let out = command
        .output()
        .unwrap_or_else(|e| panic!("cannot run {command:?}: {e}"));
    common::assert_success(&out, &format!("{command:?}"))
}

/// Writes what the Job controller would of the hook Job `job` that ran to
/// completion, then waits for the `helm upgrade` that waited on it, which
/// must succeed.
pub(crate) fn complete_hook_job(cluster: &RealCluster, ns: &str, job: &str, upgrade: Child) {
    let now = Timestamp::now().truncated().to_string();
    let status = json!({"status": {"startTime": now, "completionTime": now, "succeeded": 1,
        "conditions": [
            {"type": "SuccessCriteriaMet", "status": "True", "lastTransitionTime": now},
            {"type": "Complete", "status": "True", "lastTransitionTime": now}]}});
    let mut patch = cluster.kubectl();
    patch
        .args(["patch", "job", job, "-n", ns])
        .args(["--subresource=status", "--type=merge"])
        .args(["-p", &status.to_string()]);
    run(patch);
    common::assert_success(&upgrade.wait_with_output().unwrap(), "helm upgrade");
}

/// The objects of a YAML stream, as JSON (kubectl converts; no YAML parser needed).
pub(crate) fn objects(cluster: &RealCluster, yaml: &str) -> Vec<Value> {
    let out = cluster.kubectl_with_stdin(
        &["create", "--dry-run=client", "-o", "json", "-f", "-"],
        yaml,
    );
    common::assert_success(&out, "kubectl create --dry-run");
    serde_json::Deserializer::from_slice(&out.stdout)
        .into_iter::<Value>()
        .map(Result::unwrap)
        .collect()
}

fn find<'a>(objects: &'a [Value], kind: &str) -> Vec<&'a Value> {
    objects.iter().filter(|o| o["kind"] == kind).collect()
}

/// `image:` of the chart's values.yaml.
fn values_image() -> String {
    let values = std::fs::read_to_string(Path::new(CHART).join("values.yaml")).unwrap();
    values
        .lines()
        .find_map(|l| l.strip_prefix("image: "))
        .expect("values.yaml sets image")
        .trim()
        .to_owned()
}

/// The `at` the committed files/ledger-seed.yaml was rendered with.
fn committed_at() -> String {
    let seed = std::fs::read_to_string(Path::new(CHART).join("files/ledger-seed.yaml")).unwrap();
    // The compact form's time (`t`), or the full form's (`at`).
    let (start, len) = match seed.find(r#""t":""#) {
        Some(i) => (i, 5),
        None => (seed.find(r#""at":""#).expect("a seeded entry"), 6),
    };
    seed[start + len..start + len + 20].to_owned()
}

/// Runs the chart's render-files.sh for `tree` into `files`.
fn render_files(tree: &Path, image: &str, at: &str, files: &Path) {
    let mut command = Command::new("sh");
    command
        .arg(Path::new(CHART).join("render-files.sh"))
        .args([tree.to_str().unwrap(), image, at])
        .env("MIGRATE", env!("CARGO_BIN_EXE_migrate"))
        .env("FILES", files);
    run(command);
}

/// `data` of `migrate seed-fresh TREE --render configmap --at AT`.
fn seed_fresh_render(tree: &Path, at: &str) -> Value {
    let (code, doc, err) = common::json(&[
        "seed-fresh",
        tree.to_str().unwrap(),
        "--render",
        "configmap",
        "--at",
        at,
    ]);
    assert_eq!(code, 0, "{err}");
    doc["data"].clone()
}

#[test]
fn the_committed_chart_files_are_what_seed_fresh_and_index_render_for_the_demo_tree() {
    let repo = common::Repo::demo();
    let out = tempfile::tempdir().unwrap();
    render_files(&repo.tree(), &values_image(), &committed_at(), out.path());
    for file in ["ledger-seed.yaml", "index.yaml"] {
        let committed = std::fs::read_to_string(Path::new(CHART).join("files").join(file)).unwrap();
        let rendered = std::fs::read_to_string(out.path().join(file)).unwrap();
        if std::env::var_os("UPDATE_CHART_FILES").is_some() {
            std::fs::write(Path::new(CHART).join("files").join(file), &rendered).unwrap();
            continue;
        }
        assert_eq!(
            committed, rendered,
            "examples/chart/files/{file} differs from render-files.sh's output for the demo tree: \
             re-render it (examples/chart/README.md)"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs MIGRATE_TEST_KUBECONFIG (examples/kube-testenv)"]
async fn helm_lints_the_chart_and_templates_a_seeded_ledger_at_install_and_a_guarded_hook_on_upgrade()
 {
    let cluster =
        test_apiserver::or_skip!(real_cluster("helm lint and template of examples/chart").await);
    let mut lint = cluster.helm();
    lint.args(["lint", "--strict", CHART]);
    run(lint);

    let repo = common::Repo::demo();
    let at = committed_at();
    let template = |extra: &[&str]| {
        let mut helm = cluster.helm();
        helm.args(["template", "platform", CHART, "--namespace", "cozy-system"])
            .args(["--set-string", "ledger.labels.owner=platform"])
            .args(extra);
        objects(&cluster, &run(helm))
    };

    // helm template is an install without a cluster: lookup finds nothing, so the ledger is
    // rendered seeded and no hook.
    let install = template(&[]);
    let ledgers: Vec<&Value> = find(&install, "ConfigMap")
        .into_iter()
        .filter(|c| c["metadata"]["name"] == LEDGER)
        .collect();
    assert_eq!(ledgers.len(), 1, "one ledger ConfigMap at install");
    let ledger = ledgers[0];
    assert_eq!(ledger["data"], seed_fresh_render(&repo.tree(), &at));
    assert_eq!(
        ledger["metadata"]["annotations"]["helm.sh/resource-policy"],
        "keep"
    );
    assert_eq!(ledger["metadata"]["labels"]["owner"], "platform");
    assert!(find(&install, "Job").is_empty(), "no hook Job at install");

    let index = install
        .iter()
        .find(|o| o["metadata"]["name"] == "cozystack-migrations-index")
        .expect("the index ConfigMap");
    let (code, expected, err) = common::json(&[
        "index",
        repo.tree().to_str().unwrap(),
        "--image",
        &values_image(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(index["data"], expected["data"]);
    let deployment = find(&install, "Deployment");
    let command = &deployment[0]["spec"]["template"]["spec"]["containers"][0]["command"];
    assert!(
        common::strings(command).contains(&"--ledger=configmap:cozy-system/cozystack-version"),
        "{command}"
    );

    // An upgrade whose lookup sees no ledger (deleted, or a client-side dry run like this):
    // every pre-apply slug is pending, and the Job refuses an absent ledger in the cluster.
    let upgrade = template(&["--is-upgrade"]);
    assert!(
        !upgrade.iter().any(|o| o["metadata"]["name"] == LEDGER),
        "the ledger is never rendered on an upgrade"
    );
    let jobs = find(&upgrade, "Job");
    assert_eq!(jobs.len(), 1);
    let job = jobs[0];
    assert_eq!(
        job["metadata"]["annotations"]["helm.sh/hook"],
        "pre-upgrade"
    );
    assert_eq!(
        job["metadata"]["annotations"]["migrations.cozystack.io/pending"],
        "drop-legacy-monitoring,etcd-crds-precreate,flux-crds-relabel,\
         postgres-hand-over-to-tenant-release,redis-failover-group-label,\
         seaweedfs-bucket-owner,tenant-namespace-labels"
    );
    let command = common::strings(&job["spec"]["template"]["spec"]["containers"][0]["command"]);
    assert_eq!(
        command,
        [
            "migrate",
            "run",
            "/migrations",
            "--tier",
            "pre-apply",
            "--ledger",
            "configmap:cozy-system/cozystack-version",
            "--require-existing-ledger",
            "--timeout",
            "900"
        ]
    );
}

/// A release's tree: `a` (pre-apply) and `b` (background) in v1, `c` (pre-apply) added in
/// v2, `d` (background) in v3.
fn release_tree(version: u32) -> ScratchTree {
    let mut builder = TreeBuilder::new();
    let mut batches = vec![("00001-v1.0.0", "a\nb\n")];
    let scripts = [
        (Tier::PreApply, "a", 1),
        (Tier::Background, "b", 1),
        (Tier::PreApply, "c", 2),
        (Tier::Background, "d", 3),
    ];
    for (tier, slug, since) in scripts {
        if since <= version {
            builder = builder.script_with(tier, slug, OnError::Abort, &[], "echo ran");
        }
    }
    if version >= 2 {
        batches.push(("00002-v2.0.0", "c\n"));
    }
    if version >= 3 {
        batches.push(("00003-v3.0.0", "d\n"));
    }
    builder.manifest(&batches).scratch()
}

/// The chart with files/ rendered from `tree`: what a release cut ships.
fn chart_for(tree: &Path, at: &str, into: &Path) -> PathBuf {
    let chart = into.join("chart");
    for rel in ["Chart.yaml", "values.yaml", ".helmignore"] {
        std::fs::create_dir_all(&chart).unwrap();
        std::fs::copy(Path::new(CHART).join(rel), chart.join(rel)).unwrap();
    }
    std::fs::create_dir_all(chart.join("templates")).unwrap();
    for entry in std::fs::read_dir(Path::new(CHART).join("templates")).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(
            entry.path(),
            chart.join("templates").join(entry.file_name()),
        )
        .unwrap();
    }
    render_files(tree, &values_image(), at, &chart.join("files"));
    chart
}

fn get_json(cluster: &RealCluster, args: &[&str]) -> Value {
    let mut kubectl = cluster.kubectl();
    kubectl.args(args).args(["-o", "json"]);
    serde_json::from_str(&run(kubectl)).unwrap()
}

fn jobs(cluster: &RealCluster, ns: &str) -> Vec<Value> {
    get_json(cluster, &["get", "jobs", "-n", ns])["items"]
        .as_array()
        .unwrap()
        .clone()
}

pub(crate) fn ledger_data(cluster: &RealCluster, ns: &str) -> Value {
    get_json(cluster, &["get", "configmap", LEDGER, "-n", ns])["data"].clone()
}

fn entry_state(data: &Value, slug: &str) -> String {
    let entry: Value = serde_json::from_str(data[format!("m.{slug}")].as_str().unwrap()).unwrap();
    // The compact form's state (`s`), or the full form's.
    entry["s"]
        .as_str()
        .or(entry["state"].as_str())
        .unwrap()
        .to_owned()
}

/// `helm VERB RELEASE CHART --namespace NS --timeout TIMEOUT`: an install
/// or an upgrade of the chart.
pub(crate) fn helm_release(
    cluster: &RealCluster,
    verb: &str,
    release: &str,
    chart: &Path,
    ns: &str,
    timeout: &str,
) -> Command {
    let mut helm = cluster.helm();
    helm.args([verb, release, chart.to_str().unwrap()]).args([
        "--namespace",
        ns,
        "--timeout",
        timeout,
    ]);
    helm
}

pub(crate) fn helm_upgrade(
    cluster: &RealCluster,
    release: &str,
    chart: &Path,
    ns: &str,
) -> Command {
    helm_release(cluster, "upgrade", release, chart, ns, "120s")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs MIGRATE_TEST_KUBECONFIG (examples/kube-testenv)"]
async fn installing_and_upgrading_the_chart_runs_the_hook_only_when_pre_apply_slugs_are_pending() {
    let (cluster, ns) = test_apiserver::or_skip!(
        real_cluster_in("helm install and upgrade of examples/chart", "chart").await
    );
    let release = unique_name("mig");
    let at = "2026-12-01T00:00:00Z";
    let work = tempfile::tempdir().unwrap();
    let trees: Vec<ScratchTree> = (1..=3).map(release_tree).collect();
    let charts: Vec<PathBuf> = trees
        .iter()
        .enumerate()
        .map(|(i, t)| chart_for(&t.root(), at, &work.path().join(format!("v{}", i + 1))))
        .collect();

    // Install: the ledger is created seeded, equal to seed-fresh --render; no hook Job.
    let mut install = helm_release(&cluster, "install", &release, &charts[0], &ns, "60s");
    install.args(["--set-string", "ledger.labels.owner=platform"]);
    run(install);
    let cm = get_json(&cluster, &["get", "configmap", LEDGER, "-n", &ns]);
    assert_eq!(cm["data"], seed_fresh_render(&trees[0].root(), at));
    assert_eq!(cm["metadata"]["labels"]["owner"], "platform");
    assert_eq!(
        cm["metadata"]["annotations"]["helm.sh/resource-policy"],
        "keep"
    );
    assert!(jobs(&cluster, &ns).is_empty(), "a hook Job at install");

    // Upgrade to v2, which ships pre-apply `c`: Helm creates the hook Job and waits for it.
    let mut upgrade = helm_upgrade(&cluster, &release, &charts[1], &ns)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(90);
    let job = loop {
        if let Some(job) = jobs(&cluster, &ns).into_iter().next() {
            break job;
        }
        if let Ok(Some(status)) = upgrade.try_wait() {
            panic!("helm upgrade ended ({status}) without creating the hook Job");
        }
        assert!(Instant::now() < deadline, "no hook Job within 90 s");
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    let name = job["metadata"]["name"].as_str().unwrap().to_owned();
    assert_eq!(
        job["metadata"]["annotations"]["migrations.cozystack.io/pending"],
        "c"
    );
    let command = common::strings(&job["spec"]["template"]["spec"]["containers"][0]["command"]);
    assert!(
        command.contains(&"--require-existing-ledger"),
        "{command:?}"
    );
    let spec = format!("configmap:{ns}/{LEDGER}");
    assert!(command.contains(&spec.as_str()), "{command:?}");

    // What the Job's pod does, then what the Job controller would write.
    let mut migrate = common::migrate();
    migrate
        .args(["run", trees[1].root().to_str().unwrap(), "--ledger", &spec])
        .args([
            "--tier",
            "pre-apply",
            "--require-existing-ledger",
            "--output",
            "json",
        ])
        .env("KUBECONFIG", cluster.kubeconfig())
        .env_remove("KUBERNETES_SERVICE_HOST");
    let (code, report, err) = common::parse(migrate.output().unwrap());
    assert_eq!(code, 0, "{err}");
    assert_eq!(common::fields(&report["results"], "slug"), ["c"]);
    complete_hook_job(&cluster, &ns, &name, upgrade);
    let data = ledger_data(&cluster, &ns);
    assert_eq!(entry_state(&data, "c"), "ok");
    assert_eq!(entry_state(&data, "a"), "skipped-fresh-install");
    let uid = job["metadata"]["uid"].clone();

    // The same release again (nothing pending), then v3 (only background `d` new): no Job.
    for chart in [&charts[1], &charts[2]] {
        run(helm_upgrade(&cluster, &release, chart, &ns));
        let now: Vec<Value> = jobs(&cluster, &ns)
            .into_iter()
            .map(|j| j["metadata"]["uid"].clone())
            .collect();
        assert_eq!(
            now,
            std::slice::from_ref(&uid),
            "a hook Job with no pre-apply slug pending"
        );
    }
    // Left out of the upgraded releases' manifests, the ledger was kept.
    let data = ledger_data(&cluster, &ns);
    assert_eq!(entry_state(&data, "c"), "ok");

    // Rolling back to the install revision would apply its seeded ledger again: Helm refuses
    // (the ConfigMap left the release), and the ledger stays as it is.
    let mut rollback = cluster.helm();
    rollback.args(["rollback", &release, "1", "--namespace", &ns]);
    let out = rollback.output().unwrap();
    assert!(
        !out.status.success(),
        "helm rollback to the install revision succeeded"
    );
    assert_eq!(
        ledger_data(&cluster, &ns),
        data,
        "a rollback changed the ledger"
    );

    // Uninstall leaves the ledger.
    let mut uninstall = cluster.helm();
    uninstall.args(["uninstall", &release, "--namespace", &ns]);
    run(uninstall);
    let data = ledger_data(&cluster, &ns);
    assert_eq!(entry_state(&data, "c"), "ok");
    assert_eq!(entry_state(&data, "b"), "skipped-fresh-install");

    // Installing again over the kept ledger is not a fresh install: the ledger is not
    // rendered (nothing overwrites it), and with nothing pre-apply pending there is no hook.
    run(helm_release(
        &cluster, "install", &release, &charts[2], &ns, "60s",
    ));
    assert_eq!(
        ledger_data(&cluster, &ns),
        data,
        "a reinstall changed the ledger"
    );
    let mut manifest = cluster.helm();
    manifest.args(["get", "manifest", &release, "--namespace", &ns]);
    let manifest = objects(&cluster, &run(manifest));
    assert!(
        !manifest.iter().any(|o| o["metadata"]["name"] == LEDGER),
        "a reinstall over an existing ledger rendered it"
    );
    let mut uninstall = cluster.helm();
    uninstall.args(["uninstall", &release, "--namespace", &ns]);
    run(uninstall);
}
