//! `migrate-tolerate`: the one way a failed cluster command is accepted.
//!
//! ```text
//! migrate-tolerate [--not-found] [--not-served] [--already-exists] [--conflict]
//!                  [--retry N [--retry-delay SECONDS]] -- COMMAND [ARG...]
//! ```
//!
//! It runs the real cluster command (stdin, stdout and stderr passed
//! through). A failure whose every error line is of a named answer class is
//! tolerated: reported to the runner as tolerated, and the helper exits 0.
//! Any other failure (unreachable, timeout, throttled, server error,
//! forbidden, unauthorized, anything unrecognised) is reported as failed and
//! the helper exits with the command's status. With `--retry N`, a failure
//! of only transient classes is retried up to N more times, SECONDS apart
//! (default 2); a call that then succeeds is a success.

use std::collections::BTreeSet;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::classify::{Answer, Class, classify};
use super::exec::{self, Input};
use super::record::{self, CallOutcome, ENV_COMMANDS, Record};
use super::shim::{Real, end_record, real_command};
use migrate_lint::answers::TOLERATED_PREFIX;
use migrate_lint::cluster_commands::{DEFAULT_COMMANDS, TOLERATE};

/// Retries of a bare `--retry`.
pub const DEFAULT_RETRIES: u32 = 3;
/// Most retries `--retry` accepts.
pub const MAX_RETRIES: u32 = 20;
/// Longest `--retry-delay`, in seconds.
pub const MAX_DELAY_SECS: f64 = 300.0;
/// Largest stdin buffered for replay on retries.
const MAX_STDIN: u64 = 64 * 1024 * 1024;

/// Parsed arguments.
#[derive(Debug, Clone, PartialEq)]
pub struct Args {
    /// Answer classes accepted.
    pub accept: BTreeSet<Class>,
    /// Retries of transient failures.
    pub retries: u32,
    /// Pause between attempts.
    pub delay: Duration,
    /// The cluster command and its arguments.
    pub command: Vec<String>,
}

/// The usage text.
pub const USAGE: &str = "usage: migrate-tolerate [--not-found] [--not-served] [--already-exists] [--conflict] [--retry [N] [--retry-delay SECONDS]] -- COMMAND [ARG...]
  --not-found       accept 'Error from server (NotFound)' (helm: 'release: not found')
  --not-served      accept a resource type the server does not serve ('the server doesn't have a resource type', 'no matches for kind')
  --already-exists  accept 'Error from server (AlreadyExists)' (helm: 'cannot re-use a name that is still in use')
  --conflict        accept 'Error from server (Conflict)' ('Operation cannot be fulfilled on ...')
  --retry [N]       retry up to N (default 3) more times while the failure is transient (unreachable, timeout, throttled, 5xx, etcd leader change)
  --retry-delay S   seconds between attempts (default 2)
Every other failure (Forbidden, Unauthorized, unreachable after the retries, ...) stays a failure.";

/// Parses the helper's arguments (without `argv[0]`).
pub fn parse(args: &[String]) -> Result<Args, String> {
    let mut accept = BTreeSet::new();
    let mut retries = 0;
    let mut delay = Duration::from_secs(2);
    let mut delay_given = false;
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        let value = |i: usize| {
            args.get(i + 1)
                .cloned()
                .ok_or_else(|| format!("{a} needs a value"))
        };
        match a {
            "--" => {
                i += 1;
                break;
            }
            flag if Answer::from_flag(flag).is_some() => {
                if let Some(answer) = Answer::from_flag(flag) {
                    accept.insert(Class::of_answer(answer));
                }
            }
            "--retry" => {
                // The count is optional: `--retry -- kubectl ...` retries
                // DEFAULT_RETRIES times.
                match args.get(i + 1) {
                    Some(v) if v.starts_with(|c: char| c.is_ascii_digit()) => {
                        retries = v
                            .parse::<u32>()
                            .ok()
                            .filter(|n| *n <= MAX_RETRIES)
                            .ok_or_else(|| {
                                format!(
                                    "--retry {v:?}: expected a whole number from 0 to {MAX_RETRIES}"
                                )
                            })?;
                        i += 1;
                    }
                    _ => retries = DEFAULT_RETRIES,
                }
            }
            "--retry-delay" => {
                let v = value(i)?;
                let secs = v
                    .parse::<f64>()
                    .ok()
                    .filter(|s| s.is_finite() && (0.0..=MAX_DELAY_SECS).contains(s))
                    .ok_or_else(|| {
                        format!("--retry-delay {v:?}: expected seconds from 0 to {MAX_DELAY_SECS}")
                    })?;
                delay = Duration::from_secs_f64(secs);
                delay_given = true;
                i += 1;
            }
            flag if flag.starts_with('-') => return Err(format!("unknown option {flag:?}")),
            _ => break,
        }
        i += 1;
    }
    let command: Vec<String> = args[i.min(args.len())..].to_vec();
    if command.is_empty() {
        return Err("no command given (put it after --)".into());
    }
    if accept.is_empty() && retries == 0 {
        return Err(
            "name what to tolerate: at least one of --not-found, --not-served, --already-exists, --conflict, --retry N".into(),
        );
    }
    if delay_given && retries == 0 {
        return Err("--retry-delay without --retry".into());
    }
    Ok(Args {
        accept,
        retries,
        delay,
        command,
    })
}

