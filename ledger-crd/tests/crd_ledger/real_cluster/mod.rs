//! The real-server lane: the conformance suite and the custom-resource backend's
//! own behaviours against a real API server. Set `MIGRATE_TEST_KUBECONFIG` to a
//! kubeconfig (and optionally `MIGRATE_TEST_NAMESPACE`, default `default`, for the
//! Leases); `examples/kube-testenv/testenv.sh start` provides one. The lane
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

use crate::common;
use common::scenarios::{self, entries};

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{DeleteParams, Patch, PatchParams};
use kube::core::{ApiResource, DynamicObject};
use kube::{Api, Client, CustomResourceExt};
use kube_ledger_testing::fault_suite::assert_permanent;
use kube_ledger_testing::real_lane::{LaneBackend, LaneCase, run_lane};
use ledger_crd::{CrdLedger, DEFAULT_BUDGET_BYTES, MigrationLedger, Options};
use migration_core::{Ledger, Lock, LockedLedger};
use serde_json::json;
use test_apiserver::or_skip;
use test_apiserver::real::{RealCluster, api_status};

/// The field manager of the lane's CRD apply and planted values.
const LANE_MANAGER: &str = "cozystack-migrate-test-lane";

fn ledgers(client: Client) -> Api<DynamicObject> {
    Api::all_with(client, &ApiResource::erase::<MigrationLedger>(&()))
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
    test_apiserver::real::wait_until_established(client, name).await;
}

/// One test's `MigrationLedger` (cluster-scoped, so its name is unique per run) and Lease on
/// the real cluster, deleted by [`Fixture::cleanup`], which every test calls last. A failed
/// test leaves them for inspection; the test environment is thrown away with its etcd data.
struct Fixture {
    cluster: RealCluster,
    ledgers: Api<DynamicObject>,
    name: String,
}

impl Fixture {
    async fn new(what: &str, prefix: &str) -> Option<Self> {
        let cluster = RealCluster::from_env(what).await?;
        let client = cluster.client();
        install_crd(&client).await;
        let name = test_apiserver::real::unique_name(prefix);
        let ledgers = ledgers(client);
        Some(Self {
            cluster,
            ledgers,
            name,
        })
    }

    fn options(&self) -> Options {
        Options {
            lease_namespace: self.cluster.namespace().to_owned(),
            ..Options::default()
        }
    }

    fn ledger_with(&self, options: Options) -> CrdLedger {
        CrdLedger::with_options(self.cluster.client(), &self.name, options)
    }

    fn ledger(&self) -> CrdLedger {
        self.ledger_with(self.options())
    }

    /// [`Fixture::ledger`], created empty.
    async fn created_ledger(&self) -> CrdLedger {
        let ledger = self.ledger();
        ledger.create(&[]).await.unwrap();
        ledger
    }

    fn api(&self) -> Api<DynamicObject> {
        self.ledgers.clone()
    }

    async fn stored(&self) -> serde_json::Value {
        serde_json::to_value(self.api().get(&self.name).await.unwrap()).unwrap()
    }

    /// Bytes of the object as the server returns it, ownership records included: what the
    /// budget measures.
    async fn stored_bytes(&self) -> u64 {
        serde_json::to_vec(&self.stored().await).unwrap().len() as u64
    }

    /// Creates the object as a chart or a human would: no engine annotation.
    async fn declare(&self, spec: serde_json::Value) -> Result<DynamicObject, kube::Error> {
        let object: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "migrations.cozystack.io/v1alpha1", "kind": "MigrationLedger",
            "metadata": {"name": self.name}, "spec": spec,
        }))
        .unwrap();
        self.api().create(&Default::default(), &object).await
    }

    async fn cleanup(self) {
        self.cluster.delete_with_lock(&self.api(), &self.name).await;
    }
}

mod density;
mod lane;
mod ledger;
mod limits;
mod schema;
