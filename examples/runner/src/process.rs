//! One execution of a script: its interpreter, process group, output, timeout, stop and
//! what it ended in.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use migration_core::drive::{Console, Executor, Job, Running, ScriptCommand, ScriptEnd};
use migration_core::run::NOT_YET_EXIT_STATUS;
use migration_core::{Outcome, Slug};
use nix::sys::signal::Signal;
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::sync::watch;

use migration_core::MigrationsTree;

use crate::ScriptSettings;
use crate::child::{ScriptChild, signal_group};
use crate::tripwire::lease;

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
enum ProcessExit {
    /// Exit 0.
    Success,
    /// Exit status [`NOT_YET_EXIT_STATUS`]: preconditions not met.
    NotYet,
    /// Any other end; `extra` explains it beyond the output.
    Failed { reason: String, extra: String },
    /// Stopped: the run was interrupted, or its lock lost.
    Interrupted,
}

/// Writes the bytes the scan read for `slug` to a file of their own in
/// `dir` (the run's private report directory, readable by its owner only),
/// for [`ScriptCommand`]. On `/dev/shm` when the reports are there
/// (tripwire::arm::REPORT_BASE): a file created and removed per script on
/// a disk file system cost an inode allocation that grows with the run
/// (ext4 skips every recently freed inode), about 0.4 ms of CPU per
/// script at 10^3 scripts, more than the rest of the runner's own work
/// (benches/README.md). The name cannot be a report's (`report-*`), the
/// real-commands, lease or ledger file's.
fn private_copy(dir: &Path, slug: &Slug, bytes: &[u8]) -> std::io::Result<PathBuf> {
    let copy = dir.join(format!("script-{}", slug.as_str()));
    // Only ever read: created read-only (0400).
    crate::tripwire::write_new(&copy, bytes, 0o400)?;
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

/// The hook runner's [`Executor`]: each script in its own process group,
/// under the tripwire. What every script execution of one run shares: the
/// tree, the settings and console, the interrupt and the tripwire.
pub struct Processes<'a> {
    tree: &'a MigrationsTree,
    config: &'a ScriptSettings,
    console: &'a dyn Console,
    interrupt: watch::Receiver<bool>,
    /// Armed at the first script that runs (a run with nothing to execute
    /// never pays for it); dropped with the run's scripts, which ends its
    /// supervisor.
    wire: Option<crate::tripwire::Tripwire>,
}

impl<'a> Processes<'a> {
    /// The executor of one run over `tree`: scripts' output goes to
    /// `console`; `interrupt` turns true on SIGTERM/SIGINT (the binary
    /// wires the signals; tests flip it directly).
    pub fn new(
        tree: &'a MigrationsTree,
        config: &'a ScriptSettings,
        console: &'a dyn Console,
        interrupt: watch::Receiver<bool>,
    ) -> Self {
        Processes {
            tree,
            config,
            console,
            interrupt,
            wire: None,
        }
    }
}

