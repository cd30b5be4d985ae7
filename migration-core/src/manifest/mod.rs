//! The manifest: `order.d/` batch files that fix the execution order (CONTRACT.md §4).
//!
//! - `batch`: batch file names and lines;
//! - `files`: parsing, reading and writing `order.d/`;
//! - `error`: what can be wrong with it.

mod batch;
mod error;
mod files;
#[cfg(test)]
mod tests;

pub use batch::{Batch, BatchName, BatchNameError, ManifestEntry};
pub use error::ManifestError;

use std::collections::HashMap;

use crate::slug::Slug;

/// The flag that marks a line whose script was deleted after it shipped.
pub const RETIRED_FLAG: &str = "retired";

/// Sequence number of the batch that holds the legacy-map slugs.
pub const LEGACY_SEQUENCE: u32 = 0;
/// Label of the batch that holds the legacy-map slugs.
pub const LEGACY_LABEL: &str = "legacy";
/// Sequence number of the batch of slugs no tag has shipped yet.
pub const UNTAGGED_SEQUENCE: u32 = 99_999;
/// Label of the batch of slugs no tag has shipped yet.
pub const UNTAGGED_LABEL: &str = "untagged";

/// Where a slug sits in the manifest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Position {
    /// Index of the batch.
    pub batch: usize,
    /// Index within the batch.
    pub index: usize,
}

/// The ordered list of batches. Every slug appears in exactly one batch.
#[derive(Debug, Clone, Default)]
pub struct Manifest {
    batches: Vec<Batch>,
    index: HashMap<Slug, Position>,
}

impl PartialEq for Manifest {
    fn eq(&self, other: &Self) -> bool {
        self.batches == other.batches
    }
}
impl Eq for Manifest {}

/// The largest batch file the loader reads: far above any real manifest.
pub const MAX_BATCH_FILE_BYTES: u64 = 16 * 1024 * 1024;

impl Manifest {
    /// Builds a manifest from batches in order, checking names are increasing
    /// and that no slug appears twice.
    pub fn from_batches(batches: Vec<Batch>) -> Result<Self, Vec<ManifestError>> {
        let mut errors = Vec::new();
        check_batch_names(&batches, &mut errors);
        let mut index = HashMap::with_capacity(batches.iter().map(|b| b.entries.len()).sum());
        for (b, batch) in batches.iter().enumerate() {
            for (i, entry) in batch.entries.iter().enumerate() {
                let here = Position { batch: b, index: i };
                if let Some(first) = index.insert(entry.slug.clone(), here) {
                    // Keep the first position as the canonical one.
                    index.insert(entry.slug.clone(), first);
                    errors.push(ManifestError::DuplicateSlug {
                        slug: entry.slug.clone(),
                        file: batch.name.to_string(),
                        line: i + 1,
                        first_file: batches[first.batch].name.to_string(),
                        first_line: first.index + 1,
                    });
                }
            }
        }
        if errors.is_empty() {
            Ok(Manifest { batches, index })
        } else {
            Err(errors)
        }
    }

    /// [`Self::from_batches`] for a caller that has already checked that
    /// no slug appears twice and built `index`, every slug's position.
    fn from_indexed_batches(
        batches: Vec<Batch>,
        index: HashMap<Slug, Position>,
    ) -> Result<Self, Vec<ManifestError>> {
        let mut errors = Vec::new();
        check_batch_names(&batches, &mut errors);
        if errors.is_empty() {
            Ok(Manifest { batches, index })
        } else {
            Err(errors)
        }
    }

    /// The batches in order.
    pub fn batches(&self) -> &[Batch] {
        &self.batches
    }

    /// Every line in execution order, with its batch.
    pub fn iter(&self) -> impl Iterator<Item = (&Batch, &ManifestEntry)> {
        self.batches
            .iter()
            .flat_map(|b| b.entries.iter().map(move |e| (b, e)))
    }

    /// Where `slug` sits, if it is listed.
    pub fn position(&self, slug: &Slug) -> Option<Position> {
        self.index.get(slug).copied()
    }

    /// The batch and line of `slug`, if it is listed.
    pub fn lookup(&self, slug: &Slug) -> Option<(&Batch, &ManifestEntry)> {
        let p = self.position(slug)?;
        let batch = &self.batches[p.batch];
        Some((batch, &batch.entries[p.index]))
    }

    /// Number of slugs listed.
    pub fn len(&self) -> usize {
        self.index.len()
    }

    /// True when no slug is listed.
    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    /// True when `self` is an order-prefix of `later`: every batch of `self`
    /// is in `later` under the same name with the same slugs in the same
    /// order, and `later` only appends. The `retired` flag is the one thing
    /// allowed to change between two releases (a script deleted later gets
    /// flagged in its original batch), so it is not compared here; the
    /// byte-exact prefix holds whenever nothing was retired in between.
    pub fn is_order_prefix_of(&self, later: &Manifest) -> bool {
        self.batches.len() <= later.batches.len()
            && self.batches.iter().zip(&later.batches).all(|(a, b)| {
                a.name == b.name
                    && a.entries.len() == b.entries.len()
                    && a.entries
                        .iter()
                        .zip(&b.entries)
                        .all(|(x, y)| x.slug == y.slug)
            })
    }
}

/// Batch names must increase, and no sequence number may repeat.
fn check_batch_names(batches: &[Batch], errors: &mut Vec<ManifestError>) {
    for pair in batches.windows(2) {
        if pair[0].name.sequence() == pair[1].name.sequence() {
            errors.push(ManifestError::DuplicateSequence {
                sequence: pair[0].name.sequence(),
                first: pair[0].name.to_string(),
                second: pair[1].name.to_string(),
            });
        } else if pair[0].name.to_string() > pair[1].name.to_string() {
            errors.push(ManifestError::OutOfOrder {
                earlier: pair[1].name.to_string(),
                later: pair[0].name.to_string(),
            });
        }
    }
}
