//! What can be wrong with a header: each problem names the file and,
//! where there is one, the line.

use std::path::{Path, PathBuf};

use super::HeaderMarker;
use super::near_miss::did_you_mean;
use crate::slug::Slug;

/// A header problem, always naming the file and (where there is one) the line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HeaderError {
    /// Line 1 is not `#!<interpreter>`.
    #[error("{}:1: missing shebang: the first line must be '#!<interpreter>'", file.display())]
    MissingShebang {
        /// The script.
        file: PathBuf,
    },
    /// The file uses CRLF line endings, which shells do not accept.
    #[error("{}:{line}: CRLF line ending; scripts must use LF", file.display())]
    CrlfLineEnding {
        /// The script.
        file: PathBuf,
        /// One-based line.
        line: usize,
    },
    /// A header line is not valid UTF-8.
    #[error("{}:{line}: header line is not valid UTF-8", file.display())]
    NotUtf8 {
        /// The script.
        file: PathBuf,
        /// One-based line.
        line: usize,
    },
    /// A required key (`tier`, `on-error`) is absent.
    #[error("{}: missing header key '{key}' (add '# {marker} {key}=...' after the shebang){}", file.display(), marker_note(marker))]
    MissingKey {
        /// The script.
        file: PathBuf,
        /// The missing key.
        key: &'static str,
        /// The tree's marker.
        marker: HeaderMarker,
    },
    /// A key that may appear once appears again.
    #[error("{}:{line}: duplicated header key '{key}' (first set on line {first_line})", file.display())]
    DuplicateKey {
        /// The script.
        file: PathBuf,
        /// One-based line of the repetition.
        line: usize,
        /// The repeated key.
        key: String,
        /// Where it was first set.
        first_line: usize,
    },
    /// A key the engine does not know.
    #[error("{}:{line}: unknown header key '{key}' (known: tier, on-error, requires){}", file.display(), did_you_mean(suggestion))]
    UnknownKey {
        /// The script.
        file: PathBuf,
        /// One-based line.
        line: usize,
        /// The unknown key.
        key: String,
        /// The known key it is closest to, if any.
        suggestion: Option<String>,
    },
    /// A directive that is not `key=value`.
    #[error("{}:{line}: malformed header directive {text:?}: expected '# {marker} key=value'{}", file.display(), did_you_mean(suggestion))]
    Malformed {
        /// The script.
        file: PathBuf,
        /// One-based line.
        line: usize,
        /// The directive text after the marker.
        text: String,
        /// The directive it was probably meant to be (`key: value` for
        /// `key=value`), if any.
        suggestion: Option<String>,
        /// The tree's marker.
        marker: HeaderMarker,
    },
    /// A comment in the header block that resembles a directive but does
    /// not carry the exact marker (case, a blank before the colon, a
    /// plural, a typo): read as a comment it would silently drop what it
    /// sets.
    #[error("{}:{line}: {text:?} looks like a misspelled header directive (the marker is exactly '{marker}', lower case, no blank before the colon); did you mean '{suggestion}'?", file.display())]
    NearMissMarker {
        /// The script.
        file: PathBuf,
        /// One-based line.
        line: usize,
        /// The line as written.
        text: String,
        /// The directive it was probably meant to be.
        suggestion: String,
        /// The tree's marker.
        marker: HeaderMarker,
    },
    /// A known key with a value it cannot take.
    #[error("{}:{line}: invalid value {value:?} for header key '{key}': {reason}", file.display())]
    InvalidValue {
        /// The script.
        file: PathBuf,
        /// One-based line.
        line: usize,
        /// The key.
        key: &'static str,
        /// The rejected value.
        value: String,
        /// Why it was rejected.
        reason: String,
    },
    /// The same `requires` target twice.
    #[error("{}:{line}: requires={target} is listed twice (first on line {first_line})", file.display())]
    DuplicateRequirement {
        /// The script.
        file: PathBuf,
        /// One-based line of the repetition.
        line: usize,
        /// The repeated target.
        target: Slug,
        /// Where it was first listed.
        first_line: usize,
    },
    /// A directive below the leading comment block, where the engine would not
    /// read it; treating it as absent would silently drop a declaration.
    #[error("{}:{line}: header directive outside the leading comment block (the header ends at line {header_end}); move it up", file.display())]
    OutsideHeader {
        /// The script.
        file: PathBuf,
        /// One-based line of the stray directive.
        line: usize,
        /// Last line of the header block.
        header_end: usize,
    },
}

/// Where a marker other than the default comes from, for the message of a
/// missing key: a script written with the default marker in a tree that
/// names another is read as having no header at all.
fn marker_note(marker: &HeaderMarker) -> String {
    if marker.is_default() {
        String::new()
    } else {
        format!(
            "; this tree's header marker is '{}' (its migrate.toml)",
            marker.word()
        )
    }
}

impl HeaderError {
    /// The file this error is about.
    pub fn file(&self) -> &Path {
        match self {
            HeaderError::MissingShebang { file }
            | HeaderError::CrlfLineEnding { file, .. }
            | HeaderError::NotUtf8 { file, .. }
            | HeaderError::MissingKey { file, .. }
            | HeaderError::DuplicateKey { file, .. }
            | HeaderError::UnknownKey { file, .. }
            | HeaderError::Malformed { file, .. }
            | HeaderError::NearMissMarker { file, .. }
            | HeaderError::InvalidValue { file, .. }
            | HeaderError::DuplicateRequirement { file, .. }
            | HeaderError::OutsideHeader { file, .. } => file,
        }
    }

    /// The one-based line, where the error is about one.
    pub fn line(&self) -> Option<usize> {
        match self {
            HeaderError::MissingShebang { .. } => Some(1),
            HeaderError::MissingKey { .. } => None,
            HeaderError::CrlfLineEnding { line, .. }
            | HeaderError::NotUtf8 { line, .. }
            | HeaderError::DuplicateKey { line, .. }
            | HeaderError::UnknownKey { line, .. }
            | HeaderError::Malformed { line, .. }
            | HeaderError::NearMissMarker { line, .. }
            | HeaderError::InvalidValue { line, .. }
            | HeaderError::DuplicateRequirement { line, .. }
            | HeaderError::OutsideHeader { line, .. } => Some(*line),
        }
    }
}
