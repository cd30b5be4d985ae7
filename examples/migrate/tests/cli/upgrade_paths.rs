//! `examples/migrate/scripts/upgrade-paths.sh`: every upgrade path from each release tag of a
//! converted tree, adopted as a cluster installed at that tag would be and run through the
//! engine against a fake cluster, is reported one line per tag; a path whose script fails
//! names its tag and slug and fails the whole.
//!
//! The fixture is a numbered history of our own: v0.1.0 (slot 1, no known target: its runner
//! predates the version ConfigMap), v1.0.0 (1, 2; target 3), v1.1.0 (3, which labels a
//! namespace; target 4), the release branch's v1.1.1 (slot 4 as `4-backport`; target 5), main's
//! v1.2.0-rc.1, v1.2.0 and v1.2.1 (slot 4 as `4-main`, and 5; target 6). Main's line is
//! converted.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::numbered::{self, Released, numbered};
use crate::common::{self, Repo, shells};

/// The script under test.
fn upgrade_paths() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/upgrade-paths.sh")
}

/// Main's line converted with `--rewrite` and the release targets, committed, with its
/// manifest, beside the fake cluster's directory, `fake`.
type Platform = Released;

fn platform() -> Platform {
    let repo = Repo::new();
    numbered::helpers(&repo);
    numbered::write(&repo, "1", &numbered(1, "1", ""));
    repo.release("v0.1.0");
    numbered::write(&repo, "2", &numbered(2, "2", ""));
    repo.release("v1.0.0");
    numbered::write(
        &repo,
        "3",
        &numbered(
            3,
            "3",
            "kubectl label namespace tenant-a team=a --overwrite\n",
        ),
    );
    repo.release("v1.1.0");
    repo.branch("release-1.1");
    numbered::write(&repo, "4", &numbered(4, "4-backport", ""));
    repo.release("v1.1.1");
    repo.checkout("main");
    numbered::write(&repo, "4", &numbered(4, "4-main", ""));
    numbered::write(&repo, "5", &numbered(5, "5", ""));
    repo.release("v1.2.0-rc.1");
    repo.tag("v1.2.0");
    // A patch release that added no migration: the same target.
    repo.tag("v1.2.1");

    let dir = tempfile::tempdir().unwrap();
    // v0.1.0 is named by no line: the runner there kept no version.
    let targets = dir.path().join("targets");
    std::fs::write(
        &targets,
        "v1.0.0 3\nv1.1.0 4\nv1.1.1 5\nv1.2.0-rc.1 6\nv1.2.0 6\nv1.2.1 6\n",
    )
    .unwrap();
    let flags = ["--rewrite", "--release-targets", targets.to_str().unwrap()];
    let platform = Released::new(repo, dir, &flags);

    // The fake cluster: logs each call; FAIL=forbidden answers with kubectl's Forbidden text.
    let fake = platform.file("fake");
    common::write_files(
        &fake,
        &[(
            "kubectl",
            "#!/bin/sh\necho \"$*\" >>\"$CALLS\"\n\
             if [ \"${FAIL:-}\" = forbidden ]; then\n\
             echo 'Error from server (Forbidden): namespaces \"tenant-a\" is forbidden' >&2\n\
             exit 1\nfi\necho 'namespace/tenant-a labeled'\n",
        )],
    );
    std::fs::set_permissions(
        fake.join("kubectl"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    platform
}

/// What one run of the harness did.
struct Measured {
    code: i32,
    stdout: String,
    stderr: String,
    /// The contents the scripts ran, in order, over every path (each script appends its id).
    ran: Vec<String>,
    /// The fake cluster's calls.
    calls: String,
}

/// `shell upgrade-paths.sh --migrate BIN --tree TREE --fake FAKE ARGS...` with `FAIL=fail`.
fn measure(shell: &shells::Shell, p: &Platform, args: &[&str], fail: &str) -> Measured {
    let (log, calls) = (p.log(), p.file("calls"));
    for f in [&log, &calls] {
        std::fs::write(f, "").unwrap();
    }
    let mut words = shell.shebang.split_whitespace();
    let out = Command::new(words.next().unwrap())
        .args(words)
        .arg(upgrade_paths())
        .args(["--migrate", env!("CARGO_BIN_EXE_migrate")])
        .arg("--tree")
        .arg(p.tree())
        .arg("--fake")
        .arg(p.file("fake"))
        .args(args)
        .env("FIXTURE_LOG", &log)
        .env("CALLS", &calls)
        .env("FAIL", fail)
        .env("MIGRATE_LOG", "error")
        .output()
        .unwrap();
    let read = |f: &Path| std::fs::read_to_string(f).unwrap();
    Measured {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        ran: read(&log).lines().map(str::to_owned).collect(),
        calls: read(&calls),
    }
}

/// The line of `tag` in the harness's output.
fn line_of<'a>(m: &'a Measured, tag: &str) -> &'a str {
    m.stdout
        .lines()
        .find(|l| l.starts_with(&format!("{tag} ")))
        .unwrap_or_else(|| panic!("no line for {tag}: {}\n{}", m.stdout, m.stderr))
}

