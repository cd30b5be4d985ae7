//! The two list files: `revoked` (one slug a line) and `legacy-map`
//! (`<integer> <slug> [others=<slug>,...]` a line), both with `#` comments.

use std::collections::HashMap;
use std::path::Path;

use super::TreeProblem;
use crate::line_file;
use crate::slug::Slug;

/// One `legacy-map` line: `<integer> <slug> [others=<slug>,...]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LegacyPair {
    /// The old global integer.
    pub number: u64,
    /// The slug it became: the content this tree holds at that integer.
    pub slug: Slug,
    /// The other contents the numbered runner held at this integer on other
    /// lines or tags (a diverged slot, CONTRACT.md §6.2): a cluster whose
    /// `version` is above the integer ran exactly one of `slug` and these,
    /// and the integer cannot say which. Empty for an ordinary line. They are
    /// names to look records up by, not manifest lines.
    pub others: Vec<Slug>,
    /// The slot's contents are marked not safe to run twice
    /// (`unsafe-to-repeat`): where it is unknown which of them ran, the plan
    /// refuses instead of running this tree's content (CONTRACT.md §6.2).
    pub unsafe_to_repeat: bool,
    /// One-based line in `legacy-map`.
    pub line: usize,
}

/// The word that introduces a diverged slot's other slugs.
const OTHERS: &str = "others=";

/// The flag that marks a diverged slot's contents as not safe to run twice.
pub const UNSAFE_TO_REPEAT: &str = "unsafe-to-repeat";

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

