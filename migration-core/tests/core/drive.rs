//! The whole run as core drives it (`migration_core::drive`), through a fake
//! executor: what runs, what is recorded and reported, how the run waits
//! for the lock and stops (CONTRACT.md §5.5, §6, §7).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use ledger_memory::MemoryLedger;
use ledger_memory::{Fault, FaultyLedger, Operation};
use migration_core::drive::{
    Console, Driver, Ended, Executor, Job, LockLostAt, RunError, RunReport, RunSettings, Running,
    Scan, Scanned, ScriptEnd, UnsafeFinding,
};
use migration_core::header::Tier;
use migration_core::plan::PendingMigration;
use migration_core::run::{NOT_YET, NOT_YET_EXIT_STATUS};
use migration_core::testing::fixtures::{TreeBuilder, clock, s};
use migration_core::{
    EntryState, Ledger, Lock, LockedLedger, MigrationsTree, OnError, Outcome, Slug,
};

/// Runs scripts by looking up what each slug "does"; counts executions.
#[derive(Default)]
struct FakeExecutor {
    ends: HashMap<String, ScriptEnd>,
    executed: Vec<(String, u32, Vec<u8>)>,
    interrupted: bool,
    /// Set the interrupt on the first pause.
    interrupt_on_pause: bool,
    pauses: Vec<Duration>,
    checkpoints: Mutex<Vec<String>>,
    /// The slug during whose execution the lock is lost, and the ledger
    /// that fails the renewal then.
    loses_lock: Option<(String, FaultyLedger)>,
    /// Every "live until" the scripts were told: at the start, then at
    /// each renewal.
    leases: Vec<Instant>,
    /// Whether a script was stopped.
    stopped: bool,
}

/// A started fake script: ends at once with its `end`, unless it is the
/// one during which the lock is lost: then it runs until stopped, failing
/// the next renewal.
struct FakeRunning<'e> {
    end: ScriptEnd,
    loses_lock: Option<&'e FaultyLedger>,
    renewals: &'e mut Vec<Instant>,
    stopped: &'e mut bool,
}

#[async_trait]
impl Running for FakeRunning<'_> {
    async fn wait(&mut self, at_most: Duration) -> Option<ScriptEnd> {
        match self.loses_lock.take() {
            Some(faulty) => {
                faulty.fail_next(Operation::RenewLock, Fault::Permanent);
                std::thread::sleep(at_most);
                None
            }
            None if *self.stopped => None,
            None => Some(self.end.clone()),
        }
    }

    fn lease_renewed(&mut self, until: Instant) {
        self.renewals.push(until);
    }

    async fn stop(&mut self) {
        *self.stopped = true;
    }
}

#[async_trait]
impl Executor for FakeExecutor {
    async fn start<'e>(&'e mut self, job: Job<'_>) -> Result<Box<dyn Running + 'e>, String> {
        let slug = job.pending.slug.to_string();
        self.executed
            .push((slug.clone(), job.attempt, job.script.to_vec()));
        self.leases.push(job.lease_live_until);
        let end = self.ends.get(&slug).cloned().unwrap_or(ScriptEnd::Ran {
            outcome: Outcome::Succeeded,
            cluster_commands: None,
        });
        let loses_lock = self
            .loses_lock
            .as_ref()
            .filter(|(during, _)| *during == slug)
            .map(|(_, faulty)| faulty);
        Ok(Box::new(FakeRunning {
            end,
            loses_lock,
            renewals: &mut self.leases,
            stopped: &mut self.stopped,
        }))
    }

    fn interrupted(&self) -> bool {
        self.interrupted
    }

    async fn pause(&mut self, pause: Duration) {
        self.pauses.push(pause);
        if self.interrupt_on_pause {
            self.interrupted = true;
        } else {
            std::thread::sleep(pause);
        }
    }

    fn checkpoint(&self, point: &str) {
        self.checkpoints.lock().unwrap().push(point.to_owned());
    }
}

/// Reads every pending script as `#!/bin/sh\n<slug>`, except those it
/// finds unsafe or leaves unread.
#[derive(Default)]
struct FakeScan {
    unsafe_slugs: Vec<String>,
    unread: Vec<String>,
}

impl FakeScan {
    /// A scan that finds `slug` unsafe.
    fn finding_unsafe(slug: &str) -> Self {
        FakeScan {
            unsafe_slugs: vec![slug.into()],
            ..FakeScan::default()
        }
    }

    /// A scan that leaves `slug` unread.
    fn leaving_unread(slug: &str) -> Self {
        FakeScan {
            unread: vec![slug.into()],
            ..FakeScan::default()
        }
    }
}

