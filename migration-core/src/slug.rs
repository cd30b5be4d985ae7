//! The identity of a migration: its slug (CONTRACT.md §2).

use std::fmt;
use std::sync::Arc;

/// The longest slug the grammar allows, in bytes (and characters: slugs are ASCII).
pub const MAX_SLUG_LEN: usize = 60;

/// A migration's identity: `^[a-z0-9]+(-[a-z0-9]+)*$`, 1 to 60 characters.
///
/// A `Slug` can only be obtained by parsing ([`Slug::parse`], [`FromStr`](std::str::FromStr) or
/// serde deserialisation, which validates too), so holding one proves the
/// grammar holds. Legacy integer names such as `45` are valid slugs.
///
/// The text is shared: a clone (the tree, the manifest and a plan each
/// hold every slug) costs a reference count, not an allocation.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Slug(Arc<str>);

/// Why a string is not a slug.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SlugError {
    /// The input was empty.
    #[error("slug is empty")]
    Empty,
    /// The input is longer than [`MAX_SLUG_LEN`].
    #[error("slug {input:?} is {len} characters long; the limit is {MAX_SLUG_LEN}")]
    TooLong {
        /// The offending input, cut to a printable length.
        input: String,
        /// Its length in characters.
        len: usize,
    },
    /// A character outside `[a-z0-9-]`.
    #[error(
        "slug {input:?} has {found:?} at position {position}; only lowercase ASCII letters, digits and '-' are allowed"
    )]
    InvalidChar {
        /// The offending input, cut to a printable length.
        input: String,
        /// The character that is not allowed.
        found: char,
        /// Zero-based character position of `found`.
        position: usize,
    },
    /// A `-` at the start or end, or two in a row.
    #[error(
        "slug {input:?} has a misplaced '-' at position {position}; dashes separate non-empty words"
    )]
    MisplacedDash {
        /// The offending input, cut to a printable length.
        input: String,
        /// Zero-based character position of the dash.
        position: usize,
    },
}

/// Cuts hostile input down to something safe to print in an error.
fn printable(input: &str) -> String {
    const LIMIT: usize = 80;
    if input.chars().count() <= LIMIT {
        input.to_owned()
    } else {
        let mut cut: String = input.chars().take(LIMIT).collect();
        cut.push('…');
        cut
    }
}

impl Slug {
    /// Parses and validates a slug.
    ///
    /// The error says what is wrong and at which character position.
    pub fn parse(input: &str) -> Result<Self, SlugError> {
        if input.is_empty() {
            return Err(SlugError::Empty);
        }
        let len = input.chars().count();
        if len > MAX_SLUG_LEN {
            return Err(SlugError::TooLong {
                input: printable(input),
                len,
            });
        }
        let mut previous_dash = true; // a leading dash is misplaced
        for (position, c) in input.chars().enumerate() {
            match c {
                'a'..='z' | '0'..='9' => previous_dash = false,
                '-' if previous_dash => {
                    return Err(SlugError::MisplacedDash {
                        input: printable(input),
                        position,
                    });
                }
                '-' => previous_dash = true,
                found => {
                    return Err(SlugError::InvalidChar {
                        input: printable(input),
                        found,
                        position,
                    });
                }
            }
        }
        if previous_dash {
            return Err(SlugError::MisplacedDash {
                input: printable(input),
                position: len - 1,
            });
        }
        Ok(Slug(Arc::from(input)))
    }

    /// The slug as a string.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Slug {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl AsRef<str> for Slug {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

text_form!(Slug, SlugError, Slug::parse);

#[cfg(test)]
mod tests {
    use super::*;

    /// The character and position `input` is refused at, as an invalid
    /// character; panics on any other answer.
    #[track_caller]
    fn invalid_char(input: &str) -> (char, usize) {
        match Slug::parse(input) {
            Err(SlugError::InvalidChar {
                found, position, ..
            }) => (found, position),
            other => panic!("{input:?}: expected InvalidChar, got {other:?}"),
        }
    }

    #[test]
    fn accepts_words_joined_by_single_dashes() {
        for ok in ["a", "redis-failover-group-label", "45", "a1-b2-c3", "x-9"] {
            assert_eq!(Slug::parse(ok).unwrap().as_str(), ok);
        }
    }

    #[test]
    fn accepts_exactly_sixty_characters_and_rejects_sixty_one() {
        let sixty = "a".repeat(60);
        assert!(Slug::parse(&sixty).is_ok());
        let err = Slug::parse(&"a".repeat(61)).unwrap_err();
        assert!(matches!(err, SlugError::TooLong { len: 61, .. }), "{err}");
    }

    #[test]
    fn rejects_empty_input() {
        assert_eq!(Slug::parse(""), Err(SlugError::Empty));
    }

    #[test]
    fn names_the_position_of_an_uppercase_letter() {
        let err = Slug::parse("redis-Fix").unwrap_err();
        assert_eq!(
            err,
            SlugError::InvalidChar {
                input: "redis-Fix".into(),
                found: 'F',
                position: 6
            }
        );
        assert!(err.to_string().contains("position 6"));
    }

    #[test]
    fn rejects_unicode_look_alikes() {
        // Cyrillic 'а' (U+0430) looks like Latin 'a'.
        assert_eq!(invalid_char("redis-f\u{0430}ilover"), ('\u{0430}', 7));
    }

    #[test]
    fn rejects_path_traversal() {
        assert_eq!(invalid_char("../../etc/passwd"), ('.', 0));
    }

    #[test]
    fn rejects_leading_trailing_and_double_dashes() {
        for (input, at) in [("-a", 0), ("a-", 1), ("a--b", 2), ("-", 0)] {
            assert!(
                matches!(Slug::parse(input), Err(SlugError::MisplacedDash { position, .. }) if position == at),
                "{input:?}: expected a misplaced dash at {at}"
            );
        }
    }

    #[test]
    fn rejects_underscores_spaces_and_dots() {
        for bad in ["a_b", "a b", "a.b", "a\nb", "a\0b"] {
            assert!(
                matches!(Slug::parse(bad), Err(SlugError::InvalidChar { .. })),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn error_for_huge_input_is_cut_to_a_printable_size() {
        let huge = "A".repeat(100_000);
        let message = Slug::parse(&huge).unwrap_err().to_string();
        assert!(message.len() < 400, "{} bytes", message.len());
    }

    #[test]
    fn deserialisation_validates() {
        let ok: Slug = serde_json::from_str("\"abc-1\"").unwrap();
        assert_eq!(ok.as_str(), "abc-1");
        let err = serde_json::from_str::<Slug>("\"ABC\"").unwrap_err();
        assert!(err.to_string().contains("position 0"), "{err}");
        assert_eq!(serde_json::to_string(&ok).unwrap(), "\"abc-1\"");
    }
}
