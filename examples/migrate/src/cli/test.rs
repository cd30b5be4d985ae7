//! `migrate test TREE`: runs each script's test from the tests directory
//! (AUTHORING.md, "The test"), so the rule that every migration ships with a
//! test has a runner. Each test runs from the tree root under its shebang's
//! interpreter (`sh` without one, `bats` for `.bats`), with a time limit, in
//! a sandbox that makes reaching a real cluster impossible: every cluster
//! command (`kubectl`, `helm`, `flux`, the tree's others) resolves first on
//! `PATH` to a guard that refuses to run and fails the test, `KUBECONFIG`
//! names a server nobody listens on, the in-cluster variables are unset and
//! `HOME` is a scratch directory. A test puts its own fakes in front (the
//! `tests/lib.sh` that `migrate init` writes does). `MIGRATION_TREE`,
//! `MIGRATION_SLUG`, `MIGRATION_TIER`, `MIGRATION_NAMESPACE` and
//! `migrate-tolerate` are there as in a real run.
//!
//! With `--real-cluster KUBECONFIG`, each migration that has fixtures
//! (`tests/<slug>.fixtures.yaml`) is also run twice against that cluster,
//! seeded with them: the second run must change nothing (no object's
//! `resourceVersion` moves).

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use migration_core::drive::ScriptCommand;
use migration_core::{LoadOptions, MigrationsTree, Script};
use migration_kube::defaults;
use serde::Serialize;

use super::args::TestArgs;
use super::{Failure, Out};
use migrate_lint::cluster_commands;
use migrate_runner::tripwire::record::{ENV_COMMANDS, ENV_REAL_PREFIX, ENV_REPORT};
use migrate_runner::tripwire::{TripwireConfig, exec};
use migrate_shared::exit;

/// One script's test result.
#[derive(Debug, Serialize)]
pub struct TestResult {
    /// The slug.
    pub slug: String,
    /// The test file, relative to the tree root (`None`: there is none).
    pub test: Option<String>,
    /// `pass` or `fail`.
    pub outcome: &'static str,
    /// Why it failed: `exit status N`, `timed out after Ns`, `no test`,
    /// a refused cluster command.
    pub reason: Option<String>,
    /// The last lines it printed (stdout and stderr), when it failed.
    pub output: Option<String>,
    /// Wall-clock time in milliseconds.
    pub elapsed_ms: u128,
    /// The two runs against the real cluster (`--real-cluster` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub twice: Option<TwiceResult>,
}

/// A migration run twice against a real cluster seeded with its fixtures.
#[derive(Debug, Serialize)]
pub struct TwiceResult {
    /// `pass`, `fail` or `skipped` (no fixtures file).
    pub outcome: &'static str,
    /// Why it failed or was skipped.
    pub reason: Option<String>,
    /// The objects the second run changed: `apiVersion/Kind namespace/name
    /// (resourceVersion A -> B)`, or created or deleted.
    pub changed: Vec<String>,
    /// The last lines the failing run printed.
    pub output: Option<String>,
}

/// The `test` document.
#[derive(Debug, Serialize)]
pub struct TestView {
    /// The tree.
    pub tree: String,
    /// Tests that passed.
    pub passed: usize,
    /// Tests that failed (a missing test counts, and so does a failed run
    /// against the real cluster).
    pub failed: usize,
    /// One per script, in slug order.
    pub results: Vec<TestResult>,
}

/// The fixtures file of `slug` for `--real-cluster`.
fn fixtures_file(tests: &Path, slug: &str) -> PathBuf {
    tests.join(format!("{slug}.fixtures.yaml"))
}

/// The test file of `slug`: `<slug>.sh`, `<slug>` or `<slug>.bats`, as lint looks for.
fn test_file(tests: &Path, slug: &str) -> Option<PathBuf> {
    [".sh", "", ".bats"]
        .iter()
        .map(|ext| tests.join(format!("{slug}{ext}")))
        .find(|p| p.is_file())
}

/// The last `n` lines of `text`.
fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// The file the guards append each refused call to.
const REFUSED_FILE: &str = "refused";

