//! The tree's settings file, `<tree>/migrate.toml` (issue 29): what every
//! call would repeat (the path history, `--tree-since`, the tag pattern,
//! the ledger name, the cluster commands and the header marker), written
//! once, so a platform other than the reference one uses its own. A flag
//! beats the file, the file beats the default; a broken file is refused
//! before anything runs, naming the file, the line and the key.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use common::{Repo, empty_file_ledger, fields, json};
use migration_core::testing::fixtures::script_text;

/// A script of `tier` with `body`, its header written with `marker`.
fn script_marked(marker: &str, tier: &str, body: &str) -> String {
    script_text(tier, "abort", &[], body).replace("cozystack-migration:", &format!("{marker}:"))
}

/// A repository whose tree has `settings` as its `migrate.toml`, and
/// pre-apply script `a` (with a test) of `body` in `marker`'s header.
fn repo_with(settings: &str, marker: &str, body: &str) -> Repo {
    let repo = Repo::new();
    repo.write("migrate.toml", settings);
    repo.write("pre-apply/a", &script_marked(marker, "pre-apply", body));
    repo.write("tests/a.sh", "#!/bin/sh\n");
    repo
}

/// `migrate lint TREE EXTRA...`: (exit code, rule ids, the document).
fn lint(repo: &Repo, extra: &[&str]) -> (i32, Vec<String>, serde_json::Value) {
    let tree = repo.tree();
    let mut args = vec!["lint", tree.to_str().unwrap()];
    args.extend_from_slice(extra);
    let (code, doc, _) = json(&args);
    let rules = match doc["findings"].as_array() {
        Some(_) => fields(&doc["findings"], "rule")
            .into_iter()
            .map(str::to_owned)
            .collect(),
        None => Vec::new(),
    };
    (code, rules, doc)
}

/// Commits the tree as release v1.0.0 and generates its manifest, which
/// must succeed.
fn released(repo: &Repo) {
    repo.release("v1.0.0");
    let (code, doc, err) = repo.manifest();
    assert_eq!(code, 0, "{doc}\n{err}");
}

/// Asserts that lint refuses `repo`'s tree with a finding of `rule`.
fn lint_finds(repo: &Repo, rule: &str) {
    let (code, rules, doc) = lint(repo, &[]);
    assert_eq!(code, 2, "{doc}");
    assert!(rules.iter().any(|r| r == rule), "{rule}: {doc}");
}

/// [`released`], and an existing empty file ledger beside the tree: its
/// `--ledger` spec.
fn released_on_a_ledger(repo: &Repo) -> String {
    released(repo);
    empty_file_ledger(&repo.path().join("ledger.json"))
}

/// Asserts that `migrate COMMAND` of `repo`'s tree on `ledger` is refused
/// before anything runs (exit 3), naming `rule`.
fn refused_naming(repo: &Repo, command: &str, ledger: &str, rule: &str) {
    let (code, doc, _) = repo.on_ledger(command, ledger, &[]);
    assert_eq!(code, 3, "{command}: {doc}");
    assert!(
        doc["problems"].to_string().contains(rule),
        "{command}: {doc}"
    );
}

/// A tree of `settings` whose script `body` masks a cluster command's
/// failure: lint finds it, and each of `commands` refuses it before
/// anything runs.
fn masked_cluster_command_refused(settings: &str, body: &str, commands: &[&str]) {
    let repo = repo_with(settings, "cozystack-migration", body);
    lint_finds(&repo, "kubectl-error-ignored");
    let ledger = released_on_a_ledger(&repo);
    for command in commands {
        refused_naming(&repo, command, &ledger, "kubectl-error-ignored");
    }
}

const ACME: &str = "header-marker = \"acme-migration\"\n";

/// A heredoc applying the ConfigMap `name`.
fn apply_configmap(name: &str) -> String {
    format!(
        "kubectl apply -f - <<EOF\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: cozy-system\ndata:\n  version: \"46\"\nEOF"
    )
}