impl Scan for FakeScan {
    fn scan(&self, _tree: &MigrationsTree, pending: &[PendingMigration]) -> Scanned {
        let mut scanned = Scanned::default();
        for p in pending {
            let slug = p.slug.to_string();
            if self.unsafe_slugs.contains(&slug) {
                scanned.findings.push(UnsafeFinding {
                    file: format!("pre-apply/{slug}"),
                    line: Some(2),
                    rule: "for-over-command-substitution".into(),
                    message: "hides a failure".into(),
                });
            }
            if !self.unread.contains(&slug) {
                scanned
                    .scripts
                    .insert(p.slug.clone(), format!("#!/bin/sh\n{slug}").into_bytes());
            }
        }
        scanned
    }
}

#[derive(Default)]
struct Lines(Mutex<Vec<String>>);

impl Console for Lines {
    fn script_line(&self, slug: &Slug, line: &str) {
        self.0.lock().unwrap().push(format!("{slug}| {line}"));
    }

    fn progress(&self, line: &str) {
        self.0.lock().unwrap().push(line.to_owned());
    }
}

fn tree() -> MigrationsTree {
    TreeBuilder::new()
        .pre("first")
        .script_with(Tier::PreApply, "waits", OnError::Abort, &[], "exit 75")
        .script_with(Tier::PreApply, "breaks", OnError::Warn, &[], "exit 1")
        .script_with(
            Tier::PreApply,
            "needs-breaks",
            OnError::Warn,
            &["breaks"],
            ":",
        )
        .manifest(&[("00001-v1", "first\nwaits\nbreaks\nneeds-breaks\n")])
        .build()
}

fn settings() -> RunSettings {
    RunSettings {
        tier: Tier::PreApply,
        only: None,
        image: Some("img".into()),
        lock_ttl: Duration::from_secs(60),
        lock_wait: Duration::from_secs(60),
        holder: "test-runner".into(),
        message_limit: 4096,
        allowed_interpreters: migration_core::PlanContext::default_interpreters(),
        require_existing_ledger: true,
    }
}

async fn existing_ledger() -> MemoryLedger {
    let ledger = MemoryLedger::new();
    ledger.create(&[]).await.unwrap();
    ledger
}

fn ends() -> HashMap<String, ScriptEnd> {
    HashMap::from([
        (
            "waits".to_owned(),
            ScriptEnd::Ran {
                outcome: Outcome::NotYet {
                    message: "crd x is not served yet".into(),
                },
                cluster_commands: None,
            },
        ),
        (
            "breaks".to_owned(),
            ScriptEnd::Ran {
                outcome: Outcome::Failed {
                    reason: "exit-status-1".into(),
                    message: "boom".into(),
                },
                cluster_commands: None,
            },
        ),
    ])
}

async fn drive(
    tree: &MigrationsTree,
    ledger: &dyn LockedLedger,
    settings: &RunSettings,
    scan: &FakeScan,
    executor: &mut FakeExecutor,
    console: &Lines,
) -> Result<RunReport, RunError> {
    let clock = clock();
    Driver {
        tree,
        ledger,
        clock: &clock,
        settings,
        console,
        scan,
    }
    .run(executor)
    .await
}

/// Drives a run the scan finds nothing in.
async fn run_on(
    tree: &MigrationsTree,
    ledger: &dyn LockedLedger,
    settings: &RunSettings,
    executor: &mut FakeExecutor,
    console: &Lines,
) -> Result<RunReport, RunError> {
    drive(
        tree,
        ledger,
        settings,
        &FakeScan::default(),
        executor,
        console,
    )
    .await
}

/// The ledger of `existing_ledger`, its run lock held by another runner for
/// ten minutes.
async fn ledger_locked_by_someone_else() -> MemoryLedger {
    let ledger = existing_ledger().await;
    ledger
        .acquire("someone-else", Duration::from_secs(600))
        .await
        .unwrap();
    ledger
}

/// Runs `tree()` with a 300 ms lock lifetime (renewed every 100 ms) on a
/// ledger whose renewal fails once "waits" is running, so the script runs
/// past one renewal, which fails: the executor, the settings, when the run
/// began and how it ended.
async fn run_losing_the_lock_while_waits_runs() -> (
    FakeExecutor,
    RunSettings,
    Instant,
    Result<RunReport, RunError>,
) {
    let tree = tree();
    let faulty = FaultyLedger::new(Arc::new(existing_ledger().await));
    let mut executor = FakeExecutor {
        ends: ends(),
        loses_lock: Some(("waits".into(), faulty.clone())),
        ..FakeExecutor::default()
    };
    let settings = RunSettings {
        lock_ttl: Duration::from_millis(300),
        ..settings()
    };
    let before = Instant::now();
    let result = run_on(&tree, &faulty, &settings, &mut executor, &Lines::default()).await;
    (executor, settings, before, result)
}

