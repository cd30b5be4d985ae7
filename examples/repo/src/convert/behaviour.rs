//! The behaviour check: each numbered script and its conversion run under
//! the same recording fake cluster commands, and the only difference
//! allowed is the version stamp.
//!
//! The original runs as the numbered runner ran it (its shebang's
//! interpreter on the file, beside its `lib/`), the conversion as the
//! engine runs it (the runner's own command line, core's
//! `ScriptCommand`: errexit, pipefail under bash, `$MIGRATION_TREE`),
//! each in a scratch directory with a private `PATH` whose first directory
//! holds the fakes. Paths compared:
//!
//! - the success path: every cluster call exits 0 with empty output (a
//!   `--dry-run` call prints its own arguments, so a rendered manifest piped
//!   on still names what it renders);
//! - for each call the original branches on (after it fails, the original
//!   makes another call or exits other than 1, the status errexit gives),
//!   the path where that call alone fails with kubectl's `NotFound` error
//!   (helm's `release: not found`), and the conversion's matching call fails
//!   the same way.
//!
//! On each path the calls are compared in order (every argument, and what a
//! call read from stdin), with the script's own paths written as `$0` and
//! `$TREE`. A call of the original that writes the ledger ConfigMap, or
//! names it where the conversion has no such call (a read the stamp helper
//! did), is the stamp and may be missing from the conversion; a retry-later
//! `exit 0` before the stamp is the conversion's exit 75. Anything else is a
//! difference, named by its first differing call.
//!
//! The fakes are small sh scripts written at run time: the tripwire's shim
//! records only a call's command, verb and resource (argument values are
//! never kept, see the runner's `tripwire::record`), which cannot show that
//! a conversion changed an argument. The cluster commands' fakes are also
//! shell functions defined before the script in the shell that runs it, so
//! a call starts no process: process starts were most of the check's cost.
//! The environment never reaches a real
//! cluster: `KUBECONFIG` and the in-cluster variables are removed, `HOME`
//! and `TMPDIR` are the scratch directory, and a script is killed after
//! [`Settings::timeout`] or its [`Settings::max_calls`]th call.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde::Serialize;

/// The exit status the fakes fail a call with.
const FAIL_STATUS: i32 = 1;

/// A failure the fakes answer one call with, in the text the command
/// prints for it (kubectl's and helm's own; every one exits 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum FailureClass {
    /// The object is not there (a call naming one; every helm call).
    NotFound,
    /// The call is not allowed.
    Forbidden,
    /// The API server cannot be reached.
    Unreachable,
    /// No answer in time.
    Timeout,
    /// The object is already there (`create`, `helm install`).
    AlreadyExists,
    /// A write lost a race (`apply`, `replace`, `patch`).
    Conflict,
}

/// kubectl's verbs that name one object and answer NotFound when it is
/// not there.
const NAMED_VERBS: &[&str] = &[
    "get",
    "delete",
    "patch",
    "annotate",
    "label",
    "replace",
    "edit",
    "scale",
    "describe",
    "wait",
    "rollout",
    "set",
    "exec",
    "logs",
    "cp",
    "autoscale",
    "expose",
];

impl FailureClass {
    /// Every class, in the order the check tries them.
    pub const ALL: [FailureClass; 6] = [
        FailureClass::NotFound,
        FailureClass::Forbidden,
        FailureClass::Unreachable,
        FailureClass::Timeout,
        FailureClass::AlreadyExists,
        FailureClass::Conflict,
    ];

    /// The stable name (`not-found`), as reports give it.
    pub fn name(self) -> &'static str {
        match self {
            FailureClass::NotFound => "not-found",
            FailureClass::Forbidden => "forbidden",
            FailureClass::Unreachable => "unreachable",
            FailureClass::Timeout => "timeout",
            FailureClass::AlreadyExists => "already-exists",
            FailureClass::Conflict => "conflict",
        }
    }

    /// Whether a conversion may stop where the original carried on past
    /// this failure: a denial, an unreachable server, a timeout or a lost
    /// race end a run the engine retries once the cause is gone. NotFound
    /// and AlreadyExists may not: a run interrupted half way meets them on
    /// its next attempt, so a script that stops on them never completes;
    /// the conversion must take the original's path there.
    pub fn may_fail_closed(self) -> bool {
        !matches!(self, FailureClass::NotFound | FailureClass::AlreadyExists)
    }

    /// The answer `migrate-tolerate` accepts this failure as, if any:
    /// the others always stay failures.
    pub fn answer(self) -> Option<migrate_lint::answers::Answer> {
        use migrate_lint::answers::Answer;
        match self {
            FailureClass::NotFound => Some(Answer::NotFound),
            FailureClass::AlreadyExists => Some(Answer::AlreadyExists),
            FailureClass::Conflict => Some(Answer::Conflict),
            FailureClass::Forbidden | FailureClass::Unreachable | FailureClass::Timeout => None,
        }
    }

    /// The line `command` prints for it: the recorded texts of the answer
    /// classes ([`migrate_lint::answers::Answer::texts`]), and kubectl's
    /// and helm's own for the others.
    pub fn text(self, command: &str) -> &'static str {
        let helm = Path::new(command).file_name().is_some_and(|n| n == "helm");
        match (self, helm) {
            (FailureClass::NotFound, true) => "Error: release: not found",
            (FailureClass::AlreadyExists, true) => {
                "Error: INSTALLATION FAILED: cannot re-use a name that is still in use"
            }
            (FailureClass::Forbidden, true) => {
                "Error: query: failed to query with labels: secrets is forbidden: User \"system:serviceaccount:cozy-system:migrate\" cannot list resource \"secrets\" in API group \"\" in the namespace \"cozy-system\""
            }
            (FailureClass::Unreachable, true) => {
                "Error: Kubernetes cluster unreachable: Get \"https://10.96.0.1:443/version\": dial tcp 10.96.0.1:443: connect: connection refused"
            }
            (FailureClass::Timeout, true) => {
                "Error: Kubernetes cluster unreachable: Get \"https://10.96.0.1:443/version\": net/http: TLS handshake timeout"
            }
            (FailureClass::NotFound, false) => {
                "Error from server (NotFound): configmaps \"x\" not found"
            }
            (FailureClass::Forbidden, false) => {
                "Error from server (Forbidden): configmaps \"x\" is forbidden: User \"system:serviceaccount:cozy-system:migrate\" cannot get resource \"configmaps\" in API group \"\" in the namespace \"cozy-system\""
            }
            (FailureClass::Unreachable, false) => {
                "The connection to the server 10.96.0.1:443 was refused - did you specify the right host or port?"
            }
            (FailureClass::Timeout, false) => {
                "Unable to connect to the server: net/http: request canceled (Client.Timeout exceeded while awaiting headers)"
            }
            (FailureClass::AlreadyExists, false) => {
                "Error from server (AlreadyExists): configmaps \"x\" already exists"
            }
            (FailureClass::Conflict, _) => {
                "Error from server (Conflict): Operation cannot be fulfilled on configmaps \"x\": the object has been modified; please apply your changes to the latest version and try again"
            }
        }
    }

    /// The classes a call can get. A client-side dry run reaches no
    /// server and gets none; every other call can be forbidden, find the
    /// server unreachable or time out; kubectl answers NotFound to a verb
    /// naming one object (not a list, a selector or `--all`), helm to
    /// every call (its `release: not found`), and another command's
    /// NotFound text is not known; AlreadyExists answers a `create` (helm:
    /// `install`), Conflict an `apply`, `replace` or `patch`.
    pub fn of_call(argv: &[String]) -> Vec<FailureClass> {
        let Some((command, args)) = argv.split_first() else {
            return Vec::new();
        };
        let dry = args
            .iter()
            .any(|a| a == "--dry-run" || a == "--dry-run=client" || a == "--dry-run=true");
        if dry {
            return Vec::new();
        }
        let name = Path::new(command)
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or(command);
        let reading = migrate_lint::command_line::read(command, args);
        let verb = reading.verb().map(|i| args[i].as_str());
        let mut out = Vec::new();
        let not_found = match name {
            "helm" => true,
            "kubectl" | "oc" => {
                verb.is_some_and(|v| NAMED_VERBS.contains(&v)) && names_one(&reading, args)
            }
            _ => false,
        };
        if not_found {
            out.push(FailureClass::NotFound);
        }
        let server_side = args.iter().any(|a| a.starts_with("--dry-run=server"));
        if !server_side {
            match (name, verb) {
                ("kubectl" | "oc", Some("create")) | ("helm", Some("install")) => {
                    out.push(FailureClass::AlreadyExists)
                }
                ("kubectl" | "oc", Some("apply" | "replace" | "patch")) => {
                    out.push(FailureClass::Conflict)
                }
                _ => {}
            }
        }
        // The classes migrate-tolerate never accepts come last: a run of
        // one whose text the script cannot read stands for the rest.
        out.extend([
            FailureClass::Forbidden,
            FailureClass::Unreachable,
            FailureClass::Timeout,
        ]);
        out
    }
}

