//! Behaviour specific to the custom-resource ledger: what the object looks
//! like, which writes go where, the two-request fresh install and a crash
//! between its requests, the size budget, corruption, and the API faults
//! particular to a custom resource (the shared ones are in `faults.rs`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::scenarios::entries;
use common::{RESOURCE, scenarios};
use kube::core::{ApiResource, DynamicObject};
use kube::{Api, CustomResourceExt};
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
use migration_kube::fault_suite::assert_permanent;
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

// ---------------------------------------------------------------------------
// Where writes go.

#[tokio::test]
async fn a_fresh_install_is_a_create_then_one_status_write_carrying_the_resource_version() {
    let server = served().await;
    server.requests().reset();
    ledger(&server)
        .create(&entries(0..5, EntryState::SkippedFreshInstall))
        .await
        .unwrap();
    let log = server.requests().log();
    assert_eq!(
        log.iter()
            .map(|r| (r.verb, r.resource.as_str()))
            .collect::<Vec<_>>(),
        [
            (Verb::Create, "migrationledgers"),
            (Verb::Patch, "migrationledgers/status")
        ],
        "the fewest requests the API allows: it ignores .status on create"
    );
    let post: Value = serde_json::from_slice(&log[0].body).unwrap();
    assert!(post.get("status").is_none(), "{post}");
    assert_eq!(
        post["metadata"]["annotations"]["migrations.cozystack.io/created-by"],
        "cozystack-migrate"
    );
    assert!(
        log[0]
            .method_path
            .contains("fieldManager=cozystack-migrate"),
        "{:?}",
        log[0]
    );
    let patch = &log[1];
    assert_eq!(
        patch.content_type.as_deref(),
        Some("application/json-patch+json")
    );
    assert!(patch.method_path.contains("fieldManager=cozystack-migrate"));
    let ops: Value = serde_json::from_slice(&patch.body).unwrap();
    assert_eq!(ops[0]["op"], "replace");
    assert_eq!(ops[0]["path"], "/metadata/resourceVersion");
    assert!(ops[0]["value"].is_string(), "precondition missing: {ops}");

    let object = stored(&server);
    assert_eq!(object["status"]["initialized"], true);
    let stored_entries = object["status"]["entries"].as_object().unwrap();
    assert_eq!(stored_entries.len(), 5);
    // Compact, naming its shared record in status.contexts.
    let id = stored_entries["s-1"]["c"].as_str();
    assert!(object["status"]["contexts"][id.unwrap()].is_object());
    assert_eq!(
        stored_entries["s-1"],
        sample_entry(EntryState::SkippedFreshInstall, 1).compact_value(id),
        "entries are typed JSON objects, not strings"
    );
    assert!(stored_entries["s-1"]["n"].is_u64());
}

#[tokio::test]
async fn every_engine_write_goes_to_the_status_subresource_with_a_precondition() {
    let server = served().await;
    let l = ledger(&server);
    l.create(&entries(0..2, EntryState::Ok)).await.unwrap();
    l.write(&entries(2..3, EntryState::Legacy), WriteMode::OnlyIfAbsent)
        .await
        .unwrap();
    l.write(&entries(0..1, EntryState::Revoked), WriteMode::Replace)
        .await
        .unwrap();
    l.note_attempt(&slug(1), "run-1", 0).await.unwrap();
    l.set_condition(&LedgerCondition {
        type_: "BackgroundHealthy".into(),
        status: ConditionStatus::True,
        reason: "AllDone".into(),
        message: String::new(),
    })
    .await
    .unwrap();
    let log = server.requests().log();
    let writes: Vec<_> = log
        .iter()
        .filter(|r| matches!(r.verb, Verb::Patch | Verb::Update))
        .collect();
    assert_eq!(writes.len(), 5);
    for write in writes {
        assert_eq!(write.resource, "migrationledgers/status", "{write:?}");
        let ops: Value = serde_json::from_slice(&write.body).unwrap();
        assert_eq!(ops[0]["path"], "/metadata/resourceVersion", "{ops}");
    }
}

#[tokio::test]
async fn a_spec_write_cannot_touch_entries_and_entry_writes_leave_spec_and_metadata_alone() {
    let server = served().await;
    let l = ledger(&server);
    // A chart applies the object: spec, labels and annotations, and (by
    // mistake) a status; the status subresource keeps entries out of reach.
    let api = dynamic_api(&server);
    scenarios::a_chart_applies_spec_over_entries(&l, &api, NAME).await;
    scenarios::entry_writes_leave_the_charts_fields_alone(&l, &api, NAME).await;
}

