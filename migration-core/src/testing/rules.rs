//! Conformance cases of the rules a backend author must not guess
//! (the trait's documentation states them): a lapsed lease refuses, a stale
//! lease releases nothing, a lock-only change raises the revision, a
//! budgeted ledger reports its usage, concurrent takers on real threads
//! never both win, a take or release retried after a lost reply lands once,
//! and a change a crash left half-applied reads whole or not at all.

use std::sync::Arc;
use std::time::Duration;

use super::step;
use super::{Harness, TTL, entries, sample_entry, sample_record, slug, takes};
use crate::entry::EntryState;
use crate::ledger::{LedgerError, WriteMode};
use crate::lock::LockedLedger;
use crate::step::{StepMode, StepWrite};

/// `runner-a` takes the lock of `ledger`, at revision `rev`: its lease.
async fn taken_by_runner_a(ledger: &dyn LockedLedger, rev: &str) -> crate::Lease {
    ledger
        .write_step(&step(&[], takes("runner-a", Some(rev))))
        .await
        .unwrap()
        .lease
        .unwrap()
}

async fn revision(ledger: &dyn LockedLedger) -> String {
    ledger
        .read()
        .await
        .unwrap()
        .unwrap()
        .revision
        .expect("a ledger that keeps its lock in its object must tell its revision")
}

pub async fn a_write_under_a_lapsed_lease_is_refused_even_if_nobody_took_the_lock(
    h: &impl Harness,
) {
    let ledger = h.ledger().await;
    ledger.create(&[]).await.unwrap();
    let rev = revision(ledger.as_ref()).await;
    let records = entries(0..1, EntryState::Ok);
    let taken = ledger
        .write_step(&step(&records, takes("runner-a", Some(&rev))))
        .await
        .unwrap();
    let lease = taken.lease.expect("a take leaves the lease");
    h.advance_clock(TTL + Duration::from_secs(1));
    let late = vec![sample_record(1, EntryState::Ok)];
    for mode in [
        StepMode::Hold {
            lease: &lease,
            ttl: TTL,
        },
        StepMode::Release { lease: &lease },
    ] {
        match ledger.write_step(&step(&late, mode)).await {
            Err(LedgerError::LockLost { holder, .. }) => assert_eq!(holder, "runner-a"),
            other => panic!("a write under a lapsed lease must be refused, got {other:?}"),
        }
    }
    let snapshot = ledger.read().await.unwrap().unwrap();
    assert!(
        snapshot.entry(&slug(1)).is_none(),
        "a refused write under a lapsed lease must write nothing"
    );
}

pub async fn a_stale_lease_releases_nothing_and_writes_nothing(h: &impl Harness) {
    let a = h.ledger().await;
    let b = h.ledger().await;
    a.create(&[]).await.unwrap();
    let rev = revision(a.as_ref()).await;
    let first = taken_by_runner_a(a.as_ref(), &rev).await;
    // Another holder's tenure, as a forged or stale release would carry it.
    let stale = crate::Lease {
        holder: "runner-b".into(),
        token: format!("{}-stale", first.token),
        ..first.clone()
    };
    let late = vec![sample_record(1, EntryState::Ok)];
    match b
        .write_step(&step(&late, StepMode::Release { lease: &stale }))
        .await
    {
        Err(LedgerError::LockLost { .. }) => {}
        other => panic!("a release under another's lease must be refused, got {other:?}"),
    }
    // The same holder with an older tenure's token is stale too.
    let older = crate::Lease {
        token: format!("{}-older", first.token),
        ..first.clone()
    };
    match b
        .write_step(&step(&late, StepMode::Release { lease: &older }))
        .await
    {
        Err(LedgerError::LockLost { .. }) => {}
        other => panic!("a release under a stale tenure must be refused, got {other:?}"),
    }
    assert!(
        b.read().await.unwrap().unwrap().entry(&slug(1)).is_none(),
        "a refused release must write nothing"
    );
    // The holder still holds it: nobody else can take it.
    match b.acquire("runner-c", TTL).await {
        Err(LedgerError::LockHeld { holder, .. }) => assert_eq!(holder, "runner-a"),
        other => panic!("a stale release must leave the holder's lock, got {other:?}"),
    }
    a.write_step(&step(&[], StepMode::Release { lease: &first }))
        .await
        .unwrap();
}

