//! Waivers: `# migrate: allow RULE: reason` accepts a finding on its own line
//! or the next, needs a reason, and a waiver that matches nothing is reported.

use super::*;

const WAIVED_FOR: &str = "# migrate: allow for-command-substitution: the list is re-read and checked after the loop\nfor ns in $(kubectl get ns -o name); do echo \"$ns\"; done";

#[test]
fn a_waiver_with_a_reason_accepts_the_finding_reports_it_and_run_proceeds() {
    let text = script_text("pre-apply", "abort", &[], WAIVED_FOR);
    let dir = tree(&[("waived", &text)]);
    let (code, doc) = lint(dir.path(), &["--shellcheck-level", "off"], None);
    assert_eq!((code, rules(&doc)), (0, vec![]), "{doc}");
    let waived = &doc["waived"][0];
    assert_eq!(waived["file"], "pre-apply/waived");
    assert_eq!(waived["line"], 6);
    assert_eq!(waived["rule"], "for-command-substitution");
    assert_eq!(waived["waiver_line"], 5);
    assert_eq!(
        waived["reason"],
        "the list is re-read and checked after the loop"
    );
    // The waived finding does not block run.
    let scratch = tempfile::tempdir().unwrap();
    let bin = scratch.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    write_executable(&bin.join("kubectl"), "#!/bin/sh\necho namespace/a\n");
    let ledger = common::empty_file_ledger(&scratch.path().join("ledger.json"));
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    let out = migrate()
        .args(["run", dir.path().to_str().unwrap(), "--ledger", &ledger])
        .args(["--output", "json"])
        .env("PATH", path)
        .output()
        .unwrap();
    let (code, doc, err) = parse(out);
    assert_eq!(code, 0, "{doc} {err}");
    assert_eq!(doc["results"][0]["outcome"], "ok");
}

#[test]
fn a_waiver_on_the_findings_own_line_applies_and_one_two_lines_up_does_not() {
    let same_line = "for ns in $(kubectl get ns -o name); do echo \"$ns\"; done # migrate: allow for-command-substitution: checked below";
    assert_eq!(lint_body(same_line).0, 0);
    let too_far = WAIVED_FOR.replace("\nfor", "\necho spacer\nfor");
    let (code, doc) = lint_body(&too_far);
    assert_eq!(code, 2);
    let expected = ["waiver-unused", "for-command-substitution"];
    assert_eq!(rules(&doc), expected, "{doc}");
}

#[test]
fn a_waiver_without_a_reason_is_an_error_and_waives_nothing() {
    let body = "# migrate: allow for-command-substitution\nfor ns in $(kubectl get ns -o name); do echo \"$ns\"; done";
    let (code, doc) = lint_body(body);
    assert_eq!(code, 2);
    let expected = ["waiver-reason", "for-command-substitution"];
    assert_eq!(rules(&doc), expected, "{doc}");
    assert!(doc["waived"].as_array().unwrap().is_empty());
}

#[test]
fn a_waiver_that_matches_nothing_is_a_warning_and_one_naming_no_rule_is_an_error() {
    let body = "# migrate: allow kubectl-error-ignored: it used to be needed\necho ok";
    let (code, doc) = lint_body(body);
    assert_eq!((code, rules(&doc)), (0, vec!["waiver-unused".to_owned()]));
    assert_eq!(doc["findings"][0]["level"], "warning");
    assert_eq!(doc["findings"][0]["line"], 5);
    let body = "# migrate: allow kubectl-eror-ignored: typo\necho ok";
    let (code, doc) = lint_body(body);
    assert_eq!((code, rules(&doc)), (2, vec!["waiver-rule".to_owned()]));
}
