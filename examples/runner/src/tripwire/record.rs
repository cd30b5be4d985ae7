//! The tripwire report: one JSON line per event, appended by the shim and by
//! `migrate-tolerate`, read by the runner after the script exits.
//!
//! Every call writes a `start` line before the real command runs and an
//! `end` line after it exits, so a call that never finished (a background
//! job the script did not wait for, a shim killed mid-call) is visible too.
//! Each line is one `write(2)` on a file opened with `O_APPEND`, so lines
//! from concurrent calls (pipelines, background jobs) never interleave.

use std::io::Write;
use std::path::Path;

use serde::{Deserialize, Serialize};

/// Environment: the report file's path.
pub const ENV_REPORT: &str = "MIGRATE_TRIPWIRE_REPORT";
/// Environment: the cluster commands of this run, comma-separated.
pub const ENV_COMMANDS: &str = "MIGRATE_TRIPWIRE_COMMANDS";
/// Environment prefix: `MIGRATE_TRIPWIRE_REAL_<KEY>` is the absolute path of
/// the real command (empty when it is not installed).
pub const ENV_REAL_PREFIX: &str = "MIGRATE_TRIPWIRE_REAL_";

/// Most stderr lines kept per call, and most bytes per line.
pub const STDERR_LINES: usize = 5;
const LINE_BYTES: usize = 300;

/// How a call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CallOutcome {
    /// Exit status 0 (possibly after retries).
    Ok,
    /// A non-zero exit that nothing accepted.
    Failed,
    /// A failure accepted by `migrate-tolerate` for a named answer class.
    Tolerated,
}

/// One line of the report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "kebab-case")]
pub enum Record {
    /// A call is about to run the real command.
    Start {
        /// Unique within the run: pid and start time.
        id: String,
        /// What is recorded of the command line: the command's name, verb
        /// and resource ([`call_words`]), never its argument values.
        argv: Vec<String>,
        /// Who ran it: `shim` or `migrate-tolerate`.
        via: String,
        /// The pid of the shim or helper.
        pid: u32,
    },
    /// The call is over.
    End {
        /// The `start` line's id.
        id: String,
        /// How it ended.
        outcome: CallOutcome,
        /// The exit status, when it exited.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        status: Option<i32>,
        /// The signal that killed it, when one did.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signal: Option<i32>,
        /// Error classes read from stderr (failed and tolerated calls).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        classes: Vec<String>,
        /// Executions of the real command (more than one after retries).
        attempts: u32,
        /// The first lines of stderr (failed and tolerated calls).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        stderr: Vec<String>,
    },
}

/// Appends one record as one write. The file must already exist: the runner
/// creates it, and a missing report means the run's channel is gone, which
/// the caller must treat as a failure rather than recreate it.
pub fn append(path: &Path, record: &Record) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(record).map_err(std::io::Error::other)?;
    line.push(b'\n');
    let mut file = std::fs::OpenOptions::new().append(true).open(path)?;
    file.write_all(&line)
}

/// A run variable (the report's path, the run's commands) from this
/// process's environment or, when a caller stripped it (`env -i`, Python's
/// `subprocess` with `env={...}`), from the nearest ancestor's: the script
/// that started the caller still has it. Outside a run: `None`.
pub fn run_variable(key: &str) -> Option<std::ffi::OsString> {
    std::env::var_os(key).or_else(|| ancestor_variable(key))
}

fn ancestor_variable(key: &str) -> Option<std::ffi::OsString> {
    use std::os::unix::ffi::OsStringExt;
    let mut entry = key.as_bytes().to_vec();
    entry.push(b'=');
    let mut pid = std::os::unix::process::parent_id();
    // Deep enough for any wrapper chain; the runner itself is above it.
    for _ in 0..32 {
        if pid <= 1 {
            return None;
        }
        if let Ok(env) = std::fs::read(format!("/proc/{pid}/environ"))
            && let Some(value) = env
                .split(|b| *b == 0)
                .find_map(|e| e.strip_prefix(entry.as_slice()))
        {
            return Some(std::ffi::OsString::from_vec(value.to_vec()));
        }
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        let after = &stat[stat.rfind(')')? + 1..];
        pid = after.split_whitespace().nth(1)?.parse().ok()?;
    }
    None
}

/// The report file of this call: see [`run_variable`].
pub fn report_path() -> Option<std::path::PathBuf> {
    run_variable(ENV_REPORT).map(std::path::PathBuf::from)
}

/// A unique id for one call: pid and nanoseconds.
pub fn call_id() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("{}-{nanos}", std::process::id())
}

/// The lines of stderr worth reporting: the first [`STDERR_LINES`] lines
/// that are not klog chatter (or the first lines, if all are), each cut to a
/// few hundred bytes, and the very last line when it was not among them
/// (kubectl prints its verdict last).
pub fn stderr_head(text: &str) -> Vec<String> {
    let all: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let plain: Vec<&str> = all
        .iter()
        .copied()
        .filter(|l| !super::classify::is_klog(l))
        .collect();
    let source = if plain.is_empty() { &all } else { &plain };
    let cut = |l: &str| {
        if l.len() <= LINE_BYTES {
            l.to_owned()
        } else {
            let mut end = LINE_BYTES;
            while !l.is_char_boundary(end) {
                end -= 1;
            }
            format!("{}…", &l[..end])
        }
    };
    let mut out: Vec<String> = source.iter().take(STDERR_LINES).map(|l| cut(l)).collect();
    if source.len() > STDERR_LINES
        && let Some(last) = source.last()
    {
        out.push("…".into());
        out.push(cut(last));
    }
    out
}

