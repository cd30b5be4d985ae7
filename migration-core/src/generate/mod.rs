//! Manifest generation from a release history (CONTRACT.md §4), as a pure function.
//!
//! The git adapter (in the command-line tool) reads tags and trees; this
//! module decides. Input: the tags of one release line in semantic-version
//! order, every other release tag of the repository (for the immutability
//! guard), the tree on disk now, and the legacy map.

//!
//! In order: the immutability guard (`immutability`), each slug to the batch
//! that first ships it (`assign`), then every batch ordered by `requires`
//! (`requires`). `history` holds the input types.

mod assign;
mod history;
mod immutability;
mod legacy_guard;
mod problems;
mod requires;
#[cfg(test)]
mod tests;

pub use history::{LegacyMapAt, Place, ReleaseHistory, ScriptInfo, TagTree};
pub use problems::{GenerateError, GenerateProblem};

use crate::manifest::Manifest;

/// The immutability guard alone (CONTRACT.md §4.5): each slug with two
/// contents anywhere in `history` (tags and the disk), as [`generate`]
/// reports it. For the checks before a release (`migrate lint`, `migrate
/// plan`) that must find exactly what the release's own guard will.
pub fn content_changes(history: &ReleaseHistory) -> Vec<GenerateProblem> {
    immutability::immutability_problems(history)
}

/// Generates the manifest (CONTRACT.md §4 steps 1 to 5).
///
/// - `00000-legacy`: the legacy-map slugs in integer order;
/// - `NNNNN-<tag>` for the Nth tag of the line (1-based) that first ships
///   any slug, holding those slugs sorted alphabetically and then stably by
///   `requires`; tags that ship nothing new produce no file;
/// - `99999-untagged`: slugs on disk that no tag of the line ships, omitted
///   when empty (a build exactly at a tag has none);
/// - a slug shipped by a tag but absent on disk is flagged `retired`.
pub fn generate(history: &ReleaseHistory) -> Result<Manifest, GenerateError> {
    let _span = tracing::debug_span!("generate_manifest", tags = history.line.len()).entered();
    let mut problems = immutability::immutability_problems(history);
    if history.line.len() >= crate::manifest::UNTAGGED_SEQUENCE as usize {
        problems.push(GenerateProblem::TooManyTags {
            count: history.line.len(),
        });
        return Err(GenerateError { problems });
    }
    problems.extend(immutability::retired_readded_problems(history));
    problems.extend(legacy_guard::legacy_map_problems(history));
    requires::tier_problems(history, &mut problems);
    let assignment = assign::assign(history, &mut problems);
    let batches = requires::order_batches(history, assignment, &mut problems);
    if !problems.is_empty() {
        return Err(GenerateError { problems });
    }
    Manifest::from_batches(batches).map_err(|errors| GenerateError {
        problems: errors
            .into_iter()
            .map(|e| GenerateProblem::BadTag {
                tag: String::new(),
                reason: e.to_string(),
            })
            .collect(),
    })
}
