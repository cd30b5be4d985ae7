//! The file-backed ledger: a snapshot plus an append-only journal in one
//! file (format in [`crate::journal`]), the run lock kept in it, and a
//! sidecar `<file>.lock` to `flock`.

use std::fs::{self, File};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;
use migration_core::last_failure::LastFailure;
use migration_core::ledger::{Lease, Ledger, LedgerError, LedgerSnapshot, WriteMode, WriteReport};
use migration_core::lock::Lock;
use migration_core::step::{StepMode, StepReport, StepWrite};
use migration_core::{Clock, LedgerEntry, Slug, SystemClock};

use crate::journal::Corrupt;
use migration_core::object::{self, LockState, Object};

mod store;
mod witness;

/// The file ledger's default size budget: 64 MiB of keys and values (about
/// 120,000 migrations run by the runner), counted like a ConfigMap's data.
/// It is the file ledger's own limit, not the ConfigMap's 1 MiB: a dry run
/// that must refuse what a cluster would refuse uses the memory ledger.
pub const DEFAULT_FILE_BUDGET_BYTES: u64 = 64 * 1024 * 1024;

/// The journal never triggers a compaction below this file size.
pub const DEFAULT_COMPACT_MIN_BYTES: u64 = 1024 * 1024;

/// A ledger stored in one file: the embedded default, for running the
/// engine with no cluster.
///
/// **Format.** A format tag, a snapshot record, then one appended record
/// per mutation (`migration-ledger/v2`, described in `journal.rs` and the
/// README): a write, an attempt mark or a run's step (its records and the
/// next attempt mark, [`Ledger::write_step`]) costs one append and one
/// `fdatasync`, whatever the size of the ledger. The append goes into a
/// preallocated NUL tail, so the `fdatasync` writes the record's block and
/// not the inode; the file grows by whole steps. When the file grows past
/// twice what its live data needs (and past
/// [`DEFAULT_COMPACT_MIN_BYTES`]), the next mutation rewrites it as a
/// fresh snapshot (temporary file, fsync, rename, fsync of the directory),
/// so a crash at any step leaves the old or the new file, both whole. Files
/// of the older whole-document format (`migration-ledger/v1`) are read,
/// and converted by the first write; an older version refuses the new
/// format as unreadable instead of misreading it.
///
/// **Crashes.** A crash during an append leaves a torn final line, which
/// was never acknowledged: readers ignore it and the next writer truncates
/// it. Any other damage (a bad checksum, a revision out of sequence, a
/// torn snapshot) makes the whole ledger unreadable, naming the file and
/// the byte offset; it is never read as absent.
///
/// **Processes.** Every mutation holds an exclusive `flock` on the sidecar
/// `<file>.lock`, so several processes can share one ledger. A handle that
/// has locked or written keeps the replayed state and reads only what
/// other processes appended since (or everything, when a compaction
/// replaced the file); one that has only read keeps nothing and never
/// holds the raw data: it decodes each record into the snapshot as it
/// replays it (each read replays the file). Reads take no lock unless they
/// find damage, which they re-check under it.
///
/// **The run lock** lives in the ledger object, under the key
/// [`migration_core::fence::LOCK_KEY`]: taking, renewing and releasing it
/// are changes of the object like any other, decided under the flock and
/// appended with the records of the same step (one `fdatasync`), and each
/// raises the revision. The sidecar only carries the flock (an older
/// engine's lock record in it is ignored).
///
/// **Symlinks.** A symlinked path is followed: the ledger is written
/// through the link into its target, whose directory also holds the
/// sidecar; the link itself is never replaced.
///
/// File I/O is synchronous: each operation is a few system calls under the
/// flock, shorter than handing the work to a blocking thread pool.
#[derive(Debug, Clone)]
pub struct FileLedger {
    path: PathBuf,
    clock: Arc<dyn Clock>,
    budget: Option<u64>,
    compact_min: u64,
    handle: Arc<Mutex<Handle>>,
}

/// What one handle keeps between calls.
#[derive(Debug, Default)]
struct Handle {
    sidecar: Option<Sidecar>,
    view: Option<View>,
    /// While this handle holds the run lock: the file it read and what it stored there, so a
    /// file replaced under the run stops it (#35, [`witness`]).
    witness: Option<witness::Witness>,
}

/// The open `<file>.lock`.
#[derive(Debug)]
struct Sidecar {
    path: PathBuf,
    file: File,
}

