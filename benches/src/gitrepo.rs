//! A generated git repository: one release line of `tags` tags, each
//! adding `per_tag` migration scripts under `migrations/`, built in one
//! `git fast-import` so that it takes well under a second.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use migration_core::generate::ScriptInfo;
use migration_core::{Sha256Digest, Slug, Tier};

use crate::inputs::{release_label, script_bytes, slug};

/// Path of the migrations tree inside the repository.
pub const TREE_PATH: &str = "migrations";

/// The generated repository.
#[derive(Debug)]
pub struct GitRepo {
    /// Where it lives (removed on drop).
    pub dir: tempfile::TempDir,
    /// The release tags, oldest first.
    pub tags: Vec<String>,
    /// The scripts at HEAD, as `generate` reads the working tree.
    pub disk: BTreeMap<Slug, ScriptInfo>,
}

impl GitRepo {
    /// Builds the repository.
    ///
    /// # Panics
    /// If `git` is missing or fails.
    pub fn build(tags: usize, per_tag: usize) -> Self {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let git = |args: &[&str]| {
            let status = Command::new("git")
                .arg("-C")
                .arg(dir.path())
                .args(args)
                .stdout(Stdio::null())
                .status()
                .expect("git runs");
            assert!(status.success(), "git {args:?} failed");
        };
        git(&["init", "-q"]);
        git(&["symbolic-ref", "HEAD", "refs/heads/main"]);
        let mut stream: Vec<u8> = Vec::new();
        let mut disk = BTreeMap::new();
        let mut names = Vec::with_capacity(tags);
        for t in 0..tags {
            let mark = t + 1;
            let message = format!("release {}\n", release_label(t));
            write!(
                stream,
                "commit refs/heads/main\nmark :{mark}\ncommitter Bench <bench@example.invalid> {} +0000\ndata {}\n{message}",
                1_786_529_040 + t * 3600,
                message.len()
            )
            .expect("writing to a Vec");
            if t > 0 {
                writeln!(stream, "from :{}", mark - 1).expect("writing to a Vec");
            }
            for k in 0..per_tag {
                let i = t * per_tag + k;
                let s = slug(i);
                let tier = if i % 5 == 4 {
                    Tier::Background
                } else {
                    Tier::PreApply
                };
                let requires = if i % 10 == 3 {
                    vec![slug(i - 1)]
                } else {
                    Vec::new()
                };
                let bytes = script_bytes(&s, tier, "abort", &requires);
                write!(
                    stream,
                    "M 100644 inline {TREE_PATH}/{tier}/{s}\ndata {}\n",
                    bytes.len()
                )
                .expect("writing to a Vec");
                stream.extend_from_slice(&bytes);
                stream.push(b'\n');
                disk.insert(
                    s,
                    ScriptInfo {
                        tier,
                        sha256: Sha256Digest::of(&bytes),
                        requires,
                    },
                );
            }
            let tag = release_label(t);
            write!(stream, "reset refs/tags/{tag}\nfrom :{mark}\n\n").expect("writing to a Vec");
            names.push(tag);
        }
        let mut child = Command::new("git")
            .arg("-C")
            .arg(dir.path())
            .args(["fast-import", "--quiet"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .expect("git fast-import starts");
        child
            .stdin
            .take()
            .expect("a stdin pipe")
            .write_all(&stream)
            .expect("fast-import reads its input");
        assert!(
            child.wait().expect("fast-import ends").success(),
            "fast-import failed"
        );
        GitRepo {
            dir,
            tags: names,
            disk,
        }
    }

    /// The repository root.
    pub fn root(&self) -> &Path {
        self.dir.path()
    }

    /// The git adapter's whole read: `migrate_repo::git::Repo::history`.
    pub fn history(&self) -> migration_core::ReleaseHistory {
        migrate_repo::git::Repo::new(self.root())
            .history(TREE_PATH, "v*", self.disk.clone(), Vec::new())
            .expect("the history reads")
    }

    /// The floor: listing the same trees with plain `git ls-tree`, one
    /// process per tag, as a shell loop would. Returns the bytes listed.
    pub fn ls_tree_all(&self) -> usize {
        let mut bytes = 0;
        for tag in &self.tags {
            let out = Command::new("git")
                .arg("-C")
                .arg(self.root())
                .args([
                    "ls-tree",
                    "-z",
                    &format!("refs/tags/{tag}^{{commit}}"),
                    "--",
                    &format!("{TREE_PATH}/pre-apply/"),
                    &format!("{TREE_PATH}/background/"),
                ])
                .stdin(Stdio::null())
                .output()
                .expect("git ls-tree runs");
            assert!(out.status.success(), "git ls-tree failed");
            bytes += out.stdout.len();
        }
        bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_adapter_reads_every_tag_and_generation_succeeds() {
        let repo = GitRepo::build(12, 2);
        let history = repo.history();
        assert_eq!(history.line.len(), 12);
        assert_eq!(history.line[11].scripts.len(), 24);
        let manifest = migration_core::generate(&history).unwrap();
        assert_eq!(manifest.len(), 24);
        assert!(repo.ls_tree_all() > 0);
    }
}