/// Parses `legacy-map`: `<integer> <slug> [others=<slug>,...]` per line, `#`
/// comments. Numbers and slugs (the `others` included) must each be unique,
/// and the integers must be contiguous: under the numbered runner `version`
/// V means every integer below V ran, so an integer missing between two
/// mapped ones would be a script that ran with no slug to record it. The
/// result is sorted by number.
pub fn parse_legacy_map(file: &Path, bytes: &[u8]) -> Result<Vec<LegacyPair>, Vec<TreeProblem>> {
    let mut problems = Vec::new();
    let mut out: Vec<LegacyPair> = Vec::new();
    // Every slug the map names, first or other, with its line.
    let mut named: HashMap<Slug, usize> = HashMap::new();
    for (line, words) in list_lines(file, bytes, &mut problems) {
        let bad = |reason: String| TreeProblem::BadListLine {
            file: file.into(),
            line,
            reason,
        };
        if !(2..=4).contains(&words.len()) {
            problems.push(bad(format!(
                "expected '<integer> <slug> [others=<slug>,...] [{UNSAFE_TO_REPEAT}]', found {} words",
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
        let mut others = Vec::new();
        let mut unsafe_to_repeat = false;
        let mut ok = true;
        for word in &words[2..] {
            if word == UNSAFE_TO_REPEAT && !unsafe_to_repeat {
                unsafe_to_repeat = true;
                continue;
            }
            let Some(list) = word.strip_prefix(OTHERS).filter(|_| others.is_empty()) else {
                problems.push(bad(format!(
                    "word {word:?} must be '{OTHERS}<slug>,...' (the other contents of a diverged slot) or '{UNSAFE_TO_REPEAT}', each once"
                )));
                ok = false;
                break;
            };
            for word in list.split(',') {
                match Slug::parse(word) {
                    Ok(s) if s == slug || others.contains(&s) => {
                        problems.push(bad(format!("'{s}' is named twice on this line")));
                        ok = false;
                    }
                    Ok(s) => others.push(s),
                    Err(e) => {
                        problems.push(bad(format!("in {OTHERS}: {e}")));
                        ok = false;
                    }
                }
            }
        }
        if unsafe_to_repeat && others.is_empty() && ok {
            problems.push(bad(format!(
                "'{UNSAFE_TO_REPEAT}' marks a diverged slot: the line has no '{OTHERS}'"
            )));
            ok = false;
        }
        if !ok {
            continue;
        }
        if let Some(first) = out.iter().find(|p| p.number == number) {
            problems.push(bad(format!(
                "integer {number} is already mapped on line {}",
                first.line
            )));
            continue;
        }
        let mut clash = false;
        for s in std::iter::once(&slug).chain(&others) {
            if let Some(first) = named.get(s) {
                problems.push(bad(format!("slug '{s}' is already mapped on line {first}")));
                clash = true;
            }
        }
        if clash {
            continue;
        }
        for s in std::iter::once(&slug).chain(&others) {
            named.insert(s.clone(), line);
        }
        out.push(LegacyPair {
            number,
            slug,
            others,
            unsafe_to_repeat,
            line,
        });
    }
    out.sort_by_key(|p| p.number);
    for pair in out.windows(2) {
        let (low, high) = (&pair[0], &pair[1]);
        if high.number != low.number + 1 {
            let missing = if high.number == low.number + 2 {
                format!("integer {} is", low.number + 1)
            } else {
                format!("integers {}..={} are", low.number + 1, high.number - 1)
            };
            problems.push(TreeProblem::BadListLine {
                file: file.into(),
                line: high.line,
                reason: format!(
                    "{missing} not mapped (a gap between {} on line {} and {} here): a cluster past them ran scripts no slug would record",
                    low.number, low.line, high.number
                ),
            });
        }
    }
    if problems.is_empty() {
        Ok(out)
    } else {
        problems.sort_by_key(|p| match p {
            TreeProblem::BadListLine { line, .. } => *line,
            _ => 0,
        });
        Err(problems)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::fixtures::assert_lines;

    /// `bytes` parsed as the tree's `legacy-map`.
    fn legacy_map(bytes: &[u8]) -> Result<Vec<LegacyPair>, Vec<TreeProblem>> {
        parse_legacy_map(Path::new("legacy-map"), bytes)
    }

    /// `bytes` parsed as the tree's `revoked` list.
    fn revoked(bytes: &[u8]) -> Result<Vec<RevokedSlug>, Vec<TreeProblem>> {
        parse_revoked(Path::new("revoked"), bytes)
    }

    /// Asserts that `bytes` is refused as a `legacy-map` with exactly the
    /// problems `expected` spells ([`assert_lines`]), and returns them.
    fn refused_legacy_map(bytes: &[u8], expected: &[&str]) -> Vec<TreeProblem> {
        let problems = legacy_map(bytes).unwrap_err();
        assert_lines(&problems, expected);
        problems
    }

    fn lines(problems: &[TreeProblem]) -> Vec<String> {
        problems.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn revoked_accepts_comments_and_blank_lines() {
        let list = revoked(b"# bad idea\n\nold-fix   # see incident 12\nother\n").unwrap();
        let got: Vec<_> = list.iter().map(|r| (r.slug.as_str(), r.line)).collect();
        assert_eq!(got, [("old-fix", 3), ("other", 4)]);
    }

    #[test]
    fn revoked_rejects_bad_slugs_extra_words_and_duplicates_with_lines() {
        let problems = revoked(b"a\nB\na b\na\n").unwrap_err();
        assert_lines(
            &problems,
            &[
                "revoked:2: slug \"B\"…",
                "revoked:3: expected one slug…",
                "revoked:4: 'a' is already revoked on line 1",
            ],
        );
    }

    #[test]
    fn legacy_map_is_sorted_by_number() {
        let map = legacy_map(b"3 three\n2 two # comment\n").unwrap();
        let got: Vec<_> = map
            .iter()
            .map(|p| (p.number, p.slug.as_str(), p.line))
            .collect();
        assert_eq!(got, [(2, "two", 2), (3, "three", 1)]);
    }

    #[test]
    fn legacy_map_rejects_duplicates_signs_and_junk() {
        let problems = refused_legacy_map(
            b"1 a\n1 b\n2 a\n-3 c\n+4 d\nx e\n5\n5 f g h i\n2 g\n",
            &[
                "legacy-map:2: integer 1 is already mapped on line 1",
                "legacy-map:3: slug 'a' is already mapped on line 1",
                "legacy-map:4: \"-3\" is not…",
                "legacy-map:5: \"+4\" is not…",
                "legacy-map:6: \"x\" is not…",
                "legacy-map:7: expected…",
                "legacy-map:8: expected…",
            ],
        );
        assert_eq!(problems.len(), 7, "line 9 closes the gap: {problems:?}");
    }

    #[test]
    fn legacy_map_with_a_gap_names_the_missing_integers_and_both_lines() {
        let problems = legacy_map(b"1 a\n2 b\n5 e\n6 f\n8 h\n").unwrap_err();
        assert_eq!(
            lines(&problems),
            [
                "legacy-map:3: integers 3..=4 are not mapped (a gap between 2 on line 2 and 5 here): a cluster past them ran scripts no slug would record",
                "legacy-map:5: integer 7 is not mapped (a gap between 6 on line 4 and 8 here): a cluster past them ran scripts no slug would record",
            ]
        );
    }

    #[test]
    fn legacy_map_reads_the_other_contents_of_a_diverged_slot() {
        let map = legacy_map(b"41 41\n42 42-v1-6-0 others=42-v1-5-0,42-v1-5-4\n").unwrap();
        let others: Vec<_> = map[1].others.iter().map(Slug::as_str).collect();
        assert_eq!(
            (map[1].slug.as_str(), others),
            ("42-v1-6-0", vec!["42-v1-5-0", "42-v1-5-4"])
        );
        assert!(map[0].others.is_empty());
    }

    #[test]
    fn legacy_map_refuses_an_other_slug_named_twice_or_a_bare_third_word() {
        refused_legacy_map(
            b"1 a others=b\n2 c others=b\n3 d others=d\n4 e f\n",
            &[
                "legacy-map:2: slug 'b' is already mapped on line 1",
                "legacy-map:3: 'd' is named twice on this line",
                "legacy-map:4: word \"f\"…",
            ],
        );
    }

    #[test]
    fn legacy_map_reads_a_diverged_slot_marked_unsafe_to_repeat_and_refuses_the_mark_elsewhere() {
        let map = legacy_map(b"1 a unsafe-to-repeat others=b\n2 c others=d\n").unwrap();
        assert_eq!(
            map.iter().map(|p| p.unsafe_to_repeat).collect::<Vec<_>>(),
            [true, false]
        );
        assert_eq!(map[0].others[0].as_str(), "b");
        refused_legacy_map(
            b"1 a unsafe-to-repeat\n2 c unsafe-to-repeat unsafe-to-repeat\n",
            &[
                "legacy-map:1: 'unsafe-to-repeat' marks a diverged slot…",
                "legacy-map:2: word \"unsafe-to-repeat\"…",
            ],
        );
    }

    #[test]
    fn list_files_report_non_utf8_lines() {
        let problems = revoked(b"ok\n\xc3\x28\n").unwrap_err();
        assert_eq!(lines(&problems), ["revoked:2: not valid UTF-8"]);
    }
}
