//! The ledger file is the one the run planned on (issue 35): while a handle holds the run lock
//! it remembers the file's revision and every record it stored, and stops, naming the file, when
//! the file it reads or writes no longer holds them (an editor's save, `sed -i`, a restore of an
//! older copy, rsync). Without this a replaced file is simply reloaded, and a migration the run
//! recorded `ok` and fsynced vanishes while the run reports success.

use std::collections::BTreeMap;
use std::path::Path;

use migration_core::keys;
use migration_core::ledger::LedgerError;
use migration_core::object::{Change, Object};

use crate::FileLedger;
use crate::file::View;

/// What a handle holding the run lock has seen of the file and stored in it.
#[derive(Debug, Default)]
pub(super) struct Witness {
    /// The file as last read or written under the lock.
    seen: Option<Seen>,
    /// Every record key (an entry, a shared part) this handle stored under the lock, with the
    /// value it stored last.
    stored: BTreeMap<String, String>,
    /// Why the file is no longer the run's, once found: every later operation is refused the
    /// same way, so a retry cannot write on.
    replaced: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Seen {
    /// Device and inode, `None` while there is no file.
    identity: Option<(u64, u64)>,
    /// The object's revision, 0 while there is none.
    revision: u64,
}

impl Seen {
    fn of(view: Option<&View>) -> Seen {
        Seen {
            identity: view.and_then(|v| v.file.as_ref().map(|f| (f.dev, f.ino))),
            revision: state(view).map_or(0, Object::revision),
        }
    }
}

fn state(view: Option<&View>) -> Option<&Object> {
    view.and_then(|v| v.state.as_ref())
}

impl Witness {
    /// Notes the keys `change` stored, and the file as `view` now holds it as the one the run's
    /// records are in (the run's own write may have replaced it by a compaction).
    pub(super) fn stored(&mut self, change: &Change, view: Option<&View>) {
        self.seen = Some(Seen::of(view));
        let puts: Vec<(&String, &String)> = match change {
            Change::Create(object) => object.data().iter().collect(),
            Change::Put { puts, .. } => puts.iter().map(|(k, v)| (k, v)).collect(),
        };
        // Only records (entries and the shared parts they name) are kept: the run lock is fenced
        // by its own tenure and changes hands rightly between takers sharing a handle, and the
        // attempt marks and last failures are rewritten by the next runner once this one lost
        // its lock (that runner's refusal is the lock's, not a replaced file's).
        let record = |k: &str| keys::is_entry_key(k) || k.starts_with(keys::CONTEXT_PREFIX);
        for (k, v) in puts.into_iter().filter(|(k, _)| record(k)) {
            self.stored.insert(k.clone(), v.clone());
        }
    }
}

impl FileLedger {
    /// Checks the file `view` holds against what `witness` saw and stored (nothing to check
    /// while the handle holds no run lock), and then takes it as seen. A file replaced by
    /// another whose revision has not gone back and that holds every record the run stored is
    /// accepted: another process's compaction renames a new file into place too.
    pub(super) fn check_witness(
        &self,
        witness: &mut Option<Witness>,
        view: Option<&View>,
        target: &Path,
        operation: &'static str,
    ) -> Result<(), LedgerError> {
        let Some(w) = witness.as_mut() else {
            return Ok(());
        };
        if w.replaced.is_none()
            && let Some(seen) = w.seen
        {
            let now = Seen::of(view);
            let data = state(view).map(Object::data);
            let mut why = Vec::new();
            if now.identity != seen.identity {
                why.push(match (seen.identity, now.identity) {
                    (Some((_, before)), Some((_, after))) => {
                        format!("another file is in its place (inode {before}, now {after})")
                    }
                    (Some(_), None) => "the file is gone".to_owned(),
                    _ => "a file appeared where there was none".to_owned(),
                });
            }
            if now.revision < seen.revision {
                why.push(format!(
                    "its revision went back from {} to {}",
                    seen.revision, now.revision
                ));
            }
            let gone: Vec<&str> = w
                .stored
                .iter()
                .filter(|(k, v)| {
                    let held = data.and_then(|d| d.get(*k));
                    if keys::is_clearing(k, v) {
                        held.is_some()
                    } else {
                        held != Some(*v)
                    }
                })
                .map(|(k, _)| k.as_str())
                .collect();
            if !gone.is_empty() {
                why.push(format!(
                    "records this run stored and had acknowledged are gone or changed: {}",
                    gone.join(", ")
                ));
            }
            if now.revision < seen.revision || !gone.is_empty() {
                w.replaced = Some(why.join("; "));
            }
        }
        if let Some(why) = &w.replaced {
            return Err(LedgerError::Permanent {
                ledger: self.name(),
                operation,
                message: format!(
                    "the ledger file {} is no longer the one this run read and wrote to: {why}; \
                     the run stops here and writes nothing more. Put back the file it wrote to \
                     (its records are named above), or keep the file as it is now, run \
                     `migrate verify`, and let the migrations whose records are gone run again",
                    target.display()
                ),
            });
        }
        w.seen = Some(Seen::of(view));
        Ok(())
    }
}
