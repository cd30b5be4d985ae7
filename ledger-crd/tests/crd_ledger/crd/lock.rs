//! The run lock.

use super::*;

#[tokio::test]
async fn the_lock_is_a_lease_in_the_lease_namespace() {
    let (server, l) = served_ledger().await;
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
