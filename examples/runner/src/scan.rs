//! The pre-run safety scan: every pending script (and the `lib/` helpers
//! it sources) checked for what errexit cannot see, before anything runs.

use std::collections::HashMap;

use migration_core::drive::{self, Scan, UnsafeFinding};
use migration_core::plan::PendingMigration;
use migration_core::{MigrationsTree, Slug};

use migrate_lint::shell::baseline;
use migrate_lint::{Finding, Level, LintConfig, lint_pending_with};

use super::UNSAFE_AT_RUNTIME;

/// Scripts a scanning thread takes at the least: below that a thread costs
/// more than it saves.
const MIN_SCRIPTS_PER_THREAD: usize = 128;

/// Threads that scan at the most (the scan reads files and parses shell: it
/// stops gaining beyond a few cores).
const MAX_THREADS: usize = 4;

/// The pre-run safety scan of one pending script and the `lib/` helpers it
/// sources (made public for `plan`). The bytes scanned must be
/// the bytes the plan checksummed: a script that cannot be read, or changed
/// since the tree was loaded, is refused rather than run unscanned.
pub fn scan(tree: &MigrationsTree, pending: &PendingMigration, lint: &LintConfig) -> Vec<Finding> {
    let (baseline, _) = baseline::read(tree.root());
    scan_keeping(tree, pending, lint, &baseline).0
}

/// [`scan`], and the bytes it read when they are the plan's (what the run
/// then executes: never the file again, which may have changed since);
/// `baseline` is the tree's, read once for the whole scan.
fn scan_keeping(
    tree: &MigrationsTree,
    pending: &PendingMigration,
    lint: &LintConfig,
    baseline: &[baseline::Entry],
) -> (Vec<Finding>, Option<Vec<u8>>) {
    let file = pending.relative_path.display().to_string();
    let refuse = |message: String| {
        vec![Finding {
            file: file.clone(),
            line: None,
            rule: "changed-on-disk",
            level: Level::Error,
            message,
        }]
    };
    use migration_core::tree::supplied::{self, Within};
    let path = tree.root().join(&pending.relative_path);
    let read = supplied::read_file(&path, Within::Tree(tree.root()), supplied::MAX_FILE_BYTES);
    let bytes = match read.and_then(|b| {
        b.ok_or_else(|| supplied::FileError::Io {
            path: path.clone(),
            source: std::io::ErrorKind::NotFound.into(),
        })
    }) {
        Err(e) => return (refuse(format!("cannot be read before running: {e}")), None),
        Ok(bytes) if migration_core::Sha256Digest::of(&bytes) != pending.sha256 => {
            return (
                refuse("changed on disk since the tree was loaded; load it again".into()),
                None,
            );
        }
        Ok(bytes) => bytes,
    };
    // Test-only (feature `failpoints`): run unscanned, so the tripwire suite
    // proves the run-time guarantee on its own (tests/tripwire.rs).
    #[cfg(feature = "failpoints")]
    if std::env::var_os("MIGRATE_TEST_SKIP_PRERUN_SCAN").is_some() {
        return (Vec::new(), Some(bytes));
    }
    let findings = lint_pending_with(tree.root(), &file, &bytes, lint, baseline)
        .into_iter()
        .filter(|f| f.level == Level::Error && UNSAFE_AT_RUNTIME.contains(&f.rule))
        .collect();
    (findings, Some(bytes))
}

/// The pre-run scan as core's run calls it ([`Scan`]): [`scan_all`] with
/// these lint settings, keeping the bytes it read for the run to execute.
#[derive(Debug, Clone, Copy)]
pub struct PreRunScan<'l> {
    lint: &'l LintConfig,
}

impl<'l> PreRunScan<'l> {
    /// The scan with `lint`'s settings (ledger name, cluster commands).
    pub fn new(lint: &'l LintConfig) -> Self {
        PreRunScan { lint }
    }
}

impl Scan for PreRunScan<'_> {
    fn scan(&self, tree: &MigrationsTree, pending: &[PendingMigration]) -> drive::Scanned {
        let scanned = scan_all_keeping(tree, pending, self.lint);
        drive::Scanned {
            findings: scanned.findings.iter().map(unsafe_finding).collect(),
            scripts: scanned.bytes,
        }
    }
}

/// A lint finding as the run reports it.
pub fn unsafe_finding(f: &Finding) -> UnsafeFinding {
    UnsafeFinding {
        file: f.file.clone(),
        line: f.line,
        rule: f.rule.to_owned(),
        message: f.message.clone(),
    }
}

/// What the scan of a run's pending scripts found, and the bytes of each
/// script it read (by slug): what the run executes.
struct Scanned {
    /// Every finding, in plan order.
    findings: Vec<Finding>,
    /// The bytes scanned and hashed, per slug (absent: refused).
    bytes: HashMap<Slug, Vec<u8>>,
}

/// [`scan`] of every pending script, their findings in plan order. Large
/// plans are split into contiguous runs scanned on their own threads (the
/// scan of 10³ trivial scripts is some 80 million instructions, all before
/// the first script may start).
pub fn scan_all(
    tree: &MigrationsTree,
    pending: &[PendingMigration],
    lint: &LintConfig,
) -> Vec<Finding> {
    scan_all_with(tree, pending, lint, false).findings
}

