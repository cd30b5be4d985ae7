//! The remembered object and Lease: one request per write when nothing
//! changed, and a stale copy never decides anything.

use super::*;
use migration_core::{EntryState, Timestamp};
use migration_core::{Ledger, Lock};
use migration_kube::RetryPolicy;
use std::time::Duration;
use test_apiserver::{TestApiServer, Verb};

const NS: &str = "cozy-system";
const NAME: &str = "cozystack-version";

/// The handles' options: four tries, no waiting between them.
fn options() -> Options {
    Options {
        retry: RetryPolicy::immediate(4),
        ..Options::default()
    }
}

fn ledger(server: &TestApiServer) -> ConfigMapLedger {
    ConfigMapLedger::with_options(server.client(), NS, NAME, options())
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

/// A test API server holding the ConfigMap (`version` only), and a
/// handle that has read it; the requests are reset.
async fn seeded() -> (TestApiServer, ConfigMapLedger) {
    let server = TestApiServer::start().await;
    server
        .put_object(
            "configmaps",
            serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": NAME, "namespace": NS}, "data": {"version": "45"}}),
        )
        .unwrap();
    let l = ledger(&server);
    l.read().await.unwrap().unwrap();
    server.requests().reset();
    (server, l)
}

/// Writes `entry` under `key` in `mode`, which must succeed.
async fn put(l: &ConfigMapLedger, key: &str, entry: LedgerEntry, mode: WriteMode) -> WriteReport {
    l.write(&[(slug(key), entry)], mode).await.unwrap()
}

/// Writes `entry` under `key` where nothing is stored there yet ([`WriteMode::OnlyIfAbsent`]);
/// the write must succeed (it may leave a stored key as it is).
async fn put_if_absent(l: &ConfigMapLedger, key: &str, entry: LedgerEntry) -> WriteReport {
    put(l, key, entry, WriteMode::OnlyIfAbsent).await
}

/// An only-if-absent write of a legacy `a` where `a` is stored, once the
/// requests are reset: reported as already present.
async fn seed_a_over_a_stored_one(server: &TestApiServer, l: &ConfigMapLedger) -> WriteReport {
    server.requests().reset();
    let report = put_if_absent(l, "a", entry(EntryState::Legacy, 0)).await;
    assert_eq!(report.already_present, [slug("a")]);
    report
}

/// The GETs and PATCHes of the ConfigMap since the requests were last reset.
fn gets_and_patches(server: &TestApiServer) -> (usize, usize) {
    let requests = server.requests();
    (
        requests.count(Verb::Get, "configmaps"),
        requests.count(Verb::Patch, "configmaps"),
    )
}

#[tokio::test]
async fn after_a_read_each_write_is_one_patch() {
    let (server, l) = seeded().await;
    l.note_attempt(&slug("a"), "t1", 0).await.unwrap();
    put(&l, "a", entry(EntryState::Ok, 1), WriteMode::Replace).await;
    put_if_absent(&l, "b", entry(EntryState::Legacy, 0)).await;
    assert_eq!(server.requests().total(), 3);
    assert_eq!(server.requests().count(Verb::Patch, "configmaps"), 3);
}

#[tokio::test]
async fn a_key_written_by_someone_else_meanwhile_is_never_overwritten() {
    let (server, l) = seeded().await;
    // Another handle (another runner) writes `a` after our read.
    let other = ledger(&server);
    put_if_absent(&other, "a", entry(EntryState::Ok, 7)).await;
    let report = seed_a_over_a_stored_one(&server, &l).await;
    assert!(report.written.is_empty());
    assert_eq!(
        stored(&server)["data"]["m.a"],
        entry(EntryState::Ok, 7).encode_compact(None)
    );
    // The stale patch is refused (409), then one fresh read decides.
    assert_eq!(gets_and_patches(&server), (1, 1));
}

#[tokio::test]
async fn a_stale_copy_is_re_read_and_the_write_keeps_foreign_changes() {
    let (server, l) = seeded().await;
    let mut cm = stored(&server);
    cm["data"]["version"] = serde_json::json!("46");
    server.put_object("configmaps", cm).unwrap();
    server.requests().reset();
    put(&l, "a", entry(EntryState::Ok, 1), WriteMode::Replace).await;
    let cm = stored(&server);
    assert_eq!(cm["data"]["version"], "46");
    assert_eq!(
        cm["data"]["m.a"],
        entry(EntryState::Ok, 1).encode_compact(None)
    );
    assert_eq!(gets_and_patches(&server), (1, 2));
}

#[tokio::test]
async fn a_repeated_attempt_token_is_only_answered_from_a_fresh_read() {
    let (server, l) = seeded().await;
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
    let (server, l) = seeded().await;
    put(&l, "a", entry(EntryState::Ok, 1), WriteMode::Replace).await;
    seed_a_over_a_stored_one(&server, &l).await;
    assert_eq!(gets_and_patches(&server), (1, 0));
    // An `ok` entry's message (its tolerated calls) stays in the entry; a failure's output
    // tail would go to the Secret (CONTRACT.md §5.2).
    let big = LedgerEntry {
        message: Some("x".repeat(CONFIGMAP_BUDGET_BYTES as usize)),
        ..entry(EntryState::Ok, 1)
    };
    server.requests().reset();
    let err = l
        .write(&[(slug("b"), big)], WriteMode::Replace)
        .await
        .unwrap_err();
    assert!(matches!(err, LedgerError::Full { .. }), "{err:?}");
    assert_eq!(gets_and_patches(&server), (1, 0));
}

#[tokio::test]
async fn the_lock_in_the_configmap_costs_one_patch_to_take_one_to_renew_and_one_to_release() {
    let (server, l) = seeded().await;
    let ttl = Duration::from_secs(30);
    let lease = l.acquire("runner-a", ttl).await.unwrap();
    assert_eq!(
        stored(&server)["metadata"]["annotations"][LOCK_ANNOTATION]
            .as_str()
            .map(|v| v.contains("\"holder\":\"runner-a\"")),
        Some(true)
    );
    let lease = l.renew(&lease, ttl).await.unwrap();
    l.release(&lease).await.unwrap();
    assert_eq!(server.requests().count(Verb::Patch, "configmaps"), 3);
    assert_eq!(
        server.requests().count(Verb::Get, "leases"),
        1,
        "taking it checks the older runners' Lease"
    );
    assert_eq!(server.requests().total(), 4);
    assert!(stored(&server)["metadata"]["annotations"][LOCK_ANNOTATION].is_null());
    assert_eq!(stored(&server)["data"]["version"], "45", "data untouched");
}

/// Two handles on one ConfigMap whose lock expiry is judged on `clock`.
fn handles(
    server: &TestApiServer,
    clock: &Arc<migration_core::ManualClock>,
) -> (ConfigMapLedger, ConfigMapLedger) {
    let handle = || {
        let options = Options {
            clock: clock.clone(),
            ..options()
        };
        ConfigMapLedger::with_options(server.client(), NS, NAME, options)
    };
    (handle(), handle())
}

fn manual_clock() -> Arc<migration_core::ManualClock> {
    Arc::new(migration_core::ManualClock::new(Timestamp::from_unix(
        1_786_529_040,
    )))
}

#[tokio::test]
async fn a_remembered_lock_taken_over_meanwhile_is_lost_and_left_alone() {
    let (server, _) = seeded().await;
    let clock = manual_clock();
    let (a, b) = handles(&server, &clock);
    let ttl = Duration::from_secs(30);
    let lease_a = a.acquire("runner-a", ttl).await.unwrap();
    // A stalls past its expiry; B takes the lock over.
    clock.advance(Duration::from_secs(31));
    let lease_b = b.acquire("runner-b", ttl).await.unwrap();
    let err = a.renew(&lease_a, ttl).await.unwrap_err();
    assert!(matches!(err, LedgerError::LockLost { .. }), "{err:?}");
    a.release(&lease_a).await.unwrap();
    let holder = |server: &TestApiServer| {
        stored(server)["metadata"]["annotations"][LOCK_ANNOTATION]
            .as_str()
            .map(|v| v.contains("\"holder\":\"runner-b\""))
    };
    assert_eq!(
        holder(&server),
        Some(true),
        "a stale release freed B's lock"
    );
    b.release(&lease_b).await.unwrap();
    assert_eq!(holder(&server), None);
    // Held by another: refused on a fresh read, nothing written.
    b.acquire("runner-b", ttl).await.unwrap();
    server.requests().reset();
    let err = a.acquire("runner-a", ttl).await.unwrap_err();
    assert!(matches!(err, LedgerError::LockHeld { .. }), "{err:?}");
    assert_eq!(server.requests().count(Verb::Patch, "configmaps"), 0);
}

/// The step that takes the lock with the first attempt mark.
fn take<'a>(
    attempt: &'a Slug,
    token: &'a str,
    revision: Option<&'a str>,
) -> migration_core::step::StepWrite<'a> {
    migration_core::step::StepWrite {
        records: &[],
        attempt: Some(migration_core::step::AttemptNote {
            slug: attempt,
            token,
            floor: 0,
        }),
        mode: migration_core::step::StepMode::Take {
            holder: "runner-a",
            ttl: Duration::from_secs(60),
            revision,
        },
        failure: None,
    }
}

