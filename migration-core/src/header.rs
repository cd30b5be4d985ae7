//! The script header (CONTRACT.md §3): shebang plus `# cozystack-migration: key=value` lines.

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::slug::Slug;

/// The marker that starts every header directive after the comment sign.
pub const HEADER_MARKER: &str = "cozystack-migration:";

/// The execution tier of a migration, which is also its directory name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Tier {
    /// Blocking: runs before the platform chart applies.
    PreApply,
    /// Runs later, one at a time, driven by the operator.
    Background,
}

impl Tier {
    /// Both tiers, in the order an upgrade runs them.
    pub const ALL: [Tier; 2] = [Tier::PreApply, Tier::Background];

    /// The directory and header spelling: `pre-apply` or `background`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Tier::PreApply => "pre-apply",
            Tier::Background => "background",
        }
    }
}

impl fmt::Display for Tier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A string that names neither tier.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown tier {0:?}; expected 'pre-apply' or 'background'")]
pub struct UnknownTier(pub String);

impl FromStr for Tier {
    type Err = UnknownTier;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "pre-apply" => Ok(Tier::PreApply),
            "background" => Ok(Tier::Background),
            other => Err(UnknownTier(other.to_owned())),
        }
    }
}

/// What a failure of the script means for the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OnError {
    /// Record nothing, stop the run, exit non-zero.
    Abort,
    /// Record `failed` with reason and message, continue with the next one.
    Warn,
}

impl OnError {
    /// The header spelling.
    pub const fn as_str(self) -> &'static str {
        match self {
            OnError::Abort => "abort",
            OnError::Warn => "warn",
        }
    }
}

impl fmt::Display for OnError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for OnError {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "abort" => Ok(OnError::Abort),
            "warn" => Ok(OnError::Warn),
            other => Err(format!(
                "unknown on-error {other:?}; expected 'abort' or 'warn'"
            )),
        }
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
    #[error("{}: missing header key '{key}' (add '# {HEADER_MARKER} {key}=...' after the shebang)", file.display())]
    MissingKey {
        /// The script.
        file: PathBuf,
        /// The missing key.
        key: &'static str,
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
    #[error("{}:{line}: unknown header key '{key}' (known: tier, on-error, requires)", file.display())]
    UnknownKey {
        /// The script.
        file: PathBuf,
        /// One-based line.
        line: usize,
        /// The unknown key.
        key: String,
    },
    /// A directive that is not `key=value`.
    #[error("{}:{line}: malformed header directive {text:?}: expected '# {HEADER_MARKER} key=value'", file.display())]
    Malformed {
        /// The script.
        file: PathBuf,
        /// One-based line.
        line: usize,
        /// The directive text after the marker.
        text: String,
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
            | HeaderError::InvalidValue { line, .. }
            | HeaderError::DuplicateRequirement { line, .. }
            | HeaderError::OutsideHeader { line, .. } => Some(*line),
        }
    }
}

/// Returns the directive text after the marker if `line` is a header directive.
fn directive(line: &str) -> Option<&str> {
    let rest = line.trim_start().strip_prefix('#')?;
    rest.trim_start().strip_prefix(HEADER_MARKER)
}

