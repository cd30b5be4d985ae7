//! What a plan reports without refusing: warnings and changed scripts.

use std::fmt;

use crate::digest::Sha256Digest;
use crate::slug::Slug;

/// A recorded slug whose script changed on disk since it was recorded. It is
/// never re-run; this is reported so that somebody looks. Serialises as
/// `{"slug", "recorded", "on_disk"}`, each as its text (the `plan` and
/// `verify` documents carry it as it is).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ChecksumMismatch {
    /// The slug.
    pub slug: Slug,
    /// The checksum in the ledger.
    pub recorded: Sha256Digest,
    /// The checksum on disk.
    pub on_disk: Sha256Digest,
}

/// Something worth telling a person that does not stop the run.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Warning {
    /// A ledger key `m.<x>` whose remainder is not a slug.
    UnreadableKey {
        /// The key.
        key: String,
        /// Why.
        reason: String,
    },
    /// A corrupt record for a slug this run does not act on.
    CorruptOffPath {
        /// The ledger key.
        key: String,
        /// Why it is corrupt.
        reason: String,
    },
    /// The `version` key is not an integer, and there is no legacy map, so it
    /// does not matter for this run.
    CorruptVersionIgnored {
        /// The stored value.
        raw: String,
    },
    /// A diverged legacy slot below `version` with no record of any of its
    /// contents: this tree's content runs, and its entry says why
    /// (CONTRACT.md §6.2).
    DivergedLegacyRerun {
        /// This tree's content of the slot.
        slug: Slug,
        /// Why it runs, as its entry will say.
        reason: String,
    },
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Warning::UnreadableKey { key, reason } => {
                write!(f, "ledger key '{key}' is ignored: {reason}")
            }
            Warning::CorruptOffPath { key, reason } => {
                write!(
                    f,
                    "ledger key '{key}' is corrupt ({reason}); this run does not act on it"
                )
            }
            Warning::DivergedLegacyRerun { slug, reason } => {
                write!(f, "'{slug}' runs: {reason}")
            }
            Warning::CorruptVersionIgnored { raw } => {
                write!(
                    f,
                    "ledger 'version' value {raw:?} is not an integer (ignored: the tree has no legacy-map)"
                )
            }
        }
    }
}
