//! A shipped script edited before the next release: the immutability guard
//! of `migrate manifest` (CONTRACT.md §4.5), asked early by `migrate lint`
//! and `migrate plan` from the repository the tree is in.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use migration_core::generate::{GenerateProblem, Place, ReleaseHistory, content_changes};
use migration_core::header::HeaderMarker;
use migration_core::{MigrationsTree, Sha256Digest, Slug};

use crate::git::{BlobReader, GitError, Repo, TreePaths};

/// A script on disk whose slug a release tag shipped with other bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ShippedEdit {
    /// The slug.
    pub slug: Slug,
    /// The script's path relative to the tree (`pre-apply/<slug>`).
    pub file: PathBuf,
    /// The same file as git names it, from the repository's top.
    pub repo_file: String,
    /// The first tag that shipped the slug with other content.
    pub tag: String,
    /// The checksum that tag shipped.
    pub shipped: Sha256Digest,
    /// The checksum on disk.
    pub on_disk: Sha256Digest,
}

impl std::fmt::Display for ShippedEdit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "'{}' shipped in tag {} ({}), but the script on disk differs ({}); a shipped slug is \
             immutable and clusters that ran it will never run the edit: restore the shipped \
             bytes (git checkout {} -- {}) and ship the change under a new slug \
             (migrate new)",
            self.slug, self.tag, self.shipped, self.on_disk, self.tag, self.repo_file
        )
    }
}

/// A script on disk and the release tag whose manifest batch placed it
/// (the first tag of the line that shipped it, CONTRACT.md §4.1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlacedScript {
    /// The slug.
    pub slug: Slug,
    /// The script's path relative to the tree.
    pub file: PathBuf,
    /// The tag.
    pub tag: String,
    /// The checksum on disk.
    pub on_disk: Sha256Digest,
}

/// `file` (relative to the tree at `path`) as git names it from the top.
fn in_repo(path: &str, file: &Path) -> String {
    match path.trim_matches('/') {
        "" | "." => file.display().to_string(),
        dir => format!("{dir}/{}", file.display()),
    }
}

/// The git work tree `dir` lies in, and `dir`'s path inside it (`.` at its
/// top); `None` when `dir` is in no work tree, the work tree has no commit
/// yet, or git cannot say. Looks for
/// a `.git` entry above `dir` before asking git, so that a tree with no
/// repository around it (an image's) costs no process.
pub fn locate(dir: &Path) -> Option<(Repo, String)> {
    let full = std::fs::canonicalize(dir).ok()?;
    if !full.ancestors().any(|a| a.join(".git").exists()) {
        return None;
    }
    let out = Command::new("git")
        .arg("-C")
        .arg(&full)
        // `HEAD` too: a repository with no commit yet (just `git init`) has
        // shipped nothing, and git fails on it, so it is no repository here.
        .args(["rev-parse", "--show-toplevel", "--show-prefix", "HEAD"])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8(out.stdout).ok()?;
    let mut lines = text.lines();
    let top = PathBuf::from(lines.next()?);
    let prefix = lines.next().unwrap_or("").trim_end_matches('/');
    let path = if prefix.is_empty() { "." } else { prefix };
    Some((Repo::new(&top), path.to_owned()))
}

impl Repo {
    /// The scripts of `tree` (at `path` inside this repository) whose slug
    /// a release tag matching `pattern` shipped with other bytes: what the
    /// immutability guard of `migrate manifest` will refuse at the next
    /// release ([`content_changes`] on the same history), in slug order.
    /// Tags without the tree at `path` ship nothing here (a tree that moved
    /// is compared with the tags that have it where it is now). The tags'
    /// scripts are read with `marker`, the tree's own.
    pub fn shipped_edits(
        &self,
        path: &str,
        pattern: &str,
        tree: &MigrationsTree,
        marker: &HeaderMarker,
    ) -> Result<Vec<ShippedEdit>, GitError> {
        let paths = [path.to_owned()];
        let reading = TreePaths {
            paths: &paths,
            tree_since: None,
            marker,
        };
        let history = self
            .clone()
            .allow_new_path(true)
            .allow_missing_tree(true)
            .history_at(
                &reading,
                pattern,
                ReleaseHistory::disk_from_tree(tree),
                ReleaseHistory::legacy_from_pairs(tree.legacy_map()),
            )?
            .history;
        Ok(content_changes(&history)
            .into_iter()
            .filter_map(|problem| match problem {
                GenerateProblem::ContentChanged {
                    slug,
                    first: Place::Tag(tag),
                    first_sha,
                    second: Place::Disk,
                    second_sha,
                } => {
                    let file = tree
                        .script(&slug)
                        .map_or_else(|| PathBuf::from(slug.as_str()), |s| s.relative_path());
                    let repo_file = in_repo(path, &file);
                    Some(ShippedEdit {
                        file,
                        repo_file,
                        slug,
                        tag,
                        shipped: first_sha,
                        on_disk: second_sha,
                    })
                }
                _ => None,
            })
            .collect())
    }

    /// Each of `scripts` (under the tree at `path`) that the tag whose
    /// batch placed it shipped with other bytes: the check of one pending
    /// script against what shipped it, one `git cat-file` for all, without
    /// reading every tag's tree as [`Repo::shipped_edits`] does. A tag
    /// without the file there (the tree moved, or the tag is not fetched)
    /// is passed over: there is nothing to compare with.
    pub fn edits_since_placed(
        &self,
        path: &str,
        scripts: &[PlacedScript],
    ) -> Result<Vec<ShippedEdit>, GitError> {
        if scripts.is_empty() {
            return Ok(Vec::new());
        }
        let mut reader = BlobReader::start(&self.root)?;
        let mut edits = Vec::new();
        for script in scripts {
            let repo_file = in_repo(path, &script.file);
            let name = format!("refs/tags/{}^{{commit}}:{repo_file}", script.tag);
            let Some(bytes) = reader.read_named(&name)? else {
                continue;
            };
            let shipped = Sha256Digest::of(&bytes);
            if shipped != script.on_disk {
                edits.push(ShippedEdit {
                    slug: script.slug.clone(),
                    file: script.file.clone(),
                    repo_file,
                    tag: script.tag.clone(),
                    shipped,
                    on_disk: script.on_disk,
                });
            }
        }
        reader.finish()?;
        Ok(edits)
    }
}
