//! The one retry loop, seen from the Lease against the test API server:
//! transient errors are tried again within one budget that the Lease's
//! reads and writes share; anything else is answered at once.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use migration_core::{LedgerError, Lock};
use test_apiserver::{FaultRule, TestApiServer, Verb};

use crate::{count, lock, server_with};

/// Reads the Lease through a lock trying `attempts` times, on a server whose
/// every Lease read answers `code` `reason`: the refusal and how many reads
/// reached the server.
async fn refused_read(code: u16, reason: &str, attempts: u32) -> (LedgerError, usize) {
    let server = server_with([FaultRule::on(Verb::Get, "leases")
        .always()
        .respond(code, reason)])
    .await;
    let refused = lock(&server, attempts)
        .refuse_if_held_by_another("me")
        .await
        .unwrap_err();
    (refused, count(&server, Verb::Get))
}

/// Takes the lock through one trying `attempts` times, on `server` whose
/// faults refuse it: the refusal and how many Lease creates and reads
/// reached the server.
async fn refused_acquire(server: &TestApiServer, attempts: u32) -> (LedgerError, (usize, usize)) {
    let refused = lock(server, attempts)
        .acquire("me", Duration::from_secs(60))
        .await
        .unwrap_err();
    let requests = (count(server, Verb::Create), count(server, Verb::Get));
    (refused, requests)
}

/// Whether `err` is the permanent kind (a refusal) rather than transient.
fn permanent(err: &LedgerError) -> bool {
    match err {
        LedgerError::Permanent { .. } => true,
        LedgerError::Transient { .. } => false,
        other => panic!("neither permanent nor transient: {other:?}"),
    }
}

#[tokio::test]
async fn a_forbidden_lease_read_is_answered_after_one_request_and_never_retried() {
    let (refused, reads) = refused_read(403, "Forbidden", 5).await;
    assert!(permanent(&refused), "{refused:?}");
    assert_eq!(reads, 1);
}

#[tokio::test]
async fn a_forbidden_lease_create_is_answered_after_one_request_and_never_retried() {
    let server = server_with([FaultRule::on(Verb::Create, "leases")
        .always()
        .respond(403, "Forbidden")])
    .await;
    let (refused, requests) = refused_acquire(&server, 5).await;
    assert!(permanent(&refused), "{refused:?}");
    assert_eq!(requests, (1, 0), "(creates, reads)");
}

#[tokio::test]
async fn a_transient_lease_read_is_tried_exactly_as_often_as_the_policy_allows() {
    let (refused, reads) = refused_read(503, "ServiceUnavailable", 4).await;
    assert!(!permanent(&refused), "{refused:?}");
    assert_eq!(reads, 4);
}

#[tokio::test]
async fn a_transient_lease_read_that_then_succeeds_is_no_error() {
    let server = server_with([FaultRule::on(Verb::Get, "leases")
        .times(2)
        .respond(503, "ServiceUnavailable")])
    .await;
    lock(&server, 3)
        .refuse_if_held_by_another("me")
        .await
        .unwrap();
    assert_eq!(count(&server, Verb::Get), 3);
}

#[tokio::test]
async fn the_lease_reads_and_writes_of_one_acquire_share_one_retry_budget() {
    let server = server_with([
        FaultRule::on(Verb::Create, "leases")
            .times(2)
            .respond(503, "ServiceUnavailable"),
        FaultRule::on(Verb::Get, "leases")
            .once()
            .respond(503, "ServiceUnavailable"),
    ])
    .await;
    // Try 1: the create (503). Try 2: a read (503). Try 3: a read (absent),
    // then the create (503) on the last try of the three: the acquire gives
    // up, though no single request failed three times.
    let (refused, requests) = refused_acquire(&server, 3).await;
    assert!(!permanent(&refused), "{refused:?}");
    assert_eq!(requests, (2, 2), "(creates, reads)");
}
