//! The tree's reviewed lint baseline (`lint-baseline`): findings accepted
//! in scripts that must not be edited, each with its reason.
//!
//! Converted numbered scripts are frozen: they already ran on most clusters,
//! and the design forbids rewriting their logic (a changed script is a new
//! content, CONTRACT.md §6.2). Their remaining findings cannot be fixed in
//! place, and an inline waiver would edit them. `migrate convert` writes one
//! entry per blocking finding it leaves; a maintainer reviews the file and
//! commits it. An entry names the file, the line, the rule, the sha256 of the
//! file's bytes and a reason:
//!
//! ```text
//! pre-apply/47:66 cluster-command-in-condition 3f2a...e9 frozen legacy script (numbered 47): ...
//! ```
//!
//! An entry accepts exactly that finding while the file holds exactly those
//! bytes: any edit voids it, and the finding blocks again. Accepted findings
//! are listed by `lint` (never silent); the run-time tripwire still guards
//! the script. `ledger-write` is never accepted: a script writing the ledger
//! is refused whatever the file says.

use std::path::Path;

use serde::Serialize;

use crate::finding::{Accepted, Finding};

/// The baseline file, at the tree root.
pub const FILE: &str = "lint-baseline";

/// Rules a baseline entry may not accept.
pub const NEVER: &[&str] = &["ledger-write", "shell-parse", "analysis-limit"];

/// One entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Its line in the baseline file.
    pub at: usize,
    /// The finding's file, relative to the tree root.
    pub file: String,
    /// The finding's line.
    pub line: usize,
    /// The finding's rule.
    pub rule: String,
    /// The sha256 (hex) of the file's bytes the finding was reviewed in.
    pub sha256: String,
    /// Why it is accepted.
    pub reason: String,
}

/// A finding the baseline accepted, for the entry's reason.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Baselined {
    /// The finding and the entry's reason.
    #[serde(flatten)]
    pub finding: Accepted,
    /// The entry's line in `lint-baseline`.
    pub baseline_line: usize,
}

/// A problem with the baseline itself, for lint: its line, the rule
/// (`baseline-entry`, `baseline-stale`, `baseline-unused`) and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// Line in `lint-baseline`.
    pub line: usize,
    /// The rule id.
    pub rule: &'static str,
    /// What is wrong.
    pub message: String,
}

/// Reads the entries of a baseline text; malformed lines are problems.
pub fn parse(text: &str) -> (Vec<Entry>, Vec<Problem>) {
    let mut entries = Vec::new();
    let mut problems = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let at = i + 1;
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let mut words = line.splitn(4, ' ');
        let (place, rule, sha, reason) = (
            words.next().unwrap_or_default(),
            words.next().unwrap_or_default(),
            words.next().unwrap_or_default(),
            words.next().unwrap_or_default().trim(),
        );
        let parsed = place
            .rsplit_once(':')
            .and_then(|(f, l)| Some((f, l.parse::<usize>().ok()?)));
        let bad = |message: String| Problem {
            line: at,
            rule: "baseline-entry",
            message,
        };
        let Some((file, line_no)) = parsed else {
            problems.push(bad(format!(
                "'{place}' is not FILE:LINE; an entry is 'FILE:LINE RULE SHA256 REASON'"
            )));
            continue;
        };
        if sha.len() != 64 || !sha.bytes().all(|b| b.is_ascii_hexdigit()) {
            problems.push(bad(format!(
                "'{sha}' is not the sha256 (64 hex digits) of {file}"
            )));
            continue;
        }
        if reason.is_empty() {
            problems.push(bad(format!(
                "the entry for {file}:{line_no} [{rule}] gives no reason; without one it accepts nothing"
            )));
            continue;
        }
        if NEVER.contains(&rule) {
            problems.push(bad(format!(
                "[{rule}] cannot be accepted by the baseline: fix the script (a script writing the ledger, or one lint cannot read, is never run)"
            )));
            continue;
        }
        entries.push(Entry {
            at,
            file: file.to_owned(),
            line: line_no,
            rule: rule.to_owned(),
            sha256: sha.to_ascii_lowercase(),
            reason: reason.to_owned(),
        });
    }
    (entries, problems)
}

