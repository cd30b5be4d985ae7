//! What every read of a tree shares: where it reads, how it names what it
//! read, and the limits ([`LoadOptions`]); the loader and each tier's
//! reader both use it, and neither imports the other for it.

use std::fs;
use std::path::{Path, PathBuf};

use super::{TreeError, TreeProblem, supplied};
use crate::header::HeaderMarker;

/// Limits applied while loading, so hostile input cannot exhaust memory,
/// and what the headers are read with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadOptions {
    /// Largest script, helper or list file read, in bytes.
    pub max_file_bytes: u64,
    /// Most files accepted under `lib/`.
    pub max_lib_files: usize,
    /// Read `order.d/`. Off when the manifest is about to be generated: a
    /// stale one must not block its own regeneration, and `requires` targets
    /// that only a manifest knows (retired slugs) are then checked by
    /// generation instead.
    pub read_manifest: bool,
    /// The header marker the scripts are read with. `None` (the default):
    /// the tree's `migrate.toml` names it, or it is `cozystack-migration`
    /// ([`crate::settings`]); `Some` overrides the file.
    pub header_marker: Option<HeaderMarker>,
}

impl Default for LoadOptions {
    fn default() -> Self {
        LoadOptions {
            max_file_bytes: supplied::MAX_FILE_BYTES,
            max_lib_files: 10_000,
            read_manifest: true,
            header_marker: None,
        }
    }
}

/// What every read of one tree shares, and nothing it changes, so several
/// threads can read with it at once: the canonical root it reads below,
/// the root as the caller named it (for messages), the limits, and the
/// header marker the scripts are read with.
#[derive(Debug, Clone, Copy)]
pub(super) struct Reader<'a> {
    pub(super) root: &'a Path,
    pub(super) display_root: &'a Path,
    pub(super) options: &'a LoadOptions,
    pub(super) marker: &'a HeaderMarker,
}

/// What a directory entry turned out to be, after following an in-tree symlink.
pub(super) enum Resolved {
    File(PathBuf, u64),
    Dir(PathBuf),
    /// Refused, with the problem that says why.
    Rejected(TreeProblem),
}

impl Reader<'_> {
    /// The error for a failed system call on `path`, naming it as the
    /// caller named the tree.
    pub(super) fn io(&self, path: &Path) -> impl FnOnce(std::io::Error) -> TreeError + use<> {
        let path = self
            .display_root
            .join(path.strip_prefix(self.root).unwrap_or(path));
        move |source| TreeError::Io { path, source }
    }

    /// `path` relative to the tree root, for problems.
    pub(super) fn relative(&self, path: &Path) -> PathBuf {
        path.strip_prefix(self.root).unwrap_or(path).to_path_buf()
    }

    /// Follows a symlink only if it stays inside the tree.
    pub(super) fn resolve(&self, path: &Path) -> Result<Resolved, TreeError> {
        let meta = fs::symlink_metadata(path).map_err(self.io(path))?;
        let (target, meta) = if meta.file_type().is_symlink() {
            let Ok(target) = fs::canonicalize(path) else {
                return Ok(Resolved::Rejected(TreeProblem::UnexpectedEntry {
                    path: self.relative(path),
                    reason: "dangling symlink",
                }));
            };
            if !target.starts_with(self.root) {
                return Ok(Resolved::Rejected(TreeProblem::File(
                    supplied::FileError::Escapes {
                        path: self.relative(path),
                        target,
                    },
                )));
            }
            let meta = fs::metadata(&target).map_err(self.io(path))?;
            (target, meta)
        } else {
            (path.to_path_buf(), meta)
        };
        if meta.is_file() {
            Ok(Resolved::File(target, meta.len()))
        } else if meta.is_dir() {
            Ok(Resolved::Dir(target))
        } else {
            Ok(Resolved::Rejected(TreeProblem::UnexpectedEntry {
                path: self.relative(path),
                reason: "not a regular file or directory",
            }))
        }
    }

    /// Reads a file no larger than the cap, or the problem if it is larger
    /// or no longer a regular file ([`supplied::open_regular`]: the check
    /// is made on the opened file, whatever `resolve` saw before).
    pub(super) fn read_capped(
        &self,
        shown: &Path,
        target: &Path,
        len: u64,
    ) -> Result<Result<Vec<u8>, TreeProblem>, TreeError> {
        let limit = self.options.max_file_bytes;
        if len > limit {
            return Ok(Err(TreeProblem::File(supplied::FileError::TooLarge {
                path: self.relative(shown),
                size: len,
                limit,
            })));
        }
        let mut bytes = Vec::new();
        Ok(self.read_into(shown, target, &mut bytes).map(|()| bytes))
    }

    /// Reads a file the listing says is regular into `buffer` (replacing
    /// what it held). The buffer is reused between files, so a script
    /// costs no allocation.
    pub(super) fn read_listed_file(
        &self,
        path: &Path,
        buffer: &mut Vec<u8>,
    ) -> Result<Result<(), TreeProblem>, TreeError> {
        Ok(self.read_into(path, path, buffer))
    }

    /// Reads `target` (shown as `shown`) into `buffer` through the one
    /// reader; a refusal is the tree's problem, named relative to its root.
    fn read_into(
        &self,
        shown: &Path,
        target: &Path,
        buffer: &mut Vec<u8>,
    ) -> Result<(), TreeProblem> {
        let limit = self.options.max_file_bytes;
        let read = match supplied::open_regular(target, supplied::Within::Anywhere) {
            Ok(Some((file, len))) => supplied::read_opened(target, file, len, limit, buffer),
            // Listed a moment ago, gone now.
            Ok(None) => Err(supplied::FileError::Io {
                path: target.to_path_buf(),
                source: std::io::ErrorKind::NotFound.into(),
            }),
            Err(e) => Err(e),
        };
        read.map_err(|e| TreeProblem::from(e.named(self.relative(shown))))
    }

    /// The entries of `dir` in name order, each with whether the directory
    /// itself says it is a plain regular file (not a symlink). That comes
    /// with the listing (`d_type`), so it costs no system call.
    pub(super) fn sorted_typed_entries(
        &self,
        dir: &Path,
    ) -> Result<Vec<(std::ffi::OsString, bool)>, TreeError> {
        let mut out = Vec::new();
        for item in fs::read_dir(dir).map_err(self.io(dir))? {
            // The error's path is only built when there is an error.
            let item = item.map_err(|e| self.io(dir)(e))?;
            let regular = item.file_type().is_ok_and(|t| t.is_file());
            out.push((item.file_name(), regular));
        }
        // Byte order of the names (how `OsStr` compares).
        out.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        Ok(out)
    }

    /// The entries of `dir` in name order, as paths with their UTF-8 names.
    pub(super) fn sorted_entries(
        &self,
        dir: &Path,
    ) -> Result<Vec<(PathBuf, Option<String>)>, TreeError> {
        Ok(self
            .sorted_typed_entries(dir)?
            .into_iter()
            .map(|(name, _)| (dir.join(&name), name.into_string().ok()))
            .collect())
    }
}
