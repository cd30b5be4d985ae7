//! The opt-in real-cluster lane: the same conformance suite against a real
//! API server. Set `MIGRATE_TEST_KUBECONFIG` to a kubeconfig (and optionally
//! `MIGRATE_TEST_NAMESPACE`, default `default`); each case uses its own
//! ConfigMap and Lease, deleted afterwards. Unset, the test says it skipped.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{DeleteParams, Patch, PatchParams};
use kube::{Api, Client};
use ledger_configmap::{CONFIGMAP_BUDGET_BYTES, ConfigMapLedger, Options};
use migration_core::testing::Harness;
use migration_core::{LockedLedger, ManualClock, Timestamp};

struct Real {
    client: Client,
    namespace: String,
    name: String,
    clock: Arc<ManualClock>,
}

#[async_trait]
impl Harness for Real {
    async fn ledger(&self) -> Arc<dyn LockedLedger> {
        let options = Options {
            clock: self.clock.clone(),
            ..Options::default()
        };
        Arc::new(ConfigMapLedger::with_options(
            self.client.clone(),
            &self.namespace,
            &self.name,
            options,
        ))
    }
    async fn plant_raw(&self, key: &str, value: &str) {
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), &self.namespace);
        let patch = serde_json::json!({"data": {key: value}});
        api.patch(&self.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap();
    }
    async fn raw(&self, key: &str) -> Option<String> {
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), &self.namespace);
        api.get_opt(&self.name)
            .await
            .unwrap()?
            .data?
            .get(key)
            .cloned()
    }
    fn advance_clock(&self, by: Duration) {
        self.clock.advance(by);
    }
    fn budget_bytes(&self) -> Option<u64> {
        Some(CONFIGMAP_BUDGET_BYTES)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_against_a_real_cluster() {
    let Ok(path) = std::env::var("MIGRATE_TEST_KUBECONFIG") else {
        eprintln!(
            "skipped: set MIGRATE_TEST_KUBECONFIG to a kubeconfig to run the real-cluster lane"
        );
        return;
    };
    let kubeconfig = kube::config::Kubeconfig::read_from(&path).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .unwrap();
    let client = Client::try_from(config).unwrap();
    let namespace = std::env::var("MIGRATE_TEST_NAMESPACE").unwrap_or_else(|_| "default".into());
    lane(client, namespace).await;
}

/// The lane itself, also exercised against the test API server below so
/// that its own code cannot rot while nobody has a cluster at hand.
async fn lane(client: Client, namespace: String) {
    let run = std::process::id();
    let made = std::sync::Mutex::new(Vec::new());
    migration_core::testing::run_all(|case: &'static str| {
        let name = format!(
            "ledger-{run}-{}",
            case.replace('_', "-").chars().take(40).collect::<String>()
        );
        made.lock().unwrap().push(name.clone());
        let (client, namespace) = (client.clone(), namespace.clone());
        async move {
            Real {
                client,
                namespace,
                name,
                clock: Arc::new(ManualClock::new(Timestamp::now())),
            }
        }
    })
    .await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &namespace);
    let leases: Api<Lease> = Api::namespaced(client, &namespace);
    for name in made.into_inner().unwrap() {
        let _ = cms.delete(&name, &DeleteParams::default()).await;
        let _ = leases
            .delete(&format!("{name}-lock"), &DeleteParams::default())
            .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lane_runs_every_case_and_cleans_up_against_the_test_server() {
    let server = test_apiserver::TestApiServer::start().await;
    lane(server.client(), "lane".into()).await;
    assert!(
        server.objects("configmaps").is_empty(),
        "the lane deletes what it made"
    );
    assert!(server.objects("leases").is_empty());
}
