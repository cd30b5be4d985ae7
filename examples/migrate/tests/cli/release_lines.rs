//! Every maintained line after conversion (ADOPTING.md, "Every maintained
//! line"): main and a release branch with a diverged slot are converted
//! apart, tagged, then given a backport; `manifest` works on each line at
//! every step, and simulated clusters on every upgrade path run each
//! content once, or again only where its entry says why.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use std::path::{Path, PathBuf};

use common::numbered::{Cluster, NUMBERED, history, numbered, write};
use common::{Repo, json};

/// Where each line keeps its converted tree.
const SLUGS: &str = "platform/slugs";

/// The first release shipping a converted tree; older tags may lack it.
const TREE_SINCE: &str = "v1.2.0";

/// The numbered history of `common::numbered`, and slot 4 backported to
/// the release branch with main's final content as v1.0.2 (a numbered
/// release): slot 3 diverged between the lines, slot 4 is one content on
/// both but main shipped another in a candidate.
fn numbered_history() -> Repo {
    let repo = history();
    repo.checkout("release-1.0");
    write(&repo, "4", &numbered(4, "4-final", ""));
    repo.release("v1.0.2");
    repo.checkout("main");
    repo
}

/// `migrate manifest` of the checked-out line into its tree's `order.d/`:
/// (exit code, document, stderr).
fn manifest(repo: &Repo) -> (i32, serde_json::Value, String) {
    let out = repo.path().join(SLUGS).join("order.d");
    common::manifest_of(
        repo.path(),
        SLUGS,
        &[
            "--tag-pattern",
            "v*",
            "--tree-since",
            TREE_SINCE,
            "--out",
            out.to_str().unwrap(),
        ],
    )
}

/// The procedure, on the checked-out line: convert the numbered tree into
/// `platform/slugs`, drop the numbered one, commit, generate the manifest
/// and tag the line's next release `tag`.
fn convert_line(repo: &Repo, tag: &str) {
    let (code, report, err) = json(&[
        "convert",
        "--repo",
        repo.path().to_str().unwrap(),
        "--path",
        NUMBERED,
        "--tag-pattern",
        "v*",
        "--out",
        repo.path().join(SLUGS).to_str().unwrap(),
        "--rewrite",
        // Some of the clusters below ran main's release candidate.
        "--count-prereleases",
    ]);
    assert_eq!(code, 0, "{err}\n{report}");
    std::fs::remove_dir_all(repo.path().join(NUMBERED)).unwrap();
    let (code, doc, err) = manifest(repo);
    assert_eq!(code, 0, "{err}\n{doc}");
    repo.commit(&format!("converted, {tag}"));
    repo.tag(tag);
}

/// A backport after conversion: the same new migration on the line, then
/// its next release `tag`.
fn backport(repo: &Repo, tag: &str) {
    let path = repo.path().join(SLUGS).join("pre-apply/after-backport");
    std::fs::write(
        &path,
        "#!/bin/sh\n# cozystack-migration: tier=pre-apply\n# cozystack-migration: on-error=abort\nset -eu\n. \"$MIGRATION_TREE/lib/record.sh\"\nrecord_run after-backport\n",
    )
    .unwrap();
    std::fs::write(
        repo.path().join(SLUGS).join("tests/after-backport.sh"),
        "#!/bin/sh\nexit 0\n",
    )
    .unwrap();
    let (code, doc, err) = manifest(repo);
    assert_eq!(code, 0, "{err}\n{doc}");
    repo.commit(&format!("backport, {tag}"));
    repo.tag(tag);
}

/// The converted history: release-1.0 converted as v1.0.3, main as v1.2.0,
/// then the backport as v1.0.4 and v1.3.0.
fn converted() -> Repo {
    let repo = numbered_history();
    repo.checkout("release-1.0");
    convert_line(&repo, "v1.0.3");
    repo.checkout("main");
    convert_line(&repo, "v1.2.0");
    repo.checkout("release-1.0");
    backport(&repo, "v1.0.4");
    repo.checkout("main");
    backport(&repo, "v1.3.0");
    repo
}

/// A copy of the converted tree as `rev` ships it, its manifest generated
/// there, under `dir`.
fn tree_at(repo: &Repo, rev: &str, dir: &Path) -> PathBuf {
    repo.git(&["checkout", "--quiet", rev]);
    let (code, doc, err) = manifest(repo);
    assert_eq!(code, 0, "manifest at {rev}: {err}\n{doc}");
    let to = dir.join(rev);
    let status = std::process::Command::new("cp")
        .arg("-a")
        .arg(repo.path().join(SLUGS))
        .arg(&to)
        .status()
        .unwrap();
    assert!(status.success());
    repo.git(&["checkout", "--quiet", "--", "."]);
    repo.git(&["clean", "--quiet", "-fdx"]);
    to
}

