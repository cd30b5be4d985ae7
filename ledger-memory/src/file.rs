//! The file-backed ledger: a snapshot plus an append-only journal in one
//! file (format in [`crate::journal`]), and the run lock in a sidecar.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;
use migration_core::ledger::{Lease, Ledger, LedgerError, LedgerSnapshot, WriteMode, WriteReport};
use migration_core::lock::Lock;
use migration_core::{Clock, LedgerEntry, Slug, SystemClock};

use crate::document::{self, Change, LockState, Object};
use crate::journal::{self, Corrupt, LockContents};

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
/// README): a write or an attempt mark costs one append and one
/// `fdatasync`, whatever the size of the ledger. When the file grows past
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
/// `<file>.lock`, so several processes can share one ledger. Each handle
/// keeps the replayed state and reads only what other processes appended
/// since (or everything, when a compaction replaced the file). Reads take
/// no lock unless they find damage, which they re-check under it.
///
/// **The run lock** lives in the same sidecar, never in the ledger file:
/// acquire, renew and release rewrite one short checksummed line under the
/// flock, without fsync. A lease only keeps live processes apart; after a
/// machine crash no holder is alive, and a lost or torn lease record is
/// read as free (a torn one can only come from its own holder's write).
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

/// Follows symlinks to the file the ledger really is (which need not exist
/// yet). Parent directories may be symlinks; they are left as they are.
fn resolve(path: &Path) -> io::Result<PathBuf> {
    let mut current = path.to_path_buf();
    for _ in 0..40 {
        match fs::symlink_metadata(&current) {
            Ok(meta) if meta.file_type().is_symlink() => {
                let target = fs::read_link(&current)?;
                current = if target.is_absolute() {
                    target
                } else {
                    directory_of(&current).join(target)
                };
            }
            Ok(_) => return Ok(current),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(current),
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::other("too many levels of symbolic links"))
}

fn read_all(file: &File) -> io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    let mut reader = file;
    reader.read_to_end(&mut bytes)?;
    Ok(bytes)
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
            Ok(((), Some(document::put_raw(state, key, value))))
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
        let Handle { sidecar, view } = &mut *handle;
        let flock = self.flock(sidecar, &target, operation)?;
        self.refresh(view, &target, true, operation)?;
        let Some(current) = view.as_mut() else {
            return Ok(());
        };
        let Some(object) = current.state.take() else {
            return Ok(());
        };
        self.import_legacy_lock(flock.0, current, operation)?;
        self.replace_with_snapshot(view, &target, object, operation)
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

    fn unreadable(&self, target: &Path, corrupt: &Corrupt) -> LedgerError {
        LedgerError::Unreadable {
            ledger: self.name(),
            reason: format!(
                "{} at byte offset {}: {}",
                target.display(),
                corrupt.offset,
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

    /// Opens (once) and locks the sidecar of `target`.
    fn flock<'s>(
        &self,
        slot: &'s mut Option<Sidecar>,
        target: &Path,
        operation: &'static str,
    ) -> Result<Flock<'s>, LedgerError> {
        let path = with_suffix(target, ".lock");
        for _ in 0..3 {
            if slot.as_ref().is_none_or(|s| s.path != path) {
                *slot = None;
                let open = || {
                    OpenOptions::new()
                        .create(true)
                        .truncate(false)
                        .read(true)
                        .write(true)
                        .open(&path)
                };
                let file = match open() {
                    Err(e) if e.kind() == io::ErrorKind::NotFound => {
                        fs::create_dir_all(directory_of(&path))
                            .map_err(|e| self.io_error(operation, "creating the directory", &e))?;
                        open()
                    }
                    other => other,
                }
                .map_err(|e| self.io_error(operation, "opening the lock file", &e))?;
                *slot = Some(Sidecar {
                    path: path.clone(),
                    file,
                });
            }
            let Some(sidecar) = slot.as_ref() else { break };
            sidecar
                .file
                .lock()
                .map_err(|e| self.io_error(operation, "locking", &e))?;
            // Someone may have removed or replaced the sidecar: a lock on
            // an unlinked file excludes nobody.
            let held = sidecar.file.metadata().ok();
            let named = fs::metadata(&path).ok();
            let same = matches!((&held, &named), (Some(h), Some(n)) if h.dev() == n.dev() && h.ino() == n.ino());
            if same {
                // Reborrow for the guard's lifetime.
                let Some(sidecar) = slot.as_ref() else { break };
                return Ok(Flock(&sidecar.file));
            }
            let _ = sidecar.file.unlock();
            *slot = None;
        }
        Err(LedgerError::Transient {
            ledger: self.name(),
            operation,
            message: format!("the lock file {} keeps being replaced", path.display()),
        })
    }

    /// Brings `view` up to date with the file at `target`: reads only what
    /// was appended since, unless the file was replaced. With `write`
    /// (under the flock) the file is opened for writing and a torn final
    /// record is truncated.
    fn refresh(
        &self,
        view: &mut Option<View>,
        target: &Path,
        write: bool,
        operation: &'static str,
    ) -> Result<(), LedgerError> {
        let result = self.try_refresh(view, target, write, operation);
        if result.is_err() {
            *view = None;
        }
        result
    }

    fn try_refresh(
        &self,
        view: &mut Option<View>,
        target: &Path,
        write: bool,
        operation: &'static str,
    ) -> Result<(), LedgerError> {
        let meta = match fs::metadata(target) {
            Ok(meta) => meta,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                *view = Some(View {
                    target: target.to_path_buf(),
                    file: None,
                    legacy_lock: None,
                    state: None,
                    end: 0,
                    torn: 0,
                });
                return Ok(());
            }
            Err(e) => return Err(self.io_error(operation, "reading", &e)),
        };
        let cached = view.as_mut().filter(|v| {
            v.target == target
                && v.file
                    .as_ref()
                    .is_some_and(|f| f.dev == meta.dev() && f.ino == meta.ino())
                && meta.len() >= v.end
                && (v.legacy_lock.is_none() || meta.len() == v.end)
        });
        let Some(current) = cached else {
            *view = Some(self.load(target, write, operation)?);
            return self.finish_refresh(view, write, operation);
        };
        if write && current.file.as_ref().is_some_and(|f| !f.writable) {
            let opened = self.open(target, true, operation)?;
            if current
                .file
                .as_ref()
                .is_some_and(|f| f.dev != opened.dev || f.ino != opened.ino)
            {
                *view = Some(self.load(target, write, operation)?);
                return self.finish_refresh(view, write, operation);
            }
            current.file = Some(opened);
        }
        if current.legacy_lock.is_none() && meta.len() > current.end {
            let Some(opened) = current.file.as_ref() else {
                return Ok(());
            };
            let mut tail = vec![0; (meta.len() - current.end) as usize];
            opened
                .file
                .read_exact_at(&mut tail, current.end)
                .map_err(|e| self.io_error(operation, "reading", &e))?;
            let replayed = journal::replay(&tail, current.end, &mut current.state, false)
                .map_err(|c| self.unreadable(target, &c))?;
            current.end = replayed.end;
            current.torn = replayed.torn;
        } else if meta.len() == current.end {
            current.torn = 0;
        }
        self.finish_refresh(view, write, operation)
    }

    fn finish_refresh(
        &self,
        view: &mut Option<View>,
        write: bool,
        operation: &'static str,
    ) -> Result<(), LedgerError> {
        let Some(current) = view.as_mut() else {
            return Ok(());
        };
        if let (true, Some(opened)) = (write && current.torn > 0, current.file.as_ref()) {
            tracing::warn!(
                file = %current.target.display(),
                offset = current.end,
                bytes = current.torn,
                "dropping a torn final record left by a crash (it was never acknowledged)"
            );
            opened
                .file
                .set_len(current.end)
                .map_err(|e| self.io_error(operation, "truncating a torn record", &e))?;
            current.torn = 0;
        }
        Ok(())
    }

    fn open(
        &self,
        target: &Path,
        write: bool,
        operation: &'static str,
    ) -> Result<Opened, LedgerError> {
        let file = OpenOptions::new()
            .read(true)
            .write(write)
            .open(target)
            .map_err(|e| self.io_error(operation, "opening", &e))?;
        let meta = file
            .metadata()
            .map_err(|e| self.io_error(operation, "reading", &e))?;
        Ok(Opened {
            file,
            dev: meta.dev(),
            ino: meta.ino(),
            writable: write,
        })
    }

    fn load(
        &self,
        target: &Path,
        write: bool,
        operation: &'static str,
    ) -> Result<View, LedgerError> {
        let opened = match self.open(target, write, operation) {
            Err(LedgerError::Permanent { .. }) if !target.exists() => {
                return Ok(View {
                    target: target.to_path_buf(),
                    file: None,
                    legacy_lock: None,
                    state: None,
                    end: 0,
                    torn: 0,
                });
            }
            other => other?,
        };
        let bytes = read_all(&opened.file).map_err(|e| self.io_error(operation, "reading", &e))?;
        let parsed = journal::parse(&bytes).map_err(|c| self.unreadable(target, &c))?;
        Ok(View {
            target: target.to_path_buf(),
            file: Some(opened),
            legacy_lock: parsed.legacy_lock,
            state: parsed.state,
            end: parsed.replayed.end,
            torn: parsed.replayed.torn,
        })
    }

    /// Runs `read` on the current state. A read takes no lock; damage found
    /// without it is checked again under it (a writer may have been busy).
    fn with_state<R>(
        &self,
        operation: &'static str,
        read: impl FnOnce(Option<&Object>) -> R,
    ) -> Result<R, LedgerError> {
        let target = self.resolve(operation)?;
        let mut handle = self.handle();
        let Handle { sidecar, view } = &mut *handle;
        if self.refresh(view, &target, false, operation).is_err() {
            // Damage, or a file that shrank under the read (a writer
            // truncating a torn record): decide under the flock.
            let _flock = self.flock(sidecar, &target, operation)?;
            self.refresh(view, &target, false, operation)?;
        }
        Ok(read(view.as_ref().and_then(|v| v.state.as_ref())))
    }

    /// One mutation under the flock: `plan` decides against the current
    /// state and returns the change, which is stored before it is applied.
    fn mutate<R>(
        &self,
        operation: &'static str,
        plan: impl FnOnce(Option<&Object>) -> Result<(R, Option<Change>), LedgerError>,
    ) -> Result<R, LedgerError> {
        let target = self.resolve(operation)?;
        let mut handle = self.handle();
        let Handle { sidecar, view } = &mut *handle;
        let flock = self.flock(sidecar, &target, operation)?;
        self.refresh(view, &target, true, operation)?;
        let (result, change) = plan(view.as_ref().and_then(|v| v.state.as_ref()))?;
        if let Some(change) = change {
            let stored = self.store(flock.0, view, &target, change, operation);
            if stored.is_err() {
                *view = None;
            }
            stored?;
        }
        Ok(result)
    }

    fn store(
        &self,
        sidecar: &File,
        view: &mut Option<View>,
        target: &Path,
        change: Change,
        operation: &'static str,
    ) -> Result<(), LedgerError> {
        let Some(current) = view.as_mut() else {
            return Err(self.io_error(operation, "storing", &io::Error::other("no view")));
        };
        let journal_file = current
            .file
            .as_ref()
            .filter(|_| current.legacy_lock.is_none());
        let Some(opened) = journal_file else {
            // No file yet, or the older format: write a whole new file.
            let mut state = current.state.take();
            change.apply(&mut state);
            let Some(object) = state else {
                return Err(self.io_error(operation, "storing", &io::Error::other("no object")));
            };
            self.import_legacy_lock(sidecar, current, operation)?;
            return self.replace_with_snapshot(view, target, object, operation);
        };
        let line = journal::encode_change(&change);
        let size = current.end + line.len() as u64;
        let live = current
            .state
            .as_ref()
            .map_or(0, |o| o.bytes() + 32 * o.keys() as u64);
        if size > self.compact_min && size > 2 * (live + line.len() as u64) {
            let mut state = current.state.take();
            change.apply(&mut state);
            let Some(object) = state else {
                return Err(self.io_error(operation, "storing", &io::Error::other("no object")));
            };
            return self.replace_with_snapshot(view, target, object, operation);
        }
        let appended = opened
            .file
            .write_all_at(&line, current.end)
            .and_then(|()| opened.file.sync_data());
        if let Err(e) = appended {
            // Nothing was acknowledged: take the partial record back.
            let _ = opened.file.set_len(current.end);
            return Err(self.io_error(operation, "appending to the journal", &e));
        }
        current.end = size;
        change.apply(&mut current.state);
        Ok(())
    }

    /// Moves the lock of an older-format file into the sidecar, unless the
    /// sidecar already holds one.
    fn import_legacy_lock(
        &self,
        sidecar: &File,
        current: &View,
        operation: &'static str,
    ) -> Result<(), LedgerError> {
        let Some(legacy) = current.legacy_lock.as_ref() else {
            return Ok(());
        };
        if *legacy == LockState::default() {
            return Ok(());
        }
        let bytes = read_all_at(sidecar)
            .map_err(|e| self.io_error(operation, "reading the lock file", &e))?;
        if !bytes.is_empty() {
            return Ok(());
        }
        write_lock(sidecar, legacy)
            .map_err(|e| self.io_error(operation, "writing the lock file", &e))
    }

    /// Replaces the file at `target` with a snapshot of `object`: a
    /// temporary file beside it, fsync, rename, fsync of the directory.
    fn replace_with_snapshot(
        &self,
        view: &mut Option<View>,
        target: &Path,
        object: Object,
        operation: &'static str,
    ) -> Result<(), LedgerError> {
        *view = None;
        let dir = directory_of(target);
        let name = target
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let prefix = format!("{name}.tmp.");
        // Under the flock nobody else is writing one: any left is a crash's.
        if let Ok(entries) = fs::read_dir(&dir) {
            for entry in entries.flatten() {
                if entry.file_name().to_string_lossy().starts_with(&prefix) {
                    let _ = fs::remove_file(entry.path());
                }
            }
        }
        let tmp = dir.join(format!(
            "{prefix}{}.{}",
            std::process::id(),
            TMP_SEQUENCE.fetch_add(1, Ordering::Relaxed)
        ));
        let bytes = journal::encode_file(&object);
        let permissions = fs::metadata(target).ok().map(|m| m.permissions());
        let written = (|| {
            let file = OpenOptions::new()
                .read(true)
                .write(true)
                .create_new(true)
                .open(&tmp)?;
            if let Some(permissions) = permissions {
                file.set_permissions(permissions)?;
            }
            file.write_all_at(&bytes, 0)?;
            file.sync_all()?;
            fs::rename(&tmp, target)?;
            // The rename is durable only once the directory entry is.
            File::open(&dir)?.sync_all()?;
            Ok::<File, io::Error>(file)
        })();
        let file = written.map_err(|e| {
            let _ = fs::remove_file(&tmp);
            self.io_error(operation, "writing", &e)
        })?;
        let meta = file
            .metadata()
            .map_err(|e| self.io_error(operation, "writing", &e))?;
        *view = Some(View {
            target: target.to_path_buf(),
            file: Some(Opened {
                file,
                dev: meta.dev(),
                ino: meta.ino(),
                writable: true,
            }),
            legacy_lock: None,
            state: Some(object),
            end: bytes.len() as u64,
            torn: 0,
        });
        Ok(())
    }

    /// Runs `change` on the run lock in the sidecar, under the flock; the
    /// ledger file is not touched (except read once, the first time, for
    /// the lock an older-format file may carry).
    fn with_lock<R>(
        &self,
        operation: &'static str,
        change: impl FnOnce(&mut LockState) -> Result<R, LedgerError>,
    ) -> Result<R, LedgerError> {
        let target = self.resolve(operation)?;
        let mut handle = self.handle();
        let Handle { sidecar, view } = &mut *handle;
        let flock = self.flock(sidecar, &target, operation)?;
        let bytes = read_all_at(flock.0)
            .map_err(|e| self.io_error(operation, "reading the lock file", &e))?;
        let contents = journal::parse_lock(&bytes).map_err(|reason| LedgerError::Unreadable {
            ledger: self.name(),
            reason: format!("{}: {reason}", with_suffix(&target, ".lock").display()),
        })?;
        let mut state = match contents {
            LockContents::State(state) => state,
            LockContents::Empty => {
                self.refresh(view, &target, false, operation)?;
                view.as_ref()
                    .and_then(|v| v.legacy_lock.clone())
                    .unwrap_or_default()
            }
            LockContents::Damaged(why) => {
                tracing::warn!(
                    file = %with_suffix(&target, ".lock").display(),
                    why,
                    "the run lock record is damaged (a holder died writing it); the lock is free"
                );
                LockState::default()
            }
        };
        let before = state.clone();
        let result = change(&mut state)?;
        if state != before {
            write_lock(flock.0, &state)
                .map_err(|e| self.io_error(operation, "writing the lock file", &e))?;
        }
        Ok(result)
    }
}

