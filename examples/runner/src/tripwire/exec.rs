//! Running the real cluster command as if it had been exec'd: same argv,
//! stdin and stdout passed through untouched, stderr streamed through as it
//! arrives while its beginning and end are kept for the report.

use std::io::{Read, Write};
use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::signal::{SigSet, SigmaskHow};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;

/// Bytes of stderr kept from the start of the output, and from its end.
const KEEP_HEAD: usize = 64 * 1024;
const KEEP_TAIL: usize = 4 * 1024;
/// How long to keep reading stderr after the command exited (a process it
/// left behind may hold the pipe open).
const DRAIN: Duration = Duration::from_secs(2);
/// Longest wait, in milliseconds, between checks that the command exited.
const EXIT_CHECK_MS: u16 = 100;

/// What one execution did.
#[derive(Debug, Clone, Default)]
pub struct Ran {
    /// The exit status, if it exited.
    pub status: Option<i32>,
    /// The signal that killed it, if one did.
    pub signal: Option<i32>,
    /// The stderr text kept (head, and tail if it was long).
    pub stderr: String,
}

impl Ran {
    /// The call a shell would make of a command it could not start: `status`
    /// (127: not found, 126: not runnable) with `message` as its stderr,
    /// which is also printed to this process's stderr, where the script
    /// sees it.
    pub fn refused(status: i32, message: String) -> Self {
        eprintln!("{message}");
        Ran {
            status: Some(status),
            signal: None,
            stderr: message,
        }
    }

    /// Exit status 0.
    pub fn success(&self) -> bool {
        self.status == Some(0)
    }

    /// The status a shell would report for it (128 + signal when killed).
    pub fn shell_status(&self) -> i32 {
        match (self.status, self.signal) {
            (Some(s), _) => s,
            (None, Some(sig)) => 128 + sig,
            _ => 126,
        }
    }
}

#[derive(Default)]
struct Capture {
    head: Vec<u8>,
    tail: Vec<u8>,
    cut: bool,
}

impl Capture {
    fn push(&mut self, chunk: &[u8]) {
        let room = KEEP_HEAD.saturating_sub(self.head.len());
        let (h, rest) = chunk.split_at(room.min(chunk.len()));
        self.head.extend_from_slice(h);
        if !rest.is_empty() {
            self.cut = true;
            self.tail.extend_from_slice(rest);
            if self.tail.len() > KEEP_TAIL {
                let drop = self.tail.len() - KEEP_TAIL;
                self.tail.drain(..drop);
            }
        }
    }

    fn text(&self) -> String {
        let mut text = String::from_utf8_lossy(&self.head).into_owned();
        if self.cut {
            text.push_str("\n…\n");
            text.push_str(&String::from_utf8_lossy(&self.tail));
        }
        text
    }
}

/// Where stdin comes from.
pub enum Input<'a> {
    /// The caller's own stdin, passed through.
    Inherit,
    /// These bytes (replayed on every retry).
    Bytes(&'a [u8]),
}

