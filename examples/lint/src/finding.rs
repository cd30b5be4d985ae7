//! What lint reports: a finding and its level. The shell rules produce
//! them and the lint driver collects them, so both import this module and
//! neither imports the other.

use serde::Serialize;

/// How serious a finding is. Any error makes `lint` exit non-zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    /// Must be fixed.
    Error,
    /// Worth a look.
    Warning,
}

/// One finding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// Path relative to the tree root.
    pub file: String,
    /// One-based line, where there is one.
    pub line: Option<usize>,
    /// Stable rule id.
    pub rule: &'static str,
    /// Severity.
    pub level: Level,
    /// What is wrong and what to do.
    pub message: String,
}

/// A finding a reviewed exception accepted (a waiver comment, a baseline
/// entry): reported, but not counted and not blocking.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Accepted {
    /// The finding's file.
    pub file: String,
    /// The finding's line.
    pub line: Option<usize>,
    /// The rule.
    pub rule: &'static str,
    /// The finding's message.
    pub message: String,
    /// The exception's reason.
    pub reason: String,
}

impl Accepted {
    /// `finding`, accepted for `reason`.
    pub fn new(finding: Finding, reason: String) -> Self {
        Accepted {
            file: finding.file,
            line: finding.line,
            rule: finding.rule,
            message: finding.message,
            reason,
        }
    }
}
