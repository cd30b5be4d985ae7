//! The line format `revoked`, `legacy-map`, `legacy-releases` and the `order.d/` batch files
//! share: one record a line, `#` starts a comment, blank lines carry
//! nothing, and the text is UTF-8.

/// Why a line was rejected before its words were looked at.
pub const NOT_UTF8: &str = "not valid UTF-8";

/// The records of a line file: each non-blank line's one-based number with
/// its words once the comment is cut off, or `None` for a line that is not
/// valid UTF-8 (reported by the caller, in its own error type).
pub fn records(bytes: &[u8]) -> impl Iterator<Item = (usize, Option<Vec<&str>>)> {
    bytes
        .split(|&b| b == b'\n')
        .enumerate()
        .filter_map(|(i, raw)| {
            let line = i + 1;
            let Ok(text) = std::str::from_utf8(raw) else {
                return Some((line, None));
            };
            let content = text.split_once('#').map_or(text, |(before, _)| before);
            let words: Vec<&str> = content.split_whitespace().collect();
            (!words.is_empty()).then_some((line, Some(words)))
        })
}

/// The integer a word spells as a decimal integer is written: ASCII digits
/// only, no leading zero (but `0` itself), within `u64`. `None` for
/// anything else (`+1`, `01`, ` 1`, a number past `u64`), so that one
/// integer has one spelling wherever the engine reads one (slots, targets,
/// version parts).
pub fn decimal(word: &str) -> Option<u64> {
    let canonical =
        word.bytes().all(|b| b.is_ascii_digit()) && !(word.len() > 1 && word.starts_with('0'));
    canonical.then(|| word.parse().ok()).flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comments_and_blank_lines_carry_no_record_and_bad_utf8_is_named_by_line() {
        let got: Vec<_> = records(b"# heading\n\na b # note\n\xc3\x28\n  c\n").collect();
        assert_eq!(
            got,
            [(3, Some(vec!["a", "b"])), (4, None), (5, Some(vec!["c"]))]
        );
    }

    #[test]
    fn a_decimal_is_digits_without_a_leading_zero_that_fit_u64() {
        assert_eq!(decimal("0"), Some(0));
        assert_eq!(decimal("42"), Some(42));
        assert_eq!(decimal("18446744073709551615"), Some(u64::MAX));
        for word in [
            "",
            "01",
            "00",
            "+1",
            "-1",
            " 1",
            "1a",
            "18446744073709551616",
        ] {
            assert_eq!(decimal(word), None, "{word:?}");
        }
    }
}