/// Runs `real` with `argv[1..]`, `argv[0]` as its program name, streaming
/// its stderr to ours.
///
/// One thread does all the waiting: the command's stderr, the signals to
/// forward to it and its exit (SIGCHLD) are polled together. Every extra
/// thread is another wake-up a loaded machine makes the calling script wait
/// for, on every cluster-command call.
pub fn run(real: &Path, argv: &[String], input: Input<'_>) -> std::io::Result<Ran> {
    use nix::sys::signal::Signal;
    // Signals sent to the shim (`kill $!` of a background call, Ctrl-C)
    // reach the real command: they are blocked here and read from a
    // descriptor, then forwarded. Blocked before the spawn, so none is
    // lost in between; the command itself starts with the mask the shim
    // was started with, as if the shim had exec'd it.
    let signals = Signals::block()?;
    let (err_read, err_write) = std::io::pipe()?;
    let stdin = match input {
        Input::Inherit => None,
        Input::Bytes(bytes) => Some((std::io::pipe()?, bytes)),
    };
    let pid = spawn(
        real,
        argv,
        &signals.previous,
        err_write.as_raw_fd(),
        stdin.as_ref().map(|((r, _), _)| r.as_raw_fd()),
    )?;
    drop(err_write);
    let feeder = stdin.map(|((r, mut w), bytes)| {
        drop(r);
        let bytes = bytes.to_vec();
        std::thread::spawn(move || {
            // A command that stops reading early is its own business.
            let _ = w.write_all(&bytes);
        })
    });
    let mut capture = Capture::default();
    let mut pipe = Some(err_read);
    let mut out = std::io::stderr();
    let mut buf = [0u8; 8192];
    let mut exited: Option<(CommandExit, Instant)> = None;
    loop {
        if exited.is_none()
            && let Some(ended) = try_wait(pid)?
        {
            exited = Some((ended, Instant::now()));
        }
        let timeout = match (&exited, &pipe) {
            // SIGCHLD wakes the loop when the command exits; the bound only
            // matters where another thread took the signal (a test harness
            // calling this in-process).
            (None, _) => PollTimeout::from(EXIT_CHECK_MS),
            (Some(_), None) => break,
            (Some((_, at)), Some(_)) => match DRAIN.checked_sub(at.elapsed()) {
                Some(left) if !left.is_zero() => {
                    PollTimeout::try_from(left).unwrap_or(PollTimeout::MAX)
                }
                // A process the command left behind holds the pipe open.
                _ => break,
            },
        };
        let (signalled, readable) = {
            let mut fds = vec![PollFd::new(signals.fd.as_fd(), PollFlags::POLLIN)];
            if let Some(p) = &pipe {
                fds.push(PollFd::new(p.as_fd(), PollFlags::POLLIN));
            }
            match poll(&mut fds, timeout) {
                Ok(_) | Err(Errno::EINTR) => {}
                Err(e) => return Err(e.into()),
            }
            let ready = |f: &PollFd<'_>| f.revents().is_some_and(|r| !r.is_empty());
            (ready(&fds[0]), fds.get(1).is_some_and(ready))
        };
        if signalled {
            while let Ok(Some(info)) = signals.fd.read_signal() {
                let forward = i32::try_from(info.ssi_signo)
                    .ok()
                    .and_then(|n| Signal::try_from(n).ok())
                    .filter(|s| *s != Signal::SIGCHLD);
                if let Some(signal) = forward
                    && exited.is_none()
                {
                    let _ = nix::sys::signal::kill(pid, signal);
                }
            }
        }
        if readable && let Some(p) = pipe.as_mut() {
            match p.read(&mut buf) {
                Ok(0) => pipe = None,
                Ok(n) => {
                    // Our stderr closed is no reason to stop the command.
                    let _ = out.write_all(&buf[..n]);
                    capture.push(&buf[..n]);
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => pipe = None,
            }
        }
    }
    let Some((ended, _)) = exited else {
        unreachable!("the loop ends only after the command exited")
    };
    if let Some(f) = feeder {
        let _ = f.join();
    }
    drop(signals);
    Ok(Ran {
        status: ended.status,
        signal: ended.signal,
        stderr: capture.text(),
    })
}

/// How the command ended.
struct CommandExit {
    status: Option<i32>,
    signal: Option<i32>,
}

fn try_wait(pid: Pid) -> std::io::Result<Option<CommandExit>> {
    loop {
        return match waitpid(pid, Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::Exited(_, code)) => Ok(Some(CommandExit {
                status: Some(code),
                signal: None,
            })),
            Ok(WaitStatus::Signaled(_, signal, _)) => Ok(Some(CommandExit {
                status: None,
                signal: Some(signal as i32),
            })),
            Ok(_) => Ok(None),
            Err(Errno::EINTR) => continue,
            Err(e) => Err(e.into()),
        };
    }
}

