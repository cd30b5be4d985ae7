//! # migration-core
//!
//! The engine that replaces a global migration integer with slug identities,
//! an applied-set ledger, a release-assigned order and two execution tiers.
//!
//! A tree of two scripts with the manifest a release assigned them, an
//! in-memory ledger (`ledger-memory`; the file, ConfigMap and CRD ledgers
//! implement the same [`Ledger`] trait), the plan, and a run through
//! [`drive::Driver`]. The program that runs scripts supplies an
//! [`drive::Executor`]; this one reports every script succeeded without
//! starting anything (`migrate-runner` is the real one).
//!
//! ```
//! use std::time::Duration;
//!
//! use async_trait::async_trait;
//! use ledger_memory::MemoryLedger;
//! use migration_core::drive::{
//!     Console, Driver, ScriptEnd, Executor, Job, RunSettings, Running, Scan, Scanned,
//! };
//! use migration_core::plan::PendingMigration;
//! use migration_core::{
//!     Clock, EntryState, Ledger, MigrationsTree, Outcome, PlanContext, PlanRequest, Record,
//!     SystemClock, Tier, TreeFiles, plan,
//! };
//!
//! /// Reports each script succeeded, at once.
//! struct Succeeds;
//!
//! #[async_trait]
//! impl Executor for Succeeds {
//!     async fn start<'e>(&'e mut self, _job: Job<'_>) -> Result<Box<dyn Running + 'e>, String> {
//!         Ok(Box::new(Succeeds))
//!     }
//!     fn interrupted(&self) -> bool {
//!         false
//!     }
//!     async fn pause(&mut self, _pause: Duration) {}
//! }
//!
//! #[async_trait]
//! impl Running for Succeeds {
//!     async fn wait(&mut self, _at_most: Duration) -> Option<ScriptEnd> {
//!         Some(ScriptEnd::Ran { outcome: Outcome::Succeeded, cluster_commands: None })
//!     }
//!     fn lease_renewed(&mut self, _until: std::time::Instant) {}
//!     async fn stop(&mut self) {}
//! }
//!
//! /// The pre-run scan (the real one parses each script and hands over the
//! /// bytes it read, which are what runs): finds nothing, reads nothing.
//! impl Scan for Succeeds {
//!     fn scan(&self, _tree: &MigrationsTree, pending: &[PendingMigration]) -> Scanned {
//!         let mut scanned = Scanned::default();
//!         for p in pending {
//!             scanned.scripts.insert(p.slug.clone(), Vec::new());
//!         }
//!         scanned
//!     }
//! }
//!
//! impl Console for Succeeds {
//!     fn script_line(&self, _slug: &migration_core::Slug, _line: &str) {}
//!     fn progress(&self, line: &str) {
//!         println!("{line}");
//!     }
//! }
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # tokio::runtime::Builder::new_current_thread().build()?.block_on(async {
//! // The tree: two pre-apply scripts, and `order.d/` as `migrate manifest` writes it.
//! let script = |body: &str| {
//!     let header = "# cozystack-migration: tier=pre-apply\n# cozystack-migration: on-error=abort";
//!     format!("#!/bin/sh\n{header}\nset -eu\n{body}\n").into_bytes()
//! };
//! let files = TreeFiles {
//!     scripts: vec![
//!         (Tier::PreApply, "label-tenants".into(), script("kubectl label ns -l tenant=yes x=y")),
//!         (Tier::PreApply, "drop-old-crd".into(), script("kubectl delete crd old.example.com")),
//!     ],
//!     order: Some(vec![("00001-v1.0.0".into(), b"label-tenants\ndrop-old-crd\n".to_vec())]),
//!     ..TreeFiles::default()
//! };
//! let tree = MigrationsTree::from_files("migrations".into(), files)?;
//! let manifest = tree.manifest().ok_or("no order.d")?;
//! assert_eq!(manifest.batches().len(), 1);
//!
//! // An existing cluster's ledger, with nothing applied yet (a ledger that
//! // does not exist yet is a fresh install: its scripts are recorded, not run).
//! let ledger = MemoryLedger::new();
//! ledger.create(&[]).await?;
//!
//! // The plan: both pending, in the manifest's order.
//! let context = PlanContext {
//!     now: SystemClock.now(),
//!     image: None,
//!     allowed_interpreters: PlanContext::default_interpreters(),
//! };
//! let request = PlanRequest::tier(Tier::PreApply);
//! let planned = plan(&tree, ledger.read().await?.as_ref(), &request, &context)?;
//! let pending: Vec<_> = planned.pending.iter().map(|p| p.slug.to_string()).collect();
//! assert_eq!(pending, ["label-tenants", "drop-old-crd"]);
//!
//! // The run: plans again under the run lock, executes, records.
//! let settings = RunSettings {
//!     tier: Tier::PreApply,
//!     only: None,
//!     image: None,
//!     lock_ttl: Duration::from_secs(60),
//!     lock_wait: Duration::from_secs(60),
//!     holder: "example".into(),
//!     message_limit: 4096,
//!     allowed_interpreters: PlanContext::default_interpreters(),
//!     require_existing_ledger: true,
//! };
//! let driver = Driver {
//!     tree: &tree,
//!     ledger: &ledger,
//!     clock: &SystemClock,
//!     settings: &settings,
//!     console: &Succeeds,
//!     scan: &Succeeds,
//! };
//! let report = driver.run(&mut Succeeds).await?;
//! println!("{}", report.summary());
//!
//! // Both are recorded `ok`: the next run has nothing to do.
//! let snapshot = ledger.read().await?.ok_or("the ledger exists")?;
//! assert_eq!(snapshot.records.len(), 2);
//! for record in snapshot.records.values() {
//!     assert!(matches!(record, Record::Entry(e) if e.state == EntryState::Ok));
//! }
//! assert!(plan(&tree, Some(&snapshot), &request, &context)?.pending.is_empty());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # })
//! # }
//! ```
//!
//! ## What it holds
//!
//! The behaviour contract is `migration-core/CONTRACT.md`; this crate implements
//! the parts that do not touch a cluster:
//!
//! - [`Slug`], [`Tier`], [`OnError`] and the script [`header`] parser;
//! - the tree's [`settings`] file, `migrate.toml`;
//! - the ledger's key layout ([`keys`]: `version`, `m.<slug>`, `a.<slug>`,
//!   `f.<slug>`);
//! - loading a [`MigrationsTree`] from disk, with checksums;
//! - the [`Manifest`] (`order.d/`) and the stable topological [`order`];
//! - [`LedgerEntry`] and the storage-only [`Ledger`] trait every backend
//!   implements;
//! - the pure [`plan()`] function and the [`Migrator`], which seeds and
//!   records through a ledger.
//!
//! It depends on neither kube nor an async runtime.

