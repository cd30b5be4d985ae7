//! `Driver::run_after_read`, the run `migrate run` makes after
//! reading the ledger without the lock while the tree loads (CONTRACT.md
//! §5.5, §7.2): a read with nothing to do ends the run without the lock;
//! any other run takes the lock and plans on what the ledger holds then, so
//! records another process wrote after the first read are seen; a failed
//! read is never nothing to do.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use ledger_configmap::ConfigMapLedger;
use ledger_crd::{GROUP, KIND, PLURAL, VERSION};
use ledger_file::FileLedger;
use migration_core::drive::{Console, RunError, RunReport};
use migration_core::testing::fixtures::{ScratchTree, TreeBuilder, s};
use migration_core::{
    EntryState, Ledger, LedgerEntry, LedgerError, LedgerSnapshot, LockedLedger, OnError, Slug,
    Tier, Timestamp, WriteMode,
};
use test_apiserver::{TestApiServer, Verb};

use crate::common::in_process::InProcess;

/// Prints nothing: these tests look at the report and the ledger.
struct Quiet;

impl Console for Quiet {
    fn script_line(&self, _: &Slug, _: &str) {}
    fn progress(&self, _: &str) {}
}

/// Pre-apply scripts `slugs`, each appending its slug to `<dir>/effects`.
fn tree(slugs: &[&str]) -> ScratchTree {
    let body = r#"echo "$MIGRATION_SLUG" >> "$MIGRATION_TREE/../effects""#;
    let mut builder = TreeBuilder::new();
    let mut order = String::new();
    for slug in slugs {
        builder = builder.script_with(Tier::PreApply, slug, OnError::Abort, &[], body);
        order.push_str(&format!("{slug}\n"));
    }
    builder.manifest(&[("00001-v1", &order)]).scratch()
}

fn config(wait: Duration) -> InProcess {
    let mut c = InProcess::new("hook-pod");
    c.settings.lock_wait = wait;
    c
}

fn ok() -> LedgerEntry {
    LedgerEntry::new(EntryState::Ok, Timestamp::now())
}

async fn run_after(
    scratch: &ScratchTree,
    ledger: &dyn LockedLedger,
    read: Result<Option<LedgerSnapshot>, LedgerError>,
    config: &InProcess,
) -> Result<RunReport, RunError> {
    config
        .run_after_read(&scratch.load(), ledger, &read, &Quiet)
        .await
}

/// Records `slug` ok through `other`, another handle on the ledger (as
/// another process would).
async fn record_ok(other: &dyn Ledger, slug: &str) {
    other
        .write(&[(s(slug), ok())], WriteMode::Replace)
        .await
        .unwrap();
}

/// The file ledger in `scratch`'s directory, existing and empty.
async fn file_ledger(scratch: &ScratchTree) -> FileLedger {
    let ledger = FileLedger::new(scratch.file("ledger.json"));
    ledger.create(&[]).await.unwrap();
    ledger
}

fn ran(report: &RunReport) -> Vec<String> {
    report.results.iter().map(|r| r.slug.clone()).collect()
}

#[tokio::test]
async fn a_run_with_pending_work_plans_again_under_the_lock_and_sees_records_written_after_its_first_read()
 {
    let scratch = tree(&["one", "two"]);
    let ledger = file_ledger(&scratch).await;
    let read = ledger.read().await;
    // Another process records `one` between the first read and the lock.
    record_ok(&FileLedger::new(scratch.file("ledger.json")), "one").await;
    let report = run_after(&scratch, &ledger, read, &config(Duration::ZERO))
        .await
        .unwrap();
    assert_eq!(report.pending, 1, "planned on the ledger under the lock");
    assert_eq!(ran(&report), ["two"]);
    assert_eq!(scratch.lines("effects"), ["two"], "`one` did not run again");
}

#[tokio::test]
async fn a_run_whose_read_has_nothing_to_do_ends_without_waiting_for_or_touching_the_lock() {
    let scratch = tree(&["one"]);
    let ledger = file_ledger(&scratch).await;
    record_ok(&ledger, "one").await;
    let other = FileLedger::new(scratch.file("ledger.json"));
    let lease = migration_core::Lock::acquire(&other, "other-runner", Duration::from_secs(60))
        .await
        .unwrap();
    let held = || other.raw_data().unwrap().unwrap()[migration_core::fence::LOCK_KEY].clone();
    let before = held();
    // A run that needs the lock (ONLY re-runs `one`) waits for the holder...
    let mut only = config(Duration::ZERO);
    only.settings.only = Some(s("one"));
    let waited = only
        .run(&scratch.load(), &ledger, &Quiet)
        .await
        .unwrap_err();
    assert!(matches!(waited, RunError::LockBusy { .. }), "{waited}");
    // ...one that read first and found nothing to do does not.
    let read = ledger.read().await;
    let report = run_after(&scratch, &ledger, read, &config(Duration::from_secs(5)))
        .await
        .unwrap();
    assert_eq!((report.pending, report.seeded), (0, 0));
    assert!(report.results.is_empty());
    assert_eq!(held(), before, "the holder's lock is untouched");
    migration_core::Lock::release(&other, &lease).await.unwrap();
}

