//! The remembered object and Lease: one request per write when nothing
//! changed, and a stale copy never decides anything.

use super::*;
use migration_core::Lock;
use migration_core::{EntryState, Timestamp};
use std::time::Duration;
use test_apiserver::{TestApiServer, Verb};

const NS: &str = "cozy-system";
const NAME: &str = "cozystack-version";

fn ledger(server: &TestApiServer) -> ConfigMapLedger {
    let options = Options {
        retry: RetryPolicy::immediate(4),
        ..Options::default()
    };
    ConfigMapLedger::with_options(server.client(), NS, NAME, options)
}

fn slug(s: &str) -> Slug {
    Slug::parse(s).unwrap()
}

fn entry(state: EntryState, attempts: u32) -> LedgerEntry {
    LedgerEntry {
        attempts,
        ..LedgerEntry::new(state, Timestamp::from_unix(1_786_529_040))
    }
}

fn stored(server: &TestApiServer) -> serde_json::Value {
    server.object("configmaps", NS, NAME).unwrap()
}

async fn seeded(server: &TestApiServer) -> ConfigMapLedger {
    server
        .put_object(
            "configmaps",
            serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": NAME, "namespace": NS}, "data": {"version": "45"}}),
        )
        .unwrap();
    let l = ledger(server);
    l.read().await.unwrap().unwrap();
    server.requests().reset();
    l
}

#[tokio::test]
async fn after_a_read_each_write_is_one_patch() {
    let server = TestApiServer::start().await;
    let l = seeded(&server).await;
    l.note_attempt(&slug("a"), "t1", 0).await.unwrap();
    l.write(&[(slug("a"), entry(EntryState::Ok, 1))], WriteMode::Replace)
        .await
        .unwrap();
    l.write(
        &[(slug("b"), entry(EntryState::Legacy, 0))],
        WriteMode::OnlyIfAbsent,
    )
    .await
    .unwrap();
    assert_eq!(server.requests().total(), 3);
    assert_eq!(server.requests().count(Verb::Patch, "configmaps"), 3);
}

#[tokio::test]
async fn a_key_written_by_someone_else_meanwhile_is_never_overwritten() {
    let server = TestApiServer::start().await;
    let l = seeded(&server).await;
    // Another handle (another runner) writes `a` after our read.
    let other = ledger(&server);
    other
        .write(
            &[(slug("a"), entry(EntryState::Ok, 7))],
            WriteMode::OnlyIfAbsent,
        )
        .await
        .unwrap();
    server.requests().reset();
    let report = l
        .write(
            &[(slug("a"), entry(EntryState::Legacy, 0))],
            WriteMode::OnlyIfAbsent,
        )
        .await
        .unwrap();
    assert_eq!(report.already_present, [slug("a")]);
    assert!(report.written.is_empty());
    assert_eq!(
        stored(&server)["data"]["m.a"],
        entry(EntryState::Ok, 7).encode_compact(None)
    );
    // The stale patch is refused (409), then one fresh read decides.
    assert_eq!(server.requests().count(Verb::Patch, "configmaps"), 1);
    assert_eq!(server.requests().count(Verb::Get, "configmaps"), 1);
}

#[tokio::test]
async fn a_stale_copy_is_re_read_and_the_write_keeps_foreign_changes() {
    let server = TestApiServer::start().await;
    let l = seeded(&server).await;
    let mut cm = stored(&server);
    cm["data"]["version"] = serde_json::json!("46");
    server.put_object("configmaps", cm).unwrap();
    server.requests().reset();
    l.write(&[(slug("a"), entry(EntryState::Ok, 1))], WriteMode::Replace)
        .await
        .unwrap();
    let cm = stored(&server);
    assert_eq!(cm["data"]["version"], "46");
    assert_eq!(
        cm["data"]["m.a"],
        entry(EntryState::Ok, 1).encode_compact(None)
    );
    assert_eq!(server.requests().count(Verb::Patch, "configmaps"), 2);
    assert_eq!(server.requests().count(Verb::Get, "configmaps"), 1);
}

#[tokio::test]
async fn a_repeated_attempt_token_is_only_answered_from_a_fresh_read() {
    let server = TestApiServer::start().await;
    let l = seeded(&server).await;
    assert_eq!(l.note_attempt(&slug("a"), "t1", 0).await.unwrap(), 1);
    // Someone else's execution counted meanwhile.
    assert_eq!(
        ledger(&server)
            .note_attempt(&slug("a"), "t2", 0)
            .await
            .unwrap(),
        2
    );
    server.requests().reset();
    // Our copy says "t1, 1": answering 1 from it would be wrong.
    assert_eq!(l.note_attempt(&slug("a"), "t1", 0).await.unwrap(), 3);
    assert_eq!(server.requests().count(Verb::Get, "configmaps"), 1);
}