fn read_all_at(file: &File) -> io::Result<Vec<u8>> {
    let len = file.metadata()?.len();
    let mut bytes = vec![0; len as usize];
    file.read_exact_at(&mut bytes, 0)?;
    Ok(bytes)
}

fn write_lock(file: &File, state: &LockState) -> io::Result<()> {
    let bytes = journal::encode_lock(state);
    file.write_all_at(&bytes, 0)?;
    file.set_len(bytes.len() as u64)
}

#[async_trait]
impl Ledger for FileLedger {
    fn describe(&self) -> String {
        self.name()
    }

    async fn read(&self) -> Result<Option<LedgerSnapshot>, LedgerError> {
        self.with_state("read", |state| state.map(|o| o.snapshot(self.budget)))
    }

    async fn create(&self, entries: &[(Slug, LedgerEntry)]) -> Result<(), LedgerError> {
        let name = self.name();
        self.mutate("create", |state| {
            document::plan_create(&name, self.budget, state, entries).map(|c| ((), Some(c)))
        })
    }

    async fn write(
        &self,
        entries: &[(Slug, LedgerEntry)],
        mode: WriteMode,
    ) -> Result<WriteReport, LedgerError> {
        let name = self.name();
        self.mutate("write", |state| {
            document::plan_write(&name, self.budget, state, entries, mode)
        })
    }

    async fn note_attempt(&self, slug: &Slug, token: &str, floor: u32) -> Result<u32, LedgerError> {
        let name = self.name();
        self.mutate("note attempt", |state| {
            document::plan_note_attempt(&name, self.budget, state, slug, token, floor)
        })
    }
}

#[async_trait]
impl Lock for FileLedger {
    async fn acquire(&self, holder: &str, ttl: Duration) -> Result<Lease, LedgerError> {
        let name = self.name();
        let now = self.clock.now();
        self.with_lock("acquire lock", |lock| {
            lock.acquire(&name, holder, ttl, now, |g| format!("{g}.{:x}", nonce()))
        })
    }

    async fn renew(&self, lease: &Lease, ttl: Duration) -> Result<Lease, LedgerError> {
        let name = self.name();
        let now = self.clock.now();
        self.with_lock("renew lock", |lock| lock.renew(&name, lease, ttl, now))
    }

    async fn release(&self, lease: &Lease) -> Result<(), LedgerError> {
        self.with_lock("release lock", |lock| {
            lock.release(lease);
            Ok(())
        })
    }
}
