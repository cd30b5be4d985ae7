//! Reading a tree from disk: symlinks followed only inside the tree, sizes
//! and counts capped, every problem collected rather than the first
//! returned. Scripts are validated as they are read (see `tier`); the
//! other files are validated as raw [`TreeFiles`].

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

use super::files::ScriptSet;
use super::{
    LEGACY_MAP_FILE, LIB_DIR, MigrationsTree, ORDER_DIR, REVOKED_FILE, TreeError, TreeFiles,
    TreeProblem,
};
use crate::header::Tier;

/// Limits applied while loading, so hostile input cannot exhaust memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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
}

impl Default for LoadOptions {
    fn default() -> Self {
        LoadOptions {
            max_file_bytes: 1024 * 1024,
            max_lib_files: 10_000,
            read_manifest: true,
        }
    }
}

impl MigrationsTree {
    /// Loads and validates the tree at `root` with default limits.
    pub fn load(root: &Path) -> Result<Self, TreeError> {
        Self::load_with(root, LoadOptions::default())
    }

    /// Loads and validates the tree at `root`.
    pub fn load_with(root: &Path, options: LoadOptions) -> Result<Self, TreeError> {
        let _span = tracing::debug_span!("load_tree", root = %root.display()).entered();
        let canonical_root = fs::canonicalize(root).map_err(|source| TreeError::Io {
            path: root.to_path_buf(),
            source,
        })?;
        let has_tier_dir = Tier::ALL
            .iter()
            .any(|t| canonical_root.join(t.as_str()).is_dir());
        if !has_tier_dir {
            return Err(TreeError::NotATree {
                root: root.to_path_buf(),
            });
        }
        let mut loader = Loader {
            reader: Reader {
                root: &canonical_root,
                display_root: root,
                options,
            },
            problems: Vec::new(),
        };
        let mut scripts = ScriptSet::default();
        for tier in Tier::ALL {
            loader.read_tier(tier, &mut scripts)?;
        }
        let mut files = TreeFiles {
            lib: loader.read_lib()?,
            revoked: loader.read_optional(REVOKED_FILE)?,
            legacy_map: loader.read_optional(LEGACY_MAP_FILE)?,
            ..TreeFiles::default()
        };
        if options.read_manifest {
            files.order = loader.read_order()?;
        }
        let problems = loader.problems;
        Self::assemble(
            canonical_root,
            root,
            problems,
            scripts,
            files,
            options.read_manifest,
        )
    }
}

/// Files by name, as read from one directory.
type NamedFiles = Vec<(String, Vec<u8>)>;

/// What every read of one tree shares, and nothing it changes, so several
/// threads can read with it at once: the canonical root it reads below,
/// the root as the caller named it (for messages), and the limits.
#[derive(Debug, Clone, Copy)]
pub(super) struct Reader<'a> {
    root: &'a Path,
    display_root: &'a Path,
    pub(super) options: LoadOptions,
}

/// One read of a tree: its [`Reader`] and the problems found so far.
struct Loader<'a> {
    reader: Reader<'a>,
    problems: Vec<TreeProblem>,
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
                return Ok(Resolved::Rejected(TreeProblem::SymlinkEscapes {
                    path: self.relative(path),
                    target,
                }));
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

    /// Reads a file no larger than the cap, or the problem if it is larger.
    pub(super) fn read_capped(
        &self,
        shown: &Path,
        target: &Path,
        len: u64,
    ) -> Result<Result<Vec<u8>, TreeProblem>, TreeError> {
        let limit = self.options.max_file_bytes;
        if len > limit {
            return Ok(Err(TreeProblem::TooLarge {
                path: self.relative(shown),
                size: len,
                limit,
            }));
        }
        let file = fs::File::open(target).map_err(self.io(shown))?;
        let mut bytes = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
        // Read one byte past the cap: the file may have grown since stat.
        file.take(limit + 1)
            .read_to_end(&mut bytes)
            .map_err(self.io(shown))?;
        if bytes.len() as u64 > limit {
            return Ok(Err(TreeProblem::TooLarge {
                path: self.relative(shown),
                size: bytes.len() as u64,
                limit,
            }));
        }
        Ok(Ok(bytes))
    }

    /// Reads a file the listing says is regular into `buffer` (replacing
    /// what it held): open, read, close; no stat (the cap is enforced by
    /// reading at most one byte past it). The buffer is reused between
    /// files, so a script costs no allocation and its read is one system
    /// call plus the one that finds the end.
    pub(super) fn read_listed_file(
        &self,
        path: &Path,
        buffer: &mut Vec<u8>,
    ) -> Result<Result<(), TreeProblem>, TreeError> {
        let limit = self.options.max_file_bytes;
        // The error's path is only built when there is an error.
        let file = fs::File::open(path).map_err(|e| self.io(path)(e))?;
        buffer.clear();
        file.take(limit + 1)
            .read_to_end(buffer)
            .map_err(|e| self.io(path)(e))?;
        if buffer.len() as u64 > limit {
            // Rare: look up the real size for the message.
            let size = fs::metadata(path).map_or(buffer.len() as u64, |m| m.len());
            return Ok(Err(TreeProblem::TooLarge {
                path: self.relative(path),
                size,
                limit,
            }));
        }
        Ok(Ok(()))
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
    fn sorted_entries(&self, dir: &Path) -> Result<Vec<(PathBuf, Option<String>)>, TreeError> {
        Ok(self
            .sorted_typed_entries(dir)?
            .into_iter()
            .map(|(name, _)| (dir.join(&name), name.into_string().ok()))
            .collect())
    }
}

