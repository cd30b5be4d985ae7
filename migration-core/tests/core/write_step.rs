//! `Migrator::write_step`, the run's combined write, when the backend's
//! retries could not absorb a fault: a lost reply is reconciled by reading
//! the ledger once, and what cannot be confirmed is never assumed.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use ledger_memory::{Fault, FaultyLedger, MemoryLedger, Operation};
use migration_core::step::{AttemptNote, StepMode, StepReport, StepWrite};
use migration_core::testing::fixtures::{TreeBuilder, clock, shared_clock};
use migration_core::testing::{sample_entry, sample_record, slug};
use migration_core::{EntryState, Ledger, LedgerEntry, LedgerError, MigrateError, Migrator, Slug};

async fn faulty() -> (MemoryLedger, FaultyLedger) {
    let memory = MemoryLedger::with_clock(shared_clock());
    memory.create(&[]).await.unwrap();
    let faulty = FaultyLedger::new(Arc::new(memory.clone()));
    (memory, faulty)
}

/// A step that writes `records` and, with `attempt`, notes an attempt of
/// that slug, with the lock held apart from the ledger.
fn separate<'a>(records: &'a [(Slug, LedgerEntry)], attempt: Option<&'a Slug>) -> StepWrite<'a> {
    StepWrite {
        records,
        attempt: attempt.map(|slug| AttemptNote {
            slug,
            token: "t",
            floor: 0,
        }),
        mode: StepMode::Overwrite,
        failure: None,
    }
}

/// What `Migrator::write_step` answers for `step` when the ledger's next
/// `operation` fails with `fault`; the ledger underneath, and the faulty
/// one that recorded the calls.
async fn write_step_through(
    operation: Operation,
    fault: Fault,
    step: &StepWrite<'_>,
) -> (MemoryLedger, FaultyLedger, Result<StepReport, MigrateError>) {
    let (memory, faulty) = faulty().await;
    let tree = TreeBuilder::new().build();
    let clock = clock();
    let migrator = Migrator::new(&tree, &faulty, &clock);
    faulty.fail_next(operation, fault);
    let answer = migrator.write_step(step).await;
    (memory, faulty, answer)
}

#[tokio::test]
async fn a_step_whose_reply_was_lost_with_its_records_in_place_stands() {
    let records = [sample_record(1, EntryState::Ok)];
    let (memory, _, answer) = write_step_through(
        Operation::Write,
        Fault::LostReply,
        &separate(&records, None),
    )
    .await;
    let report = answer.unwrap();
    assert_eq!(report.attempts, None);
    assert_eq!(
        memory.read().await.unwrap().unwrap().entry(&slug(1)),
        Some(&records[0].1)
    );
}

#[tokio::test]
async fn a_step_whose_records_landed_but_whose_attempt_is_unknown_fails_so_the_script_never_starts()
{
    let records = [sample_record(1, EntryState::Ok)];
    let attempt = slug(2);
    let step = separate(&records, Some(&attempt));
    let (memory, _, answer) =
        write_step_through(Operation::NoteAttempt, Fault::LostReply, &step).await;
    let err = answer.unwrap_err();
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
    let records = [(slug(3), sample_entry(EntryState::Ok, 1))];
    let attempt = slug(4);
    let step = separate(&records, Some(&attempt));
    let (_memory, faulty, answer) =
        write_step_through(Operation::Write, Fault::Transient, &step).await;
    match answer.unwrap_err() {
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
    // A backend that implements storage only and keeps the trait's default
    // `write_step`, made here over the memory ledger (whose own
    // `write_step` is not the default).
    let memory = MemoryLedger::new();
    memory.create(&[]).await.unwrap();
    let faulty = StorageOnly(memory);
    let step = StepWrite {
        records: &[],
        attempt: None,
        mode: StepMode::Check {
            holder: "h",
            revision: None,
        },
        failure: None,
    };
    let err = faulty.write_step(&step).await.unwrap_err();
    assert!(matches!(err, LedgerError::Permanent { .. }), "{err:?}");
}

/// A ledger of storage only: the memory ledger's read and writes, and the
/// trait's default `write_step`, which keeps no lock.
#[derive(Debug)]
struct StorageOnly(MemoryLedger);

#[async_trait::async_trait]
impl Ledger for StorageOnly {
    fn describe(&self) -> String {
        "storage-only".into()
    }
    async fn read(&self) -> Result<Option<migration_core::LedgerSnapshot>, LedgerError> {
        self.0.read().await
    }
    async fn create(&self, entries: &[(Slug, LedgerEntry)]) -> Result<(), LedgerError> {
        self.0.create(entries).await
    }
    async fn write(
        &self,
        entries: &[(Slug, LedgerEntry)],
        mode: migration_core::WriteMode,
    ) -> Result<migration_core::WriteReport, LedgerError> {
        self.0.write(entries, mode).await
    }
    async fn note_attempt(&self, slug: &Slug, token: &str, floor: u32) -> Result<u32, LedgerError> {
        self.0.note_attempt(slug, token, floor).await
    }
    async fn note_failure(
        &self,
        slug: &Slug,
        failure: &migration_core::last_failure::LastFailure,
    ) -> Result<(), LedgerError> {
        self.0.note_failure(slug, failure).await
    }
}