#[test]
fn a_tree_with_its_own_header_marker_loads_lints_and_runs() {
    let repo = repo_with(
        ACME,
        "acme-migration",
        "echo ran > \"$MIGRATION_TREE/../ran\"",
    );
    let (code, rules, doc) = lint(&repo, &[]);
    assert_eq!((code, rules), (0, vec![]), "{doc}");
    let ledger = released_on_a_ledger(&repo);
    let report = repo.succeeds("run", &ledger, &[]);
    common::assert_field_pairs(&report["results"], "slug", "outcome", &[("a", "ok")]);
    assert!(repo.path().join("ran").exists());
}

#[test]
fn a_default_marker_header_in_a_tree_with_its_own_marker_is_no_header_at_all() {
    // The header parser's rule: a directive is a comment starting with
    // exactly the tree's marker, and `cozystack-migration` is no near miss
    // of `acme-migration` (more than two edits), so those lines are plain
    // comments and both required keys are missing; the message names the
    // tree's marker and where it comes from.
    let repo = repo_with(ACME, "cozystack-migration", "echo a");
    let (code, rules, doc) = lint(&repo, &[]);
    assert_eq!(code, 2, "{doc}");
    assert_eq!(rules, ["header", "header"], "{doc}");
    let message = doc["findings"][0]["message"].as_str().unwrap();
    common::assert_contains_all(
        message,
        &["missing header key", "'# acme-migration: ", "migrate.toml"],
    );
    // Every command that loads the tree reads it so.
    let (code, doc, _) = repo.on_ledger("plan", "memory:", &[]);
    assert_eq!(code, 2, "{doc}");
    common::assert_first_problem(&doc, "acme-migration");
}

#[test]
fn a_near_miss_of_the_trees_own_marker_is_a_header_error_naming_it() {
    let repo = repo_with(ACME, "acme-migrations", "echo a");
    let (code, _, doc) = lint(&repo, &[]);
    assert_eq!(code, 2, "{doc}");
    assert!(
        doc["findings"]
            .to_string()
            .contains("did you mean '# acme-migration: tier=pre-apply'"),
        "{doc}"
    );
}

#[test]
fn a_ledger_name_in_the_file_makes_lint_and_the_pre_run_scan_flag_writes_of_that_configmap() {
    let repo = repo_with(
        "ledger-name = \"acme-version\"\n",
        "cozystack-migration",
        &apply_configmap("acme-version"),
    );
    lint_finds(&repo, "ledger-write");
    // The pre-run scan reads the same file (it used the defaults whatever
    // lint was told): run refuses before the script starts.
    let ledger = released_on_a_ledger(&repo);
    refused_naming(&repo, "run", &ledger, "ledger-write");
    let (code, doc, _) = repo.on_ledger("plan", &ledger, &[]);
    assert_eq!(code, 3, "{doc}");
}

#[test]
fn cluster_commands_in_the_file_are_scanned_by_lint_and_by_the_run() {
    masked_cluster_command_refused(
        "cluster-commands = [\"oc\", \"kubectl\"]\n",
        "oc delete namespace old || true",
        &["run"],
    );
}

#[test]
fn the_files_cluster_commands_join_the_defaults_and_never_take_one_off() {
    // A setting only adds (as the tree's cluster-commands file does):
    // kubectl stays a cluster command for lint, plan and run alike.
    masked_cluster_command_refused(
        "cluster-commands = [\"oc\"]\n",
        "kubectl delete namespace old || true",
        &["plan", "run"],
    );
}

#[test]
fn a_flag_beats_the_file() {
    // The file says the ledger is acme-version; the flag says it is
    // cozystack-version: the write of acme-version is then no ledger write.
    let repo = repo_with(
        "ledger-name = \"acme-version\"\ncluster-commands = [\"oc\"]\n",
        "cozystack-migration",
        &apply_configmap("acme-version"),
    );
    let (code, rules, doc) = lint(&repo, &["--ledger-name", "cozystack-version"]);
    assert!(!rules.iter().any(|r| r == "ledger-write"), "{doc}");
    assert_eq!(code, 0, "{doc}");
    // The file's cluster commands, replaced by the flag's.
    repo.write(
        "pre-apply/a",
        &script_marked(
            "cozystack-migration",
            "pre-apply",
            "oc delete namespace old || true",
        ),
    );
    let (_, rules, _) = lint(&repo, &[]);
    assert!(rules.iter().any(|r| r == "kubectl-error-ignored"));
    let (code, rules, doc) = lint(&repo, &["--kubectl-command", "kubectl"]);
    assert_eq!((code, rules), (0, vec![]), "{doc}");
}

