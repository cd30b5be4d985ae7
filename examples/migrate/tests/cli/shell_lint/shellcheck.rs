//! shellcheck alongside lint: run in the tree's dialect, following sources,
//! its findings reported at the level asked for.

use super::*;

/// A stand-in shellcheck that logs its arguments and prints one finding.
fn fake_shellcheck(dir: &Path) -> (PathBuf, PathBuf) {
    let bin = dir.join("sc-bin");
    std::fs::create_dir_all(&bin).unwrap();
    let log = dir.join("shellcheck-args");
    let report = dir.join("report.json");
    std::fs::write(
        &report,
        r#"{"comments":[{"file":"./lib/kube.sh","line":7,"endLine":7,"column":5,"endColumn":9,"level":"info","code":2086,"message":"Double quote to prevent globbing and word splitting.","fix":null}]}"#,
    )
    .unwrap();
    write_executable(
        &bin.join("shellcheck"),
        &format!(
            "#!/bin/sh\nprintf '%s\\n' \"$PWD\" \"$@\" >> '{}'\ncat '{}'\nexit 1\n",
            log.display(),
            report.display()
        ),
    );
    (bin, log)
}

#[test]
fn shellcheck_runs_in_the_trees_dialect_following_sources_and_reports_warnings() {
    let dir = tree(&[(
        "a",
        &script_text("pre-apply", "abort", &[], ". ./lib/kube.sh\nkube get ns"),
    )]);
    let scratch = tempfile::tempdir().unwrap();
    let (bin, log) = fake_shellcheck(scratch.path());
    let path = format!("{}:/usr/bin:/bin", bin.display());
    let (code, doc) = lint(dir.path(), &[], Some(&path));
    assert_eq!(code, 0, "warnings by default: {doc}");
    assert_eq!(doc["shellcheck"]["ran"], true);
    let f = &doc["findings"][0];
    assert_eq!(f["rule"], "shellcheck:SC2086");
    assert_eq!(f["level"], "warning");
    assert_eq!(
        (f["file"].as_str(), f["line"].as_u64()),
        (Some("lib/kube.sh"), Some(7))
    );
    let args = std::fs::read_to_string(&log).unwrap();
    let args: Vec<&str> = args.lines().collect();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    assert_eq!(args[0], root.to_str().unwrap(), "run from the tree root");
    for expected in [
        "-f",
        "json1",
        "-s",
        "sh",
        "-x",
        &format!("--source-path={}:SCRIPTDIR", root.display()),
        "pre-apply/a",
        "lib/kube.sh",
    ] {
        assert!(args.contains(&expected), "{expected} not in {args:?}");
    }
    // Configurable: as errors, or not at all.
    let (code, _) = lint(dir.path(), &["--shellcheck-level", "error"], Some(&path));
    assert_eq!(code, 2);
    std::fs::remove_file(&log).unwrap();
    let (code, doc) = lint(dir.path(), &["--shellcheck-level", "off"], Some(&path));
    assert_eq!((code, rules(&doc)), (0, vec![]));
    assert!(!log.exists(), "off does not run it");
}

#[test]
fn without_shellcheck_lint_notes_it_once_and_does_not_fail() {
    let dir = tree(&[("a", &script_text("pre-apply", "abort", &[], "echo ok"))]);
    let empty = tempfile::tempdir().unwrap();
    let path = empty.path().to_str().unwrap();
    let (code, doc) = lint(dir.path(), &[], Some(path));
    assert_eq!((code, rules(&doc)), (0, vec![]));
    assert_eq!(doc["shellcheck"]["ran"], false);
    common::assert_contains_all(
        doc["shellcheck"]["note"].as_str().unwrap(),
        &["not installed"],
    );
    let out = migrate()
        .arg("lint")
        .arg(dir.path())
        .env("PATH", path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        text.matches("note: shellcheck is not installed").count(),
        1,
        "{text}"
    );
}

#[test]
fn the_real_shellcheck_reports_its_findings_in_scripts_and_sourced_helpers() {
    if !on_path("shellcheck") {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI installs shellcheck (.ci/install-lint-tools)"
        );
        eprintln!("shellcheck is not installed: skipped");
        return;
    }
    let body = ". ./lib/helpers.sh\nshow $1";
    let dir = tree(&[("a", &script_text("pre-apply", "abort", &[], body))]);
    std::fs::write(
        dir.path().join("lib/helpers.sh"),
        "show() {\n    echo $1\n}\n",
    )
    .unwrap();
    let (code, doc) = lint(dir.path(), &[], None);
    assert_eq!(code, 0, "{doc}");
    assert_eq!(doc["shellcheck"]["ran"], true, "{doc}");
    let found = common::field_pairs(&doc["findings"], "file", "rule");
    for (file, rule) in [
        ("pre-apply/a", "shellcheck:SC2086"),
        ("lib/helpers.sh", "shellcheck:SC2086"),
    ] {
        assert!(
            found.contains(&(file.to_owned(), rule.to_owned())),
            "{file} {rule}: {found:?}"
        );
    }
}

#[test]
fn the_demo_tree_lints_clean_shellcheck_included() {
    let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../demo");
    let (code, doc) = lint(&demo, &[], None);
    assert_eq!((code, rules(&doc)), (0, vec![]), "{doc}");
    if on_path("shellcheck") {
        assert_eq!(doc["shellcheck"]["ran"], true, "{doc}");
        assert!(doc["shellcheck"]["files"].as_u64().unwrap() >= 8, "{doc}");
    }
}
