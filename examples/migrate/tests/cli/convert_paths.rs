//! `migrate convert` with the numbered directory's path history: the
//! scripts moved, and older tags are read where they lived then, so a slot
//! whose content changed across the move is seen as diverged.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use common::numbered::numbered;
use common::{Repo, json};

const OLD: &str = "scripts/migrations";
const NEW: &str = "platform/migrations";

fn put(repo: &Repo, dir: &str, rel: &str, text: &str) {
    let path = repo.path().join(dir).join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// v0.40.0 keeps 1 and 2 in `scripts/migrations`; v0.41.0 moved them to
/// `platform/migrations` and edited 1 on the way.
fn moved() -> Repo {
    let repo = Repo::new();
    put(&repo, OLD, "lib/record.sh", "record_run() { :; }\n");
    put(&repo, OLD, "1", &numbered(1, "1-old", ""));
    put(&repo, OLD, "2", &numbered(2, "2", ""));
    repo.release("v0.40.0");
    std::fs::create_dir_all(repo.path().join("platform")).unwrap();
    repo.git(&["mv", OLD, NEW]);
    put(&repo, NEW, "1", &numbered(1, "1-new", ""));
    repo.release("v0.41.0");
    repo
}

fn convert(repo: &Repo, paths: &[&str]) -> (i32, serde_json::Value, String) {
    let out = tempfile::tempdir().unwrap();
    let mut args = vec!["convert", "--repo", repo.path().to_str().unwrap()];
    for path in paths {
        args.extend(["--path", path]);
    }
    let target = out.path().join("tree");
    args.extend(["--out", target.to_str().unwrap()]);
    let (code, doc, err) = json(&args);
    let map = std::fs::read_to_string(target.join("legacy-map")).unwrap_or_default();
    let lines: Vec<String> = map
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(str::to_owned)
        .collect();
    (code, serde_json::json!({"report": doc, "map": lines}), err)
}

#[test]
fn with_the_old_path_a_slot_edited_across_the_move_is_diverged() {
    let repo = moved();
    let (code, doc, err) = convert(&repo, &[NEW, OLD]);
    assert_eq!(code, 0, "{err}\n{doc}");
    assert_eq!(
        common::strings(&doc["map"]),
        ["1 1-v0-41-0 others=1-v0-40-0", "2 2"]
    );
    assert_eq!(doc["report"]["summary"]["diverged_slots"], 1);
    // Without it, the move hides what clusters at v0.40.0 ran at 1.
    let (code, doc, err) = convert(&repo, &[NEW]);
    assert_eq!(code, 0, "{err}\n{doc}");
    assert_eq!(common::strings(&doc["map"]), ["1 1", "2 2"]);
}

#[test]
fn a_tag_holding_the_directory_at_two_of_the_paths_is_refused_naming_both() {
    let repo = moved();
    put(&repo, OLD, "1", &numbered(1, "1-stray", ""));
    repo.release("v0.42.0");
    let (code, doc, _) = convert(&repo, &[NEW, OLD]);
    assert_eq!(code, 2, "{doc}");
    let text = doc["report"].to_string();
    assert!(
        text.contains("v0.42.0") && text.contains(NEW) && text.contains(OLD),
        "{text}"
    );
}