/// The cluster commands of this run (the defaults outside a run).
fn cluster_commands() -> Vec<String> {
    match record::run_variable(ENV_COMMANDS).and_then(|v| v.into_string().ok()) {
        Some(v) if !v.is_empty() => v.split(',').map(str::to_owned).collect(),
        _ => DEFAULT_COMMANDS.iter().map(|s| s.to_string()).collect(),
    }
}

/// kubectl's own subcommands (a word not listed is a plugin).
const KUBECTL_SUBCOMMANDS: &[&str] = &[
    "create",
    "expose",
    "run",
    "set",
    "explain",
    "get",
    "edit",
    "delete",
    "rollout",
    "scale",
    "autoscale",
    "certificate",
    "cluster-info",
    "top",
    "cordon",
    "uncordon",
    "drain",
    "taint",
    "describe",
    "logs",
    "attach",
    "exec",
    "port-forward",
    "proxy",
    "cp",
    "auth",
    "debug",
    "events",
    "diff",
    "apply",
    "patch",
    "replace",
    "wait",
    "kustomize",
    "label",
    "annotate",
    "completion",
    "alpha",
    "api-resources",
    "api-versions",
    "config",
    "plugin",
    "version",
    "options",
];

/// kubectl subcommands whose stderr is not (only) kubectl's answer about an
/// API request: a remote process's output (`exec`, `attach`, `run`,
/// `debug`), a container's log, a stream (`port-forward`, `proxy`, `cp`),
/// a plugin's own text. Nothing they print can be trusted to name an answer
/// class, so tolerance is refused for them.
const KUBECTL_UNTOLERABLE: &[&str] = &[
    "exec",
    "logs",
    "attach",
    "port-forward",
    "proxy",
    "cp",
    "run",
    "debug",
    "plugin",
    "alpha",
];

/// helm's own subcommands (a word not listed is a plugin).
const HELM_SUBCOMMANDS: &[&str] = &[
    "completion",
    "create",
    "dependency",
    "env",
    "get",
    "help",
    "history",
    "install",
    "lint",
    "list",
    "ls",
    "package",
    "pull",
    "push",
    "registry",
    "repo",
    "rollback",
    "search",
    "show",
    "status",
    "template",
    "test",
    "uninstall",
    "delete",
    "upgrade",
    "verify",
    "version",
];

/// The subcommand of a kubectl or helm command line, read as the command
/// reads it ([`migrate_lint::command_line`]).
fn subcommand(command: &[String]) -> Option<&str> {
    migrate_lint::command_line::verb_of(command)
}

