//! The integration tests of this crate, one test binary (a binary each costs a link on 2 cores).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod client;
mod lease;
mod retry;

use std::sync::Arc;

use migration_core::SystemClock;
use migration_kube::{LeaseLock, RetryPolicy, Writer};
use test_apiserver::{FaultRule, TestApiServer, Verb};

/// The test API server, answering each of `faults` before anything else.
async fn server_with(faults: impl IntoIterator<Item = FaultRule>) -> TestApiServer {
    let server = TestApiServer::start().await;
    for rule in faults {
        server.faults().inject(rule);
    }
    server
}

/// A lock on Lease `l` in `default` that tries each operation `attempts`
/// times, without waiting between tries.
fn lock(server: &TestApiServer, attempts: u32) -> LeaseLock {
    let client = migration_kube::client::from_config(server.config()).unwrap();
    let writer = Writer {
        ledger: "configmap:default/l".into(),
        retry: RetryPolicy::immediate(attempts),
    };
    LeaseLock::new(client, "default", "l", writer, Arc::new(SystemClock))
}

/// The requests of `verb` on Leases the server counted.
fn count(server: &TestApiServer, verb: Verb) -> usize {
    server.requests().count(verb, "leases")
}
