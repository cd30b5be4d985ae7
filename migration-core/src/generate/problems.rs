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
    /// A `legacy-map` line that differs between two places: one integer
    /// naming two slugs, or one slug under two integers.
    #[error(
        "legacy-map line '{first}' shipped in {first_place}, but {second_place} has '{second}'; a shipped legacy-map line is immutable"
    )]
    LegacyLineChanged {
        /// The line as first seen.
        first: String,
        /// Where.
        first_place: Place,
        /// The conflicting line.
        second: String,
        /// Where.
        second_place: Place,
    },
    /// A `legacy-map` line a line tag shipped that the working tree lacks.
    #[error(
        "legacy-map line '{line}' shipped in tag {tag} is missing from the working tree; a shipped legacy-map line is never removed"
    )]
    LegacyLineRemoved {
        /// The line.
        line: String,
        /// The tag that shipped it.
        tag: String,
    },
    /// A slug the working tree's `legacy-map` lists that a line tag shipped
    /// as a regular migration: clusters would seed it `legacy` instead of
    /// running it.
    #[error(
        "'{slug}' shipped in tag {tag} as a regular migration; the working tree's legacy-map now lists it as '{line}', which would seed it 'legacy' instead of running it: remove the line"
    )]
    LegacyAfterShipping {
        /// The slug.
        slug: Slug,
        /// The first line tag that shipped it.
        tag: String,
        /// The legacy-map line.
        line: String,
    },
    /// A slug whose script a line tag deleted (retired), back in a later
    /// tag or on disk: the shipped `<slug> retired` line would flip back.
    #[error(
        "'{slug}' was retired in tag {retired_in} (its script deleted) and is back; a retired slug is never reused, since shipped manifests say '{slug} retired': ship the script under a new slug"
    )]
    RetiredReadded {
        /// The slug.
        slug: Slug,
        /// The line tag that first lacked the script.
        retired_in: String,
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