pub async fn every_change_of_the_lock_alone_raises_the_revision(h: &impl Harness) {
    let ledger = h.ledger().await;
    ledger.create(&[]).await.unwrap();
    let mut seen = vec![revision(ledger.as_ref()).await];
    let rev = seen[0].clone();
    let lease = taken_by_runner_a(ledger.as_ref(), &rev).await;
    seen.push(revision(ledger.as_ref()).await);
    h.advance_clock(Duration::from_secs(1));
    let lease = ledger
        .write_step(&step(
            &[],
            StepMode::Hold {
                lease: &lease,
                ttl: TTL,
            },
        ))
        .await
        .unwrap()
        .lease
        .unwrap();
    seen.push(revision(ledger.as_ref()).await);
    // A later instant, so the renewal changes the lock: a renewal at the
    // instant of the last one stores the same lock, which a real API server
    // takes as no change at all (its revision stays, rightly).
    h.advance_clock(Duration::from_secs(1));
    let lease = ledger.renew(&lease, TTL).await.unwrap();
    seen.push(revision(ledger.as_ref()).await);
    ledger
        .write_step(&step(&[], StepMode::Release { lease: &lease }))
        .await
        .unwrap();
    seen.push(revision(ledger.as_ref()).await);
    let lease = ledger.acquire("runner-b", TTL).await.unwrap();
    seen.push(revision(ledger.as_ref()).await);
    ledger.release(&lease).await.unwrap();
    seen.push(revision(ledger.as_ref()).await);
    for pair in seen.windows(2) {
        assert_ne!(
            pair[0], pair[1],
            "a change of the lock alone must raise the revision (a run planned on the old one \
             must not take the lock as if nothing happened): {seen:?}"
        );
    }
    // And a take planned on a revision a lock change has passed is refused.
    match ledger
        .write_step(&step(&[], takes("runner-c", Some(&rev))))
        .await
    {
        Err(LedgerError::Changed { .. }) => {}
        other => panic!("a take on a passed revision must be refused, got {other:?}"),
    }
}

pub async fn a_budgeted_ledger_reports_its_usage_and_it_grows_with_each_write(h: &impl Harness) {
    let Some(budget) = h.budget_bytes() else {
        return;
    };
    let ledger = h.ledger().await;
    ledger.create(&entries(0..2, EntryState::Ok)).await.unwrap();
    let usage = |s: &crate::ledger::LedgerSnapshot| {
        s.usage.expect(
            "a ledger with a size budget must report its usage (the runner reserves room from it)",
        )
    };
    let before = usage(&ledger.read().await.unwrap().unwrap());
    assert_eq!(before.budget_bytes, budget, "the usage names the budget");
    assert!(before.used_bytes > 0, "two entries use some room");
    ledger
        .write(
            &entries(2..12, EntryState::Ok),
            crate::ledger::WriteMode::Replace,
        )
        .await
        .unwrap();
    let after = usage(&ledger.read().await.unwrap().unwrap());
    assert!(
        after.used_bytes > before.used_bytes,
        "ten more entries must use more room: {before:?} then {after:?}"
    );
}

pub async fn takers_on_real_threads_never_both_win(h: &impl Harness) {
    const THREADS: usize = 6;
    let first = h.ledger().await;
    first.create(&[]).await.unwrap();
    let mut handles: Vec<Arc<dyn LockedLedger>> = Vec::new();
    for _ in 0..THREADS {
        handles.push(h.ledger().await);
    }
    let runtime = tokio::runtime::Handle::current();
    let mut rounds_won = 0;
    for round in 0..4 {
        // Every round plans on what is there now.
        let rev = revision(first.as_ref()).await;
        let barrier = std::sync::Barrier::new(THREADS);
        let results: Vec<Result<Option<crate::Lease>, LedgerError>> = std::thread::scope(|s| {
            let threads: Vec<_> = handles
                .iter()
                .enumerate()
                .map(|(i, ledger)| {
                    let (barrier, runtime, rev) = (&barrier, &runtime, &rev);
                    s.spawn(move || {
                        let holder = format!("runner-{round}-{i}");
                        let record = vec![(slug(round * 100 + i), sample_entry(EntryState::Ok, 1))];
                        barrier.wait();
                        runtime.block_on(async {
                            ledger
                                .write_step(&step(&record, takes(&holder, Some(rev))))
                                .await
                                .map(|r| r.lease)
                        })
                    })
                })
                .collect();
            threads.into_iter().map(|t| t.join().unwrap()).collect()
        });
        let winners: Vec<&crate::Lease> = results
            .iter()
            .filter_map(|r| r.as_ref().ok().and_then(Option::as_ref))
            .collect();
        assert!(
            winners.len() <= 1,
            "round {round}: two takers on one revision both won the lock: {results:?}"
        );
        for r in &results {
            if let Err(e) = r {
                assert!(
                    matches!(
                        e,
                        LedgerError::LockHeld { .. } | LedgerError::Changed { .. }
                    ),
                    "round {round}: a losing taker is refused as held or changed, got {e:?}"
                );
            }
        }
        let snapshot = first.read().await.unwrap().unwrap();
        let written = (0..THREADS)
            .filter(|i| snapshot.entry(&slug(round * 100 + i)).is_some())
            .count();
        assert_eq!(
            written,
            winners.len(),
            "round {round}: only the winner's records may land: {results:?}"
        );
        if let Some(lease) = winners.first() {
            rounds_won += 1;
            first
                .write_step(&step(&[], StepMode::Release { lease }))
                .await
                .unwrap();
        }
    }
    assert!(
        rounds_won > 0,
        "some round must have a winner: the case is not vacuous"
    );
}

