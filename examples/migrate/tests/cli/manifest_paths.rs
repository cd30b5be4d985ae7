//! The migrations tree moved between tags (issue 13): a release tag whose
//! tree lacks the `--path` would silently contribute nothing (a smaller
//! manifest, retired lines lost, slugs in later batches). Generation
//! refuses, naming the tags, unless the path history is given (`--path`
//! repeated: each tag reads the one path it has) or the tags are declared
//! to predate the tree (`--tree-since TAG`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use common::Repo;

/// v1.0.0 has the tree at `old/migrations` (script `a`); v1.1.0 moved it
/// to `migrations` and added `b`.
fn moved() -> Repo {
    moved_tagged("v")
}

/// [`moved`], its tags `PREFIX1.0.0` and `PREFIX1.1.0`.
pub(crate) fn moved_tagged(prefix: &str) -> Repo {
    let repo = Repo::new();
    repo.add("pre-apply", "a", "echo a");
    repo.commit("tree at migrations");
    std::fs::create_dir_all(repo.path().join("old")).unwrap();
    repo.git(&["mv", "migrations", "old/migrations"]);
    repo.release(&format!("{prefix}1.0.0"));
    repo.git(&["mv", "old/migrations", "migrations"]);
    repo.add("pre-apply", "b", "echo b");
    repo.release(&format!("{prefix}1.1.0"));
    repo
}

fn manifest(repo: &Repo, extra: &[&str]) -> (i32, serde_json::Value, String) {
    repo.manifest_at("migrations", extra)
}

#[test]
fn a_tag_without_the_tree_at_path_is_refused_naming_the_tag() {
    let repo = moved();
    let (code, doc, err) = manifest(&repo, &[]);
    assert_eq!(code, 2, "{doc}\n{err}");
    let text = doc["problems"].to_string();
    assert!(
        text.contains("v1.0.0") && text.contains("no migrations tree at migrations"),
        "{text}"
    );
    assert!(!text.contains("v1.1.0"), "{text}");
}

#[test]
fn the_old_path_given_with_a_second_path_follows_the_move() {
    let repo = moved();
    let (code, doc, err) = manifest(&repo, &["--path", "old/migrations"]);
    assert_eq!(code, 0, "{doc}\n{err}");
    common::assert_batches_of(&doc, &[("00001-v1.0.0", &["a"]), ("00002-v1.1.0", &["b"])]);
}

#[test]
fn tags_declared_to_predate_the_tree_may_lack_it() {
    let repo = Repo::new();
    std::fs::remove_dir_all(repo.tree()).unwrap();
    std::fs::write(repo.path().join("README"), "before the engine\n").unwrap();
    repo.release("v0.9.0");
    std::fs::create_dir_all(repo.tree().join("pre-apply")).unwrap();
    std::fs::create_dir_all(repo.tree().join("background")).unwrap();
    std::fs::write(repo.tree().join("background/.gitkeep"), "").unwrap();
    repo.add("pre-apply", "first", "echo first");
    repo.release("v1.0.0");
    let (code, doc, _) = manifest(&repo, &[]);
    assert_eq!(code, 2, "v0.9.0 lacks the tree: {doc}");
    let (code, doc, err) = manifest(&repo, &["--tree-since", "v1.0.0"]);
    assert_eq!(code, 0, "{doc}\n{err}");
    common::assert_batches_of(&doc, &[("00002-v1.0.0", &["first"])]);
}