/// Whether a kubectl call names its objects (`TYPE NAME`, `TYPE/NAME`,
/// `-f FILE`) rather than listing them (`TYPE` alone, a selector,
/// `--all`). A line the reader could not finish counts as naming one.
fn names_one(reading: &migrate_lint::command_line::Reading, args: &[String]) -> bool {
    let lists = args.iter().any(|a| {
        matches!(
            a.as_str(),
            "-l" | "--selector" | "-A" | "--all-namespaces" | "--all" | "--field-selector"
        ) || a.starts_with("--selector=")
            || a.starts_with("-l=")
            || a.starts_with("--field-selector=")
            || (a.starts_with("-l") && a.len() > 2 && !a.starts_with("--"))
    });
    if lists {
        return false;
    }
    let files = args.iter().any(|a| {
        a == "-f" || a == "--filename" || a.starts_with("--filename=") || a.starts_with("-f")
    });
    let rest = &reading.positionals[1.min(reading.positionals.len())..];
    files
        || !reading.complete
        || rest.len() >= 2
        || rest.first().is_some_and(|&i| args[i].contains('/'))
}

/// What the check needs besides the scripts.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The ledger ConfigMap's name: calls naming it may be the stamp.
    pub ledger_name: String,
    /// `MIGRATION_NAMESPACE` for the conversion.
    pub namespace: String,
    /// The cluster commands faked (kubectl, helm, flux and the configured
    /// ones).
    pub commands: Vec<String>,
    /// Longest one run of a script may take.
    pub timeout: Duration,
    /// Most cluster calls one run may make: more is a loop waiting for a
    /// state the fakes never reach.
    pub max_calls: usize,
    /// The interpreter a `#!/bin/sh` script runs under on both sides (the
    /// image's `/bin/sh` when it is not this host's: `busybox ash` for an
    /// alpine image); `None`: `/bin/sh`.
    pub bin_sh: Option<String>,
}

impl Settings {
    /// The defaults: 30 s and 500 calls a run.
    pub fn new(ledger_name: &str, namespace: &str, commands: Vec<String>) -> Settings {
        Settings {
            ledger_name: ledger_name.to_owned(),
            namespace: namespace.to_owned(),
            commands,
            timeout: Duration::from_secs(30),
            max_calls: 500,
            bin_sh: None,
        }
    }
}

/// The check's verdict on one script.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "result", rename_all = "kebab-case")]
#[non_exhaustive]
pub enum Behaviour {
    /// Every path compared agrees up to the stamp.
    Passed {
        /// Paths compared: the success path and each failure path.
        paths: usize,
        /// Cluster calls the original made on the success path.
        calls: usize,
        /// Failure paths compared, by the class the failing call got
        /// ([`FailureClass::name`]).
        classes: BTreeMap<&'static str, usize>,
        /// Of the failure paths, those where the original carried on past
        /// a failure it did not mean (Forbidden, unreachable, ...) and the
        /// conversion stops at that call instead, failing: the engine's
        /// fail-closed, accepted (ADOPTING.md, "The behaviour check").
        fail_closed: usize,
    },
    /// A path differs.
    Differed {
        /// Which path (`success path`, `when call N (...) fails`).
        path: String,
        /// The whole difference, naming the first differing call.
        difference: String,
    },
    /// A path could not be compared (a script that times out, loops on a
    /// call, or cannot start): not a pass.
    CouldNotRun {
        /// Why.
        reason: String,
    },
    /// `--no-behaviour-check`: not run, never a pass.
    Skipped,
}

impl Behaviour {
    /// One line for the text report.
    pub fn summary(&self) -> String {
        match self {
            Behaviour::Passed {
                paths, fail_closed, ..
            } if *fail_closed > 0 => {
                format!("passed ({paths} paths, {fail_closed} failing closed)")
            }
            Behaviour::Passed { paths, .. } => format!("passed ({paths} paths)"),
            Behaviour::Differed { path, .. } => format!("differed ({path})"),
            Behaviour::CouldNotRun { reason } => format!("could not run ({reason})"),
            Behaviour::Skipped => "skipped (--no-behaviour-check)".into(),
        }
    }
}

/// One numbered script and its conversion.
#[derive(Debug, Clone)]
pub struct Script<'a> {
    /// Its integer (the numbered file's name).
    pub number: u64,
    /// Its slug (`pre-apply/<slug>`).
    pub slug: &'a str,
    /// The numbered script's bytes.
    pub original: &'a [u8],
    /// The conversion as `--rewrite` writes it.
    pub converted: &'a str,
    /// Whether convert found a version stamp in it: then an `exit 0` that
    /// did not stamp meant "run me again".
    pub stamps: bool,
}

/// The `lib/` directories the two sides run with.
#[derive(Debug, Clone, Copy)]
pub struct Libs<'a> {
    /// The numbered directory's `lib/`.
    pub numbered: &'a BTreeMap<String, Vec<u8>>,
    /// The converted tree's `lib/` (without the helpers the rewrite drops).
    pub converted: &'a BTreeMap<String, Vec<u8>>,
}

/// Checks every script, a few at a time (each worker with scratch space
/// of its own: the runs wait on processes far more than they compute);
/// the results in the order of `scripts`. Each worker takes the next
/// unchecked script when it is free: the scripts' costs differ by tens of
/// runs, so a fixed share per worker would leave one idle while the other
/// works through the long ones.
pub fn check_all(
    settings: &Settings,
    scripts: &[Script<'_>],
    libs: Libs<'_>,
) -> std::io::Result<Vec<Behaviour>> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let workers = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, 4)
        .min(scripts.len().max(1));
    let next = AtomicUsize::new(0);
    let per_worker: Vec<std::io::Result<Vec<(usize, Behaviour)>>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                scope.spawn(|| {
                    let harness = Harness::new(settings.clone())?;
                    let mut done = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(script) = scripts.get(i) else {
                            return Ok(done);
                        };
                        done.push((i, harness.check(script, libs)));
                    }
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(std::io::Error::other("a check worker panicked")))
            })
            .collect()
    });
    // Every index was taken by exactly one worker, and a worker that failed
    // returned its error: the checks, in the scripts' order.
    let mut results = Vec::with_capacity(scripts.len());
    for worker in per_worker {
        results.extend(worker?);
    }
    results.sort_unstable_by_key(|(i, _)| *i);
    Ok(results
        .into_iter()
        .map(|(_, behaviour)| behaviour)
        .collect())
}

/// Scratch space for the runs of one conversion: the fakes, their state,
/// `HOME`, and the two trees (rewritten for each script).
pub struct Harness {
    settings: Settings,
    dir: tempfile::TempDir,
    path: std::ffi::OsString,
    /// The fake cluster commands as shell functions ([`fake_function`]),
    /// defined before a script in a shell runs it.
    functions: String,
}

/// One recorded call.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Call {
    argv: Vec<String>,
    stdin: Option<String>,
}

/// One run's record.
#[derive(Debug, Clone)]
struct Trace {
    calls: Vec<Call>,
    status: Option<i32>,
    /// The last line the script wrote (for messages).
    last_line: String,
    /// The failing call's stderr was the log or `/dev/null`: the script
    /// could not read its text.
    blind: bool,
}

/// Which side runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    Original,
    Converted,
}

impl Harness {
    /// Writes the fakes into a fresh scratch directory.
    pub fn new(settings: Settings) -> std::io::Result<Harness> {
        let dir = scratch_dir()?;
        let bin = dir.path().join("bin");
        std::fs::create_dir_all(&bin)?;
        let state = dir.path().join("state");
        let mut functions = String::new();
        for name in &settings.commands {
            write_exec(&bin.join(name), &fake(name, &state, settings.max_calls))?;
            if is_function_name(name) {
                functions.push_str(&fake_function(name, name, &state, settings.max_calls));
            }
        }
        write_exec(
            &bin.join(migrate_lint::cluster_commands::TOLERATE),
            &tolerate_fake(&state, &functions),
        )?;
        write_exec(&bin.join("mktemp"), &mktemp_fake(&state))?;
        // Waits cost time and wait for nothing here: the fakes answer at once.
        write_exec(&bin.join("sleep"), "#!/bin/sh\nexit 0\n")?;
        functions.push_str("sleep() { return 0; }\n");
        // The same clock for both sides: a timestamp in an annotation is
        // then the same argument in both.
        if let Some(date) = std::env::var_os("PATH").and_then(|p| {
            std::env::split_paths(&p)
                .map(|d| d.join("date"))
                .find(|d| d.is_file())
        }) {
            write_exec(&bin.join("date"), &date_fake(&date))?;
        }
        // jq is the costliest command the scripts run (its start alone
        // takes tens of milliseconds) and the same filter of the same input
        // runs on every path of both sides: memoized, it answers once.
        let find = |name: &str| {
            std::env::var_os("PATH").and_then(|p| {
                std::env::split_paths(&p)
                    .map(|d| d.join(name))
                    .find(|d| d.is_file())
            })
        };
        if let (Some(jq), Some(sum)) = (find("jq"), find("md5sum").or_else(|| find("cksum"))) {
            let cache = dir.path().join("jq-cache");
            std::fs::create_dir_all(&cache)?;
            write_exec(&bin.join("jq"), &jq_memo(&jq, &sum, &cache, &state))?;
            functions.push_str(&jq_memo_function("jq", &jq, &sum, &cache, &state));
        }
        let mut path = bin.clone().into_os_string();
        if let Some(rest) = std::env::var_os("PATH") {
            path.push(":");
            path.push(rest);
        }
        Ok(Harness {
            settings,
            dir,
            path,
            functions,
        })
    }

    /// Checks one script.
    pub fn check(&self, script: &Script<'_>, libs: Libs<'_>) -> Behaviour {
        match self.compare(script, libs) {
            Ok(b) => b,
            Err(reason) => Behaviour::CouldNotRun { reason },
        }
    }

