//! Arming the tripwire: once per run, and a fresh report per script.
//!
//! [`Tripwire::arm`] does the expensive part once per run: the private
//! shim directory (mode 0700), its symlinks, the search for the real
//! commands on the runner's `PATH`, and the environment every script gets
//! (`PATH`, `KUBECTL`/`HELM`/`FLUX`, `MIGRATE_TRIPWIRE_REAL_*`). Arming it
//! per script was about 28 % of the CPU of applying 10³ trivial migrations
//! (benches/README.md, "Apply beside its floor", in its history).
//!
//! [`Tripwire::guard`] is what each script execution gets: a report file of
//! its own, created fresh (`O_EXCL`, mode 0600) and removed once read, so a
//! call made by one script (or by a process it left behind) can never be
//! counted for another: the old report's path no longer exists, and the
//! shim never creates a report. The reports live in a second private
//! directory (mode 0700) on `/dev/shm` when one can be made there
//! ([`REPORT_BASE`]), else in the shim directory: creating and removing a
//! file per script on a disk file system costs an inode allocation and an
//! eviction (about 70 µs of CPU per script on ext4, and the allocator skips
//! every recently freed inode, so the cost grows with the run), against a
//! few µs on tmpfs. Because the shim directory now outlives a
//! script, every guard first checks that each shim is still the runner's
//! symlink and restores any that a previous script removed or replaced; a
//! script during which a shim changed is itself counted as failed
//! ([`Armed::finish`]).

use std::ffi::OsString;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use super::record::{ENV_COMMANDS, ENV_REAL_PREFIX, ENV_REPORT};
use migrate_lint::cluster_commands;

use super::{Calls, TripwireConfig, exec};

/// The tripwire of one run: the shim directory, the environment every
/// script gets, and the run's supervisor (super::supervise). Dropping it
/// ends the supervisor and removes the directory.
#[derive(Debug)]
pub struct Tripwire {
    dir: tempfile::TempDir,
    /// The private directory of the report files, when not `dir` itself.
    reports: Option<tempfile::TempDir>,
    bin: PathBuf,
    // Shared with every script's `Armed` (a reference count per script,
    // not five paths copied).
    shim: Arc<Path>,
    links: Arc<[PathBuf]>,
    env: Vec<(String, OsString)>,
    /// What `REAL_FILE` holds: each command's real path ("" when missing).
    real: String,
    /// The ledger ConfigMap the shims refuse writes to
    /// ([`super::ledger_guard::LEDGER_FILE`]).
    ledger: Option<String>,
    supervisor: Option<(Child, ChildStdin)>,
    /// The lease deadline last given ([`super::lease`]); 0 before any.
    lease: u64,
    /// The deadline the supervisor was last told.
    told: u64,
    /// Script groups the supervisor watches now.
    watched: usize,
}

impl Drop for Tripwire {
    fn drop(&mut self) {
        if let Some((mut child, pipe)) = self.supervisor.take() {
            // End of input: every group was released, so it just exits.
            drop(pipe);
            let _ = child.wait();
        }
    }
}

/// Starts the run's supervisor: `migrate-supervise RUNNER_PID GRACE_MS
/// DIR...` in a process group of its own (the runner's group signals are
/// not for it), reading the runner's pipe; it removes `dirs` when the pipe
/// closes.
fn start_supervisor(
    shim: &Path,
    grace: Duration,
    dirs: &[&Path],
) -> std::io::Result<(Child, ChildStdin)> {
    use std::os::unix::process::CommandExt;
    let mut child = Command::new(shim)
        .arg0(super::supervise::NAME)
        .arg(std::process::id().to_string())
        .arg(grace.as_millis().to_string())
        .args(dirs)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .process_group(0)
        .spawn()?;
    let pipe = child
        .stdin
        .take()
        .ok_or_else(|| std::io::Error::other("the supervisor's pipe was not created"))?;
    Ok((child, pipe))
}