/// Parses the header of a script. `file` is only used in error messages.
///
/// Every problem in the file is reported, not only the first, so that one
/// lint pass shows the whole picture.
pub fn parse_header(file: &Path, bytes: &[u8]) -> Result<Header, Vec<HeaderError>> {
    let mut errors = Vec::new();
    let path = || file.to_path_buf();
    let mut lines = bytes
        .split(|&b| b == b'\n')
        .enumerate()
        .map(|(i, l)| (i + 1, l));

    let shebang = match lines.next() {
        Some((_, first)) if first.starts_with(b"#!") => {
            if first.ends_with(b"\r") {
                return Err(vec![HeaderError::CrlfLineEnding {
                    file: path(),
                    line: 1,
                }]);
            }
            match std::str::from_utf8(&first[2..]) {
                Ok(s) if !s.trim().is_empty() => s.trim().to_owned(),
                Ok(_) => return Err(vec![HeaderError::MissingShebang { file: path() }]),
                Err(_) => {
                    return Err(vec![HeaderError::NotUtf8 {
                        file: path(),
                        line: 1,
                    }]);
                }
            }
        }
        _ => return Err(vec![HeaderError::MissingShebang { file: path() }]),
    };

    let mut tier: Option<(Tier, usize)> = None;
    let mut on_error: Option<(OnError, usize)> = None;
    let mut requires: Vec<Requirement> = Vec::new();
    let mut header_end = 1;
    let mut in_header = true;

    for (line_no, raw) in lines {
        if in_header {
            let is_comment_or_blank = raw.iter().all(u8::is_ascii_whitespace)
                || raw.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'#');
            if !is_comment_or_blank {
                in_header = false;
            }
        }
        if !in_header {
            // Only a cheap marker scan on the body; the body may be any bytes.
            if raw
                .windows(HEADER_MARKER.len())
                .any(|w| w == HEADER_MARKER.as_bytes())
                && directive(&String::from_utf8_lossy(raw)).is_some()
            {
                errors.push(HeaderError::OutsideHeader {
                    file: path(),
                    line: line_no,
                    header_end,
                });
            }
            continue;
        }
        header_end = line_no;
        let Ok(text) = std::str::from_utf8(raw) else {
            errors.push(HeaderError::NotUtf8 {
                file: path(),
                line: line_no,
            });
            continue;
        };
        let Some(body) = directive(text) else {
            continue;
        };
        if text.ends_with('\r') {
            errors.push(HeaderError::CrlfLineEnding {
                file: path(),
                line: line_no,
            });
            continue;
        }
        let body = body.trim();
        let Some((key, value)) = body.split_once('=') else {
            errors.push(HeaderError::Malformed {
                file: path(),
                line: line_no,
                text: body.to_owned(),
            });
            continue;
        };
        let (key, value) = (key.trim(), value.trim());
        let invalid = |key: &'static str, reason: String| HeaderError::InvalidValue {
            file: path(),
            line: line_no,
            key,
            value: value.to_owned(),
            reason,
        };
        match key {
            "tier" => match (tier, value.parse::<Tier>()) {
                (Some((_, first_line)), _) => errors.push(HeaderError::DuplicateKey {
                    file: path(),
                    line: line_no,
                    key: key.to_owned(),
                    first_line,
                }),
                (None, Ok(t)) => tier = Some((t, line_no)),
                (None, Err(e)) => errors.push(invalid("tier", e.to_string())),
            },
            "on-error" => match (on_error, value.parse::<OnError>()) {
                (Some((_, first_line)), _) => errors.push(HeaderError::DuplicateKey {
                    file: path(),
                    line: line_no,
                    key: key.to_owned(),
                    first_line,
                }),
                (None, Ok(o)) => on_error = Some((o, line_no)),
                (None, Err(reason)) => errors.push(invalid("on-error", reason)),
            },
            "requires" => match Slug::parse(value) {
                Ok(target) => {
                    if let Some(first) = requires.iter().find(|r| r.target == target) {
                        errors.push(HeaderError::DuplicateRequirement {
                            file: path(),
                            line: line_no,
                            target,
                            first_line: first.line,
                        });
                    } else {
                        requires.push(Requirement {
                            target,
                            line: line_no,
                        });
                    }
                }
                Err(e) => errors.push(invalid("requires", e.to_string())),
            },
            "" => errors.push(HeaderError::Malformed {
                file: path(),
                line: line_no,
                text: body.to_owned(),
            }),
            other => errors.push(HeaderError::UnknownKey {
                file: path(),
                line: line_no,
                key: other.to_owned(),
            }),
        }
    }

    // Only report a missing key when it is really missing, not when it was
    // present with a bad value (that already has its own error).
    let mentioned = |errors: &[HeaderError], k: &str| {
        errors
            .iter()
            .any(|e| matches!(e, HeaderError::InvalidValue { key, .. } if *key == k))
    };
    if tier.is_none() && !mentioned(&errors, "tier") {
        errors.push(HeaderError::MissingKey {
            file: path(),
            key: "tier",
        });
    }
    if on_error.is_none() && !mentioned(&errors, "on-error") {
        errors.push(HeaderError::MissingKey {
            file: path(),
            key: "on-error",
        });
    }
    match (tier, on_error) {
        (Some((tier, _)), Some((on_error, _))) if errors.is_empty() => Ok(Header {
            shebang,
            tier,
            on_error,
            requires,
        }),
        _ => Err(errors),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Header, Vec<HeaderError>> {
        parse_header(Path::new("pre-apply/x"), text.as_bytes())
    }

    fn only_error(text: &str) -> HeaderError {
        let mut errors = parse(text).unwrap_err();
        assert_eq!(errors.len(), 1, "{errors:?}");
        errors.remove(0)
    }

    #[test]
    fn parses_a_complete_header() {
        let h = parse(
            "#!/bin/sh\n# cozystack-migration: tier=pre-apply\n# cozystack-migration: on-error=abort\n\
             # cozystack-migration: requires=etcd-crds-precreate\n#   cozystack-migration:requires = other\nset -eu\necho hi\n",
        )
        .unwrap();
        assert_eq!(h.shebang, "/bin/sh");
        assert_eq!(h.tier, Tier::PreApply);
        assert_eq!(h.on_error, OnError::Abort);
        let targets: Vec<_> = h
            .requires
            .iter()
            .map(|r| (r.target.as_str(), r.line))
            .collect();
        assert_eq!(targets, [("etcd-crds-precreate", 4), ("other", 5)]);
    }

    #[test]
    fn plain_comments_and_blank_lines_may_sit_between_directives() {
        let h = parse("#!/usr/bin/env bash\n# Relabels PVCs.\n\n# cozystack-migration: tier=background\n#\n# cozystack-migration: on-error=warn\n").unwrap();
        assert_eq!(h.interpreter(), "/usr/bin/env");
        assert_eq!((h.tier, h.on_error), (Tier::Background, OnError::Warn));
    }

    #[test]
    fn missing_shebang_names_line_one() {
        let e = only_error("# cozystack-migration: tier=pre-apply\n");
        assert!(matches!(e, HeaderError::MissingShebang { .. }));
        assert_eq!(e.line(), Some(1));
        assert!(e.to_string().starts_with("pre-apply/x:1:"), "{e}");
    }

    #[test]
    fn empty_file_has_no_shebang() {
        assert!(matches!(only_error(""), HeaderError::MissingShebang { .. }));
        assert!(matches!(
            only_error("#!   \n"),
            HeaderError::MissingShebang { .. }
        ));
    }

    #[test]
    fn missing_keys_are_each_reported() {
        let errors = parse("#!/bin/sh\necho hi\n").unwrap_err();
        let keys: Vec<_> = errors
            .iter()
            .map(|e| match e {
                HeaderError::MissingKey { key, .. } => *key,
                other => panic!("unexpected {other:?}"),
            })
            .collect();
        assert_eq!(keys, ["tier", "on-error"]);
    }

    #[test]
    fn duplicated_key_names_both_lines() {
        let e = only_error(
            "#!/bin/sh\n# cozystack-migration: tier=pre-apply\n# cozystack-migration: on-error=warn\n# cozystack-migration: tier=pre-apply\n",
        );
        assert_eq!(
            e,
            HeaderError::DuplicateKey {
                file: "pre-apply/x".into(),
                line: 4,
                key: "tier".into(),
                first_line: 2
            }
        );
    }

    #[test]
    fn unknown_key_is_an_error_with_its_line() {
        let e = only_error(
            "#!/bin/sh\n# cozystack-migration: tier=pre-apply\n# cozystack-migration: on-error=warn\n# cozystack-migration: retries=3\n",
        );
        assert!(matches!(e, HeaderError::UnknownKey { line: 4, ref key, .. } if key == "retries"));
    }

    #[test]
    fn directive_without_equals_is_malformed_and_the_key_stays_missing() {
        let errors = parse(
            "#!/bin/sh\n# cozystack-migration: tier pre-apply\n# cozystack-migration: on-error=warn\n",
        )
        .unwrap_err();
        assert!(
            matches!(errors[0], HeaderError::Malformed { line: 2, .. }),
            "{errors:?}"
        );
        assert!(
            matches!(errors[1], HeaderError::MissingKey { key: "tier", .. }),
            "{errors:?}"
        );
        assert_eq!(errors.len(), 2);
    }

    #[test]
    fn bad_values_are_invalid_not_missing() {
        let errors = parse(
            "#!/bin/sh\n# cozystack-migration: tier=later\n# cozystack-migration: on-error=ignore\n# cozystack-migration: requires=Bad_Slug\n",
        )
        .unwrap_err();
        let lines: Vec<_> = errors
            .iter()
            .map(|e| match e {
                HeaderError::InvalidValue { key, line, .. } => (*key, *line),
                other => panic!("unexpected {other:?}"),
            })
            .collect();
        assert_eq!(lines, [("tier", 2), ("on-error", 3), ("requires", 4)]);
    }

    #[test]
    fn a_trailing_comment_after_a_value_is_rejected_rather_than_guessed() {
        let e = only_error(
            "#!/bin/sh\n# cozystack-migration: tier=pre-apply   # blocking\n# cozystack-migration: on-error=warn\n",
        );
        assert!(matches!(
            e,
            HeaderError::InvalidValue {
                key: "tier",
                line: 2,
                ..
            }
        ));
    }

    #[test]
    fn duplicate_requirement_is_an_error() {
        let e = only_error(
            "#!/bin/sh\n# cozystack-migration: tier=pre-apply\n# cozystack-migration: on-error=warn\n# cozystack-migration: requires=a\n# cozystack-migration: requires=a\n",
        );
        assert!(matches!(
            e,
            HeaderError::DuplicateRequirement {
                line: 5,
                first_line: 4,
                ..
            }
        ));
    }

    #[test]
    fn directive_below_the_header_block_is_an_error_not_ignored() {
        let e = only_error(
            "#!/bin/sh\n# cozystack-migration: tier=pre-apply\n# cozystack-migration: on-error=warn\nset -eu\n# cozystack-migration: requires=late\n",
        );
        assert_eq!(
            e,
            HeaderError::OutsideHeader {
                file: "pre-apply/x".into(),
                line: 5,
                header_end: 3
            }
        );
    }

    #[test]
    fn crlf_files_are_rejected() {
        let e = only_error("#!/bin/sh\r\n# cozystack-migration: tier=pre-apply\r\n");
        assert!(matches!(e, HeaderError::CrlfLineEnding { line: 1, .. }));
    }

    #[test]
    fn non_utf8_header_line_is_reported_but_binary_body_is_fine() {
        let mut bytes = b"#!/bin/sh\n# cozystack-migration: tier=pre-apply\n# cozystack-migration: on-error=warn\necho ".to_vec();
        bytes.extend_from_slice(&[0xff, 0xfe, b'\n']);
        assert!(parse_header(Path::new("x"), &bytes).is_ok());
        let bad = b"#!/bin/sh\n# caf\xe9\n# cozystack-migration: tier=pre-apply\n# cozystack-migration: on-error=warn\n";
        let errors = parse_header(Path::new("x"), bad).unwrap_err();
        assert!(
            matches!(errors[..], [HeaderError::NotUtf8 { line: 2, .. }]),
            "{errors:?}"
        );
    }

    #[test]
    fn tier_and_on_error_round_trip_through_text() {
        for t in Tier::ALL {
            assert_eq!(t.as_str().parse::<Tier>().unwrap(), t);
        }
        for o in [OnError::Abort, OnError::Warn] {
            assert_eq!(o.as_str().parse::<OnError>().unwrap(), o);
        }
        assert!("Pre-Apply".parse::<Tier>().is_err());
    }
}
