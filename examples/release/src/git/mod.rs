//! The git adapter for manifest generation (CONTRACT.md §4): which release tags a
//! build sees, in what order, and what each tag shipped.
//!
//! It shells out to `git` rather than linking a git library: the build stays
//! small on 2 cores, and `git` is on every machine that has a checkout. All
//! blob contents are read through one `git cat-file --batch` process.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use migration_core::version::Version;

mod blob;
mod history;
mod tags;

use blob::BlobReader;
pub use history::TreePaths;

/// Why the release history could not be read. Every variant is fatal:
/// a smaller history would silently produce a smaller manifest.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GitError {
    /// `git` could not be run.
    #[error("cannot run git in {}: {source}", repo.display())]
    Spawn {
        /// The repository.
        repo: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// A git command failed.
    #[error("git {args} failed in {}: {stderr}", repo.display())]
    Command {
        /// The repository.
        repo: PathBuf,
        /// The arguments.
        args: String,
        /// What git said.
        stderr: String,
    },
    /// The clone is shallow: older tags' trees are missing.
    #[error("{} is a shallow clone; manifest generation needs the full history and every release tag (git fetch --unshallow --tags)", repo.display())]
    Shallow {
        /// The repository.
        repo: PathBuf,
    },
    /// A tag that matches the pattern but is not a semantic version.
    #[error(
        "tag {tag:?} matches the release pattern but is not a semantic version (vMAJOR.MINOR.PATCH[-PRERELEASE])"
    )]
    NotSemver {
        /// The tag.
        tag: String,
    },
    /// Release order and history order disagree on this line.
    #[error(
        "release tag {earlier} is not an ancestor of {later}, though it sorts before it: the line's history does not follow release order, so the manifest would insert a batch in the middle"
    )]
    NotLinear {
        /// The tag that sorts first.
        earlier: String,
        /// The tag that sorts next.
        later: String,
    },
    /// Release tags whose tree has the migrations tree at none of the
    /// paths given: it moved, or the tags predate it.
    #[error(
        "release tag(s) {} have no migrations tree at {}: they would silently contribute nothing (a smaller manifest, retired lines lost, slugs in later batches). If the tree moved, give its earlier path too (--path NEW --path OLD); if these releases predate the tree, pass --tree-since <first tag with the tree>",
        tags.join(", "), paths.join(" or ")
    )]
    TreeMissing {
        /// The tags, in release order.
        tags: Vec<String>,
        /// The paths looked at.
        paths: Vec<String>,
    },
    /// A tag holding a migrations tree at more than one of the paths given.
    #[error("release tag {tag} has a migrations tree at each of {}: say which one it used (give only paths that never coexist)", paths.join(", "))]
    AmbiguousPath {
        /// The tag.
        tag: String,
        /// The paths that are trees in it.
        paths: Vec<String>,
    },
    /// Something in a tag's tree that cannot be a migration script.
    #[error("tag {tag}: {path}: {reason}")]
    BadEntry {
        /// The tag.
        tag: String,
        /// The path in the tag's tree.
        path: String,
        /// What is wrong.
        reason: String,
    },
    /// Tags exist, but none matches the release pattern.
    #[error(
        "no tag matches --tag-pattern {pattern:?} (the repository has {tags} other tag(s), e.g. {example}); every migration would be untagged"
    )]
    NoMatchingTag {
        /// The pattern.
        pattern: String,
        /// How many tags the repository has.
        tags: usize,
        /// One of them.
        example: String,
    },
    /// No release tag holds the migrations path.
    #[error(
        "no tag matching {pattern:?} has {path}/pre-apply or {path}/background (checked {tags} tag(s)): is --path right? If the tree is new since the last release, pass --allow-new-path"
    )]
    PathInNoTag {
        /// The path, relative to the repository.
        path: String,
        /// The pattern.
        pattern: String,
        /// How many tags were read.
        tags: usize,
    },
    /// git's output could not be understood.
    #[error("unexpected output from git {args}: {detail}")]
    Protocol {
        /// The command.
        args: String,
        /// What was wrong.
        detail: String,
    },
}

/// A repository and the migrations path inside it.
#[derive(Debug, Clone)]
pub struct Repo {
    root: PathBuf,
    allow_new_path: bool,
}

