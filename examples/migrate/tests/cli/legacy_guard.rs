//! `legacy-map` lines are under the immutability guard (issue 13): a line
//! a release shipped never changes, is never removed, and a slug that
//! shipped as a regular migration is never moved into `00000-legacy`
//! afterwards (a cluster would then seed it `legacy` instead of running it).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use common::Repo;

/// v1.0.0 ships legacy 1 and 2 and the regular `relabel`.
fn released() -> Repo {
    let repo = Repo::new();
    repo.add("pre-apply", "1", "echo one");
    repo.add("pre-apply", "2", "echo two");
    repo.add("pre-apply", "relabel", "echo relabel");
    repo.write("legacy-map", "1 1\n2 2\n");
    repo.release("v1.0.0");
    repo
}

/// Commits `repo`'s working tree as `message` and asserts that the manifest
/// is refused (exit 2) with problems naming every one of `needles`.
fn assert_refused(repo: &Repo, message: &str, needles: &[&str]) {
    repo.commit(message);
    let (code, doc, _) = repo.manifest();
    assert_eq!(code, 2, "{doc}");
    common::assert_contains_all(&doc["problems"].to_string(), needles);
}

#[test]
fn an_unchanged_legacy_map_with_a_line_appended_for_a_new_legacy_script_passes() {
    let repo = released();
    repo.add("pre-apply", "3", "echo three");
    repo.write("legacy-map", "1 1\n2 2\n3 3\n");
    repo.commit("next");
    let (code, doc, err) = repo.manifest();
    assert_eq!(code, 0, "{doc}\n{err}");
}

#[test]
fn a_shipped_legacy_line_pointing_elsewhere_is_refused_naming_the_tag() {
    let repo = released();
    repo.add("pre-apply", "two-renamed", "echo two");
    repo.remove("pre-apply", "2");
    repo.write("legacy-map", "1 1\n2 two-renamed\n");
    assert_refused(
        &repo,
        "edit",
        &[
            "legacy-map line '2 2' shipped in tag v1.0.0",
            "the working tree has '2 two-renamed'",
        ],
    );
}

/// Each case is a `legacy-map` that only edits what v1.0.0 shipped, the
/// commit message, and what the refusal must say.
#[test]
fn a_shipped_legacy_line_removed_or_a_regular_slug_moved_into_the_legacy_batch_is_refused() {
    let cases: [(&str, &str, &str); 2] = [
        (
            "1 1\n",
            "drop a line",
            "legacy-map line '2 2' shipped in tag v1.0.0 is missing from the working tree",
        ),
        (
            "1 1\n2 2\n3 relabel\n",
            "relabel becomes legacy",
            "'relabel' shipped in tag v1.0.0 as a regular migration; the working tree's legacy-map now lists it as '3 relabel'",
        ),
    ];
    for (map, message, problem) in cases {
        let repo = released();
        repo.write("legacy-map", map);
        assert_refused(&repo, message, &[problem]);
    }
}
