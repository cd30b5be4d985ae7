//! Reading a tree from disk: symlinks followed only inside the tree, sizes
//! and counts capped, every problem collected rather than the first
//! returned. What is read is validated as raw [`TreeFiles`].

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

use super::{
    LEGACY_MAP_FILE, LIB_DIR, MigrationsTree, ORDER_DIR, PLACEHOLDER_FILES, REVOKED_FILE,
    TreeError, TreeFiles, TreeProblem,
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
            root: &canonical_root,
            display_root: root,
            options,
            problems: Vec::new(),
        };
        let mut files = TreeFiles::default();
        for tier in Tier::ALL {
            loader.read_tier(tier, &mut files.scripts)?;
        }
        files.lib = loader.read_lib()?;
        files.revoked = loader.read_optional(REVOKED_FILE)?;
        files.legacy_map = loader.read_optional(LEGACY_MAP_FILE)?;
        if options.read_manifest {
            files.order = loader.read_order()?;
        }
        let read_problems = std::mem::take(&mut loader.problems);
        Self::assemble(
            canonical_root,
            root,
            files,
            read_problems,
            options.read_manifest,
        )
    }
}

/// Files by name, as read from one directory.
type NamedFiles = Vec<(String, Vec<u8>)>;

/// One read of a tree: the canonical root it reads below, the root as the
/// caller named it (for messages), and the problems found so far.
struct Loader<'a> {
    root: &'a Path,
    display_root: &'a Path,
    options: LoadOptions,
    problems: Vec<TreeProblem>,
}

/// What a directory entry turned out to be, after following an in-tree symlink.
enum Resolved {
    File(PathBuf, u64),
    Dir(PathBuf),
    Rejected,
}