/// Whether `tag` is a tag of the git repository that `dir` is in (false
/// outside a repository or without git).
pub fn tag_exists(dir: &Path, tag: &str) -> bool {
    Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["rev-parse", "-q", "--verify"])
        .arg(format!("refs/tags/{tag}"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

impl Repo {
    /// The repository at `root`.
    pub fn new(root: &Path) -> Self {
        Repo {
            root: root.to_path_buf(),
            allow_new_path: false,
        }
    }

    /// Accepts a migrations path that no release tag holds yet (a tree
    /// added since the last release); otherwise that is
    /// [`GitError::PathInNoTag`].
    pub fn allow_new_path(mut self, allow: bool) -> Self {
        self.allow_new_path = allow;
        self
    }

    fn git(&self, args: &[&str]) -> Result<Vec<u8>, GitError> {
        let output = Command::new("git")
            .arg("-C")
            .arg(&self.root)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .map_err(|source| GitError::Spawn {
                repo: self.root.clone(),
                source,
            })?;
        if !output.status.success() {
            return Err(GitError::Command {
                repo: self.root.clone(),
                args: args.join(" "),
                stderr: String::from_utf8_lossy(&output.stderr).trim().to_owned(),
            });
        }
        Ok(output.stdout)
    }

    fn lines(&self, args: &[&str]) -> Result<Vec<String>, GitError> {
        let out = self.git(args)?;
        Ok(String::from_utf8_lossy(&out)
            .lines()
            .map(str::to_owned)
            .filter(|l| !l.is_empty())
            .collect())
    }

    /// Checks that each tag of the line is an ancestor of the next one,
    /// with two git processes in all: one lists the commit of every tag, one
    /// the parents of every commit reachable from HEAD; ancestry
    /// is then walked in memory (one `merge-base` per pair cost half the
    /// adapter's time at 300 tags).
    fn check_linear(&self, line: &[(Version, String)]) -> Result<(), GitError> {
        if line.len() < 2 {
            return Ok(());
        }
        let mut commit_of: HashMap<String, String> = HashMap::new();
        for row in self.lines(&[
            "for-each-ref",
            "--format=%(refname:strip=2) %(objectname) %(*objectname)",
            "refs/tags",
        ])? {
            let mut fields = row.split(' ');
            let (name, object, peeled) = (fields.next(), fields.next(), fields.next());
            if let (Some(name), Some(object)) = (name, object) {
                // Annotated tags peel to their commit; lightweight ones are the commit.
                let commit = peeled.filter(|p| !p.is_empty()).unwrap_or(object);
                commit_of.insert(name.to_owned(), commit.to_owned());
            }
        }
        let mut parents: HashMap<String, Vec<String>> = HashMap::new();
        // Every line tag is merged into HEAD, so HEAD's history holds them all.
        for row in self.lines(&["rev-list", "--parents", "HEAD"])? {
            let mut ids = row.split(' ').map(str::to_owned);
            if let Some(commit) = ids.next() {
                parents.insert(commit, ids.collect());
            }
        }
        let protocol = |tag: &str| GitError::Protocol {
            args: "for-each-ref refs/tags".into(),
            detail: format!("no commit for tag {tag}"),
        };
        for pair in line.windows(2) {
            let earlier = commit_of
                .get(&pair[0].1)
                .ok_or_else(|| protocol(&pair[0].1))?;
            let later = commit_of
                .get(&pair[1].1)
                .ok_or_else(|| protocol(&pair[1].1))?;
            if !reaches(&parents, later, earlier) {
                return Err(GitError::NotLinear {
                    earlier: pair[0].1.clone(),
                    later: pair[1].1.clone(),
                });
            }
        }
        Ok(())
    }
    /// Whether the clone is shallow (older tags' trees would be missing).
    pub fn check_not_shallow(&self) -> Result<(), GitError> {
        let shallow = self.lines(&["rev-parse", "--is-shallow-repository"])?;
        if shallow.first().map(String::as_str) == Some("false") {
            Ok(())
        } else {
            Err(GitError::Shallow {
                repo: self.root.clone(),
            })
        }
    }
}

/// Whether `target` is `from` or one of its ancestors in `parents`.
fn reaches(parents: &HashMap<String, Vec<String>>, from: &str, target: &str) -> bool {
    let mut seen: std::collections::HashSet<&str> = std::collections::HashSet::new();
    let mut stack = vec![from];
    while let Some(commit) = stack.pop() {
        if commit == target {
            return true;
        }
        if seen.insert(commit) {
            stack.extend(
                parents
                    .get(commit)
                    .into_iter()
                    .flatten()
                    .map(String::as_str),
            );
        }
    }
    false
}

/// One record of `git ls-tree -z` output: `<mode> <kind> <oid>\t<path>`.
pub(super) struct TreeRecord<'r> {
    /// File mode (`100644`, `100755`, `120000` for a symlink, ...).
    pub(super) mode: &'r str,
    /// Object kind (`blob`, `tree`, `commit`).
    pub(super) kind: &'r str,
    /// Object id.
    pub(super) oid: &'r str,
    /// Path inside the tag's tree.
    pub(super) file: &'r str,
}

impl<'r> TreeRecord<'r> {
    /// Splits one record of `tag`'s listing; a text without a tab is no
    /// ls-tree record.
    pub(super) fn parse(text: &'r str, tag: &str) -> Result<Self, GitError> {
        let (meta, file) = text
            .split_once('\t')
            .ok_or_else(|| bad_entry(tag, text, "unparseable ls-tree record"))?;
        let mut meta = meta.split(' ');
        Ok(TreeRecord {
            mode: meta.next().unwrap_or(""),
            kind: meta.next().unwrap_or(""),
            oid: meta.next().unwrap_or(""),
            file,
        })
    }
}

/// The records of `git ls-tree -z` output, as text.
pub(super) fn ls_tree_records(listing: &[u8]) -> impl Iterator<Item = std::borrow::Cow<'_, str>> {
    listing
        .split(|&b| b == 0)
        .filter(|r| !r.is_empty())
        .map(String::from_utf8_lossy)
}

/// What is wrong with one record (`text`) of `tag`'s tree.
pub(super) fn bad_entry(tag: &str, text: &str, reason: &str) -> GitError {
    GitError::BadEntry {
        tag: tag.to_owned(),
        path: text.to_owned(),
        reason: reason.to_owned(),
    }
}
