//! The fault-injecting wrapper does what tests rely on it to do.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use ledger_memory::{Fault, FaultyLedger, MemoryLedger, Operation};
use migration_core::testing::fixtures::assert_transient;
use migration_core::testing::sample_record;
use migration_core::{EntryState, Ledger, LedgerError, WriteMode};

fn wrapped() -> (MemoryLedger, FaultyLedger) {
    let memory = MemoryLedger::new();
    let faulty = FaultyLedger::new(Arc::new(memory.clone()));
    (memory, faulty)
}

#[tokio::test]
async fn a_lost_reply_applies_the_effect_and_reports_a_transient_error() {
    let (memory, faulty) = wrapped();
    faulty.fail_next(Operation::Create, Fault::LostReply);
    let err = faulty
        .create(&[sample_record(1, EntryState::Ok)])
        .await
        .unwrap_err();
    assert_transient(&err, "create");
    assert!(
        memory.raw("m.s-1").is_some(),
        "the write must have taken effect"
    );
}

#[tokio::test]
async fn transient_and_permanent_faults_touch_nothing() {
    let (memory, faulty) = wrapped();
    faulty.fail_next(Operation::Create, Fault::Transient);
    faulty.fail_next(Operation::Create, Fault::Permanent);
    assert!(faulty.create(&[]).await.unwrap_err().is_transient());
    let err = faulty.create(&[]).await.unwrap_err();
    assert!(matches!(err, LedgerError::Permanent { .. }));
    assert!(!err.is_transient());
    assert!(
        memory.raw_data().is_none(),
        "a failed create must not create"
    );
    faulty.create(&[]).await.unwrap();
}

#[tokio::test]
async fn the_nth_call_fails_whatever_its_operation() {
    let (_, faulty) = wrapped();
    faulty.fail_call(3, Fault::Permanent);
    faulty.read().await.unwrap();
    faulty.create(&[]).await.unwrap();
    assert!(faulty.write(&[], WriteMode::Replace).await.is_err());
    faulty.write(&[], WriteMode::Replace).await.unwrap();
    let ops: Vec<_> = faulty
        .calls()
        .into_iter()
        .map(|(op, f)| (op, f.is_some()))
        .collect();
    assert_eq!(
        ops,
        [
            (Operation::Read, false),
            (Operation::Create, false),
            (Operation::Write, true),
            (Operation::Write, false)
        ]
    );
    assert_eq!(faulty.count(Operation::Write), 2);
}

#[tokio::test]
async fn a_schedule_is_consumed_one_call_at_a_time() {
    let (_, faulty) = wrapped();
    faulty.set_schedule([None, Some(Fault::Transient), None]);
    assert!(faulty.read().await.is_ok());
    assert!(faulty.read().await.is_err());
    assert!(faulty.read().await.is_ok());
    assert!(
        faulty.read().await.is_ok(),
        "an exhausted schedule means success"
    );
    faulty.reset_calls();
    assert!(faulty.calls().is_empty());
}