    /// [`Harness::check`] of one script with no `lib/` on either side, the
    /// shape of every unit test of a rewrite.
    #[cfg(test)]
    pub(crate) fn check_alone(&self, original: &[u8], converted: &str, stamps: bool) -> Behaviour {
        let lib = BTreeMap::new();
        let script = Script {
            number: 1,
            slug: "1",
            original,
            converted,
            stamps,
        };
        self.check(
            &script,
            Libs {
                numbered: &lib,
                converted: &lib,
            },
        )
    }

    fn compare(&self, script: &Script<'_>, libs: Libs<'_>) -> Result<Behaviour, String> {
        self.lay_out(script, libs)
            .map_err(|e| format!("cannot write the scratch trees: {e}"))?;
        let original = self.run(script, Side::Original, None)?;
        if original.calls.is_empty() && !matches!(original.status, Some(0) | Some(75)) {
            // Nothing was compared: the script stopped before its first
            // call (an option its shell lacks, a tool missing here).
            return Err(format!(
                "the numbered script {} before its first cluster call on the success path{}",
                exits(original.status),
                said(&original.last_line)
            ));
        }
        let converted = self.run(script, Side::Converted, None)?;
        let (map, diff) = self.align(&original, &converted, script.stamps);
        if let Some(d) = diff {
            return Ok(differed("on the success path".into(), d));
        }
        let mut paths = 1;
        let mut classes = BTreeMap::new();
        let mut fail_closed = 0;
        for (i, j) in map.iter().enumerate() {
            let Some(j) = j else { continue };
            // A failing call whose stderr the script cannot read (the log,
            // /dev/null) takes the same path on every class: each side
            // runs once for all of them then.
            let (mut original_blind, mut converted_blind) = (None, None);
            for class in FailureClass::of_call(&original.calls[i].argv) {
                let failing =
                    self.failing_run(script, Side::Original, i + 1, class, &mut original_blind)?;
                let branches = failing.calls.len() > i + 1 || failing.status != Some(FAIL_STATUS);
                if !branches {
                    continue;
                }
                let path = format!(
                    "when call {} ({}) fails ({})",
                    i + 1,
                    display(&original.calls[i].argv),
                    class.name()
                );
                let converted =
                    self.failing_run(script, Side::Converted, *j + 1, class, &mut converted_blind)?;
                if let (_, Some(d)) = self.align(&failing, &converted, script.stamps) {
                    if !class.may_fail_closed() || !self.fails_closed(&failing, &converted, i, *j) {
                        return Ok(differed(path, d));
                    }
                    fail_closed += 1;
                }
                paths += 1;
                *classes.entry(class.name()).or_insert(0) += 1;
            }
        }
        Ok(Behaviour::Passed {
            paths,
            calls: original.calls.len(),
            classes,
            fail_closed,
        })
    }

    /// One side's run with its call `at` failing with `class`, or the run
    /// standing for it: once that call's text went where the script cannot
    /// read it (`blind`), the run is kept for the later classes.
    fn failing_run(
        &self,
        script: &Script<'_>,
        side: Side,
        at: usize,
        class: FailureClass,
        blind: &mut Option<Trace>,
    ) -> Result<Trace, String> {
        if let Some(t) = blind {
            return Ok(t.clone());
        }
        let t = self.run(script, side, Some((at, class)))?;
        if t.blind {
            *blind = Some(t.clone());
        }
        Ok(t)
    }

    /// Whether the conversion, where the original carried on past call
    /// `i` failing with a class it did not mean, stops at that call (its
    /// `j`) instead: every call before it the same, none after it, and a
    /// failing status. Under the engine that is a failed run, retried
    /// once the cause is fixed, never a wrong state.
    fn fails_closed(&self, failing: &Trace, converted: &Trace, i: usize, j: usize) -> bool {
        if converted.calls.len() != j + 1 || matches!(converted.status, Some(0) | Some(75) | None) {
            return false;
        }
        let prefix = Trace {
            calls: failing.calls[..=i.min(failing.calls.len().saturating_sub(1))].to_vec(),
            status: converted.status,
            last_line: String::new(),
            blind: false,
        };
        self.align(&prefix, converted, false).1.is_none()
    }

    fn original_root(&self) -> PathBuf {
        self.dir.path().join("numbered")
    }

    fn converted_root(&self) -> PathBuf {
        self.dir.path().join("converted")
    }

    fn script_path(&self, script: &Script<'_>, side: Side) -> PathBuf {
        match side {
            Side::Original => self.original_root().join(script.number.to_string()),
            Side::Converted => self.converted_root().join("pre-apply").join(script.slug),
        }
    }

    /// Both trees, fresh: the numbered script beside the numbered `lib/`,
    /// the conversion in `pre-apply/` beside the converted `lib/`.
    fn lay_out(&self, script: &Script<'_>, libs: Libs<'_>) -> std::io::Result<()> {
        for (root, lib) in [
            (self.original_root(), libs.numbered),
            (self.converted_root(), libs.converted),
        ] {
            remove_dir(&root)?;
            for (rel, bytes) in lib {
                write_file(&root.join("lib").join(rel), bytes)?;
            }
        }
        write_exec_bytes(&self.script_path(script, Side::Original), script.original)?;
        write_exec_bytes(
            &self.script_path(script, Side::Converted),
            script.converted.as_bytes(),
        )
    }

