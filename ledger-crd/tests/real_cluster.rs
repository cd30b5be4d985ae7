//! The opt-in real-cluster lane: the same conformance suite against a real
//! API server. Set `MIGRATE_TEST_KUBECONFIG` to a kubeconfig (and optionally
//! `MIGRATE_TEST_NAMESPACE`, default `default`, for the Leases). The lane
//! installs (or updates) the `MigrationLedger` CRD by server-side apply and
//! waits until it is established; each case uses its own `MigrationLedger`
//! and Lease, deleted afterwards. The CRD itself is never deleted: that
//! would delete every ledger on the cluster. Unset, the test says it skipped.
//!
//! ```sh
//! MIGRATE_TEST_KUBECONFIG=$HOME/.kube/config \
//!   cargo test -p ledger-crd --test real_cluster -- --nocapture
//! ```

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{DeleteParams, Patch, PatchParams};
use kube::core::{ApiResource, DynamicObject};
use kube::{Api, Client, CustomResourceExt};
use ledger_crd::{CrdLedger, DEFAULT_BUDGET_BYTES, MigrationLedger, Options};
use migration_core::testing::Harness;
use migration_core::{LockedLedger, ManualClock, Timestamp};
use serde_json::json;

/// The field manager of the lane's CRD apply and planted values.
const LANE_MANAGER: &str = "cozystack-migrate-test-lane";

struct Real {
    client: Client,
    namespace: String,
    name: String,
    clock: Arc<ManualClock>,
}

impl Real {
    fn api(&self) -> Api<DynamicObject> {
        Api::all_with(
            self.client.clone(),
            &ApiResource::erase::<MigrationLedger>(&()),
        )
    }
}

#[async_trait]
impl Harness for Real {
    async fn ledger(&self) -> Arc<dyn LockedLedger> {
        let options = Options {
            lease_namespace: self.namespace.clone(),
            clock: self.clock.clone(),
            ..Options::default()
        };
        Arc::new(CrdLedger::with_options(
            self.client.clone(),
            &self.name,
            options,
        ))
    }

    async fn plant_raw(&self, key: &str, value: &str) {
        let slot = common::slot(key);
        let (patch, status) = common::planting_patch(&slot, common::raw_value(&slot, value));
        let params = PatchParams {
            field_manager: Some(LANE_MANAGER.into()),
            ..PatchParams::default()
        };
        let api = self.api();
        if status {
            api.patch_status(&self.name, &params, &Patch::Merge(&patch))
                .await
                .unwrap();
        } else {
            api.patch(&self.name, &params, &Patch::Merge(&patch))
                .await
                .unwrap();
        }
    }

    async fn raw(&self, key: &str) -> Option<String> {
        let object = self.api().get_opt(&self.name).await.unwrap()?;
        common::read_slot(&serde_json::to_value(object).unwrap(), &common::slot(key))
    }

    fn advance_clock(&self, by: Duration) {
        self.clock.advance(by);
    }

    fn budget_bytes(&self) -> Option<u64> {
        Some(DEFAULT_BUDGET_BYTES)
    }
}

/// Installs or updates the CRD, and waits until the API server serves it.
async fn install_crd(client: &Client) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let name = MigrationLedger::crd_name();
    crds.patch(
        name,
        &PatchParams::apply(LANE_MANAGER),
        &Patch::Apply(ledger_crd::crd()),
    )
    .await
    .unwrap_or_else(|e| panic!("cannot apply the CRD {name}: {e}"));
    for _ in 0..120 {
        let crd = crds.get(name).await.unwrap();
        let established = crd
            .status
            .and_then(|s| s.conditions)
            .into_iter()
            .flatten()
            .any(|c| c.type_ == "Established" && c.status == "True");
        if established {
            return;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    panic!("the CRD {name} did not become established within 30 s");
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
    install_crd(&client).await;
    let run = std::process::id();
    let made = std::sync::Mutex::new(Vec::new());
    migration_core::testing::run_all(|case: &'static str| {
        let name = format!(
            "lane-{run}-{}",
            case.replace('_', "-").chars().take(40).collect::<String>()
        )
        .trim_end_matches('-')
        .to_owned();
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
    let ledgers: Api<DynamicObject> =
        Api::all_with(client.clone(), &ApiResource::erase::<MigrationLedger>(&()));
    let leases: Api<Lease> = Api::namespaced(client, &namespace);
    for name in made.into_inner().unwrap() {
        let _ = ledgers.delete(&name, &DeleteParams::default()).await;
        let _ = leases
            .delete(&format!("{name}-lock"), &DeleteParams::default())
            .await;
    }
}

/// Plays the part of the apiextensions controller on the test server: once
/// the CRD is applied, serve its resource and mark it established.
fn establish_crds(server: &test_apiserver::TestApiServer) -> impl Fn() -> bool + '_ {
    move || {
        let name = MigrationLedger::crd_name();
        let Some(crd) = server.object("customresourcedefinitions.apiextensions.k8s.io", "", name)
        else {
            return false;
        };
        let spec = &crd["spec"];
        let version = &spec["versions"][0];
        server.register_custom_resource(
            spec["group"].as_str().unwrap(),
            version["name"].as_str().unwrap(),
            spec["names"]["plural"].as_str().unwrap(),
            spec["names"]["kind"].as_str().unwrap(),
            spec["scope"] == "Namespaced",
            version["subresources"].get("status").is_some(),
        );
        server
            .set_status(
                "customresourcedefinitions.apiextensions.k8s.io",
                "",
                name,
                json!({"conditions": [{"type": "Established", "status": "True"}]}),
            )
            .unwrap();
        true
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lane_installs_the_crd_runs_every_case_and_cleans_up_against_the_test_server() {
    let server = Arc::new(test_apiserver::TestApiServer::start().await);
    server.register_custom_resource(
        "apiextensions.k8s.io",
        "v1",
        "customresourcedefinitions",
        "CustomResourceDefinition",
        false,
        true,
    );
    let controller = {
        let server = server.clone();
        tokio::spawn(async move {
            let establish = establish_crds(&server);
            while !establish() {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
    };
    lane(server.client(), "lane".into()).await;
    controller.await.unwrap();
    assert!(
        server
            .objects("migrationledgers.migrations.cozystack.io")
            .is_empty(),
        "the lane deletes the ledgers it made"
    );
    assert!(server.objects("leases").is_empty());
    assert_eq!(
        server
            .objects("customresourcedefinitions.apiextensions.k8s.io")
            .len(),
        1,
        "the lane never deletes the CRD"
    );
}