/// One script execution's report: the handle the runner reads it through.
#[derive(Debug)]
pub struct Armed {
    report_path: PathBuf,
    report: File,
    shim: Arc<Path>,
    links: Arc<[PathBuf]>,
    /// The run's supervisor: a child of the runner that is no script's
    /// survivor, so [`Armed::reap_survivors`] reads nothing of it. (It is
    /// waited for only when the tripwire is dropped: until then its pid,
    /// even once it exited, cannot be another process's.)
    supervisor: Option<i32>,
    /// Processes of the script that outlived it ([`Armed::reap_survivors`]).
    outlived: Vec<String>,
}

/// Where the report files' directory is made when possible: a memory file
/// system on every Linux system (and in every Kubernetes pod), so a report
/// costs no disk inode. Reports are a few hundred bytes per cluster-command
/// call.
pub const REPORT_BASE: &str = "/dev/shm";

/// A private directory (mode 0700) for the report files under
/// [`REPORT_BASE`], or `None` when none can be made there (no such
/// directory, read-only, full): the reports then share the shim directory.
fn report_dir() -> Option<tempfile::TempDir> {
    let base = Path::new(REPORT_BASE);
    if !std::fs::metadata(base).is_ok_and(|m| m.is_dir()) {
        return None;
    }
    tempfile::Builder::new()
        .prefix(&format!("{}reports-", super::supervise::DIR_PREFIX))
        .permissions(private())
        .tempdir_in(base)
        .ok()
}

/// Mode 0700. Without it a temporary directory gets 0777 less the umask
/// (usually 0755: listable by every user).
fn private() -> std::fs::Permissions {
    use std::os::unix::fs::PermissionsExt;
    std::fs::Permissions::from_mode(0o700)
}

fn identity(m: &std::fs::Metadata) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    (m.dev(), m.ino())
}

/// The shim binary `config` names, checked: an executable regular file.
/// Missing or not executable is an error, so no script runs unguarded.
fn checked_shim(config: &TripwireConfig) -> std::io::Result<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let shim = config.shim.clone().ok_or_else(|| {
        std::io::Error::other(
            "no cluster-command shim binary is known; refusing to run scripts unguarded",
        )
    })?;
    match std::fs::metadata(&shim) {
        Ok(m) if m.is_file() && m.permissions().mode() & 0o111 != 0 => Ok(shim),
        Ok(_) => Err(std::io::Error::other(format!(
            "the cluster-command shim {} is not an executable file; refusing to run scripts unguarded",
            shim.display()
        ))),
        Err(e) => Err(std::io::Error::other(format!(
            "the cluster-command shim {} cannot be used ({e}); it ships next to the migrate binary as {}; refusing to run scripts unguarded",
            shim.display(),
            super::SHIM_BINARY
        ))),
    }
}