// ---------------------------------------------------------------------------
// Printer columns and the Ready condition.

#[tokio::test]
async fn summary_and_ready_are_recomputed_by_every_write() {
    let server = served().await;
    let clock = clock();
    let l = CrdLedger::with_options(server.client(), NAME, options(&clock));
    let mut seeded = entries(0..3, EntryState::Ok);
    seeded.extend(entries(3..5, EntryState::SkippedFreshInstall));
    l.create(&seeded).await.unwrap();
    let object = stored(&server);
    let newest = sample_entry(EntryState::Ok, 4).at.to_string();
    assert_eq!(
        object["status"]["summary"],
        json!({"ok": 3, "failed": 0, "other": 2, "corrupt": 0, "newest": newest})
    );
    let ready = condition(&object, "Ready");
    assert_eq!(ready["status"], "True");
    assert_eq!(ready["reason"], "NoFailures");
    assert_eq!(ready["message"], "5 entries, none failed");
    assert_eq!(
        ready["lastTransitionTime"],
        Timestamp::from_unix(T0).to_string()
    );
    assert_eq!(ready["observedGeneration"], 1);

    clock.advance(Duration::from_secs(60));
    l.write(&entries(1..2, EntryState::Failed), WriteMode::Replace)
        .await
        .unwrap();
    let object = stored(&server);
    assert_eq!(object["status"]["summary"]["ok"], 2);
    assert_eq!(object["status"]["summary"]["failed"], 1);
    let ready = condition(&object, "Ready");
    assert_eq!(ready["status"], "False");
    assert_eq!(ready["reason"], "MigrationsFailed");
    assert_eq!(ready["message"], "1 migration failed: s-1");
    let went_false = Timestamp::from_unix(T0 + 60).to_string();
    assert_eq!(ready["lastTransitionTime"], went_false);

    clock.advance(Duration::from_secs(60));
    l.write(&entries(2..3, EntryState::Failed), WriteMode::Replace)
        .await
        .unwrap();
    let object = stored(&server);
    let ready = condition(&object, "Ready");
    assert_eq!(ready["message"], "2 migrations failed: s-1, s-2");
    assert_eq!(
        ready["lastTransitionTime"], went_false,
        "the transition time moves only when the status changes"
    );

    common::plant(&server, NAME, "m.broken", "{\"state\":\"ok\"");
    l.note_attempt(&slug(9), "t", 0).await.unwrap();
    let object = stored(&server);
    assert_eq!(object["status"]["summary"]["corrupt"], 1);
    let ready = condition(&object, "Ready");
    assert_eq!(ready["reason"], "CorruptEntries");
    let message = ready["message"].as_str().unwrap();
    assert!(
        message.contains("m.broken") && message.contains("s-1, s-2"),
        "{message}"
    );

    // Back to health once nothing is failed or corrupt.
    let mut object = stored(&server);
    object["status"]["entries"]
        .as_object_mut()
        .unwrap()
        .remove("broken");
    server.put_object(RESOURCE, object).unwrap();
    clock.advance(Duration::from_secs(60));
    l.write(&entries(1..3, EntryState::Ok), WriteMode::Replace)
        .await
        .unwrap();
    let object = stored(&server);
    let ready = condition(&object, "Ready");
    assert_eq!(ready["status"], "True");
    assert_eq!(
        ready["lastTransitionTime"],
        Timestamp::from_unix(T0 + 180).to_string()
    );
    assert_eq!(object["status"]["summary"]["failed"], 0);
}

#[tokio::test]
async fn the_ready_message_names_at_most_twenty_slugs() {
    let server = served().await;
    let l = ledger(&server);
    l.create(&entries(0..25, EntryState::Failed)).await.unwrap();
    let object = stored(&server);
    let message = condition(&object, "Ready")["message"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        message.starts_with("25 migrations failed: s-0, s-1, "),
        "{message}"
    );
    assert!(message.ends_with(" and 5 more"), "{message}");
}

// ---------------------------------------------------------------------------
// The two-request fresh install, interrupted.

