//! The backend conformance suite (feature `testing`).
//!
//! Every [`Ledger`](crate::ledger::Ledger) implementation runs these cases unchanged, which is what
//! "the backends behave identically" means in practice. A backend's test file
//! implements [`Harness`] and expands [`crate::ledger_conformance_tests!`]:
//!
//! ```ignore
//! async fn harness() -> MyHarness { /* ... */ }
//! migration_core::ledger_conformance_tests!(harness);
//! ```
//!
//! Each case panics with a message naming the broken guarantee.
//!
//! [`fixtures`] holds the slug, clock and tree helpers tests share;
//! [`realistic`] the records of realistic size the density tests fill
//! ledgers with.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

pub mod fixtures;
mod steps;

pub use steps::{
    a_corrupt_last_failure_is_unreadable_never_anything_else_and_the_next_entry_removes_it,
    a_last_failure_is_kept_beside_the_attempt_mark_until_the_slugs_next_entry_removes_it,
    a_step_records_and_notes_the_attempt_and_repeating_it_changes_nothing,
    a_step_taking_the_lock_in_the_ledger_excludes_others_until_it_releases,
    a_step_taking_the_lock_on_a_changed_ledger_writes_nothing,
};

mod locking;
pub use locking::{
    an_expired_lock_can_be_taken_over_and_the_old_holder_loses_it,
    lock_can_be_taken_before_the_ledger_exists, lock_excludes_a_second_holder_until_released,
    same_holder_reacquires_and_renew_extends,
};

mod rules;
pub use rules::{
    a_budgeted_ledger_reports_its_usage_and_it_grows_with_each_write,
    a_change_half_applied_by_a_crash_reads_whole_or_not_at_all,
    a_stale_lease_releases_nothing_and_writes_nothing,
    a_take_or_a_release_retried_after_a_lost_reply_lands_once,
    a_write_under_a_lapsed_lease_is_refused_even_if_nobody_took_the_lock,
    every_change_of_the_lock_alone_raises_the_revision, takers_on_real_threads_never_both_win,
};

mod format;
pub mod previous_engine;
pub mod realistic;

pub use format::*;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use crate::entry::{EntryState, LedgerEntry};
use crate::ledger::{LedgerError, LegacyVersion, Record, WriteMode};
use crate::lock::LockedLedger;
use crate::slug::Slug;

/// What the suite needs from a backend under test.
#[async_trait]
pub trait Harness: Send + Sync {
    /// A client for the ledger under test. Every call returns a handle to the
    /// same stored ledger (a new client where the backend has clients), so
    /// concurrency cases can race two handles. Initially no ledger exists.
    async fn ledger(&self) -> Arc<dyn LockedLedger>;

    /// Stores `value` under `key` verbatim, bypassing the engine (for
    /// planting corrupt values and the `version` key). The ledger exists.
    async fn plant_raw(&self, key: &str, value: &str);

    /// Reads a raw stored key, bypassing the engine (`None` if absent).
    async fn raw(&self, key: &str) -> Option<String>;

    /// Moves the clock the backend uses for lock expiry forward.
    fn advance_clock(&self, by: Duration);

    /// The backend's size budget in bytes, if it has one.
    fn budget_bytes(&self) -> Option<u64>;

    /// Leaves a write of `entries` (replacing) half-applied in the existing
    /// ledger, as a crash in the middle of it would: whatever state the
    /// backend can be left in between starting a change and finishing it
    /// (a torn journal record, some files written and a write-ahead record
    /// naming the rest). Returns `false` when the backend has no such state
    /// (every change is one atomic operation: a mutex, one request to a
    /// server), and the case that uses it checks nothing more.
    async fn plant_half_applied(&self, entries: &[(Slug, LedgerEntry)]) -> bool {
        let _ = entries;
        false
    }
}

