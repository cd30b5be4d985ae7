//! The numbered runner's conventions as `migrate convert` finds them, on
//! single scripts: what is rewritten, what is left for review, and that a
//! rewritten script still parses under every shell.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use std::collections::BTreeSet;

use migrate_repo::convert::diff;
use migrate_repo::convert::patterns::{PatternConfig, analyse};

fn config() -> PatternConfig {
    PatternConfig {
        ledger_name: "cozystack-version".into(),
        stamp_helpers: BTreeSet::from(["stamp.sh".to_owned()]),
        stamp_functions: BTreeSet::from(["stamp_version".to_owned()]),
        ..PatternConfig::default()
    }
}

/// The rewritten text and `(kind, line, rewritable)` of every change.
fn rewrite(text: &str) -> (String, Vec<(&'static str, usize, bool)>) {
    let a = analyse(text, &config());
    let changes = a
        .changes
        .iter()
        .map(|c| (c.kind, c.line, c.rewritable))
        .collect();
    (diff::apply(text, &a.edits), changes)
}

/// The rewritten text of `text`, asserting that its changes are `expected`:
/// `kind:line` for each one rewritten, `kind:line:review` for each left for
/// review, separated by spaces.
fn rewritten(text: &str, expected: &str) -> String {
    let (out, changes) = rewrite(text);
    let changes: Vec<String> = changes
        .iter()
        .map(|(kind, line, rewritable)| {
            let review = if *rewritable { "" } else { ":review" };
            format!("{kind}:{line}{review}")
        })
        .collect();
    let expected: Vec<&str> = expected.split_whitespace().collect();
    assert_eq!(changes, expected, "{text}");
    out
}

/// Parses `text` with `sh -n` under every shell installed.
fn parses_everywhere(text: &str) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("s");
    std::fs::write(&file, text).unwrap();
    for shell in common::shells::all() {
        let mut words = shell.shebang.split_whitespace();
        let out = std::process::Command::new(words.next().unwrap())
            .args(words)
            .arg("-n")
            .arg(&file)
            .output()
            .unwrap();
        common::assert_success(&out, &format!("{} -n of\n{text}", shell.name));
    }
}

#[test]
fn a_heredoc_stamp_goes_with_its_body_and_delimiter() {
    let text = "#!/bin/sh\nset -eu\necho start\nkubectl apply -f - <<EOF\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cozystack-version\ndata:\n  version: \"5\"\nEOF\necho end\n";
    let out = rewritten(text, "version-stamp:4");
    assert_eq!(out, "#!/bin/sh\nset -eu\necho start\necho end\n");
    parses_everywhere(&out);
}

#[test]
fn a_stamp_alone_in_a_branch_leaves_a_colon_so_the_branch_still_parses() {
    let text = "#!/bin/sh\nif [ -n \"$x\" ]; then\n  stamp_version 7\nfi\necho done\n";
    let out = rewritten(text, "version-stamp:3");
    assert_eq!(
        out,
        "#!/bin/sh\nif [ -n \"$x\" ]; then\n  :\nfi\necho done\n"
    );
    parses_everywhere(&out);
}

#[test]
fn a_stamp_in_an_and_or_list_is_left_for_review_and_a_note_on_the_ledger_is_kept() {
    let text = "#!/bin/sh\nset -e\ntrue && stamp_version 3\nkubectl annotate configmap cozystack-version a=b\n";
    // The annotation names a key of the script's own: lint's
    // ledger-annotate, kept as it is (in the lint-baseline).
    let review = "version-stamp:3:review ledger-annotate:4";
    assert_eq!(rewritten(text, review), text, "nothing is rewritten");
}

#[test]
fn an_annotation_under_the_engines_keys_is_a_ledger_write_left_for_review() {
    let text = "#!/bin/sh\nset -e\nkubectl annotate configmap cozystack-version migrations.cozystack.io/run-lock-\n";
    let review = "ledger-write:3:review";
    assert_eq!(rewritten(text, review), text, "nothing is rewritten");
}

#[test]
fn a_stamp_in_a_comment_or_a_string_is_not_a_stamp() {
    let text = "#!/bin/sh\n# kubectl patch configmap cozystack-version version=3\necho \"stamp_version 3\"\n";
    let (out, changes) = rewrite(text);
    assert_eq!(out, text);
    assert!(changes.is_empty(), "{changes:?}");
}

