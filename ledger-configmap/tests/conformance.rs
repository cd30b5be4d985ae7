//! The shared conformance suite, unchanged, through a real `kube::Client`
//! against the in-process test API server.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use ledger_configmap::{CONFIGMAP_BUDGET_BYTES, ConfigMapLedger, Options};
use migration_core::testing::Harness;
use migration_core::{LockedLedger, ManualClock, Timestamp};
use migration_kube::RetryPolicy;
use test_apiserver::TestApiServer;

const NS: &str = "cozy-system";
const NAME: &str = "cozystack-version";

struct KubeHarness {
    server: TestApiServer,
    clock: Arc<ManualClock>,
}

async fn harness() -> KubeHarness {
    KubeHarness {
        server: TestApiServer::start().await,
        clock: Arc::new(ManualClock::new(Timestamp::from_unix(1_786_529_040))),
    }
}

#[async_trait]
impl Harness for KubeHarness {
    async fn ledger(&self) -> Arc<dyn LockedLedger> {
        let options = Options {
            clock: self.clock.clone(),
            retry: RetryPolicy::immediate(8),
            ..Options::default()
        };
        Arc::new(ConfigMapLedger::with_options(
            self.server.client(),
            NS,
            NAME,
            options,
        ))
    }

    async fn plant_raw(&self, key: &str, value: &str) {
        let mut cm = self
            .server
            .object("configmaps", NS, NAME)
            .expect("the ledger exists");
        cm["data"][key] = serde_json::Value::String(value.to_owned());
        self.server.put_object("configmaps", cm).unwrap();
    }

    async fn raw(&self, key: &str) -> Option<String> {
        let cm = self.server.object("configmaps", NS, NAME)?;
        cm["data"][key].as_str().map(str::to_owned)
    }

    fn advance_clock(&self, by: Duration) {
        self.clock.advance(by);
    }

    fn budget_bytes(&self) -> Option<u64> {
        Some(CONFIGMAP_BUDGET_BYTES)
    }
}

migration_core::ledger_conformance_tests!(harness);
