//! One execution of a script: its interpreter, process group, output, timeout, stop and
//! what it ended in.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use migration_core::drive::{Exec, Executor, Job};
use migration_core::run::NOT_YET_EXIT_STATUS;
use migration_core::{LedgerError, LockKeeper, Outcome, Slug};
use nix::sys::signal::Signal;
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::sync::watch;

use migration_core::MigrationsTree;

use crate::child::{ScriptChild, signal_group};
use crate::{Console, RunConfig};

/// Keeps the output tail within a byte budget, by whole lines, each
/// redacted as it arrives: whether a line holds a secret can depend on an
/// earlier line (a Secret's `data:`) that the tail no longer keeps.
#[derive(Debug, Default)]
pub(super) struct Tail {
    lines: VecDeque<String>,
    bytes: usize,
    cap: usize,
    redactor: migration_core::redact::Redactor,
    /// The cluster commands, and those the shell said it could not start
    /// (crate::tripwire::unstarted_command): no shim ever ran for them.
    commands: Vec<String>,
    unstarted: Vec<String>,
}

impl Tail {
    fn push(&mut self, line: &str) {
        if let Some(u) = crate::tripwire::unstarted_command(line, &self.commands) {
            self.unstarted.push(u);
        }
        let Some(mut line) = self.redactor.line(line) else {
            return;
        };
        if line.len() > self.cap {
            let mut cut = line.len() - self.cap;
            while !line.is_char_boundary(cut) {
                cut += 1;
            }
            line = line[cut..].to_owned();
        }
        self.bytes += line.len();
        self.lines.push_back(line);
        // The text joins lines with '\n': its size is the bytes plus one
        // separator fewer than there are lines.
        while self.bytes + self.lines.len().saturating_sub(1) > self.cap {
            match self.lines.pop_front() {
                Some(old) => self.bytes -= old.len(),
                None => break,
            }
        }
    }

    fn text(&self) -> String {
        self.lines.iter().cloned().collect::<Vec<_>>().join("\n")
    }
}

/// How the script's process ended, before the tripwire's report is read.
enum Status {
    /// Exit 0.
    Success,
    /// Exit status [`NOT_YET_EXIT_STATUS`]: preconditions not met.
    NotYet,
    /// Any other end; `extra` explains it beyond the output.
    Failed {
        reason: String,
        extra: String,
    },
    Interrupted,
    LockLost(LedgerError),
}

/// The interpreter command for a script: its shebang words, then errexit
/// (and pipefail for bash, which supports it), then the commands that run
/// `copy` (the bytes the pre-run scan read and hashed) with `$0` set to the
/// script's `path` in the tree. The file at `path` is never read again: an
/// edit after the scan would otherwise run unscanned (and a shell reads its
/// script as it goes, so even an edit while it runs would). `. COPY` keeps
/// `$0` what a script run by path has, so `"$(dirname "$0")/../lib/x.sh"`
/// still finds the tree's helpers.
/// `migrate test` starts migrations through it too (with the tree's file as
/// its own copy), so a migration runs under a test as it runs in production.
pub fn command_for(shebang: &str, copy: &Path, path: &Path) -> std::process::Command {
    let mut words = shebang.split_whitespace();
    let program = words.next().unwrap_or("/bin/sh");
    let args: Vec<&str> = words.collect();
    let mut cmd = std::process::Command::new(program);
    cmd.args(&args);
    let is_bash = program.ends_with("/bash") || args.first().is_some_and(|a| *a == "bash");
    cmd.arg("-e");
    if is_bash {
        cmd.args(["-o", "pipefail"]);
    }
    // Single-quoted for the shell, byte for byte (a path need not be UTF-8).
    use std::os::unix::ffi::{OsStrExt, OsStringExt};
    let mut source = b". '".to_vec();
    for &b in copy.as_os_str().as_bytes() {
        if b == b'\'' {
            source.extend_from_slice(b"'\\''");
        } else {
            source.push(b);
        }
    }
    source.push(b'\'');
    cmd.arg("-c")
        .arg(std::ffi::OsString::from_vec(source))
        .arg(path);
    cmd
}

/// Writes the bytes the scan read for `slug` to a file of their own in
/// `dir` (private to the run, readable by its owner only), for
/// [`command_for`].
fn private_copy(dir: &Path, slug: &Slug, bytes: &[u8]) -> std::io::Result<PathBuf> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt;
    let copy = dir.join(slug.as_str());
    match std::fs::remove_file(&copy) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o400)
        .open(&copy)?;
    file.write_all(bytes)?;
    Ok(copy)
}