/// The ledger as read, with every output tail a message names where the backend keeps it
/// ([`crate::Ledger::kept_output`], the Kubernetes backends' Secret) put back in place: what
/// was written, for a suite that compares it exactly.
pub async fn read_resolved(ledger: &dyn LockedLedger) -> crate::ledger::LedgerSnapshot {
    use crate::kept_output::with_tail;
    let mut snapshot = ledger.read().await.unwrap().unwrap();
    for record in snapshot.records.values_mut() {
        if let Record::Entry(entry) = record
            && let Some(message) = entry.message.clone()
            && let Some(tail) = ledger.kept_output(&message).await.unwrap()
        {
            entry.message = Some(with_tail(&message, &tail));
        }
    }
    for failure in snapshot.failures.values_mut() {
        if let Some(tail) = ledger.kept_output(&failure.message).await.unwrap() {
            failure.message = with_tail(&failure.message, &tail);
        }
    }
    snapshot
}

/// A deterministic valid entry.
pub fn sample_entry(state: EntryState, n: u32) -> LedgerEntry {
    let mut entry = LedgerEntry {
        batch: Some("00001-v1.0.0".into()),
        image: Some(format!("registry.example/migrations@sha256:{:064x}", n)),
        sha256: Some(crate::digest::Sha256Digest::of(&n.to_be_bytes())),
        attempts: n,
        ..LedgerEntry::new(state, fixtures::NOW.plus(Duration::from_secs(u64::from(n))))
    };
    if state == EntryState::Failed {
        entry.reason = Some("exit-status-1".into());
        entry.message = Some(format!("tail of output {n}"));
    }
    entry
}

/// The corrupt records of `snapshot` as `(slug, stored key)` pairs, in slug order.
pub fn corrupt_keys(snapshot: &crate::ledger::LedgerSnapshot) -> Vec<(String, String)> {
    snapshot
        .corrupt()
        .map(|(s, c)| (s.to_string(), c.key.clone()))
        .collect()
}

/// The stored keys of the records `snapshot` could not read, in the order it
/// reports them.
pub fn unreadable_keys(snapshot: &crate::ledger::LedgerSnapshot) -> Vec<&str> {
    snapshot
        .unreadable_keys
        .iter()
        .map(|c| c.key.as_str())
        .collect()
}

/// How long every lock the conformance cases take lasts.
const TTL: Duration = Duration::from_secs(60);

/// `holder` taking the lock for [`TTL`] on a ledger planned at `revision`.
fn takes<'a>(holder: &'a str, revision: Option<&'a str>) -> crate::step::StepMode<'a> {
    crate::step::StepMode::Take {
        holder,
        ttl: TTL,
        revision,
    }
}

/// A step writing `records` (no attempt mark, no last failure) under
/// `mode`; set the others with `StepWrite { attempt, ..step(records, mode) }`.
pub fn step<'a>(
    records: &'a [(Slug, LedgerEntry)],
    mode: crate::step::StepMode<'a>,
) -> crate::step::StepWrite<'a> {
    crate::step::StepWrite {
        records,
        attempt: None,
        mode,
        failure: None,
    }
}

/// `s-<n>` as a slug.
pub fn slug(n: usize) -> Slug {
    Slug::parse(&format!("s-{n}")).unwrap()
}

/// `s-<n>` with [`sample_entry`]`(state, n)`.
pub fn sample_record(n: usize, state: EntryState) -> (Slug, LedgerEntry) {
    (slug(n), sample_entry(state, n as u32))
}

/// `s-<n>` for each `n` in `range`, with [`sample_entry`]`(state, n)`.
pub fn entries(range: std::ops::Range<usize>, state: EntryState) -> Vec<(Slug, LedgerEntry)> {
    range.map(|n| sample_record(n, state)).collect()
}

/// Asserts that `ledger` reads as absent; `why` says what must not have
/// created it.
async fn assert_absent(ledger: &(impl crate::ledger::Ledger + ?Sized), why: &str) {
    assert_eq!(ledger.read().await.unwrap(), None, "{why}");
}

pub async fn absent_ledger_reads_as_none(h: &impl Harness) {
    let ledger = h.ledger().await;
    assert_absent(
        &*ledger,
        "a missing ledger must read as None (fresh install)",
    )
    .await;
}

pub async fn empty_ledger_is_not_absent(h: &impl Harness) {
    let ledger = h.ledger().await;
    ledger.create(&[]).await.unwrap();
    let snapshot = ledger
        .read()
        .await
        .unwrap()
        .expect("an empty ledger exists");
    assert!(snapshot.records.is_empty());
    assert_eq!(snapshot.version, LegacyVersion::Absent);
}

