//! The main job end to end against a real API server (`MIGRATE_TEST_KUBECONFIG`; see
//! `test_apiserver::real`): the demo tree's release history and manifest as
//! `examples/run-demo.sh` builds them, the real `migrate run` with the real `kubectl`
//! (`MIGRATE_TEST_KUBECTL`) doing what the demo scripts do to real objects, the ledger in a real
//! ConfigMap of an old cluster (legacy version 44), then a second run with nothing pending.
//! Unset, the test prints that it skipped.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::Api;
use kube::api::PostParams;
use serde_json::{Value, json};
use test_apiserver::real::{RealCluster, unique_name};

/// What the demo's scripts act on: two tenants with the objects the chart hands over, the Flux
/// and operator CRDs, and the legacy monitoring namespace (a fixture: data, not code).
const CLUSTER_CRDS: &str = include_str!("../fixtures/real-cluster-objects.yaml");

/// Per tenant, once the CRDs are served. (No controller-manager runs, so the `default`
/// ServiceAccount that pods need is created here.)
fn tenant_objects(ns: &str) -> String {
    format!(
        r#"
apiVersion: v1
kind: ServiceAccount
metadata: {{name: default, namespace: {ns}}}
---
apiVersion: v1
kind: Pod
metadata: {{name: redis-0, namespace: {ns}, labels: {{app: redis-failover}}}}
spec:
  containers: [{{name: redis, image: redis}}]
---
apiVersion: postgresql.cnpg.io/v1
kind: Cluster
metadata: {{name: postgres, namespace: {ns}}}
spec: {{instances: 1}}
---
apiVersion: s3.seaweedfs.example/v1
kind: Bucket
metadata: {{name: seaweedfs, namespace: {ns}}}
spec: {{}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: grafana, namespace: {ns}}}
spec:
  selector: {{matchLabels: {{app: grafana}}}}
  template:
    metadata: {{labels: {{app: grafana}}}}
    spec:
      containers: [{{name: grafana, image: grafana/grafana}}]
"#
    )
}

fn migrate(cluster: &RealCluster, args: &[&str]) -> (i32, Value, String) {
    let kubectl = std::env::var(test_apiserver::real::KUBECTL_VAR).unwrap_or("kubectl".into());
    let out = common::migrate()
        .args(args)
        .args(["--output", "json"])
        .env("KUBECONFIG", cluster.kubeconfig())
        .env("KUBECTL", kubectl)
        .env(
            "MIGRATION_IMAGE",
            "ghcr.io/example/platform-migrations@sha256:0000000000000000000000000000000000000000000000000000000000000000",
        )
        .env_remove("KUBERNETES_SERVICE_HOST")
        .output()
        .unwrap();
    common::parse(out)
}

fn outcomes(doc: &Value) -> Vec<(String, String)> {
    common::field_pairs(&doc["results"], "slug", "outcome")
}

/// `jsonpath` of a namespaced object, through kubectl.
fn get(cluster: &RealCluster, args: &[&str], jsonpath: &str) -> String {
    let mut all = vec!["get"];
    all.extend_from_slice(args);
    let output = format!("jsonpath={jsonpath}");
    all.extend(["-o", &output]);
    kubectl(cluster, &all, None)
}

