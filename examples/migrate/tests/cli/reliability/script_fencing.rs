//! A script's own effects are fenced by the run lock (CONTRACT.md §5.5):
//! once its run can no longer prove its lease is live, no cluster call of
//! the script goes through (the tripwire's shims refuse it), and no script
//! outlives the lease (the supervisor kills its group at the deadline,
//! whatever `--grace` says). Under dash, busybox ash and bash, on the file
//! ledger and, with `MIGRATE_TEST_KUBECONFIG`, on the ConfigMap and custom
//! resource ledgers of a real API server.

use super::*;

use std::process::Child;
use std::time::Instant;

use common::shells;
use common::tripwire::Scratch;
use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;

/// The migration of every case: notes its pid, calls the cluster, and (the
/// first copy only) waits for `$SCRATCH/release` before calling it again.
/// `ignore_term`: it traps SIGTERM away ("do not interrupt a half-done
/// relabel"). The second copy notes which earlier copies are still alive
/// when it starts (`$SCRATCH/alive-at-start`).
fn relabel(ignore_term: bool) -> String {
    format!(
        r#"{trap}echo "$$" >> "$SCRATCH/copies"
kubectl get namespace before-$$
if mkdir "$SCRATCH/first" 2>/dev/null; then
    i=0
    while [ ! -e "$SCRATCH/release" ] && [ "$i" -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
else
    while read -r p; do
        if [ "$p" != "$$" ] && [ -e "/proc/$p" ] && ! grep -q ') Z' "/proc/$p/stat"; then
            echo "$p" >> "$SCRATCH/alive-at-start"
        fi
    done < "$SCRATCH/copies"
fi
kubectl label namespace after-$$ done=yes"#,
        trap = if ignore_term {
            "trap '' INT TERM\n"
        } else {
            ""
        }
    )
}

/// The ledger a case runs on: its `--ledger` spec and what the runner
/// processes need to reach it.
struct At {
    spec: String,
    env: Vec<(&'static str, std::ffi::OsString)>,
}

impl At {
    /// `scratch`'s own file ledger.
    fn file(scratch: &Scratch) -> At {
        At {
            spec: scratch.ledger(),
            env: Vec::new(),
        }
    }

    /// A fresh ledger of `kind` on the real API server of `cluster`.
    fn real(cluster: &test_apiserver::real::RealCluster, kind: &str) -> At {
        let (spec, _) = tokio::task::block_in_place(|| {
            tokio::runtime::Handle::current().block_on(super::fencing::real_ledger(cluster, kind))
        });
        At {
            spec,
            env: vec![
                ("KUBECONFIG", cluster.kubeconfig().as_os_str().to_owned()),
                ("MIGRATION_NAMESPACE", cluster.namespace().to_owned().into()),
            ],
        }
    }

    /// `migrate` on this ledger, the fake cluster commands of `scratch`
    /// first on PATH and healthy.
    fn migrate(&self, scratch: &Scratch) -> std::process::Command {
        let mut cmd = common::migrate();
        let path = format!(
            "{}:{}",
            scratch.bin().display(),
            std::env::var("PATH").unwrap_or_default()
        );
        cmd.env("PATH", path)
            .env("SCRATCH", scratch.path())
            .env("FAKE_CLUSTER", "ok")
            .env(
                "FAKE_STDERR",
                common::tripwire::fixture("connection-refused"),
            )
            .env_remove("MIGRATE_CLUSTER_COMMANDS")
            .env_remove("KUBECTL")
            .env_remove("KUBERNETES_SERVICE_HOST")
            .envs(self.env.iter().map(|(k, v)| (k, v)));
        cmd
    }

    /// The entry of `slug` as `migrate status` shows it.
    fn entry(&self, scratch: &Scratch, slug: &str) -> serde_json::Value {
        let (code, status, err) = common::parse(
            self.migrate(scratch)
                .args(["status", "--ledger", &self.spec, "--output", "json"])
                .output()
                .unwrap(),
        );
        assert_eq!(code, 0, "{err}");
        common::by_slug(&status["entries"], slug)
            .cloned()
            .unwrap_or_else(|| panic!("no entry for {slug}: {status}"))
    }
}

/// A runner of `scratch` under `shell` on `at`.
fn runner(scratch: &Scratch, shell: &shells::Shell, at: &At, extra: &[&str]) -> Child {
    let mut cmd = at.migrate(scratch);
    cmd.args([
        "run",
        scratch.tree().to_str().unwrap(),
        "--ledger",
        &at.spec,
    ])
    .args(["--allow-interpreter", &shell.shebang, "--output", "json"])
    .args(extra)
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    cmd.spawn().unwrap()
}

/// The pids the copies of the script noted, in order.
fn copies(scratch: &Scratch) -> Vec<i32> {
    std::fs::read_to_string(scratch.path().join("copies"))
        .unwrap_or_default()
        .lines()
        .map(|l| l.parse().unwrap())
        .collect()
}

/// Waits until `what` holds, failing after 60 s.
fn until(what: &str, mut done: impl FnMut() -> bool) {
    let begun = Instant::now();
    while !done() {
        assert!(begun.elapsed() < Duration::from_secs(60), "never: {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Whether process `pid` has not exited (a zombie has).
fn running(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit(") ")
            .next()
            .is_some_and(|s| !s.starts_with('Z'))
    })
}

/// The run's supervisor: the runner's child started as `migrate-supervise`.
fn supervisor_of(runner: u32) -> i32 {
    let mut found = None;
    until("the runner's supervisor is found", || {
        found = common::processes().into_iter().find_map(|(pid, stat)| {
            let ppid: u32 = stat.split(' ').nth(1)?.parse().ok()?;
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
            (ppid == runner && cmdline.starts_with(b"migrate-supervise\0")).then_some(pid)
        });
        found.is_some()
    });
    found.unwrap()
}

/// The cluster calls that reached the (fake) cluster.
fn calls(scratch: &Scratch) -> Vec<String> {
    scratch.calls()
}

/// A first runner of a fresh scratch under `shell` on the ledger `at`
/// gives it, with `extra`, once the first copy of [`relabel`] (ignoring
/// SIGTERM if `ignore_term`) has called the cluster: (scratch, ledger,
/// runner, the copy's pid).
fn first_copy_called(
    shell: &shells::Shell,
    at: &dyn Fn(&Scratch) -> At,
    ignore_term: bool,
    extra: &[&str],
) -> (Scratch, At, Child, i32) {
    let scratch = Scratch::new();
    let at = at(&scratch);
    scratch.scripts(shell, "abort", &[("relabel", &relabel(ignore_term))]);
    let first = runner(&scratch, shell, &at, extra);
    until("the first copy called the cluster", || {
        calls(&scratch).iter().any(|c| c.contains("before-"))
    });
    let script = copies(&scratch)[0];
    (scratch, at, first, script)
}

/// The next runner, which must complete the run: its output.
fn next_completes(scratch: &Scratch, shell: &shells::Shell, at: &At) -> String {
    let (code, out) = common::ended(runner(
        scratch,
        shell,
        at,
        &["--holder", "next", "--lock-wait", "30"],
    ));
    assert_eq!(
        code,
        Some(0),
        "{}: the next runner completes:\n{out}",
        shell.name
    );
    out
}

/// Asserts that the copy `script` made no call after its first one: the
/// calls that reached the cluster.
fn assert_no_second_call_of(scratch: &Scratch, shell: &shells::Shell, script: i32) -> Vec<String> {
    let calls = calls(scratch);
    assert!(
        !calls.iter().any(|c| c.contains(&format!("after-{script}"))),
        "{}: the first copy's call after its lease lapsed reached the cluster: {calls:?}",
        shell.name
    );
    calls
}

fn a_runner_stopped_past_its_ttl_cannot_reach_the_cluster_from_its_script_again_on(
    at: &dyn Fn(&Scratch) -> At,
) {
    for shell in shells::all() {
        let (scratch, at, first, script) =
            first_copy_called(&shell, at, false, &["--holder", "first", "--lock-ttl", "2"]);
        // The whole node freezes: the runner, its supervisor and the script.
        let supervisor = supervisor_of(first.id());
        kill(Pid::from_raw(first.id() as i32), Signal::SIGSTOP).unwrap();
        kill(Pid::from_raw(supervisor), Signal::SIGSTOP).unwrap();
        killpg(Pid::from_raw(script), Signal::SIGSTOP).unwrap();
        std::thread::sleep(Duration::from_millis(2500));
        next_completes(&scratch, &shell, &at);
        let second = copies(&scratch)[1];
        // The first copy resumes first: its next call must not land.
        std::fs::write(scratch.path().join("release"), "").unwrap();
        killpg(Pid::from_raw(script), Signal::SIGCONT).unwrap();
        until("the first copy ended", || !running(script));
        kill(Pid::from_raw(supervisor), Signal::SIGCONT).unwrap();
        kill(Pid::from_raw(first.id() as i32), Signal::SIGCONT).unwrap();
        let (code, out) = common::ended(first);
        let calls = assert_no_second_call_of(&scratch, &shell, script);
        assert!(
            calls.iter().any(|c| c.contains(&format!("after-{second}"))),
            "{}: {calls:?}",
            shell.name
        );
        assert!(
            out.contains("refused") && out.contains("can no longer be proved live"),
            "{}: the shim says why it refused:\n{out}",
            shell.name
        );
        assert_ne!(
            code,
            Some(0),
            "{}: the first runner fails:\n{out}",
            shell.name
        );
        assert!(out.contains("lost the run lock"), "{}:\n{out}", shell.name);
        // What the ledger holds is the second runner's ok, one execution
        // each.
        let entry = at.entry(&scratch, "relabel");
        assert_eq!(entry["state"], "ok", "{}: {entry}", shell.name);
        assert_eq!(entry["attempts"], 2, "{}: {entry}", shell.name);
    }
}

fn a_script_whose_runner_froze_is_killed_before_its_lease_can_lapse_on(
    at: &dyn Fn(&Scratch) -> At,
) {
    for shell in shells::all() {
        let (scratch, at, mut first, script) =
            first_copy_called(&shell, at, false, &["--holder", "first", "--lock-ttl", "2"]);
        // Only the runner freezes; its script runs on.
        kill(Pid::from_raw(first.id() as i32), Signal::SIGSTOP).unwrap();
        next_completes(&scratch, &shell, &at);
        assert!(
            !scratch.path().join("alive-at-start").exists(),
            "{}: the first copy was still running when the second started",
            shell.name
        );
        assert!(!running(script), "{}", shell.name);
        assert_no_second_call_of(&scratch, &shell, script);
        kill(Pid::from_raw(first.id() as i32), Signal::SIGKILL).unwrap();
        let _ = first.wait();
    }
}

fn a_runner_killed_while_its_term_ignoring_script_runs_leaves_no_copy_alive_when_the_next_starts_on(
    at: &dyn Fn(&Scratch) -> At,
) {
    for shell in shells::all() {
        // A grace far longer than the lease: the lease still bounds it.
        let (scratch, at, mut first, script) = first_copy_called(
            &shell,
            at,
            true,
            &["--holder", "first", "--lock-ttl", "2", "--grace", "60"],
        );
        kill(Pid::from_raw(first.id() as i32), Signal::SIGKILL).unwrap();
        let _ = first.wait();
        next_completes(&scratch, &shell, &at);
        assert_eq!(copies(&scratch).len(), 2, "{}", shell.name);
        assert!(
            !scratch.path().join("alive-at-start").exists(),
            "{}: the first copy (pid {script}) was still running when the second started",
            shell.name
        );
        assert_no_second_call_of(&scratch, &shell, script);
    }
}

/// The three cases on one backend: the file ledger, or a real API server's
/// `configmap` or `crd` ledger (skipped without `MIGRATE_TEST_KUBECONFIG`).
macro_rules! on_every_ledger {
    ($case:ident, $on:ident, $file:ident, $configmap:ident, $crd:ident) => {
        #[test]
        fn $file() {
            $on(&At::file);
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        #[ignore = "needs MIGRATE_TEST_KUBECONFIG (examples/kube-testenv)"]
        async fn $configmap() {
            on_a_real_server(stringify!($case), "configmap", $on).await;
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        #[ignore = "needs MIGRATE_TEST_KUBECONFIG (examples/kube-testenv)"]
        async fn $crd() {
            on_a_real_server(stringify!($case), "crd", $on).await;
        }
    };
}

/// One case, given where each of its worlds keeps its ledger.
type Case = fn(&dyn Fn(&Scratch) -> At);

/// Runs `case` with a fresh `kind` ledger of the real API server per shell.
async fn on_a_real_server(what: &str, kind: &str, case: Case) {
    let Some(cluster) = test_apiserver::real::RealCluster::from_env(what).await else {
        return;
    };
    tokio::task::block_in_place(|| case(&|_| At::real(&cluster, kind)));
}

on_every_ledger!(
    stopped,
    a_runner_stopped_past_its_ttl_cannot_reach_the_cluster_from_its_script_again_on,
    a_runner_stopped_past_its_ttl_cannot_reach_the_cluster_from_its_script_again,
    a_runner_stopped_past_its_ttl_on_a_real_configmap_ledger_cannot_reach_the_cluster_again,
    a_runner_stopped_past_its_ttl_on_a_real_crd_ledger_cannot_reach_the_cluster_again
);
on_every_ledger!(
    froze,
    a_script_whose_runner_froze_is_killed_before_its_lease_can_lapse_on,
    a_script_whose_runner_froze_is_killed_before_its_lease_can_lapse,
    a_script_whose_runner_froze_on_a_real_configmap_ledger_is_killed_before_its_lease_can_lapse,
    a_script_whose_runner_froze_on_a_real_crd_ledger_is_killed_before_its_lease_can_lapse
);
on_every_ledger!(
    killed,
    a_runner_killed_while_its_term_ignoring_script_runs_leaves_no_copy_alive_when_the_next_starts_on,
    a_runner_killed_while_its_term_ignoring_script_runs_leaves_no_copy_alive_when_the_next_starts,
    a_runner_killed_on_a_real_configmap_ledger_leaves_no_copy_of_its_script_alive_when_the_next_starts,
    a_runner_killed_on_a_real_crd_ledger_leaves_no_copy_of_its_script_alive_when_the_next_starts
);
