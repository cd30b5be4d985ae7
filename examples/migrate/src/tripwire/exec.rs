//! Running the real cluster command as if it had been exec'd: same argv,
//! stdin and stdout passed through untouched, stderr streamed through as it
//! arrives while its beginning and end are kept for the report.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// Bytes of stderr kept from the start of the output, and from its end.
const KEEP_HEAD: usize = 64 * 1024;
const KEEP_TAIL: usize = 4 * 1024;
/// How long to keep reading stderr after the command exited (a process it
/// left behind may hold the pipe open).
const DRAIN: Duration = Duration::from_secs(2);

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
pub fn run(real: &Path, argv: &[String], input: Input<'_>) -> std::io::Result<Ran> {
    use std::os::unix::process::{CommandExt, ExitStatusExt};
    let mut cmd = Command::new(real);
    if let Some(name) = argv.first() {
        cmd.arg0(name);
    }
    cmd.args(argv.iter().skip(1))
        .stdout(Stdio::inherit())
        .stderr(Stdio::piped());
    cmd.stdin(match input {
        Input::Inherit => Stdio::inherit(),
        Input::Bytes(_) => Stdio::piped(),
    });
    // Signals sent to the shim (`kill $!` of a background call, Ctrl-C)
    // reach the real command: block them here and forward them from a
    // thread. The child starts with an empty mask (std resets it).
    let forwarded = forwarded_signals();
    let blocked = forwarded.thread_block().is_ok();
    let mut child = cmd.spawn()?;
    if blocked && let Ok(pid) = i32::try_from(child.id()) {
        let pid = nix::unistd::Pid::from_raw(pid);
        std::thread::spawn(move || {
            while let Ok(signal) = forwarded.wait() {
                let _ = nix::sys::signal::kill(pid, signal);
            }
        });
    }
    let feeder = match (input, child.stdin.take()) {
        (Input::Bytes(bytes), Some(mut stdin)) => {
            let bytes = bytes.to_vec();
            Some(std::thread::spawn(move || {
                // A command that stops reading early is its own business.
                let _ = stdin.write_all(&bytes);
            }))
        }
        _ => None,
    };
    let capture = Arc::new(Mutex::new(Capture::default()));
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let reader = child.stderr.take().map(|mut pipe| {
        let capture = capture.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 8192];
            let mut out = std::io::stderr();
            loop {
                match pipe.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        // Our stderr closed is no reason to stop the command.
                        let _ = out.write_all(&buf[..n]);
                        capture
                            .lock()
                            .unwrap_or_else(PoisonError::into_inner)
                            .push(&buf[..n]);
                    }
                }
            }
            let _ = done_tx.send(());
        })
    });
    let status = child.wait()?;
    if reader.is_some() {
        let _ = done_rx.recv_timeout(DRAIN);
    }
    if let Some(f) = feeder {
        let _ = f.join();
    }
    let stderr = capture
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .text();
    Ok(Ran {
        status: status.code(),
        signal: status.signal(),
        stderr,
    })
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