#[test]
fn the_manifest_reads_the_tag_pattern_the_tree_since_and_the_old_paths_from_the_file() {
    // Releases tagged without the v (1.0.0), the tree moved from
    // old/migrations: the file says both, so the plain call works.
    let repo = crate::manifest_paths::moved_tagged("");
    let (code, doc, _) = repo.manifest_at("migrations", &[]);
    assert_eq!(code, 2, "without the file the tags are not found: {doc}");
    repo.write(
        "migrate.toml",
        "tag-pattern = \"[0-9]*\"\nold-paths = [\"old/migrations\"]\n",
    );
    let doc = repo.manifest_ok("migrations", &[]);
    common::assert_batches_of(&doc, &[("00001-1.0.0", &["a"]), ("00002-1.1.0", &["b"])]);
    // A flag beats the file: this pattern matches no tag.
    let (code, doc, _) = repo.manifest_at("migrations", &["--tag-pattern", "v*"]);
    assert_eq!(code, 2, "{doc}");
    // And tree-since: tags before 1.1.0 predate the tree, so without
    // old-paths 1.0.0 contributes nothing.
    repo.write(
        "migrate.toml",
        "tag-pattern = \"[0-9]*\"\ntree-since = \"1.1.0\"\n",
    );
    let doc = repo.manifest_ok("migrations", &[]);
    common::assert_batches_of(&doc, &[("00002-1.1.0", &["a", "b"])]);
}

/// Asserts that `args` (a command on `repo`'s tree) is refused with exit 2
/// naming `migrate.toml`, `line` and `key`, and that nothing ran.
fn refused_before_anything_runs(repo: &Repo, settings: &str, line: usize, key: &str) {
    repo.write("migrate.toml", settings);
    let ledger_path = repo.path().join("ledger.json");
    let ledger = common::file_spec(&ledger_path);
    let tree = repo.tree();
    let tree = tree.to_str().unwrap();
    let needle = format!("migrate.toml:{line}:");
    for args in [
        vec!["lint", tree],
        vec!["plan", tree, "--ledger", &ledger],
        vec!["run", tree, "--ledger", &ledger],
        vec![
            "manifest",
            "--repo",
            repo.path().to_str().unwrap(),
            "--path",
            "migrations",
        ],
        vec!["new", tree, "another-one"],
    ] {
        let (code, doc, err) = json(&args);
        assert_eq!(code, 2, "{args:?}: {doc}\n{err}");
        let problems = doc["problems"].to_string();
        assert!(
            problems.contains(&needle) && problems.contains(key),
            "{args:?}: {problems}"
        );
    }
    assert!(!repo.path().join("ran").exists(), "a script ran");
    assert!(!ledger_path.exists(), "the ledger was written");
    assert!(!repo.tree().join("pre-apply/another-one").exists());
}

#[test]
fn a_broken_settings_file_is_refused_before_anything_runs_naming_the_file_the_line_and_the_key() {
    let repo = repo_with(
        "",
        "cozystack-migration",
        "echo ran > \"$MIGRATION_TREE/../ran\"",
    );
    released(&repo);
    // An unknown key, with the one it is nearest to.
    refused_before_anything_runs(
        &repo,
        "tag-pattern = \"v*\"\nledger-nmae = \"x\"\n",
        2,
        "ledger-nmae",
    );
    let (_, doc, _) = json(&["lint", repo.tree().to_str().unwrap()]);
    assert!(
        doc["problems"]
            .to_string()
            .contains("did you mean 'ledger-name'?"),
        "{doc}"
    );
    // A value of the wrong type.
    refused_before_anything_runs(
        &repo,
        "\ncluster-commands = \"oc\"\n",
        2,
        "cluster-commands",
    );
    // Not TOML.
    refused_before_anything_runs(
        &repo,
        "tag-pattern = \"v*\"\n\nheader-marker = acme\n",
        3,
        "TOML",
    );
    // A value the key cannot take.
    refused_before_anything_runs(
        &repo,
        "header-marker = \"Acme Migration\"\n",
        1,
        "header-marker",
    );
}

