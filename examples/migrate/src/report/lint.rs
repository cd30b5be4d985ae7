//! The `lint` document: every finding, and how many are errors.

use std::fmt::Write as _;

use serde::Serialize;

use crate::lint::{Finding, Level};

/// The `lint` document.
#[derive(Debug, Serialize)]
pub struct LintView {
    /// Every finding, in the order lint reports them.
    pub findings: Vec<Finding>,
    /// Findings at level error: any makes the command fail.
    pub errors: usize,
    /// Findings at level warning.
    pub warnings: usize,
}

impl LintView {
    /// Builds the document from lint's findings.
    pub fn new(findings: Vec<Finding>) -> Self {
        let errors = findings.iter().filter(|f| f.level == Level::Error).count();
        LintView {
            warnings: findings.len() - errors,
            errors,
            findings,
        }
    }

    /// Text for people: one `file:line: level[rule] message` line a finding,
    /// the form editors and CI annotators recognise, then the totals.
    pub fn text(&self) -> String {
        let mut text = String::new();
        for f in &self.findings {
            let at = f.line.map(|l| format!(":{l}")).unwrap_or_default();
            let level = match f.level {
                Level::Error => "error",
                Level::Warning => "warning",
            };
            let _ = writeln!(text, "{}{at}: {level}[{}] {}", f.file, f.rule, f.message);
        }
        let _ = writeln!(
            text,
            "{} error(s), {} warning(s)",
            self.errors, self.warnings
        );
        text
    }
}
