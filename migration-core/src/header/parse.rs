//! Parsing a header: every problem in the file is collected.

use std::path::Path;

use super::{Header, HeaderError, HeaderMarker, OnError, Requirement, Tier, near_miss};
use crate::slug::Slug;

/// Returns the directive text after the marker if `line` is a header directive.
fn directive<'a>(line: &'a str, marker: &str) -> Option<&'a str> {
    let rest = line.trim_start().strip_prefix('#')?;
    rest.trim_start().strip_prefix(marker)
}

/// Parses the header of a script written with the default marker
/// (`cozystack-migration`); [`parse_header_with`] takes the tree's.
pub fn parse_header(file: &Path, bytes: &[u8]) -> Result<Header, Vec<HeaderError>> {
    parse_header_with(file, bytes, &HeaderMarker::default())
}

/// Parses the header of a script whose directives start with `marker`.
/// `file` is only used in error messages. A directive with another marker
/// is a plain comment (or a near miss, when within two edits of `marker`).
///
/// Every problem in the file is reported, not only the first, so that one
/// lint pass shows the whole picture.
pub fn parse_header_with(
    file: &Path,
    bytes: &[u8],
    marker: &HeaderMarker,
) -> Result<Header, Vec<HeaderError>> {
    let marker_text = marker.directive();
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
                .windows(marker_text.len())
                .any(|w| w == marker_text.as_bytes())
                && directive(&String::from_utf8_lossy(raw), marker_text).is_some()
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
        let Some(body) = directive(text, marker_text) else {
            if let Some(suggestion) = near_miss::marker_suggestion(text, marker) {
                errors.push(HeaderError::NearMissMarker {
                    file: path(),
                    line: line_no,
                    text: text.trim().to_owned(),
                    suggestion,
                    marker: marker.clone(),
                });
            }
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
                suggestion: near_miss::malformed_suggestion(body, marker),
                marker: marker.clone(),
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
        let duplicate = |first_line| HeaderError::DuplicateKey {
            file: path(),
            line: line_no,
            key: key.to_owned(),
            first_line,
        };
        match key {
            "tier" => {
                let parsed = value.parse::<Tier>().map_err(|e| e.to_string());
                let invalid = |reason| invalid("tier", reason);
                errors.extend(set_once(&mut tier, parsed, line_no, duplicate, invalid));
            }
            "on-error" => {
                let parsed = value.parse::<OnError>();
                let invalid = |reason| invalid("on-error", reason);
                errors.extend(set_once(&mut on_error, parsed, line_no, duplicate, invalid));
            }
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
                suggestion: None,
                marker: marker.clone(),
            }),
            other => errors.push(HeaderError::UnknownKey {
                file: path(),
                line: line_no,
                key: other.to_owned(),
                suggestion: near_miss::key_suggestion(other).map(str::to_owned),
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
            marker: marker.clone(),
        });
    }
    if on_error.is_none() && !mentioned(&errors, "on-error") {
        errors.push(HeaderError::MissingKey {
            file: path(),
            key: "on-error",
            marker: marker.clone(),
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

/// Sets a key that may appear once to `parsed`, found on `line`; the
/// problem, if any: a second occurrence is a duplicate whatever its value,
/// and a first one whose value does not parse is invalid.
fn set_once<T>(
    slot: &mut Option<(T, usize)>,
    parsed: Result<T, String>,
    line: usize,
    duplicate: impl FnOnce(usize) -> HeaderError,
    invalid: impl FnOnce(String) -> HeaderError,
) -> Option<HeaderError> {
    match (&*slot, parsed) {
        (Some((_, first_line)), _) => Some(duplicate(*first_line)),
        (None, Ok(value)) => {
            *slot = Some((value, line));
            None
        }
        (None, Err(reason)) => Some(invalid(reason)),
    }
}