#[test]
fn both_lines_converted_apart_keep_generating_manifests_through_a_later_backport() {
    let repo = converted();
    for (line, release) in [("release-1.0", "v1.0.4"), ("main", "v1.3.0")] {
        repo.checkout(line);
        let (code, doc, err) = manifest(&repo);
        assert_eq!(code, 0, "{line}: {err}\n{doc}");
        // The converted scripts are the legacy batch; the converting
        // release ships nothing else.
        let batches: Vec<String> = Repo::batches(&doc).into_iter().map(|(n, _)| n).collect();
        assert_eq!(batches.len(), 2, "{line}: {batches:?}");
        assert_eq!(batches[0], "00000-legacy", "{line}");
        let backport = Repo::batches(&doc)
            .into_iter()
            .find(|(_, slugs)| slugs.iter().any(|s| s == "after-backport"))
            .map(|(name, _)| name);
        assert!(
            backport.as_deref().is_some_and(|b| b.ends_with(release)),
            "{line}: the backport is in its own line's release: {backport:?}"
        );
    }
    // The lines name slot 3 apart, and slot 4 alike: same slug, same bytes.
    let release = repo.git(&["show", &format!("v1.0.4:{SLUGS}/legacy-map")]);
    let main = repo.git(&["show", &format!("v1.3.0:{SLUGS}/legacy-map")]);
    assert!(release.contains("\n3 3-v1-0-1\n"), "{release}");
    assert!(
        main.contains("\n3 3-v1-1-0-rc-1 others=3-v1-0-1\n"),
        "{main}"
    );
    let four = |rev: &str| repo.git(&["show", &format!("{rev}:{SLUGS}/pre-apply/4-v1-0-2")]);
    assert_eq!(four("v1.0.4"), four("v1.3.0"));
}

#[test]
fn on_one_line_a_diverged_slot_naming_another_content_is_still_a_changed_shipped_line() {
    let repo = converted();
    repo.checkout("main");
    // Main renames its own content of the diverged slot 3, listing the
    // shipped name among the others: that is a change of a line v1.2.0
    // shipped, not another line's naming.
    let tree = repo.path().join(SLUGS);
    std::fs::rename(
        tree.join("pre-apply/3-v1-1-0-rc-1"),
        tree.join("pre-apply/3-renamed"),
    )
    .unwrap();
    std::fs::rename(
        tree.join("tests/3-v1-1-0-rc-1.sh"),
        tree.join("tests/3-renamed.sh"),
    )
    .unwrap();
    let map = tree.join("legacy-map");
    let text = std::fs::read_to_string(&map).unwrap();
    let renamed = text.replace(
        "\n3 3-v1-1-0-rc-1 others=3-v1-0-1\n",
        "\n3 3-renamed others=3-v1-0-1,3-v1-1-0-rc-1\n",
    );
    assert_ne!(text, renamed);
    std::fs::write(&map, renamed).unwrap();
    let (code, doc, _) = manifest(&repo);
    assert_eq!(code, 2, "{doc}");
    let problems = common::strings(&doc["problems"]);
    assert!(
        problems
            .iter()
            .any(|p| p.contains("'3 3-v1-1-0-rc-1' shipped in tag v1.2.0")),
        "{problems:?}"
    );
}

/// The log id each converted slug records.
fn content_of(slug: &str) -> &str {
    match slug {
        "3-v1-0-1" => "3-backport",
        "3-v1-1-0-rc-1" => "3-main",
        "4-v1-0-2" => "4-final",
        "4-v1-1-0-rc-1" => "4-rc1",
        other => other,
    }
}

#[test]
fn every_upgrade_path_across_both_lines_runs_each_content_once_or_again_only_where_its_entry_says_why()
 {
    let repo = converted();
    let dir = tempfile::tempdir().unwrap();
    let trees: Vec<(&str, PathBuf)> = ["v1.0.3", "v1.0.4", "v1.2.0", "v1.3.0"]
        .into_iter()
        .map(|rev| (rev, tree_at(&repo, rev, dir.path())))
        .collect();
    let tree = |rev: &str| trees.iter().find(|(r, _)| *r == rev).unwrap().1.clone();
    // Where the numbered runner left clusters: (release, version, what ran).
    let numbered: [(&str, u64, &[&str]); 5] = [
        ("v1.0.0", 3, &["1", "2"]),
        ("v1.0.1", 4, &["1", "2", "3-backport"]),
        ("v1.0.2", 5, &["1", "2", "3-backport", "4-final"]),
        ("v1.1.0-rc.1", 5, &["1", "2", "3-main", "4-rc1"]),
        ("v1.1.0", 5, &["1", "2", "3-main", "4-final"]),
    ];
    // Every path upward through the converted releases (a cluster is never
    // downgraded, and the release line's releases come before main's).
    let paths: [&[&str]; 6] = [
        &["v1.0.3", "v1.0.4", "v1.3.0"],
        &["v1.0.3", "v1.2.0", "v1.3.0"],
        &["v1.0.4", "v1.3.0"],
        &["v1.2.0", "v1.3.0"],
        &["v1.3.0"],
        &["v1.0.3", "v1.3.0"],
    ];
    let mut checked = 0;
    for (release, version, ran) in numbered {
        for path in paths {
            // A cluster past main's candidate never goes back to the release line.
            if release.starts_with("v1.1") && path[0].starts_with("v1.0") {
                continue;
            }
            let cluster = Cluster::numbered(version, ran, &[]);
            for rev in path {
                cluster.upgrade_ok(&tree(rev));
            }
            // Again at the end: nothing more runs.
            let before = cluster.ran();
            cluster.upgrade_ok(&tree(path[path.len() - 1]));
            assert_eq!(cluster.ran(), before, "{release} via {path:?}");
            let log = cluster.ran();
            let again: Vec<String> = cluster
                .reruns()
                .iter()
                .map(|s| content_of(s).to_owned())
                .collect();
            for id in &log {
                let times = log.iter().filter(|r| r == &id).count();
                assert!(
                    times == 1 || (times == 2 && again.contains(id)),
                    "{release} via {path:?}: {id} ran {times} times, reruns {again:?}: {log:?}"
                );
            }
            // Every content of main's last release ran on the way, or before.
            for id in ["1", "2", "3-main", "4-final", "after-backport"] {
                assert!(
                    log.iter().any(|r| r == id),
                    "{release} via {path:?}: {id} never ran: {log:?}"
                );
            }
            checked += 1;
        }
    }
    assert_eq!(checked, 22);
}