impl Tripwire {
    /// Creates the shim directory for a run over the tree at `root`, works
    /// out the environment of its scripts and starts the run's supervisor
    /// (which gives a script's group `grace` between SIGTERM and SIGKILL
    /// should the runner die). Fails when the shim binary is missing, the
    /// tree's `cluster-commands` file is bad, or the directory or the
    /// supervisor cannot be made.
    pub fn arm(config: &TripwireConfig, root: &Path, grace: Duration) -> std::io::Result<Tripwire> {
        let shim = checked_shim(config)?;
        let tree =
            cluster_commands::read_tree(root).map_err(|p| std::io::Error::other(p.join("; ")))?;
        let commands = cluster_commands::union(
            config
                .commands
                .iter()
                .chain(tree.iter())
                .map(String::as_str),
        );
        let dir = tempfile::Builder::new()
            .prefix(super::supervise::DIR_PREFIX)
            .permissions(private())
            .tempdir()?;
        let bin = dir.path().join("bin");
        let links: Arc<[PathBuf]> = commands
            .iter()
            .map(String::as_str)
            .chain([cluster_commands::TOLERATE])
            .map(|name| bin.join(name))
            .collect();
        let path = std::env::var("PATH").unwrap_or_else(|_| "/usr/local/bin:/usr/bin:/bin".into());
        let mut env: Vec<(String, OsString)> = Vec::new();
        let mut real: std::collections::BTreeMap<&str, String> = Default::default();
        let mut reals: Vec<(String, PathBuf)> = Vec::new();
        for name in &commands {
            let key = cluster_commands::env_key(name);
            let found = real_for(name, &key, &path, &shim);
            real.insert(
                name,
                found
                    .as_ref()
                    .map(|p| p.to_string_lossy().into_owned())
                    .unwrap_or_default(),
            );
            reals.extend(found.map(|p| (name.clone(), p)));
            // The real paths are not in the script's environment: the
            // shims read them from the run's private REAL_FILE. The
            // variables that once carried them lead to the shims, so a
            // script that uses one still goes through the tripwire.
            env.push((
                format!("{ENV_REAL_PREFIX}{key}"),
                bin.join(name).into_os_string(),
            ));
            env.push((key, bin.join(name).into_os_string()));
        }
        env.extend(redirected_variables(&commands, &reals, &bin, &env));
        env.extend(config.env.iter().cloned());
        env.push(("PATH".into(), format!("{}:{path}", bin.display()).into()));
        env.push((ENV_COMMANDS.into(), commands.join(",").into()));
        let real = serde_json::to_string(&real).map_err(std::io::Error::other)?;
        // The runner becomes the reaper of every process its scripts leave
        // behind (setsid, a double fork), so it can find them when a script
        // exits (Armed::reap_survivors). Without it they would belong to
        // init, out of the runner's sight.
        nix::sys::prctl::set_child_subreaper(true).map_err(std::io::Error::from)?;
        let mut wire = Tripwire {
            dir,
            reports: report_dir(),
            bin,
            shim: shim.into(),
            links,
            env,
            real,
            ledger: None,
            supervisor: None,
            lease: 0,
            told: 0,
            watched: 0,
        };
        wire.restore_shims()?;
        wire.write_real()?;
        // Absolute, as the supervisor requires (a relative `TMPDIR` gives a
        // relative shim directory).
        let dirs = [
            Some(wire.dir.path()),
            wire.reports.as_ref().map(|r| r.path()),
        ]
        .into_iter()
        .flatten()
        .map(std::path::absolute)
        .collect::<std::io::Result<Vec<PathBuf>>>()?;
        let dirs: Vec<&Path> = dirs.iter().map(PathBuf::as_path).collect();
        let supervisor = start_supervisor(&wire.shim, grace, &dirs)?;
        wire.supervisor = Some(supervisor);
        Ok(wire)
    }

    /// The cluster commands of this run.
    pub fn commands(&self) -> Vec<String> {
        self.links
            .iter()
            .filter_map(|l| l.file_name()?.to_str())
            .filter(|n| *n != cluster_commands::TOLERATE)
            .map(str::to_owned)
            .collect()
    }

    /// The directory the report files are created in (see [`REPORT_BASE`]).
    pub fn report_dir(&self) -> &Path {
        self.reports.as_ref().unwrap_or(&self.dir).path()
    }

    /// Tells the supervisor that process group `pgid` runs a script:
    /// should the runner die, the supervisor stops it. An error means the
    /// supervisor is gone, and the script must not be left running.
    ///
    /// A deadline not told yet goes in the same write, first: the
    /// supervisor knows it before it knows the group.
    pub fn watch(&mut self, pgid: i32) -> std::io::Result<()> {
        let line = if self.told == self.lease {
            format!("+{pgid}\n")
        } else {
            format!("={}\n+{pgid}\n", self.lease)
        };
        self.tell(&line)?;
        self.told = self.lease;
        self.watched += 1;
        Ok(())
    }

    /// Sets the run's lease deadline (`CLOCK_BOOTTIME` nanoseconds, see
    /// [`super::lease`]): where the shims check it, and on the supervisor's
    /// pipe, which kills every script group still running when it passes.
    /// The supervisor acts on the deadline only for the groups it watches,
    /// so while it watches none the deadline waits for the next group's
    /// line ([`Tripwire::watch`]): one write and one wake-up of the
    /// supervisor fewer per script.
    pub fn lease(&mut self, deadline: u64) -> std::io::Result<()> {
        self.lease = deadline;
        match super::lease::write(self.report_dir(), deadline) {
            // A script removed the directory: the next guard makes it again
            // and writes the deadline there; until then the shims, finding
            // none, refuse.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            other => other?,
        }
        if self.watched == 0 {
            return Ok(());
        }
        self.tell(&format!("={deadline}\n"))?;
        self.told = deadline;
        Ok(())
    }

