//! A script's process, waited for through a pidfd on the runtime's own
//! event loop.
//!
//! `tokio::process` would do the same waiting, but it also installs a
//! SIGCHLD handler for its orphan queue: every script's exit is then a
//! signal delivered to some thread of the runner (often a parked one, woken
//! only to run the handler) and one more event for the loop to handle,
//! besides the pidfd. Here the script's exit is one readable descriptor,
//! and SIGCHLD keeps its default disposition (discarded), so nothing else
//! wakes.

use std::os::fd::OwnedFd;
use std::process::ExitStatus;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::io::unix::AsyncFd;

/// A running script: its process (the leader of its own group) and how its
/// exit is noticed. Dropped before it was waited for (the run's future
/// dropped mid-script), it kills the whole group, as `kill_on_drop` did.
pub(super) struct ScriptChild {
    child: std::process::Child,
    pgid: i32,
    /// `None` only while being spawned.
    exit: Option<Exit>,
    status: Option<ExitStatus>,
}

/// How the exit is noticed.
enum Exit {
    /// The pidfd turns readable when the process exits (Linux 5.3 and later).
    Pidfd(AsyncFd<OwnedFd>),
    /// No pidfd (an older kernel, or a seccomp filter refusing it): every
    /// SIGCHLD. The listener is made after the spawn; an exit before it
    /// existed is still seen, because `wait` asks the process first.
    Signal(tokio::signal::unix::Signal),
}

impl ScriptChild {
    /// Spawns `cmd` (whose `process_group(0)` makes the child its group's
    /// leader).
    pub(super) fn spawn(cmd: &mut std::process::Command) -> std::io::Result<ScriptChild> {
        let child = cmd.spawn()?;
        let pgid = i32::try_from(child.id()).unwrap_or(0);
        let pidfd = rustix::process::Pid::from_raw(pgid)
            .ok_or(rustix::io::Errno::SRCH)
            .and_then(|pid| rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::NONBLOCK))
            .map_err(std::io::Error::from)
            .and_then(watch_pidfd);
        let mut spawned = ScriptChild {
            child,
            pgid,
            exit: None,
            status: None,
        };
        spawned.exit = Some(match pidfd {
            Ok(fd) => Exit::Pidfd(fd),
            // Made after the spawn, yet nothing is missed (see `wait`).
            Err(_) => Exit::Signal(tokio::signal::unix::signal(
                tokio::signal::unix::SignalKind::child(),
            )?),
        });
        Ok(spawned)
    }

    /// The process group (the child's own pid).
    pub(super) fn pgid(&self) -> i32 {
        self.pgid
    }

    /// Waits for the process to exit and reaps it; cancel-safe (a wait
    /// dropped midway leaves nothing half-done).
    pub(super) async fn wait(&mut self) -> std::io::Result<ExitStatus> {
        loop {
            if let Some(status) = self.status {
                return Ok(status);
            }
            match &mut self.exit {
                None => return Err(std::io::Error::other("the script is not being waited for")),
                // A pidfd is registered edge-triggered, and one whose
                // process already exited reports that at once: the process
                // is asked only once it says so. Readiness is cleared while
                // the process runs on (a spurious wake-up), so that the next
                // wait is for the next edge.
                Some(Exit::Pidfd(fd)) => {
                    let mut ready = fd.readable().await?;
                    match self.child.try_wait()? {
                        Some(status) => self.status = Some(status),
                        None => ready.clear_ready(),
                    }
                }
                // Asked first, then waited for: an exit before the listener
                // existed is seen by the asking.
                Some(Exit::Signal(signal)) => match self.child.try_wait()? {
                    Some(status) => self.status = Some(status),
                    None => {
                        if signal.recv().await.is_none() {
                            return Err(std::io::Error::other("the SIGCHLD listener ended"));
                        }
                    }
                },
            }
        }
    }

    /// SIGKILL to the whole group, and the child reaped if it is already
    /// gone (a zombie left otherwise is reaped when the runner exits).
    fn kill_now(&mut self) {
        if self.status.is_none() {
            signal_group(self.pgid, Signal::SIGKILL);
            if let Ok(Some(status)) = self.child.try_wait() {
                self.status = Some(status);
            }
        }
    }
}

impl Drop for ScriptChild {
    fn drop(&mut self) {
        self.kill_now();
    }
}

/// Registers `pidfd` with the runtime. `AsyncFd::new` is deprecated because
/// for a `T` that does not own its descriptor the descriptor could be
/// closed, and its number reused, while still registered; an `OwnedFd` is
/// owned by the `AsyncFd`, which deregisters it before closing it, so that
/// cannot happen here. (Its replacement, `AsyncFd::register`, is `unsafe`,
/// which the workspace forbids.)
#[allow(deprecated)]
fn watch_pidfd(pidfd: OwnedFd) -> std::io::Result<AsyncFd<OwnedFd>> {
    AsyncFd::new(pidfd)
}

/// Sends `signal` to the process group `pgid`.
pub(super) fn signal_group(pgid: i32, signal: Signal) {
    // ESRCH (the group is gone) is the expected outcome after a clean exit.
    let _ = killpg(Pid::from_raw(pgid), signal);
}

#[cfg(test)]
mod tests {
    use std::os::unix::process::CommandExt;
    use std::time::{Duration, Instant};

    use super::ScriptChild;

    /// The members of process group `pgid` that have not exited (zombies
    /// have), read from `/proc`.
    fn live_members(pgid: i32) -> Vec<i32> {
        let mut live = Vec::new();
        for entry in std::fs::read_dir("/proc").unwrap().flatten() {
            let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
                continue;
            };
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                continue;
            };
            // After the command name, which is in parentheses and may hold
            // spaces: state, parent, group.
            let Some((_, rest)) = stat.rsplit_once(')') else {
                continue;
            };
            let fields: Vec<&str> = rest.split_whitespace().collect();
            let group = fields.get(2).and_then(|g| g.parse::<i32>().ok());
            if group == Some(pgid) && !matches!(fields[0], "Z" | "X") {
                live.push(pid);
            }
        }
        live
    }

    /// Waits until `pgid` has `want(count)` live members, or panics naming `what`.
    fn wait_for_members(pgid: i32, want: impl Fn(usize) -> bool, what: &str) {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let live = live_members(pgid);
            if want(live.len()) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{what}: group {pgid} has {live:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    #[tokio::test]
    async fn a_script_dropped_before_its_exit_is_killed_with_its_whole_group() {
        let mut cmd = std::process::Command::new("/bin/sh");
        cmd.args(["-c", "sleep 300 & sleep 300; wait"])
            .process_group(0);
        let child = ScriptChild::spawn(&mut cmd).unwrap();
        let pgid = child.pgid();
        wait_for_members(
            pgid,
            |n| n == 3,
            "the shell and its two sleeps never all started",
        );
        drop(child);
        wait_for_members(
            pgid,
            |n| n == 0,
            "a member of the dropped script's group is still alive",
        );
    }
}