/// A script's stdin: `/dev/null`, opened once per process and duplicated
/// for each script (`Stdio::null()` opens it anew every time, a path walk
/// where a duplicate is one `fcntl`).
fn null_input() -> std::io::Result<Stdio> {
    static NULL: std::sync::OnceLock<std::fs::File> = std::sync::OnceLock::new();
    let null = match NULL.get() {
        Some(null) => null,
        None => {
            let opened = std::fs::File::open("/dev/null")?;
            NULL.get_or_init(|| opened)
        }
    };
    Ok(Stdio::from(null.try_clone()?))
}

pub(super) async fn pump<R: AsyncRead + Unpin>(
    reader: R,
    slug: Slug,
    console: &dyn Console,
    tail: Arc<Mutex<Tail>>,
) {
    let mut reader = BufReader::new(reader);
    let mut buf = Vec::new();
    loop {
        buf.clear();
        match reader.read_until(b'\n', &mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {
                let text = String::from_utf8_lossy(&buf);
                let line = text.trim_end_matches(['\n', '\r']);
                console.script_line(&slug, line);
                tail.lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(line);
            }
        }
    }
}

/// What every script execution of one run shares: the tree, the run's
/// settings and console, the interrupt, the tripwire and the private
/// copies of the scripts. The hook runner's [`Executor`].
pub(super) struct Scripts<'a> {
    tree: &'a MigrationsTree,
    config: &'a RunConfig,
    console: &'a dyn Console,
    interrupt: watch::Receiver<bool>,
    /// Armed at the first script that runs (a run with nothing to execute
    /// never pays for it); dropped with the run's scripts, which ends its
    /// supervisor.
    wire: Option<crate::tripwire::Tripwire>,
    /// Where the private copies of the scripts are written (made at the
    /// first script).
    copies: Option<tempfile::TempDir>,
}

impl<'a> Scripts<'a> {
    pub(super) fn new(
        tree: &'a MigrationsTree,
        config: &'a RunConfig,
        console: &'a dyn Console,
        interrupt: watch::Receiver<bool>,
    ) -> Self {
        Scripts {
            tree,
            config,
            console,
            interrupt,
            wire: None,
            copies: None,
        }
    }
}

#[async_trait::async_trait]
impl Executor for Scripts<'_> {
    async fn execute(&mut self, job: Job<'_>, keeper: &mut LockKeeper<'_>) -> Exec {
        self.spawn_and_wait(job, keeper)
            .await
            .unwrap_or_else(|e| Exec::Unstarted {
                message: e.to_string(),
            })
    }

    fn interrupted(&self) -> bool {
        *self.interrupt.borrow()
    }

    async fn pause(&mut self, pause: Duration) {
        tokio::select! {
            () = tokio::time::sleep(pause) => {}
            _ = self.interrupt.changed() => {}
        }
    }

    fn checkpoint(&self, point: &str) {
        crate::failpoint(point);
    }
}

