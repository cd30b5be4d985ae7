//! The run-time tripwire: no masked failure of a cluster command is ever
//! recorded `ok`.
//!
//! While a script runs, its `PATH` starts with a private directory (mode
//! 0700, one per run, see [`arm`]) of symlinks named after the cluster commands
//! (`kubectl`, `helm`, `flux` and any configured ones, see [`cluster_commands`]) and
//! `migrate-tolerate`, all pointing at the small [`SHIM_BINARY`] shipped
//! next to `migrate`, which dispatches on `argv[0]` ([`dispatch`]); the
//! run's supervisor, which stops scripts whose runner died, is the same
//! binary ([`supervise`]). `KUBECTL`, `HELM`, `FLUX` (the upper-cased
//! names) point at the shims too. The real commands were resolved by the
//! runner from its own `PATH` (never finding a shim) and are passed as
//! absolute paths (`MIGRATE_TRIPWIRE_REAL_<NAME>`).
//!
//! Each call appends a `start` and an `end` line to a report file in that
//! directory, a fresh one per script execution ([`record`]). After the script exits 0, the runner reads the
//! report through the handle it kept open: a call that failed, or that
//! never finished, and was not accepted by `migrate-tolerate` makes the
//! script's outcome `masked-failure`, whatever shell construct hid it from
//! errexit. A report or shim that disappeared while the script ran is a
//! failure too: the runner cannot tell what happened.

pub mod arm;
pub mod classify;
pub mod exec;
pub mod lease;
pub mod ledger_guard;
pub mod record;
pub mod shim;
pub mod supervise;
pub mod tolerate;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use migrate_lint::cluster_commands;

pub use arm::{Armed, Tripwire};
use record::{CallOutcome, ENV_COMMANDS, Record};

/// The failure reason of a script that exited 0 after an unaccepted
/// cluster-command failure.
pub const MASKED_FAILURE: &str = "masked-failure";

/// The file name of the tripwire's binary, next to the `migrate`
/// executable: the shims link to it, and it is the run's supervisor
/// ([`supervise`]).
pub const SHIM_BINARY: &str = "migrate-shim";

/// If this process was started as a cluster-command shim, as
/// `migrate-tolerate` or as `migrate-supervise`, does that job and returns
/// its exit status. The [`SHIM_BINARY`] calls it first thing in `main`: it
/// decides on `argv[0]` alone.
pub fn dispatch() -> Option<i32> {
    let mut args = std::env::args_os();
    let argv0 = args.next()?;
    let name = Path::new(&argv0).file_name()?.to_str()?.to_owned();
    if name == supervise::NAME {
        let rest: Vec<String> = args.map(|a| a.to_string_lossy().into_owned()).collect();
        return Some(supervise::main(rest));
    }
    if name == cluster_commands::TOLERATE {
        let rest: Vec<String> = args.map(|a| a.to_string_lossy().into_owned()).collect();
        return Some(tolerate::main(rest));
    }
    let listed = record::run_variable(ENV_COMMANDS)
        .and_then(|v| v.into_string().ok())
        .is_some_and(|v| v.split(',').any(|c| c == name));
    if !listed && !cluster_commands::DEFAULT_COMMANDS.contains(&name.as_str()) {
        return None;
    }
    let mut argv = vec![name.clone()];
    argv.extend(args.map(|a| a.to_string_lossy().into_owned()));
    Some(shim::main(&name, argv))
}

/// The runner's tripwire settings.
#[derive(Debug, Clone)]
pub struct TripwireConfig {
    /// Cluster commands besides the tree's own `cluster-commands` file
    /// (which the runner adds itself): the defaults plus flags and
    /// environment, see [`cluster_commands::resolve`].
    pub commands: Vec<String>,
    /// The binary the shims point at and the supervisor runs as (it calls
    /// [`dispatch`] first in `main`). `None`, or a path that is not an
    /// executable file: no script can run.
    pub shim: Option<PathBuf>,
    /// More environment for every script (after the runner's own): the
    /// `KUBECONFIG` of the cluster the run was given, so the scripts'
    /// cluster commands talk to the ledger's cluster.
    pub env: Vec<(String, std::ffi::OsString)>,
}