/// A kubeconfig whose server nobody listens on (port 1 of the loopback
/// address): a real client that slips past the guards still reaches nothing.
const NOWHERE_KUBECONFIG: &str = "\
apiVersion: v1
kind: Config
clusters:
- name: migrate-test-nowhere
  cluster: {server: \"https://127.0.0.1:1\"}
users:
- name: migrate-test-nobody
  user: {}
contexts:
- name: migrate-test-nowhere
  context: {cluster: migrate-test-nowhere, user: migrate-test-nobody}
current-context: migrate-test-nowhere
";

/// What every process of a run sees as a script does: the variables the
/// runner sets, `migrate-tolerate` first on `PATH`, and the cluster
/// commands' names (which `migrate-tolerate` accepts).
#[derive(Debug, Clone)]
struct RunEnv {
    /// The variables to set.
    set: Vec<(String, OsString)>,
    /// The variables to remove: the in-cluster service variables and the
    /// tripwire's own, which would point `migrate-tolerate` elsewhere.
    remove: Vec<String>,
}

impl RunEnv {
    /// `bin` (holding `migrate-tolerate`) goes first on `PATH`.
    fn new(bin: &Path, commands: &[String]) -> RunEnv {
        let path =
            std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
        let mut joined = bin.as_os_str().to_owned();
        joined.push(":");
        joined.push(&path);
        let mut remove: Vec<String> = [
            "KUBERNETES_SERVICE_HOST",
            "KUBERNETES_SERVICE_PORT",
            ENV_REPORT,
        ]
        .map(str::to_owned)
        .into();
        remove.extend(
            std::env::vars_os()
                .filter_map(|(k, _)| k.into_string().ok())
                .filter(|k| k.starts_with(ENV_REAL_PREFIX)),
        );
        RunEnv {
            set: vec![
                ("PATH".into(), joined),
                (ENV_COMMANDS.into(), commands.join(",").into()),
            ],
            remove,
        }
    }

    fn apply(&self, cmd: &mut tokio::process::Command) {
        for k in &self.remove {
            cmd.env_remove(k);
        }
        cmd.envs(self.set.iter().map(|(k, v)| (k, v)));
    }
}

/// The sandbox of one test: guards for every cluster command, the nowhere
/// kubeconfig, a scratch `HOME`, `migrate-tolerate`.
struct Sandbox {
    dir: tempfile::TempDir,
    env: RunEnv,
}

/// The guard standing in for cluster command `name`: records the call and
/// refuses it, so even a test that drops the exit status fails.
fn guard_text(name: &str, refused: &Path) -> String {
    let refused = migration_core::shell::quoted(&refused.display().to_string());
    format!(
        "#!/bin/sh\n\
         # migrate test: no real {name} may run under a test.\n\
         printf '%s\\n' \"{name} $*\" >> {refused}\n\
         echo \"{name}: migrate test refuses to run the real {name}: a test talks to a fake cluster only. Put a fake {name} first on PATH (tests/lib.sh does it for every cluster command), or prove the migration on a test cluster with migrate test --real-cluster KUBECONFIG\" >&2\n\
         exit 127\n"
    )
}

/// Links `migrate-tolerate` in `bin` to the shim binary next to this one.
fn link_tolerate(bin: &Path) -> std::io::Result<()> {
    let shim = TripwireConfig::default().shim.ok_or_else(|| {
        std::io::Error::other("the migrate binary's own path is unknown, so is migrate-shim's")
    })?;
    if !shim.is_file() {
        return Err(std::io::Error::other(format!(
            "{} is missing: it ships next to migrate and provides migrate-tolerate",
            shim.display()
        )));
    }
    std::os::unix::fs::symlink(&shim, bin.join(cluster_commands::TOLERATE))
}

impl Sandbox {
    fn new(commands: &[String]) -> std::io::Result<Sandbox> {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::Builder::new().prefix("migrate-test-").tempdir()?;
        let bin = dir.path().join("bin");
        let home = dir.path().join("home");
        std::fs::create_dir_all(&bin)?;
        std::fs::create_dir_all(&home)?;
        let refused = dir.path().join(REFUSED_FILE);
        let mut env = RunEnv::new(&bin, commands);
        for name in commands {
            let guard = bin.join(name);
            std::fs::write(&guard, guard_text(name, &refused))?;
            std::fs::set_permissions(&guard, std::fs::Permissions::from_mode(0o755))?;
            env.set
                .push((cluster_commands::env_key(name), guard.into_os_string()));
        }
        link_tolerate(&bin)?;
        let kubeconfig = dir.path().join("kubeconfig");
        std::fs::write(&kubeconfig, NOWHERE_KUBECONFIG)?;
        env.set
            .push(("KUBECONFIG".into(), kubeconfig.into_os_string()));
        env.set.push(("HOME".into(), home.into_os_string()));
        Ok(Sandbox { dir, env })
    }

    /// The cluster-command calls the guards refused.
    fn refused(&self) -> Vec<String> {
        std::fs::read_to_string(self.dir.path().join(REFUSED_FILE))
            .map(|t| t.lines().map(str::to_owned).collect())
            .unwrap_or_default()
    }
}

/// The interpreter words of a test file: `bats` for `.bats`, its shebang's,
/// else `sh`.
fn test_interpreter(file: &Path) -> Vec<String> {
    if file.extension().is_some_and(|e| e == "bats") {
        return vec!["bats".into()];
    }
    // Through the one reader: a FIFO in tests/ must not hang `migrate test`.
    use migration_core::tree::supplied::{self, Within};
    let first = supplied::read_file(file, Within::Anywhere, supplied::MAX_FILE_BYTES)
        .ok()
        .flatten()
        .and_then(|b| b.split(|c| *c == b'\n').next().map(<[u8]>::to_vec))
        .map(|l| String::from_utf8_lossy(&l).into_owned())
        .unwrap_or_default();
    match first.strip_prefix("#!") {
        Some(words) if !words.trim().is_empty() => {
            words.split_whitespace().map(str::to_owned).collect()
        }
        _ => vec!["sh".into()],
    }
}

/// How a child ended: `None` for success, else the reason; and the tail of
/// its output.
type ChildEnd = (Option<String>, Option<String>);

/// Waits for `cmd` (stdout and stderr captured) at most `limit`.
async fn finish(what: &str, mut cmd: tokio::process::Command, limit: Duration) -> ChildEnd {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => return (Some(format!("cannot run {what}: {e}")), None),
    };
    match tokio::time::timeout(limit, child.wait_with_output()).await {
        Err(_) => (Some(format!("timed out after {}s", limit.as_secs())), None),
        Ok(Err(e)) => (Some(format!("waiting for {what}: {e}")), None),
        Ok(Ok(output)) => {
            let text = format!(
                "{}{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            );
            // Kept on success too: a refused call's message is in it.
            let status = match output.status.code() {
                _ if output.status.success() => None,
                None => Some("killed by a signal".to_owned()),
                Some(c) => Some(format!("exit status {c}")),
            };
            (status, Some(tail(&text, 20)))
        }
    }
}

/// How `migrate test` starts `script` (at `path` in the tree at `root`), as
/// the runner does: its first attempt, batch `test`, the default namespace.
fn script_command<'c>(root: &'c Path, script: &'c Script, path: &'c Path) -> ScriptCommand<'c> {
    ScriptCommand {
        shebang: &script.header.shebang,
        copy: path,
        path,
        tree: root,
        slug: script.slug.as_str(),
        tier: script.tier.as_str(),
        namespace: defaults::NAMESPACE,
        batch: "test",
        attempt: 1,
    }
}

