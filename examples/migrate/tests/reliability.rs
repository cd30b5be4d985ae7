//! Reliability suites 1 to 3: fault schedules, crash points and concurrent
//! runners, driving the real runner with real shell scripts. Each suite
//! records how much it tried in `target/tmp/reliability/` (printed by CI).
//! `RELIABILITY_SOAK=1` raises the number of random schedules.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::result_large_err)]

mod common;

use common::block_on;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use ledger_configmap::{ConfigMapLedger, Options};
use ledger_memory::{Fault, FaultyLedger, MemoryLedger};
use migrate::runner::{self, Console, RunConfig, RunError};
use migration_core::testing::fixtures::{
    NOW, ScratchTree, TreeBuilder, clock, s, shared_clock, write_figure,
};
use migration_core::{
    EntryState, Lease, Ledger, LedgerEntry, LedgerError, LedgerSnapshot, ManualClock,
    MigrationsTree, OnError, Slug, Tier, WriteMode, WriteReport,
};
use migration_core::{Lock, LockedLedger};
use migration_kube::RetryPolicy;
use test_apiserver::{FaultRule, LostReply, TestApiServer};

/// The slugs an upgrade of the scenario runs, in order.
const UPGRADE: [&str; 3] = ["good-one", "fails-warn", "good-two"];

fn figure(suite: &str, name: &str, text: &str) {
    write_figure(Path::new(env!("CARGO_TARGET_TMPDIR")), suite, name, text);
}

fn soak() -> bool {
    std::env::var("RELIABILITY_SOAK").is_ok()
}

struct Silent;

impl Console for Silent {
    fn script_line(&self, _: &Slug, _: &str) {}
    fn progress(&self, _: &str) {}
}

/// A tree where every script appends its slug to `<dir>/effects`, so real
/// executions can be counted: `good-one` and `good-two` succeed,
/// `fails-warn` exits 1 under on-error=warn. With `legacy`, three more
/// scripts `l0..l2` form the legacy map.
struct Scenario {
    scratch: ScratchTree,
}

impl Scenario {
    fn new(legacy: bool) -> Self {
        let effect = r#"echo "$MIGRATION_SLUG" >> "$MIGRATION_TREE/../effects""#;
        let script = |tree: TreeBuilder, slug: &str, on_error: OnError, tail: &str| {
            let body = format!("{effect}{tail}");
            tree.script_with(Tier::PreApply, slug, on_error, &[], &body)
        };
        let mut tree = TreeBuilder::new();
        tree = script(tree, "good-one", OnError::Abort, "");
        tree = script(tree, "fails-warn", OnError::Warn, "\nexit 1");
        tree = script(tree, "good-two", OnError::Abort, "");
        let mut batches = vec![("00001-v1", "good-one\nfails-warn\ngood-two\n")];
        if legacy {
            let mut map = String::new();
            for i in 0..3 {
                tree = script(tree, &format!("l{i}"), OnError::Abort, "");
                map.push_str(&format!("{i} l{i}\n"));
            }
            tree = tree.legacy_map(&map);
            batches.insert(0, ("00000-legacy", "l0\nl1\nl2\n"));
        }
        Scenario {
            scratch: tree.manifest(&batches).scratch(),
        }
    }

    fn tree(&self) -> MigrationsTree {
        self.scratch.load()
    }

    fn executions(&self) -> BTreeMap<String, u32> {
        let mut counts = BTreeMap::new();
        for line in self.scratch.lines("effects") {
            *counts.entry(line).or_insert(0) += 1;
        }
        counts
    }

    fn root(&self) -> PathBuf {
        self.scratch.root()
    }

    /// Creates the scenario's file ledger, existing but empty (an upgrade),
    /// and returns its `--ledger` spec.
    fn file_ledger(&self) -> String {
        common::empty_file_ledger(&self.scratch.file("ledger.json"))
    }

    /// What the scenario's file ledger holds.
    fn file_snapshot(&self) -> LedgerSnapshot {
        block_on(ledger_memory::FileLedger::new(self.scratch.file("ledger.json")).read())
            .unwrap()
            .unwrap()
    }
}

