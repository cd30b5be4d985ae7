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
//! a conversion changed an argument. The environment never reaches a real
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
/// the results in the order of `scripts`.
pub fn check_all(
    settings: &Settings,
    scripts: &[Script<'_>],
    libs: Libs<'_>,
) -> std::io::Result<Vec<Behaviour>> {
    let workers = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, 4)
        .min(scripts.len().max(1));
    let per_worker: Vec<std::io::Result<Vec<Behaviour>>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..workers)
            .map(|w| {
                scope.spawn(move || {
                    let harness = Harness::new(settings.clone())?;
                    Ok(scripts
                        .iter()
                        .skip(w)
                        .step_by(workers)
                        .map(|s| harness.check(s, libs))
                        .collect())
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
    let mut iters = Vec::new();
    for r in per_worker {
        iters.push(r?.into_iter());
    }
    Ok((0..scripts.len())
        .map(|i| {
            iters[i % workers]
                .next()
                .unwrap_or_else(|| Behaviour::CouldNotRun {
                    reason: "its check ended abnormally".into(),
                })
        })
        .collect())
}

/// Scratch space for the runs of one conversion: the fakes, their state,
/// `HOME`, and the two trees (rewritten for each script).
pub struct Harness {
    settings: Settings,
    dir: tempfile::TempDir,
    path: std::ffi::OsString,
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
        let dir = tempfile::Builder::new()
            .prefix("migrate-convert-check-")
            .tempdir()?;
        let bin = dir.path().join("bin");
        std::fs::create_dir_all(&bin)?;
        let state = dir.path().join("state");
        for name in &settings.commands {
            write_exec(&bin.join(name), &fake(name, &state, settings.max_calls))?;
        }
        write_exec(
            &bin.join(migrate_lint::cluster_commands::TOLERATE),
            &tolerate_fake(&state),
        )?;
        write_exec(&bin.join("mktemp"), &mktemp_fake(&state))?;
        // Waits cost time and wait for nothing here: the fakes answer at once.
        write_exec(&bin.join("sleep"), "#!/bin/sh\nexit 0\n")?;
        // The same clock for both sides: a timestamp in an annotation is
        // then the same argument in both.
        if let Some(date) = std::env::var_os("PATH").and_then(|p| {
            std::env::split_paths(&p)
                .map(|d| d.join("date"))
                .find(|d| d.is_file())
        }) {
            write_exec(&bin.join("date"), &date_fake(&date))?;
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
        })
    }

    /// Checks one script.
    pub fn check(&self, script: &Script<'_>, libs: Libs<'_>) -> Behaviour {
        match self.compare(script, libs) {
            Ok(b) => b,
            Err(reason) => Behaviour::CouldNotRun { reason },
        }
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
        for (i, j) in map.iter().enumerate() {
            let Some(j) = j else { continue };
            let failing = self.run(script, Side::Original, Some(i + 1))?;
            let branches = failing.calls.len() > i + 1 || failing.status != Some(FAIL_STATUS);
            if !branches {
                continue;
            }
            let path = format!(
                "when call {} ({}) fails",
                i + 1,
                display(&original.calls[i].argv)
            );
            let converted = self.run(script, Side::Converted, Some(j + 1))?;
            if let (_, Some(d)) = self.align(&failing, &converted, script.stamps) {
                return Ok(differed(path, d));
            }
            paths += 1;
        }
        Ok(Behaviour::Passed {
            paths,
            calls: original.calls.len(),
        })
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

    /// Runs one side, failing call `fail_at` (one-based) if given.
    fn run(
        &self,
        script: &Script<'_>,
        side: Side,
        fail_at: Option<usize>,
    ) -> Result<Trace, String> {
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
        let path = self.script_path(script, side);
        let (root, mut cmd) = match side {
            Side::Original => {
                let shebang = self.interpreter(script.original);
                let mut words = shebang.split_whitespace();
                let mut cmd = Command::new(words.next().unwrap_or("/bin/sh"));
                cmd.args(words).arg(&path);
                (self.original_root(), cmd)
            }
            Side::Converted => {
                let shebang = self.interpreter(script.converted.as_bytes());
                let root = self.converted_root();
                let cmd = migration_core::drive::ScriptCommand {
                    shebang: &shebang,
                    copy: &path,
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
        Ok(Trace {
            calls,
            status: status.code().or(status.signal().map(|s| 128 + s)),
            last_line,
        })
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
    /// the file `N`, its words `N.0`, `N.1`, ..., and `N.in` names the file
    /// holding what it read from stdin (`stdin.<pid>` in `state`).
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
            let mut argv = Vec::new();
            for k in 0.. {
                match optional(dir.join(format!("{n}.{k}")))? {
                    Some(bytes) => argv.push(normal(&bytes)),
                    None => break,
                }
            }
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

/// The instant the fake `date` reports.
const FIXED_TIME: u64 = 1_767_225_600;

/// Single-quoted for sh.
fn quote(path: &Path) -> String {
    migration_core::shell::quoted(&path.to_string_lossy())
}

/// The fake cluster command `name`: takes the next call number (a file
/// created exclusively, so concurrent calls of a pipeline never share
/// one), records each argument in a file of its own and what it read
/// from stdin when told to read it (`-f -`), then fails if it is the call
/// to fail, else succeeds. Stdin is read before the number is taken: in
/// `kubectl create ... --dry-run -o yaml | kubectl apply -f -` the writer
/// then always comes first.
fn fake(name: &str, state: &Path, max_calls: usize) -> String {
    let error = if name == "helm" {
        "Error: release: not found"
    } else {
        "Error from server (NotFound): the server could not find the requested resource"
    };
    format!(
        r#"#!/bin/sh
# A fake {name} written by 'migrate convert' for its behaviour check: it
# records the call and never reaches a cluster.
s={state}
name={quoted}
i=
for a in "$@"; do
  case $a in -|-f-|--filename=-|--values=-) i=1 ;; esac
done
if [ -n "$i" ]; then cat >"$s/stdin.$$"; fi
read n <"$s/next" || n=1
# noclobber: '>' creates the file or fails (O_EXCL), so each number is
# taken once, without a process per attempt.
set -C
while ! printf '' 2>/dev/null >"$s/calls/$n"; do n=$((n + 1)); done
set +C
echo $((n + 1)) >"$s/next"
if [ "$n" -gt {max_calls} ]; then
  : >"$s/overflow"
  kill -9 0
  exit 124
fi
printf '%s' "$name" >"$s/calls/$n.0"
k=1
for a in "$@"; do
  printf '%s' "$a" >"$s/calls/$n.$k"
  k=$((k + 1))
done
if [ -n "$i" ]; then printf '%s' "$$" >"$s/calls/$n.in"; fi
read f <"$s/fail-at" || f=0
if [ "$n" = "$f" ]; then
  echo '{error}' >&2
  exit {FAIL_STATUS}
fi
for a in "$@"; do
  case $a in --dry-run*) printf '# %s\n' "$name" "$@"; break ;; esac
done
exit 0
"#,
        state = quote(state),
        quoted = quote(Path::new(name)),
    )
}

/// `migrate-tolerate` for the fakes: runs the command, and accepts its
/// failure when the class asked for is the one the fakes fail with
/// (`--not-found`), printing the tolerated line the real one prints;
/// every other flag is read and has no failure to accept.
fn tolerate_fake(state: &Path) -> String {
    format!(
        r#"#!/bin/sh
# migrate-tolerate for the fakes of 'migrate convert's behaviour check.
s={state}
nf=
while [ $# -gt 0 ]; do
  case $1 in
    --) shift; break ;;
    --not-found) nf=1 ;;
    --retry-delay) shift ;;
    --retry) case ${{2:-}} in [0-9]*) shift ;; esac ;;
  esac
  shift
done
e="$s/tolerate.$$"
if "$@" 2>"$e"; then cat "$e" >&2; rm -f "$e"; exit 0; fi
st=$?
cat "$e" >&2
if [ -n "$nf" ] && grep -q -e '(NotFound)' -e 'not found' "$e"; then
  rm -f "$e"
  printf '%s\n' {tolerated}"not-found: $*" >&2
  exit 0
fi
rm -f "$e"
exit "$st"
"#,
        state = quote(state),
        // The line the real one prints when it accepts: convert's
        // rewrites read it back, so the fake must print it too.
        tolerated = quote(Path::new(migrate_lint::answers::TOLERATED_PREFIX)),
    )
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
mod tests {
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

    fn check(converted: &str) -> Behaviour {
        let lib = BTreeMap::new();
        harness().check(
            &Script {
                number: 1,
                slug: "1",
                original: ORIGINAL.as_bytes(),
                converted,
                stamps: true,
            },
            Libs {
                numbered: &lib,
                converted: &lib,
            },
        )
    }

    #[test]
    fn removing_only_the_stamp_and_marking_the_early_exit_not_yet_passes() {
        let converted = ORIGINAL
            .replace("  exit 0\n", "  exit 75\n")
            .replace(
                "kubectl create configmap -n cozy-system cozystack-version --from-literal=version=2 --dry-run=client -o yaml | kubectl apply -f-\n",
                "",
            );
        assert_eq!(check(&converted), Behaviour::Passed { paths: 2, calls: 5 });
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
            "when call 1 (kubectl get namespace tenant-root) fails"
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
        let lib = BTreeMap::new();
        let result = harness().check(
            &Script {
                number: 1,
                slug: "1",
                original: original.as_bytes(),
                converted: &converted,
                stamps: false,
            },
            Libs {
                numbered: &lib,
                converted: &lib,
            },
        );
        assert!(
            matches!(result, Behaviour::Passed { .. }),
            "{result:?}\n{converted}"
        );
    }

    #[test]
    fn a_handled_not_found_carried_to_migrate_tolerate_passes() {
        let original = "#!/bin/sh\nset -eu\nerr=$(mktemp)\nif ! kubectl delete job old -n x 2>\"$err\"; then\n  grep -q NotFound \"$err\" || exit 1\nfi\nkubectl apply -f new.yaml\n";
        let converted = "#!/bin/sh\nset -eu\nmigrate-tolerate --not-found -- kubectl delete job old -n x\nkubectl apply -f new.yaml\n";
        let lib = BTreeMap::new();
        let result = harness().check(
            &Script {
                number: 1,
                slug: "1",
                original: original.as_bytes(),
                converted,
                stamps: false,
            },
            Libs {
                numbered: &lib,
                converted: &lib,
            },
        );
        // The success path and the delete failing (the apply failing ends both).
        assert_eq!(result, Behaviour::Passed { paths: 2, calls: 2 });
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
        let lib = BTreeMap::new();
        let result = harness().check(
            &Script {
                number: 1,
                slug: "1",
                original: text.as_bytes(),
                converted: text,
                stamps: false,
            },
            Libs {
                numbered: &lib,
                converted: &lib,
            },
        );
        assert!(matches!(result, Behaviour::Passed { .. }), "{result:?}");
    }
}
