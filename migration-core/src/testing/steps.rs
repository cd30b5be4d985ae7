//! Conformance cases of [`Ledger::write_step`](crate::Ledger::write_step),
//! the combined write of a run, and of a run lock kept in the ledger object.

use std::sync::Arc;
use std::time::Duration;

use super::{Harness, TTL, entries, sample_entry, sample_record, slug, takes};
use crate::entry::EntryState;
use crate::last_failure::LastFailure;
use crate::ledger::{LedgerError, WriteMode};
use crate::lock::LockedLedger;
use crate::slug::Slug;
use crate::step::{AttemptNote, FailureNote, StepMode, StepWrite};

/// The revision `ledger` reads at now.
async fn revision(ledger: &dyn LockedLedger) -> Option<String> {
    ledger.read().await.unwrap().unwrap().revision
}

/// Two handles on one newly created, empty ledger, and the revision it was created at.
async fn two_handles_on_a_new_ledger(
    h: &impl Harness,
) -> (Arc<dyn LockedLedger>, Arc<dyn LockedLedger>, Option<String>) {
    let a = h.ledger().await;
    let b = h.ledger().await;
    a.create(&[]).await.unwrap();
    let rev = revision(a.as_ref()).await;
    (a, b, rev)
}

/// The note of the first attempt (token `a-1`, no earlier attempts) at `slug`.
fn first_attempt(slug: &Slug) -> Option<AttemptNote<'_>> {
    Some(AttemptNote {
        slug,
        token: "a-1",
        floor: 0,
    })
}

pub async fn a_step_records_and_notes_the_attempt_and_repeating_it_changes_nothing(
    h: &impl Harness,
) {
    let ledger = h.ledger().await;
    ledger.create(&entries(0..2, EntryState::Ok)).await.unwrap();
    let records = vec![(slug(0), sample_entry(EntryState::Failed, 5))];
    let rev = revision(ledger.as_ref()).await;
    let step = StepWrite {
        records: &records,
        attempt: Some(AttemptNote {
            slug: &slug(1),
            token: "run-1",
            floor: 4,
        }),
        mode: takes("runner-a", rev.as_deref()),
        failure: None,
    };
    let first = ledger.write_step(&step).await.unwrap();
    assert_eq!(first.attempts, Some(5), "the floor is respected");
    assert_eq!(
        first.lease.as_ref().map(|l| l.holder.as_str()),
        Some("runner-a"),
        "a take leaves the lease"
    );
    let snapshot = super::read_resolved(&*ledger).await;
    assert_eq!(snapshot.entry(&slug(0)), Some(&records[0].1));
    assert_eq!(snapshot.attempts_started.get(&slug(1)), Some(&5));
    assert_eq!(
        snapshot.entry(&slug(1)).unwrap().state,
        EntryState::Ok,
        "an entry the step does not name is untouched"
    );
    // The same step again (a retry after a lost reply): with the lease it
    // left, nothing is counted twice.
    let again = StepWrite {
        mode: match &first.lease {
            Some(lease) => StepMode::Hold { lease, ttl: TTL },
            None => StepMode::Overwrite,
        },
        ..step
    };
    assert_eq!(ledger.write_step(&again).await.unwrap().attempts, Some(5));
    let snapshot = super::read_resolved(&*ledger).await;
    assert_eq!(snapshot.attempts_started.get(&slug(1)), Some(&5));
    assert_eq!(snapshot.entry(&slug(0)), Some(&records[0].1));
    // Records alone, no attempt and no lock.
    let only_records = StepWrite {
        records: &records[..],
        attempt: None,
        mode: StepMode::Overwrite,
        failure: None,
    };
    assert_eq!(
        ledger.write_step(&only_records).await.unwrap().attempts,
        None
    );
}