fn config(only: Option<&str>) -> RunConfig {
    let mut c = RunConfig::new(Tier::PreApply, "reliability-runner".into());
    c.only = only.map(s);
    c.lock_wait = Duration::ZERO;
    c.grace = Duration::from_millis(200);
    // In process, the runner's own executable is this test: point it at
    // the real tripwire binary.
    c.tripwire.shim = Some(env!("CARGO_BIN_EXE_migrate-shim").into());
    c
}

fn run(
    tree: &MigrationsTree,
    ledger: &dyn LockedLedger,
    clock: &ManualClock,
    only: Option<&str>,
) -> Result<runner::RunReport, RunError> {
    let (_tx, rx) = tokio::sync::watch::channel(false);
    block_on(runner::run(tree, ledger, clock, &config(only), &Silent, rx))
}

/// Checks what must hold after any sequence of runs that ended in success.
fn check_final(scenario: &Scenario, snapshot: &LedgerSnapshot, expected: &[&str]) {
    check_final_allowing(scenario, snapshot, expected, None);
}

/// As [`check_final`]; `overcounted` names the one slug whose attempt was
/// noted by a runner that died before spawning it (the documented window:
/// attempts may exceed executions by one there, never fall short).
fn check_final_allowing(
    scenario: &Scenario,
    snapshot: &LedgerSnapshot,
    expected: &[&str],
    overcounted: Option<&str>,
) {
    let executions = scenario.executions();
    for slug in expected {
        let entry = snapshot
            .entry(&s(slug))
            .unwrap_or_else(|| panic!("{slug} silently skipped: no entry"));
        let ran = executions.get(*slug).copied().unwrap_or(0);
        let slack = u32::from(overcounted == Some(*slug));
        assert!(
            entry.attempts >= ran && entry.attempts <= ran + slack,
            "{slug}: attempts {} for {ran} real execution(s)",
            entry.attempts
        );
        if *slug == "fails-warn" {
            assert_eq!(
                entry.state,
                EntryState::Failed,
                "a script that exited 1 must never be ok"
            );
        } else {
            assert_eq!(entry.state, EntryState::Ok, "{slug}");
        }
    }
}

/// The kinds of run a schedule is applied to.
#[derive(Debug, Clone, Copy)]
enum Kind {
    Upgrade,
    FreshInstall,
    Legacy,
    OnlyRerun,
}

/// Prepares the ledger for `kind` and returns what it must hold at the end
/// (slugs with entries from runs) and the entries that must never change.
fn prepare(
    kind: Kind,
    memory: &MemoryLedger,
    scenario: &Scenario,
    clock: &ManualClock,
) -> Vec<&'static str> {
    match kind {
        Kind::Upgrade => {
            block_on(memory.create(&[(s("pre-recorded"), LedgerEntry::new(EntryState::Ok, NOW))]))
                .unwrap();
            UPGRADE.to_vec()
        }
        Kind::FreshInstall => vec![],
        Kind::Legacy => {
            memory.put_raw("version", "2");
            vec!["l2", "good-one", "fails-warn", "good-two"]
        }
        Kind::OnlyRerun => {
            block_on(memory.create(&[])).unwrap();
            run(&scenario.tree(), memory, clock, None).unwrap();
            UPGRADE.to_vec()
        }
    }
}

fn only_for(kind: Kind) -> Option<&'static str> {
    matches!(kind, Kind::OnlyRerun).then_some("good-one")
}

