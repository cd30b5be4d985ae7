//! `migrate manifest --tag-pattern 'v*'` on tag histories as real
//! repositories have them: pre-release names that sort against their
//! ancestry, and release branches merged back (CONTRACT.md §4.1, the line
//! as a chain of ancestry).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use common::{Repo, strings};

/// The tags the manifest's report says it left off the line.
fn off_line(doc: &serde_json::Value) -> Vec<(String, String)> {
    common::field_pairs(&doc["off_line"], "tag", "against")
}

#[test]
fn pre_release_tags_that_sort_against_their_ancestry_are_left_off_the_line_and_the_manifest_is_generated()
 {
    let repo = Repo::new();
    repo.release_with("v0.30.0", &[("pre-apply", "a")]);
    // rc1 is the first candidate; the project then switched to rc.N, which
    // sorts before rc1 ("rc" < "rc1") though it was tagged after it.
    repo.release_with("v0.31.0-rc1", &[("pre-apply", "b")]);
    repo.release_with("v0.31.0-rc.2", &[("pre-apply", "c")]);
    repo.release_with("v0.31.0-rc.3", &[("pre-apply", "d")]);
    repo.tag("v0.31.0");
    let doc = repo.manifest_ok("migrations", &["--tag-pattern", "v*"]);
    common::assert_batches_of(
        &doc,
        &[
            ("00001-v0.30.0", &["a"]),
            ("00002-v0.31.0-rc1", &["b"]),
            ("00003-v0.31.0", &["c", "d"]),
        ],
    );
    assert_eq!(
        off_line(&doc),
        [
            ("v0.31.0-rc.2".to_owned(), "v0.31.0-rc1".to_owned()),
            ("v0.31.0-rc.3".to_owned(), "v0.31.0-rc1".to_owned()),
        ]
    );
}

#[test]
fn the_manifest_at_a_pre_release_left_off_the_line_is_an_order_prefix_of_the_final_releases() {
    let repo = Repo::new();
    repo.release_with("v0.30.0", &[("pre-apply", "a")]);
    repo.release_with("v0.31.0-rc1", &[("pre-apply", "b")]);
    repo.release_with("v0.31.0-rc.2", &[("pre-apply", "c")]);
    repo.checkout("v0.31.0-rc.2");
    let at_rc = repo.manifest_ok("migrations", &[]);
    repo.checkout("main");
    repo.release_with("v0.31.0", &[("pre-apply", "e")]);
    let later = repo.manifest_ok("migrations", &[]);
    let at_rc = Repo::batches(&at_rc);
    assert_eq!(
        at_rc,
        common::batches(&[
            ("00001-v0.30.0", &["a"]),
            ("00002-v0.31.0-rc1", &["b"]),
            ("99999-untagged", &["c"]),
        ])
    );
    assert_eq!(Repo::batches(&later)[..2], at_rc[..2]);
}

#[test]
fn a_release_branch_merged_back_keeps_main_s_batches_and_its_tags_only_feed_the_guard() {
    let repo = Repo::branched("v1.0.0", "release-1.0", |r| {
        r.release_with("v1.0.1", &[("pre-apply", "fix")]);
    });
    repo.release_with("v1.1.0", &[("pre-apply", "b")]);
    let before = repo.manifest_ok("migrations", &[]);
    repo.merge("release-1.0");
    let after = repo.manifest_ok("migrations", &[]);
    common::assert_batches_of(
        &after,
        &[
            ("00001-v1.0.0", &["a"]),
            ("00002-v1.1.0", &["b"]),
            ("99999-untagged", &["fix"]),
        ],
    );
    assert_eq!(Repo::batches(&after)[..2], Repo::batches(&before)[..]);
    assert_eq!(
        off_line(&after),
        [("v1.0.1".to_owned(), "v1.1.0".to_owned())]
    );
    // Off the line is not out of sight: other content under its slug fails.
    repo.add("pre-apply", "fix", "echo other content");
    let (code, doc, _) = repo.manifest_at("migrations", &[]);
    assert_eq!(code, 2);
    let problems = strings(&doc["problems"]);
    assert!(
        problems
            .iter()
            .any(|p| p.contains("'fix'") && p.contains("v1.0.1")),
        "{problems:?}"
    );
}

#[test]
fn a_pre_release_on_a_branch_that_is_not_an_ancestor_of_the_final_release_is_left_off_the_line() {
    let repo = Repo::branched("v2.0.0", "candidate", |r| {
        r.release_with("v2.1.0-rc.1", &[("pre-apply", "tried")]);
    });
    // The final release is cut from main without the candidate's branch.
    repo.release_with("v2.1.0", &[("pre-apply", "c")]);
    repo.merge("candidate");
    repo.release_with("v2.2.0", &[("pre-apply", "y")]);
    let doc = repo.manifest_ok("migrations", &[]);
    assert_eq!(
        off_line(&doc),
        [("v2.1.0-rc.1".to_owned(), "v2.1.0".to_owned())]
    );
    common::assert_batches_of(
        &doc,
        &[
            ("00001-v2.0.0", &["a"]),
            ("00002-v2.1.0", &["c"]),
            ("00003-v2.2.0", &["tried", "y"]),
        ],
    );
}
