//! The shared conformance suite, unchanged, through a real `kube::Client`
//! against the in-process test API server, with `MigrationLedger` served
//! with its status subresource (a main-resource write cannot change status
//! and a status write cannot change anything else).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use std::sync::Arc;

use async_trait::async_trait;
use kube_ledger_testing::real_lane::{LaneBackend, LaneCase, LaneHarness};
use ledger_crd::{CrdLedger, DEFAULT_BUDGET_BYTES, Options, RetryPolicy};
use migration_core::{LockedLedger, Timestamp};
use test_apiserver::TestApiServer;

const NAME: &str = "cozystack";

/// The custom-resource backend on the test server: raw keys planted and read in its storage
/// (`tests/common`), each ledger handle through a new client.
struct Served(TestApiServer);

async fn harness() -> LaneHarness<Served> {
    let server = TestApiServer::start().await;
    common::register(&server);
    let (client, now) = (server.client(), Timestamp::from_unix(1_786_529_040));
    LaneHarness::new(Served(server), client, "default", NAME, now)
}

#[async_trait]
impl LaneBackend for Served {
    fn ledger(&self, case: &LaneCase) -> Arc<dyn LockedLedger> {
        let retry = RetryPolicy::immediate(8);
        let clock = case.clock.clone();
        let options = Options {
            clock,
            retry,
            ..Options::default()
        };
        Arc::new(CrdLedger::with_options(self.0.client(), NAME, options))
    }

    async fn plant_raw(&self, _: &LaneCase, key: &str, value: &str) {
        common::plant(&self.0, NAME, key, value);
    }

    async fn raw(&self, _: &LaneCase, key: &str) -> Option<String> {
        common::raw(&self.0, NAME, key)
    }

    fn budget_bytes(&self) -> u64 {
        DEFAULT_BUDGET_BYTES
    }
}

migration_core::ledger_conformance_tests!(harness);
