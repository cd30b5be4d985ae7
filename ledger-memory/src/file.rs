//! The file-backed ledger: the in-memory document persisted as JSON.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use migration_core::ledger::{Lease, Ledger, LedgerError, LedgerSnapshot, WriteMode, WriteReport};
use migration_core::lock::Lock;
use migration_core::{Clock, LedgerEntry, Slug, SystemClock};

use crate::DEFAULT_BUDGET_BYTES;
use crate::document::{Document, FORMAT};

/// A ledger stored in one JSON file: the embedded default, for running the
/// engine with no cluster.
///
/// Every mutation takes an exclusive advisory lock (`flock`) on a sidecar
/// `<file>.lock`, re-reads the file, applies the change and replaces the file
/// atomically (write a temporary file, fsync, rename, fsync the directory).
/// So several processes can share one file ledger: writes never interleave,
/// a crash leaves either the old or the new file, and the run lock (stored
/// in the document, with an expiry) works across processes.
///
/// File I/O here is synchronous: each operation holds the flock for one
/// read-modify-write of a small file, which is shorter than handing the
/// work to a blocking thread pool would be.
#[derive(Debug, Clone)]
pub struct FileLedger {
    path: PathBuf,
    lock_path: PathBuf,
    clock: Arc<dyn Clock>,
    budget: Option<u64>,
}

impl FileLedger {
    /// A ledger stored at `path` (created on the first write).
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self::with_clock(path, Arc::new(SystemClock))
    }

    /// A ledger at `path` whose lock expiry follows `clock`.
    pub fn with_clock(path: impl Into<PathBuf>, clock: Arc<dyn Clock>) -> Self {
        let path = path.into();
        let mut lock_name = path
            .file_name()
            .map(|n| n.to_os_string())
            .unwrap_or_default();
        lock_name.push(".lock");
        let lock_path = path.with_file_name(lock_name);
        FileLedger {
            path,
            lock_path,
            clock,
            budget: Some(DEFAULT_BUDGET_BYTES),
        }
    }

    /// Replaces the size budget (`None`: unlimited).
    pub fn with_budget(mut self, budget: Option<u64>) -> Self {
        self.budget = budget;
        self
    }

    /// The JSON file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Stores `value` under `key` verbatim, creating the ledger object if it
    /// is absent. For tests and repairs: plants corrupt values or `version`.
    pub fn put_raw(&self, key: &str, value: &str) -> Result<(), LedgerError> {
        self.mutate("put raw", |doc| {
            let stored = doc.ledger.get_or_insert_with(Default::default);
            stored.data.insert(key.to_owned(), value.to_owned());
            stored.revision += 1;
            Ok(())
        })
    }

    /// Every raw key and value, or `None` when the ledger object is absent.
    pub fn raw_data(
        &self,
    ) -> Result<Option<std::collections::BTreeMap<String, String>>, LedgerError> {
        Ok(self.load("read")?.ledger.map(|s| s.data))
    }

    fn name(&self) -> String {
        format!("file ledger {}", self.path.display())
    }

    fn io_error(&self, operation: &'static str, what: &str, e: &std::io::Error) -> LedgerError {
        LedgerError::Permanent {
            ledger: self.name(),
            operation,
            message: format!("{what}: {e}"),
        }
    }

    fn load(&self, operation: &'static str) -> Result<Document, LedgerError> {
        let bytes = match fs::read(&self.path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Document::default()),
            Err(e) => return Err(self.io_error(operation, "reading", &e)),
        };
        let doc: Document =
            serde_json::from_slice(&bytes).map_err(|e| LedgerError::Unreadable {
                ledger: self.name(),
                reason: format!("not a ledger document: {e}"),
            })?;
        if doc.format != FORMAT {
            return Err(LedgerError::Unreadable {
                ledger: self.name(),
                reason: format!("unknown format {:?} (expected {FORMAT:?})", doc.format),
            });
        }
        Ok(doc)
    }

    fn store(&self, operation: &'static str, doc: &Document) -> Result<(), LedgerError> {
        let mut bytes = serde_json::to_vec_pretty(doc).map_err(|e| LedgerError::Permanent {
            ledger: self.name(),
            operation,
            message: format!("encoding: {e}"),
        })?;
        bytes.push(b'\n');
        let dir = match self.path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let mut tmp_name = self
            .path
            .file_name()
            .map(|n| n.to_os_string())
            .unwrap_or_default();
        tmp_name.push(format!(".tmp.{}", std::process::id()));
        let tmp = self.path.with_file_name(tmp_name);
        let result = (|| {
            let mut file = File::create(&tmp)?;
            file.write_all(&bytes)?;
            file.sync_all()?;
            fs::rename(&tmp, &self.path)?;
            // The rename is durable only once the directory entry is.
            File::open(&dir)?.sync_all()
        })();
        result.map_err(|e| {
            let _ = fs::remove_file(&tmp);
            self.io_error(operation, "writing", &e)
        })
    }

    /// Runs one read-modify-write under the cross-process lock.
    fn mutate<R>(
        &self,
        operation: &'static str,
        change: impl FnOnce(&mut Document) -> Result<R, LedgerError>,
    ) -> Result<R, LedgerError> {
        if let Some(dir) = self.path.parent().filter(|p| !p.as_os_str().is_empty()) {
            fs::create_dir_all(dir)
                .map_err(|e| self.io_error(operation, "creating the directory", &e))?;
        }
        let guard = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&self.lock_path)
            .map_err(|e| self.io_error(operation, "opening the lock file", &e))?;
        guard
            .lock()
            .map_err(|e| self.io_error(operation, "locking", &e))?;
        let mut doc = self.load(operation)?;
        let before = doc.clone();
        let result = change(&mut doc)?;
        if doc != before {
            self.store(operation, &doc)?;
        }
        // Dropping the file handle releases the flock, on every path.
        drop(guard);
        Ok(result)
    }
}