pub async fn a_step_taking_the_lock_in_the_ledger_excludes_others_until_it_releases(
    h: &impl Harness,
) {
    let (a, b, rev) = two_handles_on_a_new_ledger(h).await;
    let record = vec![sample_record(1, EntryState::Ok)];
    let taken = a
        .write_step(&StepWrite {
            records: &[],
            attempt: first_attempt(&record[0].0),
            mode: takes("runner-a", rev.as_deref()),
            failure: None,
        })
        .await
        .unwrap();
    let lease = taken.lease.expect("the take leaves a lease");
    // Another runner can neither take it nor write under a check.
    let rev_b = revision(b.as_ref()).await;
    for lock in [
        takes("runner-b", rev_b.as_deref()),
        StepMode::Check {
            holder: "runner-b",
            revision: rev_b.as_deref(),
        },
    ] {
        let step = StepWrite {
            records: &record,
            attempt: None,
            mode: lock,
            failure: None,
        };
        match b.write_step(&step).await {
            Err(LedgerError::LockHeld { holder, .. }) => assert_eq!(holder, "runner-a"),
            other => panic!("a held lock must refuse runner-b, got {other:?}"),
        }
    }
    match b.acquire("runner-b", TTL).await {
        Err(LedgerError::LockHeld { holder, .. }) => assert_eq!(holder, "runner-a"),
        other => panic!("a held lock must refuse runner-b, got {other:?}"),
    }
    assert!(b.read().await.unwrap().unwrap().entry(&slug(1)).is_none());
    // The holder writes under it (renewing it), then releases it with its
    // last record; a stale lease is lost, not honoured.
    h.advance_clock(Duration::from_secs(10));
    let held = a
        .write_step(&StepWrite {
            records: &[],
            attempt: None,
            mode: StepMode::Hold {
                lease: &lease,
                ttl: TTL,
            },
            failure: None,
        })
        .await
        .unwrap()
        .lease
        .expect("holding renews the lease");
    assert!(
        held.expires_at > lease.expires_at,
        "a write under the lock renews it"
    );
    let released = a
        .write_step(&StepWrite {
            records: &record,
            attempt: None,
            mode: StepMode::Release { lease: &held },
            failure: None,
        })
        .await
        .unwrap();
    assert_eq!(released.lease, None);
    assert_eq!(
        a.read().await.unwrap().unwrap().entry(&slug(1)),
        Some(&record[0].1)
    );
    match a
        .write_step(&StepWrite {
            records: &record,
            attempt: None,
            mode: StepMode::Hold {
                lease: &held,
                ttl: TTL,
            },
            failure: None,
        })
        .await
    {
        Err(LedgerError::LockLost { .. }) => {}
        other => panic!("a released lease must be lost, got {other:?}"),
    }
    let lease_b = b.acquire("runner-b", TTL).await.unwrap();
    b.release(&lease_b).await.unwrap();
}

pub async fn a_step_taking_the_lock_on_a_changed_ledger_writes_nothing(h: &impl Harness) {
    let (a, b, planned_on) = two_handles_on_a_new_ledger(h).await;
    // Another writer between the read and the first write of the run.
    b.write(&entries(5..6, EntryState::Legacy), WriteMode::OnlyIfAbsent)
        .await
        .unwrap();
    let record = vec![sample_record(1, EntryState::Ok)];
    let noted = slug(2);
    let step = StepWrite {
        records: &record,
        attempt: first_attempt(&noted),
        mode: takes("runner-a", planned_on.as_deref()),
        failure: None,
    };
    match a.write_step(&step).await {
        Err(e @ LedgerError::Changed { .. }) => assert!(e.to_string().contains("plan again")),
        other => panic!("a take on a changed ledger must be refused, got {other:?}"),
    }
    let snapshot = super::read_resolved(&*a).await;
    assert!(snapshot.entry(&slug(1)).is_none(), "nothing written");
    assert!(snapshot.attempts_started.is_empty(), "no attempt noted");
    // Planned again on what is there, the take succeeds.
    let step = StepWrite {
        mode: takes("runner-a", snapshot.revision.as_deref()),
        ..step
    };
    let lease = a.write_step(&step).await.unwrap().lease.unwrap();
    a.release(&lease).await.unwrap();
}

/// The last failure of `slug(n)` on its `attempts`-th execution.
fn sample_failure(n: u32, attempts: u32) -> LastFailure {
    LastFailure {
        reason: "exit-status-3".into(),
        message: format!("boom {n}\n[migrate: 1 secret-shaped value(s) redacted]"),
        at: super::fixtures::NOW.plus(Duration::from_secs(u64::from(attempts))),
        image: Some("registry.example/migrations:1".into()),
        attempts,
    }
}

