//! Helpers for driving the real `migrate` binary against scratch trees and
//! git repositories.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use migration_core::testing::fixtures::script_text;

/// The binary under test, blind to the caller's `MIGRATE_*` settings (a
/// developer's `MIGRATE_REQUIRE_EXISTING_LEDGER` or `MIGRATE_FRESH_INSTALL`
/// would change what a missing ledger does).
pub fn migrate() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_migrate"));
    cmd.env_remove("MIGRATE_LEDGER")
        .env_remove("ONLY")
        .env_remove("MIGRATE_REQUIRE_EXISTING_LEDGER")
        .env_remove("MIGRATE_FRESH_INSTALL")
        .env("MIGRATE_LOG", "error");
    cmd
}

/// Runs `migrate ARGS --output json` against the API server `kubeconfig`
/// names, on a blocking thread so that an in-process test API server on
/// the test's runtime keeps answering; (exit code, parsed stdout, stderr).
pub fn json_on_cluster(
    kubeconfig: &Path,
    args: &[&str],
) -> impl std::future::Future<Output = (i32, serde_json::Value, String)> + use<> {
    let mut cmd = migrate();
    cmd.args(args)
        .args(["--output", "json"])
        .env("KUBECONFIG", kubeconfig)
        .env_remove("KUBERNETES_SERVICE_HOST");
    async move {
        let out = tokio::task::spawn_blocking(move || cmd.output().unwrap())
            .await
            .unwrap();
        parse(out)
    }
}

/// Runs `migrate ARGS --output json`, killing it after `limit`: a command
/// that hangs fails the test instead of hanging it.
pub fn json_within(limit: std::time::Duration, args: &[&str]) -> (i32, serde_json::Value, String) {
    output_within(migrate().args(args).args(["--output", "json"]), limit)
}

/// Runs `cmd` (a `migrate ... --output json`), killing it after `limit`: a
/// command that hangs fails the test instead of hanging it.
pub fn output_within(
    cmd: &mut Command,
    limit: std::time::Duration,
) -> (i32, serde_json::Value, String) {
    let mut child = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > limit {
            child.kill().unwrap();
            let _ = child.wait();
            panic!("{cmd:?} still running after {limit:?}");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    parse(child.wait_with_output().unwrap())
}

/// Runs `migrate ARGS --output json` and returns (exit code, parsed stdout).
pub fn json(args: &[&str]) -> (i32, serde_json::Value, String) {
    let out = migrate()
        .args(args)
        .args(["--output", "json"])
        .output()
        .unwrap();
    parse(out)
}

/// `(rule, line)` of every standing finding of a `migrate lint` document
/// (line 0 for a finding of no line).
pub fn placed(doc: &serde_json::Value) -> Vec<(String, u64)> {
    doc["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["rule"].as_str().unwrap().to_owned(),
                f["line"].as_u64().unwrap_or(0),
            )
        })
        .collect()
}

/// The subcommands `migrate --help` lists (`help` left out).
pub fn subcommands<C: FromIterator<String>>() -> C {
    let (_, top, _) = text(&["--help"]);
    top.split("Commands:")
        .nth(1)
        .unwrap()
        .split("Options:")
        .next()
        .unwrap()
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(String::from)
        .collect()
}

/// The long flags of one `--help` text: the first `--flag` of each option
/// line.
pub fn help_flags<C: FromIterator<String>>(help: &str) -> C {
    help.lines()
        .map(str::trim_start)
        .filter(|l| l.starts_with('-'))
        .filter_map(|l| l.split_whitespace().find(|w| w.starts_with("--")))
        .map(|w| {
            w.trim_end_matches(',')
                .split(['=', '[', '<'])
                .next()
                .unwrap()
                .to_owned()
        })
        .collect()
}