/// Takes the lock on what `l` reads now, with the first attempt mark of `a` (token `t1`);
/// the take must succeed. Returns the lease.
async fn take_with_a_first_attempt(l: &ConfigMapLedger) -> migration_core::Lease {
    let revision = l.read().await.unwrap().unwrap().revision;
    l.write_step(&take(&slug("a"), "t1", revision.as_deref()))
        .await
        .unwrap()
        .lease
        .unwrap()
}

/// The step that writes `records` and releases `lease`.
fn release<'a>(
    records: &'a [(Slug, LedgerEntry)],
    lease: &'a migration_core::Lease,
) -> migration_core::step::StepWrite<'a> {
    migration_core::step::StepWrite {
        records,
        attempt: None,
        mode: migration_core::step::StepMode::Release { lease },
        failure: None,
    }
}

#[tokio::test]
async fn a_lost_reply_to_the_step_that_takes_the_lock_is_recognised_on_the_retry() {
    let (server, l) = seeded().await;
    let revision = l.read().await.unwrap().unwrap().revision;
    server.faults().inject(
        test_apiserver::FaultRule::on(Verb::Patch, "configmaps")
            .once()
            .lost_reply(test_apiserver::LostReply::InternalError),
    );
    server.requests().reset();
    // The take landed but its reply was lost: the retry reads the object,
    // whose revision is no longer the planned one, and finds its own take
    // there rather than a change by someone else.
    let report = l
        .write_step(&take(&slug("a"), "t1", revision.as_deref()))
        .await
        .unwrap();
    assert_eq!(report.attempts, Some(1));
    assert_eq!(report.lease.unwrap().holder, "runner-a");
    assert_eq!(
        stored(&server)["data"]["a.a"],
        format!(
            r#"{{"count":1,"token":"{}"}}"#,
            migration_core::ledger::fingerprint("t1")
        )
    );
    assert_eq!(
        server.requests().count(Verb::Patch, "configmaps"),
        1,
        "nothing left to write after the lost reply"
    );
}

