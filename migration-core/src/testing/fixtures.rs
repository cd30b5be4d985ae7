//! Fixtures shared by every crate's tests (feature `testing`): a slug from
//! a literal, a clock standing at one fixed instant, script texts with a
//! valid header, and a tree builder that validates in memory exactly as the
//! disk loader does or writes the same files into a scratch directory.
//!
//! ```
//! use migration_core::testing::fixtures::{NOW, TreeBuilder, s};
//! let tree = TreeBuilder::new().pre("a").manifest(&[("00001-v1", "a\n")]).build();
//! assert!(tree.script(&s("a")).is_some());
//! ```
//!
//! They panic on misuse (an invalid slug literal, an unwritable temporary
//! directory): a fixture that cannot be built is a broken test.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use crate::entry::{EntryState, LedgerEntry};
use crate::header::{OnError, Tier};
use crate::ledger::{LedgerError, LedgerSnapshot};
use crate::manifest::Manifest;
use crate::slug::Slug;
use crate::time::{ManualClock, Timestamp};
use crate::tree::{MigrationsTree, TreeError, TreeFiles};

/// The instant tests plan, record and expire locks at: 2026-08-12T10:04:00Z.
pub const NOW: Timestamp = Timestamp::from_unix(1_786_529_040);

/// Where [`TreeBuilder::build`] says an in-memory tree lives.
pub const VIRTUAL_ROOT: &str = "/virtual/migrations";

/// The slug `x`; panics if `x` is not one.
pub fn s(x: &str) -> Slug {
    Slug::parse(x).unwrap_or_else(|e| panic!("test slug {x:?}: {e}"))
}

/// A manual clock standing at [`NOW`].
pub fn clock() -> ManualClock {
    ManualClock::new(NOW)
}

/// A manual clock standing at [`NOW`], to share between a backend (lock
/// expiry) and the test that moves it.
pub fn shared_clock() -> Arc<ManualClock> {
    Arc::new(clock())
}

/// A ledger snapshot holding one entry per `(slug, state)`, recorded at the
/// epoch; a failed entry carries the reason `r` and the message `m`.
pub fn snapshot_of(entries: &[(&str, EntryState)]) -> LedgerSnapshot {
    let encoded: Vec<(String, String)> = entries
        .iter()
        .map(|(slug, state)| {
            let mut e = LedgerEntry::new(*state, Timestamp::from_unix(0));
            if *state == EntryState::Failed {
                e.reason = Some("r".into());
                e.message = Some("m".into());
            }
            (format!("m.{slug}"), e.encode())
        })
        .collect();
    LedgerSnapshot::from_raw_data(encoded.iter().map(|(k, v)| (k.as_str(), v.as_str())), None)
}

/// A script's text with a valid header: the tier, the failure policy, one
/// `requires` line per target, `set -eu`, then `body`. The tier and policy
/// are anything that prints as one (`Tier::PreApply` or `"pre-apply"`), so
/// that tests can also write a header that does not match its directory.
pub fn script_text(
    tier: impl fmt::Display,
    on_error: impl fmt::Display,
    requires: &[&str],
    body: &str,
) -> String {
    let mut text = String::from("#!/bin/sh\n");
    text.push_str(&crate::header::render_header(
        &crate::header::HeaderMarker::default(),
        tier,
        on_error,
        requires,
    ));
    text.push_str("set -eu\n");
    text.push_str(body);
    text.push('\n');
    text
}

/// Builds a tree from raw files: validated in memory exactly as the disk
/// loader validates ([`Self::build`]), or written to disk ([`Self::write_to`],
/// [`Self::scratch`]).
#[derive(Debug, Default, Clone)]
pub struct TreeBuilder {
    /// The files so far.
    pub files: TreeFiles,
}

impl TreeBuilder {
    /// An empty tree.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `slug` to `tier` (on-error abort) requiring `requires`; its body
    /// echoes the slug.
    pub fn script(self, tier: Tier, slug: &str, requires: &[&str]) -> Self {
        self.script_with(
            tier,
            slug,
            OnError::Abort,
            requires,
            &format!("echo {slug}"),
        )
    }

