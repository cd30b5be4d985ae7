//! The script header (CONTRACT.md §3): shebang plus `# cozystack-migration: key=value` lines
//! (the marker is the tree's, [`HeaderMarker`]: `cozystack-migration` unless its `migrate.toml`
//! names another).

//!
//! - `values`: [`Tier`] and [`OnError`];
//! - `parse`: [`parse_header`], [`parse_header_with`];
//! - `render`: [`render_header`], what every writer of headers uses;
//! - `error`: what can be wrong with a header ([`HeaderError`]).

mod error;
pub(crate) mod near_miss;
mod parse;
mod render;
#[cfg(test)]
mod tests;
mod values;

pub use error::HeaderError;
pub use parse::{parse_header, parse_header_with};
pub use render::render_header;
pub use values::{OnError, Tier, UnknownTier};

use std::sync::{Arc, LazyLock};

use crate::slug::Slug;

/// The default marker that starts every header directive after the comment
/// sign (the reference platform's; a tree's `migrate.toml` may name another,
/// [`HeaderMarker`]).
pub const HEADER_MARKER: &str = "cozystack-migration:";

/// The default marker, built once: every default parse shares it.
static DEFAULT_MARKER: LazyLock<HeaderMarker> = LazyLock::new(|| HeaderMarker {
    directive: Arc::from(HEADER_MARKER),
});

/// The marker a tree's header directives start with (`cozystack-migration`
/// by default), so that a platform other than the reference one can write
/// `# acme-migration: tier=pre-apply`. Held with its colon, as a directive
/// spells it; cheap to clone (shared).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct HeaderMarker {
    /// The word and its colon, e.g. `cozystack-migration:`.
    directive: Arc<str>,
}

impl HeaderMarker {
    /// The default marker's word, without the colon.
    pub const DEFAULT_WORD: &'static str = "cozystack-migration";

    /// The marker `word` (without the colon): lower-case ASCII letters,
    /// digits and `-`, starting with a letter, not ending with `-`, 3 to 63
    /// characters. Anything else is refused with the reason: a marker with
    /// blanks, `:` or `=` could never be told apart from a directive's body,
    /// and upper case would invite the near misses the header refuses.
    pub fn new(word: &str) -> Result<Self, String> {
        let ok_chars = word
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
        let reason = if !(3..=63).contains(&word.len()) {
            Some("3 to 63 characters")
        } else if !ok_chars {
            Some("only lower-case letters, digits and '-'")
        } else if !word.starts_with(|c: char| c.is_ascii_lowercase()) {
            Some("it must start with a letter")
        } else if word.ends_with('-') {
            Some("it must not end with '-'")
        } else {
            None
        };
        match reason {
            Some(reason) => Err(format!(
                "{word:?} is not a header marker ({reason}; e.g. 'acme-migration')"
            )),
            None => Ok(HeaderMarker {
                directive: Arc::from(format!("{word}:")),
            }),
        }
    }

    /// The word, without the colon (`cozystack-migration`).
    pub fn word(&self) -> &str {
        self.directive.trim_end_matches(':')
    }

    /// The word and its colon, as a directive starts (`cozystack-migration:`).
    pub fn directive(&self) -> &str {
        &self.directive
    }

    /// Whether this is the default marker.
    pub fn is_default(&self) -> bool {
        &*self.directive == HEADER_MARKER
    }
}

impl Default for HeaderMarker {
    fn default() -> Self {
        DEFAULT_MARKER.clone()
    }
}

impl std::fmt::Display for HeaderMarker {
    /// The directive form, with the colon.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.directive)
    }
}

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