    /// Tells the supervisor that group `pgid` is over (killed and waited
    /// for), so its number may be reused.
    pub fn release(&mut self, pgid: i32) -> std::io::Result<()> {
        self.watched = self.watched.saturating_sub(1);
        self.tell(&format!("-{pgid}\n"))
    }

    fn tell(&mut self, line: &str) -> std::io::Result<()> {
        let (_, pipe) = self
            .supervisor
            .as_mut()
            .ok_or_else(|| std::io::Error::other("the run's supervisor is not running"))?;
        pipe.write_all(line.as_bytes()).map_err(|e| {
            std::io::Error::other(format!(
                "the run's supervisor is gone ({e}); refusing to leave a script unsupervised"
            ))
        })
    }

    /// Makes every shim the runner's symlink again: a previous script may
    /// have removed or replaced one (or the whole directory).
    fn restore_shims(&mut self) -> std::io::Result<()> {
        if !std::fs::symlink_metadata(&self.bin).is_ok_and(|m| m.is_dir()) {
            let _ = std::fs::remove_file(&self.bin);
            use std::os::unix::fs::DirBuilderExt;
            // Private again, the run's directory included if it went too.
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(&self.bin)?;
        }
        for link in self.links.iter() {
            if shim_intact(link, &self.shim) {
                continue;
            }
            match std::fs::symlink_metadata(link) {
                Ok(m) if m.is_dir() => std::fs::remove_dir_all(link)?,
                Ok(_) => std::fs::remove_file(link)?,
                Err(_) => {}
            }
            std::os::unix::fs::symlink(&self.shim, link)?;
        }
        Ok(())
    }

    /// Writes the real commands' paths where the shims find them: the
    /// report directory ([`REAL_FILE`]), private, never in the script's
    /// environment.
    fn write_real(&self) -> std::io::Result<()> {
        let dir = self.report_dir();
        super::write_private(&dir.join(REAL_FILE), self.real.as_bytes())?;
        if let Some(ledger) = &self.ledger {
            let path = dir.join(super::ledger_guard::LEDGER_FILE);
            super::write_private(&path, ledger.as_bytes())?;
        }
        Ok(())
    }

    /// Has every shim of this run refuse a script's write of the ledger
    /// ConfigMap `name` (see [`super::ledger_guard`]).
    pub fn guard_ledger(&mut self, name: &str) -> std::io::Result<()> {
        self.ledger = Some(name.to_owned());
        self.write_real()
    }

    /// Readies one script execution: restores the shims, creates the
    /// script's own report file and sets the script's environment on `cmd`.
    pub fn guard(&mut self, cmd: &mut std::process::Command) -> std::io::Result<Armed> {
        self.restore_shims()?;
        // A random name, created with O_EXCL (mode 0600): a name a script
        // planted beforehand is never adopted, and no script can guess the
        // next one by counting.
        let create = |dir: &Path| {
            tempfile::Builder::new()
                .prefix("report-")
                .suffix(".jsonl")
                .tempfile_in(dir)
        };
        let created = match create(self.report_dir()) {
            // A previous script removed the directory: make it again,
            // private, and only the directory itself (its parent is the
            // shim directory, restored above, or REPORT_BASE).
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                use std::os::unix::fs::DirBuilderExt;
                std::fs::DirBuilder::new()
                    .mode(0o700)
                    .create(self.report_dir())?;
                self.write_real()?;
                super::lease::write(self.report_dir(), self.lease)?;
                create(self.report_dir())
            }
            other => other,
        };
        let (report, report_path) = created?.keep().map_err(|e| e.error)?;
        cmd.envs(self.env.iter().map(|(k, v)| (k, v)))
            .env(ENV_REPORT, &report_path);
        Ok(Armed {
            report_path,
            report,
            shim: self.shim.clone(),
            links: self.links.clone(),
            supervisor: self
                .supervisor
                .as_ref()
                .and_then(|(child, _)| i32::try_from(child.id()).ok()),
            outlived: Vec::new(),
        })
    }
}

