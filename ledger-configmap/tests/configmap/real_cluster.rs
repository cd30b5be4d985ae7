//! The real-server lane: the conformance suite and the ConfigMap backend's own behaviours
//! against a real API server. Set `MIGRATE_TEST_KUBECONFIG` to a kubeconfig (and optionally
//! `MIGRATE_TEST_NAMESPACE`, default `default`, and `MIGRATE_TEST_KUBECTL`, the kubectl to run);
//! `examples/kube-testenv/testenv.sh start` provides one. Each test uses its own ConfigMap and
//! Lease and deletes them afterwards. Unset, every test prints that it skipped.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};
use kube_ledger_testing::output_tails::{self, Scope, Subject, ledger_reader};
use kube_ledger_testing::real_lane::{LaneBackend, LaneCase, run_lane};
use ledger_configmap::{CONFIGMAP_BUDGET_BYTES, ConfigMapLedger, Options, configmap_size};
use migration_core::testing::{sample_entry, slug};
use migration_core::{EntryState, Ledger, LedgerEntry, LedgerError, Lock, LockedLedger, WriteMode};
use serde_json::json;
use test_apiserver::or_skip;
use test_apiserver::real::{RealCluster, unique_name};

/// The ConfigMap backend on the conformance lane.
struct ConfigMaps;

#[async_trait]
impl LaneBackend for ConfigMaps {
    fn ledger(&self, case: &LaneCase) -> Arc<dyn LockedLedger> {
        Arc::new(ConfigMapLedger::with_options(
            case.client.clone(),
            &case.namespace,
            &case.name,
            Options {
                clock: case.clock.clone(),
                ..Options::default()
            },
        ))
    }
    async fn plant_raw(&self, case: &LaneCase, key: &str, value: &str) {
        let api: Api<ConfigMap> = Api::namespaced(case.client.clone(), &case.namespace);
        let patch = serde_json::json!({"data": {key: value}});
        api.patch(&case.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap();
    }
    async fn raw(&self, case: &LaneCase, key: &str) -> Option<String> {
        let api: Api<ConfigMap> = Api::namespaced(case.client.clone(), &case.namespace);
        api.get_opt(&case.name)
            .await
            .unwrap()?
            .data?
            .get(key)
            .cloned()
    }
    fn budget_bytes(&self) -> u64 {
        CONFIGMAP_BUDGET_BYTES
    }
}

kube_ledger_testing::real_cluster_lane_test!("ConfigMap conformance lane", lane);

/// The lane itself, also exercised against the test API server below so
/// that its own code cannot rot while nobody has a cluster at hand.
async fn lane(client: Client, namespace: &str) {
    let objects = Api::<ConfigMap>::namespaced(client.clone(), namespace);
    run_lane(ConfigMaps, "ledger", client, namespace, objects).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lane_runs_every_case_and_cleans_up_against_the_test_server() {
    let server = test_apiserver::TestApiServer::start().await;
    lane(server.client(), "lane").await;
    assert!(
        server.objects("configmaps").is_empty(),
        "the lane deletes what it made"
    );
    assert!(server.objects("leases").is_empty());
}

// ------------------------------------------------------------------ the backend's own tests

/// One test's ConfigMap (and its Lease) on the real cluster, deleted by [`Fixture::cleanup`],
/// which every test calls last. A failed test leaves them behind for inspection; the test
/// environment is thrown away with its etcd data.
struct Fixture {
    cluster: RealCluster,
    name: String,
}

impl Fixture {
    async fn new(what: &str, prefix: &str) -> Option<Self> {
        let cluster = RealCluster::from_env(what).await?;
        Some(Self {
            cluster,
            name: unique_name(prefix),
        })
    }

    fn api(&self) -> Api<ConfigMap> {
        Api::namespaced(self.cluster.client(), self.cluster.namespace())
    }

    fn ledger_with(&self, options: Options) -> ConfigMapLedger {
        ConfigMapLedger::with_options(
            self.cluster.client(),
            self.cluster.namespace(),
            &self.name,
            options,
        )
    }

    fn ledger(&self) -> ConfigMapLedger {
        self.ledger_with(Options::default())
    }

    async fn create(&self, labels: serde_json::Value, data: serde_json::Value) -> ConfigMap {
        let cm: ConfigMap = serde_json::from_value(json!({
            "metadata": {"name": self.name, "labels": labels},
            "data": data,
        }))
        .unwrap();
        self.api()
            .create(&PostParams::default(), &cm)
            .await
            .unwrap()
    }

    async fn stored(&self) -> ConfigMap {
        self.api().get(&self.name).await.unwrap()
    }

    async fn data(&self) -> BTreeMap<String, String> {
        self.stored().await.data.unwrap_or_default()
    }

    /// Runs `kubectl apply <args>` with `manifest` on stdin; panics with its output unless it
    /// succeeds.
    fn kubectl_apply(&self, args: &[&str], manifest: &serde_json::Value) -> String {
        let namespace = self.cluster.namespace();
        let apply = [&["apply", "-n", namespace, "-f", "-"], args].concat();
        self.cluster.kubectl_ok(&apply, &manifest.to_string())
    }

    /// The chart's first apply (`kubectl apply <args>` of `version: 45`), then the engine's
    /// records ([`record_some`]); returns the ledger that wrote them.
    async fn applied_and_recorded(&self, args: &[&str]) -> ConfigMapLedger {
        self.kubectl_apply(args, &self.manifest(json!({"version": "45"})));
        let l = self.ledger();
        record_some(&l).await;
        l
    }

    fn manifest(&self, data: serde_json::Value) -> serde_json::Value {
        json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": self.name, "namespace": self.cluster.namespace()},
            "data": data,
        })
    }

