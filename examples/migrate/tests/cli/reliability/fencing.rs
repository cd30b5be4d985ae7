//! Suite 4: fencing. A runner stalled past its lock's lifetime (SIGSTOP, as
//! a frozen node or a throttled pod) must neither execute nor record a
//! migration that another runner recorded meanwhile, nor write anything
//! once its lock is lost; two runners never share a lock, whatever
//! `--holder` says; and a script whose first copy may still run is not
//! started again before the first runner's lock has lapsed
//! (CONTRACT.md §5.5, §7.2).

// The stalling helpers serve the failpoint-driven tests; without the feature
// only the slow-script case runs.
#![cfg_attr(not(feature = "failpoints"), allow(dead_code))]

use super::*;

use std::process::{Child, Command};
use std::time::Instant;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// A runner process of the scenario, stopping itself at `stall` if given.
pub(crate) fn spawn_runner(
    root: &Path,
    ledger: &str,
    extra: &[&str],
    stall: Option<&str>,
) -> Child {
    let mut cmd = common::migrate();
    runner_command(&mut cmd, root, ledger, extra, stall);
    cmd.spawn().unwrap()
}

/// `cmd` as a runner of the scenario at `root` on `ledger`, stopping itself
/// at `stall` if given, its output piped.
pub(crate) fn runner_command(
    cmd: &mut Command,
    root: &Path,
    ledger: &str,
    extra: &[&str],
    stall: Option<&str>,
) {
    cmd.args([
        "run",
        root.to_str().unwrap(),
        "--ledger",
        ledger,
        "--output",
        "json",
    ])
    .args(extra)
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    if let Some(point) = stall {
        cmd.env("MIGRATE_STALLPOINT", point);
    }
}

