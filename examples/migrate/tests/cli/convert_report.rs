//! `migrate convert`'s report, rewrites and output directory: what it finds
//! with file and line, that its diff is exactly what `--rewrite` applies,
//! that converting twice gives the same bytes, and that it never writes
//! over a directory holding anything else.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use common::numbered::{NUMBERED, change, changes, history};
use common::{Repo, assert_first_problem, json, migrate};

fn convert(repo: &Path, out: &Path, extra: &[&str]) -> (i32, serde_json::Value, String) {
    let mut args = vec![
        "convert",
        "--repo",
        repo.to_str().unwrap(),
        "--path",
        NUMBERED,
        "--out",
        out.to_str().unwrap(),
    ];
    args.extend(extra);
    json(&args)
}

/// The numbered history converted with `extra` into `t` of a new
/// directory, which must succeed: (the history, the directory, its `t`,
/// the report).
fn converted(extra: &[&str]) -> (Repo, tempfile::TempDir, PathBuf, serde_json::Value) {
    let repo = history();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("t");
    let (code, report, err) = convert(repo.path(), &out, extra);
    assert_eq!(code, 0, "{err}");
    (repo, dir, out, report)
}

/// Every file under `dir`, by relative path.
fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(dir).unwrap().to_string_lossy().into_owned();
                out.insert(rel, std::fs::read(&p).unwrap());
            }
        }
    }
    out
}

#[test]
fn every_convention_is_reported_at_its_line_and_only_the_safe_ones_are_rewritable() {
    let (_repo, _dir, out, report) = converted(&[]);
    assert_eq!(
        changes(&report, "1"),
        [
            change("lib-path", 3, true),
            change("version-stamp", 6, true)
        ]
    );
    assert_eq!(
        changes(&report, "2"),
        [
            change("lib-path", 5, true),
            change("version-stamp", 6, true),
            change("dry-run-switch", 8, true),
            change("dry-run-switch", 9, true),
            change("dry-run-switch", 11, true),
            change("retry-later-exit", 15, true),
            change("version-stamp", 18, true),
        ]
    );
    let two = &report["scripts"][1];
    assert_eq!(
        two["status"], "rewritable",
        "a dry-run switch read from MIGRATION_DRY_RUN alone is always off under the engine"
    );
    assert_eq!(report["scripts"][0]["status"], "rewritable");
    assert_eq!(report["stamp_helpers"], serde_json::json!(["lib/stamp.sh"]));
    // Without --rewrite the scripts keep their bodies; only the header is new.
    let script = std::fs::read_to_string(out.join("pre-apply/1")).unwrap();
    assert!(script.starts_with(
        "#!/bin/sh\n# cozystack-migration: tier=pre-apply\n# cozystack-migration: on-error=abort\nset -eu\n"
    ));
    assert!(script.contains("kubectl create configmap -n cozy-system cozystack-version"));
    // And lint refuses that tree: it still stamps the ledger.
    let lint = migrate().arg("lint").arg(&out).output().unwrap();
    assert!(!lint.status.success());
    assert!(String::from_utf8_lossy(&lint.stdout).contains("ledger-write"));
}

