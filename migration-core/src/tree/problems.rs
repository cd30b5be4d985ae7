//! What can be wrong with a tree: each content problem names the file and,
//! where there is one, the line; a tree that cannot be loaded says why.

use std::path::PathBuf;

use super::ORDER_DIR;
use super::supplied::FileError;
use crate::header::{HeaderError, Tier};
use crate::manifest::ManifestError;
use crate::slug::{Slug, SlugError};

/// A content problem in the tree. Each names the file and, where there is
/// one, the line.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TreeProblem {
    /// A header problem.
    #[error(transparent)]
    Header(#[from] HeaderError),
    /// A problem in the tree's settings file, `migrate.toml`.
    #[error(transparent)]
    Settings(#[from] crate::settings::SettingsError),
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
    /// A `requires` naming a slug that is neither in the tree nor in the
    /// manifest, with the closest slug that is, when one is a few edits
    /// away (a typo would otherwise leave the author to hunt for it).
    #[error("{}:{line}: requires={target}, but no script or manifest line has that slug{}", file.display(), crate::header::near_miss::did_you_mean(&suggestion.as_ref().map(ToString::to_string)))]
    UnknownRequirement {
        /// The script.
        file: PathBuf,
        /// Line of the directive.
        line: usize,
        /// The missing slug.
        target: Slug,
        /// The existing slug (a script or a manifest line) it is closest
        /// to, if any is close.
        suggestion: Option<Slug>,
    },
    /// A pre-apply script requiring a background one: the blocking tier
    /// finishes before the background tier starts, so no run satisfies it.
    #[error("{}:{line}: requires={target}, but {target} is in the background tier: a pre-apply migration runs before any background one, so no run order satisfies it (move one of them to the other tier, or drop the requirement)", file.display())]
    RequiresBackground {
        /// The pre-apply script.
        file: PathBuf,
        /// Line of the directive.
        line: usize,
        /// The background slug.
        target: Slug,
    },
    /// A tree file refused by the one reader ([`super::supplied`]): not a
    /// regular file, too large, a dangling symlink or one out of the tree.
    #[error(transparent)]
    File(#[from] FileError),
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
            TreeProblem::Settings(e) => (Some(e.file().to_path_buf()), e.line()),
            TreeProblem::BadScriptName { file, .. } => (Some(file.clone()), None),
            TreeProblem::UnexpectedEntry { path, .. }
            | TreeProblem::NonUtf8Name { path }
            | TreeProblem::TooManyFiles { path, .. } => (Some(path.clone()), None),
            TreeProblem::TierMismatch { file, line, .. }
            | TreeProblem::SelfRequirement { file, line }
            | TreeProblem::UnknownRequirement { file, line, .. }
            | TreeProblem::RequiresBackground { file, line, .. }
            | TreeProblem::BadListLine { file, line, .. } => (Some(file.clone()), Some(*line)),
            TreeProblem::DuplicateSlug { second, .. } => (Some(second.clone()), None),
            TreeProblem::Manifest { .. } => (Some(PathBuf::from(ORDER_DIR)), None),
            TreeProblem::File(e) => (Some(e.path().to_path_buf()), None),
        }
    }

    /// A short stable identifier of the kind of problem, for lint output.
    pub fn rule(&self) -> &'static str {
        match self {
            TreeProblem::Header(_) => "header",
            TreeProblem::Settings(_) => "settings",
            TreeProblem::BadScriptName { .. } => "slug",
            TreeProblem::UnexpectedEntry { .. }
            | TreeProblem::NonUtf8Name { .. }
            | TreeProblem::TooManyFiles { .. } => "layout",
            TreeProblem::File(FileError::Escapes { .. }) => "symlink",
            TreeProblem::File(FileError::TooLarge { .. }) => "size",
            TreeProblem::File(_) => "layout",
            TreeProblem::TierMismatch { .. } => "tier",
            TreeProblem::DuplicateSlug { .. } => "duplicate-slug",
            TreeProblem::SelfRequirement { .. }
            | TreeProblem::UnknownRequirement { .. }
            | TreeProblem::RequiresBackground { .. } => "requires",
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
