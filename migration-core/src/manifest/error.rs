//! What can be wrong with a manifest: each problem names the batch file
//! and, where there is one, the line.

use std::path::PathBuf;

use super::BatchNameError;
use crate::slug::{Slug, SlugError};

/// A problem with the manifest, naming the batch file and line.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ManifestError {
    /// A file in `order.d/` whose name is not a batch name.
    #[error("{}: {source}", file.display())]
    BadFileName {
        /// The file.
        file: PathBuf,
        /// What is wrong with the name.
        source: BatchNameError,
    },
    /// Two batch files with the same sequence number.
    #[error("batch files {first} and {second} share sequence number {sequence:05}")]
    DuplicateSequence {
        /// The sequence number.
        sequence: u32,
        /// The first file.
        first: String,
        /// The second file.
        second: String,
    },
    /// A line that is neither `<slug>`, `<slug> retired`, a comment nor blank.
    #[error("{file}:{line}: {reason}")]
    BadLine {
        /// The batch file.
        file: String,
        /// One-based line.
        line: usize,
        /// What is wrong.
        reason: String,
    },
    /// A line whose slug does not parse.
    #[error("{file}:{line}: {source}")]
    InvalidSlug {
        /// The batch file.
        file: String,
        /// One-based line.
        line: usize,
        /// The slug error.
        source: SlugError,
    },
    /// A slug listed twice: every slug belongs to exactly one batch.
    #[error("{file}:{line}: slug '{slug}' is already listed at {first_file}:{first_line}")]
    DuplicateSlug {
        /// The slug.
        slug: Slug,
        /// Where it appears again.
        file: String,
        /// One-based line of the repetition.
        line: usize,
        /// Where it first appears.
        first_file: String,
        /// One-based line of the first appearance.
        first_line: usize,
    },
    /// Batches given out of name order.
    #[error("batch {later} comes before {earlier}; batches must be in file-name order")]
    OutOfOrder {
        /// The batch that should come first.
        earlier: String,
        /// The batch that should come later.
        later: String,
    },
    /// A file too large to be a manifest.
    #[error("{}: {size} bytes is above the {limit}-byte limit for a batch file", file.display())]
    TooLarge {
        /// The file.
        file: PathBuf,
        /// Its size.
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// Reading `order.d/` failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The path being read.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
}
