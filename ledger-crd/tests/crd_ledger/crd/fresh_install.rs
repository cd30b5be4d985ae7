//! The two-request fresh install, interrupted.

use super::*;

#[tokio::test]
async fn a_crash_between_create_and_its_status_write_still_reads_as_a_fresh_install() {
    let (server, l) = served_ledger().await;
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

/// The version a fresh ledger reads back once its `spec.version` is set to
/// `version` by someone else.
async fn version_read_back(version: &Value) -> LegacyVersion {
    let (server, l) = served_ledger().await;
    l.create(&[]).await.unwrap();
    let mut object = stored(&server);
    object["spec"]["version"] = version.clone();
    server.put_object(RESOURCE, object).unwrap();
    l.read().await.unwrap().unwrap().version
}

#[tokio::test]
async fn the_spec_version_may_be_an_integer_or_a_string() {
    for (version, expected) in [
        (json!(45), LegacyVersion::Known(45)),
        (json!("46"), LegacyVersion::Known(46)),
        (json!(null), LegacyVersion::Absent),
    ] {
        assert_eq!(version_read_back(&version).await, expected, "{version}");
    }
    for bad in [json!(-1), json!(4.5), json!("v45"), json!([45])] {
        assert!(
            matches!(version_read_back(&bad).await, LegacyVersion::Corrupt { .. }),
            "{bad}"
        );
    }
}