#[test]
fn the_reported_diff_applied_by_hand_gives_exactly_the_rewritten_tree() {
    let repo = history();
    let dir = tempfile::tempdir().unwrap();
    let (plain, rewritten) = (dir.path().join("plain"), dir.path().join("rewritten"));
    let (code, report, err) = convert(repo.path(), &plain, &[]);
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = convert(repo.path(), &rewritten, &["--rewrite"]);
    assert_eq!(code, 0, "{err}");
    let diff: String = report["scripts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["diff"].as_str().unwrap())
        .collect();
    common::assert_contains_all(
        &diff,
        &[
            "-. \"$(dirname \"$0\")/lib/stamp.sh\"\n",
            "+. \"$MIGRATION_TREE/lib/record.sh\"\n",
            "+  exit 75\n",
        ],
    );
    let patch = dir.path().join("d.patch");
    std::fs::write(&patch, &diff).unwrap();
    common::git(&plain, &["apply", "-p1", patch.to_str().unwrap()]);
    let mut expected = files(&rewritten);
    let got = files(&plain);
    // The stamp helper is left out only when the rewrite removed its uses.
    assert!(got.contains_key("lib/stamp.sh"));
    assert!(!expected.contains_key("lib/stamp.sh"));
    expected.insert("lib/stamp.sh".into(), got["lib/stamp.sh"].clone());
    // So is the baseline of the unresolvable sources the rewrite fixes (a
    // blocking finding since issue 35): after the patch its entries no
    // longer match, and lint says so (baseline-unused).
    assert_ne!(got.get("lint-baseline"), expected.get("lint-baseline"));
    expected.insert("lint-baseline".into(), got["lint-baseline"].clone());
    assert_eq!(got, expected);
}

#[test]
fn converting_twice_gives_the_same_bytes_and_a_second_run_into_the_same_directory_changes_nothing()
{
    let repo = history();
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    let (code, first, err) = convert(repo.path(), &a, &["--rewrite"]);
    assert_eq!(code, 0, "{err}");
    let (code, second, err) = convert(repo.path(), &b, &["--rewrite"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(files(&a), files(&b));
    let strip = |mut v: serde_json::Value| {
        v["out"] = serde_json::Value::Null;
        v
    };
    assert_eq!(strip(first.clone()), strip(second));
    assert_eq!(first["written"], "written");
    let (code, again, err) = convert(repo.path(), &a, &["--rewrite"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(again["written"], "unchanged");
    // Text output too.
    let text = |out: &Path| {
        migrate()
            .args([
                "convert",
                "--repo",
                repo.path().to_str().unwrap(),
                "--path",
                NUMBERED,
            ])
            .arg("--out")
            .arg(out)
            .arg("--rewrite")
            .output()
            .unwrap()
            .stdout
    };
    let (ta, tb) = (text(&a), text(&b));
    let ta = String::from_utf8(ta)
        .unwrap()
        .replace(a.to_str().unwrap(), "OUT");
    let tb = String::from_utf8(tb)
        .unwrap()
        .replace(b.to_str().unwrap(), "OUT");
    assert_eq!(ta, tb);
}

#[test]
fn a_directory_holding_anything_else_is_refused_and_left_untouched() {
    let (repo, _dir, out, _) = converted(&["--rewrite"]);
    // The same directory, other options: other bytes.
    let (code, doc, _) = convert(repo.path(), &out, &[]);
    assert_eq!(code, 2, "{doc}");
    assert_first_problem(&doc, "not empty and not an identical earlier conversion");
    // The plain conversion keeps the stamp helper the rewrite left out.
    assert_first_problem(&doc, "lib/stamp.sh is missing");
    // A stray file is named too, and nothing is written.
    std::fs::write(out.join("notes.txt"), "mine").unwrap();
    let before = files(&out);
    let (code, doc, _) = convert(repo.path(), &out, &["--rewrite"]);
    assert_eq!(code, 2, "{doc}");
    assert_first_problem(&doc, "notes.txt is not part of the conversion");
    assert_eq!(files(&out), before);
}

#[test]
fn a_numbered_gap_on_disk_is_refused_naming_the_slot_and_the_tags_that_hold_it() {
    let repo = history();
    std::fs::remove_file(repo.path().join(NUMBERED).join("3")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (code, doc, _) = convert(repo.path(), &dir.path().join("t"), &[]);
    assert_eq!(code, 2, "{doc}");
    let problem = doc["problems"][0].as_str().unwrap();
    assert!(problem.starts_with("slot 3 is not on disk"), "{problem}");
    assert_first_problem(&doc, "v1.0.1, v1.1.0-rc.1");
    assert!(!dir.path().join("t").exists());
}

#[test]
fn skipping_pre_releases_drops_contents_only_a_candidate_held_and_names_slugs_by_releases() {
    let (_repo, _dir, out, report) = converted(&["--skip-prereleases"]);
    let map = std::fs::read_to_string(out.join("legacy-map")).unwrap();
    let map: Vec<&str> = map.lines().filter(|l| !l.starts_with('#')).collect();
    // 4-rc1 was only ever in v1.1.0-rc.1: no longer a candidate.
    assert_eq!(map, ["1 1", "2 2", "3 3-v1-1-0 others=3-v1-0-1", "4 4"]);
    assert_eq!(report["skip_prereleases"], true);
}
