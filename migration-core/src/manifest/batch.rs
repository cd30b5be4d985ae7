//! Batches: a batch file's name (`00001-v1.7.0`), its lines, and how it is
//! rendered.

use std::fmt;
use std::str::FromStr;

use super::{LEGACY_LABEL, LEGACY_SEQUENCE, RETIRED_FLAG, UNTAGGED_LABEL, UNTAGGED_SEQUENCE};
use crate::slug::Slug;

/// A batch file name: five digits, a dash, a label (`00001-v1.7.0`).
///
/// Files are read in name order, and the five-digit sequence makes name
/// order equal numeric order.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BatchName {
    sequence: u32,
    label: String,
}

/// Why a string is not a batch file name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid batch file name {name:?}: {reason} (expected five digits, '-', then a label of [A-Za-z0-9._+-])"
)]
pub struct BatchNameError {
    /// The rejected name.
    pub name: String,
    /// What is wrong with it.
    pub reason: &'static str,
}

impl BatchName {
    /// Builds a batch name, validating the label.
    pub fn new(sequence: u32, label: &str) -> Result<Self, BatchNameError> {
        let name = || format!("{sequence:05}-{label}");
        if sequence > UNTAGGED_SEQUENCE {
            return Err(BatchNameError {
                name: name(),
                reason: "sequence above 99999",
            });
        }
        if label.is_empty() || label.len() > 128 {
            return Err(BatchNameError {
                name: name(),
                reason: "label must be 1 to 128 characters",
            });
        }
        if !label
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._+-".contains(&b))
        {
            return Err(BatchNameError {
                name: name(),
                reason: "label has a character outside [A-Za-z0-9._+-]",
            });
        }
        Ok(BatchName {
            sequence,
            label: label.to_owned(),
        })
    }

    /// The legacy batch, `00000-legacy`.
    pub fn legacy() -> Self {
        BatchName {
            sequence: LEGACY_SEQUENCE,
            label: LEGACY_LABEL.to_owned(),
        }
    }

    /// The untagged batch, `99999-untagged`.
    pub fn untagged() -> Self {
        BatchName {
            sequence: UNTAGGED_SEQUENCE,
            label: UNTAGGED_LABEL.to_owned(),
        }
    }

    /// The sequence number.
    pub fn sequence(&self) -> u32 {
        self.sequence
    }

    /// The label: the release tag that first shipped the batch, `legacy` or `untagged`.
    pub fn label(&self) -> &str {
        &self.label
    }

    /// True for the legacy batch.
    pub fn is_legacy(&self) -> bool {
        self.sequence == LEGACY_SEQUENCE
    }

    /// True for the untagged batch.
    pub fn is_untagged(&self) -> bool {
        self.sequence == UNTAGGED_SEQUENCE
    }
}

impl fmt::Display for BatchName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:05}-{}", self.sequence, self.label)
    }
}

impl FromStr for BatchName {
    type Err = BatchNameError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = |reason| BatchNameError {
            name: s.chars().take(160).collect(),
            reason,
        };
        let (digits, label) = s
            .split_once('-')
            .ok_or_else(|| bad("no '-' after the sequence"))?;
        if digits.len() != 5 || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad("the sequence must be exactly five digits"));
        }
        let sequence = digits
            .parse::<u32>()
            .map_err(|_| bad("the sequence must be exactly five digits"))?;
        BatchName::new(sequence, label)
    }
}

/// One manifest line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManifestEntry {
    /// The migration.
    pub slug: Slug,
    /// The script was deleted after it shipped; the line stays for ever.
    pub retired: bool,
}

/// One batch file: its name and its ordered lines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Batch {
    /// The file name.
    pub name: BatchName,
    /// The lines, in execution order.
    pub entries: Vec<ManifestEntry>,
}

impl Batch {
    /// The file's exact bytes: one `<slug>` or `<slug> retired` line each.
    pub fn render(&self) -> String {
        let mut out = String::with_capacity(self.entries.len() * 24);
        for entry in &self.entries {
            out.push_str(entry.slug.as_str());
            if entry.retired {
                out.push(' ');
                out.push_str(RETIRED_FLAG);
            }
            out.push('\n');
        }
        out
    }
}
