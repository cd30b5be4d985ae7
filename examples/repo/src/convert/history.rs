//! Reading a numbered migrations directory: the working tree's copy and the
//! copy at every release tag (CONTRACT.md §4.1 tag rules), split into
//! numbered slots, `lib/` helpers and everything else.

use std::collections::BTreeMap;
use std::path::Path;

use migration_core::line_file::decimal;
use migration_core::version::Version;

use super::ConvertError;
use crate::git::Repo;

/// One copy of the numbered directory: at a tag, or on disk.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// The tag, or `None` for the working tree.
    pub tag: Option<String>,
    /// The tag's version (`None` on disk).
    pub version: Option<Version>,
    /// Whether the tag is merged into HEAD (the converted line); true on disk.
    pub on_line: bool,
    /// Slot number to script bytes: files whose name is a decimal integer.
    pub slots: BTreeMap<u64, Vec<u8>>,
    /// Files under `lib/`, by path relative to `lib/`.
    pub lib: BTreeMap<String, Vec<u8>>,
    /// Other files (relative paths): not converted, named in the report.
    pub other: Vec<String>,
}

/// The disk copy and every matching tag's copy, tags in version order.
#[derive(Debug, Clone)]
pub struct History {
    /// The working tree's directory.
    pub disk: Snapshot,
    /// Every tag matching the pattern, oldest first.
    pub tags: Vec<Snapshot>,
    /// The maintainer says clusters ran pre-releases: contents only a
    /// pre-release held are candidates of what a cluster ran.
    pub prereleases_ran: bool,
}

impl History {
    /// The newest tag merged into HEAD: a cluster upgraded by the converted
    /// tree ran at most the releases up to it (no downgrades).
    pub fn newest_line_tag(&self) -> Option<&Snapshot> {
        self.tags.iter().rev().find(|t| t.on_line)
    }
}

/// Whether a version tag (already parsed as one) names a pre-release:
/// a `-` before any `+BUILD`.
pub fn is_prerelease(tag: &str) -> bool {
    tag.split('+').next().is_some_and(|core| core.contains('-'))
}

/// Reads the history of `path` in `repo` for the tags matching `pattern`;
/// a tag without `path` is read at the first of `old_paths` it has (where
/// the directory lived before it moved), so early slots whose content
/// changed there are seen as diverged; with `skip_prereleases`, pre-release
/// tags are not read at all; with `prereleases_ran`, contents only a
/// pre-release held count as what a cluster may have run.
pub fn read(
    repo: &Path,
    path: &str,
    old_paths: &[String],
    pattern: &str,
    skip_prereleases: bool,
    prereleases_ran: bool,
) -> Result<History, ConvertError> {
    let disk_dir = repo.join(path);
    let disk =
        split(None, None, true, read_dir(&disk_dir)?).map_err(|file| ConvertError::BadName {
            place: format!("{}", disk_dir.join(file).display()),
        })?;
    let git = Repo::new(repo);
    git.check_not_shallow()?;
    let mut all = git.release_tags(pattern, false)?;
    if skip_prereleases {
        all.retain(|(_, t)| !is_prerelease(t));
    }
    let merged: std::collections::HashSet<String> = git
        .release_tags(pattern, true)?
        .into_iter()
        .map(|(_, t)| t)
        .collect();
    let names: Vec<String> = all.iter().map(|(_, t)| t.clone()).collect();
    let paths: Vec<String> = std::iter::once(path.to_owned())
        .chain(old_paths.iter().cloned())
        .collect();
    let files = git.files_at_tags(&names, &paths)?;
    let mut tags = Vec::with_capacity(all.len());
    for ((version, tag), files) in all.into_iter().zip(files) {
        let on_line = merged.contains(&tag);
        let snap = split(Some(tag.clone()), Some(version), on_line, files).map_err(|file| {
            ConvertError::BadName {
                place: format!("tag {tag}: {path}/{file}"),
            }
        })?;
        tags.push(snap);
    }
    Ok(History {
        disk,
        tags,
        prereleases_ran,
    })
}

/// Sorts a directory's files into slots, `lib/` and others. A numbered
/// name with a leading zero (`042`) is refused: the numbered runner calls
/// `42`, and two spellings of one slot must not both convert.
fn split(
    tag: Option<String>,
    version: Option<Version>,
    on_line: bool,
    files: BTreeMap<String, Vec<u8>>,
) -> Result<Snapshot, String> {
    let mut snap = Snapshot {
        tag,
        version,
        on_line,
        slots: BTreeMap::new(),
        lib: BTreeMap::new(),
        other: Vec::new(),
    };
    for (rel, bytes) in files {
        if let Some(helper) = rel.strip_prefix("lib/") {
            snap.lib.insert(helper.to_owned(), bytes);
        } else if !rel.is_empty() && rel.bytes().all(|b| b.is_ascii_digit()) {
            // All digits but not an integer as written (`01`, past u64): refused.
            let Some(n) = decimal(&rel) else {
                return Err(rel);
            };
            snap.slots.insert(n, bytes);
        } else {
            snap.other.push(rel);
        }
    }
    Ok(snap)
}

/// Every regular file under `dir`, recursively, by `/`-separated relative
/// path. A symlink is refused: the converted tree must not depend on it.
pub(super) fn read_dir(dir: &Path) -> Result<BTreeMap<String, Vec<u8>>, ConvertError> {
    let mut out = BTreeMap::new();
    let mut stack = vec![(dir.to_path_buf(), String::new())];
    while let Some((abs, rel)) = stack.pop() {
        let io = |source| ConvertError::Io {
            path: abs.clone(),
            source,
        };
        for entry in std::fs::read_dir(&abs).map_err(io)? {
            let entry = entry.map_err(io)?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let child_rel = if rel.is_empty() {
                name.clone()
            } else {
                format!("{rel}/{name}")
            };
            let kind = entry.file_type().map_err(io)?;
            let path = entry.path();
            if kind.is_symlink() {
                return Err(ConvertError::Symlink { path });
            } else if kind.is_dir() {
                stack.push((path, child_rel));
            } else {
                let bytes = std::fs::read(&path).map_err(|source| ConvertError::Io {
                    path: path.clone(),
                    source,
                })?;
                out.insert(child_rel, bytes);
            }
        }
    }
    Ok(out)
}
