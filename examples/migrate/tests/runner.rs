//! `migrate run` with real shell scripts in temporary trees.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{assert_first_problem, migrate, parse};
use migration_core::testing::fixtures::{ScratchTree, TreeBuilder, script_text};
use migration_core::{OnError, Tier};

/// A tree whose manifest is one batch listing `scripts` in the given order,
/// in a scratch directory that also holds its file ledger; scripts see that
/// directory as `$SCRATCH`.
struct Tree {
    scratch: ScratchTree,
}

/// One script of a test tree: tier, slug, failure policy, body.
type Script<'a> = (Tier, &'a str, OnError, &'a str);

/// A pre-apply script that aborts the run when it fails.
fn pre<'a>(slug: &'a str, body: &'a str) -> Script<'a> {
    (Tier::PreApply, slug, OnError::Abort, body)
}

/// A pre-apply script whose failure is recorded and the run goes on.
fn pre_warn<'a>(slug: &'a str, body: &'a str) -> Script<'a> {
    (Tier::PreApply, slug, OnError::Warn, body)
}

/// A background script that aborts when it fails.
fn bg<'a>(slug: &'a str, body: &'a str) -> Script<'a> {
    (Tier::Background, slug, OnError::Abort, body)
}

impl Tree {
    fn new(scripts: &[Script<'_>]) -> Self {
        let mut builder = TreeBuilder::new();
        let mut order = String::new();
        for &(tier, slug, on_error, body) in scripts {
            builder = builder.script_with(tier, slug, on_error, &[], body);
            order.push_str(&format!("{slug}\n"));
        }
        let scratch = builder.manifest(&[("00001-v1", &order)]).scratch();
        Tree { scratch }
    }

    fn root(&self) -> PathBuf {
        self.scratch.root()
    }

    /// A file in the scratch directory, outside the tree.
    fn file(&self, name: &str) -> PathBuf {
        self.scratch.file(name)
    }

    fn ledger(&self) -> String {
        format!("file:{}", self.file("ledger.json").display())
    }

    /// Creates an empty ledger so runs are upgrades, not fresh installs.
    fn existing_ledger(self) -> Self {
        common::empty_file_ledger(&self.file("ledger.json"));
        self
    }

    fn run(&self, extra: &[&str]) -> (i32, serde_json::Value, String) {
        let out = self.command(extra).output().unwrap();
        parse(out)
    }

    /// `migrate run` with JSON output.
    fn command(&self, extra: &[&str]) -> Command {
        let mut cmd = self.text_command(extra);
        cmd.args(["--output", "json"]);
        cmd
    }

    /// `migrate run` with JSON output, started in the background with its
    /// output captured.
    fn spawn(&self, extra: &[&str]) -> std::process::Child {
        self.command(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }

    /// `migrate run` with text output.
    fn text_command(&self, extra: &[&str]) -> Command {
        let mut cmd = migrate();
        cmd.args([
            "run",
            self.root().to_str().unwrap(),
            "--ledger",
            &self.ledger(),
        ])
        .args(extra)
        .env("SCRATCH", self.scratch.dir());
        cmd
    }

    fn status(&self) -> serde_json::Value {
        common::json(&["status", "--ledger", &self.ledger()]).1
    }

    fn entry(&self, slug: &str) -> Option<serde_json::Value> {
        self.status()["entries"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["slug"] == slug)
            .cloned()
    }

    fn lines(&self, name: &str) -> Vec<String> {
        self.scratch.lines(name)
    }
}

fn outcomes(doc: &serde_json::Value) -> Vec<(String, String)> {
    let report = if doc.get("report").is_some() {
        &doc["report"]
    } else {
        doc
    };
    common::field_pairs(&report["results"], "slug", "outcome")
}

fn pair(a: &str, b: &str) -> (String, String) {
    (a.to_owned(), b.to_owned())
}

#[test]
fn scripts_run_in_manifest_order_with_the_documented_environment_and_are_recorded_ok() {
    let first =
        r#"echo "$MIGRATION_SLUG $MIGRATION_TIER $MIGRATION_NAMESPACE $(pwd)" >> "$SCRATCH/log""#;
    let second = r#"echo "$MIGRATION_SLUG $MIGRATION_BATCH $MIGRATION_ATTEMPT" >> "$SCRATCH/log""#;
    let tree = Tree::new(&[
        pre("zz-first", first),
        pre("aa-second", second),
        bg("later", r#"echo later >> "$SCRATCH/log""#),
    ])
    .existing_ledger();
    let (code, doc, err) = tree.run(&[
        "--image",
        "registry.example/m@sha256:abc",
        "--namespace",
        "tenant-root",
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        outcomes(&doc),
        [pair("zz-first", "ok"), pair("aa-second", "ok")]
    );
    let root = std::fs::canonicalize(tree.root()).unwrap();
    assert_eq!(
        tree.lines("log"),
        [
            format!("zz-first pre-apply tenant-root {}", root.display()),
            "aa-second 00001-v1 1".to_owned()
        ]
    );
    let entry = tree.entry("zz-first").unwrap();
    assert_eq!(entry["state"], "ok");
    assert_eq!(entry["attempts"], 1);
    assert_eq!(entry["image"], "registry.example/m@sha256:abc");
    assert_eq!(entry["batch"], "00001-v1");
    assert_eq!(entry["sha256"].as_str().unwrap().len(), 64);
    assert!(tree.entry("later").is_none(), "the other tier did not run");
    // Progress: one line at the start, one at the end, script lines prefixed.
    assert!(
        err.contains("migrate: 2 pending in tier pre-apply, 0 seeded"),
        "{err}"
    );
    assert!(
        err.contains("migrate: done: 2 ok, 0 failed, 0 blocked, 0 not yet, 0 not run"),
        "{err}"
    );
    // A second run finds nothing to do.
    let (code, doc, _) = tree.run(&[]);
    assert_eq!((code, doc["pending"].as_u64()), (0, Some(0)));
}

#[test]
fn script_output_is_streamed_line_by_line_with_the_slug_prefix() {
    let tree = Tree::new(&[pre("talker", "echo out-line; echo err-line >&2")]).existing_ledger();
    let out = tree.text_command(&[]).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("[talker] out-line"), "{stdout}");
    assert!(stdout.contains("[talker] err-line"), "{stdout}");
}

#[test]
fn an_abort_failure_records_nothing_stops_the_run_and_exits_4() {
    let tree = Tree::new(&[
        pre(
            "breaks",
            r#"echo "about to fail"; false; echo unreachable >> "$SCRATCH/log""#,
        ),
        pre("after", r#"echo after >> "$SCRATCH/log""#),
    ])
    .existing_ledger();
    let (code, doc, _) = tree.run(&[]);
    assert_eq!(code, 4, "{doc}");
    assert_eq!(doc["error"], "migration-failed");
    assert_first_problem(&doc, "about to fail");
    assert_eq!(outcomes(&doc), [pair("breaks", "aborted")]);
    assert!(tree.entry("breaks").is_none(), "abort records nothing");
    assert!(
        tree.lines("log").is_empty(),
        "errexit stopped the script and the run stopped before 'after'"
    );
    // Nothing recorded: the next run tries it again.
    let (code, _, _) = tree.run(&[]);
    assert_eq!(code, 4);
}

#[test]
fn a_warn_failure_records_failed_with_the_output_tail_and_continues() {
    let body = "i=0; while [ $i -lt 1000 ]; do i=$((i + 1)); echo \"line $i\"; done; echo 'kubectl: the server is unavailable' >&2; exit 3";
    let tree = Tree::new(&[pre_warn("flaky", body), pre("next", "true")]).existing_ledger();
    let (code, doc, err) = tree.run(&[]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        outcomes(&doc),
        [pair("flaky", "failed"), pair("next", "ok")]
    );
    let entry = tree.entry("flaky").unwrap();
    assert_eq!(entry["state"], "failed");
    assert_eq!(entry["reason"], "exit-status-3");
    let message = entry["message"].as_str().unwrap();
    assert!(
        message.ends_with("kubectl: the server is unavailable"),
        "{message}"
    );
    assert!(
        message.contains("line 1000") && !message.contains("line 1\n"),
        "bounded tail: {message}"
    );
    assert!(message.len() <= 4096);
}

#[test]
fn a_failing_command_substitution_in_a_for_list_is_refused_before_anything_runs() {
    // The hazard: under plain errexit this script succeeds, doing nothing.
    let hazard = script_text(
        "pre-apply",
        "abort",
        &[],
        "for ns in $(false); do echo \"$ns\"; done",
    );
    let direct = Command::new("/bin/sh")
        .arg("-e")
        .arg("-c")
        .arg(&hazard)
        .status()
        .unwrap();
    assert!(direct.success(), "sh -e really does report success here");
    let tree = Tree::new(&[
        pre("first", r#"echo first >> "$SCRATCH/log""#),
        pre(
            "fail-open",
            r#"for ns in $(kubectl get ns -o name); do echo "$ns"; done"#,
        ),
    ])
    .existing_ledger();
    let (code, doc, _) = tree.run(&[]);
    assert_eq!(code, 3, "{doc}");
    let problem = doc["problems"][0].as_str().unwrap();
    assert!(
        problem.contains("pre-apply/fail-open:5: [for-command-substitution]"),
        "{problem}"
    );
    assert!(
        tree.lines("log").is_empty(),
        "nothing may run when any pending script is unsafe"
    );
    assert!(tree.status()["entries"].as_array().unwrap().is_empty());
}

#[test]
fn kubectl_failures_turned_into_success_are_refused() {
    let tree = Tree::new(&[pre("quiet", "kubectl delete ns old || true")]).existing_ledger();
    let (code, doc, _) = tree.run(&[]);
    assert_eq!(code, 3);
    assert_first_problem(&doc, "kubectl-error-ignored");
}

#[test]
fn a_disallowed_interpreter_is_refused_by_plan() {
    let tree = Tree::new(&[pre("py", "print('x')")]).existing_ledger();
    let path = tree.root().join("pre-apply/py");
    let text = std::fs::read_to_string(&path)
        .unwrap()
        .replace("#!/bin/sh", "#!/usr/bin/python3");
    std::fs::write(&path, text).unwrap();
    let (code, doc, _) = tree.run(&[]);
    assert_eq!(code, 3);
    assert_first_problem(&doc, "not an allowed interpreter");
}

/// True while `pid` runs; a zombie waiting for a reaper counts as dead (in
/// a container nothing may reap it).
fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

fn dies_soon(pid: i32) -> bool {
    let deadline = Instant::now() + Duration::from_secs(5);
    while alive(pid) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    !alive(pid)
}

fn wait_for(path: &Path, limit: Duration) -> String {
    let start = Instant::now();
    loop {
        if let Ok(text) = std::fs::read_to_string(path)
            && text.ends_with('\n')
        {
            return text;
        }
        assert!(start.elapsed() < limit, "{} never appeared", path.display());
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_timeout_kills_the_whole_process_group_including_grandchildren() {
    let body = r#"sleep 300 & echo $! > "$SCRATCH/grandchild"; sleep 300"#;
    let tree = Tree::new(&[pre_warn("hangs", body), pre("after", "true")]).existing_ledger();
    let started = Instant::now();
    let (code, doc, err) = tree.run(&["--timeout", "1", "--grace", "1"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "the timeout did not stop the script"
    );
    assert_eq!(
        outcomes(&doc),
        [pair("hangs", "failed"), pair("after", "ok")]
    );
    assert_eq!(tree.entry("hangs").unwrap()["reason"], "timeout");
    let grandchild: i32 = std::fs::read_to_string(tree.file("grandchild"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(
        dies_soon(grandchild),
        "grandchild {grandchild} survived the timeout"
    );
}

#[test]
fn sigterm_mid_script_stops_it_records_nothing_and_exits_non_zero() {
    let body =
        r#"echo started > "$SCRATCH/started"; sleep 300 & echo $! > "$SCRATCH/grandchild"; wait"#;
    let tree = Tree::new(&[pre("long", body)]).existing_ledger();
    let child = tree.spawn(&["--grace", "2"]);
    wait_for(&tree.file("started"), Duration::from_secs(20));
    let grandchild: i32 = wait_for(&tree.file("grandchild"), Duration::from_secs(5))
        .trim()
        .parse()
        .unwrap();
    Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    let started = Instant::now();
    let out = child.wait_with_output().unwrap();
    assert!(started.elapsed() < Duration::from_secs(15));
    let (code, doc, _) = parse(out);
    assert_eq!(code, 4, "{doc}");
    assert_eq!(outcomes(&doc), [pair("long", "interrupted")]);
    assert!(
        tree.entry("long").is_none(),
        "nothing recorded for the interrupted script"
    );
    assert!(
        dies_soon(grandchild),
        "the script's process group must be stopped"
    );
    // The lock was released: a new run starts at once (and is interrupted-free).
    std::fs::write(
        tree.root().join("pre-apply/long"),
        script_text("pre-apply", "abort", &[], "true"),
    )
    .unwrap();
    let (code, _, err) = tree.run(&["--lock-wait", "0"]);
    assert_eq!(code, 0, "{err}");
}

#[test]
fn only_reruns_a_recorded_slug_and_counts_attempts() {
    let tree = Tree::new(&[pre("again", r#"echo run >> "$SCRATCH/runs""#)]).existing_ledger();
    assert_eq!(tree.run(&[]).0, 0);
    assert_eq!(tree.entry("again").unwrap()["attempts"], 1);
    let (code, doc, err) = tree.run(&["--only", "again"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(doc["only"], "again");
    assert_eq!(tree.entry("again").unwrap()["attempts"], 2);
    let (code, _, _) = Command::new(env!("CARGO_BIN_EXE_migrate"))
        .args([
            "run",
            tree.root().to_str().unwrap(),
            "--ledger",
            &tree.ledger(),
            "--output",
            "json",
        ])
        .env("ONLY", "again")
        .env("SCRATCH", tree.scratch.dir())
        .output()
        .map(parse)
        .unwrap();
    assert_eq!(code, 0);
    assert_eq!(
        tree.entry("again").unwrap()["attempts"],
        3,
        "ONLY from the environment works too"
    );
    assert_eq!(tree.lines("runs").len(), 3);
}

#[test]
fn only_refuses_revoked_and_absent_slugs() {
    let tree = Tree::new(&[pre("a", "true"), pre("bad", "true")]).existing_ledger();
    std::fs::write(tree.root().join("revoked"), "bad\n").unwrap();
    let (code, doc, _) = tree.run(&["--only", "bad"]);
    assert_eq!(code, 3);
    assert_first_problem(&doc, "revoked");
    let (code, doc, _) = tree.run(&["--only", "nope"]);
    assert_eq!(code, 3);
    assert_first_problem(&doc, "no script");
}

#[test]
fn two_runners_at_once_run_each_slug_exactly_once() {
    let body = r#"echo "$MIGRATION_SLUG" >> "$SCRATCH/runs"; sleep 0.3"#;
    let tree = Tree::new(&[pre("one", body), pre("two", body)]).existing_ledger();
    let a = tree.spawn(&["--holder", "runner-a"]);
    let b = tree.spawn(&["--holder", "runner-b"]);
    let (ca, da, _) = parse(a.wait_with_output().unwrap());
    let (cb, db, _) = parse(b.wait_with_output().unwrap());
    assert_eq!((ca, cb), (0, 0));
    let mut runs = tree.lines("runs");
    runs.sort();
    assert_eq!(runs, ["one", "two"], "each slug executed exactly once");
    let executed = outcomes(&da).len() + outcomes(&db).len();
    assert_eq!(
        executed, 2,
        "one runner ran both, the other found nothing: {da} {db}"
    );
}

#[test]
fn a_second_runner_gives_up_with_a_clear_message_when_the_lock_stays_busy() {
    let tree =
        Tree::new(&[pre("slow", r#"echo s > "$SCRATCH/started"; sleep 3"#)]).existing_ledger();
    let holder = tree
        .command(&["--holder", "first"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for(&tree.file("started"), Duration::from_secs(20));
    let (code, doc, _) = tree.run(&["--holder", "second", "--lock-wait", "0"]);
    assert_eq!(code, 1, "{doc}");
    assert_first_problem(&doc, "held by first");
    let _ = holder.wait_with_output();
}

#[test]
fn a_crash_after_the_script_succeeded_but_before_the_record_is_rerun_and_recorded_once() {
    // The script does its work, then kills the runner (SIGKILL, no cleanup)
    // the first time: the effect happened, the record did not.
    let body = r#"echo effect >> "$SCRATCH/effects"
if [ ! -f "$SCRATCH/crashed" ]; then touch "$SCRATCH/crashed"; kill -9 $PPID; sleep 1; fi"#;
    let tree = Tree::new(&[pre("crashy", body)]).existing_ledger();
    let out = tree.command(&["--lock-ttl", "1"]).output().unwrap();
    assert_eq!(out.status.code(), None, "the runner died by signal");
    assert!(
        tree.entry("crashy").is_none(),
        "the crash happened before the record"
    );
    assert_eq!(tree.status()["counts"].as_object().unwrap().len(), 0);
    // The crashed runner's lock expires; the re-run executes the script again.
    let (code, _, err) = tree.run(&["--lock-wait", "10"]);
    assert_eq!(code, 0, "{err}");
    let entry = tree.entry("crashy").unwrap();
    assert_eq!(entry["state"], "ok");
    assert_eq!(tree.lines("effects").len(), 2, "two real executions");
    assert_eq!(
        entry["attempts"], 2,
        "attempts counts real executions, including the crashed one"
    );
    assert_eq!(
        tree.run(&[]).1["pending"],
        0,
        "recorded exactly once: nothing left"
    );
}

#[test]
fn a_requirement_that_failed_earlier_in_the_run_blocks_its_dependent() {
    let dir = Tree::new(&[pre_warn("base", "exit 1")]).existing_ledger();
    std::fs::write(
        dir.root().join("pre-apply/dependent"),
        script_text(
            "pre-apply",
            "warn",
            &["base"],
            "echo ran >> \"$SCRATCH/log\"",
        ),
    )
    .unwrap();
    std::fs::write(dir.root().join("order.d/00001-v1"), "base\ndependent\n").unwrap();
    let (code, doc, err) = dir.run(&[]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        outcomes(&doc),
        [pair("base", "failed"), pair("dependent", "blocked")]
    );
    assert!(
        dir.lines("log").is_empty(),
        "a blocked migration does not execute"
    );
    let entry = dir.entry("dependent").unwrap();
    assert_eq!(entry["reason"], "requirement-unmet");
    assert_eq!(entry["attempts"], 0);
}

#[test]
fn a_fresh_install_runs_nothing() {
    let tree = Tree::new(&[pre("a", r#"echo ran >> "$SCRATCH/log""#)]);
    let (code, doc, err) = tree.run(&[]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(doc["fresh_install"], true);
    assert_eq!(doc["seeded"], 1);
    assert!(tree.lines("log").is_empty());
    assert_eq!(tree.entry("a").unwrap()["state"], "skipped-fresh-install");
}

#[test]
fn a_ledger_without_room_for_the_next_record_refuses_before_the_script_runs() {
    let tree = Tree::new(&[
        pre("first", r#"echo ran >> "$SCRATCH/first""#),
        pre("second", r#"echo ran >> "$SCRATCH/second""#),
    ]);
    // Someone else's key fills a 1 MiB file-ledger budget but for 20 KiB:
    // room for an ok record, not for the largest record a script can
    // produce (its attempt mark and an entry with a 4 KiB failure tail,
    // JSON-escaped), which is what must be free before it runs.
    let budget = 1024 * 1024;
    let padding = "p".repeat(budget - "padding".len() - 20 * 1024);
    std::fs::write(
        tree.file("ledger.json"),
        format!(
            r#"{{"format":"migration-ledger/v1","ledger":{{"revision":1,"data":{{"padding":"{padding}"}}}},"lock":null,"lock_generation":0}}"#
        ),
    )
    .unwrap();
    let out = tree
        .command(&[])
        .env("MIGRATE_FILE_LEDGER_BUDGET", budget.to_string())
        .output()
        .unwrap();
    let (code, doc, _) = parse(out);
    assert_eq!(code, 3, "{doc}");
    let problems = doc["problems"].to_string();
    assert!(problems.contains("no room to record 'first'"), "{problems}");
    assert!(problems.contains("1048576-byte budget"), "{problems}");
    assert!(
        !tree.file("first").exists() && !tree.file("second").exists(),
        "no script may run when its outcome could not be recorded"
    );
    assert_eq!(tree.entry("first"), None, "nothing is recorded");
}

#[test]
fn a_failure_tail_is_recorded_with_secret_shaped_values_redacted() {
    let tree = Tree::new(&[pre_warn(
        "leaky",
        "echo 'applying with password=hunter2'\necho 'Authorization: Bearer abc.def.ghi'\nexit 3",
    )])
    .existing_ledger();
    let (code, _, err) = tree.run(&[]);
    assert_eq!(code, 0, "{err}");
    let entry = tree.entry("leaky").unwrap();
    let message = entry["message"].as_str().unwrap();
    assert!(
        !message.contains("hunter2") && !message.contains("abc.def.ghi"),
        "{message}"
    );
    assert!(
        message.contains("2 secret-shaped value(s) redacted"),
        "{message}"
    );
    assert_eq!(entry["reason"], "exit-status-3");
}

#[test]
fn an_only_rerun_keeps_entry_fields_written_by_a_newer_engine() {
    let tree = Tree::new(&[pre("again", "true")]);
    std::fs::write(
        tree.file("ledger.json"),
        r#"{"format":"migration-ledger/v1","ledger":{"revision":1,"data":{"m.again":"{\"state\":\"ok\",\"at\":\"2026-01-01T00:00:00Z\",\"attempts\":1,\"checked_by\":\"engine-v9\"}"}},"lock":null,"lock_generation":0}"#,
    )
    .unwrap();
    let (code, _, err) = tree.run(&["--only", "again"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(tree.entry("again").unwrap()["attempts"], 2);
    let stored = std::fs::read_to_string(tree.file("ledger.json")).unwrap();
    assert!(
        stored.contains(r##"\"checked_by\":\"engine-v9\""##),
        "the newer engine's field must survive the re-run: {stored}"
    );
}

#[test]
fn an_empty_only_as_a_templated_job_sets_it_means_unset_for_run_and_plan() {
    let tree = Tree::new(&[pre("first", "echo one >> \"$SCRATCH/ran\"")]).existing_ledger();
    let (code, doc, err) = parse(tree.command(&[]).env("ONLY", "").output().unwrap());
    assert_eq!(code, 0, "{doc}\n{err}");
    assert_eq!(doc["only"], serde_json::Value::Null, "{doc}");
    assert_eq!(tree.lines("ran"), ["one"]);
    let (code, plan, err) = parse(
        migrate()
            .args([
                "plan",
                tree.root().to_str().unwrap(),
                "--ledger",
                &tree.ledger(),
            ])
            .args(["--output", "json"])
            .env("ONLY", "")
            .output()
            .unwrap(),
    );
    assert_eq!(code, 0, "{plan}\n{err}");
    assert_eq!(plan["only"], serde_json::Value::Null);
    // An empty --only flag given by hand is still a usage error: only the
    // environment's empty value means "not set".
    let (code, _, _) = parse_or_empty(tree.command(&["--only", ""]).output().unwrap());
    assert_eq!(code, 2);
}

/// (exit code, JSON or Null, stderr) for commands that may print no JSON.
fn parse_or_empty(out: std::process::Output) -> (i32, serde_json::Value, String) {
    let doc = serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null);
    (
        out.status.code().unwrap_or(-1),
        doc,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}
