//! `lint`, `plan`, `run --dry-run` and `run` refuse the same things (issue
//! 35): a helper the pre-run scan cannot resolve is refused before anything
//! runs unless a waiver with a reason names it (if it reset `PATH`, the
//! cluster commands in it would bypass the tripwire's shim), in dash,
//! busybox ash and bash alike.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::common::shells::{self, Shell};
use crate::common::{self, output_within};

/// The ways of sourcing `lib/env.sh` that the scan cannot follow.
const UNRESOLVABLE: [(&str, &str); 3] = [
    (
        "a glob loop",
        "for f in \"$MIGRATION_TREE\"/lib/*.sh; do . \"$f\"; done",
    ),
    (
        "a loop over names",
        "for n in env; do . \"$MIGRATION_TREE/lib/$n.sh\"; done",
    ),
    ("cd into lib", "cd lib && . ./env.sh"),
];

/// The waiver that accepts the unresolvable source on the next line.
const WAIVER: &str = "# migrate: allow source-unresolved: env.sh only sets variables, reviewed";

/// A tree in `dir` whose one pre-apply script, for `shell`, sources
/// `lib/env.sh` by `source` (after `waiver` when given) and then creates
/// `<dir>/marker`; `lib/env.sh` resets PATH.
fn sourcing_tree(dir: &Path, shell: &Shell, source: &str, waiver: Option<&str>) -> PathBuf {
    let tree = dir.join("tree");
    for d in ["pre-apply", "order.d", "lib"] {
        std::fs::create_dir_all(tree.join(d)).unwrap();
    }
    std::fs::write(
        tree.join("lib/env.sh"),
        "PATH=/usr/local/bin:/usr/bin:/bin\nexport PATH\n",
    )
    .unwrap();
    let waiver = waiver.map(|w| format!("{w}\n")).unwrap_or_default();
    std::fs::write(
        tree.join("pre-apply/sources-helpers"),
        format!(
            "#!{}\n# cozystack-migration: tier=pre-apply\n# cozystack-migration: on-error=abort\nset -eu\n{waiver}{source}\n: > \"{}\"\n",
            shell.shebang,
            dir.join("marker").display()
        ),
    )
    .unwrap();
    std::fs::write(tree.join("order.d/00001-v1"), "sources-helpers\n").unwrap();
    tree
}

/// `migrate ARGS` for `shell`'s scripts: (exit code, document, stderr).
fn migrate(shell: &Shell, args: &[&str]) -> (i32, serde_json::Value, String) {
    let mut cmd = common::migrate();
    cmd.args(args).args(["--output", "json"]);
    if args[0] == "run" {
        cmd.args(["--allow-interpreter", &shell.shebang]);
    }
    output_within(&mut cmd, Duration::from_secs(60))
}

#[test]
fn an_unresolvable_helper_is_refused_alike_by_lint_plan_the_dry_run_and_run_before_anything_runs() {
    for shell in shells::all() {
        for (shape, source) in UNRESOLVABLE {
            let dir = tempfile::tempdir().unwrap();
            let tree = sourcing_tree(dir.path(), &shell, source, None);
            let tree = tree.to_str().unwrap();
            let ledger = common::empty_file_ledger(&dir.path().join("ledger.json"));
            let case = format!("{} {shape}", shell.name);
            let (code, doc, stderr) = migrate(&shell, &["lint", tree]);
            assert_eq!(code, 2, "{case}: lint: {doc}\n{stderr}");
            let findings = doc["findings"].as_array().unwrap();
            assert!(
                findings
                    .iter()
                    .any(|f| f["rule"] == "source-unresolved" && f["level"] == "error"),
                "{case}: lint: {doc}"
            );
            let mut answers = Vec::new();
            let mut commands = vec![
                vec!["run", tree, "--ledger", &ledger, "--dry-run"],
                vec!["run", tree, "--ledger", &ledger],
            ];
            // `plan` takes no --allow-interpreter: only the default shells.
            if !shell.shebang.contains(' ')
                && ["/bin/sh", "/bin/bash"].contains(&shell.shebang.as_str())
            {
                commands.insert(0, vec!["plan", tree, "--ledger", &ledger]);
            }
            for args in commands {
                let (code, doc, stderr) = migrate(&shell, &args);
                assert_eq!(code, 3, "{case}: {args:?}: {doc}\n{stderr}");
                assert!(
                    format!("{doc}{stderr}").contains("source-unresolved"),
                    "{case}: {args:?}: names the rule: {doc}\n{stderr}"
                );
                answers.push(code);
            }
            assert!(
                !dir.path().join("marker").exists(),
                "{case}: the script ran"
            );
            assert!(
                answers.windows(2).all(|w| w[0] == w[1]),
                "{case}: {answers:?}"
            );
        }
    }
}

#[test]
fn an_unresolvable_helper_named_by_a_waiver_with_a_reason_runs() {
    for shell in shells::all() {
        for (shape, source) in UNRESOLVABLE {
            let dir = tempfile::tempdir().unwrap();
            let tree = sourcing_tree(dir.path(), &shell, source, Some(WAIVER));
            let ledger = common::empty_file_ledger(&dir.path().join("ledger.json"));
            let case = format!("{} {shape}", shell.name);
            let (code, doc, stderr) = migrate(
                &shell,
                &["run", tree.to_str().unwrap(), "--ledger", &ledger],
            );
            assert_eq!(code, 0, "{case}: {doc}\n{stderr}");
            assert!(
                dir.path().join("marker").exists(),
                "{case}: the script did not run"
            );
            // A waiver without a reason waives nothing.
            let dir = tempfile::tempdir().unwrap();
            let bare = "# migrate: allow source-unresolved";
            let tree = sourcing_tree(dir.path(), &shell, source, Some(bare));
            let ledger = common::empty_file_ledger(&dir.path().join("ledger.json"));
            let (code, doc, stderr) = migrate(
                &shell,
                &["run", tree.to_str().unwrap(), "--ledger", &ledger],
            );
            assert_eq!(code, 3, "{case}: a bare waiver: {doc}\n{stderr}");
            assert!(
                !dir.path().join("marker").exists(),
                "{case}: the script ran"
            );
        }
    }
}