/// Why tolerance is refused for this command line, if it is: a kubectl or
/// helm subcommand whose stderr is not the tool's own answer about a request
/// (see `KUBECTL_UNTOLERABLE`), a plugin, or no subcommand at all.
pub fn untolerable(name: &str, command: &[String]) -> Option<String> {
    let (known, refused): (&[&str], &[&str]) = match name {
        "kubectl" => (KUBECTL_SUBCOMMANDS, KUBECTL_UNTOLERABLE),
        "helm" => (HELM_SUBCOMMANDS, &["plugin"]),
        _ => return None,
    };
    match subcommand(command) {
        None => Some(format!("{name} without a subcommand cannot be tolerated")),
        Some(sub) if refused.contains(&sub) => Some(format!(
            "'{name} {sub}' cannot be tolerated: what it prints is not {name}'s answer about a request (a remote process, a log or a stream may say 'not found' too)"
        )),
        Some(sub) if !known.contains(&sub) => Some(format!(
            "'{name} {sub}' is a plugin or unknown subcommand, whose errors {name} does not classify; it cannot be tolerated"
        )),
        Some(_) => None,
    }
}

/// True when the command reads its input from stdin (`-f -`,
/// `--filename=-`, helm's `--values -`): only then is stdin buffered for
/// replay, so a loop's `while read` input is never swallowed.
pub fn reads_stdin(command: &[String]) -> bool {
    let words: Vec<&str> = command.iter().map(String::as_str).collect();
    words
        .windows(2)
        .any(|w| matches!(w[0], "-f" | "--filename" | "--values") && w[1] == "-")
        || words
            .iter()
            .any(|w| matches!(*w, "-f-" | "-f=-" | "--filename=-" | "--values=-"))
}

fn report_path() -> Option<PathBuf> {
    record::report_path()
}

/// Records a call that never ran (a usage error) as failed, so masking the
/// helper's exit status hides nothing. Of its command line only the helper
/// and the wrapped command's name, verb and resource are recorded.
fn record_refusal(args: &[String], message: &str) {
    let mut argv = vec![TOLERATE.to_owned()];
    let command = args
        .iter()
        .position(|a| a == "--")
        .map_or(&[][..], |at| &args[at + 1..]);
    argv.extend(record::call_words(command));
    if let Some(report) = report_path() {
        let id = record::call_id();
        let _ = record::append(
            &report,
            &Record::Start {
                id: id.clone(),
                argv,
                via: TOLERATE.into(),
                pid: std::process::id(),
            },
        );
        let _ = record::append(
            &report,
            &Record::End {
                id,
                outcome: CallOutcome::Failed,
                status: Some(2),
                signal: None,
                classes: vec![Class::Unknown.name().into()],
                attempts: 0,
                stderr: vec![message.to_owned()],
            },
        );
    }
}

