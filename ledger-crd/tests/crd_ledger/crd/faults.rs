//! API faults the shared suite (tests/faults.rs) does not cover: the CRD's
//! own absence and the two-request create.

use super::*;

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

/// A fresh install of three entries on a server that loses the reply
/// (`how`) to the first `verb` on `resource`: the server, and the entries
/// installed.
async fn fresh_install_through(
    verb: Verb,
    resource: &str,
    how: LostReply,
) -> (TestApiServer, Vec<(Slug, LedgerEntry)>) {
    let server = served().await;
    server
        .faults()
        .inject(FaultRule::on(verb, resource).once().lost_reply(how));
    let seeded = entries(0..3, EntryState::SkippedFreshInstall);
    ledger(&server).create(&seeded).await.unwrap();
    (server, seeded)
}

#[tokio::test]
async fn a_lost_create_reply_completes_the_same_object_once() {
    let (server, seeded) =
        fresh_install_through(Verb::Create, "migrationledgers", LostReply::DropConnection).await;
    assert_eq!(server.objects(RESOURCE).len(), 1);
    let snapshot = ledger(&server).read().await.unwrap().unwrap();
    for (slug, entry) in &seeded {
        assert_eq!(snapshot.entry(slug), Some(entry));
    }
}

#[tokio::test]
async fn a_lost_reply_to_the_seeding_status_write_is_recognised_not_repeated() {
    let (server, _) = fresh_install_through(
        Verb::Patch,
        "migrationledgers/status",
        LostReply::InternalError,
    )
    .await;
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
