//! The last failure of an `on-error=abort` migration (issue 27): kept in
//! the ledger beside its attempt mark (`f.<slug>`), non-terminal, shown by
//! `status`, `status SLUG` and `plan`, its output redacted, and gone once
//! the slug's next outcome is recorded. A retried upgrade deletes the hook
//! Job that printed the failure; the ledger still says what happened.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use common::shells::Shell;
use common::tripwire::Scratch;

/// The secret the failing script prints; never stored.
const SECRET: &str = "hunter2-very-secret";

/// A failing body: a secret-shaped line, then the line that explains it.
fn failing_body() -> String {
    format!("echo \"connecting with password={SECRET}\"\necho 'boom: the widget is broken'\nexit 3")
}

/// `/bin/sh`, which `plan` allows without `--allow-interpreter` (the shell
/// does not matter here: the scripts only print and exit).
fn sh() -> Shell {
    Shell {
        name: "sh",
        shebang: "/bin/sh".to_owned(),
        is_bash: false,
    }
}

fn world(shell: &Shell, second: &str) -> Scratch {
    let s = Scratch::new();
    s.scripts(shell, "abort", &[("one", "echo one done"), ("two", second)]);
    s
}

fn status(s: &Scratch, extra: &[&str]) -> (i32, serde_json::Value, String) {
    let mut args = vec!["status", "--ledger"];
    let ledger = s.ledger();
    args.push(&ledger);
    args.extend_from_slice(extra);
    common::json(&args)
}

fn text(s: &Scratch, args: &[&str]) -> String {
    let ledger = s.ledger();
    let mut all: Vec<&str> = args.to_vec();
    all.extend(["--ledger", &ledger]);
    let (code, out, err) = common::text(&all);
    assert_eq!(code, 0, "{out}\n{err}");
    out
}

fn plan(s: &Scratch) -> serde_json::Value {
    let (code, doc, err) = common::on_ledger("plan", &s.tree(), &s.ledger(), &[]);
    assert_eq!(code, 0, "{doc}\n{err}");
    doc
}

/// The failure record as `status` shows it, asserted whole.
fn assert_failure(failure: &serde_json::Value, attempts: u64) {
    assert_eq!(failure["reason"], "exit-status-3", "{failure}");
    let message = failure["message"].as_str().unwrap();
    assert!(message.contains("boom: the widget is broken"), "{message}");
    assert!(message.contains("[redacted]"), "{message}");
    assert!(!message.contains(SECRET), "{message}");
    assert_eq!(failure["attempts"], attempts, "{failure}");
    let at = failure["at"].as_str().unwrap();
    assert!(at.ends_with('Z') && at.len() >= 20, "{at}");
}

#[test]
fn an_abort_failure_is_kept_redacted_shown_by_status_and_plan_and_gone_after_the_next_outcome() {
    let shell = sh();
    let s = world(&shell, &failing_body());

    // Two failing runs: nothing terminal recorded, the record replaced.
    for attempt in 1..=2u64 {
        let (code, report, stderr) = s.run(&shell, "up");
        assert_ne!(code, 0, "{report}\n{stderr}");
        let (code, doc, err) = status(&s, &[]);
        assert_eq!(code, 0, "{doc}\n{err}");
        assert!(
            common::by_slug(&doc["entries"], "two").is_none(),
            "nothing terminal is recorded: {doc}"
        );
        let two = common::by_slug(&doc["unrecorded"], "two").expect("two is unrecorded");
        assert_failure(&two["last_failure"], attempt);
    }
    let raw = std::fs::read_to_string(s.ledger_path()).unwrap();
    assert!(!raw.contains(SECRET), "the ledger never holds the secret");
    assert!(raw.contains("\"f.two\""), "the record is f.two: {raw}");

    // `status SLUG`: the record whole, as JSON and as text.
    let (code, one, err) = status(&s, &["two"]);
    assert_eq!(code, 0, "{one}\n{err}");
    assert_failure(&one["last_failure"], 2);
    let shown = text(&s, &["status", "two"]);
    common::assert_contains_all(
        &shown,
        &[
            "last failure:",
            "exit-status-3",
            "boom: the widget is broken",
            "[redacted]",
        ],
    );
    assert!(!shown.contains(SECRET), "{shown}");

    // `status`: the table flags it.
    let table = text(&s, &["status"]);
    assert!(table.contains("last failure"), "{table}");
    assert!(table.contains("exit-status-3"), "{table}");

    // `plan`: the pending slug says it failed last time, text and JSON.
    let doc = plan(&s);
    let pending = common::by_slug(&doc["pending"], "two").expect("two is pending");
    assert_failure(&pending["last_failure"], 2);
    let tree = s.tree();
    let shown = text(&s, &["plan", tree.to_str().unwrap()]);
    assert!(shown.contains("last failed"), "{shown}");
    assert!(shown.contains("exit-status-3"), "{shown}");

    // Fixed: it runs ok, and the record is gone.
    s.scripts(
        &shell,
        "abort",
        &[("one", "echo one done"), ("two", "echo fixed")],
    );
    let (code, report, stderr) = s.run(&shell, "up");
    assert_eq!(code, 0, "{report}\n{stderr}");
    let (_, doc, _) = status(&s, &[]);
    let two = common::by_slug(&doc["entries"], "two").expect("two is recorded");
    assert_eq!(two["state"], "ok");
    assert_eq!(two["attempts"], 3);
    assert!(two.get("last_failure").is_none(), "{two}");
    let raw = std::fs::read_to_string(s.ledger_path()).unwrap();
    let replayed = common::json(&["status", "--ledger", &s.ledger()]).1;
    assert!(
        common::by_slug(&replayed["unrecorded"], "two").is_none(),
        "{replayed}"
    );
    assert!(!status(&s, &["two"]).1.to_string().contains("last_failure"));
    assert!(!text(&s, &["status"]).contains("last failure"));
    // The journal keeps its history (the clearing is a put of its own),
    // but no reader shows a record any more.
    assert!(raw.contains("\"f.two\":\"\""), "{raw}");
}

#[test]
fn a_corrupt_last_failure_is_a_warning_and_blocks_nothing() {
    let shell = sh();
    let s = world(&shell, "echo two done");
    // A hand-edited ledger: a value that does not parse and a key that is
    // not a slug's.
    common::block_on(async {
        use migration_core::Ledger;
        let ledger = ledger_file::FileLedger::new(s.ledger_path());
        ledger.put_raw("f.two", "{not json").unwrap();
        ledger.put_raw("f.Not_A_Slug", "{}").unwrap();
        assert!(ledger.read().await.unwrap().unwrap().failures.is_empty());
    });
    let doc = plan(&s);
    let warnings = doc["warnings"].to_string();
    assert!(warnings.contains("f.two"), "{doc}");
    assert!(warnings.contains("f.Not_A_Slug"), "{doc}");
    let (code, report, stderr) = s.run(&shell, "up");
    assert_eq!(code, 0, "{report}\n{stderr}");
    let (_, doc, _) = status(&s, &[]);
    assert_eq!(
        common::by_slug(&doc["entries"], "two").unwrap()["state"],
        "ok"
    );
    // The entry's write removed the corrupt record with the rest.
    let corrupt = doc["corrupt"].to_string();
    assert!(!corrupt.contains("f.two"), "{doc}");
    assert!(corrupt.contains("f.Not_A_Slug"), "{doc}");
}
