//! Loading a migrations tree from disk (CONTRACT.md §3).
//!
//! ```text
//! migrations/
//!   pre-apply/<slug>   background/<slug>   lib/   revoked   legacy-map   order.d/
//! ```
//!
//! Loading is all-or-nothing: every content problem in the tree is collected
//! and returned together, so a broken tree can never be half-used.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

use crate::digest::{LibDigest, Sha256Digest};
use crate::header::{Header, HeaderError, Tier, parse_header};
use crate::manifest::{Manifest, ManifestError};
use crate::slug::{Slug, SlugError};

/// Name of the shared-helpers directory.
pub const LIB_DIR: &str = "lib";
/// Name of the revocation list.
pub const REVOKED_FILE: &str = "revoked";
/// Name of the legacy integer map.
pub const LEGACY_MAP_FILE: &str = "legacy-map";
/// Name of the generated manifest directory.
pub const ORDER_DIR: &str = "order.d";
/// File names tolerated (and ignored) inside tier directories, because git
/// cannot keep an empty directory without one.
pub const PLACEHOLDER_FILES: [&str; 2] = [".gitkeep", ".keep"];

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

/// One migration script on disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Script {
    /// Its identity (the file name).
    pub slug: Slug,
    /// Its tier (the directory, equal to the header's).
    pub tier: Tier,
    /// Path relative to the tree root, e.g. `pre-apply/redis-fix`.
    pub relative_path: PathBuf,
    /// The parsed header.
    pub header: Header,
    /// SHA-256 of the script's bytes.
    pub sha256: Sha256Digest,
    /// Size in bytes.
    pub len: u64,
}

/// One `legacy-map` line: `<integer> <slug>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LegacyPair {
    /// The old global integer.
    pub number: u64,
    /// The slug it became.
    pub slug: Slug,
    /// One-based line in `legacy-map`.
    pub line: usize,
}

/// One `revoked` line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RevokedSlug {
    /// The revoked slug.
    pub slug: Slug,
    /// One-based line in `revoked`.
    pub line: usize,
}

/// A content problem in the tree. Each names the file and, where there is
/// one, the line.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TreeProblem {
    /// A header problem.
    #[error(transparent)]
    Header(#[from] HeaderError),
    /// A file in a tier directory whose name is not a slug.
    #[error("{}: the file name is not a valid slug: {source}", file.display())]
    BadScriptName {
        /// The file.
        file: PathBuf,
        /// The slug error.
        source: SlugError,
    },
    /// Something that is not a regular file where a script or helper belongs.
    #[error("{}: {reason}", path.display())]
    UnexpectedEntry {
        /// The entry.
        path: PathBuf,
        /// Why it is not accepted.
        reason: &'static str,
    },
    /// A name that is not valid UTF-8 (slugs and helper paths are ASCII).
    #[error("{}: the file name is not valid UTF-8", path.display())]
    NonUtf8Name {
        /// The path, lossily printed.
        path: PathBuf,
    },
    /// The header's tier is not the directory the script is in.
    #[error("{}:{line}: header says tier={declared} but the script is in {directory}/", file.display())]
    TierMismatch {
        /// The script.
        file: PathBuf,
        /// Line of the `tier` directive.
        line: usize,
        /// What the header says.
        declared: Tier,
        /// Where it is.
        directory: Tier,
    },
    /// The same slug in both tier directories.
    #[error("slug '{slug}' exists in both {} and {}; slugs are unique across tiers", first.display(), second.display())]
    DuplicateSlug {
        /// The slug.
        slug: Slug,
        /// First path.
        first: PathBuf,
        /// Second path.
        second: PathBuf,
    },
    /// A script that requires itself.
    #[error("{}:{line}: the script requires itself", file.display())]
    SelfRequirement {
        /// The script.
        file: PathBuf,
        /// Line of the directive.
        line: usize,
    },
    /// A `requires` naming a slug that is neither in the tree nor in the manifest.
    #[error("{}:{line}: requires={target}, but no script or manifest line has that slug", file.display())]
    UnknownRequirement {
        /// The script.
        file: PathBuf,
        /// Line of the directive.
        line: usize,
        /// The missing slug.
        target: Slug,
    },
    /// A symlink that resolves outside the tree.
    #[error("{}: symlink points outside the migrations tree (to {})", path.display(), target.display())]
    SymlinkEscapes {
        /// The symlink.
        path: PathBuf,
        /// Where it resolves.
        target: PathBuf,
    },
    /// A file above the size cap; it was not read.
    #[error("{}: {size} bytes is above the {limit}-byte limit", path.display())]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// Its size.
        size: u64,
        /// The cap.
        limit: u64,
    },
    /// Too many files under `lib/`.
    #[error("{}: more than {limit} files", path.display())]
    TooManyFiles {
        /// The directory.
        path: PathBuf,
        /// The cap.
        limit: usize,
    },
    /// A bad line in `revoked` or `legacy-map`.
    #[error("{}:{line}: {reason}", file.display())]
    BadListLine {
        /// The list file.
        file: PathBuf,
        /// One-based line.
        line: usize,
        /// What is wrong.
        reason: String,
    },
    /// A problem in `order.d/`.
    #[error("{ORDER_DIR}/{source}")]
    Manifest {
        /// The manifest problem.
        source: ManifestError,
    },
}

