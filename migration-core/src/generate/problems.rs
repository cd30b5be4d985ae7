//! Why generation fails: every problem is reported, not only the first.

use super::Place;
use crate::digest::Sha256Digest;
use crate::order::Cycle;
use crate::slug::Slug;

/// A reason generation fails. Every problem is reported.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum GenerateProblem {
    /// The immutability guard: one identity, two contents.
    #[error(
        "'{slug}' has different content in {first} ({first_sha}) and {second} ({second_sha}); a shipped slug is immutable, so ship the change under a new slug"
    )]
    ContentChanged {
        /// The slug.
        slug: Slug,
        /// One place.
        first: Place,
        /// Its checksum there.
        first_sha: Sha256Digest,
        /// Another place.
        second: Place,
        /// Its checksum there.
        second_sha: Sha256Digest,
    },
    /// A `requires` target that no batch holds.
    #[error("'{slug}' requires '{target}', which is in no batch")]
    RequiresUnknown {
        /// The dependent.
        slug: Slug,
        /// The target.
        target: Slug,
    },
    /// A `requires` target placed in a later batch.
    #[error(
        "'{slug}' (batch {batch}) requires '{target}', which is only in later batch {target_batch}"
    )]
    RequiresLater {
        /// The dependent.
        slug: Slug,
        /// The dependent's batch.
        batch: String,
        /// The target.
        target: Slug,
        /// The target's batch.
        target_batch: String,
    },
    /// A pre-apply script on disk requiring a background slug: no run
    /// order satisfies it (the blocking tier runs first).
    #[error(
        "'{slug}' (pre-apply) requires '{target}' (background): a pre-apply migration runs before any background one, so no run order satisfies it"
    )]
    RequiresOtherTier {
        /// The pre-apply dependent.
        slug: Slug,
        /// The background target.
        target: Slug,
    },
    /// A cycle of `requires` within one batch.
    #[error("batch {batch}: requires cycle: {cycle}")]
    Cycle {
        /// The batch.
        batch: String,
        /// The cycle.
        cycle: Cycle,
    },
    /// A tag name that cannot be a batch label.
    #[error("tag {tag:?} cannot name a batch: {reason}")]
    BadTag {
        /// The tag.
        tag: String,
        /// Why.
        reason: String,
    },
    /// Too many tags for five-digit batch numbers.
    #[error("{count} release tags do not fit five-digit batch numbers")]
    TooManyTags {
        /// How many.
        count: usize,
    },
}

/// Generation failed; every problem found is listed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("manifest generation failed with {} problem(s):\n{}", problems.len(), problems.iter().map(|p| format!("  {p}")).collect::<Vec<_>>().join("\n"))]
pub struct GenerateError {
    /// Every problem.
    pub problems: Vec<GenerateProblem>,
}