#[async_trait::async_trait]
impl Executor for Processes<'_> {
    async fn start<'e>(&'e mut self, job: Job<'_>) -> Result<Box<dyn Running + 'e>, String> {
        self.spawn(job)
            .map(|run| Box::new(run) as Box<dyn Running + 'e>)
            .map_err(|e| e.to_string())
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

impl Processes<'_> {
    /// Starts `job` with the interpreter its shebang names, its cluster
    /// calls fenced by the lease core says is live; an error is a script
    /// that could not be started.
    fn spawn(&mut self, job: Job<'_>) -> std::io::Result<ScriptRun<'_>> {
        let Job {
            pending,
            attempt,
            shebang,
            script: bytes,
            lease_live_until,
            lease_ttl,
            message_limit,
            ..
        } = job;
        let Processes {
            tree,
            config,
            console,
            interrupt,
            wire,
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
        // The shims refuse every cluster call, and the supervisor kills the
        // group, once this deadline passes unrenewed (tripwire::lease).
        armed.lease(lease::deadline(lease_live_until, lease_ttl))?;
        let path: PathBuf = root.join(&pending.relative_path);
        // In the run's private report directory, which the run supervisor
        // removes should the runner die (SIGKILL), and which the guard
        // below makes again should a previous script have removed it.
        let copy = armed
            .report_dir()
            .join(format!("script-{}", pending.slug.as_str()));
        let mut cmd = ScriptCommand {
            shebang,
            copy: &copy,
            path: &path,
            tree: root,
            slug: pending.slug.as_str(),
            tier: pending.tier.as_str(),
            namespace: &config.namespace,
            batch: &pending.batch,
            attempt,
        }
        .build();
        // Its own group, killed whole when the script ends, and on drop
        // (super::child).
        use std::os::unix::process::CommandExt;
        cmd.stdin(null_input()?).process_group(0);
        // One pipe for both streams, as `2>&1` would: the tail then holds the
        // output in the order the script wrote it.
        let (reader, writer) = std::io::pipe()?;
        cmd.stdout(writer.try_clone()?).stderr(writer);
        let report = armed.guard(&mut cmd)?;
        let copy = private_copy(armed.report_dir(), &pending.slug, bytes)?;
        let child = ScriptChild::spawn(&mut cmd)?;
        // Our copies of the write end must go, or the pipe never reaches EOF.
        drop(cmd);
        let output =
            tokio::net::unix::pipe::Receiver::from_owned_fd(std::os::fd::OwnedFd::from(reader))?;
        let pgid = child.pgid();
        // The run's supervisor stops this group should the runner die (even
        // of SIGKILL) before the group is killed and released below.
        if let Err(e) = armed.watch(pgid) {
            signal_group(pgid, Signal::SIGKILL);
            // Reaped when dropped (super::child).
            drop(child);
            return Err(e);
        }
        let tail = Arc::new(Mutex::new(Tail {
            cap: message_limit,
            commands: armed.commands(),
            ..Tail::default()
        }));
        let readers = Box::pin(pump(output, pending.slug.clone(), console, tail.clone()));
        let now = tokio::time::Instant::now();
        Ok(ScriptRun {
            slug: pending.slug.clone(),
            copy,
            config,
            console,
            interrupt,
            armed,
            report: Some(report),
            child,
            pgid,
            tail,
            readers,
            readers_done: false,
            interrupt_gone: false,
            time_limit: now + config.timeout,
            lease_until: lease_live_until,
            lease_ttl,
            message_limit,
            stopping: None,
        })
    }
}

/// A script the runner started, until it ends: what core's run waits on
/// between renewals ([`Running`]).
struct ScriptRun<'s> {
    slug: Slug,
    /// The private copy it runs, removed once it ended.
    copy: PathBuf,
    config: &'s ScriptSettings,
    console: &'s dyn Console,
    interrupt: &'s mut watch::Receiver<bool>,
    armed: &'s mut crate::tripwire::Tripwire,
    /// The script's report, read once it ended.
    report: Option<crate::tripwire::Armed>,
    child: ScriptChild,
    pgid: i32,
    tail: Arc<Mutex<Tail>>,
    /// Its output, read into the console and the tail while it runs.
    readers: std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + 's>>,
    readers_done: bool,
    /// The interrupt's sender is gone: nothing will interrupt the run.
    interrupt_gone: bool,
    /// When its time limit ends.
    time_limit: tokio::time::Instant,
    /// Until when the lease is live, as core last said.
    lease_until: std::time::Instant,
    /// The lease's lifetime: the fence's margin is a tenth of it.
    lease_ttl: Duration,
    /// Bytes of output a failure's message keeps.
    message_limit: usize,
    /// A stop in progress: what it ends as, and when it began (SIGTERM
    /// sent; SIGKILL follows after the grace or before the lease can
    /// lapse, whichever comes first).
    stopping: Option<(ProcessExit, tokio::time::Instant)>,
}

impl ScriptRun<'_> {
    /// SIGTERM to the whole group; SIGKILL follows ([`Self::kill_at`]).
    fn begin_stop(&mut self, why: ProcessExit) {
        if self.stopping.is_none() {
            signal_group(self.pgid, Signal::SIGTERM);
            self.stopping = Some((why, tokio::time::Instant::now()));
        }
    }

    /// When a stop in progress turns into SIGKILL: after the grace, at once
    /// once [`escalate`] was called, and never later than the lease's
    /// deadline, however long the grace (a script that ignores SIGTERM
    /// never outlives the lock).
    fn kill_at(&self) -> Option<tokio::time::Instant> {
        let (_, began) = self.stopping.as_ref()?;
        if ESCALATED.load(std::sync::atomic::Ordering::SeqCst) {
            return Some(tokio::time::Instant::now());
        }
        let lease = tokio::time::Instant::from_std(
            self.lease_until
                .checked_sub(self.lease_ttl / 10)
                .unwrap_or(self.lease_until),
        );
        Some((*began + self.config.grace).min(lease))
    }

    /// The group is gone: kills what is left of it, reads the rest of the
    /// output and the tripwire's report, and says how the script ended.
    async fn finish(&mut self, status: ProcessExit) -> ScriptEnd {
        let pgid = self.pgid;
        // Stragglers left in the group would hold the pipes open.
        signal_group(pgid, Signal::SIGKILL);
        let mut report = self.report.take();
        // So would processes that left the group; they also fail the script
        // (Tripwire hook 2, below).
        if let Some(r) = report.as_mut() {
            r.reap_survivors(pgid);
        }
        if !self.readers_done {
            (&mut self.readers).await;
            self.readers_done = true;
        }
        // The group is gone; a supervisor that cannot be told so is caught
        // at the next script's `watch`.
        let _ = self.armed.release(pgid);
        // Memory on /dev/shm: one script's copy at a time. One left behind
        // goes with the run's directory.
        let _ = std::fs::remove_file(&self.copy);
        let (tail, unstarted) = {
            let t = self.tail.lock().unwrap_or_else(PoisonError::into_inner);
            (t.text(), t.unstarted.clone())
        };
        let Some(report) = report else {
            return ScriptEnd::Interrupted;
        };
        // Tripwire hook 2 of 3: exit 0 after an unaccepted cluster-command
        // failure is a failure (reason masked-failure), however it was masked.
        let mut calls = report.finish();
        calls.unstarted = unstarted;
        outcome(status, &calls, tail, self.message_limit)
    }
}

#[async_trait::async_trait]
impl Running for ScriptRun<'_> {
    async fn wait(&mut self, at_most: Duration) -> Option<ScriptEnd> {
        let give_up = tokio::time::Instant::now() + at_most;
        let status = loop {
            let kill_at = self.kill_at();
            let stopping = self.stopping.is_some();
            tokio::select! {
                status = self.child.wait() => {
                    break match self.stopping.take() {
                        Some((why, _)) => why,
                        None => exited(status),
                    };
                }
                () = &mut self.readers, if !self.readers_done => self.readers_done = true,
                () = tokio::time::sleep_until(self.time_limit), if !stopping => {
                    self.console.progress(&format!("{} timed out after {:?}; stopping its process group", self.slug, self.config.timeout));
                    self.begin_stop(ProcessExit::Failed { reason: "timeout".into(), extra: String::new() });
                }
                changed = self.interrupt.changed(), if !stopping && !self.interrupt_gone => {
                    if changed.is_err() {
                        self.interrupt_gone = true;
                    } else if *self.interrupt.borrow() {
                        self.console.progress(&format!("interrupted: forwarding SIGTERM to {} and waiting up to {:?}", self.slug, self.config.grace));
                        self.begin_stop(ProcessExit::Interrupted);
                    }
                }
                () = tokio::time::sleep_until(kill_at.unwrap_or(give_up)), if kill_at.is_some() => {
                    signal_group(self.pgid, Signal::SIGKILL);
                }
                // A second signal escalates a stop in progress.
                () = tokio::time::sleep(Duration::from_millis(50)), if stopping => {}
                () = tokio::time::sleep_until(give_up) => return None,
            }
        };
        Some(self.finish(status).await)
    }

    fn lease_renewed(&mut self, until: std::time::Instant) {
        self.lease_until = until;
        // Should the deadline not reach the shims, they refuse at the old
        // one and the supervisor kills the group there: failing closed.
        let _ = self.armed.lease(lease::deadline(until, self.lease_ttl));
    }

    async fn stop(&mut self) {
        self.begin_stop(ProcessExit::Interrupted);
        while self.wait(Duration::from_secs(3600)).await.is_none() {}
    }
}