/// Runs one test file from `root` in its sandbox.
async fn run_one(
    root: &Path,
    script: &Script,
    file: &Path,
    limit: Duration,
    sandbox: &Sandbox,
) -> ChildEnd {
    let words = test_interpreter(file);
    let mut cmd = tokio::process::Command::new(&words[0]);
    cmd.args(&words[1..]).arg(file).current_dir(root);
    sandbox.env.apply(&mut cmd);
    // The variables the script itself gets when it runs (below, and in
    // `migrate run`), from the one place that sets them.
    let path = root.join(script.relative_path());
    let start = script_command(root, script, &path).build();
    for (k, v) in start.get_envs() {
        match v {
            Some(v) => cmd.env(k, v),
            None => cmd.env_remove(k),
        };
    }
    let (reason, output) = finish(&words[0], cmd, limit).await;
    let refused = sandbox.refused();
    if refused.is_empty() {
        return (reason.clone(), output.filter(|_| reason.is_some()));
    }
    // A refused call fails the test even when the test dropped its status.
    let calls = refused.join("; ");
    (
        Some(format!(
            "reached for a real cluster command ({calls}); put a fake first on PATH"
        )),
        output.or(Some(calls)),
    )
}

/// Runs every script's test; any failure (or missing test) exits 2.
pub async fn test(args: TestArgs, out: &Out) -> Result<(), Failure> {
    let tree = MigrationsTree::load_with(
        &args.tree,
        LoadOptions {
            read_manifest: false,
            ..LoadOptions::default()
        },
    )?;
    let root = std::path::absolute(tree.root())
        .map_err(|e| Failure::environment(vec![format!("{}: {e}", tree.root().display())]))?;
    let commands = cluster_commands::resolve(
        Some(&root),
        std::env::var(cluster_commands::ENV_COMMANDS)
            .ok()
            .as_deref(),
        &[],
    )
    .map_err(Failure::bad_input)?;
    let tests = root.join(&args.tests_dir);
    let limit = Duration::from_secs(args.timeout.max(1));
    let cluster = match &args.real_cluster {
        None => None,
        Some(kubeconfig) => Some(
            RealCluster::new(&root, kubeconfig, &commands, limit)
                .map_err(|e| Failure::environment(vec![e]))?,
        ),
    };
    let mut results = Vec::new();
    for (slug, script) in tree.scripts() {
        let started = Instant::now();
        let file = test_file(&tests, slug.as_str());
        let (reason, output) = match &file {
            None => (Some("no test".to_owned()), None),
            Some(file) => {
                let sandbox = Sandbox::new(&commands).map_err(|e| {
                    Failure::environment(vec![format!("migrate test: the sandbox: {e}")])
                })?;
                run_one(&root, script, file, limit, &sandbox).await
            }
        };
        let twice = match &cluster {
            None => None,
            Some(cluster) => Some(
                cluster
                    .twice(script, &fixtures_file(&tests, slug.as_str()))
                    .await,
            ),
        };
        let twice_failed = twice.as_ref().is_some_and(|t| t.outcome == "fail");
        results.push(TestResult {
            slug: slug.to_string(),
            test: file.map(|f| f.strip_prefix(&root).unwrap_or(&f).display().to_string()),
            outcome: if reason.is_none() && !twice_failed {
                "pass"
            } else {
                "fail"
            },
            reason,
            output,
            elapsed_ms: started.elapsed().as_millis(),
            twice,
        });
    }
    let failed = results.iter().filter(|r| r.outcome == "fail").count();
    let view = TestView {
        tree: root.display().to_string(),
        passed: results.len() - failed,
        failed,
        results,
    };
    out.emit(&view, |_| text(&view));
    if failed > 0 {
        return Err(Failure::quiet(exit::BAD_INPUT));
    }
    Ok(())
}