impl TreeProblem {
    /// The file (relative to the tree root) and line the problem is about,
    /// where it has them.
    pub fn location(&self) -> (Option<PathBuf>, Option<usize>) {
        match self {
            TreeProblem::Header(h) => (Some(h.file().to_path_buf()), h.line()),
            TreeProblem::BadScriptName { file, .. } => (Some(file.clone()), None),
            TreeProblem::UnexpectedEntry { path, .. }
            | TreeProblem::NonUtf8Name { path }
            | TreeProblem::SymlinkEscapes { path, .. }
            | TreeProblem::TooLarge { path, .. }
            | TreeProblem::TooManyFiles { path, .. } => (Some(path.clone()), None),
            TreeProblem::TierMismatch { file, line, .. }
            | TreeProblem::SelfRequirement { file, line }
            | TreeProblem::UnknownRequirement { file, line, .. }
            | TreeProblem::BadListLine { file, line, .. } => (Some(file.clone()), Some(*line)),
            TreeProblem::DuplicateSlug { second, .. } => (Some(second.clone()), None),
            TreeProblem::Manifest { .. } => (Some(PathBuf::from(ORDER_DIR)), None),
        }
    }

    /// A short stable identifier of the kind of problem, for lint output.
    pub fn rule(&self) -> &'static str {
        match self {
            TreeProblem::Header(_) => "header",
            TreeProblem::BadScriptName { .. } => "slug",
            TreeProblem::UnexpectedEntry { .. }
            | TreeProblem::NonUtf8Name { .. }
            | TreeProblem::TooManyFiles { .. } => "layout",
            TreeProblem::TierMismatch { .. } => "tier",
            TreeProblem::DuplicateSlug { .. } => "duplicate-slug",
            TreeProblem::SelfRequirement { .. } | TreeProblem::UnknownRequirement { .. } => {
                "requires"
            }
            TreeProblem::SymlinkEscapes { .. } => "symlink",
            TreeProblem::TooLarge { .. } => "size",
            TreeProblem::BadListLine { .. } => "list-file",
            TreeProblem::Manifest { .. } => "manifest",
        }
    }
}

/// Why a tree could not be loaded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TreeError {
    /// Reading failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The path being read.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The directory has neither `pre-apply/` nor `background/`.
    #[error("{}: not a migrations tree (no pre-apply/ or background/ directory)", root.display())]
    NotATree {
        /// The directory given.
        root: PathBuf,
    },
    /// Content problems; every one found is listed.
    #[error("{} has {} problem(s):\n{}", root.display(), problems.len(), list(problems))]
    Invalid {
        /// The tree root.
        root: PathBuf,
        /// Every problem found.
        problems: Vec<TreeProblem>,
    },
}