pub async fn a_last_failure_is_kept_beside_the_attempt_mark_until_the_slugs_next_entry_removes_it(
    h: &impl Harness,
) {
    let ledger = h.ledger().await;
    let first = sample_failure(1, 1);
    let err = ledger.note_failure(&slug(1), &first).await.unwrap_err();
    assert!(matches!(err, LedgerError::NotFound { .. }), "got {err:?}");
    ledger.create(&entries(0..1, EntryState::Ok)).await.unwrap();

    // A step of an `on-error=abort` run's end: the failure travels with it.
    let rev = revision(ledger.as_ref()).await;
    let step = StepWrite {
        records: &[],
        attempt: Some(AttemptNote {
            slug: &slug(1),
            token: "run-1",
            floor: 0,
        }),
        mode: takes("runner-a", rev.as_deref()),
        failure: Some(FailureNote {
            slug: &slug(1),
            failure: &first,
        }),
    };
    let report = ledger.write_step(&step).await.unwrap();
    if let Some(lease) = &report.lease {
        ledger.release(lease).await.unwrap();
    }
    let snapshot = super::read_resolved(&*ledger).await;
    assert_eq!(snapshot.failures.get(&slug(1)), Some(&first));
    assert_eq!(snapshot.attempts_started.get(&slug(1)), Some(&1));
    assert!(
        snapshot.record(&slug(1)).is_none(),
        "a last failure is not an entry: nothing terminal is recorded"
    );
    assert!(
        h.raw("f.s-1").await.unwrap().contains("exit-status-3"),
        "stored under f.<slug>"
    );

    // The next failure replaces it; storing the same one again changes nothing.
    let second = sample_failure(1, 2);
    ledger.note_failure(&slug(1), &second).await.unwrap();
    ledger.note_failure(&slug(1), &second).await.unwrap();
    let snapshot = super::read_resolved(&*ledger).await;
    assert_eq!(snapshot.failures.get(&slug(1)), Some(&second));
    assert_eq!(snapshot.failures.len(), 1);

    // A write of another slug's entry leaves it; the slug's own entry
    // (any outcome, any write) removes it in the same write.
    ledger
        .write(&entries(2..3, EntryState::Ok), WriteMode::Replace)
        .await
        .unwrap();
    assert!(
        ledger
            .read()
            .await
            .unwrap()
            .unwrap()
            .failures
            .contains_key(&slug(1))
    );
    ledger
        .note_failure(&slug(2), &sample_failure(2, 1))
        .await
        .unwrap();
    let records = vec![(slug(1), sample_entry(EntryState::Ok, 3))];
    let step = StepWrite {
        records: &records,
        attempt: None,
        mode: StepMode::Overwrite,
        failure: None,
    };
    ledger.write_step(&step).await.unwrap();
    let snapshot = super::read_resolved(&*ledger).await;
    assert!(
        !snapshot.failures.contains_key(&slug(1)),
        "the next outcome removes it"
    );
    assert_eq!(h.raw("f.s-1").await, None, "the key itself is gone");
    assert_eq!(snapshot.entry(&slug(1)), Some(&records[0].1));
    ledger
        .write(&entries(2..3, EntryState::Failed), WriteMode::Replace)
        .await
        .unwrap();
    let snapshot = super::read_resolved(&*ledger).await;
    assert!(
        snapshot.failures.is_empty(),
        "a failed entry replaces it too"
    );
    assert!(snapshot.unreadable_keys.is_empty());
}

pub async fn a_corrupt_last_failure_is_unreadable_never_anything_else_and_the_next_entry_removes_it(
    h: &impl Harness,
) {
    let ledger = h.ledger().await;
    ledger.create(&entries(0..1, EntryState::Ok)).await.unwrap();
    h.plant_raw("f.s-1", "{not json").await;
    h.plant_raw("f.Not_A_Slug", r#"{"reason":"r"}"#).await;
    let snapshot = super::read_resolved(&*ledger).await;
    assert!(snapshot.failures.is_empty());
    assert!(snapshot.records.len() == 1 && snapshot.attempts_started.is_empty());
    let mut unreadable = super::unreadable_keys(&snapshot);
    unreadable.sort_unstable();
    assert_eq!(unreadable, ["f.Not_A_Slug", "f.s-1"]);
    ledger
        .write(&entries(1..2, EntryState::Ok), WriteMode::Replace)
        .await
        .unwrap();
    let snapshot = super::read_resolved(&*ledger).await;
    let unreadable = super::unreadable_keys(&snapshot);
    assert_eq!(
        unreadable,
        ["f.Not_A_Slug"],
        "the entry's write removed f.s-1"
    );
}
