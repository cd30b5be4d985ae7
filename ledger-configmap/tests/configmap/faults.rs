//! The shared API-fault suite, run on the ConfigMap ledger.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use kube_ledger_testing::fault_suite::{FaultHarness, Names};
use ledger_configmap::{ConfigMapLedger, Options};
use migration_core::{Ledger, LedgerEntry, Slug, keys};
use migration_kube::RetryPolicy;
use migration_kube::defaults::{LEDGER_NAME, NAMESPACE};
use serde_json::Value;
use test_apiserver::TestApiServer;

/// The ledger ConfigMap at its default place; entries and attempt marks are
/// `data` keys holding compact JSON.
struct ConfigMaps;

fn data(server: &TestApiServer, key: &str) -> Option<String> {
    let cm = server.object("configmaps", NAMESPACE, LEDGER_NAME)?;
    cm["data"][key].as_str().map(str::to_owned)
}

impl FaultHarness for ConfigMaps {
    const NAMES: Names = Names {
        resource: "configmaps",
        writes: "configmaps",
        written_object: "configmap cozystack-version",
    };

    fn ledger(&self, client: kube::Client, retry: RetryPolicy) -> Arc<dyn Ledger> {
        let options = Options {
            retry,
            ..Options::default()
        };
        Arc::new(ConfigMapLedger::with_options(
            client,
            NAMESPACE,
            LEDGER_NAME,
            options,
        ))
    }

    fn stored_entry(&self, server: &TestApiServer, slug: &Slug) -> Option<Value> {
        data(server, &keys::entry_key(slug)).map(Value::String)
    }

    fn entry_as_stored(&self, entry: &LedgerEntry) -> Value {
        Value::String(entry.encode_compact(None))
    }

    fn stored_attempt(&self, server: &TestApiServer, slug: &Slug) -> Option<Value> {
        data(server, &keys::attempt_key(slug)).map(|raw| serde_json::from_str(&raw).unwrap())
    }
}

kube_ledger_testing::ledger_fault_tests!(ConfigMaps);