impl Scripts<'_> {
    /// Runs `job` with the interpreter its shebang names, renewing the
    /// lock while it runs, and tells how it ended; an error is a script
    /// that could not be started.
    async fn spawn_and_wait(
        &mut self,
        job: Job<'_>,
        keeper: &mut LockKeeper<'_>,
    ) -> std::io::Result<Exec> {
        let Job {
            pending,
            attempt,
            shebang,
            script: bytes,
            ..
        } = job;
        let Scripts {
            tree,
            config,
            console,
            interrupt,
            wire,
            copies,
        } = self;
        let (root, config, console) = (tree.root(), *config, *console);
        // Tripwire hook 1 of 3: cluster commands go through the runner's shim
        // (PATH, KUBECTL/HELM/FLUX and a fresh report file; see crate::tripwire).
        let armed = match wire.take() {
            Some(w) => wire.insert(w),
            None => {
                let mut w = crate::tripwire::Tripwire::arm(&config.tripwire, root, config.grace)?;
                // The shims refuse any write of the ledger ConfigMap lint
                // guards, whatever feeds it (a variable, a file).
                w.guard_ledger(&config.lint.ledger_name)?;
                wire.insert(w)
            }
        };
        use std::os::unix::process::CommandExt;
        let path: PathBuf = root.join(&pending.relative_path);
        let dir = match copies.take() {
            Some(d) => copies.insert(d),
            None => copies.insert(
                tempfile::Builder::new()
                    .prefix("migrate-scripts-")
                    .tempdir()?,
            ),
        };
        let copy = private_copy(dir.path(), &pending.slug, bytes)?;
        let mut cmd = command_for(shebang, &copy, &path);
        cmd.current_dir(root)
            .env("MIGRATION_SLUG", pending.slug.as_str())
            .env("MIGRATION_TIER", pending.tier.as_str())
            .env("MIGRATION_TREE", root)
            .env("MIGRATION_NAMESPACE", &config.namespace)
            .env("MIGRATION_BATCH", &pending.batch)
            .env("MIGRATION_ATTEMPT", attempt.to_string())
            // A script's own dry-run switch must not be inherited by a real
            // run: it would exit 0 having done nothing, and be recorded `ok`.
            // A dry run is `migrate run --dry-run`, which executes nothing.
            .env_remove("MIGRATION_DRY_RUN")
            .stdin(null_input()?)
            // Its own group, killed whole when the script ends, and on drop
            // (super::child).
            .process_group(0);
        // One pipe for both streams, as `2>&1` would: the tail then holds the
        // output in the order the script wrote it.
        let (reader, writer) = std::io::pipe()?;
        cmd.stdout(writer.try_clone()?).stderr(writer);
        let mut report = armed.guard(&mut cmd)?;
        let mut child = ScriptChild::spawn(&mut cmd)?;
        // Our copies of the write end must go, or the pipe never reaches EOF.
        drop(cmd);
        let output =
            tokio::net::unix::pipe::Receiver::from_owned_fd(std::os::fd::OwnedFd::from(reader))?;
        let pgid = child.pgid();
        // The run's supervisor stops this group should the runner die (even
        // of SIGKILL) before the group is killed and released below.
        if let Err(e) = armed.watch(pgid) {
            signal_group(pgid, Signal::SIGKILL);
            let _ = child.wait().await;
            return Err(e);
        }
        let tail = Arc::new(Mutex::new(Tail {
            cap: config.tail_bytes,
            commands: armed.commands(),
            ..Tail::default()
        }));
        let readers = pump(output, pending.slug.clone(), console, tail.clone());

        let deadline = tokio::time::Instant::now() + config.timeout;
        let renew_every = keeper.period();
        let waiting = async {
            let mut renew =
                tokio::time::interval_at(tokio::time::Instant::now() + renew_every, renew_every);
            loop {
                tokio::select! {
                    status = child.wait() => {
                        return match status {
                            Ok(s) if s.success() => Status::Success,
                            Ok(s) if s.code() == Some(NOT_YET_EXIT_STATUS) => Status::NotYet,
                            Ok(s) => {
                                use std::os::unix::process::ExitStatusExt;
                                let reason = match (s.code(), s.signal()) {
                                    (Some(code), _) => format!("exit-status-{code}"),
                                    (None, Some(sig)) => format!("signal-{sig}"),
                                    _ => "unknown-exit".to_owned(),
                                };
                                Status::Failed { reason, extra: String::new() }
                            }
                            Err(e) => Status::Failed { reason: "wait-error".into(), extra: e.to_string() },
                        };
                    }
                    () = tokio::time::sleep_until(deadline) => {
                        console.progress(&format!("{} timed out after {:?}; stopping its process group", pending.slug, config.timeout));
                        stop(&mut child, pgid, config.grace).await;
                        return Status::Failed { reason: "timeout".into(), extra: String::new() };
                    }
                    _ = interrupt.changed() => {
                        if *interrupt.borrow() {
                            console.progress(&format!("interrupted: forwarding SIGTERM to {} and waiting up to {:?}", pending.slug, config.grace));
                            stop(&mut child, pgid, config.grace).await;
                            return Status::Interrupted;
                        }
                    }
                    _ = renew.tick() => {
                        if let Err(e) = keeper.renew().await {
                            stop(&mut child, pgid, config.grace).await;
                            return Status::LockLost(e);
                        }
                    }
                }
            }
        };
        let (status, ()) = tokio::join!(
            async {
                let status = waiting.await;
                // Stragglers left in the group would hold the pipes open.
                signal_group(pgid, Signal::SIGKILL);
                // So would processes that left the group; they also fail
                // the script (Tripwire hook 2, below).
                report.reap_survivors(pgid);
                status
            },
            readers
        );
        // The group is gone; a supervisor that cannot be told so is caught at
        // the next script's `watch`.
        let _ = armed.release(pgid);
        let (tail, unstarted) = {
            let t = tail.lock().unwrap_or_else(PoisonError::into_inner);
            (t.text(), t.unstarted.clone())
        };
        // Tripwire hook 2 of 3: exit 0 after an unaccepted cluster-command
        // failure is a failure (reason masked-failure), however it was masked.
        let mut calls = report.finish();
        calls.unstarted = unstarted;
        let ended = |outcome| Exec::Ended {
            outcome,
            cluster_commands: None,
        };
        Ok(match status {
            Status::NotYet => ended(Outcome::NotYet {
                message: not_yet_message(&calls, &tail, config.tail_bytes),
            }),
            Status::Success => match calls.masked_failure() {
                Some(message) => ended(Outcome::Failed {
                    reason: crate::tripwire::MASKED_FAILURE.into(),
                    message: crate::tripwire::compose(&message, &tail, config.tail_bytes),
                }),
                // Tripwire hook 3 of 3: tolerated cluster-command failures
                // are counted in the entry's message and in the run report.
                None => Exec::Ended {
                    outcome: match calls.ok_message() {
                        Some(message) => Outcome::SucceededNoting { message },
                        None => Outcome::Succeeded,
                    },
                    cluster_commands: Some(calls.summary()),
                },
            },
            Status::Failed { reason, extra } => ended(Outcome::Failed {
                reason,
                message: if extra.is_empty() {
                    tail
                } else {
                    format!("{tail}\n{extra}")
                },
            }),
            Status::Interrupted => Exec::Interrupted,
            Status::LockLost(e) => Exec::LockLost(e),
        })
    }
}