    /// Adds `slug` to `tier` with every header field and the body given.
    pub fn script_with(
        self,
        tier: Tier,
        slug: &str,
        on_error: OnError,
        requires: &[&str],
        body: &str,
    ) -> Self {
        let text = script_text(tier, on_error, requires, body);
        self.raw_script(tier, slug, text.as_bytes())
    }

    /// Adds a pre-apply script `slug` with no requirements.
    pub fn pre(self, slug: &str) -> Self {
        self.script(Tier::PreApply, slug, &[])
    }

    /// Adds a pre-apply script with no requirements for each of `slugs`, in this order.
    pub fn pre_scripts(self, slugs: &[&str]) -> Self {
        slugs.iter().fold(self, |tree, slug| tree.pre(slug))
    }

    /// Adds a background script `slug` with no requirements.
    pub fn bg(self, slug: &str) -> Self {
        self.script(Tier::Background, slug, &[])
    }

    /// Adds the file `name` to `tier` with exactly `bytes` (any header, or none).
    pub fn raw_script(mut self, tier: Tier, name: &str, bytes: &[u8]) -> Self {
        self.files
            .scripts
            .push((tier, name.to_owned(), bytes.to_vec()));
        self
    }

    /// Sets the `revoked` file.
    pub fn revoked(mut self, text: &str) -> Self {
        self.files.revoked = Some(text.as_bytes().to_vec());
        self
    }

    /// Sets the `legacy-map` file.
    pub fn legacy_map(mut self, text: &str) -> Self {
        self.files.legacy_map = Some(text.as_bytes().to_vec());
        self
    }

    /// Adds `lib/<path>`.
    pub fn lib(mut self, path: &str, text: &str) -> Self {
        self.files
            .lib
            .push((path.to_owned(), text.as_bytes().to_vec()));
        self
    }

    /// Sets `order.d/` from `(file name, contents)` pairs.
    pub fn manifest(mut self, batches: &[(&str, &str)]) -> Self {
        self.files.order = Some(
            batches
                .iter()
                .map(|(n, c)| (n.to_string(), c.as_bytes().to_vec()))
                .collect(),
        );
        self
    }

    /// Sets `order.d/` to the batch files of `manifest`.
    pub fn rendered_manifest(mut self, manifest: &Manifest) -> Self {
        self.files.order = Some(
            manifest
                .render()
                .into_iter()
                .map(|(name, contents)| (name, contents.into_bytes()))
                .collect(),
        );
        self
    }

    /// The validated tree, at [`VIRTUAL_ROOT`]; panics if it is invalid.
    pub fn build(self) -> MigrationsTree {
        self.build_at(VIRTUAL_ROOT)
    }

    /// The validated tree, said to live at `root`; panics if it is invalid.
    pub fn build_at(self, root: impl Into<PathBuf>) -> MigrationsTree {
        MigrationsTree::from_files(root.into(), self.files)
            .unwrap_or_else(|e| panic!("test tree is invalid: {e}"))
    }

    /// The tree as validation sees it, at [`VIRTUAL_ROOT`].
    pub fn try_build(self) -> Result<MigrationsTree, TreeError> {
        MigrationsTree::from_files(PathBuf::from(VIRTUAL_ROOT), self.files)
    }

    /// Writes the tree into `dir`, with both tier directories even when empty.
    pub fn write_to(&self, dir: &Path) {
        for tier in Tier::ALL {
            create_dir(&dir.join(tier.as_str()));
        }
        for (tier, name, bytes) in &self.files.scripts {
            write(&dir.join(tier.as_str()).join(name), bytes);
        }
        for (path, bytes) in &self.files.lib {
            write(&dir.join(crate::tree::LIB_DIR).join(path), bytes);
        }
        if let Some(bytes) = &self.files.revoked {
            write(&dir.join(crate::tree::REVOKED_FILE), bytes);
        }
        if let Some(bytes) = &self.files.legacy_map {
            write(&dir.join(crate::tree::LEGACY_MAP_FILE), bytes);
        }
        if let Some(order) = &self.files.order {
            let order_dir = dir.join(crate::tree::ORDER_DIR);
            create_dir(&order_dir);
            for (name, bytes) in order {
                write(&order_dir.join(name), bytes);
            }
        }
    }