#[test]
fn an_empty_settings_file_means_the_defaults() {
    let repo = repo_with(
        "",
        "cozystack-migration",
        &apply_configmap("cozystack-version"),
    );
    let (code, rules, doc) = lint(&repo, &[]);
    assert_eq!(code, 2, "{doc}");
    assert_eq!(rules, ["ledger-write"], "{doc}");
    repo.write(
        "pre-apply/a",
        &script_marked("cozystack-migration", "pre-apply", "echo a"),
    );
    let (code, rules, doc) = lint(&repo, &[]);
    assert_eq!((code, rules), (0, vec![]), "{doc}");
    released(&repo);
    repo.succeeds("plan", "memory:", &[]);
}

#[test]
fn new_scaffolds_with_the_trees_marker() {
    let repo = repo_with(ACME, "acme-migration", "echo a");
    let tree = repo.tree();
    let (code, doc, err) = json(&["new", tree.to_str().unwrap(), "b-step"]);
    assert_eq!(code, 0, "{doc}\n{err}");
    let text = std::fs::read_to_string(tree.join("pre-apply/b-step")).unwrap();
    assert!(
        text.contains("# acme-migration: tier=pre-apply\n"),
        "{text}"
    );
    assert!(!text.contains("cozystack-migration"), "{text}");
    let (code, rules, doc) = lint(&repo, &[]);
    assert!(!rules.iter().any(|r| r == "header"), "{doc}");
    let _ = code;
}

#[test]
fn convert_writes_the_settings_it_was_given_into_the_new_trees_file() {
    use common::numbered::history;
    let repo = history();
    let dir = tempfile::tempdir().unwrap();
    let convert = |out: &std::path::Path, extra: &[&str]| {
        let mut args = vec!["--rewrite"];
        args.extend_from_slice(extra);
        common::numbered::convert(&repo, out, &args)
    };
    // Given nothing, it writes no file: the defaults need no saying.
    let plain = dir.path().join("plain");
    let (code, doc, err) = convert(&plain, &[]);
    assert_eq!(code, 0, "{doc}\n{err}");
    assert!(!plain.join("migrate.toml").exists());
    // Given a marker and a tag pattern, the new tree keeps them.
    let out = dir.path().join("acme");
    let (code, doc, err) = convert(
        &out,
        &["--header-marker", "acme-migration", "--tag-pattern", "v*"],
    );
    assert_eq!(code, 0, "{doc}\n{err}");
    let settings = std::fs::read_to_string(out.join("migrate.toml")).unwrap();
    assert!(
        settings.contains("header-marker = \"acme-migration\"\n"),
        "{settings}"
    );
    assert!(settings.contains("tag-pattern = \"v*\"\n"), "{settings}");
    assert!(!settings.contains("ledger-name"), "{settings}");
    let script = std::fs::read_to_string(out.join("pre-apply/1")).unwrap();
    assert!(
        script.starts_with("#!/bin/sh\n# acme-migration: tier=pre-apply\n"),
        "{script}"
    );
    // Every later command reads the tree with that marker: its headers are
    // headers (the test stubs and frozen findings are another matter).
    let (_, rules, doc) = lint_tree(&out);
    assert!(
        !rules.iter().any(|r| r == "header" || r == "settings"),
        "{doc}"
    );
    // A marker that is no word is refused by the flag.
    let (code, _, err) = common::text(&[
        "convert",
        "--repo",
        ".",
        "--path",
        "x",
        "--out",
        "y",
        "--header-marker",
        "Acme Migration",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("header marker"), "{err}");
}

/// `migrate lint DIR`: (exit code, rule ids, the document).
fn lint_tree(dir: &std::path::Path) -> (i32, Vec<String>, serde_json::Value) {
    let (code, doc, _) = json(&["lint", dir.to_str().unwrap()]);
    let rules = fields(&doc["findings"], "rule")
        .into_iter()
        .map(str::to_owned)
        .collect();
    (code, rules, doc)
}
