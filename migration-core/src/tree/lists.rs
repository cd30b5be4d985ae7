//! The two list files: `revoked` (one slug a line) and `legacy-map`
//! (`<integer> <slug>` a line), both with `#` comments.

use std::collections::HashMap;
use std::path::Path;

use super::TreeProblem;
use crate::line_file;
use crate::slug::Slug;

/// One `legacy-map` line: `<integer> <slug>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LegacyPair {
    /// The old global integer.
    pub number: u64,
    /// The slug it became.
    pub slug: Slug,
    /// One-based line in `legacy-map`.
    pub line: usize,
}

/// One `revoked` line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RevokedSlug {
    /// The revoked slug.
    pub slug: Slug,
    /// One-based line in `revoked`.
    pub line: usize,
}

/// Splits a list file into `(line number, words)` for non-empty,
/// comment-stripped lines, reporting non-UTF-8 lines.
fn list_lines(
    file: &Path,
    bytes: &[u8],
    problems: &mut Vec<TreeProblem>,
) -> Vec<(usize, Vec<String>)> {
    let mut out = Vec::new();
    for (line, words) in line_file::records(bytes) {
        match words {
            Some(words) => out.push((line, words.into_iter().map(str::to_owned).collect())),
            None => problems.push(TreeProblem::BadListLine {
                file: file.into(),
                line,
                reason: line_file::NOT_UTF8.into(),
            }),
        }
    }
    out
}

/// Parses `revoked`: one slug per line, `#` comments. A slug listed twice is
/// an error (a sign of a bad merge).
pub fn parse_revoked(file: &Path, bytes: &[u8]) -> Result<Vec<RevokedSlug>, Vec<TreeProblem>> {
    let mut problems = Vec::new();
    let mut out: Vec<RevokedSlug> = Vec::new();
    let mut first_line: HashMap<Slug, usize> = HashMap::new();
    for (line, words) in list_lines(file, bytes, &mut problems) {
        if words.len() != 1 {
            problems.push(TreeProblem::BadListLine {
                file: file.into(),
                line,
                reason: format!("expected one slug per line, found {} words", words.len()),
            });
            continue;
        }
        match Slug::parse(&words[0]) {
            Ok(slug) => {
                if let Some(first) = first_line.get(&slug) {
                    problems.push(TreeProblem::BadListLine {
                        file: file.into(),
                        line,
                        reason: format!("'{slug}' is already revoked on line {first}"),
                    });
                } else {
                    first_line.insert(slug.clone(), line);
                    out.push(RevokedSlug { slug, line });
                }
            }
            Err(e) => problems.push(TreeProblem::BadListLine {
                file: file.into(),
                line,
                reason: e.to_string(),
            }),
        }
    }
    if problems.is_empty() {
        Ok(out)
    } else {
        Err(problems)
    }
}

/// Parses `legacy-map`: `<integer> <slug>` per line, `#` comments. Numbers
/// and slugs must each be unique. The result is sorted by number.
pub fn parse_legacy_map(file: &Path, bytes: &[u8]) -> Result<Vec<LegacyPair>, Vec<TreeProblem>> {
    let mut problems = Vec::new();
    let mut out: Vec<LegacyPair> = Vec::new();
    for (line, words) in list_lines(file, bytes, &mut problems) {
        let bad = |reason: String| TreeProblem::BadListLine {
            file: file.into(),
            line,
            reason,
        };
        if words.len() != 2 {
            problems.push(bad(format!(
                "expected '<integer> <slug>', found {} words",
                words.len()
            )));
            continue;
        }
        let number = match words[0].parse::<u64>() {
            Ok(n) if words[0].bytes().all(|b| b.is_ascii_digit()) => n,
            _ => {
                problems.push(bad(format!("{:?} is not a non-negative integer", words[0])));
                continue;
            }
        };
        let slug = match Slug::parse(&words[1]) {
            Ok(s) => s,
            Err(e) => {
                problems.push(bad(e.to_string()));
                continue;
            }
        };
        if let Some(first) = out.iter().find(|p| p.number == number) {
            problems.push(bad(format!(
                "integer {number} is already mapped on line {}",
                first.line
            )));
        } else if let Some(first) = out.iter().find(|p| p.slug == slug) {
            problems.push(bad(format!(
                "slug '{slug}' is already mapped on line {}",
                first.line
            )));
        } else {
            out.push(LegacyPair { number, slug, line });
        }
    }
    out.sort_by_key(|p| p.number);
    if problems.is_empty() {
        Ok(out)
    } else {
        Err(problems)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(problems: &[TreeProblem]) -> Vec<String> {
        problems.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn revoked_accepts_comments_and_blank_lines() {
        let list = parse_revoked(
            Path::new("revoked"),
            b"# bad idea\n\nold-fix   # see incident 12\nother\n",
        )
        .unwrap();
        let got: Vec<_> = list.iter().map(|r| (r.slug.as_str(), r.line)).collect();
        assert_eq!(got, [("old-fix", 3), ("other", 4)]);
    }

    #[test]
    fn revoked_rejects_bad_slugs_extra_words_and_duplicates_with_lines() {
        let problems = parse_revoked(Path::new("revoked"), b"a\nB\na b\na\n").unwrap_err();
        let text = lines(&problems);
        assert_eq!(text.len(), 3, "{text:?}");
        assert!(text[0].starts_with("revoked:2: slug \"B\""), "{}", text[0]);
        assert!(
            text[1].starts_with("revoked:3: expected one slug"),
            "{}",
            text[1]
        );
        assert_eq!(text[2], "revoked:4: 'a' is already revoked on line 1");
    }

    #[test]
    fn legacy_map_is_sorted_by_number() {
        let map = parse_legacy_map(Path::new("legacy-map"), b"10 ten\n2 two # comment\n").unwrap();
        let got: Vec<_> = map
            .iter()
            .map(|p| (p.number, p.slug.as_str(), p.line))
            .collect();
        assert_eq!(got, [(2, "two", 2), (10, "ten", 1)]);
    }

    #[test]
    fn legacy_map_rejects_duplicates_signs_and_junk() {
        let problems = parse_legacy_map(
            Path::new("legacy-map"),
            b"1 a\n1 b\n2 a\n-3 c\n+4 d\nx e\n5\n5 f g\n",
        )
        .unwrap_err();
        let text = lines(&problems);
        assert_eq!(text.len(), 7, "{text:?}");
        assert_eq!(
            text[0],
            "legacy-map:2: integer 1 is already mapped on line 1"
        );
        assert_eq!(
            text[1],
            "legacy-map:3: slug 'a' is already mapped on line 1"
        );
        assert!(text[2].starts_with("legacy-map:4: \"-3\" is not"));
        assert!(text[3].starts_with("legacy-map:5: \"+4\" is not"));
        assert!(text[4].starts_with("legacy-map:6: \"x\" is not"));
        assert!(text[5].starts_with("legacy-map:7: expected"));
        assert!(text[6].starts_with("legacy-map:8: expected"));
    }

    #[test]
    fn list_files_report_non_utf8_lines() {
        let problems = parse_revoked(Path::new("revoked"), b"ok\n\xc3\x28\n").unwrap_err();
        assert_eq!(lines(&problems), ["revoked:2: not valid UTF-8"]);
    }
}
