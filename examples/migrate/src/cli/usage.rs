//! What the command line itself produces: clap's usage errors (one JSON
//! document in JSON mode, like every other error) and the shell
//! completion scripts.

use std::ffi::OsString;
use std::process::ExitCode;

use clap::CommandFactory;
use clap::error::ErrorKind;

use super::args::{Cli, CompletionsArgs};
use crate::report::{ErrorView, sink};
use migrate_shared::exit;

/// Whether the raw arguments ask for `--output json`: the parse failed,
/// so the flag is looked for by hand.
fn json_requested(args: &[OsString]) -> bool {
    args.iter().enumerate().any(|(i, a)| {
        a == "--output=json"
            || a == "-ojson"
            || a == "-o=json"
            || ((a == "--output" || a == "-o") && args.get(i + 1).is_some_and(|v| v == "json"))
    })
}

/// Reports a command line clap rejected (or `--help`/`--version`, which
/// clap hands back as errors) and returns the exit code: in JSON mode a
/// usage error is one document on stdout, `{"error": "bad-input", ...}`.
pub fn usage_error(e: &clap::Error) -> ExitCode {
    let args: Vec<OsString> = std::env::args_os().collect();
    let informational = matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion);
    if informational || !json_requested(&args) {
        // clap prints help to stdout and errors to stderr, with its exit code.
        if e.print().is_err() {
            std::process::exit(sink::CLOSED_PIPE_EXIT);
        }
        return ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(exit::BAD_INPUT));
    }
    let rendered = e.render().to_string();
    let problems: Vec<String> = rendered
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("For more information"))
        .map(|l| l.strip_prefix("error: ").unwrap_or(l).to_owned())
        .collect();
    let view = ErrorView {
        error: "bad-input",
        exit_code: exit::BAD_INPUT,
        problems,
    };
    match serde_json::to_string_pretty(&view) {
        Ok(json) => sink::stdout_or_exit(&format!("{json}\n")),
        Err(_) => sink::stderr_line(&rendered),
    }
    ExitCode::from(exit::BAD_INPUT)
}

/// Prints the completion script for `args.shell` on stdout.
pub fn completions(args: &CompletionsArgs) {
    let mut command = Cli::command();
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut command, "migrate", &mut script);
    sink::stdout_or_exit(&String::from_utf8_lossy(&script));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_is_found_in_either_spelling() {
        let args = |v: &[&str]| v.iter().map(OsString::from).collect::<Vec<_>>();
        assert!(json_requested(&args(&["migrate", "--output", "json", "x"])));
        assert!(json_requested(&args(&["migrate", "x", "--output=json"])));
        assert!(!json_requested(&args(&["migrate", "--output", "text"])));
        assert!(!json_requested(&args(&["migrate", "json"])));
    }
}
