//! The run lock in its sidecar file `PATH.lock`, never in the ledger (and the lock a v1
//! document carried, imported once).

use std::fs::File;
use std::io::{self};
use std::os::unix::fs::FileExt;
use std::path::Path;

use migration_core::ledger::LedgerError;
use migration_core::object::LockState;

use crate::FileLedger;
use crate::file::{Handle, View, with_suffix};
use crate::journal::{self, LockContents};

impl FileLedger {
    /// Moves the lock of an older-format file into the sidecar, unless the
    /// sidecar already holds one.
    pub(super) fn import_legacy_lock(
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

    /// Runs `change` on the run lock in the sidecar, under the flock; the
    /// ledger file is not touched (except read once, the first time, for
    /// the lock an older-format file may carry).
    pub(super) fn with_lock<R>(
        &self,
        operation: &'static str,
        change: impl FnOnce(&mut LockState) -> Result<R, LedgerError>,
    ) -> Result<R, LedgerError> {
        let target = self.resolve(operation)?;
        let mut handle = self.handle();
        let Handle { sidecar, view, .. } = &mut *handle;
        let flock = self.flock(sidecar, &target, operation)?;
        let bytes = read_all_at(flock.0)
            .map_err(|e| self.io_error(operation, "reading the lock file", &e))?;
        if bytes.is_empty() {
            // The lock of an older-format file lives in that file.
            self.refresh(view, &target, false, operation)?;
        }
        let mut state = self.lock_state_of(&bytes, view.as_ref(), &target)?;
        let before = state.clone();
        let result = change(&mut state)?;
        if state != before {
            write_lock(flock.0, &state)
                .map_err(|e| self.io_error(operation, "writing the lock file", &e))?;
        }
        Ok(result)
    }
}

impl FileLedger {
    /// The run lock as the sidecar `sidecar` (held under its flock) records
    /// it, or as the older-format file `current` carries it when the
    /// sidecar is empty.
    pub(super) fn lock_state(
        &self,
        sidecar: &File,
        current: Option<&View>,
        target: &Path,
        operation: &'static str,
    ) -> Result<LockState, LedgerError> {
        let bytes = read_all_at(sidecar)
            .map_err(|e| self.io_error(operation, "reading the lock file", &e))?;
        self.lock_state_of(&bytes, current, target)
    }

    fn lock_state_of(
        &self,
        bytes: &[u8],
        current: Option<&View>,
        target: &Path,
    ) -> Result<LockState, LedgerError> {
        let contents = journal::parse_lock(bytes).map_err(|reason| LedgerError::Unreadable {
            ledger: self.name(),
            reason: format!("{}: {reason}", with_suffix(target, ".lock").display()),
        })?;
        Ok(match contents {
            LockContents::State(state) => state,
            LockContents::Empty => current
                .and_then(|v| v.legacy_lock.clone())
                .unwrap_or_default(),
            LockContents::Damaged(why) => {
                tracing::warn!(
                    file = %with_suffix(target, ".lock").display(),
                    why,
                    "the run lock record is damaged (a holder died writing it); the lock is free"
                );
                LockState::default()
            }
        })
    }
}

pub(super) fn read_all_at(file: &File) -> io::Result<Vec<u8>> {
    let len = file.metadata()?.len();
    let mut bytes = vec![0; len as usize];
    file.read_exact_at(&mut bytes, 0)?;
    Ok(bytes)
}

pub(super) fn write_lock(file: &File, state: &LockState) -> io::Result<()> {
    let bytes = journal::encode_lock(state);
    file.write_all_at(&bytes, 0)?;
    file.set_len(bytes.len() as u64)
}