/// The ledger file as last replayed.
#[derive(Debug)]
struct View {
    target: PathBuf,
    /// `None`: there is no file.
    file: Option<Opened>,
    /// `Some` for a whole-document (v1) file: the lock it carries.
    legacy_lock: Option<LockState>,
    state: Option<Object>,
    /// Offset after the last complete record.
    end: u64,
    /// Bytes of a torn final record after `end`.
    torn: u64,
    /// The file's length as last read or written: `end`, then a torn
    /// record or the preallocated NUL tail (see [`crate::journal`]).
    len: u64,
    /// The last bytes before `end` (up to [`MARK_BYTES`]): a file rewritten in place (`cp` of
    /// an older copy keeps the inode, and often the length) no longer holds them there, and is
    /// loaded again instead of being read on from `end` (#35).
    mark: Vec<u8>,
    /// Which view this is ([`View::next_epoch`]): a view loaded or written anew gets a new one,
    /// while one brought up to date by reading on from `end`, or by its own append, keeps it. The
    /// witness compares it, with `end`, to know the state it last checked is unchanged.
    epoch: u64,
}

/// How many bytes before the end of the records a view checks are still in place.
const MARK_BYTES: usize = 64;

/// `mark` followed by `appended`, cut to its last [`MARK_BYTES`].
fn extend_mark(mark: &mut Vec<u8>, appended: &[u8]) {
    mark.extend_from_slice(appended);
    let excess = mark.len().saturating_sub(MARK_BYTES);
    mark.drain(..excess);
}

/// The last bytes of `file` before `end`, as [`View::mark`] keeps them.
fn read_mark(file: &File, end: u64) -> io::Result<Vec<u8>> {
    use std::os::unix::fs::FileExt;
    let start = end.saturating_sub(MARK_BYTES as u64);
    let mut mark = vec![0; (end - start) as usize];
    file.read_exact_at(&mut mark, start)?;
    Ok(mark)
}

impl View {
    /// A number no other view of this process had.
    fn next_epoch() -> u64 {
        static EPOCHS: AtomicU64 = AtomicU64::new(0);
        EPOCHS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    }

    /// The view of `target` when there is no file there.
    fn absent(target: &std::path::Path) -> View {
        View {
            target: target.to_path_buf(),
            file: None,
            legacy_lock: None,
            state: None,
            end: 0,
            torn: 0,
            len: 0,
            mark: Vec::new(),
            epoch: View::next_epoch(),
        }
    }
}

#[derive(Debug)]
struct Opened {
    file: File,
    dev: u64,
    ino: u64,
    writable: bool,
}

/// Holds the flock; releases it when dropped, on every path.
struct Flock<'f>(&'f File);

impl Drop for Flock<'_> {
    fn drop(&mut self) {
        let _ = self.0.unlock();
    }
}

static TMP_SEQUENCE: AtomicU64 = AtomicU64::new(0);

fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path
        .file_name()
        .map(|n| n.to_os_string())
        .unwrap_or_default();
    name.push(suffix);
    path.with_file_name(name)
}

fn directory_of(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// What the ledger needs to know of a file: which file it is, its length
/// and whether it is a symlink, and nothing else.
///
/// Asked for with `statx` naming exactly those fields, never the times
/// (`std::fs::metadata` asks for every field). On a file system with
/// fine-grained timestamps (ext4, XFS, btrfs and tmpfs since Linux 6.13) a
/// stat that reports the times marks them as seen, and the next write then
/// takes a new, finer mtime even within the same clock tick: the inode is
/// dirtied on every append, and on ext4 without a journal each `fdatasync`
/// then writes the inode table block as well as the record (three device
/// writes per append instead of two, measured with /proc/diskstats).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Probe {
    dev: u64,
    ino: u64,
    len: u64,
    symlink: bool,
    /// What the file is when it is neither a regular file nor a symlink (a
    /// ledger is never one: reading a device never ends, opening a FIFO
    /// waits for a writer).
    special: Option<&'static str>,
}

/// What a file of type `t` is, when it is neither a regular file nor a
/// symlink.
fn special(t: rustix::fs::FileType) -> Option<&'static str> {
    use rustix::fs::FileType;
    match t {
        FileType::RegularFile | FileType::Symlink => None,
        FileType::Directory => Some("a directory"),
        FileType::CharacterDevice => Some("a character device"),
        FileType::BlockDevice => Some("a block device"),
        FileType::Fifo => Some("a FIFO (named pipe)"),
        FileType::Socket => Some("a socket"),
        FileType::Unknown => Some("a file of unknown type"),
    }
}