    /// Runs one side, failing call `fail_at` (one-based) with its class
    /// if given.
    fn run(
        &self,
        script: &Script<'_>,
        side: Side,
        failure: Option<(usize, FailureClass)>,
    ) -> Result<Trace, String> {
        let fail_at = failure.map(|(n, _)| n);
        let state = self.dir.path().join("state");
        let home = self.dir.path().join("home");
        let scratch = |e: std::io::Error| format!("cannot prepare the scratch directory: {e}");
        for d in [&state, &home] {
            remove_dir(d).map_err(scratch)?;
            std::fs::create_dir_all(d).map_err(scratch)?;
        }
        std::fs::create_dir_all(state.join("calls")).map_err(scratch)?;
        std::fs::write(state.join("next"), "1\n").map_err(scratch)?;
        std::fs::write(state.join("fail-at"), format!("{}\n", fail_at.unwrap_or(0)))
            .map_err(scratch)?;
        if let Some((_, class)) = failure {
            std::fs::write(state.join("fail-class"), format!("{}\n", class.name()))
                .map_err(scratch)?;
        }
        let path = self.script_path(script, side);
        let (root, mut cmd) = match side {
            Side::Original => {
                let shebang = self.interpreter(script.original);
                let mut words = shebang.split_whitespace();
                let program = words.next().unwrap_or("/bin/sh");
                let mut cmd = Command::new(program);
                cmd.args(words);
                match self.prelude(&shebang) {
                    // The file read as the shell reads it, `$0` its path.
                    Some(p) => cmd.arg("-c").arg(format!("{p}. \"$0\"")).arg(&path),
                    None => cmd.arg(&path),
                };
                (self.original_root(), cmd)
            }
            Side::Converted => {
                let shebang = self.interpreter(script.converted.as_bytes());
                let root = self.converted_root();
                // The engine sources its copy of the script: here a file
                // defining the fakes' functions first.
                let copy = match self.prelude(&shebang) {
                    Some(p) => {
                        let copy = state.join("converted-copy");
                        std::fs::write(&copy, format!("{p}. {}\n", quote(&path)))
                            .map_err(scratch)?;
                        copy
                    }
                    None => path.clone(),
                };
                let cmd = migration_core::drive::ScriptCommand {
                    shebang: &shebang,
                    copy: &copy,
                    path: &path,
                    tree: &root,
                    slug: script.slug,
                    tier: "pre-apply",
                    namespace: &self.settings.namespace,
                    batch: "convert-behaviour-check",
                    attempt: 1,
                }
                .build();
                (root, cmd)
            }
        };
        let output = state.join("output");
        let out = std::fs::File::create(&output).map_err(scratch)?;
        let err = out.try_clone().map_err(scratch)?;
        use std::os::unix::process::CommandExt;
        cmd.current_dir(&root)
            .env("PATH", &self.path)
            .env("HOME", &home)
            .env("TMPDIR", &home)
            .env_remove("KUBECONFIG")
            .env_remove("KUBERNETES_SERVICE_HOST")
            .env_remove("KUBERNETES_SERVICE_PORT")
            .env_remove("MIGRATION_DRY_RUN")
            .env_remove("MIGRATE_TRIPWIRE_REPORT")
            .env_remove("MIGRATE_TRIPWIRE_COMMANDS")
            .stdin(std::process::Stdio::null())
            .stdout(out)
            .stderr(err)
            .process_group(0);
        for name in &self.settings.commands {
            cmd.env_remove(format!(
                "MIGRATE_TRIPWIRE_REAL_{}",
                migrate_lint::cluster_commands::env_key(name)
            ));
        }
        for name in ["kubectl", "helm", "flux"] {
            cmd.env(name.to_uppercase(), self.dir.path().join("bin").join(name));
        }
        let which = match side {
            Side::Original => "the numbered script",
            Side::Converted => "the conversion",
        };
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("{which} cannot start: {e}"))?;
        let pgid = nix::unistd::Pid::from_raw(-(child.id() as i32));
        let (tx, rx) = std::sync::mpsc::channel();
        let waiter = std::thread::spawn(move || {
            let _ = tx.send(child.wait());
        });
        let ended = rx.recv_timeout(self.settings.timeout);
        // The group goes in every case: background jobs of the script too.
        let _ = nix::sys::signal::kill(pgid, nix::sys::signal::Signal::SIGKILL);
        let status = match ended {
            Ok(Ok(status)) => status,
            Ok(Err(e)) => return Err(format!("{which}: cannot wait for it: {e}")),
            Err(_) => {
                let _ = waiter.join();
                return Err(format!(
                    "{which} did not end within {} s{}",
                    self.settings.timeout.as_secs(),
                    on_path(fail_at)
                ));
            }
        };
        let _ = waiter.join();
        if state.join("overflow").exists() {
            return Err(format!(
                "{which} made more than {} cluster calls{} (a loop waiting for a state the fakes never reach?)",
                self.settings.max_calls,
                on_path(fail_at)
            ));
        }
        // The scratch paths are written by name, so the report is the same
        // on every run.
        let names: [(&Path, &str); 4] = [
            (&path, "$0"),
            (&root, "$TREE"),
            (&home, "$HOME"),
            (self.dir.path(), "$SCRATCH"),
        ];
        let text = normalise(&std::fs::read(&output).unwrap_or_default(), &names);
        let last_line = text
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("")
            .chars()
            .take(200)
            .collect();
        let calls = self
            .read_calls(&state, &names)
            .map_err(|e| format!("cannot read the recorded calls: {e}"))?;
        use std::os::unix::process::ExitStatusExt;
        // Under migrate-tolerate only a class it did not accept is blind
        // (its fake marks it so), and only after not-found: the classes
        // it may accept run first.
        let blind = fail_at.is_some_and(|n| {
            state.join("calls").join(format!("{n}.blind")).exists()
                || state.join("tolerate-blind").exists()
        });
        Ok(Trace {
            calls,
            status: status.code().or(status.signal().map(|s| 128 + s)),
            last_line,
            blind,
        })
    }

    /// What a shell running `shebang` reads before the script: the fake
    /// cluster commands as functions, and under busybox functions standing
    /// for the fakes of commands it may run as its own applets before
    /// looking at `PATH` (Debian's busybox does; the alpine image's does
    /// not): a function comes before an applet. `None` when the
    /// interpreter is no shell (the fakes on `PATH` answer it alone).
    fn prelude(&self, shebang: &str) -> Option<String> {
        let shell = shell_of(shebang)?;
        let mut text = self.functions.clone();
        if shell == "busybox" {
            let bin = self.dir.path().join("bin");
            for name in ["date", "mktemp"] {
                if bin.join(name).is_file() {
                    text.push_str(&format!(
                        "{name}() {{ {} \"$@\"; }}\n",
                        quote(&bin.join(name))
                    ));
                }
            }
        }
        Some(text)
    }

    /// The shebang a script runs under: its own, `#!/bin/sh` mapped to
    /// [`Settings::bin_sh`].
    fn interpreter(&self, bytes: &[u8]) -> String {
        let line = shebang(bytes);
        match (&self.settings.bin_sh, line.split_once(char::is_whitespace)) {
            (Some(sh), None) if line == "/bin/sh" => sh.clone(),
            (Some(sh), Some(("/bin/sh", rest))) => format!("{sh} {rest}"),
            _ => line,
        }
    }

    /// The calls in order, paths replaced by their names: call `N` is
    /// the file `N` holding its words, each ended by a NUL, and `N.in`
    /// names the file holding what it read from stdin (`stdin.<K>` in
    /// `state`).
    fn read_calls(&self, state: &Path, names: &[(&Path, &str)]) -> std::io::Result<Vec<Call>> {
        let dir = state.join("calls");
        let mut numbers: Vec<usize> = std::fs::read_dir(&dir)?
            .filter_map(|e| e.ok())
            .filter_map(|e| e.file_name().to_str()?.parse().ok())
            .collect();
        numbers.sort_unstable();
        let normal = |bytes: &[u8]| normalise(bytes, names);
        let optional = |path: PathBuf| match std::fs::read(path) {
            Ok(bytes) => Ok(Some(bytes)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        };
        let mut calls = Vec::new();
        for n in numbers {
            let words = std::fs::read(dir.join(n.to_string()))?;
            let argv = words
                .strip_suffix(b"\0")
                .unwrap_or(&words)
                .split(|b| *b == 0)
                .map(normal)
                .collect();
            let stdin = match optional(dir.join(format!("{n}.in")))? {
                Some(pid) => Some(normal(
                    &optional(state.join(format!("stdin.{}", String::from_utf8_lossy(&pid))))?
                        .unwrap_or_default(),
                )),
                None => None,
            };
            calls.push(Call { argv, stdin });
        }
        Ok(calls)
    }

    /// Walks the two call lists: the original's stamp calls (and its
    /// ledger reads the conversion does not make) map to nothing. Returns
    /// where each of the original's calls went in the conversion, and the
    /// first difference (calls, then exit status).
    fn align(
        &self,
        original: &Trace,
        converted: &Trace,
        stamps: bool,
    ) -> (Vec<Option<usize>>, Option<String>) {
        let (o, c) = (&original.calls, &converted.calls);
        let mut map = Vec::new();
        let (mut i, mut j) = (0, 0);
        let mut stamped = false;
        loop {
            match (o.get(i), c.get(j)) {
                // An equal call first: a ledger write the conversion kept
                // (to review) is its own call there too.
                (Some(a), Some(b)) if a == b => {
                    map.push(Some(j));
                    i += 1;
                    j += 1;
                }
                (Some(a), _) if self.is_stamp(a) => {
                    stamped = true;
                    map.push(None);
                    i += 1;
                    // What the stamp set besides the version, kept as
                    // notes on the ledger object in its place.
                    while let Some(b) = c.get(j) {
                        if o.get(i) == Some(b) || !self.is_ledger_note(b) {
                            break;
                        }
                        j += 1;
                    }
                }
                (Some(a), b) if self.names_ledger(a) && b.is_none_or(|b| !self.names_ledger(b)) => {
                    map.push(None);
                    i += 1;
                }
                (None, None) => break,
                (Some(a), Some(b)) => {
                    let how = if a.argv == b.argv {
                        "with other input on stdin"
                    } else {
                        "differently"
                    };
                    return (
                        map,
                        Some(format!(
                            "call {} of the original ({}) is made {how} by the conversion ({}, its call {})",
                            i + 1,
                            display(&a.argv),
                            display(&b.argv),
                            j + 1
                        )),
                    );
                }
                (Some(a), None) => {
                    return (
                        map,
                        Some(format!(
                            "call {} of the original ({}) is missing from the conversion, which {} after {}{}",
                            i + 1,
                            display(&a.argv),
                            exits(converted.status),
                            calls(j),
                            said(&converted.last_line)
                        )),
                    );
                }
                (None, Some(b)) => {
                    return (
                        map,
                        Some(format!(
                            "the conversion makes call {} ({}), which the original does not make (it {} after {})",
                            j + 1,
                            display(&b.argv),
                            exits(original.status),
                            calls(i)
                        )),
                    );
                }
            }
        }
        // A retry-later `exit 0` before the stamp is the conversion's 75:
        // without its stamp the numbered runner ran the script again on the
        // next upgrade, which under the engine is "not yet".
        let again = original.status == Some(0) && !stamped && stamps;
        let expected = if again { Some(75) } else { original.status };
        if converted.status != expected {
            let original_end = if again {
                "exits 0 without stamping (the numbered runner runs it again on the next upgrade; under the engine that is exit 75)".to_owned()
            } else {
                exits(original.status)
            };
            return (
                map,
                Some(format!(
                    "the calls agree, but the original {original_end} and the conversion {}{}",
                    exits(converted.status),
                    said(&converted.last_line)
                )),
            );
        }
        (map, None)
    }

    /// A call writing the ledger ConfigMap.
    fn is_stamp(&self, call: &Call) -> bool {
        const WRITES: &[&str] = &[
            "apply", "create", "patch", "replace", "edit", "label", "annotate", "set",
        ];
        verb(&call.argv).is_some_and(|v| WRITES.contains(&v)) && self.names_ledger(call)
    }

    /// A call of the conversion labelling or annotating the ledger under
    /// keys outside the engine's ([`migrate_lint::shell::rules::notes_only`]).
    fn is_ledger_note(&self, call: &Call) -> bool {
        self.names_ledger(call) && migrate_lint::shell::rules::notes_only(&call.argv)
    }

    fn names_ledger(&self, call: &Call) -> bool {
        let name = self.settings.ledger_name.as_str();
        call.argv.iter().any(|a| a.contains(name))
            || call.stdin.as_deref().is_some_and(|s| s.contains(name))
    }
}

/// `bytes` as text, each path replaced by its name (the first that
/// applies: the longer paths come first).
fn normalise(bytes: &[u8], names: &[(&Path, &str)]) -> String {
    let mut text = String::from_utf8_lossy(bytes).into_owned();
    for (path, name) in names {
        text = text.replace(&*path.to_string_lossy(), name);
    }
    text
}

fn differed(path: String, d: String) -> Behaviour {
    Behaviour::Differed {
        difference: format!(
            "the conversion behaves differently from the numbered original {path}: {d}"
        ),
        path,
    }
}

fn on_path(fail_at: Option<usize>) -> String {
    match fail_at {
        None => " on the success path".into(),
        Some(n) => format!(" when call {n} fails"),
    }
}

fn exits(status: Option<i32>) -> String {
    match status {
        Some(s) => format!("exits {s}"),
        None => "ends".into(),
    }
}

fn calls(n: usize) -> String {
    match n {
        0 => "no call".into(),
        n => format!("its call {n}"),
    }
}

fn said(line: &str) -> String {
    if line.is_empty() {
        String::new()
    } else {
        format!(" (its last line: {line})")
    }
}

