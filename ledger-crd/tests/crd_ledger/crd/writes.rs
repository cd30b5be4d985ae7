//! Where writes go.

use super::*;

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
    let (server, l) = served_ledger().await;
    l.create(&entries(0..2, EntryState::Ok)).await.unwrap();
    put(&l, 2..3, EntryState::Legacy, WriteMode::OnlyIfAbsent).await;
    put(&l, 0..1, EntryState::Revoked, WriteMode::Replace).await;
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
    let (server, l) = served_ledger().await;
    // A chart applies the object: spec, labels and annotations, and (by
    // mistake) a status; the status subresource keeps entries out of reach.
    let api = dynamic_api(&server);
    scenarios::a_chart_applies_spec_over_entries(&l, &api, NAME).await;
    scenarios::entry_writes_leave_the_charts_fields_alone(&l, &api, NAME).await;
}
