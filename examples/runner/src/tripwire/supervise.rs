//! `migrate-supervise`: one small process per run that makes sure no
//! script's process group outlives the runner.
//!
//! ```text
//! migrate-supervise RUNNER_PID GRACE_MS [DIR...]      (stdin: the runner's pipe)
//! ```
//!
//! The runner starts it once per run, when it arms the tripwire (the
//! [`SHIM_BINARY`](super::SHIM_BINARY) under another `argv[0]`, in a
//! process group of its own), and tells it on a pipe which process groups
//! are running scripts: `+PGID` right after a script is spawned, `-PGID`
//! once its group has been killed. The runner's end of the pipe closes when
//! the runner exits, however it exits (SIGKILL included: the kernel closes
//! the descriptors of a dead process), so end of input is the signal: the
//! supervisor gives every group still listed SIGTERM, waits up to GRACE_MS
//! for them to go, SIGKILLs what is left, removes the run's private
//! directories (each `DIR`: the shims' and the reports') and exits. A run
//! that ends normally has released every group, so the supervisor only
//! removes the directories, which the runner would have removed itself;
//! one killed by SIGKILL would otherwise leave them behind, one pair per
//! run (the reports' on `/dev/shm`, which is memory).
//!
//! One process per run instead of one parent per script: a supervisor in
//! front of every script cost about 1 ms of CPU per script (a process
//! start), more than arming the tripwire once saves. The window this
//! leaves is the instant between a script's spawn and its `+PGID` line: a
//! runner killed in exactly that instant leaves that one script running.

use std::collections::BTreeSet;
use std::io::Read;
use std::os::fd::AsFd;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::{Pid, getppid};

/// The `argv[0]` the runner gives the shim binary to make it the supervisor.
pub const NAME: &str = "migrate-supervise";

/// How often the groups are checked while waiting for them to go.
const POLL: Duration = Duration::from_millis(20);

/// Exit status for bad arguments.
pub const USAGE_ERROR: i32 = 2;

/// Parsed arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Args {
    /// The runner's pid (our parent while the runner lives).
    pub runner: i32,
    /// Time between SIGTERM and SIGKILL of the groups once the runner died.
    pub grace: Duration,
    /// The run's private directories, removed at the end.
    pub dirs: Vec<PathBuf>,
}

/// What the name of every directory the supervisor removes starts with: it
/// removes the tripwire's own directories and nothing else, whatever it is
/// given.
pub const DIR_PREFIX: &str = "migrate-tripwire-";

/// Parses `RUNNER_PID GRACE_MS [DIR...]`; each `DIR` must be an absolute
/// path whose name starts with [`DIR_PREFIX`].
pub fn parse(args: &[String]) -> Result<Args, String> {
    let [runner, grace, dirs @ ..] = args else {
        return Err(
            "usage: migrate-supervise RUNNER_PID GRACE_MS [DIR...] (the runner starts it)".into(),
        );
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
    let dirs = dirs
        .iter()
        .map(|d| {
            let path = PathBuf::from(d);
            let ours = path.is_absolute()
                && path
                    .file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with(DIR_PREFIX));
            ours.then_some(path).ok_or_else(|| {
                format!("DIR {d:?}: expected an absolute path named {DIR_PREFIX}...")
            })
        })
        .collect::<Result<_, _>>()?;
    Ok(Args {
        runner,
        grace,
        dirs,
    })
}

/// One line of the runner's pipe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Line {
    /// `+PGID`: the group runs a script.
    Watch(i32),
    /// `-PGID`: the group is over.
    Release(i32),
    /// `=NANOS`: the run's lease deadline on `CLOCK_BOOTTIME`
    /// (super::lease).
    Lease(u64),
}

/// Parses one line of the runner's pipe.
pub fn line(text: &str) -> Option<Line> {
    let (kind, rest) = text.trim_end().split_at_checked(1)?;
    if kind == "=" {
        return rest
            .bytes()
            .all(|b| b.is_ascii_digit())
            .then(|| rest.parse().ok())
            .flatten()
            .map(Line::Lease);
    }
    let pgid = rest
        .bytes()
        .all(|b| b.is_ascii_digit())
        .then(|| rest.parse::<i32>().ok())
        .flatten()
        .filter(|p| *p > 1)?;
    match kind {
        "+" => Some(Line::Watch(pgid)),
        "-" => Some(Line::Release(pgid)),
        _ => None,
    }
}

/// Acts on one line of the runner's pipe (without its newline).
fn heed(text: &str, groups: &mut BTreeSet<i32>, lease: &mut u64) {
    match line(text) {
        Some(Line::Watch(g)) => {
            groups.insert(g);
        }
        Some(Line::Release(g)) => {
            groups.remove(&g);
        }
        Some(Line::Lease(until)) => *lease = until,
        None => eprintln!("{NAME}: ignoring {text:?} on the runner's pipe"),
    }
}

/// Waits up to `within` for `pipe` to have something to read (or to reach
/// its end); `false` when the time ran out first, or a signal interrupted
/// the wait (the caller checks the deadline and waits again). An error
/// means the pipe cannot be waited for: as at its end.
fn readable(pipe: &std::fs::File, within: Duration) -> nix::Result<bool> {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    // Rounded up to the next millisecond: waking before the deadline would
    // only wait again.
    let within = Duration::from_millis(
        u64::try_from(within.as_nanos().div_ceil(1_000_000)).unwrap_or(u64::MAX),
    );
    let timeout = PollTimeout::try_from(within).unwrap_or(PollTimeout::MAX);
    let mut fds = [PollFd::new(pipe.as_fd(), PollFlags::POLLIN)];
    match poll(&mut fds, timeout) {
        Ok(n) => Ok(n > 0),
        Err(nix::errno::Errno::EINTR) => Ok(false),
        Err(e) => Err(e),
    }
}