/// Kubernetes-shaped words only (`secret`, `deployments.apps`, `crd`): a
/// verb or a resource type, never a value (a password, a literal, a file).
fn is_name_word(word: &str) -> bool {
    (1..=63).contains(&word.len())
        && word.starts_with(|c: char| c.is_ascii_lowercase())
        && word
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '-' | '.' | '/'))
}

/// What is recorded of a cluster call: the command's name, its verb and,
/// for kubectl, helm and flux, the resource type (or release), then `…`
/// when arguments were left out.
/// Argument values (names, literals, files, flags) are never recorded: a
/// tolerated `kubectl create secret generic db --from-literal=password=...`
/// is `kubectl create secret …` in the report, the ledger and the log.
pub fn call_words(argv: &[String]) -> Vec<String> {
    let Some(first) = argv.first() else {
        return Vec::new();
    };
    let name = Path::new(first)
        .file_name()
        .map_or_else(|| first.clone(), |n| n.to_string_lossy().into_owned());
    // The tools whose second word is a resource type (or, for helm, a
    // release); of any other command only the verb is kept.
    let wanted = if matches!(name.as_str(), "kubectl" | "oc" | "helm" | "flux") {
        2
    } else {
        1
    };
    // The words as the command itself reads them: a global flag's value
    // (`--password p`) is never the verb.
    let reading = migrate_lint::command_line::read(first, &argv[1..]);
    let mut words = vec![name];
    for &i in reading.positionals.iter().take(wanted) {
        let arg = &argv[1 + i];
        if !is_name_word(arg) {
            break;
        }
        words.push(arg.clone());
    }
    if words.len() < argv.len() {
        words.push("…".to_owned());
    }
    words
}

/// [`call_words`] as one line for messages.
pub fn display_call(argv: &[String]) -> String {
    display_argv(&call_words(argv))
}

/// Shell-like rendering of an argv for messages: words with spaces or
/// shell metacharacters in single quotes.
pub fn display_argv(argv: &[String]) -> String {
    migration_core::shell::line(argv)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(line: &str) -> Vec<String> {
        call_words(&line.split(' ').map(str::to_owned).collect::<Vec<_>>())
    }

    #[test]
    fn a_call_is_recorded_by_command_verb_and_resource_only() {
        assert_eq!(
            words("kubectl create secret generic db --from-literal=password=x"),
            ["kubectl", "create", "secret", "…"]
        );
        assert_eq!(
            words("/usr/bin/kubectl -n tenant get pods x -o name"),
            ["kubectl", "get", "pods", "…"]
        );
        assert_eq!(words("kubectl get ns"), ["kubectl", "get", "ns"]);
        assert_eq!(
            words("helm upgrade --install rel ./chart --set password=x"),
            ["helm", "upgrade", "rel", "…"]
        );
        assert_eq!(words("mycli login Hunter2"), ["mycli", "login", "…"]);
        assert_eq!(words("mycli Hunter2"), ["mycli", "…"]);
    }

    #[test]
    fn a_value_before_the_verb_is_never_recorded_as_the_verb() {
        for line in [
            "kubectl --password hunter2 get pods",
            "kubectl --username admin get pods",
            "kubectl --kuberc hunter2 get pods",
            "kubectl --made-up-flag hunter2 get pods",
        ] {
            assert_eq!(words(line), ["kubectl", "get", "pods", "…"], "{line}");
        }
        assert_eq!(
            words("helm --kube-token hunter2 --qps 5 upgrade --password pw rel ./c"),
            ["helm", "upgrade", "rel", "…"]
        );
        // A flag past the verb the reader does not know: what follows may be
        // its value, so nothing more is recorded.
        assert_eq!(
            words("kubectl create --from-hunter hunter2 secret"),
            ["kubectl", "create", "…"]
        );
    }

    #[test]
    fn records_round_trip_as_one_json_line_each() {
        let start = Record::Start {
            id: "1-2".into(),
            argv: vec!["kubectl".into(), "get".into(), "ns".into()],
            via: "shim".into(),
            pid: 1,
        };
        let text = serde_json::to_string(&start).unwrap();
        assert!(text.starts_with(r#"{"event":"start""#), "{text}");
        assert_eq!(serde_json::from_str::<Record>(&text).unwrap(), start);
        let end: Record =
            serde_json::from_str(r#"{"event":"end","id":"1-2","outcome":"ok","attempts":1}"#)
                .unwrap();
        assert!(matches!(
            end,
            Record::End {
                outcome: CallOutcome::Ok,
                ..
            }
        ));
    }

    #[test]
    fn the_stderr_head_skips_klog_chatter_and_keeps_the_verdict_line() {
        let text = "E1201 09:11:32.660248   1 memcache.go:265] x\n".repeat(5)
            + "The connection to the server 127.0.0.1:1 was refused - did you specify the right host or port?\n";
        assert_eq!(
            stderr_head(&text),
            [
                "The connection to the server 127.0.0.1:1 was refused - did you specify the right host or port?"
            ]
        );
        let many: String = (1..=9).map(|i| format!("line {i}\n")).collect();
        assert_eq!(
            stderr_head(&many),
            [
                "line 1", "line 2", "line 3", "line 4", "line 5", "…", "line 9"
            ]
        );
    }

    #[test]
    fn argv_is_shown_shell_quoted() {
        let argv: Vec<String> = ["kubectl", "get", "cm", "-o", "jsonpath={.data}", "it's"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(
            display_argv(&argv),
            r"kubectl get cm -o 'jsonpath={.data}' 'it'\''s'"
        );
    }
}
