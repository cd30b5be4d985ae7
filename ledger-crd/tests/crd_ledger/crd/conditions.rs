//! Conditions set by other controllers.

use super::*;

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
    let set = stored_condition(&server, "BackgroundMigrations");
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
    put(&l, 5..6, EntryState::Failed, WriteMode::Replace).await;
    let object = stored(&server);
    assert_eq!(condition(&object, "BackgroundMigrations")["reason"], "Idle");
    assert_eq!(condition(&object, "Ready")["status"], "False");
}

#[tokio::test]
async fn set_condition_refuses_ready_and_malformed_conditions_before_sending() {
    let (server, l) = served_ledger().await;
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
    let set = stored_condition(&server, "migrations.cozystack.io/Background");
    assert!(set["message"].as_str().unwrap().len() <= 32_768);
    assert_eq!(set["status"], "Unknown");
}