/// Runs one schedule against the fault-injecting memory backend and checks
/// every invariant. Returns whether the faulted run itself succeeded.
fn schedule(
    kind: Kind,
    faults: &dyn Fn(&FaultyLedger),
    baseline: Option<&BTreeMap<String, String>>,
    transient_only: bool,
) -> (bool, bool) {
    let scenario = Scenario::new(matches!(kind, Kind::Legacy));
    let tree = scenario.tree();
    let clock = clock();
    let memory = MemoryLedger::with_clock(shared_clock());
    let expected = prepare(kind, &memory, &scenario, &clock);
    let before = memory.raw_data().unwrap_or_default();
    let faulty = FaultyLedger::new(Arc::new(memory.clone()))
        .with_retries(migration_core::retry::RetryPolicy::immediate(3));
    faults(&faulty);
    let outcome = run(&tree, &faulty, &clock, only_for(kind));
    let succeeded = outcome.is_ok();
    // A failed run whose attempt mark got through with a lost reply noted an
    // execution that never started: the documented over-count by one.
    let noted_without_spawn = !succeeded
        && faulty.calls().iter().any(|c| {
            *c == (
                ledger_memory::Operation::NoteAttempt,
                Some(Fault::LostReply),
            )
        });
    if let Err(e) = &outcome {
        // A failure names what failed; then a plain re-run (the Job retry) completes.
        let text = e.to_string();
        let names_operation = [
            "read",
            "create",
            "write",
            "note attempt",
            "acquire lock",
            "renew lock",
            "release lock",
            "recording",
            "could not be recorded",
        ]
        .iter()
        .any(|op| text.contains(op));
        assert!(names_operation, "the error must name the operation: {text}");
        assert!(
            !matches!(e, RunError::MigrationFailed { .. }),
            "no migration may fail from a ledger fault: {text}"
        );
        // The crashed run may hold the lock; a fresh runner waits it out.
        let lease = block_on(memory.acquire("reliability-runner", Duration::from_secs(1)));
        if let Ok(lease) = lease {
            block_on(memory.release(&lease)).unwrap();
        }
        run(&tree, &memory, &clock, only_for(kind))
            .unwrap_or_else(|e| panic!("recovery run failed: {e}"));
    }
    let after = memory.raw_data().unwrap();
    // Nothing that existed before was overwritten (ONLY re-runs its own slug).
    for (key, value) in &before {
        if matches!(kind, Kind::OnlyRerun) && (key == "m.good-one" || key == "a.good-one") {
            continue;
        }
        if key.starts_with("a.") {
            continue;
        }
        assert_eq!(after.get(key), Some(value), "{key} was overwritten");
    }
    let snapshot = block_on(memory.read()).unwrap().unwrap();
    let overcounted = noted_without_spawn
        .then(|| {
            let executions = scenario.executions();
            expected.iter().copied().find(|slug| {
                snapshot
                    .attempts_started
                    .get(&s(slug))
                    .copied()
                    .unwrap_or(0)
                    > executions.get(*slug).copied().unwrap_or(0)
            })
        })
        .flatten();
    check_final_allowing(&scenario, &snapshot, &expected, overcounted);
    if matches!(kind, Kind::FreshInstall) {
        assert!(
            scenario.executions().is_empty(),
            "a fresh install runs nothing"
        );
        assert!(snapshot.records.values().all(|r| {
            r.entry()
                .is_some_and(|e| e.state == EntryState::SkippedFreshInstall)
        }));
    }
    if let (Some(baseline), true, true) = (baseline, transient_only, succeeded) {
        assert_eq!(
            comparable(&after),
            comparable(baseline),
            "a transient-only schedule must end in the fault-free ledger"
        );
    }
    (succeeded, overcounted.is_some())
}

/// The ledger with each attempt mark reduced to its count: the mark's token
/// is unique per execution by design, so two runs never share it.
fn comparable(data: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    data.iter()
        .map(|(k, v)| {
            let v = if k.starts_with("a.") {
                migration_core::ledger::AttemptMark::decode(k, v)
                    .map(|m| m.count.to_string())
                    .unwrap_or_else(|_| v.clone())
            } else {
                v.clone()
            };
            (k.clone(), v)
        })
        .collect()
}

fn baseline(kind: Kind) -> (usize, BTreeMap<String, String>) {
    let scenario = Scenario::new(matches!(kind, Kind::Legacy));
    let tree = scenario.tree();
    let clock = clock();
    let memory = MemoryLedger::with_clock(shared_clock());
    prepare(kind, &memory, &scenario, &clock);
    let faulty = FaultyLedger::new(Arc::new(memory.clone()))
        .with_retries(migration_core::retry::RetryPolicy::immediate(3));
    run(&tree, &faulty, &clock, only_for(kind)).unwrap();
    (faulty.calls().len(), memory.raw_data().unwrap())
}

