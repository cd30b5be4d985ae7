//! `migrate-supervise`: the script's parent, so that the script's process
//! group never outlives its runner.
//!
//! ```text
//! migrate-supervise RUNNER_PID GRACE_MS -- INTERPRETER [ARG...]
//! ```
//!
//! The runner starts each script through this small process (the
//! [`SHIM_BINARY`](super::SHIM_BINARY) under another `argv[0]`), in the
//! process group the runner made for the script; the supervisor starts the
//! interpreter in that same group, waits for it and exits with its status
//! (or dies of the same signal). If the runner dies meanwhile, even of
//! SIGKILL, which no handler sees, the supervisor notices (it polls its
//! parent pid every 0.1 s: the parent changes when the runner is gone) and
//! stops the group: SIGTERM, then SIGKILL after GRACE_MS. So a re-run
//! started after the lock expired never races a survivor of the last run.
//!
//! Signals sent to the whole group by the runner (SIGTERM on timeout or
//! interrupt) reach the script directly; the supervisor blocks them and
//! keeps waiting, so the runner still sees how the script ended.

use std::os::unix::process::ExitStatusExt;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use nix::sys::signal::{SigSet, Signal, killpg};
use nix::unistd::{Pid, getpgrp, getppid};

/// The `argv[0]` the runner gives the shim binary to make it the supervisor.
pub const NAME: &str = "migrate-supervise";

/// How often the parent pid is checked.
const POLL: Duration = Duration::from_millis(100);

/// Exit status when the supervisor could not run the script at all.
pub const CANNOT_RUN: i32 = 125;

static STOPPING: AtomicBool = AtomicBool::new(false);

/// Parsed arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Args {
    /// The runner's pid: while it is our parent, the runner is alive.
    pub runner: i32,
    /// Time between SIGTERM and SIGKILL of the group once the runner died.
    pub grace: Duration,
    /// The interpreter and its arguments.
    pub command: Vec<String>,
}

/// Parses `RUNNER_PID GRACE_MS -- COMMAND...`.
pub fn parse(args: &[String]) -> Result<Args, String> {
    let [runner, grace, dashes, command @ ..] = args else {
        return Err("usage: migrate-supervise RUNNER_PID GRACE_MS -- COMMAND [ARG...]".into());
    };
    let runner = runner
        .parse::<i32>()
        .ok()
        .filter(|p| *p > 1)
        .ok_or_else(|| format!("RUNNER_PID {runner:?}: expected a process id above 1"))?;
    let grace = grace
        .parse::<u64>()
        .map(Duration::from_millis)
        .map_err(|_| format!("GRACE_MS {grace:?}: expected whole milliseconds"))?;
    if dashes != "--" || command.is_empty() {
        return Err("expected -- and the command to supervise".into());
    }
    Ok(Args {
        runner,
        grace,
        command: command.to_vec(),
    })
}

fn group_signals() -> SigSet {
    let mut set = SigSet::empty();
    for s in [
        Signal::SIGTERM,
        Signal::SIGINT,
        Signal::SIGHUP,
        Signal::SIGQUIT,
    ] {
        set.add(s);
    }
    set
}

fn runner_gone(runner: i32) -> bool {
    getppid() != Pid::from_raw(runner)
}

/// Stops the whole group (the script, what it started, and us): SIGTERM,
/// then SIGKILL after `grace`. Only the first caller does it.
fn stop_group(grace: Duration) {
    if STOPPING.swap(true, Ordering::SeqCst) {
        return;
    }
    let group = getpgrp();
    let _ = killpg(group, Signal::SIGTERM);
    std::thread::sleep(grace);
    let _ = killpg(group, Signal::SIGKILL);
}

/// The supervisor's main: returns the exit status (or does not return,
/// when the script died of a signal: it dies of the same one).
pub fn main(raw: Vec<String>) -> i32 {
    let args = match parse(&raw) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{NAME}: {e}");
            return CANNOT_RUN;
        }
    };
    // Blocked, never taken: the runner's group signals (SIGTERM on timeout
    // or interrupt) are for the script, and the supervisor must outlive it
    // to report how it ended. The script starts with an empty mask (std
    // resets it in the child).
    let _ = group_signals().thread_block();
    if runner_gone(args.runner) {
        // The runner died before we could watch it: run nothing.
        eprintln!(
            "{NAME}: the runner (pid {}) is gone; not starting the script",
            args.runner
        );
        return CANNOT_RUN;
    }
    let (grace, runner) = (args.grace, args.runner);
    // One thread polling the parent pid: a runner killed by SIGKILL runs
    // no handler, and the kernel's parent-death signal follows the
    // runner's *thread*, not the process, so polling is what holds.
    std::thread::spawn(move || {
        loop {
            std::thread::sleep(POLL);
            if runner_gone(runner) {
                stop_group(grace);
            }
        }
    });
    let (program, rest) = match args.command.split_first() {
        Some(split) => split,
        None => return CANNOT_RUN,
    };
    let status = match Command::new(program).args(rest).status() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("{NAME}: cannot start {program}: {e}");
            return CANNOT_RUN;
        }
    };
    if STOPPING.load(Ordering::SeqCst) {
        // Whatever the script left in the group goes with us.
        let _ = killpg(getpgrp(), Signal::SIGKILL);
    }
    if let Some(code) = status.code() {
        return code;
    }
    if let Some(sig) = status.signal().and_then(|s| Signal::try_from(s).ok()) {
        // Die of the same signal, so the runner reports `signal-N` as it
        // would for the script itself: default disposition, unblocked.
        let mut all = SigSet::empty();
        all.add(sig);
        let _ = all.thread_unblock();
        let _ = nix::sys::signal::raise(sig);
        return 128 + sig as i32;
    }
    CANNOT_RUN
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn arguments_name_the_runner_the_grace_and_the_command() {
        assert_eq!(
            parse(&strings(&["4242", "1500", "--", "/bin/sh", "-e", "x"])).unwrap(),
            Args {
                runner: 4242,
                grace: Duration::from_millis(1500),
                command: strings(&["/bin/sh", "-e", "x"]),
            }
        );
        for bad in [
            &["4242", "1500", "/bin/sh"][..],
            &["1", "0", "--", "sh"],
            &["x", "0", "--", "sh"],
            &["4242", "-1", "--", "sh"],
            &["4242", "0", "--"],
        ] {
            assert!(parse(&strings(bad)).is_err(), "{bad:?}");
        }
    }
}