/// Runs kubectl (with `stdin`), panicking unless it succeeds; its stdout alone (a warning on
/// stderr is no part of a value read back).
fn kubectl(cluster: &RealCluster, args: &[&str], stdin: Option<&str>) -> String {
    let out = cluster.kubectl_with_stdin(args, stdin.unwrap_or_default());
    test_apiserver::real::succeeded(&format!("kubectl {args:?}"), &out);
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Plays the namespace controller, which a test environment does not run: a namespace being
/// deleted is finalized (`PUT …/finalize` without finalizers), so the API server removes it
/// and `kubectl delete namespace` (which waits for that) returns.
fn namespace_finalizer(cluster: &RealCluster) -> tokio::task::JoinHandle<()> {
    let client = cluster.client();
    tokio::spawn(async move {
        let namespaces: Api<Namespace> = Api::all(client.clone());
        loop {
            for ns in namespaces
                .list(&Default::default())
                .await
                .into_iter()
                .flat_map(|l| l.items)
            {
                let Some(name) = ns.metadata.name.clone() else {
                    continue;
                };
                if ns.metadata.deletion_timestamp.is_none() {
                    continue;
                }
                let body = json!({"apiVersion": "v1", "kind": "Namespace",
                    "metadata": {"name": name}, "spec": {"finalizers": []}});
                let finalize = http::Request::put(format!("/api/v1/namespaces/{name}/finalize"))
                    .header(http::header::CONTENT_TYPE, "application/json")
                    .body(serde_json::to_vec(&body).unwrap())
                    .unwrap();
                let _ = client.request_text(finalize).await;
            }
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs MIGRATE_TEST_KUBECONFIG (examples/kube-testenv)"]
async fn the_demo_tree_runs_against_a_real_server_then_nothing_is_pending() {
    let cluster = test_apiserver::or_skip!(RealCluster::from_env("the main job end to end").await);
    // The cluster the scripts act on (after an earlier run's deletion has finished).
    let finalizer = namespace_finalizer(&cluster);
    let namespaces: Api<Namespace> = Api::all(cluster.client());
    for _ in 0..100 {
        let legacy = namespaces.get_opt("monitoring-legacy").await.unwrap();
        if legacy.is_none_or(|n| n.metadata.deletion_timestamp.is_none()) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    kubectl(&cluster, &["apply", "-f", "-"], Some(CLUSTER_CRDS));
    kubectl(
        &cluster,
        &[
            "wait",
            "--for=condition=Established",
            "--timeout=60s",
            "crd/helmreleases.helm.toolkit.fluxcd.io",
            "crd/clusters.postgresql.cnpg.io",
            "crd/buckets.s3.seaweedfs.example",
        ],
        None,
    );
    for tenant in ["tenant-a", "tenant-b"] {
        kubectl(
            &cluster,
            &["apply", "-f", "-"],
            Some(&tenant_objects(tenant)),
        );
    }
    // An old cluster's ledger: the ConfigMap the chart created, legacy version 44.
    let ns = unique_name("e2e");
    cluster.ensure_namespace(&ns).await;
    let cms: Api<ConfigMap> = Api::namespaced(cluster.client(), &ns);
    let ledger: ConfigMap = serde_json::from_value(
        json!({"metadata": {"name": "cozystack-version"}, "data": {"version": "44"}}),
    )
    .unwrap();
    cms.create(&PostParams::default(), &ledger).await.unwrap();
    let spec = format!("configmap:{ns}/cozystack-version");

    let repo = common::Repo::demo();
    let tree = repo.tree();
    let tree = tree.to_str().unwrap();
    let (code, pre, stderr) = tokio::task::block_in_place(|| {
        migrate(
            &cluster,
            &["run", tree, "--ledger", &spec, "--tier", "pre-apply"],
        )
    });
    assert_eq!(code, 0, "{pre:#}\n{stderr}");
    let ran = outcomes(&pre);
    assert!(!ran.is_empty(), "an upgrade from version 44 runs something");
    assert!(ran.iter().all(|(_, o)| o == "ok"), "{ran:?}\n{stderr}");
    let (code, background, stderr) = tokio::task::block_in_place(|| {
        migrate(
            &cluster,
            &["run", tree, "--ledger", &spec, "--tier", "background"],
        )
    });
    assert_eq!(code, 0, "{background:#}\n{stderr}");
    assert_eq!(
        outcomes(&background),
        [("reindex-tenant-dashboards".to_owned(), "ok".to_owned())]
    );

    // What the scripts did, seen on the real server.
    let slugs: Vec<&str> = ran.iter().map(|(s, _)| s.as_str()).collect();
    for tenant in ["tenant-a", "tenant-b"] {
        if slugs.contains(&"tenant-namespace-labels") {
            let label = get(
                &cluster,
                &["namespace", tenant],
                "{.metadata.labels.cozystack\\.io/tenant}",
            );
            assert_eq!(label, tenant);
        }
        if slugs.contains(&"seaweedfs-bucket-owner") {
            let owner = get(
                &cluster,
                &["-n", tenant, "bucket", "seaweedfs"],
                "{.metadata.annotations.meta\\.helm\\.sh/release-name}",
            );
            assert_eq!(
                owner,
                format!("seaweedfs-{tenant}"),
                "adopted by the tenant's release"
            );
        }
        assert!(
            slugs.contains(&"postgres-hand-over-to-tenant-release"),
            "{slugs:?}"
        );
        let owner = get(
            &cluster,
            &["-n", tenant, "cluster.postgresql.cnpg.io", "postgres"],
            "{.metadata.annotations.meta\\.helm\\.sh/release-name}",
        );
        assert_eq!(owner, format!("postgres-{tenant}"));
        assert!(slugs.contains(&"redis-failover-group-label"), "{slugs:?}");
        let group = get(
            &cluster,
            &["-n", tenant, "pod", "redis-0"],
            "{.metadata.labels.redis-failover-group}",
        );
        assert_eq!(group, tenant);
        let restarted = get(
            &cluster,
            &["-n", tenant, "deployment", "grafana"],
            "{.spec.template.metadata.annotations.kubectl\\.kubernetes\\.io/restartedAt}",
        );
        assert!(!restarted.is_empty(), "rollout restart of {tenant}/grafana");
    }
    if slugs.contains(&"etcd-crds-precreate") {
        kubectl(
            &cluster,
            &["get", "crd", "etcdclusters.etcd.aenix.io"],
            None,
        );
    }
    if slugs.contains(&"drop-legacy-monitoring") {
        let gone = namespaces.get_opt("monitoring-legacy").await.unwrap();
        assert!(gone.is_none(), "monitoring-legacy is deleted: {gone:?}");
    }

    // The ledger: every shipped migration recorded in the real ConfigMap.
    let data = cms.get("cozystack-version").await.unwrap().data.unwrap();
    assert_eq!(data["version"], "44", "the legacy integer is never written");
    for (slug, _) in ran.iter().chain(&outcomes(&background)) {
        assert!(data.contains_key(&format!("m.{slug}")), "{slug}: {data:?}");
    }

    // The second run: nothing pending, nothing run.
    for tier in ["pre-apply", "background"] {
        let (code, again, stderr) = tokio::task::block_in_place(|| {
            migrate(&cluster, &["run", tree, "--ledger", &spec, "--tier", tier])
        });
        assert_eq!(code, 0, "{again:#}\n{stderr}");
        assert_eq!(again["pending"], 0, "{tier}: {again:#}");
        assert!(outcomes(&again).is_empty(), "{tier}: {again:#}");
    }
    let (code, status, _) =
        tokio::task::block_in_place(|| migrate(&cluster, &["status", "--ledger", &spec]));
    assert_eq!(code, 0, "{status:#}");
    eprintln!("status after the second run: {}", status["counts"]);
    let recorded = ran.len() + 1;
    assert!(
        status["counts"]["ok"].as_u64().unwrap() as usize >= recorded,
        "{status:#}"
    );
    assert!(status["counts"].get("failed").is_none(), "{status:#}");

    finalizer.abort();
}