pub async fn create_stores_every_entry_exactly(h: &impl Harness) {
    let ledger = h.ledger().await;
    let mut written = entries(0..20, EntryState::SkippedFreshInstall);
    written[3].1 = sample_entry(EntryState::Failed, 3);
    written[4]
        .1
        .extra
        .insert("future_field".into(), serde_json::json!({"k": [1, 2]}));
    ledger.create(&written).await.unwrap();
    let snapshot = read_resolved(&*ledger).await;
    assert_eq!(snapshot.records.len(), 20);
    for (slug, entry) in &written {
        assert_eq!(
            snapshot.entry(slug),
            Some(entry),
            "entry for {slug} must round-trip exactly"
        );
    }
}

pub async fn create_on_existing_ledger_is_already_exists_and_changes_nothing(h: &impl Harness) {
    let ledger = h.ledger().await;
    ledger.create(&entries(0..2, EntryState::Ok)).await.unwrap();
    let err = ledger
        .create(&entries(0..3, EntryState::SkippedFreshInstall))
        .await
        .unwrap_err();
    assert!(
        matches!(err, LedgerError::AlreadyExists { .. }),
        "got {err:?}"
    );
    let snapshot = ledger.read().await.unwrap().unwrap();
    assert_eq!(snapshot.records.len(), 2, "a refused create must not write");
    assert_eq!(snapshot.entry(&slug(0)).unwrap().state, EntryState::Ok);
}

pub async fn write_to_absent_ledger_is_not_found(h: &impl Harness) {
    let ledger = h.ledger().await;
    for mode in [WriteMode::OnlyIfAbsent, WriteMode::Replace] {
        let err = ledger
            .write(&entries(0..1, EntryState::Ok), mode)
            .await
            .unwrap_err();
        assert!(
            matches!(err, LedgerError::NotFound { .. }),
            "{mode:?}: got {err:?}"
        );
    }
    assert_absent(&*ledger, "a failed write must not create the ledger").await;
}

pub async fn only_if_absent_skips_existing_keys_and_reports_them(h: &impl Harness) {
    let ledger = h.ledger().await;
    ledger.create(&entries(0..2, EntryState::Ok)).await.unwrap();
    let report = ledger
        .write(&entries(1..4, EntryState::Legacy), WriteMode::OnlyIfAbsent)
        .await
        .unwrap();
    assert_eq!(report.written, vec![slug(2), slug(3)]);
    assert_eq!(report.already_present, vec![slug(1)]);
    let snapshot = ledger.read().await.unwrap().unwrap();
    assert_eq!(
        snapshot.entry(&slug(1)).unwrap().state,
        EntryState::Ok,
        "only-if-absent overwrote"
    );
    assert_eq!(snapshot.entry(&slug(3)).unwrap().state, EntryState::Legacy);
    // Repeating is idempotent.
    let again = ledger
        .write(&entries(1..4, EntryState::Legacy), WriteMode::OnlyIfAbsent)
        .await
        .unwrap();
    assert!(again.written.is_empty());
    assert_eq!(again.already_present.len(), 3);
}

pub async fn only_if_absent_never_overwrites_a_corrupt_value(h: &impl Harness) {
    let ledger = h.ledger().await;
    ledger.create(&[]).await.unwrap();
    h.plant_raw("m.s-0", "{not json").await;
    let report = ledger
        .write(&entries(0..1, EntryState::Legacy), WriteMode::OnlyIfAbsent)
        .await
        .unwrap();
    assert_eq!(
        report.already_present,
        vec![slug(0)],
        "a corrupt key is present, not absent"
    );
    assert_eq!(
        h.raw("m.s-0").await.as_deref(),
        Some("{not json"),
        "the corrupt value must be left for a human"
    );
}

