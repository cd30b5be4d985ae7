//! The hook runner on the ConfigMap ledger, whose run lock lives in the
//! ConfigMap (CONTRACT.md §5.5): a run waits for another holder and names
//! it, takes the lock with its first write and releases it with its last,
//! and a run with nothing to do takes none.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Mutex;
use std::time::Duration;

use ledger_configmap::{ConfigMapLedger, LOCK_ANNOTATION};
use migration_core::drive::{Console, RunError, RunReport};
use migration_core::testing::fixtures::{ScratchTree, TreeBuilder, s};
use migration_core::{EntryState, Ledger, LedgerEntry, Lock, OnError, Slug, Tier};
use test_apiserver::{TestApiServer, Verb};

use crate::common::in_process::InProcess;

const NS: &str = "cozy-system";
const NAME: &str = "cozystack-version";

/// Keeps the runner's progress lines.
#[derive(Default)]
struct Lines(Mutex<Vec<String>>);

impl Console for Lines {
    fn script_line(&self, _: &Slug, _: &str) {}
    fn progress(&self, line: &str) {
        self.0.lock().unwrap().push(line.to_owned());
    }
}

/// One pending pre-apply script that appends its slug to `<dir>/effects`.
fn one_pending() -> ScratchTree {
    TreeBuilder::new()
        .script_with(
            Tier::PreApply,
            "first",
            OnError::Abort,
            &[],
            r#"echo "$MIGRATION_SLUG" >> "$MIGRATION_TREE/../effects""#,
        )
        .manifest(&[("00001-v1", "first\n")])
        .scratch()
}

fn config(holder: &str, wait: Duration) -> InProcess {
    let mut c = InProcess::new(holder);
    c.settings.lock_wait = wait;
    c
}

async fn run(
    scratch: &ScratchTree,
    ledger: &ConfigMapLedger,
    config: &InProcess,
    console: &Lines,
) -> Result<RunReport, RunError> {
    config.run(&scratch.load(), ledger, console).await
}

fn lock_annotation(server: &TestApiServer) -> Option<String> {
    server.object("configmaps", NS, NAME).unwrap()["metadata"]["annotations"][LOCK_ANNOTATION]
        .as_str()
        .map(str::to_owned)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_waits_for_the_holder_of_the_lock_in_the_configmap_naming_it_then_takes_it() {
    let server = TestApiServer::start().await;
    let ledger = ConfigMapLedger::new(server.client(), NS, NAME);
    ledger
        .create(&[(
            s("recorded"),
            LedgerEntry::new(EntryState::Ok, migration_core::Timestamp::now()),
        )])
        .await
        .unwrap();
    let scratch = one_pending();
    let other = ledger
        .acquire("other-runner/pid-7", Duration::from_secs(60))
        .await
        .unwrap();
    let console = Lines::default();
    let err = run(
        &scratch,
        &ledger,
        &config("hook-pod", Duration::from_millis(800)),
        &console,
    )
    .await
    .unwrap_err();
    assert!(matches!(err, RunError::LockBusy { .. }), "{err}");
    let lines = console.0.lock().unwrap().clone();
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("waiting for the run lock:") && l.contains("other-runner/pid-7")),
        "{lines:?}"
    );
    assert!(
        scratch.lines("effects").is_empty(),
        "nothing ran under another's lock"
    );
    let snapshot = ledger.read().await.unwrap().unwrap();
    assert!(snapshot.attempts_started.is_empty() && snapshot.entry(&s("first")).is_none());
    // Released: the next run takes the lock with its first write, runs the
    // script and releases the lock with its record.
    ledger.release(&other).await.unwrap();
    server.requests().reset();
    let report = run(
        &scratch,
        &ledger,
        &config("hook-pod", Duration::ZERO),
        &Lines::default(),
    )
    .await
    .unwrap();
    assert_eq!(report.results.len(), 1);
    assert_eq!(scratch.lines("effects"), ["first"]);
    assert_eq!(
        lock_annotation(&server),
        None,
        "released with the last write"
    );
    assert_eq!(server.requests().count(Verb::Patch, "configmaps"), 2);
    assert_eq!(server.requests().count(Verb::Get, "leases"), 1);
    assert_eq!(server.requests().total(), 4);
    let entry = ledger
        .read()
        .await
        .unwrap()
        .unwrap()
        .entry(&s("first"))
        .cloned()
        .unwrap();
    assert_eq!((entry.state, entry.attempts), (EntryState::Ok, 1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_with_nothing_to_do_neither_waits_nor_takes_the_lock() {
    let server = TestApiServer::start().await;
    let ledger = ConfigMapLedger::new(server.client(), NS, NAME);
    let done = LedgerEntry::new(EntryState::Ok, migration_core::Timestamp::now());
    ledger.create(&[(s("first"), done)]).await.unwrap();
    let scratch = one_pending();
    let other = ledger
        .acquire("other-runner/pid-7", Duration::from_secs(60))
        .await
        .unwrap();
    let before = lock_annotation(&server);
    server.requests().reset();
    let report = run(
        &scratch,
        &ledger,
        &config("hook-pod", Duration::from_secs(30)),
        &Lines::default(),
    )
    .await
    .unwrap();
    assert_eq!(report.pending, 0);
    assert_eq!(server.requests().total(), 1, "one read, no lock, no write");
    assert_eq!(
        lock_annotation(&server),
        before,
        "the holder's lock is untouched"
    );
    ledger.release(&other).await.unwrap();
}