impl Probe {
    /// The file at `path`, or with `follow` false `path` itself when it is
    /// a symlink.
    fn path(path: &Path, follow: bool) -> io::Result<Probe> {
        use rustix::fs::{AtFlags, CWD};
        let flags = if follow {
            AtFlags::empty()
        } else {
            AtFlags::SYMLINK_NOFOLLOW
        };
        Probe::ask(|mask| rustix::fs::statx(CWD, path, flags, mask)).unwrap_or_else(|| {
            if follow {
                fs::metadata(path)
            } else {
                fs::symlink_metadata(path)
            }
            .map(|m| Probe::from(&m))
        })
    }

    /// The open `file`.
    fn file(file: &File) -> io::Result<Probe> {
        use rustix::fs::AtFlags;
        Probe::ask(|mask| rustix::fs::statx(file, "", AtFlags::EMPTY_PATH, mask))
            .unwrap_or_else(|| file.metadata().map(|m| Probe::from(&m)))
    }

    /// `None` where the kernel has no `statx` (before Linux 4.11, or a
    /// seccomp filter refusing it): the caller falls back to a full stat.
    fn ask(
        statx: impl FnOnce(rustix::fs::StatxFlags) -> rustix::io::Result<rustix::fs::Statx>,
    ) -> Option<io::Result<Probe>> {
        use rustix::fs::{FileType, StatxFlags};
        match statx(StatxFlags::TYPE | StatxFlags::INO | StatxFlags::SIZE) {
            Ok(s) => Some(Ok(Probe {
                dev: rustix::fs::makedev(s.stx_dev_major, s.stx_dev_minor),
                ino: s.stx_ino,
                len: s.stx_size,
                symlink: FileType::from_raw_mode(u32::from(s.stx_mode)) == FileType::Symlink,
                special: special(FileType::from_raw_mode(u32::from(s.stx_mode))),
            })),
            Err(rustix::io::Errno::NOSYS | rustix::io::Errno::PERM) => None,
            Err(e) => Some(Err(e.into())),
        }
    }
}

impl From<&fs::Metadata> for Probe {
    fn from(m: &fs::Metadata) -> Probe {
        use std::os::unix::fs::MetadataExt;
        Probe {
            dev: m.dev(),
            ino: m.ino(),
            len: m.len(),
            symlink: m.file_type().is_symlink(),
            special: special(rustix::fs::FileType::from_raw_mode(m.mode())),
        }
    }
}

/// Follows symlinks to the file the ledger really is (which need not exist
/// yet). Parent directories may be symlinks; they are left as they are.
/// A path that is (or leads to) anything but a regular file is refused
/// ([`io::ErrorKind::InvalidInput`], naming it and what it is) before it is
/// opened: `/dev/zero` would be read until memory runs out, a FIFO would
/// wait for a writer for ever.
fn resolve(path: &Path) -> io::Result<PathBuf> {
    let mut current = path.to_path_buf();
    for _ in 0..40 {
        match Probe::path(&current, false) {
            Ok(probe) if probe.symlink => {
                let target = fs::read_link(&current)?;
                current = if target.is_absolute() {
                    target
                } else {
                    directory_of(&current).join(target)
                };
            }
            Ok(Probe {
                special: Some(kind),
                ..
            }) => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "{} is {kind}, not a regular file (a file ledger is a regular file, or a path where one will be created)",
                        current.display()
                    ),
                ));
            }
            Ok(_) => return Ok(current),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(current),
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::other("too many levels of symbolic links"))
}

fn nonce() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    nanos ^ (u64::from(std::process::id()) << 40)
}

