//! Every file a tree or a flag supplies is read through core's one reader
//! (`migration_core::tree::supplied`, issue 35): this test lists every
//! other whole-file read in the crates that read such files, so a new read
//! that bypasses the reader fails here until it is routed through it or
//! listed below with the reason it is not a supplied file.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

/// Where supplied files are read: core, lint, the CLI, the runner's
/// pre-run scan, release.
const SCANNED: [&str; 5] = [
    "migration-core/src",
    "examples/lint/src",
    "examples/migrate/src",
    "examples/runner/src/scan.rs",
    "examples/repo/src",
];

/// The reads that are not of a supplied file: (file, the text of the read,
/// why).
const NOT_SUPPLIED: [(&str, &str, &str); 6] = [
    (
        "examples/migrate/src/cli/run.rs",
        "std::fs::read_to_string(\"/etc/hostname\")",
        "the machine's host name, for the lock holder",
    ),
    (
        "examples/migrate/src/cli/test.rs",
        "std::fs::read_to_string(self.dir.path().join(REFUSED_FILE))",
        "the sandbox's own record, in a directory it created",
    ),
    (
        "examples/repo/src/convert/behaviour.rs",
        "std::fs::read(&output)",
        "the output of a script convert ran itself, in its own directory",
    ),
    (
        "examples/repo/src/convert/behaviour.rs",
        "std::fs::read(path)",
        "files a script convert ran itself wrote in its own directory",
    ),
    (
        "examples/repo/src/convert/behaviour.rs",
        "std::fs::read(dir.join(n.to_string()))",
        "a call's record the check's fake commands wrote in its own directory",
    ),
    (
        "examples/repo/src/convert/history.rs",
        "std::fs::read(&path)",
        "the numbered directory convert reads from disk: follow-up (convert is another change's; the listing there already refuses a non-regular entry)",
    ),
];

/// The forms a whole-file read takes.
const READS: [&str; 4] = [
    "fs::read(",
    "fs::read_to_string(",
    "File::open(",
    "OpenOptions::new().read(",
];

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every `.rs` file under `path` (or `path` itself), test-only files left out.
fn sources(path: &Path, out: &mut Vec<PathBuf>) {
    if path.is_file() {
        out.push(path.to_path_buf());
        return;
    }
    for entry in std::fs::read_dir(path).unwrap() {
        let p = entry.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        if p.is_dir() && name != "testing" && name != "tests" {
            sources(&p, out);
        } else if name.ends_with(".rs") && name != "tests.rs" {
            out.push(p);
        }
    }
}

#[test]
fn every_whole_file_read_of_a_supplied_file_goes_through_the_one_reader() {
    let root = workspace();
    let mut files = Vec::new();
    for scanned in SCANNED {
        sources(&root.join(scanned), &mut files);
    }
    assert!(files.len() > 50, "the sources were found: {}", files.len());
    let mut found = Vec::new();
    for file in files {
        let rel = file.strip_prefix(&root).unwrap().display().to_string();
        if rel.ends_with("tree/supplied.rs") {
            continue;
        }
        let text = std::fs::read_to_string(&file).unwrap();
        // A file's unit tests (its trailing `#[cfg(test)]` module) make
        // their own fixtures.
        let code = text.split("#[cfg(test)]\nmod tests").next().unwrap();
        for line in code.lines() {
            if READS.iter().any(|r| line.contains(r)) {
                found.push((rel.clone(), line.trim().to_owned()));
            }
        }
    }
    let unexplained: Vec<_> = found
        .iter()
        .filter(|(file, line)| {
            !NOT_SUPPLIED
                .iter()
                .any(|(f, read, _)| file == f && line.contains(read))
        })
        .collect();
    assert!(
        unexplained.is_empty(),
        "a read that bypasses migration_core::tree::supplied (route it through the reader, or list it in NOT_SUPPLIED with why): {unexplained:#?}"
    );
    // Every listed exception still exists: a stale one would hide nothing.
    for (file, read, why) in NOT_SUPPLIED {
        assert!(
            found.iter().any(|(f, l)| f == file && l.contains(read)),
            "{file}: {read} ({why}) is no longer there: drop it from NOT_SUPPLIED"
        );
    }
}