    /// Writes the tree into a new scratch directory.
    pub fn scratch(&self) -> ScratchTree {
        let scratch = ScratchTree {
            dir: tempfile::tempdir().unwrap_or_else(|e| panic!("a temporary directory: {e}")),
        };
        self.write_to(&scratch.root());
        scratch
    }
}

/// A temporary directory holding a tree in `tree/`, with room beside it for
/// what a test keeps outside the tree (a file ledger, a log of effects).
/// Removed when dropped.
#[derive(Debug)]
pub struct ScratchTree {
    dir: tempfile::TempDir,
}

impl ScratchTree {
    /// The scratch directory.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The tree's root, `<dir>/tree`.
    pub fn root(&self) -> PathBuf {
        self.file("tree")
    }

    /// `<dir>/<name>`: beside the tree, not in it.
    pub fn file(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// The tree, loaded from disk; panics if it does not load.
    pub fn load(&self) -> MigrationsTree {
        MigrationsTree::load(&self.root())
            .unwrap_or_else(|e| panic!("scratch tree does not load: {e}"))
    }

    /// The lines of `<dir>/<name>`; none if it does not exist.
    pub fn lines(&self, name: &str) -> Vec<String> {
        std::fs::read_to_string(self.file(name))
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }
}

/// The slugs `plan` would run, in its order.
pub fn pending(plan: &crate::plan::Plan) -> Vec<&str> {
    plan.pending.iter().map(|m| m.slug.as_str()).collect()
}

/// Asserts that `problems` display as `expected`, one line each and in
/// order: equal to its expectation or, for an expectation that ends in `…`,
/// starting with what precedes the `…`. Panics naming the line and every
/// problem otherwise.
#[track_caller]
pub fn assert_lines<T: fmt::Display>(problems: &[T], expected: &[&str]) {
    let text: Vec<String> = problems.iter().map(ToString::to_string).collect();
    assert_eq!(text.len(), expected.len(), "{text:#?}");
    for (i, (line, want)) in text.iter().zip(expected).enumerate() {
        match want.strip_suffix('…') {
            Some(prefix) => assert!(
                line.starts_with(prefix),
                "line {i}: {line:?} does not start with {prefix:?} in {text:#?}"
            ),
            None => assert_eq!(line, want, "line {i} of {text:#?}"),
        }
    }
}

/// Runs `future` to completion on the calling thread, with no async
/// runtime: the engine and the in-memory ledgers never wait on I/O or
/// timers, and tests driving them this way keep that true. Code that needs
/// a runtime (processes, sockets, timers) runs under tokio instead.
pub fn block_on<F: Future>(future: F) -> F::Output {
    /// Wakes the blocked thread.
    struct Unpark(std::thread::Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut context = Context::from_waker(&waker);
    let mut future = std::pin::pin!(future);
    loop {
        match future.as_mut().poll(&mut context) {
            Poll::Ready(output) => return output,
            Poll::Pending => std::thread::park(),
        }
    }
}

/// Asserts that `err` is a transient failure of `operation`: the kind a
/// caller may retry, naming what failed.
pub fn assert_transient(err: &LedgerError, operation: &str) {
    assert!(
        matches!(err, LedgerError::Transient { operation: op, .. } if *op == operation),
        "expected a transient {operation} failure, got {err:?}"
    );
}

/// Records one reliability figure as
/// `<target_tmpdir>/reliability/<suite>--<name>.txt`, where `.ci/run` prints
/// them all at the end of a run. Pass `env!("CARGO_TARGET_TMPDIR")`. Best
/// effort: a figure that cannot be written fails no test.
pub fn write_figure(target_tmpdir: &Path, suite: &str, name: &str, text: &str) {
    let dir = target_tmpdir.join("reliability");
    let _ = std::fs::create_dir_all(&dir);
    let _ = std::fs::write(
        dir.join(format!("{suite}--{name}.txt")),
        format!("{suite}: {name}: {text}\n"),
    );
}

fn create_dir(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("creating {}: {e}", dir.display()));
}

/// Writes `bytes` to `path`, creating its directory.
fn write(path: &Path, bytes: &[u8]) {
    if let Some(parent) = path.parent() {
        create_dir(parent);
    }
    std::fs::write(path, bytes).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
}
