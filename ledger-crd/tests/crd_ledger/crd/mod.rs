//! Behaviour specific to the custom-resource ledger: what the object looks
//! like, which writes go where, the two-request fresh install and a crash
//! between its requests, the size budget, corruption, and the API faults
//! particular to a custom resource (the shared ones are in `faults.rs`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use std::sync::Arc;
use std::time::Duration;

use common::scenarios::{entries, put};
use common::{RESOURCE, scenarios};
use kube::core::{ApiResource, DynamicObject};
use kube::{Api, CustomResourceExt};
use kube_ledger_testing::fault_suite::assert_permanent;
use ledger_crd::{
    ConditionStatus, CrdLedger, DEFAULT_BUDGET_BYTES, ETCD_REQUEST_LIMIT_BYTES, LedgerCondition,
    MigrationLedger, Options, RetryPolicy,
};
use migration_core::Lock;
use migration_core::testing::{sample_entry, slug};
use migration_core::{
    EntryState, Ledger, LedgerEntry, LedgerError, LegacyVersion, ManualClock, Record, Slug,
    Timestamp, WriteMode,
};
use serde_json::{Value, json};
use test_apiserver::{FaultRule, LostReply, TestApiServer, Verb};

const NAME: &str = "cozystack";
const T0: i64 = 1_786_600_000;

async fn served() -> TestApiServer {
    let server = TestApiServer::start().await;
    common::register(&server);
    server
}

fn options(clock: &Arc<ManualClock>) -> Options {
    Options {
        retry: RetryPolicy::immediate(6),
        clock: clock.clone(),
        ..Options::default()
    }
}

fn clock() -> Arc<ManualClock> {
    Arc::new(ManualClock::new(Timestamp::from_unix(T0)))
}

fn ledger(server: &TestApiServer) -> CrdLedger {
    CrdLedger::with_options(server.client(), NAME, options(&clock()))
}

/// A test server serving the resource, and a ledger handle on it.
async fn served_ledger() -> (TestApiServer, CrdLedger) {
    let server = served().await;
    let l = ledger(&server);
    (server, l)
}

fn stored(server: &TestApiServer) -> Value {
    server
        .object(RESOURCE, "", NAME)
        .expect("the object exists")
}

fn dynamic_api(server: &TestApiServer) -> Api<DynamicObject> {
    Api::all_with(server.client(), &ApiResource::erase::<MigrationLedger>(&()))
}

fn condition<'a>(object: &'a Value, kind: &str) -> &'a Value {
    object["status"]["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == kind))
        .unwrap_or_else(|| panic!("no {kind} condition in {object:#}"))
}

/// The condition `kind` of the object as stored.
fn stored_condition(server: &TestApiServer, kind: &str) -> Value {
    condition(&stored(server), kind).clone()
}

fn status_patches(server: &TestApiServer) -> usize {
    server
        .requests()
        .count(Verb::Patch, "migrationledgers/status")
}

/// What a run that died right after creating the object leaves behind.
fn plant_seeding_object(server: &TestApiServer, spec: Value) {
    server
        .put_object(
            RESOURCE,
            json!({
                "apiVersion": "migrations.cozystack.io/v1alpha1",
                "kind": "MigrationLedger",
                "metadata": {
                    "name": NAME,
                    "annotations": {"migrations.cozystack.io/created-by": "cozystack-migrate"},
                },
                "spec": spec,
            }),
        )
        .unwrap();
}

mod budget;
mod conditions;
mod corruption;
mod faults;
mod fresh_install;
mod lock;
mod ready;
mod storage;
mod writes;