/// Resources whose objects change by themselves (the API server's own
/// heartbeats, and events), left out of the comparison.
const SELF_CHANGING: [&str; 3] = [
    "events",
    "events.events.k8s.io",
    "leases.coordination.k8s.io",
];

/// How many more snapshots [`RealCluster::settled`] takes at most, and how
/// far apart.
const SETTLE_TRIES: usize = 10;
const SETTLE_PAUSE: Duration = Duration::from_millis(300);

/// A test cluster migrations run twice against.
struct RealCluster {
    root: PathBuf,
    kubeconfig: PathBuf,
    kubectl: PathBuf,
    env: RunEnv,
    // Holds `migrate-tolerate`; removed on drop.
    _bin: tempfile::TempDir,
    limit: Duration,
}

impl RealCluster {
    fn new(
        root: &Path,
        kubeconfig: &Path,
        commands: &[String],
        limit: Duration,
    ) -> Result<RealCluster, String> {
        let kubeconfig = std::path::absolute(kubeconfig)
            .map_err(|e| format!("--real-cluster {}: {e}", kubeconfig.display()))?;
        if !kubeconfig.is_file() {
            return Err(format!(
                "--real-cluster {}: no such kubeconfig file",
                kubeconfig.display()
            ));
        }
        let kubectl = std::env::var_os("KUBECTL")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .or_else(|| {
                let path = std::env::var("PATH").ok()?;
                exec::search_path("kubectl", &path, None)
            })
            .ok_or("--real-cluster: no kubectl on PATH (or set KUBECTL): it seeds the fixtures and lists objects")?;
        let bin = tempfile::Builder::new()
            .prefix("migrate-test-")
            .tempdir()
            .map_err(|e| format!("migrate test: a scratch directory: {e}"))?;
        link_tolerate(bin.path()).map_err(|e| format!("migrate test: {e}"))?;
        let mut env = RunEnv::new(bin.path(), commands);
        env.set
            .push(("KUBECONFIG".into(), kubeconfig.clone().into_os_string()));
        env.set
            .push(("KUBECTL".into(), kubectl.clone().into_os_string()));
        Ok(RealCluster {
            root: root.to_path_buf(),
            kubeconfig,
            kubectl,
            env,
            _bin: bin,
            limit,
        })
    }