#[tokio::test]
async fn nothing_to_write_and_over_budget_are_decided_on_a_fresh_read() {
    let server = TestApiServer::start().await;
    let l = seeded(&server).await;
    l.write(&[(slug("a"), entry(EntryState::Ok, 1))], WriteMode::Replace)
        .await
        .unwrap();
    server.requests().reset();
    let report = l
        .write(
            &[(slug("a"), entry(EntryState::Legacy, 0))],
            WriteMode::OnlyIfAbsent,
        )
        .await
        .unwrap();
    assert_eq!(report.already_present, [slug("a")]);
    assert_eq!(server.requests().count(Verb::Get, "configmaps"), 1);
    assert_eq!(server.requests().count(Verb::Patch, "configmaps"), 0);
    let big = LedgerEntry {
        message: Some("x".repeat(CONFIGMAP_BUDGET_BYTES as usize)),
        ..entry(EntryState::Failed, 1)
    };
    server.requests().reset();
    let err = l
        .write(&[(slug("b"), big)], WriteMode::Replace)
        .await
        .unwrap_err();
    assert!(matches!(err, LedgerError::Full { .. }), "{err:?}");
    assert_eq!(server.requests().count(Verb::Get, "configmaps"), 1);
    assert_eq!(server.requests().count(Verb::Patch, "configmaps"), 0);
}

#[tokio::test]
async fn the_lock_costs_one_request_to_take_one_to_renew_and_one_to_release() {
    let server = TestApiServer::start().await;
    let l = ledger(&server);
    let ttl = Duration::from_secs(30);
    let lease = l.acquire("runner-a", ttl).await.unwrap();
    let lease = l.renew(&lease, ttl).await.unwrap();
    l.release(&lease).await.unwrap();
    assert_eq!(server.requests().count(Verb::Create, "leases"), 1);
    assert_eq!(server.requests().count(Verb::Patch, "leases"), 1);
    assert_eq!(server.requests().count(Verb::Delete, "leases"), 1);
    assert_eq!(server.requests().total(), 3);
    assert!(
        server
            .object("leases", NS, "cozystack-version-lock")
            .is_none()
    );
}

#[tokio::test]
async fn a_remembered_lease_taken_over_meanwhile_is_lost_and_left_alone() {
    let server = TestApiServer::start().await;
    let clock = Arc::new(migration_core::ManualClock::new(Timestamp::from_unix(
        1_786_529_040,
    )));
    let handle = || {
        ConfigMapLedger::with_options(
            server.client(),
            NS,
            NAME,
            Options {
                retry: RetryPolicy::immediate(4),
                clock: clock.clone(),
                ..Options::default()
            },
        )
    };
    let (a, b) = (handle(), handle());
    let ttl = Duration::from_secs(30);
    let lease_a = a.acquire("runner-a", ttl).await.unwrap();
    // A stalls past its expiry; B takes the lock over.
    clock.advance(Duration::from_secs(31));
    let lease_b = b.acquire("runner-b", ttl).await.unwrap();
    let err = a.renew(&lease_a, ttl).await.unwrap_err();
    assert!(matches!(err, LedgerError::LockLost { .. }), "{err:?}");
    a.release(&lease_a).await.unwrap();
    let stored = server
        .object("leases", NS, "cozystack-version-lock")
        .unwrap();
    assert_eq!(stored["spec"]["holderIdentity"], "runner-b");
    b.release(&lease_b).await.unwrap();
    assert!(
        server
            .object("leases", NS, "cozystack-version-lock")
            .is_none()
    );
    // Another holder has it. A handle that last saw it there reads it
    // (one request); a new handle tries to create it first (two).
    b.acquire("runner-b", ttl).await.unwrap();
    server.requests().reset();
    let err = a.acquire("runner-a", ttl).await.unwrap_err();
    assert!(matches!(err, LedgerError::LockHeld { .. }), "{err:?}");
    assert_eq!(server.requests().total(), 1);
    server.requests().reset();
    let err = handle().acquire("runner-c", ttl).await.unwrap_err();
    assert!(matches!(err, LedgerError::LockHeld { .. }), "{err:?}");
    assert_eq!(server.requests().count(Verb::Create, "leases"), 1);
    assert_eq!(server.requests().total(), 2);
}
