//! The run's console on this process's stdout and stderr.

use migration_core::Slug;
use migration_core::drive::Console;

use super::sink;

/// Prints to the process's stdout (or stderr when stdout carries a JSON
/// document).
#[derive(Debug, Clone, Copy)]
pub struct StdConsole {
    /// Send everything to stderr.
    pub stderr_only: bool,
}

impl Console for StdConsole {
    fn script_line(&self, slug: &Slug, line: &str) {
        // Nobody reading any more must not stop a script mid-way.
        if self.stderr_only {
            let event = serde_json::json!({
                "event": "output", "slug": slug.as_str(), "line": line, "text": format!("[{slug}] {line}"),
            });
            sink::stderr_line(&event.to_string());
        } else {
            sink::stdout_line(&format!("[{slug}] {line}"));
        }
    }

    fn progress(&self, line: &str) {
        // In JSON mode stderr is one JSON object per line; `text` is the
        // line text mode prints.
        if self.stderr_only {
            let event =
                serde_json::json!({"event": "progress", "text": format!("migrate: {line}")});
            sink::stderr_line(&event.to_string());
        } else {
            sink::stdout_line(&format!("migrate: {line}"));
        }
    }

    fn step(&self, n: usize, total: usize, slug: &Slug, line: &str) {
        let text = format!("migrate: [{n}/{total}] {line}");
        if self.stderr_only {
            let event = serde_json::json!({
                "event": "start", "n": n, "total": total, "slug": slug.as_str(), "text": text,
            });
            sink::stderr_line(&event.to_string());
        } else {
            sink::stdout_line(&text);
        }
    }
}
