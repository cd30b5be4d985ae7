//! The Lease's three operations, each one `conditional_update`: decided on
//! the Lease as last seen (no read first), and on a fresh read when that
//! copy was stale.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease as KubeLease;
use kube::Api;
use migration_core::{LedgerError, Lock};
use test_apiserver::{TestApiServer, Verb};

use crate::{count, lock};

const TTL: Duration = Duration::from_secs(60);

#[tokio::test]
async fn a_held_lease_is_taken_renewed_and_released_with_one_request_each() {
    let server = TestApiServer::start().await;
    let l = lock(&server, 4);
    let lease = l.acquire("runner-a", TTL).await.unwrap();
    let renewed = l.renew(&lease, TTL).await.unwrap();
    assert_eq!(renewed.token, lease.token, "the same tenure");
    assert!(renewed.expires_at >= lease.expires_at);
    l.release(&renewed).await.unwrap();
    assert_eq!(
        (
            count(&server, Verb::Create),
            count(&server, Verb::Patch),
            count(&server, Verb::Delete),
            count(&server, Verb::Get)
        ),
        (1, 1, 1, 0),
        "no read before any write"
    );
    assert!(server.object("leases", "default", "l").is_none());
}

#[tokio::test]
async fn a_renewal_of_a_lease_deleted_since_reads_it_again_and_answers_lock_lost() {
    let server = TestApiServer::start().await;
    let l = lock(&server, 4);
    let lease = l.acquire("runner-a", TTL).await.unwrap();
    let leases: Api<KubeLease> = Api::namespaced(server.client(), "default");
    leases.delete("l", &Default::default()).await.unwrap();
    server.requests().reset();
    match l.renew(&lease, TTL).await {
        Err(LedgerError::LockLost { holder, reason, .. }) => {
            assert_eq!(holder, "runner-a");
            assert!(reason.contains("released"), "{reason}");
        }
        other => panic!("a deleted Lease is a lost lock, got {other:?}"),
    }
    // The write on the remembered copy (404), then one read: gone.
    assert_eq!(
        (count(&server, Verb::Patch), count(&server, Verb::Get)),
        (1, 1)
    );
}

#[tokio::test]
async fn a_take_that_finds_the_lease_created_meanwhile_reads_it_and_names_its_holder() {
    let server = TestApiServer::start().await;
    let first = lock(&server, 4);
    first.acquire("runner-a", TTL).await.unwrap();
    // A handle that never saw the Lease creates it directly: AlreadyExists
    // is a conflict that reads it, at once.
    let second = lock(&server, 4);
    server.requests().reset();
    match second.acquire("runner-b", TTL).await {
        Err(LedgerError::LockHeld { holder, .. }) => assert_eq!(holder, "runner-a"),
        other => panic!("a held Lease refuses another holder, got {other:?}"),
    }
    assert_eq!(
        (count(&server, Verb::Create), count(&server, Verb::Get)),
        (1, 1)
    );
}
