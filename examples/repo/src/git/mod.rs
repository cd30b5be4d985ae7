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
mod shipped;
mod tags;

use blob::BlobReader;
pub use history::{LineHistory, TreePaths};
pub use shipped::{PlacedScript, ShippedEdit, locate};

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

/// HEAD's release line: the tags merged into HEAD that form one chain of
/// ancestry in version order, and those left off it (`Repo::chain`).
#[derive(Debug, Clone, Default)]
pub struct Chain {
    /// The line's tags, in version order.
    pub line: Vec<(Version, String)>,
    /// Merged tags that are not on the chain, in version order.
    pub off_line: Vec<OffLine>,
}

/// A tag merged into HEAD but left off its release line.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct OffLine {
    /// The tag.
    pub tag: String,
    /// The line's tag it is not in ancestry order with.
    pub against: String,
}

impl OffLine {
    fn new(tags: &[(Version, String)], tag: usize, against: usize) -> Self {
        OffLine {
            tag: tags[tag].1.clone(),
            against: tags[against].1.clone(),
        }
    }
}

/// A repository and the migrations path inside it.
#[derive(Debug, Clone)]
pub struct Repo {
    root: PathBuf,
    allow_new_path: bool,
    allow_missing_tree: bool,
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
            allow_missing_tree: false,
        }
    }

    /// Reads a tag without the migrations tree at the paths given as
    /// shipping nothing, instead of [`GitError::TreeMissing`] or
    /// [`GitError::PathInNoTag`]: for checks that only compare what tags
    /// did ship ([`Repo::shipped_edits`]), never for generating a manifest,
    /// where a tag read as empty would silently shrink it.
    pub fn allow_missing_tree(mut self, allow: bool) -> Self {
        self.allow_missing_tree = allow;
        self
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

    /// The release line of HEAD among `merged` (the matching tags merged
    /// into HEAD, in version order), and the merged tags left off it
    /// (CONTRACT.md §4.1).
    ///
    /// Real repositories tag release branches and merge them back, and tag
    /// pre-releases on branches that are not ancestors of one another
    /// (`v0.31.0-rc.3` after `v0.31.0-rc1`), so "every merged tag is an
    /// ancestor of the next" does not hold for them. The line is therefore a
    /// chain, built from the newest version down: a final release is on it
    /// when it is an ancestor of the final release kept above it; a
    /// pre-release when it is an ancestor of the tag kept above it and a
    /// descendant of the final release kept below it, so a pre-release never
    /// pushes a final release off the line. Each tag on the line is then an
    /// ancestor of every later one, and the chain below a tag is the same
    /// whether built at that tag or later: the manifest at a tag stays an
    /// order-prefix of later ones. Tags left off ship no batch; they are
    /// compared by the immutability guard like other lines' tags.
    ///
    /// Two git processes in all: one lists the commit of every tag, one
    /// the parents of every commit reachable from HEAD; ancestry is then
    /// walked in memory (one `merge-base` per pair cost half the adapter's
    /// time at 300 tags).
    pub(crate) fn chain(&self, merged: Vec<(Version, String)>) -> Result<Chain, GitError> {
        if merged.len() < 2 {
            return Ok(Chain {
                line: merged,
                off_line: Vec::new(),
            });
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
        // Every merged tag is in HEAD's history.
        for row in self.lines(&["rev-list", "--parents", "HEAD"])? {
            let mut ids = row.split(' ').map(str::to_owned);
            if let Some(commit) = ids.next() {
                parents.insert(commit, ids.collect());
            }
        }
        let commits = merged
            .iter()
            .map(|(_, tag)| {
                commit_of
                    .get(tag)
                    .cloned()
                    .ok_or_else(|| GitError::Protocol {
                        args: "for-each-ref refs/tags".into(),
                        detail: format!("no commit for tag {tag}"),
                    })
            })
            .collect::<Result<Vec<String>, _>>()?;
        let ancestor = |low: usize, high: usize| reaches(&parents, &commits[high], &commits[low]);
        // Final releases first, newest down.
        let mut kept = vec![false; merged.len()];
        let mut off: Vec<(usize, usize)> = Vec::new();
        let mut above: Option<usize> = None;
        for i in (0..merged.len()).rev() {
            if merged[i].0.is_prerelease() {
                continue;
            }
            match above {
                Some(a) if !ancestor(i, a) => off.push((i, a)),
                _ => {
                    kept[i] = true;
                    above = Some(i);
                }
            }
        }
        // Then pre-releases, between the final releases kept around them.
        let mut above: Option<usize> = None;
        for i in (0..merged.len()).rev() {
            if !merged[i].0.is_prerelease() {
                if kept[i] {
                    above = Some(i);
                }
                continue;
            }
            let below = (0..i)
                .rev()
                .find(|&b| kept[b] && !merged[b].0.is_prerelease());
            let fits_above = above.is_none_or(|a| ancestor(i, a));
            let fits_below = below.is_none_or(|b| ancestor(b, i));
            if fits_above && fits_below {
                kept[i] = true;
                above = Some(i);
            } else {
                let other = if fits_above { below } else { above };
                off.push((i, other.unwrap_or(i)));
            }
        }
        off.sort_unstable();
        let off_line = off
            .into_iter()
            .map(|(tag, against)| OffLine::new(&merged, tag, against))
            .collect();
        let line = merged
            .into_iter()
            .zip(kept)
            .filter_map(|(tag, kept)| kept.then_some(tag))
            .collect();
        Ok(Chain { line, off_line })
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