/// Runs `migrate ARGS` in text mode and returns (exit code, stdout,
/// stderr).
pub fn text(args: &[&str]) -> (i32, String, String) {
    let out = migrate().args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Runs `migrate COMMAND TREE --ledger LEDGER EXTRA... --output json`: the
/// shape of `plan`, `run`, `verify` and `seed-fresh` against one ledger.
pub fn on_ledger(
    command: &str,
    tree: &Path,
    ledger: &str,
    extra: &[&str],
) -> (i32, serde_json::Value, String) {
    let tree = tree.to_str().unwrap();
    let mut args = vec![command, tree, "--ledger", ledger];
    args.extend_from_slice(extra);
    json(&args)
}

/// Runs `migrate manifest --repo REPO --path PATH EXTRA... --output json`.
pub fn manifest_of(repo: &Path, path: &str, extra: &[&str]) -> (i32, serde_json::Value, String) {
    let mut args = vec!["manifest", "--repo", repo.to_str().unwrap(), "--path", path];
    args.extend_from_slice(extra);
    json(&args)
}

/// The `--ledger` spec of a file ledger at `path`.
pub fn file_spec(path: &Path) -> String {
    format!("file:{}", path.display())
}

/// Runs `cmd` with `stdin` written to its standard input, collecting its
/// output.
pub fn output_with_stdin(cmd: &mut Command, stdin: &str) -> Output {
    use std::io::Write;
    let mut child = cmd
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // A program may end before reading its input (a refused flag): its
    // output says why, so a closed pipe is not the test's failure.
    match child.stdin.take().unwrap().write_all(stdin.as_bytes()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
        written => written.unwrap(),
    }
    child.wait_with_output().unwrap()
}

/// Splits a finished `migrate` into (exit code, parsed stdout, stderr),
/// panicking when stdout is not one JSON document.
pub fn parse(out: Output) -> (i32, serde_json::Value, String) {
    let code = out.status.code().unwrap_or(-1);
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    let value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}\nstderr: {stderr}"));
    (code, value, stderr)
}

/// The strings of the JSON array `list`.
pub fn strings(list: &serde_json::Value) -> Vec<&str> {
    list.as_array()
        .unwrap_or_else(|| panic!("not an array: {list}"))
        .iter()
        .map(|v| v.as_str().unwrap_or_else(|| panic!("not a string: {v}")))
        .collect()
}

/// The string field `key` of every object in the JSON array `list`.
pub fn fields<'a>(list: &'a serde_json::Value, key: &str) -> Vec<&'a str> {
    list.as_array()
        .unwrap_or_else(|| panic!("not an array: {list}"))
        .iter()
        .map(|v| v[key].as_str().unwrap_or_else(|| panic!("no {key}: {v}")))
        .collect()
}

/// The object whose `slug` is `slug` in the JSON array `list` (a report's
/// results, a status document's entries).
pub fn by_slug<'a>(list: &'a serde_json::Value, slug: &str) -> Option<&'a serde_json::Value> {
    list.as_array()
        .unwrap_or_else(|| panic!("not an array: {list}"))
        .iter()
        .find(|v| v["slug"] == slug)
}

/// The string fields `a` and `b` of every object in the JSON array
/// `list`, as owned pairs (`("slug", "outcome")` of a report's results).
pub fn field_pairs(list: &serde_json::Value, a: &str, b: &str) -> Vec<(String, String)> {
    let field = |v: &serde_json::Value, key: &str| {
        v[key]
            .as_str()
            .unwrap_or_else(|| panic!("no {key}: {v}"))
            .to_owned()
    };
    list.as_array()
        .unwrap_or_else(|| panic!("not an array: {list}"))
        .iter()
        .map(|v| (field(v, a), field(v, b)))
        .collect()
}

/// Asserts that the string fields `a` and `b` of the objects of the JSON
/// array `list` are `expected`, in order (see [`field_pairs`]).
pub fn assert_field_pairs(list: &serde_json::Value, a: &str, b: &str, expected: &[(&str, &str)]) {
    let expected: Vec<(String, String)> = expected
        .iter()
        .map(|(x, y)| (x.to_string(), y.to_string()))
        .collect();
    assert_eq!(field_pairs(list, a, b), expected, "{list}");
}

/// Asserts that the first problem a failed command's document names
/// mentions `needle`.
pub fn assert_first_problem(doc: &serde_json::Value, needle: &str) {
    let first = doc["problems"][0]
        .as_str()
        .unwrap_or_else(|| panic!("no problems listed: {doc}"));
    assert!(first.contains(needle), "{doc}");
}

/// Asserts that `text` contains every one of `needles`.
pub fn assert_contains_all(text: &str, needles: &[&str]) {
    for needle in needles {
        assert!(text.contains(needle), "{needle:?} in {text}");
    }
}