/// The verb of a cluster call, read as the command reads it
/// ([`migrate_lint::command_line`]).
fn verb(argv: &[String]) -> Option<&str> {
    migrate_lint::command_line::verb_of(argv)
}

/// A call for a message: its words, quoted where they hold spaces, cut at
/// 200 characters.
fn display(argv: &[String]) -> String {
    let text = argv
        .iter()
        .map(|w| {
            if !w.is_empty() && !w.contains(|c: char| c.is_whitespace() || "'\"\\".contains(c)) {
                w.clone()
            } else {
                migration_core::shell::quoted(w)
            }
        })
        .collect::<Vec<_>>()
        .join(" ");
    if text.chars().count() > 200 {
        format!("{}…", text.chars().take(200).collect::<String>())
    } else {
        text
    }
}

/// The shell an interpreter line runs (`bash` for `/usr/bin/env bash`,
/// `busybox` for `busybox ash`), `None` when it is no shell the fakes'
/// functions are written for.
fn shell_of(shebang: &str) -> Option<&str> {
    let mut words = shebang.split_whitespace();
    let mut program = Path::new(words.next()?).file_name()?.to_str()?;
    if program == "env" {
        program = words.find(|w| !w.starts_with('-') && !w.contains('='))?;
        program = Path::new(program).file_name()?.to_str()?;
    }
    match program {
        "sh" | "dash" | "ash" | "bash" | "ksh" | "mksh" => Some(program),
        "busybox" => match words.next() {
            Some("sh" | "ash") => Some(program),
            _ => None,
        },
        _ => None,
    }
}

/// The interpreter line of a script without `#!` (`/bin/sh` without one,
/// as a shell runs a file that has none).
fn shebang(bytes: &[u8]) -> String {
    let first = bytes.split(|b| *b == b'\n').next().unwrap_or_default();
    match first.strip_prefix(b"#!") {
        Some(rest) => String::from_utf8_lossy(rest).trim().to_owned(),
        None => "/bin/sh".into(),
    }
}

/// `date` at a fixed instant (2026-01-01T00:00:00Z), unless the script
/// names the time itself.
fn date_fake(real: &Path) -> String {
    format!(
        r#"#!/bin/sh
for a in "$@"; do
  case $a in -d*|--date*|-r*|--reference*|-s*|--set*) exec {real} "$@" ;; esac
done
exec {real} -d @{FIXED_TIME} "$@"
"#,
        real = quote(real)
    )
}

/// `mktemp` naming its files by a count from the run's start, in
/// `$TMPDIR` (the template's own directory too: a fixed name in a shared
/// `/tmp` would collide between checks run at once), so a temporary file's
/// name is the same on both sides and never reads as a difference.
fn mktemp_fake(state: &Path) -> String {
    format!(
        r#"#!/bin/sh
s={state}
dir=0
template=tmp.XXXXXXXXXX
while [ $# -gt 0 ]; do
  case $1 in
  -d|--directory) dir=1 ;;
  -p|--tmpdir) shift ;;
  -q|--quiet|-u|--dry-run|-t) ;;
  --tmpdir=*|--suffix=*) ;;
  -*) ;;
  *) template=${{1##*/}} ;;
  esac
  shift
done
n=$(( $(cat "$s/mktemp-count" 2>/dev/null || echo 0) + 1 ))
echo "$n" > "$s/mktemp-count"
x=${{template##*[!X]}}
name=${{template%"$x"}}$(printf '%0*d' "${{#x}}" "$n")
path=${{TMPDIR:-/tmp}}/$name
if [ "$dir" = 1 ]; then mkdir -m 700 "$path"; else (umask 077; : > "$path"); fi || exit 1
printf '%s\n' "$path"
"#,
        state = quote(state)
    )
}

/// `jq` memoized: a filter of stdin alone (no file, no `$ENV`, `env`,
/// `now` or `input*`; only flags that change nothing but the output's
/// form, `--arg` and `--argjson`) is answered from the cache when the
/// same arguments met the same input before, its output, errors and
/// status as the real one gave them; any other call goes to the real one.
/// A program on `PATH`, [`jq_memo_function`] run on its arguments.
fn jq_memo(real: &Path, sum: &Path, cache: &Path, state: &Path) -> String {
    format!(
        "#!/bin/sh\n{}_migrate_check_jq \"$@\"\n",
        jq_memo_function("_migrate_check_jq", real, sum, cache, state)
    )
}

/// [`jq_memo`] as the shell function `function`, written as
/// [`fake_function`] is (prefixed variables, no trace, `noclobber` kept):
/// defined before the script, a call costs no shell of its own, and an
/// empty input (the fakes print nothing on the success path) no `cat`.
/// Its files are named by a count in the run's `state`, whose calls of
/// one pipeline share a pid.
fn jq_memo_function(function: &str, real: &Path, sum: &Path, cache: &Path, state: &Path) -> String {
    format!(
        r#"{function}() {{
  {{ _migrate_jq_o=$-; set +x; }} 2>/dev/null
  _migrate_jq_c={cache}
  _migrate_jq_s={state}
  _migrate_jq_pure=1
  _migrate_jq_null=
  _migrate_jq_n=0
  _migrate_jq_filter=
  _migrate_jq_skip=0
  for _migrate_jq_a in "$@"; do
    if [ "$_migrate_jq_skip" -gt 0 ]; then _migrate_jq_skip=$((_migrate_jq_skip - 1)); continue; fi
    case $_migrate_jq_a in
      --arg|--argjson) _migrate_jq_skip=2 ;;
      --indent) _migrate_jq_skip=1 ;;
      -n|--null-input) _migrate_jq_null=1 ;;
      --raw-output|--compact-output|--exit-status|--slurp|--join-output|--ascii-output|--sort-keys|--tab|--monochrome-output) ;;
      --*) _migrate_jq_pure= ;;
      -*)
        case ${{_migrate_jq_a#-}} in *[!rcesjaSM]*) _migrate_jq_pure= ;; esac ;;
      *) _migrate_jq_n=$((_migrate_jq_n + 1)); _migrate_jq_filter=$_migrate_jq_a ;;
    esac
  done
  case $_migrate_jq_filter in *env*|*now*|*input*|*'$__loc__'*) _migrate_jq_pure= ;; esac
  _migrate_jq_r=0
  if [ -z "$_migrate_jq_pure" ] || [ "$_migrate_jq_n" != 1 ]; then
    {real} "$@" || _migrate_jq_r=$?
  else
    set -C
    _migrate_jq_k=1
    while ! printf '' 2>/dev/null >"$_migrate_jq_s/jq.$_migrate_jq_k"; do
      _migrate_jq_k=$((_migrate_jq_k + 1))
    done
    case $_migrate_jq_o in *C*) ;; *) set +C ;; esac
    _migrate_jq_in=$_migrate_jq_s/jq.$_migrate_jq_k
    printf '%s\0' "$@" >|"$_migrate_jq_in.args"
    if [ -z "$_migrate_jq_null" ]; then
      # The first line read by the shell: an empty input needs no cat.
      _migrate_jq_l=
      if IFS= read -r _migrate_jq_l; then
        {{ printf '%s\n' "$_migrate_jq_l"; cat; }} >|"$_migrate_jq_in"
      elif [ -n "$_migrate_jq_l" ]; then
        printf '%s' "$_migrate_jq_l" >|"$_migrate_jq_in"
      fi
    fi
    _migrate_jq_k=$({sum} "$_migrate_jq_in.args" "$_migrate_jq_in")
    _migrate_jq_b=${{_migrate_jq_k#*"
"}}
    _migrate_jq_k=${{_migrate_jq_k%%[!0-9a-f]*}}-${{_migrate_jq_b%%[!0-9a-f]*}}
    if [ ! -f "$_migrate_jq_c/$_migrate_jq_k.status" ]; then
      _migrate_jq_t=$_migrate_jq_c/$_migrate_jq_k
      _migrate_jq_st=0
      {real} "$@" <"$_migrate_jq_in" >|"$_migrate_jq_in.out" 2>|"$_migrate_jq_in.err" || _migrate_jq_st=$?
      echo "$_migrate_jq_st" >|"$_migrate_jq_in.status"
      mv -f "$_migrate_jq_in.out" "$_migrate_jq_t.out"
      mv -f "$_migrate_jq_in.err" "$_migrate_jq_t.err"
      mv -f "$_migrate_jq_in.status" "$_migrate_jq_t.status"
    fi
    if [ -s "$_migrate_jq_c/$_migrate_jq_k.out" ]; then cat "$_migrate_jq_c/$_migrate_jq_k.out"; fi
    if [ -s "$_migrate_jq_c/$_migrate_jq_k.err" ]; then cat "$_migrate_jq_c/$_migrate_jq_k.err" >&2; fi
    read _migrate_jq_r <"$_migrate_jq_c/$_migrate_jq_k.status" || _migrate_jq_r=1
  fi
  {{ case $_migrate_jq_o in *x*) set -x ;; esac; return "$_migrate_jq_r"; }} 2>/dev/null
}}
"#,
        real = quote(real),
        cache = quote(cache),
        sum = quote(sum),
        state = quote(state),
    )
}

/// The instant the fake `date` reports.
const FIXED_TIME: u64 = 1_767_225_600;

/// Single-quoted for sh.
fn quote(path: &Path) -> String {
    migration_core::shell::quoted(&path.to_string_lossy())
}