#[test]
fn every_path_from_each_release_tag_is_adopted_and_runs_the_rest_of_the_tree() {
    let p = platform();
    for shell in shells::all() {
        let m = measure(&shell, &p, &[], "");
        let context = format!("{}: {}\n{}", shell.name, m.stdout, m.stderr);
        assert_eq!(m.code, 0, "{context}");
        common::assert_contains_all(
            line_of(&m, "v0.1.0"),
            &["no target", "predates the version ConfigMap"],
        );
        // Each tag's line: what adoption recorded, what ran, the outcome.
        for (tag, expected) in [
            (
                "v1.0.0",
                "v1.0.0 target=3 adopted: 2 legacy (0 from the history); ran 3; ok",
            ),
            (
                "v1.1.0",
                "v1.1.0 target=4 adopted: 3 legacy (0 from the history); ran 2; ok",
            ),
            // The history says the backport ran at 4: main's content runs once.
            (
                "v1.1.1",
                "v1.1.1 target=5 adopted: 4 legacy (1 from the history); ran 2; ok",
            ),
            // A pre-release answers nothing unless clusters ran them: main's content runs again.
            (
                "v1.2.0-rc.1",
                "v1.2.0-rc.1 target=6 adopted: 4 legacy, 1 not-yet (0 from the history); ran 1; ok",
            ),
            (
                "v1.2.0",
                "v1.2.0 target=6 adopted: 5 legacy (1 from the history); ran 0; ok",
            ),
            (
                "v1.2.1",
                "v1.2.1 target=6 adopted: 5 legacy (1 from the history); ran 0; ok",
            ),
        ] {
            assert!(line_of(&m, tag).starts_with(expected), "{tag}: {context}");
        }
        assert_eq!(
            m.ran,
            ["3", "4-main", "5", "4-main", "5", "4-main", "5", "4-main"],
            "the scripts each path ran, in order: {context}"
        );
        assert_eq!(
            m.calls, "label namespace tenant-a team=a --overwrite\n",
            "only the path from v1.0.0 runs slot 3: {context}"
        );
        common::assert_contains_all(
            m.stdout.lines().last().unwrap(),
            &[
                "paths: 7 tags, 4 distinct targets",
                "ran 6 (0 skipped",
                "ok 6, failed 0, refused 0, no target 1",
            ],
        );
    }
}

#[test]
fn a_script_failing_on_the_fake_fails_the_whole_naming_the_tag_and_the_slug() {
    let p = platform();
    let m = measure(&shells::dash(), &p, &[], "forbidden");
    let context = format!("{}\n{}", m.stdout, m.stderr);
    assert_eq!(m.code, 1, "{context}");
    common::assert_contains_all(line_of(&m, "v1.0.0"), &["ran 1; failed 3 (", "exit 4"]);
    // The paths that start past slot 3 still run.
    for tag in ["v1.1.0", "v1.1.1", "v1.2.0-rc.1", "v1.2.0", "v1.2.1"] {
        common::assert_contains_all(line_of(&m, tag), &["; ok"]);
    }
    common::assert_contains_all(&m.stdout, &["ok 5, failed 1, refused 0, no target 1"]);
    common::assert_contains_all(&m.stderr, &["not every path ran: v1.0.0"]);
}

