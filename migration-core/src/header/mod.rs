//! The script header (CONTRACT.md §3): shebang plus `# cozystack-migration: key=value` lines.

//!
//! - `values`: [`Tier`] and [`OnError`];
//! - `parse`: [`parse_header`];
//! - `error`: what can be wrong with a header ([`HeaderError`]).

mod error;
pub(crate) mod near_miss;
mod parse;
#[cfg(test)]
mod tests;
mod values;

pub use error::HeaderError;
pub use parse::parse_header;
pub use values::{OnError, Tier, UnknownTier};

use crate::slug::Slug;

/// The marker that starts every header directive after the comment sign.
pub const HEADER_MARKER: &str = "cozystack-migration:";

/// One `requires=` line: a slug that must have run first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requirement {
    /// The slug that must run before this script.
    pub target: Slug,
    /// One-based line of the directive, for error messages.
    pub line: usize,
}

/// A parsed, validated header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    /// The interpreter line without `#!`, e.g. `/bin/sh` or `/usr/bin/env bash`.
    pub shebang: String,
    /// The declared tier (the tree loader checks it equals the directory).
    pub tier: Tier,
    /// The declared failure policy.
    pub on_error: OnError,
    /// Slugs that must run first, in the order written.
    pub requires: Vec<Requirement>,
}

impl Header {
    /// The interpreter program (first word of the shebang).
    pub fn interpreter(&self) -> &str {
        self.shebang.split_whitespace().next().unwrap_or("")
    }
}