impl Loader<'_> {
    fn io(&self, path: &Path) -> impl FnOnce(std::io::Error) -> TreeError + use<> {
        let path = self
            .display_root
            .join(path.strip_prefix(self.root).unwrap_or(path));
        move |source| TreeError::Io { path, source }
    }

    fn relative(&self, path: &Path) -> PathBuf {
        path.strip_prefix(self.root).unwrap_or(path).to_path_buf()
    }

    /// Follows a symlink only if it stays inside the tree.
    fn resolve(&mut self, path: &Path) -> Result<Resolved, TreeError> {
        let meta = fs::symlink_metadata(path).map_err(self.io(path))?;
        let (target, meta) = if meta.file_type().is_symlink() {
            let target = match fs::canonicalize(path) {
                Ok(t) => t,
                Err(_) => {
                    self.problems.push(TreeProblem::UnexpectedEntry {
                        path: self.relative(path),
                        reason: "dangling symlink",
                    });
                    return Ok(Resolved::Rejected);
                }
            };
            if !target.starts_with(self.root) {
                self.problems.push(TreeProblem::SymlinkEscapes {
                    path: self.relative(path),
                    target,
                });
                return Ok(Resolved::Rejected);
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
            self.problems.push(TreeProblem::UnexpectedEntry {
                path: self.relative(path),
                reason: "not a regular file or directory",
            });
            Ok(Resolved::Rejected)
        }
    }

    /// Reads a file no larger than the cap; `None` (with a problem) if larger.
    fn read_capped(
        &mut self,
        shown: &Path,
        target: &Path,
        len: u64,
    ) -> Result<Option<Vec<u8>>, TreeError> {
        let limit = self.options.max_file_bytes;
        if len > limit {
            self.problems.push(TreeProblem::TooLarge {
                path: self.relative(shown),
                size: len,
                limit,
            });
            return Ok(None);
        }
        let file = fs::File::open(target).map_err(self.io(shown))?;
        let mut bytes = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
        // Read one byte past the cap: the file may have grown since stat.
        file.take(limit + 1)
            .read_to_end(&mut bytes)
            .map_err(self.io(shown))?;
        if bytes.len() as u64 > limit {
            self.problems.push(TreeProblem::TooLarge {
                path: self.relative(shown),
                size: bytes.len() as u64,
                limit,
            });
            return Ok(None);
        }
        Ok(Some(bytes))
    }

    fn sorted_entries(&self, dir: &Path) -> Result<Vec<(PathBuf, Option<String>)>, TreeError> {
        Ok(self
            .sorted_typed_entries(dir)?
            .into_iter()
            .map(|(path, name, _)| (path, name))
            .collect())
    }

    /// The entries of `dir` in name order, each with whether the directory
    /// itself says it is a plain regular file (not a symlink). That comes
    /// with the listing (`d_type`), so it costs no system call.
    fn sorted_typed_entries(
        &self,
        dir: &Path,
    ) -> Result<Vec<(PathBuf, Option<String>, bool)>, TreeError> {
        let mut out = Vec::new();
        for item in fs::read_dir(dir).map_err(self.io(dir))? {
            let item = item.map_err(self.io(dir))?;
            let name = item.file_name().to_str().map(str::to_owned);
            let regular = item.file_type().is_ok_and(|t| t.is_file());
            out.push((item.path(), name, regular));
        }
        // One directory: byte order of the paths is the order of the
        // names, and much cheaper than comparing path components.
        out.sort_unstable_by(|a, b| a.0.as_os_str().cmp(b.0.as_os_str()));
        Ok(out)
    }

    /// Reads a file the listing says is regular: open, read, close; no
    /// stat (the cap is enforced by reading at most one byte past it).
    /// `scratch` is reused between files so each read is one system call
    /// plus the one that finds the end.
    fn read_listed_file(
        &mut self,
        path: &Path,
        scratch: &mut Vec<u8>,
    ) -> Result<Option<Vec<u8>>, TreeError> {
        let limit = self.options.max_file_bytes;
        // The error's path is only built when there is an error.
        let file = fs::File::open(path).map_err(|e| self.io(path)(e))?;
        scratch.clear();
        file.take(limit + 1)
            .read_to_end(scratch)
            .map_err(|e| self.io(path)(e))?;
        if scratch.len() as u64 > limit {
            // Rare: look up the real size for the message.
            let size = fs::metadata(path).map_or(scratch.len() as u64, |m| m.len());
            self.problems.push(TreeProblem::TooLarge {
                path: self.relative(path),
                size,
                limit,
            });
            return Ok(None);
        }
        Ok(Some(scratch.as_slice().to_vec()))
    }

    fn read_tier(
        &mut self,
        tier: Tier,
        out: &mut Vec<(Tier, String, Vec<u8>)>,
    ) -> Result<(), TreeError> {
        let dir = self.root.join(tier.as_str());
        if fs::symlink_metadata(&dir).is_err() {
            return Ok(());
        }
        let Resolved::Dir(dir) = self.resolve(&dir)? else {
            return Ok(());
        };
        let mut scratch = Vec::with_capacity(64 * 1024);
        for (path, name, regular) in self.sorted_typed_entries(&dir)? {
            let Some(name) = name else {
                self.problems.push(TreeProblem::NonUtf8Name {
                    path: self.relative(&path),
                });
                continue;
            };
            if PLACEHOLDER_FILES.contains(&name.as_str()) {
                continue;
            }
            if regular {
                // The common case, at two system calls beyond reading
                // (open, close); symlinks and the rest are resolved below.
                if let Some(bytes) = self.read_listed_file(&path, &mut scratch)? {
                    out.push((tier, name, bytes));
                }
                continue;
            }
            match self.resolve(&path)? {
                Resolved::File(target, len) => {
                    if let Some(bytes) = self.read_capped(&path, &target, len)? {
                        out.push((tier, name, bytes));
                    }
                }
                Resolved::Dir(_) => self.problems.push(TreeProblem::UnexpectedEntry {
                    path: PathBuf::from(tier.as_str()).join(&name),
                    reason: "a directory where a script belongs; tier directories are flat",
                }),
                Resolved::Rejected => {}
            }
        }
        Ok(())
    }

    fn read_lib(&mut self) -> Result<Vec<(String, Vec<u8>)>, TreeError> {
        let mut files = Vec::new();
        let lib = self.root.join(LIB_DIR);
        if fs::symlink_metadata(&lib).is_err() {
            return Ok(files);
        }
        // Explicit stack: a deep directory chain cannot overflow recursion.
        let mut stack: Vec<(PathBuf, String)> = vec![(lib, String::new())];
        while let Some((dir, prefix)) = stack.pop() {
            let Resolved::Dir(dir) = self.resolve(&dir)? else {
                continue;
            };
            for (path, name) in self.sorted_entries(&dir)? {
                let Some(name) = name else {
                    self.problems.push(TreeProblem::NonUtf8Name {
                        path: self.relative(&path),
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
                    .map_err(self.io(&path))?
                    .file_type()
                    .is_symlink();
                match self.resolve(&path)? {
                    Resolved::File(target, len) => {
                        if files.len() >= self.options.max_lib_files {
                            self.problems.push(TreeProblem::TooManyFiles {
                                path: PathBuf::from(LIB_DIR),
                                limit: self.options.max_lib_files,
                            });
                            return Ok(files);
                        }
                        if let Some(bytes) = self.read_capped(&path, &target, len)? {
                            files.push((rel, bytes));
                        }
                    }
                    Resolved::Dir(_) if is_symlink => {
                        self.problems.push(TreeProblem::UnexpectedEntry {
                            path: self.relative(&path),
                            reason: "symlinked directory under lib/ (not followed)",
                        })
                    }
                    Resolved::Dir(sub) => stack.push((sub, rel)),
                    Resolved::Rejected => {}
                }
            }
        }
        Ok(files)
    }

    fn read_order(&mut self) -> Result<Option<NamedFiles>, TreeError> {
        let dir = self.root.join(ORDER_DIR);
        if fs::symlink_metadata(&dir).is_err() {
            return Ok(None);
        }
        let Resolved::Dir(dir) = self.resolve(&dir)? else {
            return Ok(None);
        };
        let mut files = Vec::new();
        for (path, name) in self.sorted_entries(&dir)? {
            let Some(name) = name else {
                self.problems.push(TreeProblem::NonUtf8Name {
                    path: self.relative(&path),
                });
                continue;
            };
            match self.resolve(&path)? {
                Resolved::File(target, len) => {
                    if let Some(bytes) = self.read_capped(&path, &target, len)? {
                        files.push((name, bytes));
                    }
                }
                Resolved::Dir(_) => self.problems.push(TreeProblem::UnexpectedEntry {
                    path: self.relative(&path),
                    reason: "a directory inside order.d/",
                }),
                Resolved::Rejected => {}
            }
        }
        Ok(Some(files))
    }

    fn read_optional(&mut self, name: &str) -> Result<Option<Vec<u8>>, TreeError> {
        let path = self.root.join(name);
        if fs::symlink_metadata(&path).is_err() {
            return Ok(None);
        }
        match self.resolve(&path)? {
            Resolved::File(target, len) => self.read_capped(&path, &target, len),
            Resolved::Dir(_) => {
                self.problems.push(TreeProblem::UnexpectedEntry {
                    path: PathBuf::from(name),
                    reason: "expected a file",
                });
                Ok(None)
            }
            Resolved::Rejected => Ok(None),
        }
    }
}
