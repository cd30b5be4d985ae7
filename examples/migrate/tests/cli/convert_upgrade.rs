//! `migrate convert` on a history shaped like a numbered platform's (integer
//! scripts, a lib helper, a stamp helper, a slot that diverges between a
//! release branch and main, a script edited between release candidates),
//! then simulated clusters along every upgrade path through `migrate run`:
//! each script content runs exactly once per cluster, or the run refuses
//! and says why.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use std::path::{Path, PathBuf};

use common::numbered::{Cluster, history};
use common::{Repo, migrate};

/// Converts the checked-out line into `<dir>/tree` with `--rewrite`, makes
/// `<dir>` a repository and generates the manifest there.
fn convert_line(repo: &Repo, dir: &Path) -> (serde_json::Value, PathBuf) {
    let tree = dir.join("tree");
    // These clusters include ones that ran a release candidate.
    let report =
        common::numbered::convert_released(repo, &tree, &["--rewrite", "--count-prereleases"]);
    (report, tree)
}

/// Both converted lines: the old line's next patch release, and main's.
struct Lines {
    _repo: Repo,
    _dir: tempfile::TempDir,
    old: PathBuf,
    new: PathBuf,
    new_report: serde_json::Value,
}

fn lines() -> Lines {
    let repo = history();
    let dir = tempfile::tempdir().unwrap();
    repo.checkout("release-1.0");
    let (_, old) = convert_line(&repo, &dir.path().join("old"));
    repo.checkout("main");
    let (new_report, new) = convert_line(&repo, &dir.path().join("new"));
    Lines {
        _repo: repo,
        _dir: dir,
        old,
        new,
        new_report,
    }
}

/// The contents run on `cluster` are `expected`, in order; a content runs
/// twice only if it is in `again` (its slot's entry says why).
fn assert_runs(cluster: &Cluster, expected: &[&str], again: &[&str]) {
    let ran = cluster.ran();
    assert_eq!(ran, expected, "the contents run on this cluster, in order");
    for id in &ran {
        let times = ran.iter().filter(|r| r == &id).count();
        assert!(
            times == 1 || (times == 2 && again.contains(&id.as_str())),
            "{id} ran {times} times: {ran:?}"
        );
    }
}

fn assert_each_once(cluster: &Cluster, expected: &[&str]) {
    let ran = cluster.ran();
    assert_eq!(ran, expected, "the contents run on this cluster, in order");
    let mut unique = ran.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), ran.len(), "a content ran twice: {ran:?}");
}

#[test]
fn the_diverged_slot_and_the_edited_release_candidate_get_one_slug_per_content() {
    let lines = lines();
    let legacy = std::fs::read_to_string(lines.new.join("legacy-map")).unwrap();
    let map: Vec<&str> = legacy.lines().filter(|l| !l.starts_with('#')).collect();
    assert_eq!(
        map,
        [
            "1 1",
            "2 2",
            "3 3-v1-1-0-rc-1 others=3-v1-0-1",
            "4 4-v1-1-0-rc-2 others=4-v1-1-0-rc-1",
        ]
    );
    let old = std::fs::read_to_string(lines.old.join("legacy-map")).unwrap();
    let old: Vec<&str> = old.lines().filter(|l| !l.starts_with('#')).collect();
    // The old line never shipped main's content at 3, so its map is plain.
    assert_eq!(old, ["1 1", "2 2", "3 3-v1-0-1"]);
    assert_eq!(lines.new_report["summary"]["diverged_slots"], 2);
}

#[test]
fn patch_releases_on_the_old_line_then_the_new_line_run_each_content_once() {
    let lines = lines();
    // Left by the numbered runner at v1.0.0: 1 and 2 ran, version 3.
    let cluster = Cluster::numbered(3, &["1", "2"], &[]);
    cluster.upgrade_ok(&lines.old);
    assert_each_once(&cluster, &["1", "2", "3-backport"]);
    cluster.upgrade_ok(&lines.new);
    // Main's slot 3 is other content than the backport: it runs too.
    assert_each_once(&cluster, &["1", "2", "3-backport", "3-main", "4-final"]);
    cluster.upgrade_ok(&lines.new);
    assert_each_once(&cluster, &["1", "2", "3-backport", "3-main", "4-final"]);

    // Left at v1.0.1 (the backport ran under the numbered runner).
    let cluster = Cluster::numbered(4, &["1", "2", "3-backport"], &[]);
    cluster.upgrade_ok(&lines.old);
    assert_each_once(&cluster, &["1", "2", "3-backport"]);
    cluster.upgrade_ok(&lines.new);
    assert_each_once(&cluster, &["1", "2", "3-backport", "3-main", "4-final"]);
}