/// Drives a run the scan `scan` refuses, checking that nothing executed and
/// no attempt was noted; the refusal.
async fn refused_by(scan: FakeScan) -> RunError {
    let (tree, ledger) = (tree(), existing_ledger().await);
    let mut executor = FakeExecutor::default();
    let console = Lines::default();
    let err = drive(&tree, &ledger, &settings(), &scan, &mut executor, &console)
        .await
        .unwrap_err();
    assert!(executor.executed.is_empty());
    let snapshot = ledger.read().await.unwrap().unwrap();
    assert!(snapshot.attempts_started.is_empty(), "no attempt noted");
    err
}

#[tokio::test]
async fn a_run_driven_by_core_executes_each_pending_script_once_and_reports_how_each_ended() {
    let (tree, ledger) = (tree(), existing_ledger().await);
    let mut executor = FakeExecutor {
        ends: ends(),
        ..FakeExecutor::default()
    };
    let console = Lines::default();
    let report = run_on(&tree, &ledger, &settings(), &mut executor, &console)
        .await
        .unwrap();
    let executed: Vec<_> = executor
        .executed
        .iter()
        .map(|(slug, attempt, script)| (slug.as_str(), *attempt, script.clone()))
        .collect();
    assert_eq!(
        executed,
        [
            ("first", 1, b"#!/bin/sh\nfirst".to_vec()),
            ("waits", 1, b"#!/bin/sh\nwaits".to_vec()),
            ("breaks", 1, b"#!/bin/sh\nbreaks".to_vec()),
        ],
        "each executable script once, with the bytes the scan read"
    );
    let ended: Vec<_> = report
        .results
        .iter()
        .map(|r| (r.slug.as_str(), r.outcome, r.reason.as_deref()))
        .collect();
    assert_eq!(
        ended,
        [
            ("first", Ended::Ok, None),
            ("waits", Ended::NotYet, Some(NOT_YET)),
            ("breaks", Ended::Failed, Some("exit-status-1")),
            ("needs-breaks", Ended::Blocked, Some("requirement-unmet")),
        ]
    );
    // The report's words, as `migrate run --json` prints them.
    let json = serde_json::to_value(&report).unwrap();
    let words: Vec<_> = json["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["outcome"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(words, ["ok", "not-yet", "failed", "blocked"]);
    let snapshot = ledger.read().await.unwrap().unwrap();
    let state = |slug: &str| snapshot.entry(&s(slug)).map(|e| e.state);
    assert_eq!(state("first"), Some(EntryState::Ok));
    assert_eq!(state("waits"), Some(EntryState::NotYet));
    assert_eq!(state("breaks"), Some(EntryState::Failed));
    assert_eq!(state("needs-breaks"), Some(EntryState::Failed));
    assert!(
        console
            .0
            .lock()
            .unwrap()
            .iter()
            .any(|l| l.starts_with("done: 1 ok, 1 failed, 1 blocked, 1 not yet, 0 not run")),
        "the summary is printed"
    );
    assert_eq!(
        NOT_YET,
        format!("exit-status-{NOT_YET_EXIT_STATUS}"),
        "the not-yet reason names the exit status"
    );
}

#[tokio::test]
async fn the_run_reaches_its_checkpoints_in_order() {
    let tree = TreeBuilder::new()
        .pre("only-one")
        .manifest(&[("00001-v1", "only-one\n")])
        .build();
    let ledger = existing_ledger().await;
    let mut executor = FakeExecutor::default();
    let console = Lines::default();
    run_on(&tree, &ledger, &settings(), &mut executor, &console)
        .await
        .unwrap();
    assert_eq!(
        *executor.checkpoints.lock().unwrap(),
        [
            "before-lock",
            "after-lock",
            "after-prepare",
            "before-script:only-one",
            "after-script:only-one",
            "after-record:only-one",
        ]
    );
}

#[tokio::test]
async fn a_scan_finding_refuses_the_run_before_anything_executes_or_is_noted() {
    let err = refused_by(FakeScan::finding_unsafe("breaks")).await;
    assert!(
        matches!(&err, RunError::Unsafe { findings } if findings.len() == 1),
        "{err}"
    );
    assert!(
        err.to_string()
            .contains("pre-apply/breaks:2: [for-over-command-substitution] hides a failure"),
        "{err}"
    );
}

#[tokio::test]
async fn a_script_the_scan_did_not_read_is_not_run_nor_counted() {
    let err = refused_by(FakeScan::leaving_unread("first")).await;
    assert!(
        matches!(&err, RunError::Spawn { slug, .. } if slug.as_str() == "first"),
        "{err}"
    );
    assert!(err.to_string().contains("not scanned"), "{err}");
}

#[tokio::test]
async fn a_run_waits_for_a_held_lock_through_the_executors_pause_and_gives_up_after_lock_wait() {
    let (tree, ledger) = (tree(), ledger_locked_by_someone_else().await);
    let mut settings = settings();
    settings.lock_wait = Duration::from_millis(300);
    let mut executor = FakeExecutor::default();
    let console = Lines::default();
    let err = run_on(&tree, &ledger, &settings, &mut executor, &console)
        .await
        .unwrap_err();
    assert!(matches!(err, RunError::LockBusy { .. }), "{err}");
    assert!(
        !executor.pauses.is_empty(),
        "it waited through the executor"
    );
    assert!(
        executor
            .pauses
            .iter()
            .all(|p| *p <= Duration::from_millis(500))
    );
    assert!(executor.executed.is_empty());
    let waiting = console
        .0
        .lock()
        .unwrap()
        .iter()
        .filter(|l| l.starts_with("waiting for the run lock"))
        .count();
    assert_eq!(waiting, 1, "the wait is announced once");
}

#[tokio::test]
async fn an_interrupt_while_waiting_for_the_lock_ends_the_run_before_anything_ran() {
    let (tree, ledger) = (tree(), ledger_locked_by_someone_else().await);
    let mut executor = FakeExecutor {
        interrupt_on_pause: true,
        ..FakeExecutor::default()
    };
    let console = Lines::default();
    let err = run_on(&tree, &ledger, &settings(), &mut executor, &console)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, RunError::Interrupted { slug: None, .. }),
        "{err}"
    );
    assert_eq!(
        err.to_string(),
        "interrupted before any migration started; nothing ran"
    );
    assert!(executor.executed.is_empty());
}

