//! `migrate convert --slug-map FILE` (issue 29): the design's end state
//! names migrations by what they do (`1` becomes
//! `mariadb-operator-secrets`); and `--no-chain`, which drops the
//! `requires` chain conversion adds (one `not-yet` holds back every later
//! script), with the report saying which one the tree has.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use std::path::{Path, PathBuf};

use common::json;
use common::numbered::history;

/// Converts the numbered history into a new directory with `extra`:
/// (exit code, report, stderr, the directory's `t`, the directory).
fn convert(
    extra: &[&str],
) -> (
    i32,
    serde_json::Value,
    String,
    PathBuf,
    tempfile::TempDir,
    common::Repo,
) {
    let repo = history();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("t");
    let (code, doc, err) = common::numbered::convert(&repo, &out, extra);
    (code, doc, err, out, dir, repo)
}

/// Writes `text` as a slug map in a directory of its own: its path.
fn map_file(dir: &Path, text: &str) -> PathBuf {
    let path = dir.join("slugs");
    std::fs::write(&path, text).unwrap();
    path
}

fn read(out: &Path, rel: &str) -> String {
    std::fs::read_to_string(out.join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

#[test]
fn a_slug_map_names_the_converted_scripts_their_tests_and_their_legacy_map_lines() {
    let maps = tempfile::tempdir().unwrap();
    let map = map_file(
        maps.path(),
        "# what each numbered script does\n\n1   mariadb-operator-secrets  # blanks and comments are fine\n",
    );
    let (code, doc, err, out, _dir, _repo) = convert(&["--slug-map", map.to_str().unwrap()]);
    assert_eq!(code, 0, "{doc}\n{err}");
    assert!(out.join("pre-apply/mariadb-operator-secrets").is_file());
    assert!(out.join("tests/mariadb-operator-secrets.sh").is_file());
    assert!(!out.join("pre-apply/1").exists());
    // The chain names the new slugs; an unmapped slot keeps its integer.
    assert!(read(&out, "pre-apply/2").contains("requires=mariadb-operator-secrets\n"));
    let legacy = read(&out, "legacy-map");
    common::assert_contains_all(&legacy, &["1 mariadb-operator-secrets\n", "2 2\n"]);
    let slugs = common::fields(&doc["scripts"], "slug");
    assert!(slugs.contains(&"mariadb-operator-secrets"), "{slugs:?}");
    // The converted tree is a tree: lint reads it (its stubs still fail).
    let (_, lint, _) = json(&["lint", out.to_str().unwrap()]);
    assert!(
        !lint["findings"].to_string().contains("\"rule\":\"header\""),
        "{lint}"
    );
}

#[test]
fn a_mapped_diverged_slot_names_each_content_after_the_mapped_slug() {
    let maps = tempfile::tempdir().unwrap();
    let map = map_file(maps.path(), "3 tenant-quota-fix\n");
    let (code, doc, err, out, _dir, _repo) = convert(&["--slug-map", map.to_str().unwrap()]);
    assert_eq!(code, 0, "{doc}\n{err}");
    let legacy = read(&out, "legacy-map");
    let line = legacy
        .lines()
        .find(|l| l.starts_with("3 "))
        .unwrap_or_else(|| panic!("{legacy}"));
    // Every content's slug starts with the mapped one, so each line
    // converted apart gives each content the same slug.
    for word in line
        .split([' ', ',', '='])
        .skip(1)
        .filter(|w| *w != "others")
    {
        assert!(word.starts_with("tenant-quota-fix-"), "{line}");
    }
    assert!(line.contains("others="), "{line}");
}

/// Asserts that converting with a slug map of `text` is refused (exit 2)
/// naming the map file, `line` and `needle`, and writes nothing.
fn refused(text: &str, line: usize, needle: &str) {
    let maps = tempfile::tempdir().unwrap();
    let map = map_file(maps.path(), text);
    let (code, doc, err, out, _dir, _repo) = convert(&["--slug-map", map.to_str().unwrap()]);
    assert_eq!(code, 2, "{text:?}: {doc}\n{err}");
    let problems = doc["problems"].to_string();
    let at = format!("{}:{line}:", map.display());
    assert!(problems.contains(&at), "{text:?}: want {at} in {problems}");
    assert!(
        problems.contains(needle),
        "{text:?}: want {needle} in {problems}"
    );
    assert!(!out.exists(), "{text:?}: something was written");
}

#[test]
fn a_bad_slug_map_is_refused_naming_its_line_before_anything_is_written() {
    refused("1 ok-slug\n2 Not_A_Slug\n", 2, "not a valid slug");
    refused(
        "1 same\n2 same\n",
        2,
        "'same' is already given to slot 1 (line 1)",
    );
    refused("1 one\n1 uno\n", 2, "slot 1 is mapped twice (line 1)");
    refused(
        "1 one\n9 nine\n",
        2,
        "slot 9 is not a numbered script of the directory",
    );
    refused("1\n", 1, "expected 'N SLUG'");
    refused("one 1-slug\n", 1, "expected 'N SLUG'");
    refused("1 a b\n", 1, "expected 'N SLUG'");
    // A mapped slug that another slot keeps as its integer.
    refused("1 2\n", 1, "'2' is the slug slot 2 keeps");
}

#[test]
fn the_report_explains_the_requires_chain_and_no_chain_drops_it() {
    let (code, doc, err, out, _dir, _repo) = convert(&[]);
    assert_eq!(code, 0, "{doc}\n{err}");
    assert_eq!(doc["chain"], true, "{doc}");
    assert!(read(&out, "pre-apply/2").contains("requires=1\n"));
    // The text report says what the chain does and how to drop it.
    let (code, text, _) = common::text(&common::numbered::convert_args(&_repo, &out));
    assert_eq!(code, 0, "{text}");
    common::assert_contains_all(&text, &["requires chain", "not-yet", "--no-chain"]);

    let (code, doc, err, out, _dir, _repo) = convert(&["--no-chain"]);
    assert_eq!(code, 0, "{doc}\n{err}");
    assert_eq!(doc["chain"], false, "{doc}");
    for entry in std::fs::read_dir(out.join("pre-apply")).unwrap() {
        let script = std::fs::read_to_string(entry.unwrap().path()).unwrap();
        assert!(!script.contains("requires="), "{script}");
    }
}
