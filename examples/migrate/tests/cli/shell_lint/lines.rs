//! Where lint places a finding, and which finding a waiver accepts: a
//! finding inside a multi-line `$(...)` is reported on the line its command
//! is on (backslash continuations included), and a waiver accepts the
//! findings of the one line it is meant for.

use super::*;

/// Lines 5..: a substitution over several lines, two of them continued
/// with a backslash, then the masked command on line 9.
const CONTINUED: &str = "names=\"$(\n  kubectl get namespaces \\\n    --output name \\\n    --chunk-size 0\n  kubectl get pods --all-namespaces || true\n)\"\necho \"$names\"";

#[test]
fn findings_after_backslash_continuations_inside_a_substitution_are_on_their_own_lines() {
    let doc = refused(
        CONTINUED,
        &[
            ("errexit-off-in-substitution", 6),
            ("kubectl-error-ignored", 9),
        ],
    );
    // The substitution it names starts on line 5.
    let message = doc["findings"][0]["message"].as_str().unwrap();
    assert!(message.contains("(pre-apply/a:5)"), "{message}");
}

#[test]
fn a_waiver_above_a_continued_command_inside_a_substitution_accepts_it() {
    let body = CONTINUED.replace(
        "\n  kubectl get namespaces",
        "\n  # migrate: allow errexit-off-in-substitution: the list is only printed\n  kubectl get namespaces",
    );
    let (code, doc) = lint_body(&body);
    assert_eq!(
        (code, placed(&doc)),
        (2, vec![("kubectl-error-ignored".to_owned(), 10)]),
        "{doc}"
    );
    assert_eq!(doc["waived"][0]["line"], 7, "{doc}");
    assert_eq!(doc["waived"][0]["waiver_line"], 6, "{doc}");
}

#[test]
fn a_finding_after_continuations_in_a_plain_command_is_on_the_line_it_starts() {
    let body = "kubectl annotate ns default \\\n  a=b \\\n  --overwrite\nkubectl get pods || true";
    let (_, doc) = lint_body(body);
    assert_eq!(
        placed(&doc),
        [("kubectl-error-ignored".to_owned(), 8)],
        "{doc}"
    );
}

#[test]
fn a_waiver_at_the_end_of_a_line_does_not_accept_the_same_finding_on_the_next_line() {
    let body = "kubectl get ns || true # migrate: allow kubectl-error-ignored: a probe\nkubectl get pods || true";
    let doc = refused(body, &[("kubectl-error-ignored", 6)]);
    let waived = doc["waived"].as_array().unwrap();
    assert_eq!(waived.len(), 1, "{doc}");
    assert_eq!(
        (
            waived[0]["line"].as_u64(),
            waived[0]["waiver_line"].as_u64()
        ),
        (Some(5), Some(5))
    );
}

#[test]
fn a_waiver_on_a_line_of_its_own_accepts_the_next_line_only_and_is_used() {
    let body = "# migrate: allow kubectl-error-ignored: a probe\nkubectl get ns || true\nkubectl get pods || true";
    let doc = refused(body, &[("kubectl-error-ignored", 7)]);
    assert_eq!(doc["waived"][0]["line"], 6, "{doc}");
}

#[test]
fn a_waiver_at_the_end_of_the_line_before_a_finding_is_unused_and_accepts_nothing() {
    // It sits on a command line, so it speaks of that line: the finding of
    // the next line stands, and the waiver is reported as matching nothing.
    let body =
        "echo probing # migrate: allow kubectl-error-ignored: a probe\nkubectl get ns || true";
    refused(body, &[("waiver-unused", 5), ("kubectl-error-ignored", 6)]);
}
