//! The shared conformance suite, unchanged, through a real `kube::Client`
//! against the in-process test API server.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use async_trait::async_trait;
use kube_ledger_testing::real_lane::{LaneBackend, LaneCase, LaneHarness};
use ledger_configmap::{CONFIGMAP_BUDGET_BYTES, ConfigMapLedger, Options};
use migration_core::{LockedLedger, Timestamp};
use migration_kube::RetryPolicy;
use test_apiserver::TestApiServer;

const NS: &str = "cozy-system";
const NAME: &str = "cozystack-version";

/// The ConfigMap backend on the test server: raw keys planted and read in its storage, each
/// ledger handle through a new client.
struct Served(TestApiServer);

async fn harness() -> LaneHarness<Served> {
    let server = TestApiServer::start().await;
    let client = server.client();
    LaneHarness::new(
        Served(server),
        client,
        NS,
        NAME,
        Timestamp::from_unix(1_786_529_040),
    )
}

#[async_trait]
impl LaneBackend for Served {
    fn ledger(&self, case: &LaneCase) -> Arc<dyn LockedLedger> {
        let options = Options {
            clock: case.clock.clone(),
            retry: RetryPolicy::immediate(8),
            ..Options::default()
        };
        Arc::new(ConfigMapLedger::with_options(
            self.0.client(),
            NS,
            NAME,
            options,
        ))
    }

    async fn plant_raw(&self, _: &LaneCase, key: &str, value: &str) {
        let mut cm = self
            .0
            .object("configmaps", NS, NAME)
            .expect("the ledger exists");
        cm["data"][key] = serde_json::Value::String(value.to_owned());
        self.0.put_object("configmaps", cm).unwrap();
    }

    async fn raw(&self, _: &LaneCase, key: &str) -> Option<String> {
        let cm = self.0.object("configmaps", NS, NAME)?;
        cm["data"][key].as_str().map(str::to_owned)
    }

    fn budget_bytes(&self) -> u64 {
        CONFIGMAP_BUDGET_BYTES
    }
}

migration_core::ledger_conformance_tests!(harness);