pub async fn a_write_naming_a_slug_twice_is_refused_naming_its_key_and_stores_nothing(
    h: &impl Harness,
) {
    let ledger = h.ledger().await;
    let mut twice = entries(0..3, EntryState::Ok);
    twice.push(sample_record(1, EntryState::Failed));
    let refused = |err: LedgerError, what: &str| {
        assert!(
            matches!(&err, LedgerError::Permanent { message, .. }
                if message.contains("m.s-1") && message.contains("appears twice")),
            "{what}: got {err:?}"
        );
    };
    refused(ledger.create(&twice).await.unwrap_err(), "create");
    assert_absent(&*ledger, "a refused create must not create the ledger").await;
    ledger.create(&entries(5..6, EntryState::Ok)).await.unwrap();
    for mode in [WriteMode::OnlyIfAbsent, WriteMode::Replace] {
        refused(
            ledger.write(&twice, mode).await.unwrap_err(),
            &format!("{mode:?}"),
        );
    }
    let snapshot = ledger.read().await.unwrap().unwrap();
    assert_eq!(
        snapshot.records.keys().cloned().collect::<Vec<_>>(),
        vec![slug(5)],
        "a refused write must store none of its entries"
    );
}

pub async fn replace_overwrites(h: &impl Harness) {
    let ledger = h.ledger().await;
    ledger.create(&entries(0..2, EntryState::Ok)).await.unwrap();
    let newer = sample_entry(EntryState::Failed, 9);
    let report = ledger
        .write(&[(slug(1), newer.clone())], WriteMode::Replace)
        .await
        .unwrap();
    assert_eq!(report.written, vec![slug(1)]);
    let snapshot = read_resolved(&*ledger).await;
    assert_eq!(snapshot.entry(&slug(1)), Some(&newer));
    assert_eq!(
        snapshot.entry(&slug(0)).unwrap().state,
        EntryState::Ok,
        "other keys untouched"
    );
}

pub async fn corrupt_values_read_as_corrupt_naming_the_key(h: &impl Harness) {
    let ledger = h.ledger().await;
    ledger.create(&entries(0..1, EntryState::Ok)).await.unwrap();
    h.plant_raw("m.broken", "{\"state\":\"ok\"").await;
    h.plant_raw("m.Not_A_Slug", "{}").await;
    let snapshot = ledger.read().await.unwrap().unwrap();
    let broken = Slug::parse("broken").unwrap();
    match snapshot.record(&broken) {
        Some(Record::Corrupt(c)) => assert_eq!(c.key, "m.broken"),
        other => panic!("a corrupt value must read as Corrupt, got {other:?}"),
    }
    assert_eq!(snapshot.unreadable_keys.len(), 1);
    assert_eq!(snapshot.unreadable_keys[0].key, "m.Not_A_Slug");
    assert!(
        snapshot.entry(&slug(0)).is_some(),
        "one corrupt key must not hide the others"
    );
}

pub async fn version_key_is_read_and_never_written(h: &impl Harness) {
    let ledger = h.ledger().await;
    ledger.create(&[]).await.unwrap();
    h.plant_raw("version", "45").await;
    h.plant_raw("owner-note", "kept").await;
    assert_eq!(
        ledger.read().await.unwrap().unwrap().version,
        LegacyVersion::Known(45)
    );
    ledger
        .write(&entries(0..3, EntryState::Legacy), WriteMode::OnlyIfAbsent)
        .await
        .unwrap();
    ledger
        .write(&entries(0..1, EntryState::Ok), WriteMode::Replace)
        .await
        .unwrap();
    assert_eq!(
        h.raw("version").await.as_deref(),
        Some("45"),
        "the engine must not touch 'version'"
    );
    assert_eq!(
        h.raw("owner-note").await.as_deref(),
        Some("kept"),
        "writes must leave foreign keys"
    );
    h.plant_raw("version", "v45").await;
    assert!(matches!(
        ledger.read().await.unwrap().unwrap().version,
        LegacyVersion::Corrupt { .. }
    ));
}