#[tokio::test]
async fn a_409_on_a_step_under_the_lock_reads_again_and_writes_if_the_lock_is_still_ours() {
    let (server, _) = seeded().await;
    let clock = manual_clock();
    let (a, b) = handles(&server, &clock);
    let lease = take_with_a_first_attempt(&a).await;
    // Someone else's seeding write makes A's copy stale.
    put_if_absent(&b, "z", entry(EntryState::Legacy, 0)).await;
    server.requests().reset();
    let record = [(slug("a"), entry(EntryState::Ok, 1))];
    a.write_step(&release(&record, &lease)).await.unwrap();
    assert_eq!(gets_and_patches(&server), (1, 2));
    let cm = stored(&server);
    assert!(cm["data"]["m.a"].is_string() && cm["data"]["m.z"].is_string());
    assert!(cm["metadata"]["annotations"][LOCK_ANNOTATION].is_null());
    // Had another holder taken the lock meanwhile, the step writes nothing.
    let revision = b.read().await.unwrap().unwrap().revision;
    let lease_b = b
        .write_step(&migration_core::step::StepWrite {
            mode: migration_core::step::StepMode::Take {
                holder: "runner-b",
                ttl: Duration::from_secs(60),
                revision: revision.as_deref(),
            },
            ..take(&slug("b"), "t2", None)
        })
        .await
        .unwrap()
        .lease
        .unwrap();
    let late = [(slug("q"), entry(EntryState::Ok, 1))];
    let err = a
        .write_step(&migration_core::step::StepWrite {
            records: &late,
            attempt: None,
            mode: migration_core::step::StepMode::Hold {
                lease: &lease,
                ttl: Duration::from_secs(60),
            },
            failure: None,
        })
        .await
        .unwrap_err();
    assert!(matches!(err, LedgerError::LockLost { .. }), "{err:?}");
    assert!(stored(&server)["data"]["m.q"].is_null());
    b.release(&lease_b).await.unwrap();
}

