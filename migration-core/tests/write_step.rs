//! `Migrator::write_step`, the run's combined write, when the backend's
//! retries could not absorb a fault: a lost reply is reconciled by reading
//! the ledger once, and what cannot be confirmed is never assumed.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use ledger_memory::{Fault, FaultyLedger, MemoryLedger, Operation};
use migration_core::step::{AttemptNote, LockStep, StepWrite};
use migration_core::testing::fixtures::{TreeBuilder, clock, shared_clock};
use migration_core::testing::{sample_entry, slug};
use migration_core::{EntryState, Ledger, LedgerError, MigrateError, Migrator};

async fn faulty() -> (MemoryLedger, FaultyLedger) {
    let memory = MemoryLedger::with_clock(shared_clock());
    memory.create(&[]).await.unwrap();
    let faulty = FaultyLedger::new(Arc::new(memory.clone()));
    (memory, faulty)
}

#[tokio::test]
async fn a_step_whose_reply_was_lost_with_its_records_in_place_stands() {
    let (memory, faulty) = faulty().await;
    let tree = TreeBuilder::new().build();
    let clock = clock();
    let migrator = Migrator::new(&tree, &faulty, &clock);
    faulty.fail_next(Operation::Write, Fault::LostReply);
    let records = [(slug(1), sample_entry(EntryState::Ok, 1))];
    let step = StepWrite {
        records: &records,
        attempt: None,
        lock: LockStep::Separate,
    };
    let report = migrator.write_step(&step).await.unwrap();
    assert_eq!(report.attempts, None);
    assert_eq!(
        memory.read().await.unwrap().unwrap().entry(&slug(1)),
        Some(&records[0].1)
    );
}

#[tokio::test]
async fn a_step_whose_records_landed_but_whose_attempt_is_unknown_fails_so_the_script_never_starts()
{
    let (memory, faulty) = faulty().await;
    let tree = TreeBuilder::new().build();
    let clock = clock();
    let migrator = Migrator::new(&tree, &faulty, &clock);
    faulty.fail_next(Operation::NoteAttempt, Fault::LostReply);
    let records = [(slug(1), sample_entry(EntryState::Ok, 1))];
    let step = StepWrite {
        records: &records,
        attempt: Some(AttemptNote {
            slug: &slug(2),
            token: "t",
            floor: 0,
        }),
        lock: LockStep::Separate,
    };
    let err = migrator.write_step(&step).await.unwrap_err();
    assert!(
        matches!(err, MigrateError::Ledger(LedgerError::Transient { .. })),
        "{err:?}"
    );
    // The record is confirmed and stays; the attempt mark may or may not be
    // there (an over-count by one at most, never an execution uncounted).
    assert_eq!(
        memory.read().await.unwrap().unwrap().entry(&slug(1)),
        Some(&records[0].1)
    );
}

#[tokio::test]
async fn a_step_whose_records_did_not_land_is_unconfirmed_naming_the_slug() {
    let (_memory, faulty) = faulty().await;
    let tree = TreeBuilder::new().build();
    let clock = clock();
    let migrator = Migrator::new(&tree, &faulty, &clock);
    faulty.fail_next(Operation::Write, Fault::Transient);
    let records = [(slug(3), sample_entry(EntryState::Ok, 1))];
    let step = StepWrite {
        records: &records,
        attempt: Some(AttemptNote {
            slug: &slug(4),
            token: "t",
            floor: 0,
        }),
        lock: LockStep::Separate,
    };
    match migrator.write_step(&step).await.unwrap_err() {
        MigrateError::Unconfirmed { slug: s, .. } => assert_eq!(s, slug(3)),
        other => panic!("expected Unconfirmed, got {other:?}"),
    }
    assert_eq!(
        faulty
            .calls()
            .iter()
            .filter(|c| c.0 == Operation::NoteAttempt)
            .count(),
        0,
        "no attempt is noted after its step's records failed"
    );
}

#[tokio::test]
async fn a_lock_step_on_a_ledger_that_keeps_no_lock_is_refused_as_permanent() {
    let (_memory, faulty) = faulty().await;
    let step = StepWrite {
        records: &[],
        attempt: None,
        lock: LockStep::Check {
            holder: "h",
            revision: None,
        },
    };
    let err = faulty.write_step(&step).await.unwrap_err();
    assert!(matches!(err, LedgerError::Permanent { .. }), "{err:?}");
}