#[test]
fn an_exit_after_the_stamp_is_done_and_one_before_it_means_retry_later() {
    let text = "#!/bin/sh\nif [ -z \"$ready\" ]; then\n  exit 0\nfi\nif [ -n \"$nothing\" ]; then\n  stamp_version 4\n  exit 0\nfi\nstamp_version 4\n";
    let out = rewritten(text, "retry-later-exit:3 version-stamp:6 version-stamp:9");
    assert!(
        out.contains("  exit 75\n") && out.contains("  exit 0\n"),
        "{out}"
    );
    parses_everywhere(&out);
}

#[test]
fn without_a_stamp_an_exit_zero_is_plain_success() {
    let (_, changes) = rewrite("#!/bin/sh\nif [ -z \"$x\" ]; then\n  exit 0\nfi\necho hi\n");
    assert!(changes.is_empty(), "{changes:?}");
}

#[test]
fn a_script_that_does_not_parse_is_reported_and_left_alone() {
    let text = "#!/bin/sh\nif then fi (\n";
    let (out, changes) = rewrite(text);
    assert_eq!(out, text);
    assert_eq!(changes.len(), 1);
    assert_eq!(changes[0].0, "shell-parse");
}

#[test]
fn an_exit_behind_a_dry_run_test_is_the_dry_run_not_a_retry() {
    let text = "#!/bin/sh\nDRY_RUN=\"${MIGRATION_DRY_RUN:-0}\"\n[ \"$DRY_RUN\" = \"1\" ] && { echo would; exit 0; }\nstamp_version 5\n";
    let out = rewritten(text, "dry-run-switch:2 dry-run-switch:3 version-stamp:4");
    assert!(out.contains("exit 0; }"), "{out}");
}

#[test]
fn a_dry_run_switch_reading_only_the_variable_the_runner_withholds_needs_no_review() {
    // The runner never passes MIGRATION_DRY_RUN to a script (set in its own
    // environment, the run executes nothing), so DRY_RUN is always its
    // default under the engine: the branch is the original's real-run path.
    let text = "#!/bin/sh\nset -eu\nDRY_RUN=\"${MIGRATION_DRY_RUN:-0}\"\nfor ns in a b; do\n  if [ \"$DRY_RUN\" = \"1\" ]; then\n    echo would patch \"$ns\"\n  else\n    kubectl patch ns \"$ns\" -p '{}'\n  fi\ndone\nif [ \"$DRY_RUN\" = 1 ]; then\n  echo done\n  exit 0\nfi\nstamp_version 5\n";
    let (_, changes) = rewrite(text);
    let dry: Vec<_> = changes.iter().filter(|c| c.0 == "dry-run-switch").collect();
    assert!(!dry.is_empty(), "{changes:?}");
    assert!(dry.iter().all(|c| c.2), "{changes:?}");
}

#[test]
fn a_dry_run_switch_the_environment_can_still_set_is_left_for_review() {
    for text in [
        // Read before it is assigned: the Job's own DRY_RUN would count.
        "#!/bin/sh\n[ \"${DRY_RUN:-0}\" = 1 ] && exit 0\nDRY_RUN=\"${MIGRATION_DRY_RUN:-0}\"\n[ \"$DRY_RUN\" = 1 ] && { echo would; exit 0; }\nstamp_version 5\n",
        // Assigned from another variable besides the runner's.
        "#!/bin/sh\nDRY_RUN=\"${DRY_RUN:-${MIGRATION_DRY_RUN:-0}}\"\n[ \"$DRY_RUN\" = 1 ] && { echo would; exit 0; }\nstamp_version 5\n",
        // Assigned from a command's output.
        "#!/bin/sh\nDRY_RUN=\"$(cat /etc/dry)${MIGRATION_DRY_RUN:-0}\"\n[ \"$DRY_RUN\" = 1 ] && { echo would; exit 0; }\nstamp_version 5\n",
    ] {
        let (_, changes) = rewrite(text);
        assert!(
            changes.iter().any(|c| c.0 == "dry-run-switch" && !c.2),
            "{text}: {changes:?}"
        );
    }
}