/// The whole report file, read by offset from its start: `read_to_string`
/// would first stat it and ask its position (two more system calls per
/// script, for a file that is usually empty).
fn read_report(report: &File) -> std::io::Result<String> {
    use std::os::unix::fs::FileExt;
    let mut bytes = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        match report.read_at(&mut chunk, bytes.len() as u64) {
            Ok(0) => break,
            Ok(n) => bytes.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    String::from_utf8(bytes).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
}

fn shim_intact(link: &Path, shim: &Path) -> bool {
    std::fs::read_link(link).is_ok_and(|target| target == shim)
}

impl Armed {
    /// Finds the processes of this script that outlived it: the runner is
    /// their reaper (see [`Tripwire::arm`]), so a process that left the
    /// script's group (setsid, a double fork) is the runner's child once
    /// its parent is gone. The script's own report path in its environment
    /// marks it as this script's. Each is killed with its group and noted;
    /// members of the script's group `pgid` (killed already) are reaped.
    /// Call it after the group was killed and before waiting for the
    /// output to end (a survivor may hold the output pipe).
    pub fn reap_survivors(&mut self, pgid: i32) {
        use nix::sys::signal::{Signal, kill, killpg};
        use nix::sys::wait::{WaitPidFlag, waitpid};
        use nix::unistd::Pid;
        let mut marker = format!("{ENV_REPORT}=").into_bytes();
        marker.extend_from_slice(self.report_path.as_os_str().as_encoded_bytes());
        for _ in 0..50 {
            let mut seen = false;
            for pid in own_children(pgid) {
                if Some(pid) == self.supervisor {
                    continue;
                }
                let Some(group) = process_group(pid) else {
                    continue;
                };
                let p = Pid::from_raw(pid);
                if group == pgid {
                    // A killed member of the script's group, now ours.
                    seen = true;
                    let _ = kill(p, Signal::SIGKILL);
                    let _ = waitpid(p, Some(WaitPidFlag::WNOHANG));
                } else if environ_has(pid, &marker) {
                    seen = true;
                    let name = std::fs::read_to_string(format!("/proc/{pid}/comm"))
                        .map(|c| c.trim().to_owned())
                        .unwrap_or_default();
                    if group != nix::unistd::getpgrp().as_raw() {
                        let _ = killpg(Pid::from_raw(group), Signal::SIGKILL);
                    }
                    let _ = kill(p, Signal::SIGKILL);
                    let _ = waitpid(p, None);
                    self.outlived.push(format!("process {pid} ({name})"));
                }
            }
            if !seen {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Reads what the script's cluster-command calls did, and removes the
    /// report file (so nothing can append to it any more).
    pub fn finish(self) -> Calls {
        let read = read_report(&self.report);
        let same_report = match (
            self.report.metadata(),
            std::fs::symlink_metadata(&self.report_path),
        ) {
            (Ok(a), Ok(b)) => identity(&a) == identity(&b),
            _ => false,
        };
        let text = read.as_ref().map(String::as_str).unwrap_or_default();
        let mut lost = None;
        if let Err(e) = &read {
            lost = Some(format!("the tripwire report could not be read: {e}"));
        } else if !same_report {
            lost = Some(format!(
                "the tripwire report {} was removed or replaced while the script ran",
                self.report_path.display()
            ));
        } else if let Some(gone) = self.links.iter().find(|l| !shim_intact(l, &self.shim)) {
            lost = Some(format!(
                "the shim {} was removed or replaced while the script ran, so later calls may have bypassed it",
                gone.display()
            ));
        }
        if same_report {
            // Only our own file: a replacement is left for the directory's
            // removal at the end of the run.
            let _ = std::fs::remove_file(&self.report_path);
        }
        if lost.is_none() && !self.outlived.is_empty() {
            lost = Some(format!(
                "{} outlived the script (detached with setsid or a double fork) and {} killed; a process that outlives its script may call the cluster after the shims are gone",
                self.outlived.join(", "),
                if self.outlived.len() == 1 {
                    "was"
                } else {
                    "were"
                }
            ));
        }
        let mut calls = Calls::parse(text);
        calls.lost = lost;
        calls
    }
}

/// The file in the report directory that holds the real commands' paths,
/// as a JSON object (`{"kubectl": "/usr/bin/kubectl", "flux": ""}`).
pub const REAL_FILE: &str = "real.json";

/// The children of this process: every thread's `children` list (the
/// processes reparented to a reaper may belong to any of its threads), or,
/// on kernels without those lists, the processes of `/proc` whose parent
/// it is, looking only at pids from `since` up (a script's descendants
/// were started after it; pids wrapping around in between is the gap).
fn own_children(since: i32) -> Vec<i32> {
    let mut pids = Vec::new();
    let mut listed = false;
    if let Ok(tasks) = std::fs::read_dir("/proc/self/task") {
        for task in tasks.flatten() {
            if let Ok(text) = std::fs::read_to_string(task.path().join("children")) {
                listed = true;
                pids.extend(
                    text.split_whitespace()
                        .filter_map(|p| p.parse::<i32>().ok()),
                );
            }
        }
    }
    if !listed {
        let me = i32::try_from(std::process::id()).unwrap_or(0);
        if let Ok(all) = std::fs::read_dir("/proc") {
            for entry in all.flatten() {
                let Some(pid) = entry
                    .file_name()
                    .to_str()
                    .and_then(|n| n.parse::<i32>().ok())
                else {
                    continue;
                };
                if pid >= since && stat_field(pid, 1) == Some(me) {
                    pids.push(pid);
                }
            }
        }
    }
    pids.sort_unstable();
    pids.dedup();
    pids
}

/// Field `n` after the command name of `/proc/PID/stat` (0: state, 1: the
/// parent, 2: the process group); the name in parentheses may hold spaces.
fn stat_field(pid: i32, n: usize) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = &stat[stat.rfind(')')? + 1..];
    after.split_whitespace().nth(n)?.parse().ok()
}

/// The process group of `pid`.
fn process_group(pid: i32) -> Option<i32> {
    stat_field(pid, 2)
}

fn environ_has(pid: i32, entry: &[u8]) -> bool {
    std::fs::read(format!("/proc/{pid}/environ"))
        .is_ok_and(|env| env.split(|b| *b == 0).any(|e| e == entry))
}

/// The runner's own variables that hold the absolute path of a cluster
/// command (`KUBECTL_BIN=/usr/bin/kubectl`): for the script they lead to the
/// shim instead, so `"${KUBECTL_BIN:-kubectl}" ...` cannot walk around it.
/// A path counts when its file name is a cluster command's or it is the
/// same file as a real command.
fn redirected_variables(
    commands: &[String],
    reals: &[(String, PathBuf)],
    bin: &Path,
    set: &[(String, OsString)],
) -> Vec<(String, OsString)> {
    let mut out = Vec::new();
    for (key, value) in std::env::vars_os() {
        let Ok(key) = key.into_string() else { continue };
        if key == "PATH" || set.iter().any(|(k, _)| *k == key) {
            continue;
        }
        let value = PathBuf::from(value);
        // Only a program: a directory or a file that happens to be named
        // `kubectl` (a plugin path, a config) keeps its value.
        let program = |p: &Path| {
            use std::os::unix::fs::PermissionsExt;
            std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        };
        if !value.is_absolute() || !program(&value) {
            continue;
        }
        let by_name = value
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| commands.iter().find(|c| c.as_str() == n));
        let command = by_name.or_else(|| {
            reals
                .iter()
                .find(|(_, r)| exec::same_file(&value, r))
                .map(|(name, _)| name)
        });
        if let Some(name) = command {
            out.push((key, bin.join(name).into_os_string()));
        }
    }
    out
}

/// The real command behind `name`: the runner's `$KEY` when it names an
/// executable that is not the shim, else the first `name` on the runner's
/// `PATH` that is not the shim.
fn real_for(name: &str, key: &str, path: &str, shim: &Path) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    if let Some(v) = std::env::var_os(key).map(PathBuf::from)
        && v.is_absolute()
        && std::fs::metadata(&v).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        && !exec::same_file(&v, shim)
    {
        return Some(v);
    }
    exec::search_path(name, path, Some(shim))
}