#[test]
fn one_path_per_target_and_the_tags_asked_for_narrow_the_run_and_an_unknown_tag_is_refused() {
    let p = platform();
    let m = measure(&shells::dash(), &p, &["v1.1.0", "v1.2.0"], "");
    assert_eq!(m.code, 0, "{}\n{}", m.stdout, m.stderr);
    assert_eq!(m.stdout.lines().count(), 3, "{}", m.stdout);
    assert_eq!(m.ran, ["4-main", "5"]);

    // v1.2.0 and v1.2.1 have v1.2.0-rc.1's target: the first tag of each target runs, and
    // with --count-prereleases its history answers slot 4 (nothing runs again there).
    let flags = ["--one-per-target", "--count-prereleases"];
    let m = measure(&shells::dash(), &p, &flags, "");
    assert_eq!(m.code, 0, "{}\n{}", m.stdout, m.stderr);
    assert!(!m.stdout.contains("v1.2.0 "), "{}", m.stdout);
    assert!(!m.stdout.contains("v1.2.1 "), "{}", m.stdout);
    common::assert_contains_all(&m.stdout, &["7 tags, 4 distinct targets; ran 4 (2 skipped"]);
    let rc = "v1.2.0-rc.1 target=6 adopted: 5 legacy (1 from the history); ran 0; ok";
    assert!(line_of(&m, "v1.2.0-rc.1").starts_with(rc), "{}", m.stdout);
    assert_eq!(m.ran, ["3", "4-main", "5", "4-main", "5", "4-main", "5"]);

    let m = measure(&shells::dash(), &p, &["v1.9.0"], "");
    assert_eq!(m.code, 2, "{}", m.stderr);
    common::assert_contains_all(&m.stderr, &["v1.9.0", "legacy-releases"]);
    assert!(m.ran.is_empty() && m.stdout.is_empty());
}

#[test]
fn a_tree_where_no_slot_diverged_takes_its_targets_from_the_file_convert_was_given() {
    // No diverged slot: convert writes no legacy-releases.
    let repo = Repo::new();
    numbered::helpers(&repo);
    numbered::write(&repo, "1", &numbered(1, "1", ""));
    repo.release("v1.0.0");
    numbered::write(&repo, "2", &numbered(2, "2", ""));
    repo.release("v1.1.0");
    let dir = tempfile::tempdir().unwrap();
    let targets = dir.path().join("targets");
    std::fs::write(&targets, "v1.0.0 2\nv1.1.0 3\n").unwrap();
    let flags = ["--rewrite", "--release-targets", targets.to_str().unwrap()];
    let p = Released::new(repo, dir, &flags);
    assert!(!p.tree().join("legacy-releases").exists());
    std::fs::create_dir_all(p.file("fake")).unwrap();

    let m = measure(&shells::dash(), &p, &[], "");
    assert_eq!(m.code, 2, "{}", m.stderr);
    common::assert_contains_all(&m.stderr, &["no legacy-releases", "--release-targets"]);
    assert!(m.ran.is_empty());

    let m = measure(
        &shells::dash(),
        &p,
        &["--release-targets", targets.to_str().unwrap()],
        "",
    );
    assert_eq!(m.code, 0, "{}\n{}", m.stdout, m.stderr);
    assert!(
        line_of(&m, "v1.0.0")
            .starts_with("v1.0.0 target=2 adopted: 1 legacy (0 from the history); ran 1; ok"),
        "{}",
        m.stdout
    );
    assert!(line_of(&m, "v1.1.0").contains("ran 0; ok"), "{}", m.stdout);
    assert_eq!(m.ran, ["2"]);

    // A targets file naming no target would run nothing and pass: refused.
    std::fs::write(&targets, "# no targets known\n").unwrap();
    let m = measure(
        &shells::dash(),
        &p,
        &["--release-targets", targets.to_str().unwrap()],
        "",
    );
    assert_eq!(m.code, 2, "{}", m.stderr);
    common::assert_contains_all(&m.stderr, &["no tag of", "has a target"]);
}
