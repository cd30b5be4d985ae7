//! The habits users bring from kubectl, Flyway and other tools: `init`,
//! `test`, completions, `--version`, `--kubeconfig`/`--context`, a
//! digest-pinned `index --image`, and help that agrees with the README.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use std::collections::BTreeSet;

use common::{Repo, assert_first_problem, help_flags, json, text};

#[test]
fn init_creates_an_empty_tree_that_new_lint_manifest_and_test_accept() {
    let repo = Repo::new();
    let tree = repo.path().join("platform/migrations");
    let tree_s = tree.to_str().unwrap();
    let (code, doc, err) = json(&["init", tree_s]);
    assert_eq!(code, 0, "{err}");
    let created = common::strings(&doc["created"]);
    for file in [
        "pre-apply/.gitkeep",
        "background/.gitkeep",
        "revoked",
        "legacy-map",
        "lib/kube.sh",
        "tests/lib.sh",
        "tests/fake-cluster",
    ] {
        assert!(created.contains(&file), "{file}: {doc}");
        assert!(tree.join(file).is_file(), "{file}");
    }
    let (code, doc, _) = json(&["lint", tree_s]);
    assert_eq!(code, 0, "an empty tree is lint-clean: {doc}");
    let (code, doc, err) = json(&["new", tree_s, "first-step"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        doc["script"]
            .as_str()
            .unwrap()
            .ends_with("pre-apply/first-step")
    );
    let (code, _, err) = json(&["lint", tree_s]);
    // The scaffold exits 1 until written, but it is well-formed.
    assert!(code == 0 || code == 2, "{err}");
    repo.commit("init");
    let doc = repo.manifest_ok("platform/migrations", &[]);
    common::assert_batches_of(&doc, &[("99999-untagged", &["first-step"])]);
    // Again, refused: init never writes over a tree.
    let (code, doc, _) = json(&["init", tree_s]);
    assert_eq!(code, 2, "{doc}");
    assert_first_problem(&doc, "not empty");
}

#[test]
fn test_runs_each_scripts_test_reports_pass_and_fail_per_script_and_fails_on_any_failure() {
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("m");
    let tree_s = tree.to_str().unwrap();
    assert_eq!(json(&["init", tree_s]).0, 0);
    for slug in ["good-one", "bad-one", "untested"] {
        std::fs::write(
            tree.join("pre-apply").join(slug),
            migration_core::testing::fixtures::script_text(
                "pre-apply",
                "abort",
                &[],
                ". ./lib/kube.sh\nkube label namespace x a=b",
            ),
        )
        .unwrap();
    }
    for (slug, test) in [
        (
            "good-one",
            "#!/bin/sh\n. \"$(dirname \"$0\")/lib.sh\"\nrun_migration pre-apply/good-one\nexpect_call \"label namespace x a=b\"\nexpect_failure_when_kubectl_fails pre-apply/good-one label\n",
        ),
        (
            "bad-one",
            "#!/bin/sh\n. \"$(dirname \"$0\")/lib.sh\"\nrun_migration pre-apply/bad-one\nexpect_call \"delete namespace x\"\n",
        ),
    ] {
        std::fs::write(tree.join(format!("tests/{slug}.sh")), test).unwrap();
    }
    let (code, doc, _) = json(&["test", tree_s]);
    assert_eq!(code, 2, "{doc}");
    assert_eq!(
        (doc["passed"].as_u64(), doc["failed"].as_u64()),
        (Some(1), Some(2)),
        "{doc}"
    );
    let outcome = |slug: &str| {
        common::by_slug(&doc["results"], slug).unwrap_or_else(|| panic!("{slug}: {doc}"))
    };
    assert_eq!(outcome("good-one")["outcome"], "pass");
    assert_eq!(outcome("bad-one")["outcome"], "fail");
    assert!(
        outcome("bad-one")["output"]
            .as_str()
            .unwrap()
            .contains("expected call: kubectl delete namespace x")
    );
    assert_eq!(outcome("untested")["reason"], "no test");
    let (code, out, _) = text(&["test", tree_s]);
    assert_eq!(code, 2);
    assert!(out.contains("pass  good-one"), "{out}");
    assert!(
        out.contains("FAIL  bad-one") && out.contains("exit status 1"),
        "{out}"
    );
    assert!(out.contains("1 passed, 2 failed"), "{out}");
    // Once every test passes, exit 0.
    std::fs::remove_file(tree.join("pre-apply/bad-one")).unwrap();
    std::fs::remove_file(tree.join("pre-apply/untested")).unwrap();
    let (code, doc, _) = json(&["test", tree_s]);
    assert_eq!((code, doc["failed"].as_u64()), (0, Some(0)), "{doc}");
}

#[test]
fn completions_are_printed_for_each_shell() {
    for (shell, needle) in [
        ("bash", "_migrate()"),
        ("zsh", "#compdef migrate"),
        ("fish", "complete -c migrate"),
    ] {
        let (code, out, err) = text(&["completions", shell]);
        assert_eq!(code, 0, "{shell}: {err}");
        assert!(
            out.contains(needle),
            "{shell}: {}",
            &out[..out.len().min(200)]
        );
        assert!(
            out.contains("seed-fresh"),
            "{shell}: the subcommands are completed"
        );
    }
    let (code, _, _) = text(&["completions", "tcsh"]);
    assert_eq!(code, 2);
}

#[test]
fn version_names_the_commit_the_binary_was_built_from() {
    let (code, out, _) = text(&["--version"]);
    assert_eq!(code, 0);
    let commit = out
        .split("(commit ")
        .nth(1)
        .and_then(|rest| rest.split(')').next())
        .unwrap_or_else(|| panic!("{out}"));
    assert!(
        commit == "unknown"
            || (commit.len() == 12 && commit.bytes().all(|b| b.is_ascii_hexdigit())),
        "{out}"
    );
}

#[test]
fn kubeconfig_and_context_are_spelt_as_kubectl_spells_them_and_a_bad_one_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let status = |ledger: &str, kubeconfig: &std::path::Path, extra: &[&str]| {
        let mut args = vec!["status", "--ledger", ledger, "--kubeconfig"];
        args.push(kubeconfig.to_str().unwrap());
        args.extend_from_slice(extra);
        json(&args)
    };
    let missing = dir.path().join("no-such-kubeconfig");
    let (code, doc, _) = status("configmap:cozy-system/ledger", &missing, &[]);
    assert_eq!(code, 1, "{doc}");
    assert_first_problem(&doc, "--kubeconfig");
    assert_first_problem(&doc, "no-such-kubeconfig");
    let config = dir.path().join("config");
    std::fs::write(
        &config,
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:1\ncontexts:\n- name: here\n  context:\n    cluster: c\n    user: u\ncurrent-context: here\nusers:\n- name: u\n  user:\n    token: t\n",
    )
    .unwrap();
    let (code, doc, _) = status("crd:platform", &config, &["--context", "elsewhere"]);
    assert_eq!(code, 1, "{doc}");
    assert_first_problem(&doc, "--context elsewhere");
}

