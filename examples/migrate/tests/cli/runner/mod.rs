//! `migrate run` with real shell scripts in temporary trees.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
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
        common::file_spec(&self.file("ledger.json"))
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
        common::by_slug(&self.status()["entries"], slug).cloned()
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
    common::assert_error(&doc, "migration-failed", "about to fail");
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

mod ledger;
mod process;
