//! Reading and writing the file under its flock: refresh from the journal, append a
//! record, compact into a new snapshot.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::Path;
use std::sync::atomic::Ordering;

use migration_core::ledger::{LedgerError, LedgerSnapshot, SharedRecordRewritten};
use migration_core::object::{Change, LockState, Object};

use crate::FileLedger;
use crate::file::{
    Flock, Handle, Opened, Probe, Sidecar, TMP_SEQUENCE, View, directory_of, extend_mark,
    read_mark, with_suffix,
};
use crate::journal::{self};

/// A file opened and replayed ([`FileLedger::replay_file`]).
struct ReplayedFile {
    opened: Opened,
    /// `Some` for a whole-document (v1) file: the lock it carries.
    legacy_lock: Option<LockState>,
    /// How far the records go.
    records: journal::Replayed,
    /// Bytes read.
    len: u64,
}

impl FileLedger {
    /// Opens (once) and locks the sidecar of `target`.
    pub(super) fn flock<'s>(
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
                        // Private, as the ledger itself (see below).
                        .mode(0o600)
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
    pub(super) fn refresh(
        &self,
        view: &mut Option<View>,
        target: &Path,
        write: bool,
        operation: &'static str,
    ) -> Result<(), LedgerError> {
        // A view a failure left half brought up to date is dropped: the
        // next refresh loads the file again.
        let updated = (|| {
            let meta = match Probe::path(target, true) {
                Ok(meta) => meta,
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    *view = Some(View::absent(target));
                    return Ok(());
                }
                Err(e) => return Err(self.io_error(operation, "reading", &e)),
            };
            let cached = view.as_mut().filter(|v| {
                v.target == target
                    && v.file
                        .as_ref()
                        .is_some_and(|f| f.dev == meta.dev && f.ino == meta.ino)
                    && meta.len >= v.end
                    && (v.legacy_lock.is_none() || meta.len == v.end)
                    && v.file
                        .as_ref()
                        .is_some_and(|f| read_mark(&f.file, v.end).is_ok_and(|m| m == v.mark))
            });
            let Some(current) = cached else {
                *view = Some(self.load(target, write, operation)?);
                return Ok(());
            };
            if write && current.file.as_ref().is_some_and(|f| !f.writable) {
                let opened = self.open(target, true, operation)?;
                if current
                    .file
                    .as_ref()
                    .is_some_and(|f| f.dev != opened.dev || f.ino != opened.ino)
                {
                    *view = Some(self.load(target, write, operation)?);
                    return Ok(());
                }
                current.file = Some(opened);
            }
            if current.legacy_lock.is_none() && meta.len > current.end {
                let Some(opened) = current.file.as_ref() else {
                    return Ok(());
                };
                let mut tail = vec![0; (meta.len - current.end) as usize];
                opened
                    .file
                    .read_exact_at(&mut tail, current.end)
                    .map_err(|e| self.io_error(operation, "reading", &e))?;
                let replayed = journal::replay(&tail, current.end, &mut current.state, false)
                    .map_err(|c| self.unreadable(target, &c))?;
                extend_mark(
                    &mut current.mark,
                    &tail[..(replayed.end - current.end) as usize],
                );
                current.end = replayed.end;
                current.torn = replayed.torn;
            } else if meta.len == current.end {
                current.torn = 0;
            }
            current.len = meta.len;
            Ok(())
        })();
        // Under the flock, a torn final record the view ends before is cut
        // off the file.
        let result = updated.and_then(|()| {
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
                current.len = current.end;
            }
            Ok(())
        });
        if result.is_err() {
            *view = None;
        }
        result
    }

    pub(super) fn open(
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
        let meta = Probe::file(&file).map_err(|e| self.io_error(operation, "reading", &e))?;
        Ok(Opened {
            file,
            dev: meta.dev,
            ino: meta.ino,
            writable: write,
        })
    }

    pub(super) fn load(
        &self,
        target: &Path,
        write: bool,
        operation: &'static str,
    ) -> Result<View, LedgerError> {
        let mut state = None;
        let Some(replayed) = self.replay_file(target, write, operation, &mut state)? else {
            return Ok(View::absent(target));
        };
        if let Some(object) = state.as_mut() {
            object.refill();
        }
        let mark = read_mark(&replayed.opened.file, replayed.records.end)
            .map_err(|e| self.io_error(operation, "reading", &e))?;
        Ok(View {
            target: target.to_path_buf(),
            file: Some(replayed.opened),
            legacy_lock: replayed.legacy_lock,
            state,
            end: replayed.records.end,
            torn: replayed.records.torn,
            len: replayed.len,
            mark,
            epoch: View::next_epoch(),
        })
    }

    /// Opens the file at `target` and replays it into `state`; `None` when
    /// there is no file.
    fn replay_file(
        &self,
        target: &Path,
        write: bool,
        operation: &'static str,
        state: &mut impl journal::Target,
    ) -> Result<Option<ReplayedFile>, LedgerError> {
        let opened = match self.open(target, write, operation) {
            Err(LedgerError::Permanent { .. }) if !target.exists() => return Ok(None),
            other => other?,
        };
        let size = Probe::file(&opened.file)
            .map_err(|e| self.io_error(operation, "reading", &e))?
            .len;
        let (legacy_lock, records, len) =
            journal::load_into(&opened.file, size, state).map_err(|e| match e {
                journal::LoadError::Io(e) => self.io_error(operation, "reading", &e),
                journal::LoadError::Corrupt(c) => self.unreadable(target, &c),
            })?;
        Ok(Some(ReplayedFile {
            opened,
            legacy_lock,
            records,
            len,
        }))
    }

    /// Brings the view up to date for a read. A read takes no lock; damage
    /// found without it is checked again under it (a writer may have been
    /// busy).
    fn refresh_to_read(
        &self,
        handle: &mut Handle,
        target: &Path,
        operation: &'static str,
    ) -> Result<(), LedgerError> {
        let Handle { sidecar, view, .. } = handle;
        if self.refresh(view, target, false, operation).is_err() {
            // Damage, or a file that shrank under the read (a writer
            // truncating a torn record): decide under the flock.
            let _flock = self.flock(sidecar, target, operation)?;
            self.refresh(view, target, false, operation)?;
        }
        Ok(())
    }

    /// Runs `read` on the current state.
    pub(super) fn with_state<R>(
        &self,
        operation: &'static str,
        read: impl FnOnce(Option<&Object>) -> R,
    ) -> Result<R, LedgerError> {
        let target = self.resolve(operation)?;
        let mut handle = self.handle();
        self.refresh_to_read(&mut handle, &target, operation)?;
        Ok(read(handle.view.as_ref().and_then(|v| v.state.as_ref())))
    }

    /// The snapshot a read returns. A handle that has never taken the
    /// flock (it has only read: `plan`, `status`) keeps nothing for a next
    /// call: it decodes the records into the snapshot as they are replayed
    /// ([`Self::decode`]), so a large ledger's raw data is never held; only
    /// when that gives up, or finds damage, does it replay the raw keys and
    /// hand them to the snapshot, which frees each as it decodes it. A
    /// handle that locks or writes (a run) keeps the raw keys, and its next
    /// call reads only what was appended since.
    pub(super) fn read_snapshot(
        &self,
        operation: &'static str,
    ) -> Result<Option<LedgerSnapshot>, LedgerError> {
        let target = self.resolve(operation)?;
        let mut handle = self.handle();
        if handle.sidecar.is_none() && handle.view.is_none() {
            // Anything but a clean decoding (damage, a file changing under
            // the read, a rewritten shared record) takes the general path
            // below, which decides it (under the flock if need be).
            if let Ok(Ok(snapshot)) = self.decode(&target, operation) {
                return Ok(snapshot);
            }
        }
        self.refresh_to_read(&mut handle, &target, operation)?;
        let Handle { view, witness, .. } = &mut *handle;
        self.check_witness(witness, view.as_ref(), &target, operation)?;
        if handle.sidecar.is_none() {
            // No view is "not read yet": the next call loads the file anew.
            let state = handle.view.take().and_then(|v| v.state);
            return Ok(state.map(|o| o.into_snapshot(self.budget)));
        }
        Ok(handle
            .view
            .as_ref()
            .and_then(|v| v.state.as_ref())
            .map(|o| o.snapshot(self.budget)))
    }

    /// The snapshot of the file at `target`, decoded as it is replayed
    /// (see [`journal::Decoding`]): no raw key map and no view are built.
    /// The inner `Err`: the decoding gave up, the raw data must be decoded.
    fn decode(
        &self,
        target: &Path,
        operation: &'static str,
    ) -> Result<Result<Option<LedgerSnapshot>, SharedRecordRewritten>, LedgerError> {
        let mut decoding = journal::Decoding::default();
        if self
            .replay_file(target, false, operation, &mut decoding)?
            .is_none()
        {
            return Ok(Ok(None));
        }
        Ok(decoding.finish(self.budget))
    }

    /// One mutation under the flock: `plan` decides against the current
    /// state (the run lock, kept in the object, included) and returns the
    /// change, which is stored before it is applied. Deciding and appending
    /// under one flock is what makes a write conditional on the lock.
    pub(super) fn mutate<R>(
        &self,
        operation: &'static str,
        plan: impl FnOnce(Option<&Object>) -> Result<(R, Option<Change>), LedgerError>,
    ) -> Result<R, LedgerError> {
        let target = self.resolve(operation)?;
        let mut handle = self.handle();
        let Handle {
            sidecar,
            view,
            witness,
        } = &mut *handle;
        let _flock = self.flock(sidecar, &target, operation)?;
        self.refresh(view, &target, true, operation)?;
        // The witness first: a file replaced under the run (an older copy restored has lost the
        // run lock too) is told as replaced, naming the records gone.
        self.check_witness(witness, view.as_ref(), &target, operation)?;
        let (result, change) = plan(view.as_ref().and_then(|v| v.state.as_ref()))?;
        if let Some(change) = change {
            // Under the run lock, what is stored is remembered once it is acknowledged.
            let noted = witness.is_some().then(|| change.clone());
            let stored = self.store(view, change, operation);
            if stored.is_err() {
                *view = None;
            }
            stored?;
            if let (Some(w), Some(change)) = (witness.as_mut(), noted) {
                w.stored(&change, view.as_ref());
            }
        }
        Ok(result)
    }

    pub(super) fn store(
        &self,
        view: &mut Option<View>,
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
            let object = self.changed_object(current, change, operation)?;
            return self.replace_with_snapshot(view, object, operation);
        };
        let line = journal::encode_change(&change);
        let size = current.end + line.len() as u64;
        let live = current
            .state
            .as_ref()
            .map_or(0, |o| o.bytes() + 32 * o.keys() as u64);
        if size > self.compact_min && size > 2 * (live + line.len() as u64) {
            let object = self.changed_object(current, change, operation)?;
            return self.replace_with_snapshot(view, object, operation);
        }
        // Into the preallocated tail when the record fits with a NUL to
        // spare (its fdatasync then writes only its block); else the file
        // first grows by whole steps of NULs, made durable before the record
        // is written into them. A crash can then tear a record only inside
        // NULs that are on disk, which is how a reader tells a torn append
        // from a file cut short (see `journal`): one more sync per step of
        // growth (about 35 records of a run).
        let grown = (size >= current.len).then(|| journal::preallocated_len(size));
        if let Some(len) = grown {
            opened
                .file
                .set_len(len)
                .and_then(|()| opened.file.sync_data())
                .map_err(|e| {
                    let _ = opened.file.set_len(current.len);
                    self.io_error(operation, "growing the journal", &e)
                })?;
        }
        let appended = opened
            .file
            .write_all_at(&line, current.end)
            .and_then(|()| opened.file.sync_data());
        if let Err(e) = appended {
            // Nothing was acknowledged: take the partial record back (and
            // the tail with it; the next append makes a new one).
            let _ = opened.file.set_len(current.end);
            return Err(self.io_error(operation, "appending to the journal", &e));
        }
        current.end = size;
        current.len = grown.unwrap_or(current.len);
        extend_mark(&mut current.mark, &line);
        change.apply(&mut current.state);
        Ok(())
    }

    /// The object `current` holds with `change` applied, taken out of it for
    /// a new snapshot; a change that leaves no object cannot be stored.
    fn changed_object(
        &self,
        current: &mut View,
        change: Change,
        operation: &'static str,
    ) -> Result<Object, LedgerError> {
        let mut state = current.state.take();
        change.apply(&mut state);
        state.ok_or_else(|| self.io_error(operation, "storing", &io::Error::other("no object")))
    }

    /// Replaces the file `view` follows with a snapshot of `object`: a
    /// temporary file beside it, fsync, rename, fsync of the directory.
    pub(super) fn replace_with_snapshot(
        &self,
        view: &mut Option<View>,
        object: Object,
        operation: &'static str,
    ) -> Result<(), LedgerError> {
        // The old view is stale from here on, whatever happens.
        let Some(View { target, .. }) = view.take() else {
            return Err(self.io_error(operation, "storing", &io::Error::other("no view")));
        };
        let target = target.as_path();
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
        let mut bytes = journal::encode_file(&object);
        let end = bytes.len() as u64;
        let mut mark = Vec::new();
        extend_mark(&mut mark, &bytes);
        let len = journal::preallocated_len(end);
        bytes.resize(len as usize, 0);
        let permissions = fs::metadata(target).ok().map(|m| m.permissions());
        let written = (|| {
            // Created private: a failure's output tail is kept in the
            // ledger, redacted, and redaction is the second line (#35). An
            // existing ledger's own permissions are kept (below).
            let file = OpenOptions::new()
                .read(true)
                .write(true)
                .create_new(true)
                .mode(0o600)
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
        let meta = Probe::file(&file).map_err(|e| self.io_error(operation, "writing", &e))?;
        *view = Some(View {
            target: target.to_path_buf(),
            file: Some(Opened {
                file,
                dev: meta.dev,
                ino: meta.ino,
                writable: true,
            }),
            legacy_lock: None,
            state: Some(object),
            end,
            torn: 0,
            len,
            mark,
            epoch: View::next_epoch(),
        });
        Ok(())
    }
}
