//! Writing to stdout and stderr without panicking on a closed pipe.
//!
//! `println!` panics when the reader went away (`migrate status | head`).
//! A command's document ends quietly instead, as a Unix tool killed by
//! SIGPIPE would: exit status [`CLOSED_PIPE_EXIT`], nothing on stderr. The
//! runner's lines never end the process (a script may be mid-way): they are
//! dropped once nobody reads them.

use std::io::Write;

/// The exit status after stdout's reader went away: 128 + SIGPIPE, what a
/// shell reports for a tool that SIGPIPE ended.
pub const CLOSED_PIPE_EXIT: i32 = 141;

/// Writes `text` to stdout and flushes it; a closed pipe ends the process
/// quietly with [`CLOSED_PIPE_EXIT`]; any other error is reported on stderr.
pub fn stdout_or_exit(text: &str) {
    let mut stdout = std::io::stdout().lock();
    let written = stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush());
    match written {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {
            std::process::exit(CLOSED_PIPE_EXIT)
        }
        Err(e) => stderr_line(&format!("migrate: cannot write the output: {e}")),
    }
}

/// Writes `line` and a newline to stdout, ignoring every error.
pub fn stdout_line(line: &str) {
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(stdout, "{line}").and_then(|()| stdout.flush());
}

/// Writes `line` and a newline to stderr, ignoring every error (there is
/// nowhere left to report one).
pub fn stderr_line(line: &str) {
    let _ = writeln!(std::io::stderr().lock(), "{line}");
}
