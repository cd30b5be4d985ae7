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
    /// The view (its epoch and end, see [`View`]) in which every stored record was last found
    /// held. A view with the same epoch and end has the same state (nothing was read on or
    /// appended since, and it was not loaded anew), so the records need no looking up again:
    /// looking up every record at every write made a run of N migrations cost N²/2 lookups
    /// (issue 34). Any other view, or none, is checked record by record.
    checked: Option<(u64, u64)>,
}

/// The epoch and end of `view`, when there is one.
fn fingerprint(view: Option<&View>) -> Option<(u64, u64)> {
    view.map(|v| (v.epoch, v.end))
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
        let puts: Vec<(&String, &String)> = puts.into_iter().filter(|(k, _)| record(k)).collect();
        // The records still known held: the check just before this store found every one held in
        // this same view (its epoch unchanged: only this store appended to it), a put changes
        // only its own keys, and those are looked up here. Anything else is checked in full at
        // the next operation.
        let data = state(view).map(Object::data);
        let same_view = matches!(
            (self.checked, view),
            (Some((epoch, _)), Some(v)) if epoch == v.epoch
        );
        let puts_held = puts.iter().all(|(k, v)| held(data, k, v));
        self.checked = if same_view && puts_held && matches!(change, Change::Put { .. }) {
            fingerprint(view)
        } else {
            None
        };
        for (k, v) in puts {
            self.stored.insert(k.clone(), v.clone());
        }
    }
}

/// Whether `data` holds what storing `value` under `key` left: the value, or no key at all for a
/// clearing value.
fn held(data: Option<&BTreeMap<String, String>>, key: &str, value: &str) -> bool {
    let now = data.and_then(|d| d.get(key));
    if keys::is_clearing(key, value) {
        now.is_none()
    } else {
        now.is_some_and(|n| n == value)
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
            // The same view as at the last check that found them all held: so are they now.
            let unchanged = w.checked.is_some() && w.checked == fingerprint(view);
            let gone: Vec<&str> = if unchanged {
                Vec::new()
            } else {
                w.stored
                    .iter()
                    .filter(|(k, v)| !held(data, k, v))
                    .map(|(k, _)| k.as_str())
                    .collect()
            };
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
        w.checked = fingerprint(view);
        Ok(())
    }
}