impl Default for TripwireConfig {
    /// The default commands, and the [`SHIM_BINARY`] next to this process's
    /// own executable.
    fn default() -> Self {
        TripwireConfig {
            commands: cluster_commands::union([]),
            shim: std::env::current_exe()
                .ok()
                .and_then(|exe| Some(exe.parent()?.join(SHIM_BINARY))),
            env: Vec::new(),
        }
    }
}

/// One cluster-command call, as the report tells it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Call {
    /// The command line.
    pub argv: Vec<String>,
    /// `shim`, or `migrate-tolerate` and its flags.
    pub via: String,
    /// How it ended; `None` when it never finished.
    pub outcome: Option<CallOutcome>,
    /// Exit status.
    pub status: Option<i32>,
    /// Killing signal.
    pub signal: Option<i32>,
    /// Error classes.
    pub classes: Vec<String>,
    /// Executions of the real command.
    pub attempts: u32,
    /// First lines of stderr.
    pub stderr: Vec<String>,
}

impl Call {
    pub(crate) fn failed(&self) -> bool {
        !matches!(self.outcome, Some(CallOutcome::Ok | CallOutcome::Tolerated))
    }

    pub(crate) fn describe(&self) -> String {
        let how = match (self.outcome, self.status, self.signal) {
            (None, ..) => "never finished (still running when the script exited)".to_owned(),
            (_, _, Some(sig)) => format!("killed by signal {sig}"),
            (_, Some(s), _) => format!("exit {s}"),
            _ => "unknown status".to_owned(),
        };
        let classes = if self.classes.is_empty() {
            String::new()
        } else {
            format!(" [{}]", self.classes.join(","))
        };
        let mut text = format!("{}: {how}{classes}", record::display_argv(&self.argv));
        if self.via != "shim" {
            text.push_str(&format!(" (via {})", self.via.trim()));
        }
        for line in &self.stderr {
            text.push_str("\n    ");
            text.push_str(line);
        }
        text
    }
}

/// Counts for the run report (core's type: the report is core's).
pub use migration_core::drive::CallSummary;

/// Everything the report says about one execution.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Calls {
    /// The calls, in the order they started.
    pub calls: Vec<Call>,
    /// Why the report cannot be trusted, when it cannot.
    pub lost: Option<String>,
    /// Cluster commands the shell could not start, from its own message
    /// ([`unstarted_command`]): no shim ran, so the report cannot show them.
    pub unstarted: Vec<String>,
}

/// A shell's message for a cluster command it could not start because an
/// argument was too long for `execve` (over 128 KiB: `sh: 1: kubectl:
/// Argument list too long`, bash naming the shim's path): the call's
/// description. The shell fails before any shim runs, and in a pipeline
/// under `/bin/sh` nothing else shows it.
pub fn unstarted_command(line: &str, commands: &[String]) -> Option<String> {
    let rest = line.trim_end().strip_suffix(": Argument list too long")?;
    let word = rest.rsplit(": ").next()?.trim();
    let name = Path::new(word).file_name()?.to_str()?;
    commands.iter().any(|c| c == name).then(|| {
        format!(
            "{name}: the shell could not start it (Argument list too long: an argument over 128 KiB; pass large input with -f - or a file)"
        )
    })
}

