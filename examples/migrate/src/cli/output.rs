//! Where a command's document goes: one JSON document on stdout, or text
//! for people; failures to stderr in text mode.

use std::io::IsTerminal;

use serde::Serialize;

use super::Failure;
use crate::report::{ErrorView, Format, sink};

/// The output settings of one invocation.
#[derive(Debug, Clone, Copy)]
pub struct Out {
    /// `--output`.
    pub format: Format,
    /// Colour text output (stdout is a terminal).
    pub colour: bool,
}

impl Out {
    /// Output in `format`, coloured when stdout is a terminal.
    pub fn to_stdout(format: Format) -> Self {
        Out {
            format,
            colour: std::io::stdout().is_terminal(),
        }
    }

    /// Prints `document` as JSON, or `text(colour)` in text mode.
    pub fn emit(&self, document: &impl Serialize, text: impl FnOnce(bool) -> String) {
        match self.format {
            Format::Json => match serde_json::to_string_pretty(document) {
                Ok(json) => sink::stdout_or_exit(&format!("{json}\n")),
                Err(e) => sink::stderr_line(&format!("migrate: cannot encode output: {e}")),
            },
            Format::Text => sink::stdout_or_exit(&text(self.colour)),
        }
    }

    /// Reports `failure`, unless the command already printed its details.
    pub fn fail(&self, failure: &Failure) {
        if failure.kind.is_empty() {
            return;
        }
        match self.format {
            Format::Json => {
                let view = ErrorView {
                    error: failure.kind,
                    exit_code: failure.code,
                    problems: failure.problems.clone(),
                };
                self.emit(&view, |_| String::new());
            }
            Format::Text => {
                // A problem quotes file names and ledger text: escaped.
                for p in &failure.problems {
                    sink::stderr_line(&format!("migrate: {}", crate::report::printable(p)));
                }
            }
        }
    }
}
