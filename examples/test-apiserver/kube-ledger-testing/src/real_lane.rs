//! The conformance harness both Kubernetes backends share (feature `testing`), and the lane
//! they run against a real API server: every case of `migration_core::testing::run_all`, each on its own ledger object
//! and run-lock Lease, deleted at the end. One harness, parametrised by the backend's
//! [`LaneBackend`], so the ConfigMap and the custom-resource lanes cannot drift apart.
//!
//! The same lane runs against the in-process test API server in each backend's tests, so that
//! its own code cannot rot while nobody has a cluster at hand.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use kube::{Api, Client};
use migration_core::testing::Harness;
use migration_core::{LockedLedger, ManualClock, Timestamp};
use test_apiserver::real::LaneObjects;

/// One conformance case's ledger object on the server.
#[derive(Clone)]
pub struct LaneCase {
    /// A client with the lane's (admin) credentials.
    pub client: Client,
    /// The namespace of the ledger object (where it is namespaced) and of its Lease.
    pub namespace: String,
    /// The ledger object's name; its Lease is `<name>-lock`.
    pub name: String,
    /// The clock the case's ledgers use for lock expiry, moved by the suite.
    pub clock: Arc<ManualClock>,
}

/// What the lane needs to know about a backend: how to open its ledger on a case's object and
/// how to reach the object's raw stored keys.
#[async_trait]
pub trait LaneBackend: Send + Sync {
    /// A new handle on `case`'s ledger, using `case.clock`.
    fn ledger(&self, case: &LaneCase) -> Arc<dyn LockedLedger>;

    /// Stores `value` under ledger key `key` verbatim, bypassing the engine.
    async fn plant_raw(&self, case: &LaneCase, key: &str, value: &str);

    /// Reads ledger key `key` verbatim (`None` if absent).
    async fn raw(&self, case: &LaneCase, key: &str) -> Option<String>;

    /// The backend's size budget in bytes.
    fn budget_bytes(&self) -> u64;
}

/// The conformance [`Harness`] of one case on one backend.
pub struct LaneHarness<B> {
    backend: Arc<B>,
    case: LaneCase,
}

impl<B: LaneBackend> LaneHarness<B> {
    /// The harness of ledger object `name` (its Lease in `namespace`) reached through `client`,
    /// its manual clock starting at `now`: for backends' in-process conformance tests, which
    /// expand `migration_core::ledger_conformance_tests!` over a function returning it.
    pub fn new(backend: B, client: Client, namespace: &str, name: &str, now: Timestamp) -> Self {
        let case = LaneCase {
            client,
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            clock: Arc::new(ManualClock::new(now)),
        };
        Self {
            backend: Arc::new(backend),
            case,
        }
    }
}

#[async_trait]
impl<B: LaneBackend> Harness for LaneHarness<B> {
    async fn ledger(&self) -> Arc<dyn LockedLedger> {
        self.backend.ledger(&self.case)
    }

    async fn plant_raw(&self, key: &str, value: &str) {
        self.backend.plant_raw(&self.case, key, value).await;
    }

    async fn raw(&self, key: &str) -> Option<String> {
        self.backend.raw(&self.case, key).await
    }

    fn advance_clock(&self, by: Duration) {
        self.case.clock.advance(by);
    }

    fn budget_bytes(&self) -> Option<u64> {
        Some(self.backend.budget_bytes())
    }
}

/// Runs every conformance case through `client`, naming the ledger objects `<prefix>-<pid>-<case>`
/// and their Leases in `namespace`, then deletes them all from `objects` (the backend's ledger
/// resource) and the Leases.
///
/// # Panics
/// Where a case fails (with its message).
pub async fn run_lane<B, K>(
    backend: B,
    prefix: &str,
    client: Client,
    namespace: &str,
    objects: Api<K>,
) where
    B: LaneBackend + 'static,
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let backend = Arc::new(backend);
    let made = LaneObjects::new(prefix);
    migration_core::testing::run_all(|case: &'static str| {
        let case = LaneCase {
            client: client.clone(),
            namespace: namespace.to_owned(),
            name: made.name_for(case),
            clock: Arc::new(ManualClock::new(Timestamp::now())),
        };
        let backend = backend.clone();
        async move { LaneHarness { backend, case } }
    })
    .await;
    made.delete(&objects, &Api::namespaced(client, namespace))
        .await;
}

/// Expands to the `#[tokio::test]` `conformance_against_a_real_cluster`: the backend's
/// lane, `$lane(client, namespace)`, against the real cluster the environment configures,
/// ignored unless asked for as every real-server test is (`test_apiserver::real`; `$what`
/// names the lane in its messages). The test crate depends on
/// `test_apiserver`, as every lane does.
#[macro_export]
macro_rules! real_cluster_lane_test {
    ($what:expr, $lane:path) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        #[ignore = "needs MIGRATE_TEST_KUBECONFIG (examples/kube-testenv)"]
        async fn conformance_against_a_real_cluster() {
            let cluster = ::test_apiserver::or_skip!(
                ::test_apiserver::real::RealCluster::from_env($what).await
            );
            $lane(cluster.client(), cluster.namespace()).await;
        }
    };
}