#[tokio::test]
async fn a_failed_first_read_is_never_nothing_to_do() {
    let scratch = tree(&["one"]);
    let ledger = file_ledger(&scratch).await;
    // A read that failed once: the run reads again under the lock, finds
    // `one` pending and runs it.
    let failed = Err(LedgerError::Unreadable {
        ledger: ledger.describe(),
        reason: "a failure of the first read".into(),
    });
    let report = run_after(&scratch, &ledger, failed, &config(Duration::ZERO))
        .await
        .unwrap();
    assert_eq!(ran(&report), ["one"]);
    // A ledger that stays unreadable fails the run, running nothing.
    let scratch = tree(&["one"]);
    std::fs::write(scratch.file("ledger.json"), "not a ledger\n").unwrap();
    let ledger = FileLedger::new(scratch.file("ledger.json"));
    let read = ledger.read().await;
    assert!(read.is_err(), "{read:?}");
    let err = run_after(&scratch, &ledger, read, &config(Duration::ZERO))
        .await
        .unwrap_err();
    assert!(
        matches!(err, RunError::Ledger(LedgerError::Unreadable { .. })),
        "{err}"
    );
    assert!(scratch.lines("effects").is_empty());
}

/// A run of a tree of `first` after a read of `ledger`, the server's
/// request count reset after that read: it runs `first`.
async fn runs_first_on_its_read(server: &TestApiServer, ledger: &dyn LockedLedger) {
    let scratch = tree(&["first"]);
    let read = ledger.read().await;
    server.requests().reset();
    let report = run_after(&scratch, ledger, read, &config(Duration::ZERO))
        .await
        .unwrap();
    assert_eq!(ran(&report), ["first"]);
}

/// A run of a tree of `first` after a read of `ledger`, when another runner
/// recorded `first` through `other` after that read: nothing runs.
async fn plans_again_after_a_write(ledger: &dyn LockedLedger, other: &dyn Ledger) {
    let scratch = tree(&["first"]);
    let read = ledger.read().await;
    // Another runner records `first` after this run's read.
    record_ok(other, "first").await;
    let report = run_after(&scratch, ledger, read, &config(Duration::ZERO))
        .await
        .unwrap();
    assert!(report.results.is_empty(), "{:?}", ran(&report));
    assert!(scratch.lines("effects").is_empty(), "`first` did not run");
}

const NS: &str = "cozy-system";
const NAME: &str = "cozystack-version";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_the_configmap_ledger_the_run_plans_on_the_read_it_was_given_and_reads_no_more() {
    let server = TestApiServer::start().await;
    let ledger = ConfigMapLedger::new(server.client(), NS, NAME);
    ledger.create(&[]).await.unwrap();
    runs_first_on_its_read(&server, &ledger).await;
    // K = 1: the Lease of older runners, the patch before the script and
    // the one after it; the read it was given was the run's only GET of
    // the ConfigMap (K + 3 requests in all).
    assert_eq!(server.requests().count(Verb::Get, "configmaps"), 0);
    assert_eq!(server.requests().count(Verb::Patch, "configmaps"), 2);
    assert_eq!(server.requests().total(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_the_configmap_ledger_a_write_after_the_read_makes_the_run_plan_again_before_anything_runs()
 {
    let server = TestApiServer::start().await;
    let ledger = ConfigMapLedger::new(server.client(), NS, NAME);
    ledger.create(&[]).await.unwrap();
    plans_again_after_a_write(&ledger, &ConfigMapLedger::new(server.client(), NS, NAME)).await;
}

/// A test server serving the `MigrationLedger` resource, and an empty
/// custom-resource ledger `NAME` on it.
async fn crd_ledger() -> (TestApiServer, ledger_crd::CrdLedger) {
    let server = TestApiServer::start().await;
    server.register_custom_resource(GROUP, VERSION, PLURAL, KIND, false, true);
    let ledger = ledger_crd::CrdLedger::new(server.client(), NAME);
    ledger.create(&[]).await.unwrap();
    (server, ledger)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_the_custom_resource_ledger_the_run_plans_on_the_read_it_was_given_and_reads_no_more() {
    let (server, ledger) = crd_ledger().await;
    runs_first_on_its_read(&server, &ledger).await;
    // K = 1: the Lease of older runners, the status write before the script
    // (taking the lock in `status.lock`) and the one after it (releasing
    // it); the read it was given was the run's only read of the object
    // (K + 3 requests in all).
    assert_eq!(server.requests().count(Verb::Get, "migrationledgers"), 0);
    assert_eq!(
        server
            .requests()
            .count(Verb::Patch, "migrationledgers/status"),
        2
    );
    assert_eq!(server.requests().count(Verb::Get, "leases"), 1);
    assert_eq!(server.requests().total(), 3);
    let stored = server
        .object("migrationledgers.migrations.cozystack.io", "", NAME)
        .unwrap();
    assert!(
        stored["status"].get("lock").is_none(),
        "the last write released the lock: {stored}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_the_custom_resource_ledger_a_write_after_the_read_makes_the_run_plan_again_before_anything_runs()
 {
    let (server, ledger) = crd_ledger().await;
    plans_again_after_a_write(&ledger, &ledger_crd::CrdLedger::new(server.client(), NAME)).await;
}
