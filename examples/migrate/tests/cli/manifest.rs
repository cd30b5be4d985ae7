//! `migrate manifest` on real git repositories built by the test.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use common::{Repo, assert_first_problem, strings};

#[test]
fn tags_on_the_main_line_become_batches_and_new_work_is_untagged() {
    let repo = Repo::new();
    repo.release_with("v1.0.0", &[("pre-apply", "b"), ("pre-apply", "a")]);
    repo.add("background", "c", "echo c");
    repo.commit("1.1");
    repo.tag("v1.1.0-rc.1");
    repo.tag("v1.1.0");
    repo.add("pre-apply", "d", "echo d");
    repo.commit("work in progress");
    repo.assert_batches(&[
        ("00001-v1.0.0", &["a", "b"]),
        ("00002-v1.1.0-rc.1", &["c"]),
        ("99999-untagged", &["d"]),
    ]);
    let files: Vec<String> = std::fs::read_dir(repo.tree().join("order.d"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    assert_eq!(
        files,
        ["00001-v1.0.0", "00002-v1.1.0-rc.1", "99999-untagged"]
    );
    assert_eq!(
        std::fs::read_to_string(repo.tree().join("order.d/00001-v1.0.0")).unwrap(),
        "a\nb\n"
    );
}

#[test]
fn a_build_exactly_at_a_tag_has_no_untagged_batch_and_is_a_prefix_of_later_builds() {
    let repo = Repo::new();
    repo.release_with("v1.0.0", &[("pre-apply", "a")]);
    let at_tag = repo.assert_batches(&[("00001-v1.0.0", &["a"])]);
    repo.release_with("v1.1.0", &[("pre-apply", "b")]);
    let (_, later, _) = repo.manifest();
    assert_eq!(Repo::batches(&later)[..1], at_tag[..]);
}

#[test]
fn legacy_map_slugs_go_first_in_integer_order() {
    let repo = Repo::new();
    repo.write("legacy-map", "1 zeta\n2 alpha\n");
    let scripts = ["zeta", "alpha", "new"].map(|slug| ("pre-apply", slug));
    repo.release_with("v1.0.0", &scripts);
    repo.assert_batches(&[
        ("00000-legacy", &["zeta", "alpha"]),
        ("00001-v1.0.0", &["new"]),
    ]);
}

#[test]
fn a_backport_with_the_same_content_lands_in_each_lines_own_batch() {
    let repo = Repo::branched("v1.0.0", "release-1.0", |r| {
        r.release_with("v1.0.1", &[("pre-apply", "fix")]);
        r.assert_batches(&[("00001-v1.0.0", &["a"]), ("00002-v1.0.1", &["fix"])]);
    });
    std::fs::remove_dir_all(repo.tree().join("order.d")).unwrap();
    repo.release_with("v1.1.0", &[("pre-apply", "fix"), ("pre-apply", "c")]);
    repo.assert_batches(&[("00001-v1.0.0", &["a"]), ("00002-v1.1.0", &["c", "fix"])]);
}

#[test]
fn a_backport_with_different_content_under_the_same_slug_fails_naming_both_tags() {
    let repo = Repo::branched("v1.5.0", "release-1.5", |r| {
        r.add("pre-apply", "45", "echo one thing");
        r.release("v1.5.1");
    });
    repo.add("pre-apply", "45", "echo something else");
    repo.release("v1.6.0");
    let (code, doc, _) = repo.manifest();
    assert_eq!(code, 2);
    let problems = doc["problems"].as_array().unwrap();
    assert_eq!(problems.len(), 1, "{problems:?}");
    let text = problems[0].as_str().unwrap();
    assert!(
        text.starts_with("'45' has different content in tag v1.6.0"),
        "{text}"
    );
    assert!(text.contains("and tag v1.5.1"), "{text}");
    assert!(
        !repo.tree().join("order.d").exists(),
        "a failed generation writes nothing"
    );
}

#[test]
fn editing_a_shipped_script_fails_naming_the_slug_the_tag_and_the_working_tree() {
    let repo = Repo::new();
    repo.release_with("v1.0.0", &[("pre-apply", "a"), ("pre-apply", "b")]);
    repo.add("pre-apply", "a", "echo a, improved");
    repo.add("pre-apply", "b", "echo b, improved");
    let (code, doc, _) = repo.manifest();
    assert_eq!(code, 2);
    let problems = strings(&doc["problems"]);
    assert_eq!(
        problems.len(),
        2,
        "every offending slug is named: {problems:?}"
    );
    assert!(problems[0].starts_with("'a' has different content in tag v1.0.0"));
    assert!(problems[0].contains("the working tree"));
    assert!(problems[1].starts_with("'b' "));
}

#[test]
fn a_deleted_shipped_script_stays_as_a_retired_line() {
    let repo = Repo::new();
    repo.release_with("v1.0.0", &[("pre-apply", "a"), ("pre-apply", "old")]);
    repo.remove("pre-apply", "old");
    repo.release("v1.1.0");
    repo.assert_batches(&[("00001-v1.0.0", &["a", "old retired"])]);
}

#[test]
fn a_late_merged_old_migration_lands_at_the_end_never_in_the_middle() {
    // A pull request branched after v1.0.0, written long ago, alphabetically
    // early.
    let repo = Repo::branched("v1.0.0", "old-pr", |r| {
        r.add("pre-apply", "aaa-old-pr", "echo old");
        r.commit("old pr");
    });
    repo.release_with("v1.1.0", &[("pre-apply", "b")]);
    let (_, before, _) = repo.manifest();
    std::fs::remove_dir_all(repo.tree().join("order.d")).unwrap();
    repo.merge("old-pr");
    let after = repo.assert_batches(&[
        ("00001-v1.0.0", &["a"]),
        ("00002-v1.1.0", &["b"]),
        ("99999-untagged", &["aaa-old-pr"]),
    ]);
    assert_eq!(after[..2], Repo::batches(&before)[..]);
}

#[test]
fn requires_reorders_within_a_batch() {
    let repo = Repo::new();
    repo.add_requiring("pre-apply", "a-uses-z", &["z-base"], "echo a");
    repo.add("pre-apply", "z-base", "echo z");
    repo.release_with("v1.0.0", &[("pre-apply", "m")]);
    repo.assert_batches(&[("00001-v1.0.0", &["m", "z-base", "a-uses-z"])]);
}

#[test]
fn a_shallow_clone_is_refused() {
    let repo = Repo::new();
    repo.release_with("v1.0.0", &[("pre-apply", "a")]);
    repo.release_with("v1.1.0", &[("pre-apply", "b")]);
    let clone = tempfile::tempdir().unwrap();
    let url = format!("file://{}", repo.path().display());
    let status = std::process::Command::new("git")
        .args(["clone", "--quiet", "--depth", "1", &url])
        .arg(clone.path().join("c"))
        .status()
        .unwrap();
    assert!(status.success());
    let (code, doc, _) = common::manifest_of(&clone.path().join("c"), "migrations", &[]);
    assert_eq!(code, 2);
    assert_first_problem(&doc, "shallow clone");
}

#[test]
fn a_tag_that_matches_the_pattern_but_is_not_a_version_is_refused() {
    let repo = Repo::new();
    repo.release_with("v1.0.0", &[("pre-apply", "a")]);
    repo.release_with("very-important", &[("pre-apply", "b")]);
    let (code, doc, _) = repo.manifest();
    assert_eq!(code, 2);
    assert_first_problem(&doc, "\"very-important\"");
    // A narrower pattern leaves it out (a pattern that matched no tag at
    // all would be an error: tests/cli_fail_closed.rs).
    let _ = repo.manifest_ok("migrations", &["--tag-pattern", "v[0-9]*"]);
}

#[test]
fn without_out_the_files_are_printed() {
    let repo = Repo::new();
    repo.release_with("v1.0.0", &[("pre-apply", "a")]);
    let out = common::migrate()
        .args([
            "manifest",
            "--repo",
            repo.path().to_str().unwrap(),
            "--path",
            "migrations",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "==> 00001-v1.0.0 <==\na\n"
    );
}

#[test]
fn a_shipped_script_above_the_size_limit_is_refused_naming_its_object() {
    // A hostile or broken tag: its script is too large to be one, and is refused before it is
    // read whole, as the same file on disk would be.
    let repo = Repo::new();
    repo.add("pre-apply", "big", &"#".repeat(1_100_000));
    repo.release("v1.0.0");
    repo.remove("pre-apply", "big");
    repo.commit("retired");
    let (code, doc, err) = repo.manifest();
    assert_ne!(code, 0, "{doc}");
    let text = format!("{doc}{err}");
    common::assert_contains_all(&text, &["bytes, above the 1048576-byte script limit"]);
}

#[test]
fn a_repository_without_a_commit_is_told_to_commit_and_tag_not_given_gits_raw_words() {
    let dir = tempfile::tempdir().unwrap();
    common::git(dir.path(), &["init", "-q"]);
    assert_eq!(
        common::json(&["init", dir.path().join("m").to_str().unwrap()]).0,
        0
    );
    let (code, doc, _) = common::json(&[
        "manifest",
        "--repo",
        dir.path().to_str().unwrap(),
        "--path",
        "m",
    ]);
    assert_eq!(code, 2, "{doc:#}");
    assert_first_problem(&doc, "has no commit yet");
    assert!(
        !doc.to_string().contains("malformed object name"),
        "{doc:#}"
    );
}