/// The fake cluster command `name` as the shell function `function`:
/// takes the next call number (a file created exclusively, so concurrent
/// calls of a pipeline never share one) and records the call's words in
/// it, NUL-separated, and what it read from stdin when told to read it
/// (`-f -`), then fails if it is the call to fail, else succeeds. Stdin is
/// read before the number is taken: in `kubectl create ... --dry-run -o
/// yaml | kubectl apply -f -` the writer then always comes first.
///
/// The same text serves both forms of the fake: a function defined in
/// the script's own shell before the script (no process for a call: a
/// process start is most of what a call cost) and the program on `PATH`
/// (`command kubectl`, `xargs kubectl`, `$KUBECTL`, a child shell). As a
/// function it must leave the script's shell as the program would: its
/// variables are prefixed `_migrate_check_`, its commands are not traced
/// under the script's `set -x` (the trace would reach a `2>&1` capture),
/// `noclobber` is put back as the script had it, and no command of it
/// fails where errexit would end the script.
fn fake_function(function: &str, name: &str, state: &Path, max_calls: usize) -> String {
    let texts: String = FailureClass::ALL
        .iter()
        .map(|c| {
            format!(
                "    {}) printf '%s\\n' {} >&2 ;;\n",
                c.name(),
                quote(Path::new(c.text(name)))
            )
        })
        .collect();
    format!(
        r#"{function}() {{
  {{ _migrate_check_o=$-; set +x; }} 2>/dev/null
  _migrate_check_s={state}
  _migrate_check_i=
  for _migrate_check_a in "$@"; do
    case $_migrate_check_a in -|-f-|--filename=-|--values=-) _migrate_check_i=1 ;; esac
  done
  # noclobber: '>' creates the file or fails (O_EXCL), so each number is
  # taken once, without a process per attempt.
  set -C
  if [ -n "$_migrate_check_i" ]; then
    _migrate_check_k=1
    while ! printf '' 2>/dev/null >"$_migrate_check_s/stdin.$_migrate_check_k"; do
      _migrate_check_k=$((_migrate_check_k + 1))
    done
    cat >|"$_migrate_check_s/stdin.$_migrate_check_k"
  fi
  read _migrate_check_n <"$_migrate_check_s/next" || _migrate_check_n=1
  while ! printf '%s\0' {quoted} "$@" 2>/dev/null >"$_migrate_check_s/calls/$_migrate_check_n"; do
    _migrate_check_n=$((_migrate_check_n + 1))
  done
  case $_migrate_check_o in *C*) ;; *) set +C ;; esac
  echo $((_migrate_check_n + 1)) >|"$_migrate_check_s/next"
  if [ "$_migrate_check_n" -gt {max_calls} ]; then
    printf '' >|"$_migrate_check_s/overflow"
    kill -9 0
    return 124
  fi
  if [ -n "$_migrate_check_i" ]; then
    printf '%s' "$_migrate_check_k" >|"$_migrate_check_s/calls/$_migrate_check_n.in"
  fi
  read _migrate_check_f <"$_migrate_check_s/fail-at" || _migrate_check_f=0
  _migrate_check_r=0
  if [ "$_migrate_check_n" = "$_migrate_check_f" ]; then
    # Its text cannot reach the script when stderr is the log or nowhere:
    # then every class takes the same path.
    if [ /proc/self/fd/2 -ef "$_migrate_check_s/output" ] || [ /proc/self/fd/2 -ef /dev/null ]; then
      printf '' >|"$_migrate_check_s/calls/$_migrate_check_n.blind"
    fi
    read _migrate_check_c <"$_migrate_check_s/fail-class" || _migrate_check_c=not-found
    case $_migrate_check_c in
{texts}    esac
    _migrate_check_r={FAIL_STATUS}
  else
    for _migrate_check_a in "$@"; do
      case $_migrate_check_a in --dry-run*) printf '# %s\n' {quoted} "$@"; break ;; esac
    done
  fi
  {{ case $_migrate_check_o in *x*) set -x ;; esac; return "$_migrate_check_r"; }} 2>/dev/null
}}
"#,
        state = quote(state),
        quoted = quote(Path::new(name)),
    )
}

/// The fake cluster command `name` as a program: [`fake_function`] run on
/// its arguments.
fn fake(name: &str, state: &Path, max_calls: usize) -> String {
    format!(
        "#!/bin/sh\n# A fake {name} written by 'migrate convert' for its behaviour check: it\n# records the call and never reaches a cluster.\n{}_migrate_check_fake \"$@\"\n",
        fake_function("_migrate_check_fake", name, state, max_calls)
    )
}

/// Whether `name` can be a shell function's name in every shell the
/// check runs (`kubectl`, not `kubectl-cnpg`).
fn is_function_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// `migrate-tolerate` for the fakes: runs the command, and accepts its
/// failure when the class the fakes failed it with is one of the answers
/// asked for (`--not-found`, `--already-exists`, `--conflict`), printing
/// the tolerated line the real one prints; Forbidden, unreachable and a
/// timeout stay failures, as they do under the real one. The cluster
/// fakes are functions in it too (`functions`): the call it runs is then
/// no second process.
fn tolerate_fake(state: &Path, functions: &str) -> String {
    format!(
        r#"#!/bin/sh
# migrate-tolerate for the fakes of 'migrate convert's behaviour check.
{functions}s={state}
accept=
while [ $# -gt 0 ]; do
  case $1 in
    --) shift; break ;;
    --not-found|--not-served|--already-exists|--conflict) accept="$accept ${{1#--}}" ;;
    --retry-delay) shift ;;
    --retry) case ${{2:-}} in [0-9]*) shift ;; esac ;;
  esac
  shift
done
e="$s/tolerate.$$"
"$@" 2>"$e"
st=$?
# (the state directory, and this file with it, goes after the run)
if [ -s "$e" ]; then cat "$e" >&2; fi
if [ "$st" = 0 ]; then exit 0; fi
read c <"$s/fail-class" 2>/dev/null || c=
case " $accept " in
  *" $c "*)
    if [ -n "$c" ]; then
      printf '%s\n' {tolerated}"$c: $*" >&2
      exit 0
    fi ;;
esac
# A class not accepted, printed where the script cannot read it: the same
# path for each later class (they come after not-found and the one of
# already-exists or conflict, and no flag accepts them).
case $c in
  not-found|'') ;;
  *)
    if [ /proc/$$/fd/2 -ef "$s/output" ] || [ /proc/$$/fd/2 -ef /dev/null ]; then
      : >"$s/tolerate-blind"
    fi ;;
esac
exit "$st"
"#,
        state = quote(state),
        // The line the real one prints when it accepts: convert's
        // rewrites read it back, so the fake must print it too.
        tolerated = quote(Path::new(migrate_lint::answers::TOLERATED_PREFIX)),
    )
}

/// The check's scratch directory: in memory (`/dev/shm`) when `TMPDIR`
/// names no other place and a program written there can run, else the
/// temporary directory. The runs create and remove tens of thousands of
/// small files (each run's state, each call's record), which on a disk's
/// file system cost more than the runs' own work.
fn scratch_dir() -> std::io::Result<tempfile::TempDir> {
    let mut builder = tempfile::Builder::new();
    builder.prefix("migrate-convert-check-");
    let shm = Path::new("/dev/shm");
    if std::env::var_os("TMPDIR").is_none()
        && shm.is_dir()
        && let Ok(dir) = builder.tempdir_in(shm)
    {
        let probe = dir.path().join("probe");
        let runs = write_exec(&probe, "#!/bin/sh\nexit 0\n").is_ok()
            && Command::new(&probe)
                .stdin(std::process::Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
        if runs {
            std::fs::remove_file(&probe)?;
            return Ok(dir);
        }
    }
    builder.tempdir()
}

fn remove_dir(dir: &Path) -> std::io::Result<()> {
    match std::fs::remove_dir_all(dir) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

fn write_file(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::write(path, bytes)
}

fn write_exec_bytes(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    write_file(path, bytes)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))
}

fn write_exec(path: &Path, text: &str) -> std::io::Result<()> {
    write_exec_bytes(path, text.as_bytes())
}

