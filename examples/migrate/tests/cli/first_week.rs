//! What a platform team meets in its first week (issue 38): the hints a
//! run prints are commands that run as printed, and a pre-apply run says
//! what it leaves to the background tier.

use crate::common::{self, Repo};

/// A repository whose v1 is installed fresh on a file ledger and whose v2
/// adds `scripts` (tier, slug, body): the tree, the ledger's spec and the
/// scratch directory holding the ledger.
fn upgraded_to(scripts: &[(&str, &str, &str)]) -> (Repo, String) {
    let repo = Repo::released(&[("v1.0.0", &[("pre-apply", "first")])]);
    let ledger = common::file_spec(&repo.path().join("ledger.json"));
    repo.succeeds("run", &ledger, &["--fresh-install"]);
    for (tier, slug, body) in scripts {
        repo.add(tier, slug, body);
    }
    repo.release("v1.1.0");
    let (code, _, err) = repo.manifest();
    assert_eq!(code, 0, "{err}");
    (repo, ledger)
}

/// `migrate run` in text of the tree [`upgraded_to`] `scripts`: the
/// repository, the ledger spec, the exit code and stderr.
fn run_upgraded_to(scripts: &[(&str, &str, &str)]) -> (Repo, String, i32, String) {
    let (repo, ledger) = upgraded_to(scripts);
    let tree = repo.tree();
    let (code, _, err) = common::text(&["run", tree.to_str().unwrap(), "--ledger", &ledger]);
    (repo, ledger, code, err)
}

#[test]
fn a_failed_migrations_hint_is_a_status_command_that_runs_as_printed() {
    let (_repo, _, code, err) =
        run_upgraded_to(&[("pre-apply", "remove-old-webhook", "echo gone; exit 3")]);
    assert_ne!(code, 0, "the failing migration failed the run: {err}");
    let hint = err
        .lines()
        .find_map(|l| {
            l.split_once("its entry and output: ")
                .map(|(_, c)| c.trim())
        })
        .unwrap_or_else(|| panic!("no status command in: {err}"));
    assert!(
        hint.contains("--ledger") && hint.ends_with("remove-old-webhook"),
        "{hint}"
    );
    // Run the printed words through a shell, as a person pasting them would.
    let migrate = env!("CARGO_BIN_EXE_migrate");
    let line = hint.replacen("migrate", migrate, 1);
    let out = std::process::Command::new("sh")
        .args(["-c", &line])
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{line}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(shown.contains("remove-old-webhook"), "{shown}");
}

#[test]
fn a_pre_apply_run_says_a_background_migration_is_pending_and_what_runs_it() {
    let (repo, ledger, code, err) =
        run_upgraded_to(&[("background", "reindex-dashboards", "echo reindexed")]);
    let tree = repo.tree();
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("1 background migration(s) pending (reindex-dashboards)")
            && err.contains("--tier background")
            && err.contains("operator"),
        "{err}"
    );
    // Once it ran, nothing is said.
    let (code, _, err) = common::text(&[
        "run",
        tree.to_str().unwrap(),
        "--ledger",
        &ledger,
        "--tier",
        "background",
    ]);
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = common::text(&["run", tree.to_str().unwrap(), "--ledger", &ledger]);
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains("background migration(s) pending"), "{err}");
}

#[test]
fn a_lint_warning_about_the_repository_names_the_tree_it_is_about() {
    let repo = Repo::new();
    repo.add("pre-apply", "first", "echo first");
    repo.commit("not tagged yet");
    // A tag of another scheme: no release tag to compare the scripts with.
    repo.tag("build-1");
    let tree = repo.tree();
    let (_, out, err) = common::text(&["lint", tree.to_str().unwrap()]);
    let line = out
        .lines()
        .chain(err.lines())
        .find(|l| l.contains("[shipped-script-edited]"))
        .unwrap_or_else(|| panic!("no warning about the release tags: {out}{err}"));
    assert!(line.starts_with(tree.to_str().unwrap()), "{line}");
}

#[test]
fn a_typo_in_revoked_is_a_lint_error_naming_the_line_and_the_slug_meant() {
    let repo = Repo::new();
    repo.release_with("v1.0.0", &[("pre-apply", "remove-old-webhook")]);
    repo.write("revoked", "# never run these\nremove-old-webhok\n");
    let (code, _, err) = repo.manifest();
    assert_eq!(code, 0, "{err}");
    let tree = repo.tree();
    let (code, doc, err) = common::json(&["lint", tree.to_str().unwrap()]);
    assert_eq!(code, 2, "{doc}\n{err}");
    let found = common::find(&doc["findings"], "rule", "revoked-unknown");
    assert_eq!(found["file"], "revoked", "{found}");
    assert_eq!(found["line"], 2, "{found}");
    let message = found["message"].as_str().unwrap();
    common::assert_contains_all(
        message,
        &["remove-old-webhok", "did you mean 'remove-old-webhook'"],
    );
}

#[test]
fn a_refused_run_on_a_missing_ledger_leaves_no_file_behind() {
    let repo = Repo::released(&[("v1.0.0", &[("pre-apply", "first")])]);
    let scratch = tempfile::tempdir().unwrap();
    let ledger = common::file_spec(&scratch.path().join("ledger.json"));
    let tree = repo.tree();
    let tree = tree.to_str().unwrap();
    // No ledger and no --fresh-install; ONLY before the ledger exists.
    for extra in [&[][..], &["--fresh-install", "--only", "first"][..]] {
        let mut args = vec!["run", tree, "--ledger", &ledger];
        args.extend_from_slice(extra);
        let (code, _, err) = common::text(&args);
        assert_eq!(code, 3, "{args:?}: {err}");
        let left: Vec<_> = std::fs::read_dir(scratch.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert!(left.is_empty(), "{args:?} left {left:?} behind");
    }
}