/// Starts `real` with stderr on `stderr` and stdin on `stdin` (or ours),
/// stdout ours, our environment, signal `mask`, and SIGPIPE back to its
/// default (the shim, like every Rust program, ignores it).
fn spawn(
    real: &Path,
    argv: &[String],
    mask: &SigSet,
    stderr: RawFd,
    stdin: Option<RawFd>,
) -> std::io::Result<Pid> {
    use nix::spawn::{PosixSpawnAttr, PosixSpawnFileActions, PosixSpawnFlags, posix_spawn};
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    let c = |bytes: &[u8]| CString::new(bytes).map_err(std::io::Error::other);
    let program = c(real.as_os_str().as_bytes())?;
    let args = argv
        .iter()
        .map(|a| c(a.as_bytes()))
        .collect::<Result<Vec<_>, _>>()?;
    let env = std::env::vars_os()
        .map(|(k, v)| {
            let mut kv = k.as_bytes().to_vec();
            kv.push(b'=');
            kv.extend_from_slice(v.as_bytes());
            c(&kv)
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut actions = PosixSpawnFileActions::init()?;
    actions.add_dup2(stderr, 2)?;
    if let Some(fd) = stdin {
        actions.add_dup2(fd, 0)?;
    }
    let mut attr = PosixSpawnAttr::init()?;
    attr.set_sigmask(mask)?;
    let mut default = SigSet::empty();
    default.add(nix::sys::signal::Signal::SIGPIPE);
    attr.set_sigdefault(&default)?;
    attr.set_flags(
        PosixSpawnFlags::POSIX_SPAWN_SETSIGMASK | PosixSpawnFlags::POSIX_SPAWN_SETSIGDEF,
    )?;
    Ok(posix_spawn(
        program.as_c_str(),
        &actions,
        &attr,
        &args,
        &env,
    )?)
}

/// The forwarded signals and SIGCHLD, blocked and readable from one
/// descriptor while a command runs; the previous mask comes back on drop,
/// so a signal that arrives after the command ended is the caller's again.
struct Signals {
    fd: SignalFd,
    previous: SigSet,
}

impl Signals {
    fn block() -> std::io::Result<Self> {
        let mut set = forwarded_signals();
        set.add(nix::sys::signal::Signal::SIGCHLD);
        let previous = set.thread_swap_mask(SigmaskHow::SIG_BLOCK)?;
        match SignalFd::with_flags(&set, SfdFlags::SFD_NONBLOCK | SfdFlags::SFD_CLOEXEC) {
            Ok(fd) => Ok(Signals { fd, previous }),
            Err(e) => {
                let _ = previous.thread_set_mask();
                Err(e.into())
            }
        }
    }
}

impl Drop for Signals {
    fn drop(&mut self) {
        let _ = self.previous.thread_set_mask();
    }
}

fn forwarded_signals() -> nix::sys::signal::SigSet {
    use nix::sys::signal::{SigSet, Signal};
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

/// True when `candidate` is the same file as `exe` (a shim pointing back at
/// the migrate binary).
pub fn same_file(candidate: &Path, exe: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(candidate), std::fs::metadata(exe)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

/// The first executable `name` on `path` that is not `exclude` (the
/// migrate binary: a shim must never find itself).
pub fn search_path(name: &str, path: &str, exclude: Option<&Path>) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    path.split(':')
        .filter(|d| !d.is_empty() && d.starts_with('/'))
        .map(|d| Path::new(d).join(name))
        .find(|c| {
            std::fs::metadata(c).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
                && exclude.is_none_or(|e| !same_file(c, e))
        })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn sh(script: &str) -> Ran {
        let argv = ["sh", "-c", script].map(String::from);
        run(Path::new("/bin/sh"), &argv, Input::Inherit).unwrap()
    }

    #[test]
    fn the_command_starts_with_no_signal_blocked() {
        // The shim blocks the forwarded signals and SIGCHLD while it waits;
        // a command inheriting that mask would ignore Ctrl-C and lose its
        // own children's exits.
        // Not through a shell: dash clears its mask when it starts, which
        // would hide an inherited one. dd leaves the mask as it found it.
        let argv = [
            "dd",
            "if=/proc/self/status",
            "of=/dev/stderr",
            "status=none",
        ]
        .map(String::from);
        let ran = run(Path::new("/bin/dd"), &argv, Input::Inherit).unwrap();
        assert!(ran.success(), "{ran:?}");
        let blocked = ran.stderr.lines().find(|l| l.starts_with("SigBlk:"));
        assert_eq!(blocked, Some("SigBlk:\t0000000000000000"), "{}", ran.stderr);
    }

    #[test]
    fn stderr_is_kept_and_the_exit_status_reported() {
        let ran = sh("echo first >&2; echo second >&2; exit 3");
        assert_eq!(ran.status, Some(3));
        assert_eq!(ran.signal, None);
        assert_eq!(ran.stderr, "first\nsecond\n");
        assert_eq!(ran.shell_status(), 3);
    }

    #[test]
    fn a_command_killed_by_a_signal_reports_it_as_a_shell_would() {
        let ran = sh("kill -KILL $$");
        assert_eq!(ran.status, None);
        assert_eq!(ran.signal, Some(9));
        assert_eq!(ran.shell_status(), 137);
    }

    #[test]
    fn a_command_that_closes_stderr_early_is_still_waited_for() {
        let ran = sh("exec 2>&-; sleep 0.3; exit 4");
        assert_eq!(ran.status, Some(4));
        assert_eq!(ran.stderr, "");
    }

    #[test]
    fn bytes_given_as_input_reach_the_command() {
        let argv = ["sh", "-c", "cat >&2"].map(String::from);
        let ran = run(Path::new("/bin/sh"), &argv, Input::Bytes(b"replayed\n")).unwrap();
        assert!(ran.success(), "{ran:?}");
        assert_eq!(ran.stderr, "replayed\n");
    }

    #[test]
    fn the_callers_signal_mask_is_restored_afterwards() {
        use nix::sys::signal::{SigSet, Signal};
        let before = SigSet::thread_get_mask().unwrap();
        let _ = sh("exit 0");
        let after = SigSet::thread_get_mask().unwrap();
        for s in [Signal::SIGTERM, Signal::SIGINT, Signal::SIGCHLD] {
            assert_eq!(before.contains(s), after.contains(s), "{s:?}");
        }
    }
}