/// How a script's process ended, on its own.
fn exited(status: std::io::Result<std::process::ExitStatus>) -> ProcessExit {
    use std::os::unix::process::ExitStatusExt;
    match status {
        Ok(s) if s.success() => ProcessExit::Success,
        Ok(s) if s.code() == Some(NOT_YET_EXIT_STATUS) => ProcessExit::NotYet,
        Ok(s) => {
            let reason = match (s.code(), s.signal()) {
                (Some(code), _) => format!("exit-status-{code}"),
                (None, Some(sig)) => format!("signal-{sig}"),
                _ => "unknown-exit".to_owned(),
            };
            ProcessExit::Failed {
                reason,
                extra: String::new(),
            }
        }
        Err(e) => ProcessExit::Failed {
            reason: "wait-error".into(),
            extra: e.to_string(),
        },
    }
}

/// What a script that ended as `status`, having made `calls`, is recorded
/// as.
fn outcome(
    status: ProcessExit,
    calls: &crate::tripwire::Calls,
    tail: String,
    cap: usize,
) -> ScriptEnd {
    let ended = |outcome| ScriptEnd::Ran {
        outcome,
        cluster_commands: None,
    };
    match status {
        ProcessExit::NotYet => ended(Outcome::NotYet {
            message: not_yet_message(calls, &tail, cap),
        }),
        ProcessExit::Success => match calls.masked_failure() {
            Some(message) => ended(Outcome::Failed {
                reason: crate::tripwire::MASKED_FAILURE.into(),
                message: crate::tripwire::compose(&message, &tail, cap),
            }),
            // Tripwire hook 3 of 3: tolerated cluster-command failures
            // are counted in the entry's message and in the run report.
            None => ScriptEnd::Ran {
                outcome: match calls.ok_message() {
                    Some(message) => Outcome::SucceededNoting { message },
                    None => Outcome::Succeeded,
                },
                cluster_commands: Some(calls.summary()),
            },
        },
        ProcessExit::Failed { reason, extra } => ended(Outcome::Failed {
            reason,
            message: if extra.is_empty() {
                tail
            } else {
                format!("{tail}\n{extra}")
            },
        }),
        ProcessExit::Interrupted => ScriptEnd::Interrupted,
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
}
