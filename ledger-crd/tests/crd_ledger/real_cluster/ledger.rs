//! The backend's reads and writes through the real schema: fresh installs,
//! declared ledgers, races, version types and exact storage of entries.

use super::*;
use kube_ledger_testing::output_tails::{self, Scope, Subject, ledger_reader};

#[tokio::test]
#[ignore = "needs MIGRATE_TEST_KUBECONFIG (examples/kube-testenv)"]
async fn a_fresh_install_stores_typed_entries_and_reads_back_on_a_real_server() {
    let f = or_skip!(Fixture::new("fresh install", "fresh").await);
    use migration_core::EntryState;
    let l = f.ledger();
    assert_eq!(l.read().await.unwrap(), None, "no object: a fresh install");
    l.create(&entries(0..5, EntryState::SkippedFreshInstall))
        .await
        .unwrap();
    let object = f.stored().await;
    assert_eq!(object["status"]["initialized"], true);
    assert_eq!(
        object["metadata"]["annotations"]["migrations.cozystack.io/created-by"],
        "cozystack-migrate"
    );
    // Compact, naming a shared record in status.contexts, which the real
    // server's schema keeps too.
    let id = object["status"]["entries"]["s-1"]["c"].as_str();
    assert!(
        object["status"]["contexts"][id.unwrap()].is_object(),
        "{object}"
    );
    assert_eq!(
        object["status"]["entries"]["s-1"],
        migration_core::testing::sample_entry(EntryState::SkippedFreshInstall, 1).compact_value(id),
        "typed JSON objects, kept exactly by the real server's schema"
    );
    assert_eq!(
        l.read()
            .await
            .unwrap()
            .unwrap()
            .entry(&migration_core::testing::slug(1)),
        Some(&migration_core::testing::sample_entry(
            EntryState::SkippedFreshInstall,
            1
        ))
    );
    let managers: Vec<_> = object["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["manager"].as_str().unwrap().to_owned())
        .collect();
    assert!(
        managers.iter().all(|m| m == "cozystack-migrate"),
        "{managers:?}"
    );
    assert!(matches!(
        l.create(&entries(0..1, EntryState::Ok)).await.unwrap_err(),
        migration_core::LedgerError::AlreadyExists { .. }
    ));
    assert_eq!(l.read().await.unwrap().unwrap().records.len(), 5);
    f.cleanup().await;
}

#[tokio::test]
#[ignore = "needs MIGRATE_TEST_KUBECONFIG (examples/kube-testenv)"]
async fn a_ledger_declared_by_a_chart_is_an_existing_cluster_on_a_real_server() {
    let f = or_skip!(Fixture::new("chart-declared ledger", "declared").await);
    f.declare(json!({"version": 45})).await.unwrap();
    scenarios::a_declared_ledger_is_an_existing_cluster(&f.ledger(), &f.api(), &f.name).await;
    f.cleanup().await;
}

#[tokio::test]
#[ignore = "needs MIGRATE_TEST_KUBECONFIG (examples/kube-testenv)"]
async fn two_racing_fresh_installs_store_exactly_one_seed_on_a_real_server() {
    let f = or_skip!(Fixture::new("racing fresh installs", "race").await);
    use migration_core::{EntryState, LedgerError};
    let (a, b) = (f.ledger(), f.ledger());
    let seed_a = entries(0..3, EntryState::SkippedFreshInstall);
    let seed_b = entries(10..12, EntryState::SkippedFreshInstall);
    let (ra, rb) = tokio::join!(a.create(&seed_a), b.create(&seed_b));
    let snapshot = a.read().await.unwrap().unwrap();
    match (ra, rb) {
        (Ok(()), Err(LedgerError::AlreadyExists { .. })) => assert_eq!(snapshot.records.len(), 3),
        (Err(LedgerError::AlreadyExists { .. }), Ok(())) => assert_eq!(snapshot.records.len(), 2),
        other => panic!("exactly one create must win: {other:?}"),
    }
    f.cleanup().await;
}

#[tokio::test]
#[ignore = "needs MIGRATE_TEST_KUBECONFIG (examples/kube-testenv)"]
async fn the_real_schema_takes_an_integer_or_a_string_version_and_refuses_other_types() {
    let f = or_skip!(Fixture::new("spec.version schema", "version").await);
    use migration_core::LegacyVersion;
    for (version, expected) in [
        (json!(45), LegacyVersion::Known(45)),
        (json!("46"), LegacyVersion::Known(46)),
    ] {
        f.declare(json!({"version": version})).await.unwrap();
        assert_eq!(f.ledger().read().await.unwrap().unwrap().version, expected);
        f.api()
            .delete(&f.name, &DeleteParams::default())
            .await
            .unwrap();
    }
    // Values the schema lets through but that are no version: corrupt, never "absent".
    for odd in [json!(-1), json!("v45")] {
        f.declare(json!({"version": odd})).await.unwrap();
        assert!(
            matches!(
                f.ledger().read().await.unwrap().unwrap().version,
                LegacyVersion::Corrupt { .. }
            ),
            "{odd}"
        );
        f.api()
            .delete(&f.name, &DeleteParams::default())
            .await
            .unwrap();
    }
    // The real server's schema refuses the rest outright (the test double does not check
    // schemas; tests/crd covers how the engine reads such values).
    for bad in [json!(4.5), json!([45]), json!({"v": 45})] {
        let status = api_status(f.declare(json!({"version": bad})).await);
        assert_eq!(
            (status.code, status.reason.as_str()),
            (422, "Invalid"),
            "{bad}: {status:?}"
        );
        assert!(status.message.contains("spec.version"), "{status:?}");
    }
    f.cleanup().await;
}

#[tokio::test]
#[ignore = "needs MIGRATE_TEST_KUBECONFIG (examples/kube-testenv)"]
async fn entries_are_replaced_whole_and_unknown_fields_survive_the_real_schema() {
    let f = or_skip!(Fixture::new("entry replacement and unknown fields", "fields").await);
    use migration_core::testing::{sample_entry, slug};
    use migration_core::{EntryState, WriteMode};
    let l = f.ledger();
    let mut failed = sample_entry(EntryState::Failed, 1);
    failed
        .extra
        .insert("retry_after".into(), json!({"seconds": 30}));
    let mut newer = sample_entry(EntryState::Ok, 2);
    newer
        .extra
        .insert("node".into(), json!({"a": [1, null], "gone": null}));
    newer
        .extra
        .insert("cleared".into(), serde_json::Value::Null);
    l.create(&[(slug(1), failed), (slug(2), newer.clone())])
        .await
        .unwrap();
    let ok = sample_entry(EntryState::Ok, 3);
    l.write(&[(slug(1), ok.clone())], WriteMode::Replace)
        .await
        .unwrap();
    let object = f.stored().await;
    let stored = &object["status"]["entries"]["s-1"];
    assert_eq!(
        *stored,
        ok.compact_value(stored["c"].as_str()),
        "a merge would have kept reason, message and retry_after"
    );
    let snapshot = l.read().await.unwrap().unwrap();
    assert_eq!(
        snapshot.entry(&slug(2)),
        Some(&newer),
        "fields a newer engine recorded (nulls included) are not pruned by the real server"
    );
    f.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs MIGRATE_TEST_KUBECONFIG (examples/kube-testenv)"]
async fn a_failures_output_is_kept_in_a_secret_owned_by_the_custom_resource_not_in_it() {
    let f = or_skip!(Fixture::new("output tails in a Secret", "safe35-tails").await);
    let group = "migrations.cozystack.io";
    let reader = ledger_reader(
        &f.cluster,
        &f.name,
        Scope::Cluster,
        group,
        "migrationledgers",
    );
    let reader = CrdLedger::with_options(reader, &f.name, f.options());
    let subject = Subject::new(&f.cluster, &f.name, f.ledger(), reader);
    output_tails::a_failures_output_is_kept_in_a_secret_owned_by_the_ledger(
        &subject,
        async || f.stored().await.to_string(),
        async || {
            f.stored().await["metadata"]["uid"]
                .as_str()
                .unwrap()
                .to_owned()
        },
    )
    .await;
    f.cleanup().await;
}