pub async fn a_take_or_a_release_retried_after_a_lost_reply_lands_once(h: &impl Harness) {
    let ledger = h.ledger().await;
    ledger.create(&[]).await.unwrap();
    let rev = revision(ledger.as_ref()).await;
    let first = slug(1);
    let records = entries(0..1, EntryState::Ok);
    let take = StepWrite {
        records: &records,
        attempt: Some(crate::step::AttemptNote {
            slug: &first,
            token: "execution-1",
            floor: 0,
        }),
        mode: takes("runner-a", Some(&rev)),
        failure: None,
    };
    let taken = ledger.write_step(&take).await.unwrap();
    // The reply was lost: the caller (a retry wrapper outside the backend)
    // sends the same step again, on a revision its own write has passed.
    let retried = ledger.write_step(&take).await.unwrap_or_else(|e| {
        panic!("a take retried after a lost reply must be recognised as the holder's own, got {e}")
    });
    let (taken, retried) = (taken.lease.unwrap(), retried.lease.unwrap());
    assert_eq!(
        (&retried.holder, &retried.token),
        (&taken.holder, &taken.token),
        "the retried take goes on with the tenure it began"
    );
    let snapshot = ledger.read().await.unwrap().unwrap();
    assert_eq!(
        snapshot.attempts_started.get(&first).copied(),
        Some(1),
        "one execution noted once, however often its take was sent"
    );
    let last = vec![sample_record(2, EntryState::Ok)];
    let release = step(&last, StepMode::Release { lease: &retried });
    ledger.write_step(&release).await.unwrap();
    ledger.write_step(&release).await.unwrap_or_else(|e| {
        panic!("a release retried after a lost reply (its records in place) must succeed, got {e}")
    });
    let snapshot = ledger.read().await.unwrap().unwrap();
    assert!(
        snapshot.entry(&slug(2)).is_some(),
        "the release's record is stored"
    );
    let other = ledger
        .acquire("runner-b", TTL)
        .await
        .unwrap_or_else(|e| panic!("the lock released by the landed write is free, got {e}"));
    ledger.release(&other).await.unwrap();
}

pub async fn a_change_half_applied_by_a_crash_reads_whole_or_not_at_all(h: &impl Harness) {
    let ledger = h.ledger().await;
    ledger.create(&entries(0..1, EntryState::Ok)).await.unwrap();
    let torn = entries(1..4, EntryState::Ok);
    if !h.plant_half_applied(&torn).await {
        return;
    }
    let landed = |s: &crate::ledger::LedgerSnapshot| {
        (1..4)
            .filter(|n| s.entry(&slug(*n)).is_some())
            .collect::<Vec<_>>()
    };
    let first = ledger.read().await.unwrap().unwrap();
    let seen = landed(&first);
    assert!(
        seen.is_empty() || seen.len() == 3,
        "a change a crash interrupted must read whole or not at all, never part of it: \
         entries {seen:?} of 1..4"
    );
    assert!(
        first.entry(&slug(0)).is_some(),
        "what was stored before the crash stays"
    );
    // The next write finishes or discards it for good.
    ledger
        .write(&entries(9..10, EntryState::Ok), WriteMode::Replace)
        .await
        .unwrap();
    let after = h.ledger().await.read().await.unwrap().unwrap();
    assert_eq!(
        landed(&after),
        seen,
        "the next write keeps what the first read showed of the interrupted change"
    );
    assert!(after.entry(&slug(9)).is_some(), "the next write is stored");
}