/// The helper's main: returns the exit status.
pub fn main(args: Vec<String>) -> i32 {
    if args.iter().any(|a| a == "--help" || a == "-h") && !args.iter().any(|a| a == "--") {
        println!("{USAGE}");
        return 0;
    }
    let parsed = match parse(&args) {
        Ok(p) => p,
        Err(e) => {
            let message = format!("{TOLERATE}: {e}\n{USAGE}");
            eprintln!("{message}");
            record_refusal(&args, &format!("{TOLERATE}: {e}"));
            return 2;
        }
    };
    let name = Path::new(&parsed.command[0])
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    if !cluster_commands().contains(&name) {
        let e = format!(
            "{:?} is not a cluster command of this run ({}); migrate-tolerate only wraps one directly",
            parsed.command[0],
            cluster_commands().join(", ")
        );
        eprintln!("{TOLERATE}: {e}");
        record_refusal(&args, &format!("{TOLERATE}: {e}"));
        return 2;
    }
    let mut command = parsed.command.clone();
    command[0] = name.clone();
    // Retrying a transient failure is fine for any subcommand; accepting an
    // answer class is not.
    if !parsed.accept.is_empty()
        && let Some(e) = untolerable(&name, &command)
    {
        eprintln!("{TOLERATE}: {e}");
        record_refusal(&args, &format!("{TOLERATE}: {e}"));
        return 2;
    }
    let report = report_path();
    let real = match real_command(&name, report.as_deref()) {
        Real::At(p) => Some(p),
        Real::Missing => None,
    };
    let id = record::call_id();
    if let Some(report) = &report {
        let start = Record::Start {
            id: id.clone(),
            argv: record::call_words(&command),
            via: format!("{TOLERATE} {}", flags_text(&parsed)),
            pid: std::process::id(),
        };
        if let Err(e) = record::append(report, &start) {
            eprintln!(
                "{TOLERATE}: cannot record this call in {} ({e}); refusing to run it",
                report.display()
            );
            return 126;
        }
    }
    // The ledger guard reads the manifest first: a refused write never
    // runs, and is never tolerated.
    let guarded = match &report {
        Some(r) => match super::shim::guard(&name, &command, r) {
            Ok(input) => input,
            Err(ran) => {
                let end = end_record(
                    id,
                    &ran,
                    CallOutcome::Failed,
                    0,
                    &[super::shim::LEDGER_WRITE.to_owned()],
                );
                if let Err(e) = record::append(r, &end) {
                    eprintln!(
                        "{TOLERATE}: cannot record how this call ended ({e}); the runner counts it as failed"
                    );
                }
                return ran.shell_status();
            }
        },
        None => None,
    };
    let stdin = if guarded.is_some() {
        guarded
    } else if parsed.retries > 0 && reads_stdin(&command) {
        let mut buf = Vec::new();
        if let Err(e) = std::io::stdin().take(MAX_STDIN).read_to_end(&mut buf) {
            eprintln!("{TOLERATE}: cannot read stdin to replay it: {e}");
        }
        Some(buf)
    } else {
        None
    };
    let mut attempts = 0;
    let (ran, outcome, classes) = loop {
        attempts += 1;
        // Each attempt, retries included, needs a live lease; a refusal is
        // never tolerated nor retried.
        if let Some(Err(lapsed)) = report.as_deref().map(super::lease::in_run) {
            let message = format!("{TOLERATE}: {name}: refused: {}", lapsed.0);
            break (
                exec::Ran::refused(126, message),
                CallOutcome::Failed,
                Vec::new(),
            );
        }
        let ran = match &real {
            None => {
                let message =
                    format!("{name}: not found (the runner found no real {name} on its PATH)");
                exec::Ran::refused(127, message)
            }
            Some(path) => {
                let input = stdin.as_deref().map_or(Input::Inherit, Input::Bytes);
                exec::run(path, &command, input).unwrap_or_else(|e| {
                    exec::Ran::refused(126, format!("{name}: cannot run {}: {e}", path.display()))
                })
            }
        };
        if ran.success() {
            break (ran, CallOutcome::Ok, Vec::new());
        }
        let verdict = if real.is_none() {
            super::classify::Classified {
                classes: [Class::Unknown].into(),
            }
        } else {
            classify(&ran.stderr)
        };
        let classes: Vec<String> = verdict
            .classes
            .iter()
            .map(|c| c.name().to_owned())
            .collect();
        if ran.signal.is_none() && verdict.accepted_by(&parsed.accept) {
            // The prefix is shared (answers::TOLERATED_PREFIX): convert's
            // rewrites read it back from a redirected stderr.
            eprintln!(
                "{TOLERATED_PREFIX}{}: {}",
                verdict.names(),
                record::display_call(&command)
            );
            break (ran, CallOutcome::Tolerated, classes);
        }
        if ran.signal.is_none() && verdict.is_transient() && attempts <= parsed.retries {
            eprintln!(
                "{TOLERATE}: {} failed ({}); retrying in {:.1}s (attempt {} of {})",
                record::display_call(&command),
                verdict.names(),
                parsed.delay.as_secs_f64(),
                attempts + 1,
                parsed.retries + 1
            );
            std::thread::sleep(parsed.delay);
            continue;
        }
        break (ran, CallOutcome::Failed, classes);
    };
    if let Some(report) = &report {
        let end = end_record(id, &ran, outcome, attempts, &classes);
        if let Err(e) = record::append(report, &end) {
            eprintln!(
                "{TOLERATE}: cannot record how this call ended ({e}); the runner counts it as failed"
            );
        }
    }
    match outcome {
        CallOutcome::Ok | CallOutcome::Tolerated => 0,
        CallOutcome::Failed => ran.shell_status(),
    }
}