    /// The hazard of applying a ledger key: once `m.s-0` was in an applied manifest, the next
    /// apply without it deleted it; `m.s-1`, never applied, stays.
    async fn assert_pruned_the_applied_ledger_key_only(&self) {
        let data = self.data().await;
        assert!(
            !data.contains_key("m.s-0"),
            "the hazard: a key once in the applied manifest is pruned: {data:?}"
        );
        assert!(
            data.contains_key("m.s-1"),
            "keys never applied stay: {data:?}"
        );
    }

    async fn cleanup(self) {
        self.cluster.delete_with_lock(&self.api(), &self.name).await;
    }
}

fn ledger_keys(data: &BTreeMap<String, String>) -> Vec<&str> {
    data.keys()
        .map(String::as_str)
        .filter(|k| k.starts_with("m.") || k.starts_with("a."))
        .collect()
}

/// Five entries and two attempt marks: the keys the apply tests must never lose.
async fn record_some(ledger: &ConfigMapLedger) {
    let entries: Vec<_> = (0..5)
        .map(|n| (slug(n), sample_entry(EntryState::Ok, n as u32)))
        .collect();
    ledger
        .write(&entries, WriteMode::OnlyIfAbsent)
        .await
        .unwrap();
    ledger.note_attempt(&slug(5), "t-5", 0).await.unwrap();
    ledger.note_attempt(&slug(6), "t-6", 0).await.unwrap();
}

/// `kubectl apply` as a chart's server-side apply: its own field manager.
const CHART_SSA: [&str; 3] = ["--server-side", "--field-manager", "chart"];

const OUR_KEYS: [&str; 7] = [
    "a.s-5", "a.s-6", "m.s-0", "m.s-1", "m.s-2", "m.s-3", "m.s-4",
];