#[tokio::test]
async fn a_crash_between_create_and_its_status_write_still_reads_as_a_fresh_install() {
    let server = served().await;
    let l = ledger(&server);
    // The status write fails permanently: the run dies with the object
    // created and its status never written.
    let rule = server.faults().inject(
        FaultRule::on(Verb::Patch, "migrationledgers/status")
            .once()
            .respond(403, "Forbidden"),
    );
    let err = l
        .create(&entries(0..3, EntryState::SkippedFreshInstall))
        .await
        .unwrap_err();
    assert_eq!(server.faults().fired(rule), 1);
    let text = err.to_string();
    assert!(
        text.contains("create") && text.contains("migrationledger cozystack/status"),
        "{text}"
    );
    let leftover = stored(&server);
    assert!(leftover.get("status").is_none(), "{leftover}");

    assert_eq!(
        l.read().await.unwrap(),
        None,
        "an uninitialized ledger is not an existing empty one: that would run every migration"
    );
    for err in [
        l.write(&entries(0..1, EntryState::Ok), WriteMode::OnlyIfAbsent)
            .await
            .unwrap_err(),
        l.write(&entries(0..1, EntryState::Ok), WriteMode::Replace)
            .await
            .unwrap_err(),
        l.note_attempt(&slug(0), "t", 0).await.unwrap_err(),
        l.set_condition(&LedgerCondition {
            type_: "BackgroundHealthy".into(),
            status: ConditionStatus::True,
            reason: "Idle".into(),
            message: String::new(),
        })
        .await
        .unwrap_err(),
    ] {
        assert!(matches!(err, LedgerError::NotFound { .. }), "{err:?}");
    }
    assert_eq!(stored(&server), leftover, "nothing was written to it");

    // The next run's fresh install completes the object instead of failing.
    server.requests().reset();
    let seeded = entries(0..4, EntryState::SkippedFreshInstall);
    l.create(&seeded).await.unwrap();
    assert_eq!(
        server
            .requests()
            .log()
            .iter()
            .map(|r| (r.verb, r.resource.as_str()))
            .collect::<Vec<_>>(),
        [
            (Verb::Create, "migrationledgers"),
            (Verb::Get, "migrationledgers"),
            (Verb::Patch, "migrationledgers/status"),
        ]
    );
    let snapshot = l.read().await.unwrap().unwrap();
    assert_eq!(snapshot.records.len(), 4);
    assert_eq!(
        stored(&server)["metadata"]["uid"],
        leftover["metadata"]["uid"],
        "the same object, completed"
    );

    // An initialized ledger is never completed again.
    server.requests().reset();
    let err = l.create(&entries(0..6, EntryState::Ok)).await.unwrap_err();
    assert!(matches!(err, LedgerError::AlreadyExists { .. }), "{err:?}");
    assert_eq!(status_patches(&server), 0);
    let snapshot = l.read().await.unwrap().unwrap();
    assert_eq!(snapshot.records.len(), 4);
    assert_eq!(
        snapshot.entry(&slug(0)).unwrap().state,
        EntryState::SkippedFreshInstall
    );
}

#[tokio::test]
async fn a_create_dropped_after_its_first_request_leaves_a_fresh_install() {
    let server = served().await;
    // The status write keeps failing and the caller gives up mid-retry (a
    // killed process, a cancelled future).
    server.faults().inject(
        FaultRule::on(Verb::Patch, "migrationledgers/status")
            .always()
            .respond(500, "InternalError"),
    );
    let slow = Options {
        retry: RetryPolicy {
            attempts: 6,
            base: Duration::from_secs(60),
            cap: Duration::from_secs(60),
        },
        ..Options::default()
    };
    let l = CrdLedger::with_options(server.client(), NAME, slow);
    let outcome = tokio::time::timeout(
        Duration::from_millis(500),
        l.create(&entries(0..3, EntryState::SkippedFreshInstall)),
    )
    .await;
    assert!(outcome.is_err(), "the create was dropped mid-way");
    assert!(server.object(RESOURCE, "", NAME).is_some());
    server.faults().clear();

    let l = ledger(&server);
    assert_eq!(l.read().await.unwrap(), None);
    l.create(&entries(0..2, EntryState::SkippedFreshInstall))
        .await
        .unwrap();
    assert_eq!(l.read().await.unwrap().unwrap().records.len(), 2);
}