fn list(problems: &[TreeProblem]) -> String {
    problems
        .iter()
        .map(|p| format!("  {p}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// A loaded, validated migrations tree.
#[derive(Debug, Clone)]
pub struct MigrationsTree {
    root: PathBuf,
    scripts: BTreeMap<Slug, Script>,
    lib_sha256: Sha256Digest,
    revoked: Vec<RevokedSlug>,
    /// The revoked slugs as a set: planning asks once per manifest line.
    revoked_set: HashSet<Slug>,
    legacy_map: Vec<LegacyPair>,
    manifest: Option<Manifest>,
}

/// The raw files of a tree, before validation: what the disk loader reads,
/// and what a caller can assemble from elsewhere (a git tag's objects, a
/// test) to get exactly the same validation.
#[derive(Debug, Clone, Default)]
pub struct TreeFiles {
    /// Files in tier directories: tier, file name, bytes.
    pub scripts: Vec<(Tier, String, Vec<u8>)>,
    /// Files under `lib/`, by `/`-separated path relative to `lib/`.
    pub lib: Vec<(String, Vec<u8>)>,
    /// The `revoked` file, if present.
    pub revoked: Option<Vec<u8>>,
    /// The `legacy-map` file, if present.
    pub legacy_map: Option<Vec<u8>>,
    /// The files of `order.d/`, if the directory is present.
    pub order: Option<Vec<(String, Vec<u8>)>>,
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

    /// Validates a tree given as raw files; `root` is where it lives (used
    /// for running scripts and in messages). Same checks as [`Self::load`],
    /// minus those that only make sense on a file system (symlinks).
    pub fn from_files(root: PathBuf, files: TreeFiles) -> Result<Self, TreeError> {
        let display = root.clone();
        Self::assemble(root, &display, files, Vec::new(), true)
    }

    fn assemble(
        root: PathBuf,
        display_root: &Path,
        files: TreeFiles,
        mut problems: Vec<TreeProblem>,
        check_requires: bool,
    ) -> Result<Self, TreeError> {
        let mut scripts: BTreeMap<Slug, Script> = BTreeMap::new();
        for (tier, name, bytes) in &files.scripts {
            let Some(script) = validate_script(*tier, name, bytes, &mut problems) else {
                continue;
            };
            if let Some(first) = scripts.get(&script.slug) {
                problems.push(TreeProblem::DuplicateSlug {
                    slug: script.slug.clone(),
                    first: first.relative_path.clone(),
                    second: script.relative_path.clone(),
                });
            } else {
                scripts.insert(script.slug.clone(), script);
            }
        }
        let mut lib = LibDigest::new();
        for (path, bytes) in files.lib {
            lib.add_file(path, bytes);
        }
        let lib_sha256 = lib.finish();
        let revoked = match files
            .revoked
            .map(|b| parse_revoked(Path::new(REVOKED_FILE), &b))
        {
            Some(Ok(list)) => list,
            Some(Err(found)) => {
                problems.extend(found);
                Vec::new()
            }
            None => Vec::new(),
        };
        let legacy_map = match files
            .legacy_map
            .map(|b| parse_legacy_map(Path::new(LEGACY_MAP_FILE), &b))
        {
            Some(Ok(list)) => list,
            Some(Err(found)) => {
                problems.extend(found);
                Vec::new()
            }
            None => Vec::new(),
        };
        let manifest = match files.order.map(Manifest::parse_files) {
            Some(Ok(m)) => Some(m),
            Some(Err(errors)) => {
                problems.extend(
                    errors
                        .into_iter()
                        .map(|source| TreeProblem::Manifest { source }),
                );
                None
            }
            None => None,
        };

        for script in scripts.values() {
            for req in &script.header.requires {
                if req.target == script.slug {
                    problems.push(TreeProblem::SelfRequirement {
                        file: script.relative_path.clone(),
                        line: req.line,
                    });
                } else if check_requires
                    && !scripts.contains_key(&req.target)
                    && manifest
                        .as_ref()
                        .is_none_or(|m| m.position(&req.target).is_none())
                {
                    problems.push(TreeProblem::UnknownRequirement {
                        file: script.relative_path.clone(),
                        line: req.line,
                        target: req.target.clone(),
                    });
                }
            }
        }

        if !problems.is_empty() {
            return Err(TreeError::Invalid {
                root: display_root.to_path_buf(),
                problems,
            });
        }
        let revoked_set = revoked.iter().map(|r| r.slug.clone()).collect();
        Ok(MigrationsTree {
            root,
            scripts,
            lib_sha256,
            revoked,
            revoked_set,
            legacy_map,
            manifest,
        })
    }

    /// The tree root (canonical).
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Every script, by slug.
    pub fn scripts(&self) -> &BTreeMap<Slug, Script> {
        &self.scripts
    }

    /// The script for `slug`, if it is on disk.
    pub fn script(&self, slug: &Slug) -> Option<&Script> {
        self.scripts.get(slug)
    }

    /// Absolute path of a script.
    pub fn script_path(&self, script: &Script) -> PathBuf {
        self.root.join(&script.relative_path)
    }

    /// Digest of `lib/` (algorithm [`LibDigest::ALGORITHM`]).
    pub fn lib_sha256(&self) -> Sha256Digest {
        self.lib_sha256
    }

    /// The revocation list, in file order.
    pub fn revoked(&self) -> &[RevokedSlug] {
        &self.revoked
    }

    /// True when `slug` is revoked.
    pub fn is_revoked(&self, slug: &Slug) -> bool {
        self.revoked_set.contains(slug)
    }

    /// The legacy map, in ascending integer order.
    pub fn legacy_map(&self) -> &[LegacyPair] {
        &self.legacy_map
    }

    /// The manifest from `order.d/`, if it has been generated.
    pub fn manifest(&self) -> Option<&Manifest> {
        self.manifest.as_ref()
    }

    /// Replaces the manifest (after generating it in memory).
    pub fn with_manifest(mut self, manifest: Manifest) -> Self {
        self.manifest = Some(manifest);
        self
    }
}

/// Files by name, as read from one directory.
type NamedFiles = Vec<(String, Vec<u8>)>;

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
        let mut out = Vec::new();
        for item in fs::read_dir(dir).map_err(self.io(dir))? {
            let item = item.map_err(self.io(dir))?;
            let name = item.file_name().to_str().map(str::to_owned);
            out.push((item.path(), name));
        }
        out.sort();
        Ok(out)
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
        for (path, name) in self.sorted_entries(&dir)? {
            let Some(name) = name else {
                self.problems.push(TreeProblem::NonUtf8Name {
                    path: self.relative(&path),
                });
                continue;
            };
            if PLACEHOLDER_FILES.contains(&name.as_str()) {
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

/// Checks one script file: its name is a slug, its header parses, and its
/// tier is its directory. Problems go to `problems`.
fn validate_script(
    tier: Tier,
    name: &str,
    bytes: &[u8],
    problems: &mut Vec<TreeProblem>,
) -> Option<Script> {
    let relative = PathBuf::from(tier.as_str()).join(name);
    let slug = match Slug::parse(name) {
        Ok(slug) => slug,
        Err(source) => {
            problems.push(TreeProblem::BadScriptName {
                file: relative,
                source,
            });
            return None;
        }
    };
    let header = match parse_header(&relative, bytes) {
        Ok(h) => h,
        Err(errors) => {
            problems.extend(errors.into_iter().map(TreeProblem::Header));
            return None;
        }
    };
    if header.tier != tier {
        problems.push(TreeProblem::TierMismatch {
            file: relative,
            line: tier_line(bytes),
            declared: header.tier,
            directory: tier,
        });
        return None;
    }
    Some(Script {
        slug,
        tier,
        relative_path: relative,
        header,
        sha256: Sha256Digest::of(bytes),
        len: bytes.len() as u64,
    })
}

/// Line of the `tier=` directive, for the mismatch message.
fn tier_line(bytes: &[u8]) -> usize {
    bytes
        .split(|&b| b == b'\n')
        .position(|l| {
            let l = String::from_utf8_lossy(l);
            l.contains(crate::header::HEADER_MARKER) && l.contains("tier")
        })
        .map_or(1, |i| i + 1)
}

/// Splits a list file into `(line number, words)` for non-empty,
/// comment-stripped lines, reporting non-UTF-8 lines.
fn list_lines(
    file: &Path,
    bytes: &[u8],
    problems: &mut Vec<TreeProblem>,
) -> Vec<(usize, Vec<String>)> {
    let mut out = Vec::new();
    for (i, raw) in bytes.split(|&b| b == b'\n').enumerate() {
        let line = i + 1;
        let Ok(text) = std::str::from_utf8(raw) else {
            problems.push(TreeProblem::BadListLine {
                file: file.into(),
                line,
                reason: "not valid UTF-8".into(),
            });
            continue;
        };
        let content = text.split_once('#').map_or(text, |(before, _)| before);
        let words: Vec<String> = content.split_whitespace().map(str::to_owned).collect();
        if !words.is_empty() {
            out.push((line, words));
        }
    }
    out
}

/// Parses `revoked`: one slug per line, `#` comments. A slug listed twice is
/// an error (a sign of a bad merge).
pub fn parse_revoked(file: &Path, bytes: &[u8]) -> Result<Vec<RevokedSlug>, Vec<TreeProblem>> {
    let mut problems = Vec::new();
    let mut out: Vec<RevokedSlug> = Vec::new();
    let mut first_line: HashMap<Slug, usize> = HashMap::new();
    for (line, words) in list_lines(file, bytes, &mut problems) {
        if words.len() != 1 {
            problems.push(TreeProblem::BadListLine {
                file: file.into(),
                line,
                reason: format!("expected one slug per line, found {} words", words.len()),
            });
            continue;
        }
        match Slug::parse(&words[0]) {
            Ok(slug) => {
                if let Some(first) = first_line.get(&slug) {
                    problems.push(TreeProblem::BadListLine {
                        file: file.into(),
                        line,
                        reason: format!("'{slug}' is already revoked on line {first}"),
                    });
                } else {
                    first_line.insert(slug.clone(), line);
                    out.push(RevokedSlug { slug, line });
                }
            }
            Err(e) => problems.push(TreeProblem::BadListLine {
                file: file.into(),
                line,
                reason: e.to_string(),
            }),
        }
    }
    if problems.is_empty() {
        Ok(out)
    } else {
        Err(problems)
    }
}

/// Parses `legacy-map`: `<integer> <slug>` per line, `#` comments. Numbers
/// and slugs must each be unique. The result is sorted by number.
pub fn parse_legacy_map(file: &Path, bytes: &[u8]) -> Result<Vec<LegacyPair>, Vec<TreeProblem>> {
    let mut problems = Vec::new();
    let mut out: Vec<LegacyPair> = Vec::new();
    for (line, words) in list_lines(file, bytes, &mut problems) {
        let bad = |reason: String| TreeProblem::BadListLine {
            file: file.into(),
            line,
            reason,
        };
        if words.len() != 2 {
            problems.push(bad(format!(
                "expected '<integer> <slug>', found {} words",
                words.len()
            )));
            continue;
        }
        let number = match words[0].parse::<u64>() {
            Ok(n) if words[0].bytes().all(|b| b.is_ascii_digit()) => n,
            _ => {
                problems.push(bad(format!("{:?} is not a non-negative integer", words[0])));
                continue;
            }
        };
        let slug = match Slug::parse(&words[1]) {
            Ok(s) => s,
            Err(e) => {
                problems.push(bad(e.to_string()));
                continue;
            }
        };
        if let Some(first) = out.iter().find(|p| p.number == number) {
            problems.push(bad(format!(
                "integer {number} is already mapped on line {}",
                first.line
            )));
        } else if let Some(first) = out.iter().find(|p| p.slug == slug) {
            problems.push(bad(format!(
                "slug '{slug}' is already mapped on line {}",
                first.line
            )));
        } else {
            out.push(LegacyPair { number, slug, line });
        }
    }
    out.sort_by_key(|p| p.number);
    if problems.is_empty() {
        Ok(out)
    } else {
        Err(problems)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(problems: &[TreeProblem]) -> Vec<String> {
        problems.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn revoked_accepts_comments_and_blank_lines() {
        let list = parse_revoked(
            Path::new("revoked"),
            b"# bad idea\n\nold-fix   # see incident 12\nother\n",
        )
        .unwrap();
        let got: Vec<_> = list.iter().map(|r| (r.slug.as_str(), r.line)).collect();
        assert_eq!(got, [("old-fix", 3), ("other", 4)]);
    }

    #[test]
    fn revoked_rejects_bad_slugs_extra_words_and_duplicates_with_lines() {
        let problems = parse_revoked(Path::new("revoked"), b"a\nB\na b\na\n").unwrap_err();
        let text = lines(&problems);
        assert_eq!(text.len(), 3, "{text:?}");
        assert!(text[0].starts_with("revoked:2: slug \"B\""), "{}", text[0]);
        assert!(
            text[1].starts_with("revoked:3: expected one slug"),
            "{}",
            text[1]
        );
        assert_eq!(text[2], "revoked:4: 'a' is already revoked on line 1");
    }

    #[test]
    fn legacy_map_is_sorted_by_number() {
        let map = parse_legacy_map(Path::new("legacy-map"), b"10 ten\n2 two # comment\n").unwrap();
        let got: Vec<_> = map
            .iter()
            .map(|p| (p.number, p.slug.as_str(), p.line))
            .collect();
        assert_eq!(got, [(2, "two", 2), (10, "ten", 1)]);
    }

    #[test]
    fn legacy_map_rejects_duplicates_signs_and_junk() {
        let problems = parse_legacy_map(
            Path::new("legacy-map"),
            b"1 a\n1 b\n2 a\n-3 c\n+4 d\nx e\n5\n5 f g\n",
        )
        .unwrap_err();
        let text = lines(&problems);
        assert_eq!(text.len(), 7, "{text:?}");
        assert_eq!(
            text[0],
            "legacy-map:2: integer 1 is already mapped on line 1"
        );
        assert_eq!(
            text[1],
            "legacy-map:3: slug 'a' is already mapped on line 1"
        );
        assert!(text[2].starts_with("legacy-map:4: \"-3\" is not"));
        assert!(text[3].starts_with("legacy-map:5: \"+4\" is not"));
        assert!(text[4].starts_with("legacy-map:6: \"x\" is not"));
        assert!(text[5].starts_with("legacy-map:7: expected"));
        assert!(text[6].starts_with("legacy-map:8: expected"));
    }

    #[test]
    fn list_files_report_non_utf8_lines() {
        let problems = parse_revoked(Path::new("revoked"), b"ok\n\xc3\x28\n").unwrap_err();
        assert_eq!(lines(&problems), ["revoked:2: not valid UTF-8"]);
    }
}