impl Loader<'_> {
    /// Reads one tier directory's scripts into `scripts`.
    fn read_tier(&mut self, tier: Tier, scripts: &mut ScriptSet) -> Result<(), TreeError> {
        let dir = self.reader.root.join(tier.as_str());
        if fs::symlink_metadata(&dir).is_err() {
            return Ok(());
        }
        let dir = match self.reader.resolve(&dir)? {
            Resolved::Dir(dir) => dir,
            Resolved::File(..) => return Ok(()),
            Resolved::Rejected(problem) => {
                self.problems.push(problem);
                return Ok(());
            }
        };
        let entries = self.reader.sorted_typed_entries(&dir)?;
        super::tier::read_scripts(
            &self.reader,
            tier,
            &dir,
            &entries,
            &mut self.problems,
            scripts,
        )
    }

    fn read_lib(&mut self) -> Result<Vec<(String, Vec<u8>)>, TreeError> {
        let reader = self.reader;
        let mut files = Vec::new();
        let lib = reader.root.join(LIB_DIR);
        if fs::symlink_metadata(&lib).is_err() {
            return Ok(files);
        }
        // Explicit stack: a deep directory chain cannot overflow recursion.
        let mut stack: Vec<(PathBuf, String)> = vec![(lib, String::new())];
        while let Some((dir, prefix)) = stack.pop() {
            let dir = match reader.resolve(&dir)? {
                Resolved::Dir(dir) => dir,
                Resolved::File(..) => continue,
                Resolved::Rejected(problem) => {
                    self.problems.push(problem);
                    continue;
                }
            };
            for (path, name) in reader.sorted_entries(&dir)? {
                let Some(name) = name else {
                    self.problems.push(TreeProblem::NonUtf8Name {
                        path: reader.relative(&path),
                    });
                    continue;
                };
                let rel = if prefix.is_empty() {
                    name
                } else {
                    format!("{prefix}/{name}")
                };
                // Symlinked directories are refused: following them could loop.
                let is_symlink = fs::symlink_metadata(&path)
                    .map_err(reader.io(&path))?
                    .file_type()
                    .is_symlink();
                match reader.resolve(&path)? {
                    Resolved::File(target, len) => {
                        if files.len() >= reader.options.max_lib_files {
                            self.problems.push(TreeProblem::TooManyFiles {
                                path: PathBuf::from(LIB_DIR),
                                limit: reader.options.max_lib_files,
                            });
                            return Ok(files);
                        }
                        match reader.read_capped(&path, &target, len)? {
                            Ok(bytes) => files.push((rel, bytes)),
                            Err(problem) => self.problems.push(problem),
                        }
                    }
                    Resolved::Dir(_) if is_symlink => {
                        self.problems.push(TreeProblem::UnexpectedEntry {
                            path: reader.relative(&path),
                            reason: "symlinked directory under lib/ (not followed)",
                        })
                    }
                    Resolved::Dir(sub) => stack.push((sub, rel)),
                    Resolved::Rejected(problem) => self.problems.push(problem),
                }
            }
        }
        Ok(files)
    }

    fn read_order(&mut self) -> Result<Option<NamedFiles>, TreeError> {
        let reader = self.reader;
        let dir = reader.root.join(ORDER_DIR);
        if fs::symlink_metadata(&dir).is_err() {
            return Ok(None);
        }
        let dir = match reader.resolve(&dir)? {
            Resolved::Dir(dir) => dir,
            Resolved::File(..) => return Ok(None),
            Resolved::Rejected(problem) => {
                self.problems.push(problem);
                return Ok(None);
            }
        };
        let mut files = Vec::new();
        for (path, name) in reader.sorted_entries(&dir)? {
            let Some(name) = name else {
                self.problems.push(TreeProblem::NonUtf8Name {
                    path: reader.relative(&path),
                });
                continue;
            };
            match reader.resolve(&path)? {
                Resolved::File(target, len) => match reader.read_capped(&path, &target, len)? {
                    Ok(bytes) => files.push((name, bytes)),
                    Err(problem) => self.problems.push(problem),
                },
                Resolved::Dir(_) => self.problems.push(TreeProblem::UnexpectedEntry {
                    path: reader.relative(&path),
                    reason: "a directory inside order.d/",
                }),
                Resolved::Rejected(problem) => self.problems.push(problem),
            }
        }
        Ok(Some(files))
    }

    fn read_optional(&mut self, name: &str) -> Result<Option<Vec<u8>>, TreeError> {
        let reader = self.reader;
        let path = reader.root.join(name);
        if fs::symlink_metadata(&path).is_err() {
            return Ok(None);
        }
        let found = match reader.resolve(&path)? {
            Resolved::File(target, len) => reader.read_capped(&path, &target, len)?,
            Resolved::Dir(_) => Err(TreeProblem::UnexpectedEntry {
                path: PathBuf::from(name),
                reason: "expected a file",
            }),
            Resolved::Rejected(problem) => Err(problem),
        };
        match found {
            Ok(bytes) => Ok(Some(bytes)),
            Err(problem) => {
                self.problems.push(problem);
                Ok(None)
            }
        }
    }
}
