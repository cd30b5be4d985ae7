//! What the command prints: stable JSON documents (what tests and tooling
//! read) and aligned text for people, one module per command's document.
//! This module holds what they share: the format, colours and tables.

mod console;
mod lint;
mod manifest;
mod plan;
pub mod sink;
mod status;
mod verify;

pub use console::StdConsole;
pub use lint::LintView;
pub use manifest::{BatchLineView, BatchView, ManifestView};
pub use plan::{PendingView, PlanView, SeedView, SkippedView, UnmetView};
pub use status::{CorruptView, EntryView, LastFailureView, StatusView};
pub use verify::VerifyView;

use migration_core::drive::fresh_install_reason;

/// The loud notice `plan` and `run` print on stderr when they treat the
/// run as a fresh install (CONTRACT.md §6.1): a mistyped ledger path or a
/// deleted ledger looks the same, and would skip every pending migration.
/// `run` gets here only with `--fresh-install`; a `plan` without it also
/// says that `run` will refuse.
pub fn fresh_install_notice(ledger: &str, run_needs_flag: bool) -> String {
    let mut notice = format!(
        "FRESH INSTALL: {}, so this cluster is treated as new: every manifest slug is recorded \
         skipped-fresh-install and no migration runs. If this cluster ran migrations before, stop: \
         its ledger was deleted or the ledger spec is wrong",
        fresh_install_reason(ledger)
    );
    if run_needs_flag {
        notice.push_str(". ");
        notice.push_str(&run_needs_fresh_install(ledger));
    }
    notice
}

/// What `plan` says of a fresh install it shows without `--fresh-install`:
/// `run` would refuse it.
pub fn run_needs_fresh_install(ledger: &str) -> String {
    format!(
        "`migrate run` refuses this missing ledger ({ledger}) unless given --fresh-install \
         (MIGRATE_FRESH_INSTALL=true), for a new cluster only"
    )
}

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

/// `text` safe to hand to a terminal: every control character but newline
/// and tab (C0, DEL, C1) and every bidirectional-text control is shown as
/// an escape (`\x1b`, `\u{202e}`) instead of being printed raw. What the
/// ledger holds (a script's output tail, a message) and what a file name
/// holds is anybody's text: raw, an escape sequence could clear the
/// screen, rewrite earlier lines or retitle the terminal, and a carriage
/// return or a bidi override could make a line read as something else.
pub fn printable(text: &str) -> std::borrow::Cow<'_, str> {
    let unsafe_char = |c: char| {
        (c.is_control() && c != '\n' && c != '\t')
            || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
    };
    if !text.chars().any(unsafe_char) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            c if !unsafe_char(c) => out.push(c),
            c if (c as u32) < 0x80 => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
        }
    }
    std::borrow::Cow::Owned(out)
}

/// `--output`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Aligned text for people; coloured only on a terminal.
    Text,
    /// The text, naming every slug a count stands for (as plan's wide
    /// option), as kubectl's wide output adds columns.
    Wide,
    /// One stable JSON document on stdout.
    Json,
    /// The same document as YAML, as kubectl's `-o yaml`.
    Yaml,
}

impl Format {
    /// True for the formats that print one document (JSON or YAML): the
    /// run's progress then goes to stderr only.
    pub fn is_document(self) -> bool {
        matches!(self, Format::Json | Format::Yaml)
    }
}

/// Wraps `text` in an ANSI colour when `enabled`.
pub fn paint(text: &str, colour: Colour, enabled: bool) -> String {
    if !enabled {
        return text.to_owned();
    }
    let code = match colour {
        Colour::Red => "31",
        Colour::Green => "32",
        Colour::Yellow => "33",
        Colour::Dim => "2",
        Colour::Bold => "1",
    };
    format!("\x1b[{code}m{text}\x1b[0m")
}

/// Appends `text` as one line, painted when `enabled`.
pub fn paint_line(out: &mut String, text: &str, colour: Colour, enabled: bool) {
    let _ = writeln!(out, "{}", paint(text, colour, enabled));
}

/// How many times each name occurs, as `"2 legacy, 1 revoked"` in name order.
pub fn counted<'a>(names: impl IntoIterator<Item = &'a str>) -> String {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for name in names {
        *counts.entry(name).or_default() += 1;
    }
    counts
        .iter()
        .map(|(name, n)| format!("{n} {name}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The few colours text output uses.
#[derive(Debug, Clone, Copy)]
pub enum Colour {
    /// Failures.
    Red,
    /// Success.
    Green,
    /// Warnings.
    Yellow,
    /// Secondary detail.
    Dim,
    /// Headings.
    Bold,
}

/// Renders the `header` row and then `rows` as left-aligned columns
/// separated by two spaces.
pub fn table(header: &[&str], rows: impl IntoIterator<Item = Vec<String>>) -> String {
    let rows: Vec<Vec<String>> = std::iter::once(header.iter().map(|h| (*h).to_owned()).collect())
        .chain(rows)
        .collect();
    let width = rows.iter().map(Vec::len).max().unwrap_or(0);
    let mut widths = vec![0usize; width];
    for row in &rows {
        for (i, cell) in row.iter().enumerate() {
            widths[i] = widths[i].max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for row in &rows {
        let mut line = String::new();
        for (i, cell) in row.iter().enumerate() {
            if i + 1 == row.len() {
                line.push_str(cell);
            } else {
                let _ = write!(line, "{cell:<w$}  ", w = widths[i]);
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// The document printed for any error in JSON mode.
#[derive(Debug, Serialize)]
pub struct ErrorView {
    /// `bad-input`, `refused`, `environment`, `migration-failed`, `verify-failed`.
    pub error: &'static str,
    /// The process exit code.
    pub exit_code: u8,
    /// One line per problem.
    pub problems: Vec<String>,
}

#[cfg(test)]
mod printable_tests {
    use super::printable;

    #[test]
    fn printable_escapes_terminal_controls_and_keeps_newlines_tabs_and_text() {
        assert_eq!(printable("plain\ttext\nüber"), "plain\ttext\nüber");
        assert_eq!(
            printable("a\u{1b}[2J\rb\u{7f}\u{9b}c\u{202e}d"),
            "a\\x1b[2J\\x0db\\x7f\\u{9b}c\\u{202e}d"
        );
    }
}
