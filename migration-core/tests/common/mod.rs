//! Helpers shared by the black-box tests: building trees and ledgers.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use migration_core::header::{OnError, Tier};
use migration_core::{MigrationsTree, Timestamp, TreeFiles};

/// The instant every test plans at.
pub const NOW: Timestamp = Timestamp::from_unix(1_786_529_040);

/// A script's text with a valid header.
pub fn script_text(tier: Tier, on_error: OnError, requires: &[&str], body: &str) -> String {
    let mut text = format!(
        "#!/bin/sh\n# cozystack-migration: tier={tier}\n# cozystack-migration: on-error={on_error}\n"
    );
    for r in requires {
        text.push_str(&format!("# cozystack-migration: requires={r}\n"));
    }
    text.push_str("set -eu\n");
    text.push_str(body);
    text.push('\n');
    text
}

/// Builds a tree in memory, validated exactly as the disk loader does.
#[derive(Debug, Default, Clone)]
pub struct Tree {
    pub files: TreeFiles,
}

impl Tree {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn script(mut self, tier: Tier, slug: &str, requires: &[&str]) -> Self {
        let text = script_text(tier, OnError::Abort, requires, &format!("echo {slug}"));
        self.files
            .scripts
            .push((tier, slug.to_owned(), text.into_bytes()));
        self
    }

    pub fn script_with(
        mut self,
        tier: Tier,
        slug: &str,
        on_error: OnError,
        requires: &[&str],
        body: &str,
    ) -> Self {
        let text = script_text(tier, on_error, requires, body);
        self.files
            .scripts
            .push((tier, slug.to_owned(), text.into_bytes()));
        self
    }

    pub fn pre(self, slug: &str) -> Self {
        self.script(Tier::PreApply, slug, &[])
    }

    pub fn bg(self, slug: &str) -> Self {
        self.script(Tier::Background, slug, &[])
    }

    pub fn raw_script(mut self, tier: Tier, name: &str, bytes: &[u8]) -> Self {
        self.files
            .scripts
            .push((tier, name.to_owned(), bytes.to_vec()));
        self
    }

    pub fn revoked(mut self, text: &str) -> Self {
        self.files.revoked = Some(text.as_bytes().to_vec());
        self
    }

    pub fn legacy_map(mut self, text: &str) -> Self {
        self.files.legacy_map = Some(text.as_bytes().to_vec());
        self
    }

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

    pub fn build(self) -> MigrationsTree {
        MigrationsTree::from_files(PathBuf::from("/virtual/migrations"), self.files).unwrap()
    }

    pub fn try_build(self) -> Result<MigrationsTree, migration_core::TreeError> {
        MigrationsTree::from_files(PathBuf::from("/virtual/migrations"), self.files)
    }

    /// Writes the tree to `dir` (for disk-loading tests).
    pub fn write_to(&self, dir: &Path) {
        for tier in Tier::ALL {
            std::fs::create_dir_all(dir.join(tier.as_str())).unwrap();
        }
        for (tier, name, bytes) in &self.files.scripts {
            std::fs::write(dir.join(tier.as_str()).join(name), bytes).unwrap();
        }
        for (path, bytes) in &self.files.lib {
            let p = dir.join("lib").join(path);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, bytes).unwrap();
        }
        if let Some(b) = &self.files.revoked {
            std::fs::write(dir.join("revoked"), b).unwrap();
        }
        if let Some(b) = &self.files.legacy_map {
            std::fs::write(dir.join("legacy-map"), b).unwrap();
        }
        if let Some(order) = &self.files.order {
            std::fs::create_dir_all(dir.join("order.d")).unwrap();
            for (name, bytes) in order {
                std::fs::write(dir.join("order.d").join(name), bytes).unwrap();
            }
        }
    }
}

/// Runs a future to completion on a fresh current-thread runtime.
pub fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(f)
}

/// Records one reliability figure: `target/tmp/reliability/<suite>--<name>.txt`.
/// `.ci/run` prints them all at the end of a CI run.
pub fn figure(suite: &str, name: &str, text: &str) {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("reliability");
    let _ = std::fs::create_dir_all(&dir);
    let _ = std::fs::write(
        dir.join(format!("{suite}--{name}.txt")),
        format!("{suite}: {name}: {text}\n"),
    );
}

/// Runs a property with proptest's runner (cases from `PROPTEST_CASES`, else
/// `default_cases`), panicking with the minimal failing input, and records
/// how many inputs were tried.
pub fn check<S: proptest::strategy::Strategy>(
    suite: &str,
    name: &str,
    default_cases: u32,
    strategy: S,
    test: impl Fn(S::Value) -> Result<(), proptest::test_runner::TestCaseError>,
) {
    use std::sync::atomic::{AtomicU64, Ordering};
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default_cases);
    let config = proptest::test_runner::Config {
        cases,
        failure_persistence: None,
        ..Default::default()
    };
    let mut runner = proptest::test_runner::TestRunner::new(config);
    let tried = AtomicU64::new(0);
    let result = runner.run(&strategy, |value| {
        tried.fetch_add(1, Ordering::Relaxed);
        test(value)
    });
    if let Err(e) = result {
        panic!("{name}: {e}");
    }
    figure(
        suite,
        name,
        &format!("{} inputs tried, all passed", tried.load(Ordering::Relaxed)),
    );
}