impl FileLedger {
    /// A ledger stored at `path` (created on the first write), with the
    /// file ledger's budget [`DEFAULT_FILE_BUDGET_BYTES`].
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self::with_clock(path, Arc::new(SystemClock))
    }

    /// A ledger at `path` whose lock expiry follows `clock`.
    pub fn with_clock(path: impl Into<PathBuf>, clock: Arc<dyn Clock>) -> Self {
        FileLedger {
            path: path.into(),
            clock,
            budget: Some(DEFAULT_FILE_BUDGET_BYTES),
            compact_min: DEFAULT_COMPACT_MIN_BYTES,
            handle: Arc::default(),
        }
    }

    /// Replaces the size budget (`None`: unlimited). The budget counts
    /// the live keys and values, as a ConfigMap would, not the file.
    pub fn with_budget(mut self, budget: Option<u64>) -> Self {
        self.budget = budget;
        self
    }

    /// The file size below which the journal is never compacted (default
    /// [`DEFAULT_COMPACT_MIN_BYTES`]; 0 compacts as soon as the file is
    /// twice what its live data needs).
    pub fn with_compact_min(mut self, bytes: u64) -> Self {
        self.compact_min = bytes;
        self
    }

    /// The size budget in bytes, if any.
    pub fn budget(&self) -> Option<u64> {
        self.budget
    }

    /// The ledger file, as given (see [`FileLedger`] for symlinks).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Stores `value` under `key` verbatim, creating the ledger object if it
    /// is absent. For tests and repairs: plants corrupt values or `version`.
    pub fn put_raw(&self, key: &str, value: &str) -> Result<(), LedgerError> {
        self.mutate("put raw", |state| {
            Ok(((), Some(object::put_raw(state, key, value))))
        })
    }

    /// Every raw key and value, or `None` when the ledger object is absent.
    pub fn raw_data(
        &self,
    ) -> Result<Option<std::collections::BTreeMap<String, String>>, LedgerError> {
        self.with_state("read", |state| state.map(|o| o.data().clone()))
    }

    /// Rewrites the file as one snapshot now (also converting a file of
    /// the older format). Nothing to do when the ledger does not exist.
    pub fn compact(&self) -> Result<(), LedgerError> {
        let operation = "compact";
        let target = self.resolve(operation)?;
        let mut handle = self.handle();
        let Handle { sidecar, view, .. } = &mut *handle;
        let _flock = self.flock(sidecar, &target, operation)?;
        self.refresh(view, &target, true, operation)?;
        let Some(current) = view.as_mut() else {
            return Ok(());
        };
        let Some(object) = current.state.take() else {
            return Ok(());
        };
        self.replace_with_snapshot(view, object, operation)
    }

    fn name(&self) -> String {
        format!("file ledger {}", self.path.display())
    }

    fn io_error(&self, operation: &'static str, what: &str, e: &io::Error) -> LedgerError {
        LedgerError::Permanent {
            ledger: self.name(),
            operation,
            message: format!("{what}: {e}"),
        }
    }

    /// The file's damage, and the next step a person takes: nothing is
    /// changed by the engine (it never guesses), so they restore the file,
    /// or keep the records before the damage, which the journal's order
    /// makes a consistent earlier ledger (the migrations recorded after it
    /// run again, each safe to run twice), then verify.
    fn unreadable(&self, target: &Path, corrupt: &Corrupt) -> LedgerError {
        let file = target.display();
        let offset = corrupt.offset;
        LedgerError::Unreadable {
            ledger: self.name(),
            reason: format!(
                "{file} at byte offset {offset}: {}; the file is left as it is: restore it from a backup, \
                 or keep the records before the damage (`head -c {offset} '{file}' > '{file}.cut'`, \
                 then move it in place; what was recorded after it runs again), then `migrate verify`",
                corrupt.reason
            ),
        }
    }

    fn handle(&self) -> MutexGuard<'_, Handle> {
        // A panic in another thread mid-operation may have left the view
        // half-updated: forget it, the file is the truth.
        self.handle.lock().unwrap_or_else(|poisoned| {
            let mut handle = poisoned.into_inner();
            handle.view = None;
            self.handle.clear_poison();
            handle
        })
    }

    fn resolve(&self, operation: &'static str) -> Result<PathBuf, LedgerError> {
        resolve(&self.path).map_err(|e| self.io_error(operation, "resolving the path", &e))
    }

    /// Refuses a path that is, or whose symlinks lead to, anything but a
    /// regular file (a device, a FIFO, a directory, a socket), naming it
    /// and what it is, before anything opens it: what a command checks
    /// first, to report it as bad input. Every other outcome (a path that
    /// does not exist yet, one that cannot be looked at) is left to the
    /// operations, which report it themselves.
    pub fn refuse_special_file(&self) -> Result<(), LedgerError> {
        match resolve(&self.path) {
            Err(e) if e.kind() == io::ErrorKind::InvalidInput => {
                Err(self.io_error("open", "resolving the path", &e))
            }
            _ => Ok(()),
        }
    }
}