impl Calls {
    /// Joins `start` and `end` lines. A line that is not a record counts as
    /// a failed call: nothing the runner cannot read is taken as success.
    pub fn parse(text: &str) -> Calls {
        let mut calls: Vec<Call> = Vec::new();
        let mut by_id: HashMap<String, usize> = HashMap::new();
        for (n, line) in text.lines().enumerate() {
            match serde_json::from_str::<Record>(line) {
                Ok(Record::Start { id, argv, via, .. }) => {
                    by_id.insert(id, calls.len());
                    calls.push(Call {
                        argv,
                        via,
                        outcome: None,
                        status: None,
                        signal: None,
                        classes: Vec::new(),
                        attempts: 0,
                        stderr: Vec::new(),
                    });
                }
                Ok(Record::End {
                    id,
                    outcome,
                    status,
                    signal,
                    classes,
                    attempts,
                    stderr,
                }) => {
                    if let Some(call) = by_id.get(&id).and_then(|i| calls.get_mut(*i)) {
                        call.outcome = Some(outcome);
                        call.status = status;
                        call.signal = signal;
                        call.classes = classes;
                        call.attempts = attempts;
                        call.stderr = stderr;
                    }
                }
                Err(e) => calls.push(Call {
                    argv: vec![format!("<unreadable tripwire record on line {}>", n + 1)],
                    via: "shim".into(),
                    outcome: Some(CallOutcome::Failed),
                    status: None,
                    signal: None,
                    classes: Vec::new(),
                    attempts: 0,
                    stderr: vec![e.to_string()],
                }),
            }
        }
        Calls {
            calls,
            lost: None,
            unstarted: Vec::new(),
        }
    }

    /// The counts.
    pub fn summary(&self) -> CallSummary {
        let tolerated: Vec<&Call> = self
            .calls
            .iter()
            .filter(|c| c.outcome == Some(CallOutcome::Tolerated))
            .collect();
        CallSummary {
            calls: self.calls.len(),
            failed: self.calls.iter().filter(|c| c.failed()).count(),
            tolerated: tolerated.len(),
            retried: self
                .calls
                .iter()
                .filter(|c| c.outcome == Some(CallOutcome::Ok) && c.attempts > 1)
                .count(),
            tolerated_calls: tolerated
                .iter()
                .map(|c| {
                    format!(
                        "{} ({})",
                        record::display_argv(&c.argv),
                        c.classes.join(",")
                    )
                })
                .collect(),
        }
    }

    /// For a script that exited 0: the failure message when a call failed
    /// unaccepted (or the report was lost), naming each such call.
    pub fn masked_failure(&self) -> Option<String> {
        let failed: Vec<&Call> = self.calls.iter().filter(|c| c.failed()).collect();
        if failed.is_empty() && self.lost.is_none() && self.unstarted.is_empty() {
            return None;
        }
        let mut text = String::new();
        for u in &self.unstarted {
            text.push_str(&format!("{MASKED_FAILURE}: the script exited 0 but {u}\n"));
        }
        if let Some(lost) = &self.lost {
            text.push_str(&format!(
                "{MASKED_FAILURE}: the script exited 0 but {lost}; the runner cannot tell whether its cluster commands succeeded\n"
            ));
        }
        if !failed.is_empty() {
            text.push_str(&format!(
                "{MASKED_FAILURE}: the script exited 0 after {} failed cluster-command call(s):\n",
                failed.len()
            ));
            for c in &failed {
                text.push_str("  ");
                text.push_str(&c.describe());
                text.push('\n');
            }
            text.push_str(
                "let the script fail, or accept an expected answer explicitly: migrate-tolerate --not-found|--not-served|--already-exists|--conflict -- COMMAND\n",
            );
        }
        Some(text)
    }

    /// For a script recorded `ok`: the entry's message when failures were
    /// tolerated or calls were retried.
    pub fn ok_message(&self) -> Option<String> {
        let s = self.summary();
        let mut parts = Vec::new();
        if s.tolerated > 0 {
            parts.push(format!(
                "{} tolerated cluster-command failure{}: {}",
                s.tolerated,
                if s.tolerated == 1 { "" } else { "s" },
                s.tolerated_calls.join("; ")
            ));
        }
        if s.retried > 0 {
            parts.push(format!(
                "{} cluster-command call{} succeeded after retries",
                s.retried,
                if s.retried == 1 { "" } else { "s" }
            ));
        }
        (!parts.is_empty()).then(|| parts.join("; "))
    }
}