/// Waits until the process `child` has stopped itself (state `T` in
/// `/proc`), failing after 60 s.
pub(crate) fn wait_stopped(child: &mut Child) {
    let started = Instant::now();
    let stat = format!("/proc/{}/stat", child.id());
    loop {
        let text = std::fs::read_to_string(&stat).unwrap_or_default();
        // The state follows the command name in parentheses.
        let state = text
            .rsplit(") ")
            .next()
            .and_then(|rest| rest.chars().next());
        if state == Some('T') {
            return;
        }
        if let Some(status) = child.try_wait().unwrap() {
            let out = child.wait_with_output_now();
            panic!("the runner ended before its stall point ({status}):\n{out}");
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the runner never reached its stall point"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Resumes a stopped runner and returns (exit code, stdout and stderr).
pub(crate) fn resume(child: Child) -> (Option<i32>, String) {
    kill(Pid::from_raw(child.id() as i32), Signal::SIGCONT).unwrap();
    common::ended(child)
}

trait OutputNow {
    fn wait_with_output_now(&mut self) -> String;
}

impl OutputNow for Child {
    fn wait_with_output_now(&mut self) -> String {
        use std::io::Read;
        let mut text = String::new();
        if let Some(mut err) = self.stderr.take() {
            let _ = err.read_to_string(&mut text);
        }
        text
    }
}

/// A runner of the scenario run to its end: (exit code, stdout and stderr).
fn run_to_end(root: &Path, ledger: &str, extra: &[&str]) -> (Option<i32>, String) {
    common::ended(spawn_runner(root, ledger, extra, None))
}

/// Where a stalled-runner case runs: the ledger spec, what the runner
/// processes need to reach it, and how the test reads what is stored (two
/// equal readings: nothing was written between them).
pub(crate) struct Backend<'b> {
    /// The `--ledger` spec.
    pub(crate) spec: String,
    /// Environment of the runner processes (`KUBECONFIG`).
    pub(crate) env: Vec<(&'static str, std::ffi::OsString)>,
    /// What the ledger stores now, for comparison.
    pub(crate) stored: &'b dyn Fn() -> String,
}

impl Backend<'_> {
    fn spawn(&self, root: &Path, extra: &[&str], stall: Option<&str>) -> Child {
        let mut cmd = common::migrate();
        runner_command(&mut cmd, root, &self.spec, extra, stall);
        cmd.envs(self.env.iter().map(|(k, v)| (k, v)))
            .env_remove("KUBERNETES_SERVICE_HOST");
        cmd.spawn().unwrap()
    }
}

/// A runner stalls with its plan made and its lock held at `stall` (right
/// before an attempt mark and spawn) for longer than its lock's lifetime;
/// another runner completes the upgrade; then the first one resumes.
/// `executions`: how often each slug ran in the end; `says`: what the
/// resumed runner must say.
pub(crate) fn stalled_runner_executes_and_writes_nothing(
    scenario: &Scenario,
    backend: &Backend,
    stall: &str,
    executions: &[(&str, u32)],
    says: &[&str],
) {
    let root = scenario.root();
    let mut stalled = backend.spawn(
        &root,
        &["--holder", "stalled", "--lock-ttl", "1"],
        Some(stall),
    );
    wait_stopped(&mut stalled);
    std::thread::sleep(Duration::from_millis(2500));
    let (code, output) =
        common::ended(backend.spawn(&root, &["--holder", "next", "--lock-wait", "30"], None));
    assert_eq!(
        code,
        Some(0),
        "the next runner completes the upgrade:\n{output}"
    );
    let recorded = (backend.stored)();
    let (code, output) = resume(stalled);
    assert_ne!(
        code,
        Some(0),
        "a runner that lost its lock fails:\n{output}"
    );
    assert!(
        output.contains("lost the run lock"),
        "it says it lost the lock:\n{output}"
    );
    for words in says {
        assert!(
            output.contains(words),
            "it says truthfully what it did ({words}):\n{output}"
        );
    }
    let ran = scenario.executions();
    for (slug, n) in executions {
        assert_eq!(ran.get(*slug), Some(n), "{slug} ran {n} time(s): {ran:?}");
    }
    assert_eq!(
        (backend.stored)(),
        recorded,
        "the stalled runner wrote nothing after losing its lock"
    );
}

/// [`stalled_runner_executes_and_writes_nothing`] on a scenario's file
/// ledger, stalled before fails-warn's attempt mark: good-one ran and its
/// `ok` waits for that write, so its execution loses its record with the
/// lock and runs again (§7.6), as if its runner had crashed there;
/// fails-warn, which the next runner records, never runs twice. `says`:
/// what the resumed runner must say. The scenario, for more checks.
fn stalled_before_fails_warn_on_the_file_ledger(says: &[&str]) -> Scenario {
    let scenario = Scenario::new(false);
    let path = scenario.scratch.file("ledger.json");
    let stored = || {
        format!(
            "{:?}",
            ledger_file::FileLedger::new(&path).raw_data().unwrap()
        )
    };
    let backend = Backend {
        spec: scenario.file_ledger(),
        env: Vec::new(),
        stored: &stored,
    };
    stalled_runner_executes_and_writes_nothing(
        &scenario,
        &backend,
        "before-script:fails-warn",
        &[("good-one", 2), ("fails-warn", 1), ("good-two", 1)],
        says,
    );
    scenario
}

#[cfg(feature = "failpoints")]
#[test]
fn a_runner_stalled_past_its_lock_never_executes_nor_records_what_another_runner_recorded() {
    let scenario = stalled_before_fails_warn_on_the_file_ledger(&[
        "before running fails-warn",
        "nothing ran",
        "good-one",
    ]);
    check_final(&scenario, &scenario.file_snapshot(), &UPGRADE);
}

#[cfg(feature = "failpoints")]
#[test]
fn a_runner_stalled_past_its_lock_with_an_outcome_to_record_writes_nothing_after_losing_it() {
    // It names the migration whose outcome it could not record.
    stalled_before_fails_warn_on_the_file_ledger(&["good-one"]);
}

#[cfg(feature = "failpoints")]
#[test]
fn two_runners_given_the_same_holder_exclude_each_other() {
    let scenario = Scenario::new(false);
    let ledger = scenario.file_ledger();
    let root = scenario.root();
    // Stopped holding the lock, which its first write took (good-one's
    // attempt mark); good-one ran.
    let mut first = spawn_runner(
        &root,
        &ledger,
        &["--holder", "same", "--lock-ttl", "60"],
        Some("before-script:fails-warn"),
    );
    wait_stopped(&mut first);
    let ran_before = scenario.executions();
    let (code, stderr) = run_to_end(&root, &ledger, &["--holder", "same", "--lock-wait", "1"]);
    assert_eq!(
        code,
        Some(1),
        "the second runner waits for the first one's lock and gives up:\n{stderr}"
    );
    assert!(
        stderr.contains("run lock is held"),
        "it names the lock it waited for:\n{stderr}"
    );
    assert_eq!(
        scenario.executions(),
        ran_before,
        "the second runner executed nothing"
    );
    kill(Pid::from_raw(first.id() as i32), Signal::SIGKILL).unwrap();
    let _ = first.wait();
}

/// The script `good-one` of a scenario, rewritten to note when it starts and
/// to run until `<dir>/release` exists (or 30 s pass).
fn slow_good_one(scenario: &Scenario) {
    let path = scenario.root().join("pre-apply/good-one");
    let text = std::fs::read_to_string(&path).unwrap();
    let slow = text.replace(
        r#"echo "$MIGRATION_SLUG" >> "$MIGRATION_TREE/../effects""#,
        r#"date +%s.%N >> "$MIGRATION_TREE/../started"
echo "$MIGRATION_SLUG" >> "$MIGRATION_TREE/../effects"
i=0
while [ ! -e "$MIGRATION_TREE/../release" ] && [ "$i" -lt 300 ]; do sleep 0.1; i=$((i + 1)); done"#,
    );
    assert_ne!(slow, text);
    std::fs::write(&path, slow).unwrap();
}

#[test]
fn a_second_runner_does_not_start_a_script_whose_first_copy_may_still_run_before_the_lock_lapses() {
    for holders in [["first", "second"], ["same", "same"]] {
        let scenario = Scenario::new(false);
        slow_good_one(&scenario);
        let ledger = scenario.file_ledger();
        let root = scenario.root();
        let mut first = spawn_runner(
            &root,
            &ledger,
            &["--holder", holders[0], "--lock-ttl", "3"],
            None,
        );
        let started = scenario.scratch.file("started");
        let begun = Instant::now();
        while !started.exists() {
            assert!(begun.elapsed() < Duration::from_secs(60), "never started");
            std::thread::sleep(Duration::from_millis(20));
        }
        // The runner freezes while its script goes on (its own process
        // group); its lease lapses at most 3 s after its last renewal.
        kill(Pid::from_raw(first.id() as i32), Signal::SIGSTOP).unwrap();
        let frozen = Instant::now();
        let second = spawn_runner(
            &root,
            &ledger,
            &["--holder", holders[1], "--lock-wait", "30"],
            None,
        );
        while scenario.scratch.lines("started").len() < 2 {
            assert!(
                frozen.elapsed() < Duration::from_secs(40),
                "{holders:?}: never ran again"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        let again = frozen.elapsed();
        // Renewed every second, the lease had at least 2 s left when the
        // runner froze.
        assert!(
            again >= Duration::from_secs(2),
            "{holders:?}: the second copy started {again:?} after the first runner froze, before its lock could lapse"
        );
        std::fs::write(scenario.scratch.file("release"), "").unwrap();
        let out = second.wait_with_output().unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        kill(Pid::from_raw(first.id() as i32), Signal::SIGKILL).unwrap();
        let _ = first.wait();
    }
}

/// A ledger of `kind` (`configmap` or `crd`) on the real API server of
/// `cluster`, existing and empty, under a name of its own: its `--ledger`
/// spec and the `kubectl get` words naming its object.
pub(crate) async fn real_ledger(
    cluster: &test_apiserver::real::RealCluster,
    kind: &str,
) -> (String, Vec<String>) {
    use test_apiserver::real::unique_name;
    let name = unique_name("fence");
    let ns = cluster.namespace().to_owned();
    match kind {
        "configmap" => {
            cluster.ensure_namespace(&ns).await;
            cluster.kubectl_ok(
                &["apply", "-f", "-"],
                &format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}, namespace: {ns}}}\ndata: {{}}\n"),
            );
            (
                format!("configmap:{ns}/{name}"),
                vec![
                    "-n".to_owned(),
                    ns.clone(),
                    "configmap".to_owned(),
                    name.clone(),
                ],
            )
        }
        _ => {
            cluster.ensure_namespace("cozy-system").await;
            let crd = common::migrate().arg("crd").output().unwrap();
            cluster.kubectl_ok(
                &["apply", "-f", "-"],
                &String::from_utf8(crd.stdout).unwrap(),
            );
            test_apiserver::real::wait_until_established(
                &cluster.client(),
                "migrationledgers.migrations.cozystack.io",
            )
            .await;
            cluster.kubectl_ok(
                &["apply", "-f", "-"],
                &format!("apiVersion: migrations.cozystack.io/v1alpha1\nkind: MigrationLedger\nmetadata: {{name: {name}}}\nspec: {{bundle: fence}}\n"),
            );
            (
                format!("crd:{name}"),
                vec!["migrationledger".to_owned(), name.clone()],
            )
        }
    }
}

/// The stalled-runner case against a real API server
/// (`MIGRATE_TEST_KUBECONFIG`, see `test_apiserver::real`): the ledger
/// `kind` (`configmap` or `crd`), existing and empty, compared by its
/// `resourceVersion` (any write changes it).
#[cfg(feature = "failpoints")]
async fn stalled_runner_on_a_real_server(kind: &str) {
    use test_apiserver::real::RealCluster;
    let Some(cluster) = RealCluster::from_env("fencing a stalled runner").await else {
        return;
    };
    let scenario = Scenario::new(false);
    let (spec, object) = real_ledger(&cluster, kind).await;
    let kubeconfig = cluster.kubeconfig().to_path_buf();
    let stored = || {
        let mut args: Vec<&str> = vec!["--kubeconfig", kubeconfig.to_str().unwrap(), "get"];
        args.extend(object.iter().map(String::as_str));
        args.push("-o=jsonpath={.metadata.resourceVersion}");
        let out = Command::new(
            std::env::var(test_apiserver::real::KUBECTL_VAR).unwrap_or("kubectl".into()),
        )
        .args(&args)
        .output()
        .unwrap();
        common::assert_success(&out, "kubectl get")
    };
    let backend = Backend {
        spec,
        env: vec![
            ("KUBECONFIG", kubeconfig.clone().into_os_string()),
            ("MIGRATION_NAMESPACE", cluster.namespace().to_owned().into()),
        ],
        stored: &stored,
    };
    // The runner processes block; the test's runtime has nothing else to do.
    // Stalled after its first write (a lock kept in the ConfigMap is taken
    // by it), with good-one's `ok` waiting for the next one: good-one's
    // execution loses its record with the lock, as if the runner had
    // crashed there, and runs again (§7.6); nothing else runs twice.
    tokio::task::block_in_place(|| {
        stalled_runner_executes_and_writes_nothing(
            &scenario,
            &backend,
            "before-script:fails-warn",
            &[("good-one", 2), ("fails-warn", 1), ("good-two", 1)],
            &["before running fails-warn", "nothing ran", "good-one"],
        )
    });
}

#[cfg(feature = "failpoints")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs MIGRATE_TEST_KUBECONFIG (examples/kube-testenv)"]
async fn a_runner_stalled_past_its_lock_on_a_real_configmap_ledger_never_executes_nor_writes() {
    stalled_runner_on_a_real_server("configmap").await;
}

#[cfg(feature = "failpoints")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs MIGRATE_TEST_KUBECONFIG (examples/kube-testenv)"]
async fn a_runner_stalled_past_its_lock_on_a_real_crd_ledger_never_executes_nor_writes() {
    stalled_runner_on_a_real_server("crd").await;
}