#[test]
fn straight_to_the_new_line_runs_what_is_missing_and_runs_a_content_again_only_where_its_entry_says_why()
 {
    let lines = lines();
    // From v1.0.0: nothing at 3 or 4 ran, so both run.
    let cluster = Cluster::numbered(3, &["1", "2"], &[]);
    cluster.upgrade_ok(&lines.new);
    assert_each_once(&cluster, &["1", "2", "3-main", "4-final"]);
    assert!(cluster.reruns().is_empty());

    // From v1.0.1: version 4 says slot 3 ran, not which content. Nobody is
    // asked: main's content runs, and its entry says why.
    let cluster = Cluster::numbered(4, &["1", "2", "3-backport"], &[]);
    cluster.upgrade_ok(&lines.new);
    assert_each_once(&cluster, &["1", "2", "3-backport", "3-main", "4-final"]);
    assert_eq!(cluster.reruns(), ["3-v1-1-0-rc-1"]);

    // From v1.1.0-rc.1: main's content of 3 had run; it runs again, the one
    // content that does, and its entry says so; 4's final content is new.
    let cluster = Cluster::numbered(5, &["1", "2", "3-main", "4-rc1"], &[]);
    cluster.upgrade_ok(&lines.new);
    assert_runs(
        &cluster,
        &["1", "2", "3-main", "4-rc1", "3-main", "4-final"],
        &["3-main"],
    );
    assert_eq!(cluster.reruns(), ["3-v1-1-0-rc-1", "4-v1-1-0-rc-2"]);
    cluster.upgrade_ok(&lines.new);
    assert_eq!(cluster.ran().len(), 6, "nothing runs a third time");

    // From v1.1.0, adopted with what it ran: nothing runs again.
    let cluster = Cluster::numbered(
        5,
        &["1", "2", "3-main", "4-final"],
        &["3-v1-1-0-rc-1", "4-v1-1-0-rc-2"],
    );
    cluster.upgrade_ok(&lines.new);
    assert_each_once(&cluster, &["1", "2", "3-main", "4-final"]);
}

#[test]
fn a_fresh_install_on_either_line_runs_nothing_and_its_next_line_runs_only_new_content() {
    let lines = lines();
    let cluster = Cluster::fresh();
    cluster.install_ok(&lines.old);
    assert_each_once(&cluster, &[]);
    cluster.upgrade_ok(&lines.new);
    // Installed with the backport's content; main's slot 3 and 4 are new here.
    assert_each_once(&cluster, &["3-main", "4-final"]);

    let cluster = Cluster::fresh();
    cluster.install_ok(&lines.new);
    cluster.upgrade_ok(&lines.new);
    assert_each_once(&cluster, &[]);
}

#[test]
fn a_rewritten_retry_later_exit_is_not_yet_and_holds_back_the_later_scripts_until_the_next_upgrade()
{
    let lines = lines();
    let cluster = Cluster::numbered(2, &["1"], &[]);
    let out = migrate()
        .arg("run")
        .arg(&lines.new)
        .arg("--ledger")
        .arg(common::file_spec(&cluster.ledger_path()))
        .args(["--tier", "pre-apply", "--lock-wait", "5"])
        .env("FIXTURE_LOG", cluster.log_path())
        .env("FIXTURE_NOT_READY", "1")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "not yet is no failure of the run: {err}"
    );
    // The numbered runner never ran 3 before 2: converted scripts require
    // their predecessor, so they wait with it.
    assert_each_once(&cluster, &["1"]);
    let raw = ledger_file::FileLedger::new(cluster.ledger_path())
        .raw_data()
        .unwrap()
        .unwrap();
    assert!(
        raw["m.2"].contains("\"s\":\"not-yet\""),
        "2 is recorded not-yet, never ok: {raw:?}"
    );
    for key in ["m.3-v1-1-0-rc-1", "m.4-v1-1-0-rc-2"] {
        assert!(
            raw[key].contains("\"s\":\"not-yet\"")
                && raw[key].contains("\"r\":\"requirement-not-yet\""),
            "{key} waits with 2, recorded not-yet without running: {raw:?}"
        );
    }
    cluster.upgrade_ok(&lines.new);
    assert_each_once(&cluster, &["1", "2", "3-main", "4-final"]);
}
