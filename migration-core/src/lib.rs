//! # migration-core
//!
//! The engine that replaces a global migration integer with slug identities,
//! an applied-set ledger, a release-assigned order and two execution tiers.
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
pub(crate) mod line_file;
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
