//! The shared conformance lane, run by the custom-resource backend against the
//! real cluster and against the test API server.

use super::*;

/// The custom-resource backend on the conformance lane.
struct Ledgers;

#[async_trait]
impl LaneBackend for Ledgers {
    fn ledger(&self, case: &LaneCase) -> Arc<dyn LockedLedger> {
        let options = Options {
            lease_namespace: case.namespace.clone(),
            clock: case.clock.clone(),
            ..Options::default()
        };
        Arc::new(CrdLedger::with_options(
            case.client.clone(),
            &case.name,
            options,
        ))
    }

    async fn plant_raw(&self, case: &LaneCase, key: &str, value: &str) {
        let slot = common::slot(key);
        let (patch, status) = common::planting_patch(&slot, common::raw_value(&slot, value));
        let params = PatchParams {
            field_manager: Some(LANE_MANAGER.into()),
            ..PatchParams::default()
        };
        let api = ledgers(case.client.clone());
        if status {
            api.patch_status(&case.name, &params, &Patch::Merge(&patch))
                .await
                .unwrap();
        } else {
            api.patch(&case.name, &params, &Patch::Merge(&patch))
                .await
                .unwrap();
        }
    }

    async fn raw(&self, case: &LaneCase, key: &str) -> Option<String> {
        let object = ledgers(case.client.clone())
            .get_opt(&case.name)
            .await
            .unwrap()?;
        common::read_slot(&serde_json::to_value(object).unwrap(), &common::slot(key))
    }

    fn budget_bytes(&self) -> u64 {
        DEFAULT_BUDGET_BYTES
    }
}

kube_ledger_testing::real_cluster_lane_test!("MigrationLedger conformance lane", lane);

/// Installs the CRD, then runs the shared lane (against the test API server too, below).
async fn lane(client: Client, namespace: &str) {
    install_crd(&client).await;
    run_lane(Ledgers, "lane", client.clone(), namespace, ledgers(client)).await;
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
    lane(server.client(), "lane").await;
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
