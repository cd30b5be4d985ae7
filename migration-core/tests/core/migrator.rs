//! The migrator's writes under faults: seeding and recording reconcile lost
//! replies and races instead of duplicating, overwriting or assuming.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use ledger_memory::{Fault, FaultyLedger, MemoryLedger, Operation};
use migration_core::header::Tier;
use migration_core::retry::RetryPolicy;
use migration_core::testing::fixtures::{NOW, TreeBuilder, clock, pending, s};
use migration_core::{
    EntryState, Ledger, LedgerEntry, LedgerError, ManualClock, MigrateError, MigrationsTree,
    Migrator, PlanRequest, Prepared, Slug,
};

fn tree() -> MigrationsTree {
    TreeBuilder::new()
        .pre_scripts(&["a", "b", "legacy-one"])
        .legacy_map("1 legacy-one\n")
        .manifest(&[("00000-legacy", "legacy-one\n"), ("00001-v1", "a\nb\n")])
        .build()
}

/// The backend's own retries of transient failures, as a Kubernetes backend
/// has them: the migrator does not retry on top.
const RETRIES: RetryPolicy = RetryPolicy::immediate(3);

fn setup() -> (MemoryLedger, FaultyLedger, ManualClock) {
    let memory = MemoryLedger::new();
    let faulty = FaultyLedger::new(Arc::new(memory.clone())).with_retries(RETRIES);
    (memory, faulty, clock())
}

/// Faults as they reach the migrator after the backend's retries gave up:
/// what the migrator's own reconciliation must handle.
fn setup_without_backend_retries() -> (MemoryLedger, FaultyLedger, ManualClock) {
    let memory = MemoryLedger::new();
    let faulty = FaultyLedger::new(Arc::new(memory.clone()));
    (memory, faulty, clock())
}

/// Prepares a pre-apply run of `tree` through `ledger`.
async fn prepare(
    tree: &MigrationsTree,
    ledger: &dyn Ledger,
    clock: &ManualClock,
) -> Result<Prepared, MigrateError> {
    Migrator::new(tree, ledger, clock)
        .prepare(&PlanRequest::tier(Tier::PreApply))
        .await
}

/// Records `entry` for `a` through `faulty`, over a ledger that holds
/// `stored` and whose next write fails with `fault`: the migrator's answer.
async fn record_through(
    (memory, faulty, clock): &(MemoryLedger, FaultyLedger, ManualClock),
    stored: &[(Slug, LedgerEntry)],
    fault: Fault,
    entry: &LedgerEntry,
) -> Result<(), MigrateError> {
    let tree = tree();
    memory.create(stored).await.unwrap();
    faulty.fail_next(Operation::Write, fault);
    Migrator::new(&tree, faulty, clock)
        .record(&s("a"), entry)
        .await
}

fn ok(n: u32) -> LedgerEntry {
    LedgerEntry {
        attempts: n,
        ..LedgerEntry::new(EntryState::Ok, NOW)
    }
}

#[tokio::test]
async fn fresh_install_creates_the_ledger_once_and_a_second_prepare_finds_nothing() {
    let (memory, faulty, clock) = setup();
    let tree = tree();
    let first = prepare(&tree, &faulty, &clock).await.unwrap();
    assert!(first.plan.fresh_install);
    assert_eq!(first.written.len(), 3);
    assert!(first.plan.pending.is_empty());
    assert_eq!(
        faulty.count(Operation::Create),
        1,
        "one request seeds everything"
    );
    let data = memory.raw_data().unwrap();
    let second = prepare(&tree, &faulty, &clock).await.unwrap();
    assert!(!second.plan.fresh_install);
    assert!(second.written.is_empty() && second.plan.pending.is_empty());
    assert_eq!(
        memory.raw_data().unwrap(),
        data,
        "a second prepare must not rewrite anything"
    );
}

#[tokio::test]
async fn a_lost_reply_on_fresh_install_is_reconciled_without_a_second_create() {
    let (memory, faulty, clock) = setup_without_backend_retries();
    let tree = tree();
    faulty.fail_next(Operation::Create, Fault::LostReply);
    let prepared = prepare(&tree, &faulty, &clock).await.unwrap();
    assert!(
        !prepared.plan.fresh_install,
        "the re-read sees the ledger the lost create made"
    );
    assert!(
        prepared.plan.pending.is_empty(),
        "nothing may run on a fresh install, even after a lost reply"
    );
    assert_eq!(faulty.count(Operation::Create), 1);
    let data = memory.raw_data().unwrap();
    assert_eq!(data.keys().filter(|k| k.starts_with("m.")).count(), 3);
}

