//! Printer columns and the Ready condition.

use super::*;

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
    put(&l, 1..2, EntryState::Failed, WriteMode::Replace).await;
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
    put(&l, 2..3, EntryState::Failed, WriteMode::Replace).await;
    let ready = stored_condition(&server, "Ready");
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
    put(&l, 1..3, EntryState::Ok, WriteMode::Replace).await;
    let ready = stored_condition(&server, "Ready");
    assert_eq!(ready["status"], "True");
    assert_eq!(
        ready["lastTransitionTime"],
        Timestamp::from_unix(T0 + 180).to_string()
    );
    assert_eq!(stored(&server)["status"]["summary"]["failed"], 0);
}

#[tokio::test]
async fn the_ready_message_names_at_most_twenty_slugs() {
    let (server, l) = served_ledger().await;
    l.create(&entries(0..25, EntryState::Failed)).await.unwrap();
    let message = stored_condition(&server, "Ready")["message"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        message.starts_with("25 migrations failed: s-0, s-1, "),
        "{message}"
    );
    assert!(message.ends_with(" and 5 more"), "{message}");
}