/// [`scan_all`], keeping the bytes scanned for the run to execute.
fn scan_all_keeping(
    tree: &MigrationsTree,
    pending: &[PendingMigration],
    lint: &LintConfig,
) -> Scanned {
    scan_all_with(tree, pending, lint, true)
}

fn scan_all_with(
    tree: &MigrationsTree,
    pending: &[PendingMigration],
    lint: &LintConfig,
    keep: bool,
) -> Scanned {
    let threads =
        migration_core::threads::for_items(pending.len(), MIN_SCRIPTS_PER_THREAD, MAX_THREADS);
    // Once for every script, not once each.
    let (baseline, _) = baseline::read(tree.root());
    let baseline = &baseline;
    let scan_run = |run: &[PendingMigration]| -> Scanned {
        let mut scanned = Scanned {
            findings: Vec::new(),
            bytes: HashMap::new(),
        };
        for p in run {
            let (findings, bytes) = scan_keeping(tree, p, lint, baseline);
            scanned.findings.extend(findings);
            if let (true, Some(bytes)) = (keep, bytes) {
                scanned.bytes.insert(p.slug.clone(), bytes);
            }
        }
        scanned
    };
    if threads == 1 {
        return scan_run(pending);
    }
    let per_thread = pending.len().div_ceil(threads);
    std::thread::scope(|scope| {
        let handles: Vec<_> = pending
            .chunks(per_thread)
            .map(|run| scope.spawn(move || scan_run(run)))
            .collect();
        let mut all = Scanned {
            findings: Vec::new(),
            bytes: HashMap::new(),
        };
        for handle in handles {
            // A scanning thread only panics on a bug; carry the panic over.
            let part = handle
                .join()
                .unwrap_or_else(|p| std::panic::resume_unwind(p));
            all.findings.extend(part.findings);
            all.bytes.extend(part.bytes);
        }
        all
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use migration_core::header::Tier;
    use migration_core::{LedgerSnapshot, PlanContext, PlanRequest, Timestamp};

    const HEADER: &str =
        "#!/bin/sh\n# cozystack-migration: tier=pre-apply\n# cozystack-migration: on-error=abort\n";

    /// A tree of `bodies.len()` scripts `s-0000`… in one batch, and the plan
    /// that runs them all.
    fn tree_of(bodies: &[&str]) -> (tempfile::TempDir, MigrationsTree, Vec<PendingMigration>) {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("pre-apply")).unwrap();
        std::fs::create_dir_all(root.join("order.d")).unwrap();
        let mut order = String::new();
        for (i, body) in bodies.iter().enumerate() {
            std::fs::write(
                root.join(format!("pre-apply/s-{i:04}")),
                format!("{HEADER}{body}\n"),
            )
            .unwrap();
            order.push_str(&format!("s-{i:04}\n"));
        }
        std::fs::write(root.join("order.d/00001-v1"), order).unwrap();
        let tree = MigrationsTree::load(root).unwrap();
        let plan = migration_core::plan(
            &tree,
            Some(&LedgerSnapshot::default()),
            &PlanRequest::tier(Tier::PreApply),
            &PlanContext::at(Timestamp::from_unix(0)),
        )
        .unwrap();
        (dir, tree, plan.pending)
    }

    #[test]
    fn a_script_changed_or_removed_after_loading_is_refused_not_run_unscanned() {
        let (dir, tree, pending) = tree_of(&["echo safe"]);
        let pending = &pending[0];
        let path = dir.path().join("pre-apply/s-0000");
        assert!(scan(&tree, pending, &LintConfig::default()).is_empty());
        std::fs::write(&path, format!("{HEADER}for x in $(false); do :; done\n")).unwrap();
        let findings = scan(&tree, pending, &LintConfig::default());
        assert_eq!(findings.len(), 1);
        assert_eq!(findings[0].rule, "changed-on-disk");
        std::fs::remove_file(&path).unwrap();
        assert!(
            scan(&tree, pending, &LintConfig::default())[0]
                .message
                .contains("cannot be read")
        );
    }

    #[test]
    fn a_large_plan_scanned_on_several_threads_finds_what_one_thread_finds_in_plan_order() {
        let bodies: Vec<&str> = (0..4 * MIN_SCRIPTS_PER_THREAD + 7)
            .map(|i| {
                if i % 97 == 5 {
                    "for ns in $(kubectl get ns -o name); do echo \"$ns\"; done"
                } else {
                    "echo safe"
                }
            })
            .collect();
        let (_dir, tree, pending) = tree_of(&bodies);
        let lint = LintConfig::default();
        let one_thread: Vec<Finding> = pending.iter().flat_map(|p| scan(&tree, p, &lint)).collect();
        assert!(
            one_thread.len() >= 5,
            "the unsafe scripts are found: {one_thread:?}"
        );
        let files = |findings: &[Finding]| -> Vec<String> {
            findings
                .iter()
                .map(|f| format!("{}:{}", f.file, f.rule))
                .collect()
        };
        assert_eq!(files(&scan_all(&tree, &pending, &lint)), files(&one_thread));
    }
}