/// The tree's baseline: its entries and problems (none when there is no
/// file). A file that exists but cannot be read is a problem at line 1.
pub fn read(root: &Path) -> (Vec<Entry>, Vec<Problem>) {
    match crate::supplied::tree_file(root, FILE) {
        Ok(Some(bytes)) => match std::str::from_utf8(&bytes) {
            Ok(text) => parse(text),
            Err(_) => (
                Vec::new(),
                vec![Problem {
                    line: 1,
                    rule: "baseline-entry",
                    message: "not UTF-8 text".into(),
                }],
            ),
        },
        Ok(None) => (Vec::new(), Vec::new()),
        Err(e) => (
            Vec::new(),
            vec![Problem {
                line: 1,
                rule: "baseline-entry",
                message: e.to_string(),
            }],
        ),
    }
}

/// One line of a baseline file.
pub fn line(file: &str, line: usize, rule: &str, sha256: &str, reason: &str) -> String {
    format!("{file}:{line} {rule} {sha256} {reason}\n")
}

/// The sha256 (hex) of `bytes`, as entries name it.
pub fn digest(bytes: &[u8]) -> String {
    migration_core::Sha256Digest::of(bytes).to_string()
}

/// What applying a baseline gave.
#[derive(Debug, Default)]
pub struct Applied {
    /// Findings still standing.
    pub findings: Vec<Finding>,
    /// Findings the baseline accepted.
    pub baselined: Vec<Baselined>,
    /// Entries that matched no finding (`baseline-unused`) or name a file
    /// whose bytes changed (`baseline-stale`).
    pub problems: Vec<Problem>,
}

/// Applies `entries` to `findings`. `sha_of` gives the sha256 of a file's
/// bytes as checked (the bytes the plan checksummed, for the pre-run scan).
pub fn apply(
    findings: Vec<Finding>,
    entries: &[Entry],
    sha_of: impl Fn(&str) -> Option<String>,
) -> Applied {
    let mut out = Applied::default();
    let mut used = vec![false; entries.len()];
    for f in findings {
        let matching = entries.iter().position(|e| {
            e.file == f.file
                && Some(e.line) == f.line
                && e.rule == f.rule
                && !NEVER.contains(&f.rule)
                && sha_of(&e.file).is_some_and(|s| s == e.sha256)
        });
        match matching {
            Some(i) => {
                used[i] = true;
                out.baselined.push(Baselined {
                    finding: Accepted::new(f, entries[i].reason.clone()),
                    baseline_line: entries[i].at,
                });
            }
            None => out.findings.push(f),
        }
    }
    for (e, used) in entries.iter().zip(used) {
        if used {
            continue;
        }
        let problem = match sha_of(&e.file) {
            Some(s) if s != e.sha256 => Problem {
                line: e.at,
                rule: "baseline-stale",
                message: format!(
                    "{} changed since this entry was reviewed (sha256 {s}, the entry names {}): the entry accepts nothing; a frozen script must not change",
                    e.file, e.sha256
                ),
            },
            None => Problem {
                line: e.at,
                rule: "baseline-stale",
                message: format!(
                    "{} is not in the tree: the entry accepts nothing; remove it",
                    e.file
                ),
            },
            Some(_) => Problem {
                line: e.at,
                rule: "baseline-unused",
                message: format!(
                    "no [{}] finding at {}:{}: remove the entry",
                    e.rule, e.file, e.line
                ),
            },
        };
        out.problems.push(problem);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_need_a_place_a_sha256_and_a_reason_and_never_accept_a_ledger_write() {
        let sha = "a".repeat(64);
        let text = format!(
            "# reviewed\npre-apply/7:3 kubectl-error-ignored {sha} frozen legacy script\npre-apply/7 x {sha} r\npre-apply/7:4 x abc r\npre-apply/7:5 x {sha}\npre-apply/7:6 ledger-write {sha} r\n"
        );
        let (entries, problems) = parse(&text);
        assert_eq!(entries.len(), 1);
        assert_eq!(
            (entries[0].at, entries[0].line, entries[0].reason.as_str()),
            (2, 3, "frozen legacy script")
        );
        let lines: Vec<usize> = problems.iter().map(|p| p.line).collect();
        assert_eq!(lines, [3, 4, 5, 6]);
    }
}