#[tokio::test]
async fn losing_the_fresh_install_race_replans_against_the_winner() {
    let (memory, _, clock) = setup();
    let tree = tree();
    // Another installer got there first with its own (empty) ledger.
    memory.create(&[]).await.unwrap();
    let fresh_view = FaultyLedger::new(Arc::new(AbsentOnce {
        inner: memory.clone(),
        served: Default::default(),
    }));
    let prepared = prepare(&tree, &fresh_view, &clock).await.unwrap();
    assert!(!prepared.plan.fresh_install);
    assert_eq!(
        prepared.plan.pending.len(),
        3,
        "an existing empty ledger runs everything"
    );
    assert_eq!(
        fresh_view.count(Operation::Create),
        1,
        "the lost race is detected by AlreadyExists"
    );
}

/// Reads as absent once (a stale view), then truthfully.
#[derive(Debug)]
struct AbsentOnce {
    inner: MemoryLedger,
    served: std::sync::atomic::AtomicBool,
}

#[async_trait::async_trait]
impl Ledger for AbsentOnce {
    fn describe(&self) -> String {
        self.inner.describe()
    }
    async fn read(&self) -> Result<Option<migration_core::LedgerSnapshot>, LedgerError> {
        if !self.served.swap(true, std::sync::atomic::Ordering::SeqCst) {
            return Ok(None);
        }
        self.inner.read().await
    }
    async fn create(&self, entries: &[(Slug, LedgerEntry)]) -> Result<(), LedgerError> {
        self.inner.create(entries).await
    }
    async fn write(
        &self,
        entries: &[(Slug, LedgerEntry)],
        mode: migration_core::WriteMode,
    ) -> Result<migration_core::WriteReport, LedgerError> {
        self.inner.write(entries, mode).await
    }
    async fn note_attempt(&self, slug: &Slug, token: &str, floor: u32) -> Result<u32, LedgerError> {
        self.inner.note_attempt(slug, token, floor).await
    }
    async fn note_failure(
        &self,
        slug: &Slug,
        failure: &migration_core::last_failure::LastFailure,
    ) -> Result<(), LedgerError> {
        self.inner.note_failure(slug, failure).await
    }
}

#[async_trait::async_trait]
impl migration_core::Lock for AbsentOnce {
    async fn acquire(
        &self,
        holder: &str,
        ttl: std::time::Duration,
    ) -> Result<migration_core::Lease, LedgerError> {
        self.inner.acquire(holder, ttl).await
    }
    async fn renew(
        &self,
        lease: &migration_core::Lease,
        ttl: std::time::Duration,
    ) -> Result<migration_core::Lease, LedgerError> {
        self.inner.renew(lease, ttl).await
    }
    async fn release(&self, lease: &migration_core::Lease) -> Result<(), LedgerError> {
        self.inner.release(lease).await
    }
}

/// Prepares a run over a ledger that holds only `version` 5 (so the legacy
/// map seeds `legacy-one`), its next writes failing with `faults` in turn:
/// the ledger underneath, and the answer.
async fn seed_legacy_through(faults: &[Fault]) -> (MemoryLedger, Result<Prepared, MigrateError>) {
    let (memory, faulty, clock) = setup();
    let tree = tree();
    memory.put_raw("version", "5");
    for &fault in faults {
        faulty.fail_next(Operation::Write, fault);
    }
    let prepared = prepare(&tree, &faulty, &clock).await;
    (memory, prepared)
}

#[tokio::test]
async fn legacy_seeding_survives_a_lost_reply_and_a_transient_error() {
    let (memory, prepared) = seed_legacy_through(&[Fault::LostReply, Fault::Transient]).await;
    let prepared = prepared.unwrap();
    assert_eq!(
        memory.raw("m.legacy-one").map(|v| v.contains("\"legacy\"")),
        Some(true)
    );
    assert_eq!(pending(&prepared.plan), ["a", "b"]);
}

