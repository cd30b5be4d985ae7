//! Conformance cases of the run lock ([`Lock`](crate::lock::Lock)): who may
//! hold it, renewal, expiry and take-over.

use std::sync::Arc;
use std::time::Duration;

use super::{Harness, assert_absent};
use crate::ledger::LedgerError;
use crate::lock::LockedLedger;

/// The lock is kept in the ledger object, which must exist: create it empty.
async fn ledger_for_locking(ledger: &dyn LockedLedger) {
    ledger.create(&[]).await.unwrap();
}

/// Two handles on one ledger, ready for locking (see [`ledger_for_locking`]).
async fn two_handles_for_locking(
    h: &impl Harness,
) -> (Arc<dyn LockedLedger>, Arc<dyn LockedLedger>) {
    let a = h.ledger().await;
    let b = h.ledger().await;
    ledger_for_locking(a.as_ref()).await;
    (a, b)
}

pub async fn lock_excludes_a_second_holder_until_released(h: &impl Harness) {
    let (a, b) = two_handles_for_locking(h).await;
    let ttl = Duration::from_secs(60);
    let lease = a.acquire("runner-a", ttl).await.unwrap();
    assert_eq!(lease.holder, "runner-a");
    assert!(lease.expires_at > lease.acquired_at);
    match b.acquire("runner-b", ttl).await {
        Err(LedgerError::LockHeld { holder, .. }) => assert_eq!(holder, "runner-a"),
        other => panic!("a held lock must refuse another holder, got {other:?}"),
    }
    a.release(&lease).await.unwrap();
    let lease_b = b.acquire("runner-b", ttl).await.unwrap();
    assert_eq!(lease_b.holder, "runner-b");
    // Release is idempotent, and a stale lease cannot release the new holder.
    a.release(&lease).await.unwrap();
    assert!(matches!(
        a.acquire("runner-a", ttl).await,
        Err(LedgerError::LockHeld { .. })
    ));
}

pub async fn lock_can_be_taken_before_the_ledger_exists(h: &impl Harness) {
    let ledger = h.ledger().await;
    // Nothing to lock yet, and a fresh install needs no lock.
    let err = ledger
        .acquire("runner-a", Duration::from_secs(30))
        .await
        .unwrap_err();
    assert!(matches!(err, LedgerError::NotFound { .. }), "got {err:?}");
    assert_absent(&*ledger, "trying the lock must not create the ledger").await;
}

pub async fn same_holder_reacquires_and_renew_extends(h: &impl Harness) {
    let ledger = h.ledger().await;
    ledger_for_locking(ledger.as_ref()).await;
    let ttl = Duration::from_secs(60);
    let first = ledger.acquire("runner-a", ttl).await.unwrap();
    h.advance_clock(Duration::from_secs(10));
    let again = ledger.acquire("runner-a", ttl).await.unwrap();
    assert!(
        again.expires_at > first.expires_at,
        "re-acquiring by the holder must extend"
    );
    h.advance_clock(Duration::from_secs(10));
    let renewed = ledger.renew(&again, ttl).await.unwrap();
    assert!(renewed.expires_at > again.expires_at);
    ledger.release(&renewed).await.unwrap();
}

pub async fn an_expired_lock_can_be_taken_over_and_the_old_holder_loses_it(h: &impl Harness) {
    let (a, b) = two_handles_for_locking(h).await;
    let ttl = Duration::from_secs(30);
    let stale = a.acquire("crashed-runner", ttl).await.unwrap();
    h.advance_clock(Duration::from_secs(31));
    let lease = b
        .acquire("runner-b", ttl)
        .await
        .expect("an expired lock must be free");
    assert_eq!(lease.holder, "runner-b");
    match a.renew(&stale, ttl).await {
        Err(LedgerError::LockLost { holder, .. }) => assert_eq!(holder, "crashed-runner"),
        other => panic!("renewing a lost lock must fail, got {other:?}"),
    }
    a.release(&stale).await.unwrap();
    match a.acquire("someone-else", ttl).await {
        Err(LedgerError::LockHeld { holder, .. }) => assert_eq!(holder, "runner-b"),
        other => panic!("a stale release must not free the new holder's lock, got {other:?}"),
    }
}