/// Runs `git -C DIR ARGS` as a throwaway identity without signing and
/// returns its stdout, panicking with its stderr unless it succeeds.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@example.invalid",
            "-c",
            "commit.gpgsign=false",
            "-c",
            "tag.gpgsign=false",
        ])
        .args(args)
        .output()
        .unwrap();
    assert_success(&out, &format!("git {args:?}"))
}

/// A scratch git repository with a `migrations/` tree.
pub struct Repo {
    pub dir: tempfile::TempDir,
}

impl Repo {
    pub fn new() -> Self {
        let repo = Repo {
            dir: tempfile::tempdir().unwrap(),
        };
        repo.git(&["init", "--quiet", "-b", "main"]);
        std::fs::create_dir_all(repo.tree().join("pre-apply")).unwrap();
        std::fs::create_dir_all(repo.tree().join("background")).unwrap();
        std::fs::write(repo.tree().join("pre-apply/.gitkeep"), "").unwrap();
        std::fs::write(repo.tree().join("background/.gitkeep"), "").unwrap();
        repo
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn tree(&self) -> PathBuf {
        self.dir.path().join("migrations")
    }

    pub fn git(&self, args: &[&str]) -> String {
        git(self.dir.path(), args)
    }

    /// [`on_ledger`] on this repository's `migrations/` tree.
    pub fn on_ledger(
        &self,
        command: &str,
        ledger: &str,
        extra: &[&str],
    ) -> (i32, serde_json::Value, String) {
        on_ledger(command, &self.tree(), ledger, extra)
    }

    /// [`Self::on_ledger`], which must exit 0: its JSON document.
    pub fn succeeds(&self, command: &str, ledger: &str, extra: &[&str]) -> serde_json::Value {
        let (code, doc, err) = self.on_ledger(command, ledger, extra);
        assert_eq!(code, 0, "{command}: {doc}\n{err}");
        doc
    }

    /// Writes `migrations/<tier>/<slug>` with a header.
    pub fn add(&self, tier: &str, slug: &str, body: &str) {
        self.add_requiring(tier, slug, &[], body);
    }

    pub fn add_requiring(&self, tier: &str, slug: &str, requires: &[&str], body: &str) {
        std::fs::write(
            self.tree().join(tier).join(slug),
            script_text(tier, "abort", requires, body),
        )
        .unwrap();
    }

    pub fn remove(&self, tier: &str, slug: &str) {
        std::fs::remove_file(self.tree().join(tier).join(slug)).unwrap();
    }

    pub fn write(&self, rel: &str, text: &str) {
        let p = self.tree().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    pub fn commit(&self, message: &str) {
        self.git(&["add", "-A"]);
        self.git(&["commit", "--quiet", "--allow-empty", "-m", message]);
    }

    pub fn tag(&self, tag: &str) {
        self.git(&["tag", tag]);
    }

    /// Commits everything as release `tag` and tags it.
    pub fn release(&self, tag: &str) {
        self.commit(tag);
        self.tag(tag);
    }

    /// Adds each `(tier, slug)` with a body echoing its slug, then
    /// [`Self::release`]s `tag`.
    pub fn release_with(&self, tag: &str, scripts: &[(&str, &str)]) {
        for (tier, slug) in scripts {
            self.add(tier, slug, &format!("echo {slug}"));
        }
        self.release(tag);
    }

    /// A repository with one [`Self::release_with`] per `(tag, scripts)`,
    /// in order, and its manifest generated.
    pub fn released(releases: &[(&str, &[(&str, &str)])]) -> Self {
        let repo = Repo::new();
        for (tag, scripts) in releases {
            repo.release_with(tag, scripts);
        }
        let (code, _, err) = repo.manifest();
        assert_eq!(code, 0, "{err}");
        repo
    }

    /// A repository whose first release `tag` holds pre-apply `a`, with a
    /// branch `branch` from there on which `work` was done; back on main.
    pub fn branched(tag: &str, branch: &str, work: impl FnOnce(&Repo)) -> Self {
        let repo = Repo::new();
        repo.release_with(tag, &[("pre-apply", "a")]);
        repo.branch(branch);
        work(&repo);
        repo.checkout("main");
        repo
    }

    /// Creates branch `name` at HEAD and switches to it.
    pub fn branch(&self, name: &str) {
        self.git(&["checkout", "--quiet", "-b", name]);
    }

    /// Switches to the existing branch `name`.
    pub fn checkout(&self, name: &str) {
        self.git(&["checkout", "--quiet", name]);
    }

    /// Merges `branch` into the current branch.
    pub fn merge(&self, branch: &str) {
        self.git(&["merge", "--quiet", "--no-edit", branch]);
    }

    /// The demo tree (`examples/demo`) with the release history `examples/run-demo.sh` gives
    /// it: v1.7.0 ships the legacy scripts and the first release's, v1.8.0 the whole tree;
    /// `order.d/` is generated from those tags.
    pub fn demo() -> Self {
        let demo = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../demo"));
        let repo = Repo::new();
        let copy = |rel: &str| {
            let to = repo.tree().join(rel);
            std::fs::create_dir_all(to.parent().unwrap()).unwrap();
            std::fs::copy(demo.join(rel), to).unwrap();
        };
        for rel in [
            "lib/kube.sh",
            "lib/etcd-crds.yaml",
            "legacy-map",
            "tests/lib.sh",
            "tests/fake-kubectl",
            "pre-apply/flux-crds-relabel",
            "pre-apply/tenant-namespace-labels",
            "pre-apply/seaweedfs-bucket-owner",
            "pre-apply/etcd-crds-precreate",
            "pre-apply/drop-legacy-monitoring",
        ] {
            copy(rel);
        }
        repo.commit("release 1.7");
        repo.tag("v1.7.0");
        for dir in ["pre-apply", "background", "lib", "tests"] {
            for entry in std::fs::read_dir(demo.join(dir)).unwrap() {
                copy(&format!(
                    "{dir}/{}",
                    entry.unwrap().file_name().to_str().unwrap()
                ));
            }
        }
        for file in ["legacy-map", "revoked"] {
            copy(file);
        }
        repo.commit("release 1.8");
        repo.tag("v1.8.0");
        let (code, doc, err) = repo.manifest();
        assert_eq!(code, 0, "{doc} {err}");
        repo
    }

    /// Generates the manifest into `migrations/order.d` and returns the JSON document.
    pub fn manifest(&self) -> (i32, serde_json::Value, String) {
        let out_dir = self.tree().join("order.d");
        self.manifest_at("migrations", &["--out", out_dir.to_str().unwrap()])
    }

    /// Generates the manifest, asserts that it succeeds with `expected`
    /// as its batches (see [`Self::batches`]), and returns them.
    pub fn assert_batches(&self, expected: &[(&str, &[&str])]) -> Vec<(String, Vec<String>)> {
        let (code, doc, err) = self.manifest();
        assert_eq!(code, 0, "{err}");
        let got = Self::batches(&doc);
        assert_eq!(got, batches(expected));
        got
    }

    /// [`Self::manifest_at`], which must succeed: its document.
    pub fn manifest_ok(&self, path: &str, extra: &[&str]) -> serde_json::Value {
        let (code, doc, err) = self.manifest_at(path, extra);
        assert_eq!(code, 0, "manifest {path} {extra:?}: {doc}\n{err}");
        doc
    }

    /// [`manifest_of`] this repository.
    pub fn manifest_at(&self, path: &str, extra: &[&str]) -> (i32, serde_json::Value, String) {
        manifest_of(self.path(), path, extra)
    }

    /// The manifest as `[(batch, [lines])]`, from the JSON document.
    pub fn batches(doc: &serde_json::Value) -> Vec<(String, Vec<String>)> {
        doc["batches"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| {
                let lines = b["entries"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|e| {
                        let slug = e["slug"].as_str().unwrap().to_owned();
                        if e["retired"].as_bool().unwrap() {
                            format!("{slug} retired")
                        } else {
                            slug
                        }
                    })
                    .collect();
                (b["name"].as_str().unwrap().to_owned(), lines)
            })
            .collect()
    }
}

pub fn batches(list: &[(&str, &[&str])]) -> Vec<(String, Vec<String>)> {
    list.iter()
        .map(|(n, l)| (n.to_string(), l.iter().map(|s| s.to_string()).collect()))
        .collect()
}

/// Runs a future to completion on a fresh current-thread runtime.
pub fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(f)
}

/// The `--ledger` spec of a file ledger `ledger.json` in `dir` (not
/// created).
pub fn ledger_in(dir: &tempfile::TempDir) -> String {
    file_spec(&dir.path().join("ledger.json"))
}

/// Writes an existing but empty file ledger at `path` (an upgrade, not a
/// fresh install) and returns its `--ledger` spec.
pub fn empty_file_ledger(path: &Path) -> String {
    std::fs::write(path, r#"{"format":"migration-ledger/v1","ledger":{"revision":1,"data":{}},"lock":null,"lock_generation":0}"#)
        .unwrap();
    file_spec(path)
}

pub mod in_process;
pub mod numbered;
pub mod shells;
pub mod tripwire;

/// Writes `dir/kubeconfig` naming the API server at `url` (no credentials,
/// namespace `default`), for the `configmap:` and `crd:` ledgers.
pub fn kubeconfig_for(dir: &Path, url: &str) -> PathBuf {
    let path = dir.join("kubeconfig");
    let text = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: test\n  cluster:\n    server: {url}\nusers:\n- name: test\n  user: {{}}\ncontexts:\n- name: test\n  context:\n    cluster: test\n    user: test\n    namespace: default\ncurrent-context: test\n"
    );
    std::fs::write(&path, text).unwrap();
    path
}

/// Asserts that `out` exited 0, naming `what` with its stdout and stderr
/// otherwise; its stdout.
pub fn assert_success(out: &Output, what: &str) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{what}: {}\n{stdout}{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// Waits for `child` (its output piped): (exit code, stdout then stderr).
pub fn ended(child: std::process::Child) -> (Option<i32>, String) {
    let out = child.wait_with_output().unwrap();
    (
        out.status.code(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

/// Copies the directory `from` to `to`, recursively.
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// Writes each `(relative path, text)` below `dir`, creating the folders
/// it needs.
pub fn write_files(dir: &Path, files: &[(&str, &str)]) {
    for (rel, text) in files {
        let path = dir.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
}

/// The object of the JSON array `list` whose `key` is `value`, panicking
/// with the array when there is none.
pub fn find<'a>(list: &'a serde_json::Value, key: &str, value: &str) -> &'a serde_json::Value {
    list.as_array()
        .unwrap_or_else(|| panic!("not an array: {list}"))
        .iter()
        .find(|v| v[key] == value)
        .unwrap_or_else(|| panic!("no {key} {value:?} in {list:#}"))
}

/// A fresh directory with `migrate init NAME` done in it: the directory
/// (removed when dropped) and the tree.
pub fn initialised(name: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join(name);
    let (code, doc, err) = json(&["init", tree.to_str().unwrap()]);
    assert_eq!(code, 0, "migrate init: {doc}\n{err}");
    (dir, tree)
}

/// Makes a FIFO at `path` (with the `mkfifo` command: no `fs` feature of
/// nix needed for one test helper).
pub fn mkfifo(path: &Path) {
    let made = Command::new("mkfifo").arg(path).status();
    assert!(made.unwrap().success(), "mkfifo {}", path.display());
}

/// Asserts that a failed command's document is the error `kind` and that
/// its first problem mentions `needle`.
pub fn assert_error(doc: &serde_json::Value, kind: &str, needle: &str) {
    assert_eq!(doc["error"], kind, "{doc}");
    assert_first_problem(doc, needle);
}

/// Asserts that the manifest document `doc` has `expected` as its batches
/// (see [`Repo::batches`]).
pub fn assert_batches_of(doc: &serde_json::Value, expected: &[(&str, &[&str])]) {
    assert_eq!(Repo::batches(doc), batches(expected), "{doc}");
}

/// Every process in /proc: its pid and what its `stat` says after the
/// command name (`state ppid pgrp ...`; the name may hold spaces, so it is
/// cut at the last `)`).
pub fn processes() -> Vec<(i32, String)> {
    let entries = std::fs::read_dir("/proc").unwrap().flatten();
    entries
        .filter_map(|entry| {
            let pid = entry.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(entry.path().join("stat")).ok()?;
            let (_, rest) = stat.rsplit_once(')')?;
            Some((pid, rest.trim_start().to_owned()))
        })
        .collect()
}