#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

mod filling;
#[macro_use]
mod spelling;
#[macro_use]
mod text_form;

pub mod digest;
pub mod drive;
pub mod entry;
pub mod fence;
pub mod generate;
pub mod give_up;
pub mod header;
pub mod kept_output;
pub mod keys;
pub mod last_failure;
pub mod lease;
pub mod ledger;
pub mod line_file;
pub mod lock;
pub mod manifest;
pub mod migrator;
pub mod object;
pub mod order;
pub mod plan;
pub mod redact;
pub mod repair;
pub mod retry;
pub mod run;
pub mod seeding;
pub mod settings;
pub mod shell;
pub mod slug;
pub mod step;
#[cfg(feature = "testing")]
pub mod testing;
pub mod threads;
pub mod time;
pub mod tree;
pub mod verify;
pub mod version;

pub use digest::Sha256Digest;
pub use entry::{CorruptEntry, EntryState, LedgerEntry};
pub use generate::{GenerateError, ReleaseHistory, ScriptInfo, TagTree, generate};
pub use header::{Header, HeaderError, OnError, Tier};
pub use ledger::{
    Ledger, LedgerError, LedgerSnapshot, LegacyVersion, Record, Usage, WriteMode, WriteReport,
};
pub use lock::{Lease, Lock, LockKeeper, LockedLedger};
pub use manifest::{Batch, BatchName, Manifest, ManifestEntry, ManifestError};
pub use migrator::{MigrateError, Migrator, Prepared};
pub use order::{Cycle, Edge, OrderError, stable_topo_sort};
pub use plan::{Plan, PlanContext, PlanError, PlanRequest, Refusal, TierSelection, plan};
pub use run::{Outcome, Run, Step, Verdict};
pub use settings::{SETTINGS_FILE, Settings, SettingsError};
pub use slug::{Slug, SlugError};
pub use time::{Clock, ManualClock, SystemClock, Timestamp};
pub use tree::{LoadOptions, MigrationsTree, Script, TreeError, TreeFiles, TreeProblem};
