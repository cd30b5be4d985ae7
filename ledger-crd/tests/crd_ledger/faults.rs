//! The shared API-fault suite, run on the custom-resource ledger: reads and
//! creates go to `migrationledgers`, writes to its status subresource.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use std::sync::Arc;

use kube_ledger_testing::fault_suite::{FaultHarness, Names};
use ledger_crd::{CrdLedger, Options};
use migration_core::{Ledger, LedgerEntry, Slug};
use migration_kube::RetryPolicy;
use serde_json::Value;
use test_apiserver::TestApiServer;

const NAME: &str = "cozystack";

/// The `MigrationLedger` named `cozystack`, served with its status
/// subresource; entries and attempt marks are JSON objects in its status.
struct MigrationLedgers;

fn status(server: &TestApiServer, map: &str, slug: &Slug) -> Option<Value> {
    let object = server.object(common::RESOURCE, "", NAME)?;
    object["status"][map].get(slug.as_str()).cloned()
}

impl FaultHarness for MigrationLedgers {
    const NAMES: Names = Names {
        resource: "migrationledgers",
        writes: "migrationledgers/status",
        written_object: "migrationledger cozystack/status",
    };

    fn serve(&self, server: &TestApiServer) {
        common::register(server);
    }

    fn ledger(&self, client: kube::Client, retry: RetryPolicy) -> Arc<dyn Ledger> {
        let options = Options {
            retry,
            ..Options::default()
        };
        Arc::new(CrdLedger::with_options(client, NAME, options))
    }

    fn stored_entry(&self, server: &TestApiServer, slug: &Slug) -> Option<Value> {
        status(server, "entries", slug)
    }

    fn entry_as_stored(&self, entry: &LedgerEntry) -> Value {
        entry.compact_value(None)
    }

    fn stored_attempt(&self, server: &TestApiServer, slug: &Slug) -> Option<Value> {
        status(server, "attempts", slug)
    }
}

kube_ledger_testing::ledger_fault_tests!(MigrationLedgers);