#[tokio::test]
#[ignore = "needs MIGRATE_TEST_KUBECONFIG (examples/kube-testenv)"]
async fn a_client_side_kubectl_apply_of_version_leaves_every_ledger_key_in_place() {
    let f = or_skip!(Fixture::new("client-side kubectl apply", "csa").await);
    // The chart creates the ConfigMap with kubectl apply: `version` only.
    let l = f.applied_and_recorded(&[]).await;
    // A later release applies version 46; another drops the key altogether.
    f.kubectl_apply(&[], &f.manifest(json!({"version": "46"})));
    assert_eq!(ledger_keys(&f.data().await), OUR_KEYS);
    assert_eq!(f.data().await["version"], "46");
    f.kubectl_apply(&[], &f.manifest(json!({"note": "x"})));
    let data = f.data().await;
    assert_eq!(ledger_keys(&data), OUR_KEYS, "every m.*/a.* key survives");
    assert!(
        !data.contains_key("version"),
        "the apply pruned the key it had applied before (the control: pruning is real)"
    );
    assert_eq!(l.read().await.unwrap().unwrap().records.len(), 5);
    f.cleanup().await;
}

#[tokio::test]
#[ignore = "needs MIGRATE_TEST_KUBECONFIG (examples/kube-testenv)"]
async fn a_client_side_kubectl_apply_prunes_ledger_keys_once_they_are_in_its_manifest() {
    let f = or_skip!(Fixture::new("client-side kubectl apply hazard", "csa-hazard").await);
    f.applied_and_recorded(&[]).await;
    // A chart that (wrongly) renders a ledger key: the key enters last-applied-configuration...
    let entry = f.data().await["m.s-0"].clone();
    f.kubectl_apply(&[], &f.manifest(json!({"version": "46", "m.s-0": entry})));
    // ... and the next apply without it deletes the entry.
    f.kubectl_apply(&[], &f.manifest(json!({"version": "47"})));
    f.assert_pruned_the_applied_ledger_key_only().await;
    f.cleanup().await;
}

#[tokio::test]
#[ignore = "needs MIGRATE_TEST_KUBECONFIG (examples/kube-testenv)"]
async fn a_server_side_kubectl_apply_of_version_leaves_every_ledger_key_in_place() {
    let f = or_skip!(Fixture::new("server-side kubectl apply", "ssa").await);
    f.applied_and_recorded(&CHART_SSA).await;
    f.kubectl_apply(&CHART_SSA, &f.manifest(json!({"version": "46"})));
    assert_eq!(ledger_keys(&f.data().await), OUR_KEYS);
    f.kubectl_apply(&CHART_SSA, &f.manifest(json!({"note": "x"})));
    let data = f.data().await;
    assert_eq!(ledger_keys(&data), OUR_KEYS, "every m.*/a.* key survives");
    assert!(
        !data.contains_key("version"),
        "the apply pruned the field only it owned (the control: pruning is real)"
    );
    // The ownership that protects them: our merge patches made cozystack-migrate their manager.
    let managers: Vec<_> = f
        .stored()
        .await
        .metadata
        .managed_fields
        .unwrap_or_default()
        .into_iter()
        .map(|m| {
            (
                m.manager.unwrap_or_default(),
                m.operation.unwrap_or_default(),
            )
        })
        .collect();
    assert!(
        managers.contains(&("cozystack-migrate".into(), "Update".into())),
        "{managers:?}"
    );
    f.cleanup().await;
}

#[tokio::test]
#[ignore = "needs MIGRATE_TEST_KUBECONFIG (examples/kube-testenv)"]
async fn a_server_side_kubectl_apply_that_takes_a_ledger_key_by_force_prunes_it_later() {
    let f = or_skip!(Fixture::new("server-side kubectl apply hazard", "ssa-hazard").await);
    f.applied_and_recorded(&CHART_SSA).await;
    // Applying our key with another value conflicts with our ownership: the real server refuses
    // unless forced.
    let manifest = f.manifest(json!({"version": "46", "m.s-0": "{}"}));
    let conflict = f.cluster.kubectl_with_stdin(
        &[
            "apply",
            "--server-side",
            "--field-manager",
            "chart",
            "-f",
            "-",
        ],
        &manifest.to_string(),
    );
    let text = String::from_utf8_lossy(&conflict.stderr);
    assert!(
        !conflict.status.success() && text.contains("conflict"),
        "{text}"
    );
    assert!(
        text.contains("cozystack-migrate"),
        "names our manager: {text}"
    );
    // Forced, the chart takes the key over, and its next apply without the key deletes it.
    let forced = [
        "--server-side",
        "--field-manager",
        "chart",
        "--force-conflicts",
    ];
    f.kubectl_apply(
        &forced,
        &f.manifest(json!({"version": "46", "m.s-0": "{}"})),
    );
    f.kubectl_apply(&CHART_SSA, &f.manifest(json!({"version": "47"})));
    f.assert_pruned_the_applied_ledger_key_only().await;
    f.cleanup().await;
}

