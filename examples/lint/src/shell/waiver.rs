//! Inline waivers: `# migrate: allow RULE[,RULE...]: REASON`, at the end of
//! the line of a finding, or on a line of its own just before it. The reason is mandatory; a waiver with
//! none is an error and waives nothing, and a waiver that matches no finding
//! is a warning (it is stale, or names the wrong rule or line).

use std::collections::{BTreeMap, HashSet};

use serde::Serialize;

use crate::finding::{Accepted, Finding, Level};

/// One waiver comment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Waiver {
    /// One-based line of the comment.
    pub line: usize,
    /// Whether the comment is alone on its line: it then speaks of the next
    /// line; at the end of a command it speaks of that line only.
    pub own_line: bool,
    /// The rule ids it names.
    pub rules: Vec<String>,
    /// Why; `None` when the comment gives none.
    pub reason: Option<String>,
}

/// A finding a waiver accepted, for the waiver's reason.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Waived {
    /// The finding and the waiver's reason.
    #[serde(flatten)]
    pub finding: Accepted,
    /// The waiver's line.
    pub waiver_line: usize,
}

const MARKER: &str = "migrate:";

/// Reads the waivers of a file. Lines inside heredoc bodies (`heredocs`,
/// one-based inclusive ranges) are text, not comments.
pub fn parse(text: &str, heredocs: &[(usize, usize)]) -> Vec<Waiver> {
    let mut out = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        if heredocs.iter().any(|(a, b)| (*a..=*b).contains(&line)) {
            continue;
        }
        let Some(body) = comment_waiver(raw) else {
            continue;
        };
        let (rules, reason) = match body.split_once(':') {
            Some((rules, reason)) => (rules, Some(reason.trim())),
            None => (body, None),
        };
        let rules: Vec<String> = rules
            .split([',', ' ', '\t'])
            .filter(|r| !r.is_empty())
            .map(str::to_owned)
            .collect();
        out.push(Waiver {
            line,
            own_line: raw.trim_start().starts_with('#'),
            rules,
            reason: reason.filter(|r| !r.is_empty()).map(str::to_owned),
        });
    }
    out
}

/// The text after `# migrate: allow` when the line has such a comment.
fn comment_waiver(line: &str) -> Option<&str> {
    let mut search = 0;
    while let Some(i) = line[search..].find('#') {
        let at = search + i;
        let starts_comment = at == 0
            || line[..at]
                .chars()
                .next_back()
                .is_some_and(char::is_whitespace);
        let rest = line[at + 1..].trim_start();
        if starts_comment && let Some(after) = rest.strip_prefix(MARKER) {
            return after.trim_start().strip_prefix("allow").map(str::trim);
        }
        search = at + 1;
    }
    None
}

impl Waiver {
    /// The one line whose findings it accepts. A waiver at the end of a
    /// line accepting the next line's findings too would silence a finding
    /// nobody reviewed (and leave the one it was written for looking used).
    pub fn target(&self) -> usize {
        if self.own_line {
            self.line + 1
        } else {
            self.line
        }
    }
}

/// What applying waivers gave.
#[derive(Debug, Default)]
pub struct Applied {
    /// Findings still standing.
    pub findings: Vec<Finding>,
    /// Findings waived.
    pub waived: Vec<Waived>,
}

/// Applies the waivers of each file (`waivers`: file to waivers) to
/// `findings`. With `report` set, waiver problems are added as findings:
/// `waiver-reason` (error), `waiver-rule` (error, an unknown rule id) and
/// `waiver-unused` (warning). `known` tells a rule id from a typo.
pub fn apply(
    findings: Vec<Finding>,
    waivers: &BTreeMap<String, Vec<Waiver>>,
    known: impl Fn(&str) -> bool,
    report: bool,
) -> Applied {
    let mut used: HashSet<(String, usize)> = HashSet::new();
    let mut out = Applied::default();
    for f in findings {
        let matching = f.line.and_then(|line| {
            waivers.get(&f.file)?.iter().find(|w| {
                w.target() == line && w.reason.is_some() && w.rules.iter().any(|r| r == f.rule)
            })
        });
        match matching {
            Some(w) => {
                used.insert((f.file.clone(), w.line));
                let reason = w.reason.clone().unwrap_or_default();
                out.waived.push(Waived {
                    finding: Accepted::new(f, reason),
                    waiver_line: w.line,
                });
            }
            None => out.findings.push(f),
        }
    }
    if !report {
        return out;
    }
    for (file, list) in waivers {
        for w in list {
            // At most one finding a waiver: the first thing wrong with it.
            let problem: Option<(&'static str, Level, String)> = if w.rules.is_empty() {
                Some((
                    "waiver-rule",
                    Level::Error,
                    "a waiver must name the rule it waives: '# migrate: allow RULE: reason'".into(),
                ))
            } else if let Some(bad) = w.rules.iter().find(|r| !known(r)) {
                Some((
                    "waiver-rule",
                    Level::Error,
                    format!(
                        "the waiver names '{bad}', which is no rule id; use the id lint reports in brackets"
                    ),
                ))
            } else if w.reason.is_none() {
                Some((
                    "waiver-reason",
                    Level::Error,
                    format!(
                        "a waiver needs a reason: '# migrate: allow {}: why this is safe'; without one it waives nothing",
                        w.rules.join(",")
                    ),
                ))
            } else if !used.contains(&(file.clone(), w.line)) {
                Some((
                    "waiver-unused",
                    Level::Warning,
                    format!(
                        "this waiver of {} matches no finding on {}; remove it",
                        w.rules.join(","),
                        if w.own_line {
                            "the next line (a waiver on a line of its own speaks of the line after it)"
                        } else {
                            "its own line (a waiver after a command speaks of that line)"
                        }
                    ),
                ))
            } else {
                None
            };
            if let Some((rule, level, message)) = problem {
                out.findings.push(Finding {
                    file: file.clone(),
                    line: Some(w.line),
                    rule,
                    level,
                    message,
                });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waivers_are_read_from_comments_with_rules_and_reason() {
        let text = "a\n# migrate: allow for-command-substitution: list is re-checked below\nb # migrate: allow x,y: why\necho '#migrate: allow z'\n# migrate: allow w\n";
        let w = parse(text, &[]);
        assert_eq!(w.len(), 3, "{w:?}");
        assert_eq!(w[0].line, 2);
        assert_eq!(w[0].rules, ["for-command-substitution"]);
        assert_eq!(w[0].reason.as_deref(), Some("list is re-checked below"));
        assert_eq!(w[1].rules, ["x", "y"]);
        assert_eq!((w[2].line, w[2].reason.as_deref()), (5, None));
    }

    #[test]
    fn a_waiver_inside_a_heredoc_body_is_text() {
        assert!(parse("cat <<EOF\n# migrate: allow x: y\nEOF\n", &[(2, 2)]).is_empty());
    }
}