#[tokio::test]
async fn a_lock_lost_while_a_script_runs_stops_the_run_and_names_the_migration() {
    let (executor, _, _, result) = run_losing_the_lock_while_waits_runs().await;
    let err = result.unwrap_err();
    assert!(
        matches!(
            &err,
            RunError::LockLost { slug, at: LockLostAt::Running, .. } if slug.as_str() == "waits"
        ),
        "{err}"
    );
    assert!(
        executor.stopped,
        "the script was stopped when the renewal failed"
    );
    let ran: Vec<_> = executor.executed.iter().map(|e| e.0.as_str()).collect();
    assert_eq!(ran, ["first", "waits"], "nothing ran after the loss");
}

#[tokio::test]
async fn a_script_running_across_renewals_is_told_each_time_how_long_its_lease_is_live() {
    let (executor, settings, before, _) = run_losing_the_lock_while_waits_runs().await;
    // "first" and "waits" started (two leases); the failed renewal told
    // nothing. Each lease is at most one lifetime past its start.
    assert_eq!(executor.leases.len(), 2, "{:?}", executor.leases);
    for until in &executor.leases {
        assert!(*until > before && *until <= Instant::now() + settings.lock_ttl);
    }
}

#[tokio::test]
async fn a_dry_run_plans_and_scans_as_the_run_would_without_the_lock_writes_or_executions() {
    // Held by another runner: a dry run neither waits nor cares.
    let (tree, ledger) = (tree(), ledger_locked_by_someone_else().await);
    let before = ledger.read().await;
    let scan = FakeScan::finding_unsafe("breaks");
    let (clock, console) = (clock(), Lines::default());
    let driver = |settings| Driver {
        tree: &tree,
        ledger: &ledger,
        clock: &clock,
        settings,
        console: &console,
        scan: &scan,
    };
    let settings = settings();
    let dry = driver(&settings).dry_run(&before).await.unwrap();
    let pending: Vec<_> = dry.plan.pending.iter().map(|p| p.slug.as_str()).collect();
    assert_eq!(pending, ["first", "waits", "breaks", "needs-breaks"]);
    assert_eq!(dry.findings.len(), 1, "the scan's finding is reported");
    assert_eq!(
        ledger.read().await.unwrap(),
        before.unwrap(),
        "nothing written"
    );
    // A ledger that must exist and does not refuses, as the run would.
    let absent = MemoryLedger::new();
    let err = Driver {
        ledger: &absent,
        ..driver(&settings)
    }
    .dry_run(&absent.read().await)
    .await
    .unwrap_err();
    assert!(matches!(err, RunError::NoLedger(_)), "{err}");
}