#[tokio::test]
async fn an_uninitialized_object_with_any_sign_of_history_is_a_ledger() {
    // Declared legacy version: an old cluster, whoever created the object.
    let server = served().await;
    plant_seeding_object(&server, json!({"bundle": NAME, "version": "45"}));
    let snapshot = ledger(&server).read().await.unwrap().expect("a ledger");
    assert_eq!(snapshot.version, LegacyVersion::Known(45));

    // An entry or an attempt mark, even without the initialized marker.
    for key in ["m.s-1", "a.s-1"] {
        let server = served().await;
        plant_seeding_object(&server, json!({"bundle": NAME}));
        let value = if key.starts_with("m.") {
            sample_entry(EntryState::Ok, 1).encode()
        } else {
            r#"{"count":1,"token":"t"}"#.to_owned()
        };
        common::plant(&server, NAME, key, &value);
        let l = ledger(&server);
        assert!(l.read().await.unwrap().is_some(), "{key}");
        let err = l.create(&[]).await.unwrap_err();
        assert!(matches!(err, LedgerError::AlreadyExists { .. }), "{err:?}");
    }
}

#[tokio::test]
async fn a_ledger_declared_by_a_chart_is_an_existing_cluster_not_a_fresh_install() {
    let server = served().await;
    common::declare(&server, NAME, json!({"version": 45}));
    let l = ledger(&server);
    scenarios::a_declared_ledger_is_an_existing_cluster(&l, &dynamic_api(&server), NAME).await;
    assert_eq!(l.read().await.unwrap().unwrap().records.len(), 2);

    // Declared without a version, nothing recorded: an existing but empty
    // ledger (which runs every migration), exactly as a chart-created empty
    // ConfigMap is; only the engine's own unfinished seeding reads as absent.
    let server = served().await;
    common::declare(&server, NAME, json!({"bundle": NAME}));
    let snapshot = ledger(&server).read().await.unwrap().expect("it exists");
    assert!(snapshot.records.is_empty());
    assert_eq!(snapshot.version, LegacyVersion::Absent);
}

#[tokio::test]
async fn two_racing_fresh_installs_store_exactly_one_seed() {
    let server = served().await;
    let a = ledger(&server);
    let b = ledger(&server);
    let seed_a = entries(0..3, EntryState::SkippedFreshInstall);
    let seed_b = entries(10..12, EntryState::SkippedFreshInstall);
    let (ra, rb) = tokio::join!(a.create(&seed_a), b.create(&seed_b));
    let snapshot = a.read().await.unwrap().unwrap();
    match (ra, rb) {
        (Ok(()), Err(LedgerError::AlreadyExists { .. })) => {
            assert_eq!(snapshot.records.len(), 3);
            assert!(snapshot.entry(&slug(0)).is_some());
        }
        (Err(LedgerError::AlreadyExists { .. }), Ok(())) => {
            assert_eq!(snapshot.records.len(), 2);
            assert!(snapshot.entry(&slug(10)).is_some());
        }
        other => panic!("exactly one create must win: {other:?}"),
    }
}

#[tokio::test]
async fn the_spec_version_may_be_an_integer_or_a_string() {
    for (version, expected) in [
        (json!(45), LegacyVersion::Known(45)),
        (json!("46"), LegacyVersion::Known(46)),
        (json!(null), LegacyVersion::Absent),
    ] {
        let server = served().await;
        let l = ledger(&server);
        l.create(&[]).await.unwrap();
        let mut object = stored(&server);
        object["spec"]["version"] = version.clone();
        server.put_object(RESOURCE, object).unwrap();
        assert_eq!(
            l.read().await.unwrap().unwrap().version,
            expected,
            "{version}"
        );
    }
    for bad in [json!(-1), json!(4.5), json!("v45"), json!([45])] {
        let server = served().await;
        let l = ledger(&server);
        l.create(&[]).await.unwrap();
        let mut object = stored(&server);
        object["spec"]["version"] = bad.clone();
        server.put_object(RESOURCE, object).unwrap();
        assert!(
            matches!(
                l.read().await.unwrap().unwrap().version,
                LegacyVersion::Corrupt { .. }
            ),
            "{bad}"
        );
    }
}

// ---------------------------------------------------------------------------
// The size budget.

fn message_entry(bytes: usize) -> LedgerEntry {
    let mut entry = sample_entry(EntryState::Failed, 1);
    entry.message = Some("x".repeat(bytes));
    entry
}