#[cfg(test)]
pub(crate) mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn harness() -> Harness {
        Harness::new(Settings::new(
            "cozystack-version",
            "cozy-system",
            vec!["kubectl".into(), "helm".into()],
        ))
        .unwrap()
    }

    const ORIGINAL: &str = "#!/bin/sh\nset -eu\nif ! kubectl get namespace tenant-root; then\n  echo absent\n  exit 0\nfi\nkubectl label namespace tenant-root a=b\nhelm uninstall old -n tenant-root\nkubectl create configmap -n cozy-system cozystack-version --from-literal=version=2 --dry-run=client -o yaml | kubectl apply -f-\n";

    fn passed(
        paths: usize,
        calls: usize,
        classes: &[(&'static str, usize)],
        fail_closed: usize,
    ) -> Behaviour {
        Behaviour::Passed {
            paths,
            calls,
            classes: classes.iter().copied().collect(),
            fail_closed,
        }
    }

    fn check(converted: &str) -> Behaviour {
        harness().check_alone(ORIGINAL.as_bytes(), converted, true)
    }

    #[test]
    fn removing_only_the_stamp_and_marking_the_early_exit_not_yet_passes() {
        let converted = ORIGINAL
            .replace("  exit 0\n", "  exit 75\n")
            .replace(
                "kubectl create configmap -n cozy-system cozystack-version --from-literal=version=2 --dry-run=client -o yaml | kubectl apply -f-\n",
                "",
            );
        // The probe failing on each class takes the early exit on both sides.
        assert_eq!(
            check(&converted),
            passed(
                5,
                5,
                &[
                    ("not-found", 1),
                    ("forbidden", 1),
                    ("unreachable", 1),
                    ("timeout", 1)
                ],
                0
            )
        );
    }

    #[test]
    fn a_rewrite_that_drops_a_neighbour_of_the_stamp_is_named() {
        // The rewrite bug: the line before the stamp went with it.
        let converted = ORIGINAL.replace("helm uninstall old -n tenant-root\n", "").replace(
            "kubectl create configmap -n cozy-system cozystack-version --from-literal=version=2 --dry-run=client -o yaml | kubectl apply -f-\n",
            "",
        ).replace("  exit 0\n", "  exit 75\n");
        let Behaviour::Differed { path, difference } = check(&converted) else {
            panic!("not differed")
        };
        assert_eq!(path, "on the success path");
        assert!(
            difference.contains("call 3 of the original (helm uninstall old -n tenant-root) is missing from the conversion, which exits 0 after its call 2"),
            "{difference}"
        );
    }

    #[test]
    fn an_early_exit_left_0_differs_on_the_path_where_the_probe_fails() {
        let converted = ORIGINAL.replace(
            "kubectl create configmap -n cozy-system cozystack-version --from-literal=version=2 --dry-run=client -o yaml | kubectl apply -f-\n",
            "",
        );
        let Behaviour::Differed { path, difference } = check(&converted) else {
            panic!("not differed")
        };
        assert_eq!(
            path,
            "when call 1 (kubectl get namespace tenant-root) fails (not-found)"
        );
        assert!(
            difference.contains("exits 0 without stamping"),
            "{difference}"
        );
    }

    #[test]
    fn a_probe_convert_carries_to_migrate_tolerate_and_reads_back_passes() {
        // The reference platform's shape: the output captured with the
        // error, an answer recognised by a `case` on it, and the listed
        // objects used by a later call. Convert's own rewrite reads the
        // tolerated line migrate-tolerate prints back from the output.
        let original = "#!/bin/sh\nset -eu\nlist() {\n  if ! out=$(kubectl get gadgets.example.com -A -o name 2>&1); then\n    case \"$out\" in\n      *NotFound*|*\"doesn't have a resource type\"*) return 0 ;;\n    esac\n    echo \"cannot list: $out\" >&2\n    return 1\n  fi\n  printf '%s\\n' \"$out\"\n}\nitems=$(list)\nif [ -n \"$items\" ]; then\n  kubectl label $items done=yes\nfi\n";
        let found = super::super::handled::analyse(original);
        let converted = super::super::diff::apply(original, &found.edits);
        assert!(
            converted.contains("migrate-tolerate --not-found"),
            "{converted}"
        );
        let result = harness().check_alone(original.as_bytes(), &converted, false);
        assert!(
            matches!(result, Behaviour::Passed { .. }),
            "{result:?}\n{converted}"
        );
    }

    #[test]
    fn a_handled_not_found_carried_to_migrate_tolerate_passes() {
        let original = "#!/bin/sh\nset -eu\nerr=$(mktemp)\nif ! kubectl delete job old -n x 2>\"$err\"; then\n  grep -q NotFound \"$err\" || exit 1\nfi\nkubectl apply -f new.yaml\n";
        let converted = "#!/bin/sh\nset -eu\nmigrate-tolerate --not-found -- kubectl delete job old -n x\nkubectl apply -f new.yaml\n";
        let result = harness().check_alone(original.as_bytes(), converted, false);
        // The success path and the delete failing (the apply failing ends both).
        // On the other classes the original's grep fails it at once.
        assert_eq!(result, passed(2, 2, &[("not-found", 1)], 0));
    }

    #[test]
    fn a_changed_argument_is_shown_with_both_calls() {
        let converted = ORIGINAL
            .replace("a=b", "a=c")
            .replace("  exit 0\n", "  exit 75\n");
        let Behaviour::Differed { difference, .. } = check(&converted) else {
            panic!("not differed")
        };
        assert!(
            difference.contains("call 2 of the original (kubectl label namespace tenant-root a=b) is made differently by the conversion (kubectl label namespace tenant-root a=c, its call 2)"),
            "{difference}"
        );
    }

    #[test]
    fn temporary_file_names_are_the_same_on_both_sides() {
        // Random `mktemp` names would read as a difference in every call
        // that names the file.
        let text = "#!/bin/sh\nset -eu\nf=$(mktemp)\nd=$(mktemp -d)\nt=$(mktemp /tmp/cm.XXXXXX)\nkubectl apply -f \"$f\" -f \"$d\" -f \"$t\"\n";
        let result = harness().check_alone(text.as_bytes(), text, false);
        assert!(matches!(result, Behaviour::Passed { .. }), "{result:?}");
    }

    fn check_pair(original: &str, converted: &str) -> Behaviour {
        harness().check_alone(original.as_bytes(), converted, false)
    }

    /// A numbered script without `set -e`: it carries on past every failure.
    const CARRIES_ON: &str = "#!/bin/sh\nkubectl delete configmap old -n x\nkubectl create namespace y\nkubectl apply -f new.yaml\n";

    #[test]
    fn a_conversion_stopping_on_a_denial_the_original_carried_past_fails_closed_and_passes() {
        let converted = "#!/bin/sh\nmigrate-tolerate --not-found -- kubectl delete configmap old -n x\nmigrate-tolerate --already-exists -- kubectl create namespace y\nkubectl apply -f new.yaml\n";
        // delete: not-found agrees, forbidden/unreachable/timeout stop;
        // create: already-exists agrees, the three stop; the last call's
        // failure ends both.
        assert_eq!(
            check_pair(CARRIES_ON, converted),
            passed(
                9,
                3,
                &[
                    ("not-found", 1),
                    ("forbidden", 2),
                    ("unreachable", 2),
                    ("timeout", 2),
                    ("already-exists", 1)
                ],
                6
            )
        );
    }

    #[test]
    fn a_not_found_the_original_carried_past_must_be_carried_past_by_the_conversion() {
        let converted = "#!/bin/sh\nkubectl delete configmap old -n x\nmigrate-tolerate --already-exists -- kubectl create namespace y\nkubectl apply -f new.yaml\n";
        let Behaviour::Differed { path, .. } = check_pair(CARRIES_ON, converted) else {
            panic!("not differed")
        };
        assert_eq!(
            path,
            "when call 1 (kubectl delete configmap old -n x) fails (not-found)"
        );
    }

    #[test]
    fn an_already_exists_the_original_carried_past_must_be_carried_past_by_the_conversion() {
        let converted = "#!/bin/sh\nmigrate-tolerate --not-found -- kubectl delete configmap old -n x\nkubectl create namespace y\nkubectl apply -f new.yaml\n";
        let Behaviour::Differed { path, .. } = check_pair(CARRIES_ON, converted) else {
            panic!("not differed")
        };
        assert_eq!(
            path,
            "when call 2 (kubectl create namespace y) fails (already-exists)"
        );
    }

    #[test]
    fn a_conversion_that_goes_on_to_other_calls_after_a_denial_does_not_fail_closed() {
        // It stops the original's course, but not at the failing call.
        let converted = "#!/bin/sh\nmigrate-tolerate --not-found -- kubectl delete configmap old -n x || { kubectl annotate namespace x failed=yes; exit 1; }\nmigrate-tolerate --already-exists -- kubectl create namespace y\nkubectl apply -f new.yaml\n";
        let Behaviour::Differed { path, difference } = check_pair(CARRIES_ON, converted) else {
            panic!("not differed")
        };
        assert_eq!(
            path, "when call 1 (kubectl delete configmap old -n x) fails (forbidden)",
            "{difference}"
        );
    }

    #[test]
    fn each_call_gets_the_failures_it_can_meet() {
        let classes = |line: &str| {
            FailureClass::of_call(&line.split(' ').map(String::from).collect::<Vec<_>>())
                .into_iter()
                .map(FailureClass::name)
                .collect::<Vec<_>>()
                .join(",")
        };
        let denied = "forbidden,unreachable,timeout";
        assert_eq!(classes("kubectl get crd -o name"), denied, "a list");
        assert_eq!(
            classes("kubectl delete pods -l app=x -n y"),
            denied,
            "a selector"
        );
        assert_eq!(classes("kubectl get -A kamajicontrolplane"), denied);
        assert_eq!(
            classes("kubectl get hr -n a b"),
            format!("not-found,{denied}")
        );
        assert_eq!(
            classes("kubectl delete secret/x"),
            format!("not-found,{denied}")
        );
        assert_eq!(
            classes("kubectl delete -f old.yaml"),
            format!("not-found,{denied}")
        );
        assert_eq!(
            classes("kubectl patch cm -n a b --type merge -p {}"),
            format!("not-found,conflict,{denied}")
        );
        assert_eq!(
            classes("kubectl create namespace y"),
            format!("already-exists,{denied}")
        );
        assert_eq!(classes("kubectl apply -f -"), format!("conflict,{denied}"));
        assert_eq!(
            classes("kubectl create cm v --dry-run=client -o yaml"),
            "",
            "no server"
        );
        assert_eq!(
            classes("helm uninstall x -n y"),
            format!("not-found,{denied}")
        );
        assert_eq!(
            classes("cozyhr reconcile kamaji -n k"),
            denied,
            "its NotFound text is unknown"
        );
    }

    #[test]
    fn the_failure_texts_are_the_ones_the_answers_name() {
        use migrate_lint::answers::Answer;
        for command in ["kubectl", "helm"] {
            for class in FailureClass::ALL {
                let text = class.text(command);
                if let Some(answer) = class.answer() {
                    assert!(
                        answer.texts().contains(&text),
                        "{command} {class:?}: {text}"
                    );
                }
                for other in Answer::ALL
                    .into_iter()
                    .filter(|a| Some(*a) != class.answer())
                {
                    assert!(
                        !other.texts().contains(&text),
                        "{command} {class:?} reads as {other}"
                    );
                }
            }
        }
    }

    #[test]
    fn under_a_busybox_preferring_its_applets_the_fake_clock_and_temporary_files_still_answer() {
        // Debian's busybox runs its own `date` and `mktemp` before any on
        // PATH; the image's alpine one does not. Both sides must still see
        // the fakes, or every timestamp and temporary name differs.
        if std::process::Command::new("busybox")
            .arg("true")
            .status()
            .is_err()
        {
            return;
        }
        let text = "#!/bin/sh\nt=$(date +%s%N)\nf=$(mktemp)\nsleep 5\nkubectl annotate namespace a t=$t f=$f\n";
        let mut settings = Settings::new("v", "ns", vec!["kubectl".into()]);
        settings.bin_sh = Some("busybox ash".into());
        settings.timeout = Duration::from_secs(4);
        let result = Harness::new(settings)
            .unwrap()
            .check_alone(text.as_bytes(), text, false);
        assert!(matches!(result, Behaviour::Passed { .. }), "{result:?}");
    }

    #[test]
    fn a_probe_whose_case_spreads_over_lines_is_carried_to_migrate_tolerate_and_passes() {
        // The reference platform's lister: the call continued over lines,
        // each pattern, command and `;;` of the case on a line of its own.
        let original = "#!/bin/sh\nset -eu\nlist() {\n  local out\n  if ! out=$(kubectl get \"$1\" --all-namespaces \\\n       --output name \\\n       2>&1); then\n    case \"$out\" in\n      *\"the server doesn't have a resource type\"*|*\"NotFound\"*)\n        return 0\n        ;;\n    esac\n    echo \"ERROR: $out\" >&2\n    return 1\n  fi\n  printf '%s' \"$out\"\n}\nitems=$(list gadgets.example.com) || exit 1\nfor i in $items; do kubectl label \"$i\" done=yes; done\n";
        let found = super::super::handled::analyse(original);
        assert!(
            found.changes.iter().all(|c| c.rewritable),
            "{:?}",
            found.changes
        );
        let converted = super::super::diff::apply(original, &found.edits);
        assert!(
            converted.contains("$(migrate-tolerate --not-found --not-served -- kubectl get"),
            "{converted}"
        );
        let settings = Settings::new("v", "ns", vec!["kubectl".into()]);
        passes_in_every_shell(&settings, original, &converted, false);
    }

    /// Each shell the check runs scripts under, as `--behaviour-sh`
    /// names it; busybox only where it is installed.
    pub(crate) fn shells() -> Vec<&'static str> {
        let busybox = Command::new("busybox").arg("true").status().is_ok();
        ["/bin/sh", "dash", "bash", "busybox ash"]
            .into_iter()
            .filter(|sh| busybox || !sh.starts_with("busybox"))
            .collect()
    }

    /// Asserts that `converted` behaves as `original` under each of
    /// [`shells`], checked with `settings` (`stamps`: as [`Harness::check_alone`]).
    pub(crate) fn passes_in_every_shell(
        settings: &Settings,
        original: &str,
        converted: &str,
        stamps: bool,
    ) {
        for sh in shells() {
            let mut settings = settings.clone();
            settings.bin_sh = Some(sh.into());
            let result =
                Harness::new(settings)
                    .unwrap()
                    .check_alone(original.as_bytes(), converted, stamps);
            assert!(
                matches!(result, Behaviour::Passed { .. }),
                "{sh}: {result:?}\n{converted}"
            );
        }
    }

    #[test]
    fn a_fake_called_as_a_shell_function_leaves_the_script_as_the_program_on_path_does() {
        // `command kubectl` runs the program on PATH, a bare `kubectl` the
        // function defined before the script: the same calls, the same
        // captured output (no trace of the fake's own commands under
        // `set -x`), the same input read from a pipe and the script's
        // `noclobber` kept, on every path.
        let script = |k: &str| {
            format!(
                "#!/bin/sh\nset -eu\nset -C\nset -x\nout=$({k} get cm a -n x 2>&1) || out=\"failed: $out\"\n{k} create cm b --dry-run=client -o yaml | {k} apply -f -\nmore=$({k} get cm c -n x 2>&1 || true)\n{k} label cm a x=y\necho once >|f\nif (echo twice >f) 2>/dev/null; then clobbered=yes; else clobbered=no; fi\n{k} annotate cm a \"out=$out\" \"more=$more\" \"clobbered=$clobbered\" \"flags=$-\"\n"
            )
        };
        for sh in shells() {
            let mut settings = Settings::new("v", "ns", vec!["kubectl".into()]);
            settings.bin_sh = Some(sh.into());
            let result = Harness::new(settings).unwrap().check_alone(
                script("command kubectl").as_bytes(),
                &script("kubectl"),
                false,
            );
            // Calls 1 and 4 branch on each class they can meet. Call 5 runs
            // in the script's own shell, as none before it does.
            assert_eq!(
                result,
                passed(
                    9,
                    6,
                    &[
                        ("forbidden", 2),
                        ("not-found", 2),
                        ("timeout", 2),
                        ("unreachable", 2)
                    ],
                    0
                ),
                "{sh}"
            );
        }
    }

    #[test]
    fn the_functions_go_before_a_script_only_where_a_shell_reads_them() {
        for (line, shell) in [
            ("/bin/sh", Some("sh")),
            ("/bin/sh -eu", Some("sh")),
            ("/bin/bash -e", Some("bash")),
            ("/usr/bin/env bash", Some("bash")),
            ("/usr/bin/env -S bash -e", Some("bash")),
            ("busybox ash", Some("busybox")),
            ("/bin/busybox sh", Some("busybox")),
            ("/bin/busybox awk -f", None),
            ("/usr/bin/env python3", None),
            ("/usr/bin/perl", None),
        ] {
            assert_eq!(shell_of(line), shell, "{line}");
        }
    }

    #[test]
    fn the_memoized_jq_answers_as_the_real_one_twice() {
        let Some(real) = ["/usr/bin/jq", "/bin/jq"]
            .iter()
            .map(Path::new)
            .find(|p| p.is_file())
        else {
            return;
        };
        let dir = tempfile::tempdir().unwrap();
        let sum = ["/usr/bin/md5sum", "/usr/bin/cksum", "/bin/cksum"]
            .iter()
            .map(Path::new)
            .find(|p| p.is_file())
            .unwrap();
        let cases: [(&[&str], &str); 8] = [
            (&["-r", ".a"], "{\"a\":\"x\"}"),
            (&["-e", ".b"], "{}"),
            (
                &["-c", "--arg", "k", "v", "{k: $k, a: .a}"],
                "{\"a\":[1,2]}",
            ),
            (&[".["], "{}"),
            (&["-n", "1 + 1"], ""),
            (
                &["-r", ".items[] | .name"],
                "{\"items\":[{\"name\":\"a\"},{\"name\":\"b\"}]}",
            ),
            // The shell reads the first line itself: the rest must follow.
            (
                &["-c", "."],
                "{\n  \"a\": 1,\n  \"b\": [2]\n}\n{\"c\": 3}\n",
            ),
            (&["-r", ".a"], ""),
        ];
        let run = |program: &Path, args: &[&str], input: &str| {
            use std::io::Write;
            let mut child = Command::new(program)
                .args(args)
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            // jq ends before reading its input on a filter it cannot
            // compile (`.[`): the closed pipe is part of the answer.
            match child.stdin.take().unwrap().write_all(input.as_bytes()) {
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
                written => written.unwrap(),
            }
            let out = child.wait_with_output().unwrap();
            (out.status.code(), out.stdout, out.stderr.is_empty())
        };
        // The program on PATH, under each shell the function runs in.
        let mut memos = Vec::new();
        for sh in ["/bin/sh", "/bin/dash", "/bin/bash", "/usr/bin/busybox ash"] {
            if !Path::new(sh.split(' ').next().unwrap()).is_file() {
                continue;
            }
            let at = dir.path().join(format!("memo-{}", memos.len()));
            let (cache, state) = (at.join("cache"), at.join("state"));
            std::fs::create_dir_all(&cache).unwrap();
            std::fs::create_dir_all(&state).unwrap();
            let text = jq_memo(real, sum, &cache, &state).replacen("/bin/sh", sh, 1);
            write_exec(&at.join("jq"), &text).unwrap();
            memos.push(at.join("jq"));
        }
        let memo = memos[0].clone();
        for (args, input) in cases {
            let expected = run(real, args, input);
            for memo in &memos {
                for _ in 0..2 {
                    assert_eq!(
                        run(memo, args, input),
                        expected,
                        "{memo:?} {args:?} {input}"
                    );
                }
            }
        }
        // A call reading a file goes to the real one every time.
        let file = dir.path().join("f.json");
        std::fs::write(&file, "{\"a\":1}").unwrap();
        let f = file.to_str().unwrap();
        assert_eq!(run(&memo, &[".a", f], ""), run(real, &[".a", f], ""));
        std::fs::write(&file, "{\"a\":2}").unwrap();
        assert_eq!(run(&memo, &[".a", f], "").1, b"2\n");
    }
}
