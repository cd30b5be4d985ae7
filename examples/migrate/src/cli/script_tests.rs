//! `migrate test TREE`: runs each script's test from the tests directory
//! (AUTHORING.md, "The test"), so the rule that every migration ships with a
//! test has a runner. Each test runs from the tree root, `sh TEST` (or
//! `bats TEST` for `.bats`), with a time limit.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use migration_core::{LoadOptions, MigrationsTree};
use serde::Serialize;

use super::args::TestArgs;
use super::{Failure, Out};
use migrate_spec::exit;

/// One script's test result.
#[derive(Debug, Serialize)]
pub struct TestResult {
    /// The slug.
    pub slug: String,
    /// The test file, relative to the tree root (`None`: there is none).
    pub test: Option<String>,
    /// `pass` or `fail`.
    pub outcome: &'static str,
    /// Why it failed: `exit status N`, `timed out after Ns`, `no test`.
    pub reason: Option<String>,
    /// The last lines it printed (stdout and stderr), when it failed.
    pub output: Option<String>,
    /// Wall-clock time in milliseconds.
    pub elapsed_ms: u128,
}

/// The `test` document.
#[derive(Debug, Serialize)]
pub struct TestView {
    /// The tree.
    pub tree: String,
    /// Tests that passed.
    pub passed: usize,
    /// Tests that failed (a missing test counts).
    pub failed: usize,
    /// One per script, in slug order.
    pub results: Vec<TestResult>,
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

/// Runs one test file from `root`.
async fn run_one(root: &Path, file: &Path, limit: Duration) -> (Option<String>, Option<String>) {
    let runner = if file.extension().is_some_and(|e| e == "bats") {
        "bats"
    } else {
        "sh"
    };
    let child = tokio::process::Command::new(runner)
        .arg(file)
        .current_dir(root)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn();
    let child = match child {
        Ok(c) => c,
        Err(e) => return (Some(format!("cannot run {runner}: {e}")), None),
    };
    match tokio::time::timeout(limit, child.wait_with_output()).await {
        Err(_) => (Some(format!("timed out after {}s", limit.as_secs())), None),
        Ok(Err(e)) => (Some(format!("waiting for {runner}: {e}")), None),
        Ok(Ok(output)) if output.status.success() => (None, None),
        Ok(Ok(output)) => {
            let text = format!(
                "{}{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            );
            let status = output.status.code().map_or_else(
                || "killed by a signal".to_owned(),
                |c| format!("exit status {c}"),
            );
            (Some(status), Some(tail(&text, 20)))
        }
    }
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
    let root = tree.root().to_path_buf();
    let tests = root.join(&args.tests_dir);
    let limit = Duration::from_secs(args.timeout.max(1));
    let mut results = Vec::new();
    for slug in tree.scripts().keys() {
        let started = Instant::now();
        let file = test_file(&tests, slug.as_str());
        let (reason, output) = match &file {
            None => (Some("no test".to_owned()), None),
            Some(file) => run_one(&root, file, limit).await,
        };
        results.push(TestResult {
            slug: slug.to_string(),
            test: file.map(|f| f.strip_prefix(&root).unwrap_or(&f).display().to_string()),
            outcome: if reason.is_none() { "pass" } else { "fail" },
            reason,
            output,
            elapsed_ms: started.elapsed().as_millis(),
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
    }
    out.push_str(&format!("{} passed, {} failed\n", view.passed, view.failed));
    out
}