#[tokio::test]
async fn the_budget_is_enforced_before_the_api_server_sees_the_write() {
    let server = served().await;
    let l = ledger(&server);
    l.create(&entries(0..2, EntryState::Ok)).await.unwrap();
    server.requests().reset();
    let err = l
        .write(
            &[(slug(5), message_entry(DEFAULT_BUDGET_BYTES as usize))],
            WriteMode::Replace,
        )
        .await
        .unwrap_err();
    assert!(
        matches!(err, LedgerError::Full { entry_count: 2, .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("ledger full"), "{err}");
    assert_eq!(status_patches(&server), 0, "refused before sending");

    let fresh = served().await;
    fresh.requests().reset();
    let err = ledger(&fresh)
        .create(&[(slug(1), message_entry(DEFAULT_BUDGET_BYTES as usize))])
        .await
        .unwrap_err();
    assert!(matches!(err, LedgerError::Full { .. }), "{err:?}");
    assert_eq!(fresh.requests().total(), 0, "not even the create was sent");
}

#[tokio::test]
async fn the_budget_stays_below_what_the_api_server_accepts() {
    // The test server refuses objects above etcd's limit as a real one does.
    let server = served().await;
    let l = ledger(&server);
    l.create(&entries(0..3, EntryState::Ok)).await.unwrap();
    let size = |v: &Value| serde_json::to_vec(v).unwrap().len() as u64;
    // Grow to just under the budget: accepted.
    let room = DEFAULT_BUDGET_BYTES - size(&stored(&server));
    l.write(
        &[(slug(10), message_entry((room - 2_000) as usize))],
        WriteMode::Replace,
    )
    .await
    .unwrap();
    let after = size(&stored(&server));
    assert!(after <= DEFAULT_BUDGET_BYTES, "{after}");
    // A write the API server would still accept (below etcd's limit) but
    // that leaves the budget's headroom is refused by us, unsent.
    server.requests().reset();
    let err = l
        .write(&[(slug(11), message_entry(3_000))], WriteMode::Replace)
        .await
        .unwrap_err();
    assert!(matches!(err, LedgerError::Full { .. }), "{err:?}");
    assert!(after + 3_500 < ETCD_REQUEST_LIMIT_BYTES);
    assert_eq!(status_patches(&server), 0);

    // Misconfigured above etcd's limit, the server's refusal fails closed.
    let careless = CrdLedger::with_options(
        server.client(),
        NAME,
        Options {
            budget: 4 * ETCD_REQUEST_LIMIT_BYTES,
            retry: RetryPolicy::immediate(3),
            ..Options::default()
        },
    );
    let err = careless
        .write(
            &[(slug(12), message_entry(ETCD_REQUEST_LIMIT_BYTES as usize))],
            WriteMode::Replace,
        )
        .await
        .unwrap_err();
    assert_permanent(&err, "write", "above etcd's limit");
    // Above 2 MiB a real API server (and so the double) answers with its etcd client's gRPC
    // limit rather than etcd's own "request is too large".
    assert!(err.to_string().contains("message larger than max"), "{err}");
}

#[tokio::test]
async fn the_size_the_budget_counts_is_the_size_the_server_stores() {
    let server = served().await;
    let budget = 40_000;
    let l = CrdLedger::with_options(
        server.client(),
        NAME,
        Options {
            budget,
            ..options(&clock())
        },
    );
    l.create(&[]).await.unwrap();
    let mut n = 0;
    let refused = loop {
        match l
            .write(&entries(n..n + 1, EntryState::Ok), WriteMode::OnlyIfAbsent)
            .await
        {
            Ok(_) => n += 1,
            Err(e) => break e,
        }
        assert!(n < 1_000, "the budget never refused a write");
    };
    let LedgerError::Full {
        current_bytes,
        would_be_bytes,
        ..
    } = refused
    else {
        panic!("{refused:?}")
    };
    let stored_bytes = serde_json::to_vec(&stored(&server)).unwrap().len() as u64;
    assert!(n > 50, "only {n} entries fitted");
    assert_eq!(
        current_bytes, stored_bytes,
        "the measure is the stored JSON"
    );
    assert!(stored_bytes <= budget);
    assert!(
        stored_bytes > budget - 1_000,
        "the budget is used, not wasted: {stored_bytes} of {budget}"
    );
    assert!(would_be_bytes > budget);
}

// ---------------------------------------------------------------------------
// Corruption.

#[tokio::test]
async fn one_corrupt_entry_among_ten_thousand_is_exactly_one_corrupt_record() {
    let server = served().await;
    let l = ledger(&server);
    l.create(&[]).await.unwrap();
    let value =
        serde_json::to_value(LedgerEntry::new(EntryState::Ok, Timestamp::from_unix(0))).unwrap();
    let mut object = stored(&server);
    let map = object["status"]
        .as_object_mut()
        .unwrap()
        .entry("entries")
        .or_insert(json!({}));
    for n in 0..10_000 {
        map[format!("k{n}")] = value.clone();
    }
    map["k4242"] = json!({"state": "ok"});
    map["Bad_Key"] = value.clone();
    object["status"]["attempts"] = json!({"k1": {"count": 2, "token": "t"}, "k2": "nope"});
    server.put_object(RESOURCE, object).unwrap();

    let snapshot = l.read().await.unwrap().unwrap();
    assert_eq!(snapshot.records.len(), 10_000);
    assert_eq!(
        migration_core::testing::corrupt_keys(&snapshot),
        [("k4242".to_owned(), "m.k4242".to_owned())]
    );
    assert!(matches!(
        snapshot.record(&Slug::parse("k1").unwrap()),
        Some(Record::Entry(_))
    ));
    let unreadable: Vec<_> = snapshot
        .unreadable_keys
        .iter()
        .map(|c| c.key.as_str())
        .collect();
    assert_eq!(unreadable, ["m.Bad_Key", "a.k2"]);
    assert_eq!(
        snapshot.attempts_started.get(&Slug::parse("k1").unwrap()),
        Some(&2)
    );

    // The corrupt entry blocks nothing else, and nothing overwrites it.
    l.write(&entries(0..1, EntryState::Ok), WriteMode::OnlyIfAbsent)
        .await
        .unwrap();
    let report = l
        .write(
            &[(
                Slug::parse("k4242").unwrap(),
                sample_entry(EntryState::Legacy, 1),
            )],
            WriteMode::OnlyIfAbsent,
        )
        .await
        .unwrap();
    assert_eq!(report.already_present, [Slug::parse("k4242").unwrap()]);
    assert_eq!(
        stored(&server)["status"]["entries"]["k4242"],
        json!({"state": "ok"})
    );
}

#[tokio::test]
async fn a_container_that_is_not_a_map_makes_the_ledger_unreadable_never_absent() {
    for (pointer, garbage) in [
        ("/status/entries", json!("oops")),
        ("/status/attempts", json!([1])),
        ("/status/initialized", json!("yes")),
        ("/status", json!(7)),
        ("/spec", json!("x")),
    ] {
        let server = served().await;
        let l = ledger(&server);
        l.create(&entries(0..1, EntryState::Ok)).await.unwrap();
        let mut object = stored(&server);
        let (parent, last) = pointer.rsplit_once('/').unwrap();
        let target = if parent.is_empty() {
            &mut object
        } else {
            object.pointer_mut(parent).unwrap()
        };
        target[last] = garbage;
        server.put_object(RESOURCE, object).unwrap();
        let err = l.read().await.unwrap_err();
        assert!(
            matches!(err, LedgerError::Unreadable { .. }),
            "{pointer}: {err:?}"
        );
        let last_word = pointer.rsplit('/').next().unwrap();
        assert!(err.to_string().contains(last_word), "{err}");
        let err = l
            .write(&entries(1..2, EntryState::Ok), WriteMode::OnlyIfAbsent)
            .await
            .unwrap_err();
        assert!(
            matches!(err, LedgerError::Unreadable { .. }),
            "{pointer}: {err:?}"
        );
    }
}

// ---------------------------------------------------------------------------
// Exact storage of entries.

#[tokio::test]
async fn a_replaced_entry_keeps_none_of_the_fields_it_replaces() {
    let server = served().await;
    let l = ledger(&server);
    let mut failed = sample_entry(EntryState::Failed, 1);
    failed
        .extra
        .insert("retry_after".into(), json!({"seconds": 30}));
    l.create(&[(slug(1), failed)]).await.unwrap();
    let ok = sample_entry(EntryState::Ok, 2);
    l.write(&[(slug(1), ok.clone())], WriteMode::Replace)
        .await
        .unwrap();
    let stored_entry = &stored(&server)["status"]["entries"]["s-1"];
    assert_eq!(
        *stored_entry,
        ok.compact_value(stored_entry["c"].as_str()),
        "a merge would have kept reason, message and retry_after"
    );
}

#[tokio::test]
async fn fields_a_newer_engine_recorded_survive_exactly() {
    let server = served().await;
    let l = ledger(&server);
    let mut newer = sample_entry(EntryState::Ok, 1);
    newer
        .extra
        .insert("node".into(), json!({"a": [1, null], "gone": null}));
    newer.extra.insert("cleared".into(), Value::Null);
    l.create(&[(slug(1), newer.clone())]).await.unwrap();
    l.write(&entries(2..4, EntryState::Legacy), WriteMode::OnlyIfAbsent)
        .await
        .unwrap();
    l.write(&entries(2..3, EntryState::Ok), WriteMode::Replace)
        .await
        .unwrap();
    let snapshot = l.read().await.unwrap().unwrap();
    assert_eq!(snapshot.entry(&slug(1)), Some(&newer));
    l.write(&[(slug(1), newer.clone())], WriteMode::Replace)
        .await
        .unwrap();
    assert_eq!(
        stored(&server)["status"]["entries"]["s-1"]["cleared"],
        Value::Null,
        "a null field is stored, not deleted"
    );
}

// ---------------------------------------------------------------------------
// API faults the shared suite (tests/faults.rs) does not cover: the CRD's
// own absence and the two-request create.

#[tokio::test]
async fn a_missing_crd_is_an_error_never_an_absent_ledger() {
    let server = TestApiServer::start().await; // MigrationLedger not served
    let l = ledger(&server);
    let err = l.read().await.unwrap_err();
    assert_permanent(&err, "read", "a missing CRD");
    assert!(
        err.to_string()
            .contains("install the CustomResourceDefinition"),
        "{err}"
    );
    let err = l.create(&[]).await.unwrap_err();
    assert!(
        err.to_string().contains("CustomResourceDefinition"),
        "{err}"
    );
    let err = l
        .write(&entries(0..1, EntryState::Ok), WriteMode::OnlyIfAbsent)
        .await
        .unwrap_err();
    assert!(matches!(err, LedgerError::Permanent { .. }), "{err:?}");
}

#[tokio::test]
async fn a_lost_create_reply_completes_the_same_object_once() {
    let server = served().await;
    server.faults().inject(
        FaultRule::on(Verb::Create, "migrationledgers")
            .once()
            .lost_reply(LostReply::DropConnection),
    );
    let seeded = entries(0..3, EntryState::SkippedFreshInstall);
    ledger(&server).create(&seeded).await.unwrap();
    assert_eq!(server.objects(RESOURCE).len(), 1);
    let snapshot = ledger(&server).read().await.unwrap().unwrap();
    for (slug, entry) in &seeded {
        assert_eq!(snapshot.entry(slug), Some(entry));
    }
}

#[tokio::test]
async fn a_lost_reply_to_the_seeding_status_write_is_recognised_not_repeated() {
    let server = served().await;
    server.faults().inject(
        FaultRule::on(Verb::Patch, "migrationledgers/status")
            .once()
            .lost_reply(LostReply::InternalError),
    );
    let seeded = entries(0..3, EntryState::SkippedFreshInstall);
    ledger(&server).create(&seeded).await.unwrap();
    assert_eq!(
        status_patches(&server),
        1,
        "the write landed; it is not sent again"
    );
    assert_eq!(
        ledger(&server).read().await.unwrap().unwrap().records.len(),
        3
    );
}

// ---------------------------------------------------------------------------
// Conditions set by other controllers.

fn background(status: ConditionStatus, reason: &str) -> LedgerCondition {
    LedgerCondition {
        type_: "BackgroundMigrations".into(),
        status,
        reason: reason.into(),
        message: format!("{reason} detail"),
    }
}

#[tokio::test]
async fn set_condition_adds_a_condition_and_clobbers_nothing() {
    let server = served().await;
    let clock = clock();
    let l = CrdLedger::with_options(server.client(), NAME, options(&clock));
    l.create(&entries(0..3, EntryState::Ok)).await.unwrap();
    l.note_attempt(&slug(1), "t", 0).await.unwrap();
    let before = stored(&server);

    clock.advance(Duration::from_secs(10));
    l.set_condition(&background(ConditionStatus::False, "Timeout"))
        .await
        .unwrap();
    let object = stored(&server);
    assert_eq!(object["status"]["entries"], before["status"]["entries"]);
    assert_eq!(object["status"]["attempts"], before["status"]["attempts"]);
    assert_eq!(object["spec"], before["spec"]);
    assert_eq!(condition(&object, "Ready"), condition(&before, "Ready"));
    let set = condition(&object, "BackgroundMigrations");
    assert_eq!(set["status"], "False");
    assert_eq!(set["reason"], "Timeout");
    assert_eq!(set["message"], "Timeout detail");
    assert_eq!(set["observedGeneration"], 1);
    let first = Timestamp::from_unix(T0 + 10).to_string();
    assert_eq!(set["lastTransitionTime"], first);

    // Same status, another reason: no transition. Another status: one.
    clock.advance(Duration::from_secs(10));
    l.set_condition(&background(ConditionStatus::False, "RequirementUnmet"))
        .await
        .unwrap();
    let object = stored(&server);
    let set = condition(&object, "BackgroundMigrations");
    assert_eq!(set["reason"], "RequirementUnmet");
    assert_eq!(set["lastTransitionTime"], first);
    clock.advance(Duration::from_secs(10));
    l.set_condition(&background(ConditionStatus::True, "Idle"))
        .await
        .unwrap();
    let object = stored(&server);
    assert_eq!(
        condition(&object, "BackgroundMigrations")["lastTransitionTime"],
        Timestamp::from_unix(T0 + 30).to_string()
    );
    assert_eq!(object["status"]["conditions"].as_array().unwrap().len(), 2);

    // Ledger writes keep it.
    l.write(&entries(5..6, EntryState::Failed), WriteMode::Replace)
        .await
        .unwrap();
    let object = stored(&server);
    assert_eq!(condition(&object, "BackgroundMigrations")["reason"], "Idle");
    assert_eq!(condition(&object, "Ready")["status"], "False");
}

#[tokio::test]
async fn set_condition_refuses_ready_and_malformed_conditions_before_sending() {
    let server = served().await;
    let l = ledger(&server);
    l.create(&[]).await.unwrap();
    server.requests().reset();
    for bad in [
        LedgerCondition {
            type_: "Ready".into(),
            ..background(ConditionStatus::True, "Fine")
        },
        background(ConditionStatus::False, "not camel case"),
        background(ConditionStatus::False, ""),
        LedgerCondition {
            type_: "bad type!".into(),
            ..background(ConditionStatus::True, "Fine")
        },
    ] {
        let err = l.set_condition(&bad).await.unwrap_err();
        assert_permanent(&err, "set condition", format_args!("{bad:?}"));
    }
    assert_eq!(server.requests().total(), 0);
    l.set_condition(&LedgerCondition {
        type_: "migrations.cozystack.io/Background".into(),
        message: "é".repeat(20_000),
        ..background(ConditionStatus::Unknown, "Starting")
    })
    .await
    .unwrap();
    let object = stored(&server);
    let set = condition(&object, "migrations.cozystack.io/Background");
    assert!(set["message"].as_str().unwrap().len() <= 32_768);
    assert_eq!(set["status"], "Unknown");
}

// ---------------------------------------------------------------------------
// The run lock.

#[tokio::test]
async fn the_lock_is_a_lease_in_the_lease_namespace() {
    let server = served().await;
    let l = ledger(&server);
    let lease = l
        .acquire("runner-a/pid-1", Duration::from_secs(30))
        .await
        .unwrap();
    let stored = server
        .object("leases", "cozy-system", "cozystack-lock")
        .expect("a Lease in cozy-system");
    assert_eq!(stored["spec"]["holderIdentity"], "runner-a/pid-1");
    l.release(&lease).await.unwrap();
    assert!(
        server
            .object("leases", "cozy-system", "cozystack-lock")
            .is_none()
    );

    let custom = CrdLedger::with_options(
        server.client(),
        NAME,
        Options {
            lease_namespace: "tenant-root".into(),
            lease_name: Some("bundle-run".into()),
            ..Options::default()
        },
    );
    custom
        .acquire("runner-b", Duration::from_secs(30))
        .await
        .unwrap();
    assert!(
        server
            .object("leases", "tenant-root", "bundle-run")
            .is_some()
    );
}

#[tokio::test]
async fn several_bundles_keep_separate_ledgers() {
    let server = served().await;
    let a = CrdLedger::new(server.client(), "cozystack");
    let b = CrdLedger::new(server.client(), "tenant-apps");
    a.create(&entries(0..2, EntryState::Ok)).await.unwrap();
    assert_eq!(b.read().await.unwrap(), None);
    b.create(&entries(5..6, EntryState::Legacy)).await.unwrap();
    assert_eq!(a.read().await.unwrap().unwrap().records.len(), 2);
    assert_eq!(b.read().await.unwrap().unwrap().records.len(), 1);
    assert_eq!(b.describe(), "migrationledger tenant-apps");
    assert_eq!(
        MigrationLedger::crd_name(),
        "migrationledgers.migrations.cozystack.io"
    );
}
