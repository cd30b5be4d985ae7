//! The `lint` document: every finding, the waived ones, and whether
//! shellcheck ran.

use std::fmt::Write as _;

use serde::Serialize;

use migrate_lint::finding::Accepted;
use migrate_lint::shell::baseline::{self, Baselined};
use migrate_lint::shell::shellcheck;
use migrate_lint::shell::waiver::Waived;
use migrate_lint::{Finding, Level, LintReport};

/// The `lint` document.
#[derive(Debug, Serialize)]
pub struct LintView {
    /// Findings standing after waivers, in the order lint reports them.
    pub findings: Vec<Finding>,
    /// Findings at level error: any makes the command fail.
    pub errors: usize,
    /// Findings at level warning.
    pub warnings: usize,
    /// Findings a waiver accepted, with its reason.
    pub waived: Vec<Waived>,
    /// Findings the tree's reviewed baseline accepted, with its reason.
    pub baselined: Vec<Baselined>,
    /// Whether shellcheck ran.
    pub shellcheck: shellcheck::Status,
}

impl LintView {
    /// Builds the document from lint's report.
    pub fn new(report: LintReport) -> Self {
        let errors = report
            .findings
            .iter()
            .filter(|f| f.level == Level::Error)
            .count();
        LintView {
            warnings: report.findings.len() - errors,
            errors,
            findings: report.findings,
            waived: report.waived,
            baselined: report.baselined,
            shellcheck: report.shellcheck,
        }
    }

    /// Text for people: one `file:line: level[rule] message` line a finding,
    /// the form editors and CI annotators recognise, after the waived ones;
    /// then why shellcheck did not run, if it did not, and the totals.
    pub fn text(&self) -> String {
        let mut text = String::new();
        // An accepted finding: its line, then what accepted it and why.
        let mut accepted = |kind: &str, a: &Accepted, by: String| {
            let at = a.line.map(|l| format!(":{l}")).unwrap_or_default();
            let (file, rule, message, reason) = (&a.file, a.rule, &a.message, &a.reason);
            let _ = writeln!(
                text,
                "{file}{at}: {kind}[{rule}] {message} ({by}: {reason})"
            );
        };
        for w in &self.waived {
            accepted(
                "waived",
                &w.finding,
                format!("waiver at line {}", w.waiver_line),
            );
        }
        for b in &self.baselined {
            let by = format!("{}:{}", baseline::FILE, b.baseline_line);
            accepted("baselined", &b.finding, by);
        }
        for f in &self.findings {
            let at = f.line.map(|l| format!(":{l}")).unwrap_or_default();
            let level = match f.level {
                Level::Error => "error",
                Level::Warning => "warning",
            };
            let _ = writeln!(text, "{}{at}: {level}[{}] {}", f.file, f.rule, f.message);
        }
        let sc = &self.shellcheck;
        if let (true, false, Some(note)) = (sc.enabled, sc.ran, &sc.note) {
            let _ = writeln!(text, "note: {note}");
        }
        let _ = writeln!(
            text,
            "{} error(s), {} warning(s), {} waived{}",
            self.errors,
            self.warnings,
            self.waived.len(),
            if self.baselined.is_empty() {
                String::new()
            } else {
                format!(", {} accepted by {}", self.baselined.len(), baseline::FILE)
            }
        );
        text
    }
}