#[tokio::test]
async fn a_permanent_seeding_error_fails_closed_naming_the_operation() {
    let (memory, prepared) = seed_legacy_through(&[Fault::Permanent]).await;
    let err = prepared.unwrap_err();
    assert!(
        matches!(
            err,
            MigrateError::Ledger(LedgerError::Permanent {
                operation: "write",
                ..
            })
        ),
        "{err:?}"
    );
    assert!(memory.raw("m.legacy-one").is_none());
}

#[tokio::test]
async fn transient_seeding_errors_give_up_after_bounded_attempts() {
    let (_, faulty, clock) = setup();
    let tree = tree();
    for _ in 0..5 {
        faulty.fail_next(Operation::Create, Fault::Transient);
    }
    let err = prepare(&tree, &faulty, &clock).await.unwrap_err();
    assert!(
        matches!(err, MigrateError::Ledger(LedgerError::Transient { .. })),
        "{err:?}"
    );
    assert_eq!(faulty.count(Operation::Create), RETRIES.attempts as usize);
}

/// Records `entry` for `a` through ledgers whose next write fails with
/// `fault`, which the record must survive, and checks the entry is stored:
/// how many writes reached the faulty ledger.
async fn recorded_through(
    ledgers: (MemoryLedger, FaultyLedger, ManualClock),
    fault: Fault,
    entry: &LedgerEntry,
) -> usize {
    record_through(&ledgers, &[], fault, entry).await.unwrap();
    let (memory, faulty, _) = ledgers;
    let snapshot = memory.read().await.unwrap().unwrap();
    assert_eq!(snapshot.entry(&s("a")), Some(entry));
    faulty.count(Operation::Write)
}

#[tokio::test]
async fn a_record_whose_reply_is_lost_is_confirmed_by_reading_it_back() {
    let writes = recorded_through(setup_without_backend_retries(), Fault::LostReply, &ok(1)).await;
    assert_eq!(writes, 1, "a confirmed write is not repeated");
}

#[tokio::test]
async fn a_transient_record_failure_is_retried() {
    assert_eq!(recorded_through(setup(), Fault::Transient, &ok(2)).await, 2);
}

#[tokio::test]
async fn a_record_that_cannot_be_confirmed_is_an_error_not_a_success() {
    let ledgers = setup();
    let err = record_through(&ledgers, &[], Fault::Permanent, &ok(1))
        .await
        .unwrap_err();
    let (memory, _, _) = ledgers;
    assert!(
        matches!(&err, MigrateError::Unconfirmed { slug, .. } if slug.as_str() == "a"),
        "{err:?}"
    );
    assert!(memory.raw("m.a").is_none());
}

#[tokio::test]
async fn a_record_is_not_confirmed_by_a_different_entry() {
    let ledgers = setup();
    let err = record_through(&ledgers, &[(s("a"), ok(7))], Fault::Permanent, &ok(8))
        .await
        .unwrap_err();
    assert!(matches!(err, MigrateError::Unconfirmed { .. }));
}

#[tokio::test]
async fn a_dry_run_plan_writes_nothing() {
    let (memory, faulty, clock) = setup();
    let tree = tree();
    let plan = Migrator::new(&tree, &faulty, &clock)
        .plan(&PlanRequest::tier(Tier::PreApply))
        .await
        .unwrap();
    assert!(plan.fresh_install);
    assert!(memory.raw_data().is_none());
    assert_eq!(faulty.calls().len(), 1);
}

#[tokio::test]
async fn a_fresh_install_with_nothing_to_seed_still_creates_the_ledger() {
    // Found by the release-line property test: without the object, the next
    // upgrade looked like a fresh install again and its first new migration
    // was recorded skipped-fresh-install instead of running.
    let (memory, faulty, clock) = setup();
    let empty = TreeBuilder::new().manifest(&[]).build();
    let prepared = prepare(&empty, &faulty, &clock).await.unwrap();
    assert!(prepared.plan.fresh_install);
    assert_eq!(
        memory.raw_data(),
        Some(Default::default()),
        "an empty ledger object must exist"
    );
    let later = TreeBuilder::new()
        .pre("first-new")
        .manifest(&[("00001-v2", "first-new\n")])
        .build();
    let upgrade = prepare(&later, &faulty, &clock).await.unwrap();
    assert!(!upgrade.plan.fresh_install);
    assert_eq!(
        upgrade.plan.pending.len(),
        1,
        "the first migration after an empty install must run"
    );
}
