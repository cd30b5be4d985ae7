//! # ledger-dir
//!
//! An example [`Ledger`] backend, written from the trait's documentation as
//! an author outside this repository would: the ledger object is one JSON
//! file, `ledger.json`, in a directory of its own. Every operation takes an
//! exclusive `flock` on `lock` in that directory (so it is safe across
//! threads and processes), reads the object, lets core's planners in
//! [`migration_core::object`] decide the change (the entry format, the
//! conditional write, the size budget and the run lock kept in the object),
//! and stores the result by writing `ledger.json.tmp`, syncing it and
//! renaming it over `ledger.json`, then syncing the directory. A crash
//! leaves either the old file or the new one; a leftover `.tmp` is never
//! read, and the next write replaces it.
//!
//! It is the measure of the trait: its own code stays under 200 lines and it
//! passes the conformance suite unchanged (`tests/`).

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, ErrorKind};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use migration_core::last_failure::LastFailure;
use migration_core::ledger::{Lease, LedgerError, LedgerSnapshot, WriteMode, WriteReport};
use migration_core::lock::Lock;
use migration_core::object::{self, Change, Object};
use migration_core::step::{StepReport, StepWrite};
use migration_core::{Clock, Ledger, LedgerEntry, Slug};

/// What a planner in [`object`] answers: its result and the change to store.
type Planned<T> = Result<(T, Option<Change>), LedgerError>;

/// A ledger kept as `ledger.json` in a directory. Clones and handles opened
/// on the same directory (in any process) share it.
#[derive(Debug, Clone)]
pub struct DirLedger {
    dir: PathBuf,
    clock: Arc<dyn Clock>,
    budget: Option<u64>,
}

impl DirLedger {
    /// A ledger in `dir` (created if missing), its run lock expiring on
    /// `clock`, refusing writes past `budget` bytes (`None`: no budget).
    pub fn open(
        dir: impl Into<PathBuf>,
        clock: Arc<dyn Clock>,
        budget: Option<u64>,
    ) -> io::Result<Self> {
        let dir = dir.into();
        fs::create_dir_all(&dir)?;
        Ok(DirLedger { dir, clock, budget })
    }

    /// The file holding the object.
    pub fn path(&self) -> PathBuf {
        self.dir.join("ledger.json")
    }

    /// A local file's errors (a full disk, a permission, a bad path) do not
    /// pass by retrying, and std already retries an interrupted call: every
    /// one is permanent, as the trait's rules say.
    fn io(&self, operation: &'static str, error: io::Error) -> LedgerError {
        let (ledger, message) = (self.describe(), error.to_string());
        LedgerError::Permanent {
            ledger,
            operation,
            message,
        }
    }

    /// Runs `plan` on the stored object with the directory locked, and
    /// stores the change it returns before unlocking: the check and the
    /// write are one conditional operation, across threads and processes.
    fn change<T>(
        &self,
        operation: &'static str,
        plan: impl FnOnce(&str, Option<u64>, Option<&Object>) -> Planned<T>,
    ) -> Result<T, LedgerError> {
        let io = |e| self.io(operation, e);
        let mut options = OpenOptions::new();
        let lock = options.create(true).truncate(false).write(true);
        let lock = lock.open(self.dir.join("lock")).map_err(io)?;
        lock.lock().map_err(io)?;
        let mut current = self.load(operation)?;
        let (out, change) = plan(&self.describe(), self.budget, current.as_ref())?;
        if let Some(change) = change {
            change.apply(&mut current);
            if let Some(object) = &current {
                self.store(object).map_err(io)?;
            }
        }
        Ok(out)
    }

    /// The object, `None` before the first create. A file that does not
    /// parse is refused whole: nothing in it can be trusted.
    fn load(&self, operation: &'static str) -> Result<Option<Object>, LedgerError> {
        let text = match fs::read(self.path()) {
            Ok(text) => text,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(self.io(operation, e)),
        };
        let (revision, data): (u64, BTreeMap<String, String>) = serde_json::from_slice(&text)
            .map_err(|e| LedgerError::Unreadable {
                ledger: self.describe(),
                reason: e.to_string(),
            })?;
        Ok(Some(Object::new(revision, data)))
    }

    fn store(&self, object: &Object) -> io::Result<()> {
        let tmp = self.dir.join("ledger.json.tmp");
        let file = File::create(&tmp)?;
        serde_json::to_writer(&file, &(object.revision(), object.data()))?;
        file.sync_all()?;
        fs::rename(&tmp, self.path())?;
        File::open(&self.dir)?.sync_all()
    }
}

#[async_trait]
impl Ledger for DirLedger {
    fn describe(&self) -> String {
        format!("directory ledger {}", self.dir.display())
    }

    async fn read(&self) -> Result<Option<LedgerSnapshot>, LedgerError> {
        self.change("read", |_, budget, current| {
            Ok((current.map(|o| o.snapshot(budget)), None))
        })
    }

    async fn create(&self, entries: &[(Slug, LedgerEntry)]) -> Result<(), LedgerError> {
        self.change("create", |name, budget, current| {
            object::plan_create(name, budget, current, entries).map(|c| ((), Some(c)))
        })
    }

    async fn write(
        &self,
        entries: &[(Slug, LedgerEntry)],
        mode: WriteMode,
    ) -> Result<WriteReport, LedgerError> {
        self.change("write", |name, budget, current| {
            object::plan_write(name, budget, current, entries, mode)
        })
    }

    async fn note_attempt(&self, slug: &Slug, token: &str, floor: u32) -> Result<u32, LedgerError> {
        self.change("note_attempt", |name, budget, current| {
            object::plan_note_attempt(name, budget, current, slug, token, floor)
        })
    }

    async fn note_failure(&self, slug: &Slug, failure: &LastFailure) -> Result<(), LedgerError> {
        self.change("note_failure", |name, budget, current| {
            object::plan_note_failure(name, budget, current, slug, failure).map(|c| ((), c))
        })
    }

    async fn write_step(&self, step: &StepWrite<'_>) -> Result<StepReport, LedgerError> {
        let now = self.clock.now();
        let token = migration_core::fence::new_token(now);
        self.change("write_step", |name, budget, current| {
            object::plan_step(name, budget, current, step, now, &token)
        })
    }
}

#[async_trait]
impl Lock for DirLedger {
    async fn acquire(&self, holder: &str, ttl: Duration) -> Result<Lease, LedgerError> {
        let now = self.clock.now();
        let token = migration_core::fence::new_token(now);
        self.change("acquire", |name, _, current| {
            object::plan_lock_take(name, current, holder, ttl, now, &token)
        })
    }

    async fn renew(&self, lease: &Lease, ttl: Duration) -> Result<Lease, LedgerError> {
        let now = self.clock.now();
        self.change("renew", |name, _, current| {
            object::plan_lock_renew(name, current, lease, ttl, now)
        })
    }

    async fn release(&self, lease: &Lease) -> Result<(), LedgerError> {
        self.change("release", |name, _, current| {
            object::plan_lock_release(name, current, lease)
        })
    }
}
