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
            Format::Yaml => match serde_json::to_value(document) {
                Ok(value) => sink::stdout_or_exit(&yaml(&value)),
                Err(e) => sink::stderr_line(&format!("migrate: cannot encode output: {e}")),
            },
            Format::Text | Format::Wide => sink::stdout_or_exit(&text(self.colour)),
        }
    }

    /// Reports `failure`, unless the command already printed its details.
    pub fn fail(&self, failure: &Failure) {
        if failure.kind.is_empty() {
            return;
        }
        match self.format {
            Format::Json | Format::Yaml => {
                let view = ErrorView {
                    error: failure.kind,
                    exit_code: failure.code,
                    problems: failure.problems.clone(),
                };
                self.emit(&view, |_| String::new());
            }
            Format::Text | Format::Wide => {
                // A problem quotes file names and ledger text: escaped.
                for p in &failure.problems {
                    sink::stderr_line(&format!("migrate: {}", crate::report::printable(p)));
                }
            }
        }
    }
}

/// `value` as a YAML document (block style, `---` first): the JSON
/// document's content, so `-o yaml` and `-o json` never differ but in
/// spelling. A string is plain when YAML reads it back as the same string,
/// double-quoted (JSON's escapes, which YAML shares) otherwise.
fn yaml(value: &serde_json::Value) -> String {
    let mut out = String::from("---\n");
    match value {
        serde_json::Value::Object(map) if !map.is_empty() => yaml_block(value, 0, &mut out),
        serde_json::Value::Array(list) if !list.is_empty() => yaml_block(value, 0, &mut out),
        other => {
            out.push_str(&yaml_scalar(other));
            out.push('\n');
        }
    }
    out
}

/// A non-empty mapping or sequence at `indent`, each line ending in `\n`.
fn yaml_block(value: &serde_json::Value, indent: usize, out: &mut String) {
    use serde_json::Value;
    let pad = " ".repeat(indent);
    let nested = |v: &Value| match v {
        Value::Object(m) => !m.is_empty(),
        Value::Array(l) => !l.is_empty(),
        _ => false,
    };
    match value {
        Value::Object(map) => {
            for (key, v) in map {
                let key = yaml_scalar(&Value::String(key.clone()));
                if nested(v) {
                    out.push_str(&format!("{pad}{key}:\n"));
                    yaml_block(v, indent + 2, out);
                } else {
                    out.push_str(&format!("{pad}{key}: {}\n", yaml_scalar(v)));
                }
            }
        }
        Value::Array(list) => {
            for v in list {
                if nested(v) {
                    out.push_str(&format!("{pad}-\n"));
                    yaml_block(v, indent + 2, out);
                } else {
                    out.push_str(&format!("{pad}- {}\n", yaml_scalar(v)));
                }
            }
        }
        other => out.push_str(&format!("{pad}{}\n", yaml_scalar(other))),
    }
}

/// A scalar, or an empty mapping or sequence, on one line.
fn yaml_scalar(value: &serde_json::Value) -> String {
    use serde_json::Value;
    match value {
        Value::Null => "null".to_owned(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) if yaml_plain(s) => s.clone(),
        Value::String(s) => Value::String(s.clone()).to_string(),
        Value::Object(_) => "{}".to_owned(),
        Value::Array(_) => "[]".to_owned(),
    }
}

/// Whether YAML reads `s` unquoted as the string `s`: letters, digits and
/// `-_./` only, starting with a letter, and not a word YAML 1.1 reads as a
/// boolean or null.
fn yaml_plain(s: &str) -> bool {
    const WORDS: [&str; 11] = [
        "true", "false", "null", "yes", "no", "on", "off", "y", "n", "~", "nan",
    ];
    s.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'))
        && !WORDS.contains(&s.to_ascii_lowercase().as_str())
}