pub async fn concurrent_writers_lose_no_update(h: &impl Harness) {
    let first = h.ledger().await;
    first.create(&[]).await.unwrap();
    let mut handles = Vec::new();
    for _ in 0..4 {
        handles.push(h.ledger().await);
    }
    // Four clients write disjoint keys at once: all must land.
    let writes = handles.iter().enumerate().map(|(i, ledger)| {
        let batch = entries(i * 5..i * 5 + 5, EntryState::Legacy);
        async move { ledger.write(&batch, WriteMode::OnlyIfAbsent).await }
    });
    for result in futures_util::future::join_all(writes).await {
        result.unwrap();
    }
    let snapshot = first.read().await.unwrap().unwrap();
    assert_eq!(snapshot.records.len(), 20, "a concurrent write was lost");
    // Four clients race for the same key: exactly one wins, none overwrites.
    let racers = handles.iter().enumerate().map(|(i, ledger)| {
        let entry = vec![(slug(100), sample_entry(EntryState::Ok, i as u32))];
        async move { ledger.write(&entry, WriteMode::OnlyIfAbsent).await }
    });
    let reports: Vec<_> = futures_util::future::join_all(racers)
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    let winners: Vec<usize> = reports
        .iter()
        .enumerate()
        .filter(|(_, r)| r.written == vec![slug(100)])
        .map(|(i, _)| i)
        .collect();
    assert_eq!(
        winners.len(),
        1,
        "exactly one only-if-absent writer must win: {reports:?}"
    );
    let stored = first.read().await.unwrap().unwrap();
    assert_eq!(
        stored.entry(&slug(100)),
        Some(&sample_entry(EntryState::Ok, winners[0] as u32))
    );
}

pub async fn a_write_above_the_budget_is_refused_whole(h: &impl Harness) {
    let Some(budget) = h.budget_bytes() else {
        return;
    };
    let ledger = h.ledger().await;
    ledger.create(&entries(0..3, EntryState::Ok)).await.unwrap();
    // An `ok` entry's message stays in the entry on every backend (a failure's output tail may
    // be kept outside it, CONTRACT.md §5.2).
    let mut huge = sample_entry(EntryState::Ok, 7);
    huge.message = Some("x".repeat(usize::try_from(budget).unwrap()));
    let batch = vec![sample_record(10, EntryState::Ok), (slug(11), huge)];
    let err = ledger.write(&batch, WriteMode::Replace).await.unwrap_err();
    match &err {
        LedgerError::Full {
            budget_bytes,
            entry_count,
            current_bytes,
            would_be_bytes,
            ..
        } => {
            assert_eq!(*budget_bytes, budget);
            assert_eq!(*entry_count, 3);
            assert!(would_be_bytes > budget_bytes && current_bytes < budget_bytes);
        }
        other => panic!("expected Full, got {other:?}"),
    }
    assert!(err.to_string().contains("ledger full"));
    let snapshot = ledger.read().await.unwrap().unwrap();
    assert_eq!(
        snapshot.records.len(),
        3,
        "a refused write must write nothing, not part of the batch"
    );
    let err = ledger.create(&[]).await.unwrap_err();
    assert!(matches!(err, LedgerError::AlreadyExists { .. }));
}

pub async fn a_create_above_the_budget_is_refused(h: &impl Harness) {
    let Some(budget) = h.budget_bytes() else {
        return;
    };
    let ledger = h.ledger().await;
    // The smallest an entry can be stored (compact, naming a shared record).
    let per_entry = sample_entry(EntryState::SkippedFreshInstall, 0)
        .encode_compact(Some("1"))
        .len() as u64
        + 8;
    let n = usize::try_from(budget / per_entry + 10).unwrap();
    let err = ledger
        .create(&entries(0..n, EntryState::SkippedFreshInstall))
        .await
        .unwrap_err();
    assert!(matches!(err, LedgerError::Full { .. }), "got {err:?}");
    assert_absent(&*ledger, "a refused create must not leave an object").await;
}

pub async fn note_attempt_counts_once_per_token_and_needs_the_ledger(h: &impl Harness) {
    let ledger = h.ledger().await;
    let err = ledger.note_attempt(&slug(1), "t1", 0).await.unwrap_err();
    assert!(matches!(err, LedgerError::NotFound { .. }), "got {err:?}");
    ledger.create(&entries(0..1, EntryState::Ok)).await.unwrap();
    assert_eq!(ledger.note_attempt(&slug(1), "t1", 0).await.unwrap(), 1);
    assert_eq!(
        ledger.note_attempt(&slug(1), "t1", 0).await.unwrap(),
        1,
        "same token must not count twice"
    );
    assert_eq!(ledger.note_attempt(&slug(1), "t2", 0).await.unwrap(), 2);
    assert_eq!(
        ledger.note_attempt(&slug(0), "t3", 7).await.unwrap(),
        8,
        "the floor is respected"
    );
    let snapshot = ledger.read().await.unwrap().unwrap();
    assert_eq!(snapshot.attempts_started.get(&slug(1)), Some(&2));
    assert_eq!(snapshot.records.len(), 1, "attempt marks are not entries");
    assert!(h.raw("a.s-1").await.unwrap().contains("\"count\":2"));
}