fn flags_text(a: &Args) -> String {
    let mut words: Vec<String> = a.accept.iter().map(|c| format!("--{}", c.name())).collect();
    if a.retries > 0 {
        words.push(format!("--retry {}", a.retries));
    }
    words.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(words: &[&str]) -> Result<Args, String> {
        parse(&words.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn flags_name_the_accepted_classes_and_the_command_follows() {
        let a = args(&[
            "--not-found",
            "--not-served",
            "--",
            "kubectl",
            "get",
            "crd",
            "x",
        ])
        .unwrap();
        assert_eq!(a.accept, [Class::NotFound, Class::NotServed].into());
        assert_eq!(a.command, ["kubectl", "get", "crd", "x"]);
        let a = args(&[
            "--retry",
            "3",
            "--retry-delay",
            "0.5",
            "kubectl",
            "apply",
            "-f",
            "x",
        ])
        .unwrap();
        assert_eq!((a.retries, a.delay), (3, Duration::from_millis(500)));
        assert!(a.accept.is_empty());
        let a = args(&["--retry", "--", "kubectl", "apply", "-f", "x"]).unwrap();
        assert_eq!(
            (a.retries, a.delay),
            (DEFAULT_RETRIES, Duration::from_secs(2))
        );
    }

    #[test]
    fn a_helper_that_tolerates_nothing_or_has_no_command_is_a_usage_error() {
        assert!(
            args(&["--", "kubectl", "get", "x"])
                .unwrap_err()
                .contains("name what")
        );
        assert!(args(&["--not-found"]).unwrap_err().contains("no command"));
        assert!(
            args(&["--forbidden", "--", "kubectl"])
                .unwrap_err()
                .contains("unknown option")
        );
        assert!(args(&["--retry", "3x", "--", "kubectl"]).is_err());
        assert!(args(&["--retry", "99", "--", "kubectl"]).is_err());
        assert!(args(&["--not-found", "--retry-delay", "1", "--", "kubectl"]).is_err());
    }

    #[test]
    fn tolerance_is_refused_for_commands_whose_stderr_is_not_kubectls_own_answer() {
        let w = |s: &str| s.split(' ').map(str::to_owned).collect::<Vec<_>>();
        for refused in [
            "kubectl exec pod-0 -- cat /x",
            "kubectl -n tenant logs pod-0",
            "kubectl port-forward svc/x 8080:80",
            "kubectl attach pod-0",
            "kubectl cnpg status db",
            "kubectl --context prod debug node/x",
            "helm diff upgrade x ./c",
            "kubectl -n",
        ] {
            let c = w(refused);
            assert!(untolerable(&c[0], &c).is_some(), "{refused}");
        }
        for fine in [
            "kubectl get crd widgets.example.com -o name",
            "kubectl -n tenant delete cm x",
            "kubectl --context=prod create namespace x",
            "helm --kube-context prod uninstall db",
            "flux get kustomization x",
            // Value flags the first list missed: the value was the subcommand.
            "kubectl --username admin --password hunter2 delete cm x",
            "kubectl --kuberc /x --vmodule a=2 get cm x",
            "helm --kube-token t0k --kube-apiserver https://x uninstall db",
            "helm --burst-limit 100 --qps 5 uninstall db",
        ] {
            let c = w(fine);
            assert_eq!(untolerable(&c[0], &c), None, "{fine}");
        }
    }

    #[test]
    fn stdin_is_buffered_only_for_commands_that_read_it() {
        let w = |s: &str| s.split(' ').map(str::to_owned).collect::<Vec<_>>();
        assert!(reads_stdin(&w("kubectl apply -f -")));
        assert!(reads_stdin(&w("kubectl apply --filename=-")));
        assert!(reads_stdin(&w("helm upgrade x c --values -")));
        assert!(!reads_stdin(&w("kubectl get ns")));
        assert!(!reads_stdin(&w("kubectl apply -f x.yaml")));
    }
}