#[test]
fn fault_schedules_on_the_memory_backend_keep_every_invariant() {
    let mut tried = 0;
    let mut failed_runs = 0;
    let mut overcounts = 0;
    for kind in [
        Kind::Upgrade,
        Kind::FreshInstall,
        Kind::Legacy,
        Kind::OnlyRerun,
    ] {
        let (calls, reference) = baseline(kind);
        // Every single fault at every call.
        for n in 1..=calls {
            for fault in [Fault::Transient, Fault::Permanent, Fault::LostReply] {
                let (ok, over) = schedule(
                    kind,
                    &|f: &FaultyLedger| f.fail_call(n, fault),
                    Some(&reference),
                    fault != Fault::Permanent,
                );
                overcounts += usize::from(over);
                if fault != Fault::Permanent {
                    assert!(
                        ok,
                        "{kind:?}: a single {fault:?} at call {n} must be absorbed"
                    );
                }
                tried += 1;
                failed_runs += usize::from(!ok);
            }
        }
        // Random multi-fault schedules.
        let random = if soak() { 400 } else { 25 };
        let mut seed: u64 = 0x5eed ^ calls as u64;
        for _ in 0..random {
            let plan: Vec<Option<Fault>> = (0..calls * 2)
                .map(|_| {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    match seed % 10 {
                        0 => Some(Fault::Transient),
                        1 => Some(Fault::LostReply),
                        2 if seed.is_multiple_of(7) => Some(Fault::Permanent),
                        _ => None,
                    }
                })
                .collect();
            let transient_only = !plan.contains(&Some(Fault::Permanent));
            let plan2 = plan.clone();
            let (ok, over) = schedule(
                kind,
                &move |f: &FaultyLedger| f.set_schedule(plan2.clone()),
                None,
                transient_only,
            );
            overcounts += usize::from(over);
            tried += 1;
            failed_runs += usize::from(!ok);
        }
    }
    figure(
        "fault-schedules",
        "memory backend",
        &format!(
            "{tried} schedules over 4 run kinds (upgrade, fresh install, legacy seeding, ONLY re-run); {failed_runs} runs failed closed and were completed by a re-run; attempts equal to real executions except {overcounts} run(s) that failed after an attempt mark whose reply was lost (attempts one above executions); 0 invariant violations"
        ),
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fault_schedules_through_the_test_api_server_keep_every_invariant() {
    // Count the requests of a fault-free upgrade first.
    let reference = {
        let server = TestApiServer::start().await;
        let (scenario, ledger) = kube_setup(&server).await;
        server.requests().reset();
        kube_run(&scenario, ledger.clone()).await.unwrap();
        (server.requests().total(), scenario.executions())
    };
    let mut tried = 0;
    let mut failed_runs = 0;
    for n in 1..=reference.0 {
        for action in ["500", "429", "403", "lost"] {
            let server = TestApiServer::start().await;
            let (scenario, ledger) = kube_setup(&server).await;
            server.requests().reset();
            let rule = FaultRule::on_any_verb("*").nth(n as u64);
            let rule = match action {
                "500" => rule.respond(500, "InternalError"),
                "429" => rule.too_many_requests(0),
                "403" => rule.respond(403, "Forbidden"),
                _ => rule.lost_reply(LostReply::DropConnection),
            };
            server.faults().inject(rule);
            let outcome = kube_run(&scenario, ledger.clone()).await;
            tried += 1;
            if let Err(e) = &outcome {
                assert_eq!(
                    action, "403",
                    "request {n}: a {action} must be absorbed by retries: {e}"
                );
                failed_runs += 1;
                server.faults().clear();
                kube_run(&scenario, ledger.clone())
                    .await
                    .unwrap_or_else(|e| panic!("recovery: {e}"));
            }
            let snapshot = ledger.read().await.unwrap().unwrap();
            check_final(&scenario, &snapshot, &UPGRADE);
            assert_eq!(
                snapshot.entry(&s("pre-recorded")).unwrap().state,
                EntryState::Ok
            );
        }
    }
    figure(
        "fault-schedules",
        "ConfigMap backend through the test API server",
        &format!(
            "{tried} schedules (500, 429, 403 or a dropped connection after the write, at each of the {} requests of an upgrade); {failed_runs} failed closed (403) and were completed by a re-run; 0 invariant violations",
            reference.0
        ),
    );
}

async fn kube_setup(server: &TestApiServer) -> (Scenario, Arc<dyn LockedLedger>) {
    let scenario = Scenario::new(false);
    let options = Options {
        retry: RetryPolicy::immediate(6),
        ..Options::default()
    };
    let ledger: Arc<dyn LockedLedger> = Arc::new(ConfigMapLedger::with_options(
        server.client(),
        "cozy-system",
        "cozystack-version",
        options,
    ));
    ledger
        .create(&[(s("pre-recorded"), LedgerEntry::new(EntryState::Ok, NOW))])
        .await
        .unwrap();
    (scenario, ledger)
}

async fn kube_run(
    scenario: &Scenario,
    ledger: Arc<dyn LockedLedger>,
) -> Result<runner::RunReport, RunError> {
    let tree = scenario.tree();
    let (_tx, rx) = tokio::sync::watch::channel(false);
    let clock = migration_core::SystemClock;
    runner::run(&tree, ledger.as_ref(), &clock, &config(None), &Silent, rx).await
}

/// Crashes at the Nth ledger call: before it takes effect, or right after.
/// From then on nothing works, as after a process death; the lock stays.
#[derive(Debug)]
struct Crashing {
    inner: MemoryLedger,
    state: Mutex<(usize, usize, bool, bool)>, // calls, crash_at, after, crashed
    /// The slug whose attempt mark was the last effect before the crash.
    noted_then_died: Mutex<Option<String>>,
}

impl Crashing {
    fn new(inner: MemoryLedger, crash_at: usize, after: bool) -> Self {
        Crashing {
            inner,
            state: Mutex::new((0, crash_at, after, false)),
            noted_then_died: Mutex::new(None),
        }
    }

    /// Ok(true): perform and then crash; Ok(false): perform; Err: crashed.
    fn gate(&self) -> Result<bool, LedgerError> {
        let mut st = self.state.lock().unwrap();
        if st.3 {
            return Err(crashed("process is dead"));
        }
        st.0 += 1;
        if st.0 == st.1 {
            st.3 = true;
            if !st.2 {
                return Err(crashed("process is dead"));
            }
            return Ok(true);
        }
        Ok(false)
    }
}

/// What every ledger call returns once the simulated process is dead.
fn crashed(message: &str) -> LedgerError {
    LedgerError::Permanent {
        ledger: "crashed".into(),
        operation: "crashed",
        message: message.into(),
    }
}

macro_rules! crashing {
    ($self:ident, $call:expr) => {{
        let crash_after = $self.gate()?;
        let result = $call;
        if crash_after {
            return Err(crashed("died after the effect"));
        }
        result
    }};
}

#[async_trait]
impl Ledger for Crashing {
    fn describe(&self) -> String {
        "crashing".into()
    }
    async fn read(&self) -> Result<Option<LedgerSnapshot>, LedgerError> {
        crashing!(self, self.inner.read().await)
    }
    async fn create(&self, entries: &[(Slug, LedgerEntry)]) -> Result<(), LedgerError> {
        crashing!(self, self.inner.create(entries).await)
    }
    async fn write(
        &self,
        entries: &[(Slug, LedgerEntry)],
        mode: WriteMode,
    ) -> Result<WriteReport, LedgerError> {
        crashing!(self, self.inner.write(entries, mode).await)
    }
    async fn note_attempt(&self, slug: &Slug, token: &str, floor: u32) -> Result<u32, LedgerError> {
        let crash_after = self.gate()?;
        let result = self.inner.note_attempt(slug, token, floor).await;
        if crash_after {
            *self.noted_then_died.lock().unwrap() = Some(slug.to_string());
            return Err(crashed("died after the effect"));
        }
        result
    }
}

#[async_trait]
impl migration_core::Lock for Crashing {
    async fn acquire(&self, holder: &str, ttl: Duration) -> Result<Lease, LedgerError> {
        crashing!(self, self.inner.acquire(holder, ttl).await)
    }
    async fn renew(&self, lease: &Lease, ttl: Duration) -> Result<Lease, LedgerError> {
        crashing!(self, self.inner.renew(lease, ttl).await)
    }
    async fn release(&self, lease: &Lease) -> Result<(), LedgerError> {
        crashing!(self, self.inner.release(lease).await)
    }
}

#[test]
fn crashes_at_every_step_boundary_in_process_end_recorded_exactly_once() {
    let (calls, _) = baseline(Kind::Upgrade);
    let mut tried = 0;
    let mut overcounts = 0;
    for at in 1..=calls {
        for after in [false, true] {
            let scenario = Scenario::new(false);
            let tree = scenario.tree();
            let expiry_clock = shared_clock();
            let memory = MemoryLedger::with_clock(expiry_clock.clone());
            block_on(memory.create(&[])).unwrap();
            let clock = clock();
            let crashing = Crashing::new(memory.clone(), at, after);
            // A crash at the last call (releasing the lock) comes after every
            // record, so that run may report success; all others fail.
            let _ = run(&tree, &crashing, &clock, None);
            // The dead runner's lease lapses; a new runner completes the work.
            expiry_clock.advance(Duration::from_secs(120));
            run(&tree, &memory, &clock, None)
                .unwrap_or_else(|e| panic!("restart after crash at call {at}: {e}"));
            let snapshot = block_on(memory.read()).unwrap().unwrap();
            let window = crashing.noted_then_died.lock().unwrap().clone();
            overcounts += usize::from(window.is_some());
            check_final_allowing(&scenario, &snapshot, &UPGRADE, window.as_deref());
            tried += 1;
        }
    }
    figure(
        "crash-points",
        "in process",
        &format!(
            "{tried} crashes (before and after each of the {calls} ledger calls of an upgrade: lock, seeding, attempt marks, records), each followed by a restart; every migration recorded exactly once; attempts equal to real executions, except {overcounts} crash(es) between noting an attempt and spawning its script, where attempts exceed executions by exactly one"
        ),
    );
}

/// The real binary's `run` on a scenario, dying at `failpoint` if given.
#[cfg(feature = "failpoints")]
fn migrate_run(
    root: &Path,
    ledger: &str,
    extra: &[&str],
    failpoint: Option<&str>,
) -> std::process::Output {
    let mut cmd = common::migrate();
    cmd.args([
        "run",
        root.to_str().unwrap(),
        "--ledger",
        ledger,
        "--output",
        "json",
    ])
    .args(extra);
    if let Some(point) = failpoint {
        cmd.env("MIGRATE_FAILPOINT", point);
    }
    cmd.stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .unwrap()
}

// The crash points exist only in a build with the `failpoints` feature
// (`cargo test --all-features`); a plain build ignores MIGRATE_FAILPOINT.
#[cfg(feature = "failpoints")]
#[test]
fn sigkill_of_the_real_binary_at_every_step_boundary_then_a_rerun_completes() {
    let mut points = vec![
        "before-lock".to_owned(),
        "after-lock".to_owned(),
        "after-prepare".to_owned(),
    ];
    for slug in ["good-one", "good-two"] {
        for p in ["before-script", "after-script", "after-record"] {
            points.push(format!("{p}:{slug}"));
        }
    }
    for point in &points {
        let scenario = Scenario::new(false);
        let ledger = scenario.file_ledger();
        let crashed = migrate_run(&scenario.root(), &ledger, &["--lock-ttl", "1"], Some(point));
        assert_eq!(
            crashed.status.code(),
            None,
            "{point}: the process must die by SIGKILL"
        );
        let rerun = migrate_run(&scenario.root(), &ledger, &["--lock-wait", "15"], None);
        assert_eq!(
            rerun.status.code(),
            Some(0),
            "{point}: {}",
            String::from_utf8_lossy(&rerun.stdout)
        );
        let snapshot = scenario.file_snapshot();
        check_final(&scenario, &snapshot, &UPGRADE);
    }
    figure(
        "crash-points",
        "real SIGKILL",
        &format!(
            "{} SIGKILLs of the migrate process ({}), each followed by a re-run; every migration recorded exactly once, attempts equal to real executions",
            points.len(),
            points.join(", ")
        ),
    );
}

#[test]
fn concurrent_runner_processes_on_one_file_ledger_run_each_slug_once() {
    let mut tried = 0;
    for runners in [2, 4] {
        let rounds = if soak() { 20 } else { 3 };
        for _ in 0..rounds {
            let scenario = Scenario::new(false);
            let ledger = scenario.file_ledger();
            let children: Vec<_> = (0..runners)
                .map(|i| {
                    let mut cmd = common::migrate();
                    cmd.args([
                        "run",
                        scenario.root().to_str().unwrap(),
                        "--ledger",
                        &ledger,
                        "--holder",
                        &format!("runner-{i}"),
                        "--lock-wait",
                        "30",
                    ]);
                    cmd.stdout(Stdio::null())
                        .stderr(Stdio::null())
                        .spawn()
                        .unwrap()
                })
                .collect();
            for mut child in children {
                assert!(child.wait().unwrap().success());
            }
            let executions = scenario.executions();
            assert!(
                executions.values().all(|n| *n == 1),
                "each slug exactly once: {executions:?}"
            );
            let snapshot = scenario.file_snapshot();
            check_final(&scenario, &snapshot, &UPGRADE);
            tried += 1;
        }
    }
    figure(
        "concurrency",
        "file ledger",
        &format!(
            "{tried} rounds of 2 and 4 concurrent runner processes; each slug executed exactly once, no lost update"
        ),
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_runners_through_the_test_api_server_run_each_slug_once() {
    let mut tried = 0;
    for runners in [2usize, 4] {
        let server = TestApiServer::start().await;
        let (scenario, _) = kube_setup(&server).await;
        let tree = Arc::new(scenario.tree());
        let tasks: Vec<_> = (0..runners)
            .map(|i| {
                let tree = tree.clone();
                let client = server.client();
                tokio::spawn(async move {
                    let options = Options {
                        retry: RetryPolicy::immediate(8),
                        ..Options::default()
                    };
                    let ledger = ConfigMapLedger::with_options(
                        client,
                        "cozy-system",
                        "cozystack-version",
                        options,
                    );
                    let mut cfg = config(None);
                    cfg.holder = format!("runner-{i}");
                    cfg.lock_wait = Duration::from_secs(30);
                    let (_tx, rx) = tokio::sync::watch::channel(false);
                    runner::run(
                        &tree,
                        &ledger,
                        &migration_core::SystemClock,
                        &cfg,
                        &Silent,
                        rx,
                    )
                    .await
                    .map(|r| r.results.len())
                })
            })
            .collect();
        let mut ran = 0;
        for t in tasks {
            ran += t.await.unwrap().unwrap();
        }
        assert_eq!(ran, 3, "the runners together ran each pending slug once");
        assert!(scenario.executions().values().all(|n| *n == 1));
        let ledger = kube_setup_ledger(&server);
        check_final(&scenario, &ledger.read().await.unwrap().unwrap(), &UPGRADE);
        tried += 1;
    }
    figure(
        "concurrency",
        "ConfigMap backend through the test API server",
        &format!(
            "{tried} rounds (2 and 4 concurrent runners, separate clients); each slug executed exactly once"
        ),
    );
}

fn kube_setup_ledger(server: &TestApiServer) -> ConfigMapLedger {
    ConfigMapLedger::new(server.client(), "cozy-system", "cozystack-version")
}

// Dies at a crash point: needs the `failpoints` feature, as above.
#[cfg(feature = "failpoints")]
#[test]
fn the_lock_of_a_runner_that_died_expires_and_the_next_one_proceeds() {
    let scenario = Scenario::new(false);
    let ledger = scenario.file_ledger();
    let died = migrate_run(
        &scenario.root(),
        &ledger,
        &["--lock-ttl", "2", "--holder", "dies"],
        Some("before-script:good-one"),
    );
    assert_eq!(died.status.code(), None);
    let started = std::time::Instant::now();
    let next = migrate_run(
        &scenario.root(),
        &ledger,
        &["--lock-wait", "20", "--holder", "next"],
        None,
    );
    assert_eq!(next.status.code(), Some(0));
    assert!(
        started.elapsed() >= Duration::from_millis(500),
        "the next runner had to wait for the lease to lapse"
    );
    let snapshot = scenario.file_snapshot();
    check_final(&scenario, &snapshot, &UPGRADE);
}

#[test]
fn ledger_specs_from_the_command_line_never_panic() {
    let mut tried = 0u64;
    let mut seed: u64 = 42;
    let alphabet: Vec<char> = "abcXYZ09:/._- \0é\u{202e}configmapfilememory"
        .chars()
        .collect();
    for _ in 0..if soak() { 200_000 } else { 20_000 } {
        let len = (seed % 40) as usize;
        let mut spec = String::new();
        for _ in 0..len {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            spec.push(alphabet[(seed % alphabet.len() as u64) as usize]);
        }
        if let Err(e) = spec.parse::<migrate::spec::LedgerSpec>() {
            assert!(e.to_string().len() < 400);
        }
        tried += 1;
    }
    figure(
        "hostile-input",
        "ledger specs on the command line",
        &format!("{tried} generated specs, 0 panics"),
    );
}