/// Runs every case in sequence, each on a fresh harness from `make(case)`.
/// For lanes that cannot use one test per case, such as the opt-in
/// real-cluster lane (the case name lets `make` pick unique object names).
pub async fn run_all<H, F, Fut>(make: F)
where
    H: Harness,
    F: Fn(&'static str) -> Fut,
    Fut: std::future::Future<Output = H>,
{
    // The one case list lives in `ledger_conformance_tests!`.
    crate::ledger_conformance_tests!(@with_cases @run make);
}

/// Expands to one `#[tokio::test]` per conformance case. `$harness` is an
/// async function returning a fresh [`Harness`] each time it is called.
#[macro_export]
macro_rules! ledger_conformance_tests {
    ($harness:ident) => {
        $crate::ledger_conformance_tests!(@with_cases @tests $harness);
    };
    // The single list of cases, handed to the mode that asked for it.
    (@with_cases @$mode:ident $arg:ident) => {
        $crate::ledger_conformance_tests!(@$mode $arg;
            absent_ledger_reads_as_none,
            empty_ledger_is_not_absent,
            create_stores_every_entry_exactly,
            create_on_existing_ledger_is_already_exists_and_changes_nothing,
            write_to_absent_ledger_is_not_found,
            only_if_absent_skips_existing_keys_and_reports_them,
            only_if_absent_never_overwrites_a_corrupt_value,
            a_write_naming_a_slug_twice_is_refused_naming_its_key_and_stores_nothing,
            replace_overwrites,
            corrupt_values_read_as_corrupt_naming_the_key,
            version_key_is_read_and_never_written,
            concurrent_writers_lose_no_update,
            a_write_above_the_budget_is_refused_whole,
            a_create_above_the_budget_is_refused,
            note_attempt_counts_once_per_token_and_needs_the_ledger,
            a_step_records_and_notes_the_attempt_and_repeating_it_changes_nothing,
            a_step_taking_the_lock_in_the_ledger_excludes_others_until_it_releases,
            a_step_taking_the_lock_on_a_changed_ledger_writes_nothing,
            a_last_failure_is_kept_beside_the_attempt_mark_until_the_slugs_next_entry_removes_it,
            a_corrupt_last_failure_is_unreadable_never_anything_else_and_the_next_entry_removes_it,
            entries_of_one_run_share_what_they_repeat_and_read_back_whole,
            entries_of_the_previous_format_read_back_unchanged,
            a_reference_to_a_missing_shared_record_is_corrupt_naming_the_key,
            lock_excludes_a_second_holder_until_released,
            lock_can_be_taken_before_the_ledger_exists,
            same_holder_reacquires_and_renew_extends,
            an_expired_lock_can_be_taken_over_and_the_old_holder_loses_it,
            a_write_under_a_lapsed_lease_is_refused_even_if_nobody_took_the_lock,
            a_stale_lease_releases_nothing_and_writes_nothing,
            every_change_of_the_lock_alone_raises_the_revision,
            a_take_or_a_release_retried_after_a_lost_reply_lands_once,
            a_change_half_applied_by_a_crash_reads_whole_or_not_at_all,
            a_budgeted_ledger_reports_its_usage_and_it_grows_with_each_write,
            takers_on_real_threads_never_both_win,
        );
    };
    (@run $make:ident; $($case:ident),* $(,)?) => {
        $(
            let harness = $make(stringify!($case)).await;
            eprintln!("conformance: {}", stringify!($case));
            $crate::testing::$case(&harness).await;
        )*
    };
    (@tests $harness:ident; $($case:ident),* $(,)?) => {
        mod conformance {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    let harness = super::$harness().await;
                    $crate::testing::$case(&harness).await;
                }
            )*
        }
    };
}
