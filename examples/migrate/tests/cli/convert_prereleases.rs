//! Contents only a pre-release held (ADOPTING.md, "Diverged slots"): they
//! name a slug, but production clusters install final releases, so they are
//! no candidate of what a cluster ran unless the maintainer says clusters
//! ran pre-releases (`--count-prereleases`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use common::json;
use common::numbered::{NUMBERED, history};

/// The legacy-map lines of main converted with `extra`.
fn legacy_map(extra: &[&str]) -> Vec<String> {
    let repo = history();
    let out = tempfile::tempdir().unwrap();
    let tree = out.path().join("tree");
    let (code, doc, err) = common::numbered::convert(&repo, &tree, extra);
    assert_eq!(code, 0, "{err}\n{doc}");
    std::fs::read_to_string(tree.join("legacy-map"))
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(str::to_owned)
        .collect()
}

#[test]
fn a_content_only_a_release_candidate_held_is_no_candidate_unless_the_maintainer_counts_pre_releases()
 {
    // Slot 4 held 4-rc1 in v1.1.0-rc.1 only, then its final content.
    assert_eq!(
        legacy_map(&[]),
        [
            "1 1",
            "2 2",
            "3 3-v1-1-0-rc-1 others=3-v1-0-1",
            "4 4-v1-1-0-rc-2"
        ]
    );
    assert_eq!(
        legacy_map(&["--count-prereleases"]),
        [
            "1 1",
            "2 2",
            "3 3-v1-1-0-rc-1 others=3-v1-0-1",
            "4 4-v1-1-0-rc-2 others=4-v1-1-0-rc-1"
        ]
    );
    let (code, doc, _) = json(&[
        "convert",
        "--repo",
        ".",
        "--path",
        NUMBERED,
        "--out",
        "/nonexistent",
        "--skip-prereleases",
        "--count-prereleases",
    ]);
    assert_eq!(code, 2, "the two say opposite things: {doc}");
}
