//! The shared conformance suite, unchanged, through a real `kube::Client`
//! against the in-process test API server, with `MigrationLedger` served
//! with its status subresource (a main-resource write cannot change status
//! and a status write cannot change anything else).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use ledger_crd::{CrdLedger, DEFAULT_BUDGET_BYTES, Options, RetryPolicy};
use migration_core::testing::Harness;
use migration_core::{LockedLedger, ManualClock, Timestamp};
use test_apiserver::TestApiServer;

const NAME: &str = "cozystack";

struct KubeHarness {
    server: TestApiServer,
    clock: Arc<ManualClock>,
}

async fn harness() -> KubeHarness {
    let server = TestApiServer::start().await;
    common::register(&server);
    KubeHarness {
        server,
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
        Arc::new(CrdLedger::with_options(self.server.client(), NAME, options))
    }

    async fn plant_raw(&self, key: &str, value: &str) {
        common::plant(&self.server, NAME, key, value);
    }

    async fn raw(&self, key: &str) -> Option<String> {
        common::raw(&self.server, NAME, key)
    }

    fn advance_clock(&self, by: Duration) {
        self.clock.advance(by);
    }

    fn budget_bytes(&self) -> Option<u64> {
        Some(DEFAULT_BUDGET_BYTES)
    }
}

migration_core::ledger_conformance_tests!(harness);