#[tokio::test]
#[ignore = "needs MIGRATE_TEST_KUBECONFIG (examples/kube-testenv)"]
async fn writes_keep_labels_and_foreign_keys_on_a_real_server() {
    let f = or_skip!(Fixture::new("ConfigMap writes keep foreign data", "keep").await);
    f.create(
        json!({"platform.cozystack.io/no-delete": "true"}),
        json!({"version": "45", "owner-note": "hands off"}),
    )
    .await;
    let l = f.ledger();
    common::write_beside_foreign_data(&l).await;
    let cm = f.stored().await;
    assert_eq!(
        cm.metadata.labels.unwrap()["platform.cozystack.io/no-delete"],
        "true"
    );
    let data = cm.data.unwrap();
    assert_eq!(data["version"], "45");
    assert_eq!(data["owner-note"], "hands off");
    common::assert_written_beside_foreign_data(data.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    f.cleanup().await;
}

#[tokio::test]
#[ignore = "needs MIGRATE_TEST_KUBECONFIG (examples/kube-testenv)"]
async fn a_chart_created_configmap_with_only_version_is_an_old_cluster_on_a_real_server() {
    let f = or_skip!(Fixture::new("chart-created ConfigMap", "chart").await);
    f.create(json!({}), json!({"version": "12"})).await;
    let snapshot = f.ledger().read().await.unwrap().expect("it exists");
    assert_eq!(snapshot.version, migration_core::LegacyVersion::Known(12));
    assert!(snapshot.records.is_empty());
    f.cleanup().await;
}

#[tokio::test]
#[ignore = "needs MIGRATE_TEST_KUBECONFIG (examples/kube-testenv)"]
async fn ten_thousand_keys_with_one_corrupt_read_as_exactly_one_corrupt_on_a_real_server() {
    let f = or_skip!(Fixture::new("ten thousand keys", "tenk").await);
    f.create(json!({}), common::ten_thousand_keys_one_corrupt())
        .await;
    let snapshot = f.ledger().read().await.unwrap().unwrap();
    assert_eq!(snapshot.records.len(), 10_000);
    assert_eq!(
        migration_core::testing::corrupt_keys(&snapshot),
        [("k4242".to_owned(), "m.k4242".to_owned())]
    );
    f.cleanup().await;
}

/// An entry whose key and value take exactly `bytes` in the ConfigMap.
fn entry_of_size(n: usize, bytes: usize) -> (migration_core::Slug, LedgerEntry) {
    // No shared fields: the entry's key and value are all it stores. `ok`: its message stays
    // in the entry (a failure's output tail goes to the Secret, CONTRACT.md §5.2).
    let mut entry = LedgerEntry {
        batch: None,
        image: None,
        ..sample_entry(EntryState::Ok, n as u32)
    };
    entry.message = Some(String::new());
    let size = |e: &LedgerEntry| {
        migration_core::keys::entry_key(slug(n)).len() + e.encode_compact(None).len()
    };
    let overhead = size(&entry);
    entry.message = Some("x".repeat(bytes - overhead));
    assert_eq!(size(&entry), bytes);
    (slug(n), entry)
}

/// What the real server counts against its 1 MiB limit: the values of `data` and `binaryData`,
/// not the keys (`ValidateConfigMap` in Kubernetes 1.34).
fn server_counted_bytes(cm: &ConfigMap) -> usize {
    cm.data
        .iter()
        .flatten()
        .map(|(_, v)| v.len())
        .sum::<usize>()
        + cm.binary_data
            .iter()
            .flatten()
            .map(|(_, v)| v.0.len())
            .sum::<usize>()
}

#[tokio::test]
#[ignore = "needs MIGRATE_TEST_KUBECONFIG (examples/kube-testenv)"]
async fn the_budget_counts_keys_too_so_it_refuses_before_the_real_one_mebibyte_limit() {
    let f = or_skip!(Fixture::new("the 1 MiB ConfigMap limit", "mib").await);
    let created = f.create(json!({}), json!({"version": "45"})).await;
    let room = CONFIGMAP_BUDGET_BYTES as usize - configmap_size(&created) as usize;
    // One byte over our budget: refused before sending (nothing stored, resourceVersion kept).
    let err = f
        .ledger()
        .write(&[entry_of_size(1, room + 1)], WriteMode::Replace)
        .await
        .unwrap_err();
    assert!(matches!(err, LedgerError::Full { .. }), "{err:?}");
    assert_eq!(
        f.stored().await.metadata.resource_version,
        created.metadata.resource_version
    );
    // Exactly at our budget (keys plus values): the real server accepts it.
    f.ledger()
        .write(&[entry_of_size(1, room)], WriteMode::Replace)
        .await
        .unwrap();
    let full = f.stored().await;
    assert_eq!(configmap_size(&full), CONFIGMAP_BUDGET_BYTES);
    // The real server counts values only, so it would take the key bytes more. With our budget
    // out of the way: values of exactly 1 MiB are accepted...
    let unbudgeted = f.ledger_with(Options {
        budget: u64::MAX,
        ..Options::default()
    });
    let key_bytes = configmap_size(&full) as usize - server_counted_bytes(&full);
    unbudgeted
        .write(&[entry_of_size(1, room + key_bytes)], WriteMode::Replace)
        .await
        .unwrap();
    assert_eq!(server_counted_bytes(&f.stored().await), 1024 * 1024);
    // ... and one byte more is the real server's 422 Invalid "Too long", which the backend
    // reports as a permanent error (not Full: that is only its own pre-check) carrying the
    // server's answer.
    let err = unbudgeted
        .write(
            &[entry_of_size(1, room + key_bytes + 1)],
            WriteMode::Replace,
        )
        .await
        .unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, LedgerError::Permanent { .. }), "{err:?}");
    assert!(
        text.contains(&format!(
            "422 Invalid (ConfigMap \"{}\" is invalid: []: Too long: may not be more than 1048576 bytes)",
            f.name
        )),
        "{text}"
    );
    f.cleanup().await;
}