/// A failure message within `cap` bytes: the tripwire's text first (it
/// names the failed calls), then as much of the output's end as fits.
pub fn compose(message: &str, output_tail: &str, cap: usize) -> String {
    let head = truncate_end(message.trim_end(), cap);
    let room = cap.saturating_sub(head.len() + 20);
    if room == 0 || output_tail.is_empty() {
        return head;
    }
    let mut start = output_tail.len().saturating_sub(room);
    while !output_tail.is_char_boundary(start) {
        start += 1;
    }
    format!("{head}\n--- output ---\n{}", &output_tail[start..])
}

/// Writes `bytes` to a new file at `path` that only this user can read
/// (mode 0600), in place of whatever was there. Created with `O_EXCL`: a
/// link a script planted at `path` is removed, never written through.
pub fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    write_new(path, bytes, 0o600)
}

/// Writes `bytes` to a file created anew (`O_EXCL`, `mode`) at `path`,
/// never opened as found.
pub(crate) fn write_new(path: &Path, bytes: &[u8], mode: u32) -> std::io::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt;
    let create = || {
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(path)
    };
    // What is there (a write that failed before its rename, a file planted
    // in its place) is removed only when there is something: removing before
    // every write was a path walk per script for nothing.
    let mut file = match create() {
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            std::fs::remove_file(path)?;
            create()?
        }
        other => other?,
    };
    file.write_all(bytes)
}

fn truncate_end(s: &str, cap: usize) -> String {
    if s.len() <= cap {
        return s.to_owned();
    }
    let mut end = cap;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_without_an_end_is_a_failure() {
        let calls = Calls::parse(
            r#"{"event":"start","id":"1","argv":["kubectl","get","ns"],"via":"shim","pid":1}
{"event":"start","id":"2","argv":["kubectl","get","pods"],"via":"shim","pid":2}
{"event":"end","id":"1","outcome":"ok","status":0,"attempts":1}
"#,
        );
        let message = calls.masked_failure().unwrap();
        assert!(
            message.contains("kubectl get pods: never finished"),
            "{message}"
        );
        assert!(!message.contains("kubectl get ns"), "{message}");
        assert_eq!(calls.summary().calls, 2);
    }

    #[test]
    fn an_unreadable_line_is_a_failure() {
        let calls = Calls::parse("garbage\n");
        assert!(
            calls
                .masked_failure()
                .unwrap()
                .contains("unreadable tripwire record")
        );
    }

    #[test]
    fn tolerated_and_retried_calls_are_counted_in_the_ok_message() {
        let calls = Calls::parse(
            r#"{"event":"start","id":"1","argv":["kubectl","get","crd","x"],"via":"migrate-tolerate --not-found","pid":1}
{"event":"end","id":"1","outcome":"tolerated","status":1,"classes":["not-found"],"attempts":1}
{"event":"start","id":"2","argv":["kubectl","apply","-f","x"],"via":"migrate-tolerate --retry 3","pid":1}
{"event":"end","id":"2","outcome":"ok","status":0,"attempts":3}
"#,
        );
        assert_eq!(calls.masked_failure(), None);
        assert_eq!(
            calls.ok_message().unwrap(),
            "1 tolerated cluster-command failure: kubectl get crd x (not-found); 1 cluster-command call succeeded after retries"
        );
    }

    #[test]
    fn the_composed_message_keeps_the_calls_and_fits_the_budget() {
        let m = compose(
            "masked-failure: kubectl get ns: exit 1",
            &"x".repeat(10_000),
            200,
        );
        assert!(m.len() <= 200, "{}", m.len());
        assert!(m.starts_with("masked-failure: kubectl get ns: exit 1\n--- output ---\nxxx"));
    }
}
