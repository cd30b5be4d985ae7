//! Reliability suites 1 to 3: fault schedules, crash points and concurrent
//! runners, driving the real runner with real shell scripts. Each suite
//! records how much it tried in `target/tmp/reliability/` (printed by CI).
//! `RELIABILITY_SOAK=1` raises the number of random schedules.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::result_large_err)]

use crate::common;
use common::block_on;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use common::in_process::InProcess;
use ledger_configmap::{ConfigMapLedger, Options};
use ledger_memory::{Fault, FaultyLedger, MemoryLedger};
use migration_core::LockedLedger;
use migration_core::drive::{Console, RunError, RunReport};
use migration_core::testing::fixtures::{
    NOW, ScratchTree, TreeBuilder, clock, s, shared_clock, write_figure,
};
use migration_core::{
    EntryState, Lease, Ledger, LedgerEntry, LedgerError, LedgerSnapshot, ManualClock,
    MigrationsTree, OnError, Slug, Tier, WriteMode, WriteReport,
};
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
        block_on(ledger_file::FileLedger::new(self.scratch.file("ledger.json")).read())
            .unwrap()
            .unwrap()
    }
}

fn config(only: Option<&str>) -> InProcess {
    let mut c = InProcess::new("reliability-runner");
    c.settings.only = only.map(s);
    c.settings.lock_wait = Duration::ZERO;
    c.scripts.grace = Duration::from_millis(200);
    c
}

fn run(
    tree: &MigrationsTree,
    ledger: &dyn LockedLedger,
    clock: &ManualClock,
    only: Option<&str>,
) -> Result<RunReport, RunError> {
    block_on(config(only).run_on(tree, ledger, clock, &Silent))
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
    let lock_clock = shared_clock();
    let memory = MemoryLedger::with_clock(lock_clock.clone());
    let expected = prepare(kind, &memory, &scenario, &clock);
    let before = memory.raw_data().unwrap_or_default();
    let faulty = FaultyLedger::new(Arc::new(memory.clone()))
        .with_retries(migration_core::retry::RetryPolicy::immediate(3));
    faults(&faulty);
    let outcome = run(&tree, &faulty, &clock, only_for(kind));
    let succeeded = outcome.is_ok();
    // A failed run whose attempt mark got through with a lost reply noted an
    // execution that never started: the documented over-count by one. The
    // mark travels in a step's write as well as alone.
    let noted_without_spawn = !succeeded
        && faulty.calls().iter().any(|(operation, fault)| {
            matches!(
                operation,
                ledger_memory::Operation::NoteAttempt | ledger_memory::Operation::WriteStep
            ) && *fault == Some(Fault::LostReply)
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
        // The crashed run may hold the lock; a fresh runner waits it out
        // (it is a holder of its own, whatever it is called).
        lock_clock.advance(config(None).settings.lock_ttl + Duration::from_secs(1));
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
) -> Result<RunReport, RunError> {
    let tree = scenario.tree();
    config(None).run(&tree, ledger.as_ref(), &Silent).await
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
    fencing::runner_command(&mut cmd, root, ledger, extra, None);
    if let Some(point) = failpoint {
        cmd.env("MIGRATE_FAILPOINT", point);
    }
    cmd.output().unwrap()
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
        if let Err(e) = spec.parse::<migrate_shared::LedgerSpec>() {
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

mod concurrency;
mod crash_points;
mod fault_schedules;
mod fencing;
mod script_fencing;