    /// kubectl against the test cluster; its stdout, or why it failed.
    async fn kubectl(&self, args: &[&str]) -> Result<String, String> {
        let mut cmd = tokio::process::Command::new(&self.kubectl);
        cmd.args(args)
            .env("KUBECONFIG", &self.kubeconfig)
            .env_remove("KUBERNETES_SERVICE_HOST")
            .stdin(Stdio::null())
            .kill_on_drop(true);
        let out = tokio::time::timeout(self.limit, cmd.output())
            .await
            .map_err(|_| format!("kubectl {}: timed out", args.join(" ")))?
            .map_err(|e| format!("kubectl {}: {e}", args.join(" ")))?;
        if !out.status.success() {
            return Err(format!(
                "kubectl {}: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Every object's `resourceVersion`, by `apiVersion/Kind namespace/name`:
    /// one discovery call and one list of every listable resource.
    async fn snapshot(&self) -> Result<BTreeMap<String, String>, String> {
        let listed = self
            .kubectl(&["api-resources", "--verbs=list", "-o", "name"])
            .await?;
        let resources: Vec<&str> = listed
            .lines()
            .map(str::trim)
            .filter(|r| !r.is_empty() && !SELF_CHANGING.contains(r))
            .collect();
        let text = self
            .kubectl(&[
                "get",
                &resources.join(","),
                "--all-namespaces",
                "--ignore-not-found",
                "-o",
                "jsonpath={range .items[*]}{.apiVersion}/{.kind} {.metadata.namespace}/{.metadata.name} {.metadata.resourceVersion}{\"\\n\"}{end}",
            ])
            .await?;
        Ok(text
            .lines()
            .filter_map(|line| line.rsplit_once(' '))
            .map(|(object, version)| (object.to_owned(), version.to_owned()))
            .collect())
    }

    /// A snapshot once the cluster is still: the API server finishes some
    /// writes of its own after a run (a new CRD's `Established` condition),
    /// and those are not the second run's.
    async fn settled(&self) -> Result<BTreeMap<String, String>, String> {
        let mut last = self.snapshot().await?;
        for _ in 0..SETTLE_TRIES {
            tokio::time::sleep(SETTLE_PAUSE).await;
            let now = self.snapshot().await?;
            if now == last {
                return Ok(now);
            }
            last = now;
        }
        Err(format!(
            "objects kept changing without any migration running ({} snapshots, {} ms apart)",
            SETTLE_TRIES + 1,
            SETTLE_PAUSE.as_millis()
        ))
    }

    /// Runs `script` as the runner does, against the test cluster.
    async fn run(&self, script: &Script) -> ChildEnd {
        let path = self.root.join(script.relative_path());
        let mut cmd: tokio::process::Command =
            script_command(&self.root, script, &path).build().into();
        self.env.apply(&mut cmd);
        finish(script.slug.as_str(), cmd, self.limit).await
    }

    /// Seeds `fixtures`, runs `script` twice and compares.
    async fn twice(&self, script: &Script, fixtures: &Path) -> TwiceResult {
        let result = |outcome, reason: String, changed, output| TwiceResult {
            outcome,
            reason: Some(reason),
            changed,
            output,
        };
        if !fixtures.is_file() {
            let name = fixtures.file_name().unwrap_or_default().to_string_lossy();
            return result("skipped", format!("no fixtures ({name})"), Vec::new(), None);
        }
        // Each step that fails ends the test there, failed, with the output of a run.
        let fail = |reason, output| result("fail", reason, Vec::new(), output);
        let listing = |e| fail(format!("listing objects: {e}"), None);
        let run = async |nth| match self.run(script).await {
            (Some(reason), output) => Err(fail(format!("the {nth} run failed: {reason}"), output)),
            (None, _) => Ok(()),
        };
        let steps = async {
            let fixtures_arg = fixtures.display().to_string();
            self.kubectl(&["apply", "-f", &fixtures_arg])
                .await
                .map_err(|e| fail(format!("seeding the fixtures: {e}"), None))?;
            run("first").await?;
            let before = self.settled().await.map_err(listing)?;
            run("second").await?;
            let after = self.snapshot().await.map_err(listing)?;
            Ok(changes(&before, &after))
        };
        let changed = match steps.await {
            Ok(changed) => changed,
            Err(failed) => return failed,
        };
        if changed.is_empty() {
            return TwiceResult {
                outcome: "pass",
                reason: None,
                changed,
                output: None,
            };
        }
        let reason = format!(
            "the second run changed {} object(s); a migration must be safe to run twice",
            changed.len()
        );
        result("fail", reason, changed, None)
    }
}

/// What differs between two snapshots.
fn changes(before: &BTreeMap<String, String>, after: &BTreeMap<String, String>) -> Vec<String> {
    let mut changed = Vec::new();
    for (object, old) in before {
        match after.get(object) {
            None => changed.push(format!("{object} (deleted)")),
            Some(new) if new != old => {
                changed.push(format!("{object} (resourceVersion {old} -> {new})"))
            }
            Some(_) => {}
        }
    }
    for object in after.keys().filter(|o| !before.contains_key(*o)) {
        changed.push(format!("{object} (created)"));
    }
    changed
}

fn text(view: &TestView) -> String {
    let mut out = String::new();
    for r in &view.results {
        let test = r.test.as_deref().unwrap_or("-");
        match &r.reason {
            None => out.push_str(&format!("pass  {}  ({test})\n", r.slug)),
            Some(reason) => {
                out.push_str(&format!("FAIL  {}  ({test}): {reason}\n", r.slug));
                for line in r.output.iter().flat_map(|o| o.lines()) {
                    out.push_str(&format!("      | {line}\n"));
                }
            }
        }
        if let Some(t) = &r.twice {
            let reason = t
                .reason
                .as_deref()
                .map(|r| format!(": {r}"))
                .unwrap_or_default();
            out.push_str(&format!(
                "      twice on the real cluster: {}{reason}\n",
                t.outcome
            ));
            for object in &t.changed {
                out.push_str(&format!("      - {object}\n"));
            }
            for line in t.output.iter().flat_map(|o| o.lines()) {
                out.push_str(&format!("      | {line}\n"));
            }
        }
    }
    out.push_str(&format!("{} passed, {} failed\n", view.passed, view.failed));
    out
}