/// The message of a script that exited 75: that, the cluster-command calls
/// that failed unacknowledged before it (still not `ok`: the migration
/// stays `not-yet`), then the end of its output.
pub(super) fn not_yet_message(calls: &crate::tripwire::Calls, tail: &str, cap: usize) -> String {
    let mut text = format!(
        "exit status {}: preconditions not met; it runs again next time\n",
        migration_core::run::NOT_YET_EXIT_STATUS
    );
    let failed: Vec<_> = calls.calls.iter().filter(|c| c.failed()).collect();
    if !failed.is_empty() {
        text.push_str(&format!(
            "{} cluster-command call(s) failed before it:\n",
            failed.len()
        ));
        for c in failed {
            text.push_str(&format!("  {}\n", c.describe()));
        }
    }
    crate::tripwire::compose(&text, tail, cap)
}

/// Set by a second SIGINT/SIGTERM: a script being stopped is killed at
/// once instead of after its grace period.
static ESCALATED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Escalates a stop in progress (or the next one) to SIGKILL at once.
pub fn escalate() {
    ESCALATED.store(true, std::sync::atomic::Ordering::SeqCst);
}

/// SIGTERM to the whole group, then SIGKILL after the grace period, or as
/// soon as [`escalate`] is called.
pub(super) async fn stop(child: &mut ScriptChild, pgid: i32, grace: Duration) {
    signal_group(pgid, Signal::SIGTERM);
    let deadline = tokio::time::Instant::now() + grace;
    loop {
        if ESCALATED.load(std::sync::atomic::Ordering::SeqCst) {
            break;
        }
        let slice = deadline
            .saturating_duration_since(tokio::time::Instant::now())
            .min(Duration::from_millis(50));
        if slice.is_zero() {
            break;
        }
        if tokio::time::timeout(slice, child.wait()).await.is_ok() {
            return;
        }
    }
    signal_group(pgid, Signal::SIGKILL);
    let _ = child.wait().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tail_keeps_the_last_lines_within_the_budget() {
        let mut tail = Tail {
            cap: 10,
            ..Tail::default()
        };
        for line in ["one", "two", "three", "four"] {
            tail.push(line);
        }
        assert_eq!(tail.text(), "three\nfour");
        tail.push(&"é".repeat(20));
        assert!(tail.text().len() <= 10);
        assert!(tail.text().chars().all(|c| c == 'é'));
    }

    #[test]
    fn the_copy_is_sourced_with_dollar_zero_naming_the_script_in_the_tree() {
        let cmd = command_for(
            "/bin/sh",
            Path::new("/tmp/it's/s"),
            Path::new("/t/pre-apply/s"),
        );
        let args: Vec<_> = cmd
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(args, ["-e", "-c", ". '/tmp/it'\\''s/s'", "/t/pre-apply/s"]);
    }

    #[test]
    fn bash_gets_pipefail_and_sh_does_not() {
        let sh = format!(
            "{:?}",
            command_for("/bin/sh", Path::new("c"), Path::new("x"))
        );
        let bash = format!(
            "{:?}",
            command_for("/usr/bin/env bash", Path::new("c"), Path::new("x"))
        );
        assert!(sh.contains("\"-e\"") && !sh.contains("pipefail"), "{sh}");
        assert!(
            bash.contains("\"bash\" \"-e\" \"-o\" \"pipefail\""),
            "{bash}"
        );
    }
}