fn alive(pgid: i32) -> bool {
    killpg(Pid::from_raw(pgid), None).is_ok()
}

/// SIGTERM to every group, then SIGKILL to what is left after `grace`, or
/// at the lease deadline `lease` if that comes first.
fn stop(groups: &BTreeSet<i32>, grace: Duration, lease: u64) {
    for g in groups {
        let _ = killpg(Pid::from_raw(*g), Signal::SIGTERM);
    }
    let deadline = Instant::now() + grace;
    while Instant::now() < deadline
        && super::lease::now() < lease
        && groups.iter().any(|g| alive(*g))
    {
        std::thread::sleep(POLL);
    }
    for g in groups {
        let _ = killpg(Pid::from_raw(*g), Signal::SIGKILL);
    }
}

/// The supervisor's main: reads the runner's pipe to its end, then stops
/// what is still listed. Returns the exit status.
pub fn main(raw: Vec<String>) -> i32 {
    let args = match parse(&raw) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{NAME}: {e}");
            return USAGE_ERROR;
        }
    };
    if getppid() != Pid::from_raw(args.runner) {
        eprintln!(
            "{NAME}: started by pid {}, not by the runner (pid {})",
            getppid(),
            args.runner
        );
        return USAGE_ERROR;
    }
    // One thread waits for the pipe and the lease deadline at once (`poll`
    // with a timeout), so the deadline is kept while no line comes (the
    // runner frozen, or killed). A reader thread handing lines over a
    // channel cost two thread wake-ups per line, four per script (issue 34).
    let mut pipe = match std::io::stdin().as_fd().try_clone_to_owned() {
        Ok(fd) => std::fs::File::from(fd),
        Err(e) => {
            // Before any group: the runner's first line then finds the pipe
            // closed and runs no script unsupervised.
            eprintln!("{NAME}: cannot read the runner's pipe: {e}");
            return USAGE_ERROR;
        }
    };
    let mut groups = BTreeSet::new();
    // No deadline until the runner gives one (it does before any group).
    let mut lease = u64::MAX;
    // Bytes read and not yet a whole line.
    let mut pending: Vec<u8> = Vec::new();
    let mut chunk = [0u8; 4096];
    'pipe: loop {
        while let Some(at) = pending.iter().position(|b| *b == b'\n') {
            let bytes: Vec<u8> = pending.drain(..=at).collect();
            // Not text: the pipe is not the runner's; as at its end.
            let Ok(text) = std::str::from_utf8(&bytes[..at]) else {
                break 'pipe;
            };
            heed(text, &mut groups, &mut lease);
        }
        let left = Duration::from_nanos(lease.saturating_sub(super::lease::now()));
        let Ok(ready) = readable(&pipe, left.min(Duration::from_secs(3600))) else {
            break;
        };
        if !ready {
            if super::lease::now() >= lease {
                // The lease can no longer be proved live: nothing the
                // run started may go on (CONTRACT.md §5.5).
                for g in std::mem::take(&mut groups) {
                    let _ = killpg(Pid::from_raw(g), Signal::SIGKILL);
                }
                lease = u64::MAX;
            }
            continue;
        }
        match pipe.read(&mut chunk) {
            Ok(0) => {
                // A last line without its newline still counts.
                if let Ok(text) = std::str::from_utf8(&pending)
                    && !text.is_empty()
                {
                    heed(text, &mut groups, &mut lease);
                }
                break;
            }
            Ok(n) => pending.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    if !groups.is_empty() {
        stop(&groups, args.grace, lease);
    }
    for dir in &args.dirs {
        // Gone already when the runner removed it; anything else is worth
        // a line, but changes nothing of the run's outcome.
        match std::fs::remove_dir_all(dir) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                eprintln!("{NAME}: cannot remove {}: {e}", dir.display());
            }
            _ => {}
        }
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn arguments_name_the_runner_and_the_grace() {
        assert_eq!(
            parse(&strings(&["4242", "1500"])).unwrap(),
            Args {
                runner: 4242,
                grace: Duration::from_millis(1500),
                dirs: Vec::new(),
            }
        );
        assert_eq!(
            parse(&strings(&["4242", "0", "/tmp/migrate-tripwire-aB3"]))
                .unwrap()
                .dirs,
            [PathBuf::from("/tmp/migrate-tripwire-aB3")]
        );
        for bad in [
            &["4242"][..],
            &["1", "0"],
            &["x", "0"],
            &["4242", "-1"],
            &["4242", "0", "x"],
            &["4242", "0", "/"],
            &["4242", "0", "/home/someone"],
            &["4242", "0", "migrate-tripwire-relative"],
        ] {
            assert!(parse(&strings(bad)).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn pipe_lines_watch_and_release_groups_and_set_the_lease() {
        assert_eq!(line("+123\n"), Some(Line::Watch(123)));
        assert_eq!(line("-123"), Some(Line::Release(123)));
        assert_eq!(line("=5000000000\n"), Some(Line::Lease(5_000_000_000)));
        for bad in [
            "", "123", "+", "+1", "+-5", "*5", "+12x", "=", "=-1", "=1x", "=+1",
        ] {
            assert_eq!(line(bad), None, "{bad:?}");
        }
    }
}