#[async_trait]
impl Ledger for FileLedger {
    fn describe(&self) -> String {
        self.name()
    }

    async fn read(&self) -> Result<Option<LedgerSnapshot>, LedgerError> {
        self.read_snapshot("read")
    }

    async fn create(&self, entries: &[(Slug, LedgerEntry)]) -> Result<(), LedgerError> {
        let name = self.name();
        self.mutate("create", |state| {
            object::plan_create(&name, self.budget, state, entries).map(|c| ((), Some(c)))
        })
    }

    async fn write(
        &self,
        entries: &[(Slug, LedgerEntry)],
        mode: WriteMode,
    ) -> Result<WriteReport, LedgerError> {
        let name = self.name();
        self.mutate("write", |state| {
            object::plan_write(&name, self.budget, state, entries, mode)
        })
    }

    async fn note_attempt(&self, slug: &Slug, token: &str, floor: u32) -> Result<u32, LedgerError> {
        let name = self.name();
        self.mutate("note attempt", |state| {
            object::plan_note_attempt(&name, self.budget, state, slug, token, floor)
        })
    }

    async fn note_failure(&self, slug: &Slug, failure: &LastFailure) -> Result<(), LedgerError> {
        let name = self.name();
        self.mutate("note failure", |state| {
            object::plan_note_failure(&name, self.budget, state, slug, failure).map(|c| ((), c))
        })
    }

    /// One append and one `fdatasync` for the records, the attempt mark and
    /// the last failure together, where the default write would make two: a run of K
    /// migrations then syncs K + 1 times, not 2K. The guarantee is the
    /// default's and more: the mark is durable before the script starts,
    /// the records before the next one does, and a step that fails stores
    /// neither (the default may leave the records written).
    ///
    /// The step's condition and its change of the run lock, kept in the
    /// object, are decided under the same flock as the append
    /// ([`object::plan_step`]), so a runner that lost its lock (stalled past
    /// its lease while another took it) writes nothing
    /// ([`LedgerError::LockLost`]), and a lock change alone is one append
    /// that raises the revision.
    async fn write_step(&self, step: &StepWrite<'_>) -> Result<StepReport, LedgerError> {
        let name = self.name();
        let now = self.clock.now();
        let token = take_token(now);
        // A step that takes or holds the run lock makes this handle the run's: from its write on,
        // the file must stay the one the run read and wrote (#35), so the witness notes the
        // step's own records too; a take refused leaves the handle as it was.
        let holds = matches!(step.mode, StepMode::Take { .. } | StepMode::Hold { .. });
        let watched_before = self.handle().witness.is_some();
        if holds && !watched_before {
            self.handle().witness = Some(Default::default());
        }
        let result = self.mutate("write step", |state| {
            object::plan_step(&name, self.budget, state, step, now, &token)
        });
        match (&result, &step.mode) {
            (Err(_), _) if holds && !watched_before => self.handle().witness = None,
            (Ok(_), StepMode::Release { .. }) => self.handle().witness = None,
            _ => {}
        }
        result
    }
}

/// The token of a new tenure: core's, and a nonce, since several processes
/// share one file.
fn take_token(now: migration_core::Timestamp) -> String {
    format!("{}.{:x}", migration_core::fence::new_token(now), nonce())
}

#[async_trait]
impl Lock for FileLedger {
    async fn acquire(&self, holder: &str, ttl: Duration) -> Result<Lease, LedgerError> {
        let name = self.name();
        let now = self.clock.now();
        let token = take_token(now);
        let lease = self.mutate("acquire lock", |state| {
            object::plan_lock_take(&name, state, holder, ttl, now, &token)
        })?;
        // From here the run reads the ledger it plans on and writes its records: the file must
        // stay the one it read (#35).
        self.handle().witness.get_or_insert_with(Default::default);
        Ok(lease)
    }

    async fn renew(&self, lease: &Lease, ttl: Duration) -> Result<Lease, LedgerError> {
        let name = self.name();
        let now = self.clock.now();
        self.mutate("renew lock", |state| {
            object::plan_lock_renew(&name, state, lease, ttl, now)
        })
    }

    async fn release(&self, lease: &Lease) -> Result<(), LedgerError> {
        let name = self.name();
        self.mutate("release lock", |state| {
            object::plan_lock_release(&name, state, lease)
        })?;
        self.handle().witness = None;
        Ok(())
    }
}