#[tokio::test]
#[ignore = "needs MIGRATE_TEST_KUBECONFIG (examples/kube-testenv)"]
async fn an_expired_lock_is_taken_over_and_the_old_holder_cannot_release_it() {
    let f = or_skip!(Fixture::new("run lock take-over after expiry", "lease").await);
    // Wall-clock expiry, no manual clock: the lock really lapses.
    f.create(json!({}), json!({"version": "45"})).await;
    let l = f.ledger();
    let first = l.acquire("runner-a", Duration::from_secs(1)).await.unwrap();
    let held = l
        .acquire("runner-b", Duration::from_secs(30))
        .await
        .unwrap_err();
    assert!(
        matches!(&held, LedgerError::LockHeld { holder, .. } if holder == "runner-a"),
        "{held:?}"
    );
    tokio::time::sleep(Duration::from_millis(2100)).await;
    let second = f
        .ledger()
        .acquire("runner-b", Duration::from_secs(30))
        .await
        .unwrap();
    assert_eq!(second.holder, "runner-b");
    let lost = l.renew(&first, Duration::from_secs(30)).await.unwrap_err();
    assert!(matches!(lost, LedgerError::LockLost { .. }), "{lost:?}");
    l.release(&first).await.unwrap();
    let lock = |cm: &ConfigMap| {
        cm.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(ledger_configmap::LOCK_ANNOTATION).cloned())
    };
    assert!(
        lock(&f.stored().await).is_some_and(|v| v.contains("\"holder\":\"runner-b\"")),
        "the old holder's release leaves the new holder alone"
    );
    l.release(&second).await.unwrap();
    let stored = f.stored().await;
    assert_eq!(lock(&stored), None);
    assert_eq!(
        stored.data.unwrap().get("version").map(String::as_str),
        Some("45"),
        "the lock never touches the data"
    );
    assert!(
        f.cluster.lock_lease(&f.name).await.is_none(),
        "no Lease is used"
    );
    f.cleanup().await;
}