#[async_trait]
impl Ledger for FileLedger {
    fn describe(&self) -> String {
        self.name()
    }

    async fn read(&self) -> Result<Option<LedgerSnapshot>, LedgerError> {
        // The file is only ever replaced by rename, so a plain read sees a
        // whole old or a whole new document without taking the lock.
        Ok(self.load("read")?.snapshot(self.budget))
    }

    async fn create(&self, entries: &[(Slug, LedgerEntry)]) -> Result<(), LedgerError> {
        let name = self.name();
        self.mutate("create", |doc| doc.create(&name, self.budget, entries))
    }

    async fn write(
        &self,
        entries: &[(Slug, LedgerEntry)],
        mode: WriteMode,
    ) -> Result<WriteReport, LedgerError> {
        let name = self.name();
        self.mutate("write", |doc| doc.write(&name, self.budget, entries, mode))
    }

    async fn note_attempt(&self, slug: &Slug, token: &str, floor: u32) -> Result<u32, LedgerError> {
        let name = self.name();
        self.mutate("note attempt", |doc| {
            doc.note_attempt(&name, self.budget, slug, token, floor)
        })
    }
}

#[async_trait]
impl Lock for FileLedger {
    async fn acquire(&self, holder: &str, ttl: Duration) -> Result<Lease, LedgerError> {
        let name = self.name();
        let now = self.clock.now();
        self.mutate("acquire lock", |doc| doc.acquire(&name, holder, ttl, now))
    }

    async fn renew(&self, lease: &Lease, ttl: Duration) -> Result<Lease, LedgerError> {
        let name = self.name();
        let now = self.clock.now();
        self.mutate("renew lock", |doc| doc.renew(&name, lease, ttl, now))
    }

    async fn release(&self, lease: &Lease) -> Result<(), LedgerError> {
        self.mutate("release lock", |doc| {
            doc.release(lease);
            Ok(())
        })
    }
}
