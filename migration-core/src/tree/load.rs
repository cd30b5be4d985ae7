//! Reading a tree from disk: symlinks followed only inside the tree, sizes
//! and counts capped, every problem collected rather than the first
//! returned. Scripts are validated as they are read (see `tier`); the
//! other files are validated as raw [`TreeFiles`].

use std::fs;
use std::path::{Path, PathBuf};

use super::files::{ScriptSet, settings_refused};
use super::reader::{LoadOptions, Reader, Resolved};
use super::{
    LEGACY_MAP_FILE, LIB_DIR, MigrationsTree, ORDER_DIR, REVOKED_FILE, TreeError, TreeFiles,
    TreeProblem,
};
use crate::header::Tier;
use crate::settings::{SETTINGS_FILE, Settings};

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
        // The settings first: their header marker is what the scripts are
        // read with.
        let settings_reader = Reader {
            root: &canonical_root,
            display_root: root,
            options: &options,
            marker: &crate::header::HeaderMarker::default(),
        };
        let mut settings_loader = Loader {
            reader: settings_reader,
            problems: Vec::new(),
        };
        let settings_bytes = settings_loader.read_optional(SETTINGS_FILE)?;
        if !settings_loader.problems.is_empty() {
            return Err(TreeError::Invalid {
                root: root.to_path_buf(),
                problems: settings_loader.problems,
            });
        }
        // A broken file is refused even when the caller names the marker:
        // its other settings would be read by the commands.
        let settings = match &settings_bytes {
            None => Settings::default(),
            Some(bytes) => Settings::parse(Path::new(SETTINGS_FILE), bytes)
                .map_err(|errors| settings_refused(root, errors))?,
        };
        let marker = options
            .header_marker
            .clone()
            .unwrap_or_else(|| settings.header_marker());
        let mut loader = Loader {
            reader: Reader {
                root: &canonical_root,
                display_root: root,
                options: &options,
                marker: &marker,
            },
            problems: Vec::new(),
        };
        let mut scripts = ScriptSet::new(marker.clone());
        for tier in Tier::ALL {
            loader.read_tier(tier, &mut scripts)?;
        }
        let mut files = TreeFiles {
            lib: loader.read_lib()?,
            revoked: loader.read_optional(REVOKED_FILE)?,
            legacy_map: loader.read_optional(LEGACY_MAP_FILE)?,
            settings: settings_bytes,
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

/// One read of a tree: its [`Reader`] and the problems found so far.
struct Loader<'a> {
    reader: Reader<'a>,
    problems: Vec<TreeProblem>,
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

    /// One of the tree's own files at its root (`migrate.toml`, `revoked`,
    /// `legacy-map`), through the one reader: `None` when nothing is there.
    fn read_optional(&mut self, name: &str) -> Result<Option<Vec<u8>>, TreeError> {
        let reader = self.reader;
        let path = reader.root.join(name);
        let within = super::supplied::Within::Tree(reader.root);
        match super::supplied::read_file(&path, within, reader.options.max_file_bytes) {
            Ok(bytes) => Ok(bytes),
            Err(e) => {
                self.problems
                    .push(TreeProblem::from(e.named(PathBuf::from(name))));
                Ok(None)
            }
        }
    }
}