#[test]
fn index_refuses_an_image_tag_without_a_digest_unless_told() {
    let repo = Repo::new();
    repo.release_with("v1.0.0", &[("background", "bg")]);
    assert_eq!(repo.manifest().0, 0);
    let tree = repo.tree();
    let tree = tree.to_str().unwrap();
    let (code, doc, _) = json(&["index", tree, "--image", "registry.example/m:v1.0.0"]);
    assert_eq!(code, 2, "{doc}");
    assert_first_problem(&doc, "has no digest");
    assert_first_problem(&doc, "--allow-tag");
    let (code, _, err) = json(&[
        "index",
        tree,
        "--image",
        "registry.example/m:v1.0.0",
        "--allow-tag",
    ]);
    assert_eq!(code, 0, "{err}");
    let pinned = format!("registry.example/m@sha256:{}", "a".repeat(64));
    let (code, _, err) = json(&["index", tree, "--image", &pinned]);
    assert_eq!(code, 0, "{err}");
}

/// Where the CLI reference lives, and the command that rewrites it.
const CLI_REFERENCE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/cli.md");
const REWRITE_CLI_REFERENCE: &str =
    "MIGRATE_WRITE_CLI_REFERENCE=1 cargo test -p migrate --test cli the_cli_reference";

/// The CLI reference as `--help` prints it: the top-level help, then each
/// subcommand's, in the order `migrate --help` lists them.
fn cli_reference() -> String {
    let mut out = String::from(
        "# The `migrate` command line\n\n\
         Generated from `migrate --help` and each subcommand's `--help` by the test\n\
         `the_cli_reference_is_every_help_text_verbatim` (examples/migrate/tests/cli/cli_habits.rs),\n\
         which fails when this file and the program disagree. Rewrite it with\n\
         `MIGRATE_WRITE_CLI_REFERENCE=1 cargo test -p migrate --test cli the_cli_reference`.\n",
    );
    let section = |out: &mut String, title: &str, args: &[&str]| {
        let (code, help, err) = text(args);
        assert_eq!(code, 0, "{title}: {err}");
        out.push_str(&format!(
            "\n## {title}\n\n```text\n{}\n```\n",
            help.trim_end()
        ));
    };
    section(&mut out, "migrate", &["--help"]);
    let subcommands: Vec<String> = common::subcommands();
    for name in &subcommands {
        section(&mut out, &format!("migrate {name}"), &[name, "--help"]);
    }
    out
}

#[test]
fn the_cli_reference_is_every_help_text_verbatim() {
    let generated = cli_reference();
    if std::env::var_os("MIGRATE_WRITE_CLI_REFERENCE").is_some() {
        std::fs::write(CLI_REFERENCE, &generated).unwrap();
    }
    let committed = std::fs::read_to_string(CLI_REFERENCE).unwrap_or_default();
    assert!(
        committed == generated,
        "examples/docs/cli.md differs from what --help prints: rewrite it with {REWRITE_CLI_REFERENCE}"
    );
    let (_, top, _) = text(&["--help"]);
    let mut top_flags: BTreeSet<String> = help_flags(&top);
    top_flags.retain(|f| f != "--help" && f != "--version");
    let global: BTreeSet<String> = ["--output", "--v"].map(String::from).into();
    assert_eq!(top_flags, global, "the global flags");
}

#[test]
fn every_ledger_flag_names_every_ledger_kind_in_its_help() {
    for name in ["plan", "run", "status", "verify", "seed-fresh"] {
        let (_, help, _) = text(&[name, "--help"]);
        for kind in ["file:", "memory:", "configmap:", "crd:"] {
            assert!(help.contains(kind), "{name} --help names {kind}: {help}");
        }
    }
}
