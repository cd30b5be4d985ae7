//! The run lock.

use super::*;

#[tokio::test]
async fn the_lock_lives_in_the_status_of_the_ledger_object_and_no_lease_is_written() {
    let (server, l) = served_ledger().await;
    l.create(&[]).await.unwrap();
    let lease = l
        .acquire("runner-a/pid-1", Duration::from_secs(30))
        .await
        .unwrap();
    let lock = &stored(&server)["status"]["lock"];
    assert_eq!(lock["holder"], "runner-a/pid-1");
    assert_eq!(lock["token"], lease.token.as_str());
    assert_eq!(lock["ttl_seconds"], 30);
    assert!(server.objects("leases").is_empty(), "no Lease is written");
    l.release(&lease).await.unwrap();
    assert!(stored(&server)["status"].get("lock").is_none());
    assert_eq!(server.requests().count(Verb::Create, "leases"), 0);
}

#[tokio::test]
async fn an_older_runners_lease_in_the_lease_namespace_keeps_a_newer_run_out() {
    let server = served().await;
    let clock = clock();
    let custom = CrdLedger::with_options(
        server.client(),
        NAME,
        Options {
            lease_namespace: "tenant-root".into(),
            lease_name: Some("bundle-run".into()),
            ..options(&clock)
        },
    );
    custom.create(&[]).await.unwrap();
    // A runner of an older release locks the ledger through the Lease.
    let older = migration_kube::LeaseLock::new(
        server.client(),
        "tenant-root",
        "bundle-run",
        migration_kube::Writer {
            ledger: "older".into(),
            retry: RetryPolicy::immediate(3),
        },
        clock.clone(),
    );
    let held = older
        .acquire("older-runner", Duration::from_secs(30))
        .await
        .unwrap();
    match custom.acquire("runner-b", Duration::from_secs(30)).await {
        Err(LedgerError::LockHeld { holder, .. }) => assert_eq!(holder, "older-runner"),
        other => panic!("the older runner's Lease must keep the lock, got {other:?}"),
    }
    assert!(stored(&server)["status"].get("lock").is_none());
    older.release(&held).await.unwrap();
    custom
        .acquire("runner-b", Duration::from_secs(30))
        .await
        .unwrap();
    assert_eq!(stored(&server)["status"]["lock"]["holder"], "runner-b");
}

/// The answer a kube-apiserver 1.34 gives a `fieldValidation=Strict` status
/// write that sets a field its installed CRD does not declare (recorded
/// against the CRD of the release before `status.lock`; the patched object
/// it quotes is cut here).
fn strict_refusal(field: &str) -> FaultRule {
    FaultRule::on(Verb::Patch, "migrationledgers/status").action(test_apiserver::Action::Respond {
        code: 422,
        reason: "Invalid".into(),
        // The quoted object holds an entry message that itself reads like
        // an unknown field: only the server's own verdict at the end counts.
        message: format!(
            r#" "" is invalid: patch: Invalid value: "{{\"apiVersion\":\"migrations.cozystack.io/v1alpha1\",\"status\":{{\"m\":\"unknown field \\\"status.x\\\"\"}}}}": strict decoding error: unknown field "{field}""#
        ),
        retry_after: None,
    })
}

#[tokio::test]
async fn an_outdated_installed_crd_is_reported_naming_the_crd_and_the_field_before_anything_is_written()
 {
    let (server, l) = served_ledger().await;
    l.create(&entries(0..1, EntryState::Ok)).await.unwrap();
    let before = stored(&server);
    let rule = server.faults().inject(strict_refusal("status.lock"));
    let err = l
        .acquire("runner-a", Duration::from_secs(30))
        .await
        .unwrap_err();
    assert_eq!(
        server.faults().fired(rule),
        1,
        "refused once, never retried"
    );
    let text = err.to_string();
    for needle in [
        "migrationledgers.migrations.cozystack.io",
        "status.lock",
        "migrate crd | kubectl apply -f -",
        "nothing was written",
    ] {
        assert!(text.contains(needle), "{needle:?} missing from: {text}");
    }
    assert!(
        !text.contains("apiVersion"),
        "the patched object the server quotes is not repeated: {text}"
    );
    assert!(matches!(err, LedgerError::Permanent { .. }), "{err:?}");
    assert_eq!(stored(&server), before, "nothing was written");
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