/// A chart holding the ledger ConfigMap with `version` only, as the platform's chart does,
/// with a `kubeVersion` constraint the real helm checks against the server.
fn write_chart(dir: &std::path::Path, name: &str, version: &str) {
    std::fs::create_dir_all(dir.join("templates")).unwrap();
    std::fs::write(
        dir.join("Chart.yaml"),
        "apiVersion: v2\nname: platform\nversion: 0.1.0\nkubeVersion: \">=1.33.0-0\"\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("templates/ledger.yaml"),
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  annotations:\n    helm.sh/resource-policy: keep\ndata:\n  version: \"{version}\"\n  kube: \"{{{{ .Capabilities.KubeVersion.Version }}}}\"\n"
        ),
    )
    .unwrap();
}

#[tokio::test]
#[ignore = "needs MIGRATE_TEST_KUBECONFIG (examples/kube-testenv)"]
async fn a_helm_upgrade_of_the_chart_that_owns_the_configmap_leaves_every_ledger_key_in_place() {
    let f = or_skip!(Fixture::new("helm install and upgrade", "helm").await);
    let home = std::env::temp_dir().join(unique_name("helm-home"));
    let chart = home.join("chart");
    let helm = |args: &[&str]| {
        let out = f
            .cluster
            .helm()
            .args(args)
            .args(["-n", f.cluster.namespace()])
            .env("HELM_CACHE_HOME", home.join("cache"))
            .env("HELM_CONFIG_HOME", home.join("config"))
            .env("HELM_DATA_HOME", home.join("data"))
            .output()
            .unwrap_or_else(|e| panic!("cannot run helm (set MIGRATE_TEST_HELM): {e}"));
        test_apiserver::real::succeeded(&format!("helm {args:?}"), &out)
    };
    let release = f.name.clone();
    let chart_path = chart.to_str().unwrap().to_owned();
    write_chart(&chart, &f.name, "45");
    helm(&["install", &release, &chart_path]);
    let data = f.data().await;
    assert_eq!(data["version"], "45");
    assert!(
        data["kube"].starts_with("v1."),
        "helm read the server's version: {data:?}"
    );
    let l = f.ledger();
    record_some(&l).await;
    write_chart(&chart, &f.name, "46");
    helm(&["upgrade", &release, &chart_path]);
    let data = f.data().await;
    assert_eq!(data["version"], "46");
    assert_eq!(ledger_keys(&data), OUR_KEYS, "every m.*/a.* key survives");
    assert_eq!(l.read().await.unwrap().unwrap().records.len(), 5);
    helm(&["uninstall", &release]);
    assert_eq!(
        ledger_keys(&f.data().await),
        OUR_KEYS,
        "resource-policy keep: the ledger outlives the release"
    );
    let _ = std::fs::remove_dir_all(&home);
    f.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs MIGRATE_TEST_KUBECONFIG (examples/kube-testenv)"]
async fn a_failures_output_is_kept_in_a_secret_owned_by_the_configmap_not_in_it() {
    let f = or_skip!(Fixture::new("output tails in a Secret", "safe35-tails").await);
    let reader = ledger_reader(&f.cluster, &f.name, Scope::Namespace, "", "configmaps");
    let reader = ConfigMapLedger::new(reader, f.cluster.namespace(), &f.name);
    let subject = Subject::new(&f.cluster, &f.name, f.ledger(), reader);
    output_tails::a_failures_output_is_kept_in_a_secret_owned_by_the_ledger(
        &subject,
        async || serde_json::to_string(&f.stored().await).unwrap(),
        async || f.stored().await.metadata.uid.unwrap(),
    )
    .await;
    f.cleanup().await;
}