#[tokio::test]
async fn a_lost_reply_to_the_step_that_releases_the_lock_is_recognised_by_its_records() {
    let (server, l) = seeded().await;
    let lease = take_with_a_first_attempt(&l).await;
    server.faults().inject(
        test_apiserver::FaultRule::on(Verb::Patch, "configmaps")
            .once()
            .lost_reply(test_apiserver::LostReply::DropConnection),
    );
    let record = [(slug("a"), entry(EntryState::Ok, 1))];
    // The release landed; the retry finds the lock gone but every record in
    // place: that is this write, not a lock lost to someone else.
    let report = l.write_step(&release(&record, &lease)).await.unwrap();
    assert_eq!(report.lease, None);
    let cm = stored(&server);
    assert_eq!(cm["data"]["m.a"], record[0].1.encode_compact(None));
    assert!(cm["metadata"]["annotations"][LOCK_ANNOTATION].is_null());
}

#[tokio::test]
async fn a_runner_of_an_older_release_holding_the_lease_keeps_a_newer_run_out_until_it_expires() {
    let (server, l) = seeded().await;
    let clock = manual_clock();
    let (new, _) = handles(&server, &clock);
    // An older runner locks this ledger through the Lease beside it, with
    // the code it ran then.
    let older = migration_kube::LeaseLock::new(
        server.client(),
        NS,
        &older_runners_lease(NAME),
        migration_kube::Writer {
            ledger: "configmap cozy-system/cozystack-version".to_owned(),
            retry: RetryPolicy::immediate(4),
        },
        clock.clone(),
    );
    older
        .acquire("old-runner/pid-3", Duration::from_secs(60))
        .await
        .unwrap();
    let revision = l.read().await.unwrap().unwrap().revision;
    server.requests().reset();
    let held = |e: &LedgerError| matches!(e, LedgerError::LockHeld { holder, .. } if holder == "old-runner/pid-3");
    let err = new
        .acquire("runner-a", Duration::from_secs(60))
        .await
        .unwrap_err();
    assert!(held(&err), "{err:?}");
    let first = slug("first");
    let err = new
        .write_step(&take(&first, "t-1", revision.as_deref()))
        .await
        .unwrap_err();
    assert!(held(&err), "{err:?}");
    assert_eq!(
        server.requests().count(Verb::Patch, "configmaps"),
        0,
        "nothing written"
    );
    assert!(stored(&server)["metadata"]["annotations"][LOCK_ANNOTATION].is_null());
    // Its lease lapses (a crashed older runner): the newer run goes ahead.
    clock.advance(Duration::from_secs(61));
    let report = new
        .write_step(&take(&first, "t-1", revision.as_deref()))
        .await
        .unwrap();
    assert_eq!(report.attempts, Some(1));
}
