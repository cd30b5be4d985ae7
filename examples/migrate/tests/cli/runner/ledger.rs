//! What a run does with its ledger: `--only` reruns, the run lock between
//! runners, crash recovery, requirements within a run, fresh installs, room
//! for the next record, redacted tails and fields of a newer engine.

use super::*;

#[test]
fn only_reruns_a_recorded_slug_and_counts_attempts() {
    let tree = Tree::new(&[pre("again", r#"echo run >> "$SCRATCH/runs""#)]).existing_ledger();
    assert_eq!(tree.run(&[]).0, 0);
    assert_eq!(tree.entry("again").unwrap()["attempts"], 1);
    let (code, doc, err) = tree.run(&["--only", "again"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(doc["only"], "again");
    assert_eq!(tree.entry("again").unwrap()["attempts"], 2);
    let (code, _, _) = Command::new(env!("CARGO_BIN_EXE_migrate"))
        .args([
            "run",
            tree.root().to_str().unwrap(),
            "--ledger",
            &tree.ledger(),
            "--output",
            "json",
        ])
        .env("ONLY", "again")
        .env("SCRATCH", tree.scratch.dir())
        .output()
        .map(parse)
        .unwrap();
    assert_eq!(code, 0);
    assert_eq!(
        tree.entry("again").unwrap()["attempts"],
        3,
        "ONLY from the environment works too"
    );
    assert_eq!(tree.lines("runs").len(), 3);
}

#[test]
fn only_refuses_revoked_and_absent_slugs() {
    let tree = Tree::new(&[pre("a", "true"), pre("bad", "true")]).existing_ledger();
    std::fs::write(tree.root().join("revoked"), "bad\n").unwrap();
    let (code, doc, _) = tree.run(&["--only", "bad"]);
    assert_eq!(code, 3);
    assert_first_problem(&doc, "revoked");
    let (code, doc, _) = tree.run(&["--only", "nope"]);
    assert_eq!(code, 3);
    assert_first_problem(&doc, "no script");
}

#[test]
fn two_runners_at_once_run_each_slug_exactly_once() {
    let body = r#"echo "$MIGRATION_SLUG" >> "$SCRATCH/runs"; sleep 0.3"#;
    let tree = Tree::new(&[pre("one", body), pre("two", body)]).existing_ledger();
    let a = tree.spawn(&["--holder", "runner-a"]);
    let b = tree.spawn(&["--holder", "runner-b"]);
    let (ca, da, _) = parse(a.wait_with_output().unwrap());
    let (cb, db, _) = parse(b.wait_with_output().unwrap());
    assert_eq!((ca, cb), (0, 0));
    let mut runs = tree.lines("runs");
    runs.sort();
    assert_eq!(runs, ["one", "two"], "each slug executed exactly once");
    let executed = outcomes(&da).len() + outcomes(&db).len();
    assert_eq!(
        executed, 2,
        "one runner ran both, the other found nothing: {da} {db}"
    );
}

#[test]
fn a_second_runner_gives_up_with_a_clear_message_when_the_lock_stays_busy() {
    let tree =
        Tree::new(&[pre("slow", r#"echo s > "$SCRATCH/started"; sleep 3"#)]).existing_ledger();
    let holder = tree
        .command(&["--holder", "first"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for(&tree.file("started"), Duration::from_secs(20));
    let (code, doc, _) = tree.run(&["--holder", "second", "--lock-wait", "0"]);
    assert_eq!(code, 1, "{doc}");
    assert_first_problem(&doc, "held by first");
    let _ = holder.wait_with_output();
}

#[test]
fn a_crash_after_the_script_succeeded_but_before_the_record_is_rerun_and_recorded_once() {
    // The script does its work, then kills the runner (SIGKILL, no cleanup)
    // the first time: the effect happened, the record did not.
    let body = r#"echo effect >> "$SCRATCH/effects"
if [ ! -f "$SCRATCH/crashed" ]; then touch "$SCRATCH/crashed"; kill -9 $PPID; sleep 1; fi"#;
    let tree = Tree::new(&[pre("crashy", body)]).existing_ledger();
    let out = tree.command(&["--lock-ttl", "1"]).output().unwrap();
    assert_eq!(out.status.code(), None, "the runner died by signal");
    assert!(
        tree.entry("crashy").is_none(),
        "the crash happened before the record"
    );
    assert_eq!(tree.status()["counts"].as_object().unwrap().len(), 0);
    // The crashed runner's lock expires; the re-run executes the script again.
    let (code, _, err) = tree.run(&["--lock-wait", "10"]);
    assert_eq!(code, 0, "{err}");
    let entry = tree.entry("crashy").unwrap();
    assert_eq!(entry["state"], "ok");
    assert_eq!(tree.lines("effects").len(), 2, "two real executions");
    assert_eq!(
        entry["attempts"], 2,
        "attempts counts real executions, including the crashed one"
    );
    assert_eq!(
        tree.run(&[]).1["pending"],
        0,
        "recorded exactly once: nothing left"
    );
}

#[test]
fn a_requirement_that_failed_earlier_in_the_run_blocks_its_dependent() {
    let dir = Tree::new(&[pre_warn("base", "exit 1")]).existing_ledger();
    std::fs::write(
        dir.root().join("pre-apply/dependent"),
        script_text(
            "pre-apply",
            "warn",
            &["base"],
            "echo ran >> \"$SCRATCH/log\"",
        ),
    )
    .unwrap();
    std::fs::write(dir.root().join("order.d/00001-v1"), "base\ndependent\n").unwrap();
    let (code, doc, err) = dir.run(&[]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        outcomes(&doc),
        [pair("base", "failed"), pair("dependent", "blocked")]
    );
    assert!(
        dir.lines("log").is_empty(),
        "a blocked migration does not execute"
    );
    let entry = dir.entry("dependent").unwrap();
    assert_eq!(entry["reason"], "requirement-unmet");
    assert_eq!(entry["attempts"], 0);
}

#[test]
fn a_fresh_install_runs_nothing() {
    let tree = Tree::new(&[pre("a", r#"echo ran >> "$SCRATCH/log""#)]);
    let (code, doc, err) = tree.run(&["--fresh-install"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(doc["fresh_install"], true);
    assert_eq!(doc["seeded"], 1);
    assert!(tree.lines("log").is_empty());
    assert_eq!(tree.entry("a").unwrap()["state"], "skipped-fresh-install");
}

/// Fills `tree`'s file ledger with someone else's key up to 20 KiB short of
/// a 1 MiB budget: room for an ok record, not for the largest record a
/// script can produce (its attempt mark and an entry with a 4 KiB failure
/// tail, JSON-escaped), which is what must be free before it runs. The
/// budget.
fn nearly_full_ledger(tree: &Tree) -> usize {
    let budget = 1024 * 1024;
    let padding = "p".repeat(budget - "padding".len() - 20 * 1024);
    std::fs::write(
        tree.file("ledger.json"),
        format!(
            r#"{{"format":"migration-ledger/v1","ledger":{{"revision":1,"data":{{"padding":"{padding}"}}}},"lock":null,"lock_generation":0}}"#
        ),
    )
    .unwrap();
    budget
}

/// `cmd` under the file-ledger budget `budget`, which must exit 3 saying
/// there is no room to record `first`: its document.
fn no_room_for_first(cmd: &mut Command, budget: usize, what: &str) -> serde_json::Value {
    let out = cmd
        .env("MIGRATE_FILE_LEDGER_BUDGET", budget.to_string())
        .output()
        .unwrap();
    let (code, doc, err) = parse(out);
    assert_eq!(code, 3, "{what}: {doc}\n{err}");
    let problems = doc["problems"].to_string();
    assert!(
        problems.contains("no room to record 'first'"),
        "{what}: {problems}"
    );
    doc
}

#[test]
fn a_ledger_without_room_for_the_next_record_refuses_before_the_script_runs() {
    let tree = Tree::new(&[
        pre("first", r#"echo ran >> "$SCRATCH/first""#),
        pre("second", r#"echo ran >> "$SCRATCH/second""#),
    ]);
    let budget = nearly_full_ledger(&tree);
    let doc = no_room_for_first(&mut tree.command(&[]), budget, "run");
    let problems = doc["problems"].to_string();
    assert!(problems.contains("1048576-byte budget"), "{problems}");
    assert!(
        !tree.file("first").exists() && !tree.file("second").exists(),
        "no script may run when its outcome could not be recorded"
    );
    assert_eq!(tree.entry("first"), None, "nothing is recorded");
}

#[test]
fn plan_and_the_dry_run_refuse_a_ledger_without_room_as_run_does_with_the_same_code() {
    // The ledger of the test above: room for an ok record, not for the
    // largest record the first script can produce (issue 35).
    let tree = Tree::new(&[pre("first", r#"echo ran >> "$SCRATCH/first""#)]);
    let budget = nearly_full_ledger(&tree);
    let before = std::fs::read(tree.file("ledger.json")).unwrap();
    let root = tree.root();
    let ledger = tree.ledger();
    let mut answers = Vec::new();
    for args in [
        vec!["plan", root.to_str().unwrap(), "--ledger", &ledger],
        vec![
            "run",
            root.to_str().unwrap(),
            "--ledger",
            &ledger,
            "--dry-run",
        ],
        vec!["run", root.to_str().unwrap(), "--ledger", &ledger],
    ] {
        let mut cmd = migrate();
        cmd.args(&args)
            .args(["--output", "json"])
            .env("SCRATCH", tree.scratch.dir());
        let doc = no_room_for_first(&mut cmd, budget, &format!("{args:?}"));
        answers.push((3, doc["error"].clone()));
    }
    assert!(answers.windows(2).all(|w| w[0] == w[1]), "{answers:?}");
    assert!(!tree.file("first").exists(), "the script ran");
    assert_eq!(std::fs::read(tree.file("ledger.json")).unwrap(), before);
}

#[test]
fn a_failure_tail_is_recorded_with_secret_shaped_values_redacted() {
    let tree = Tree::new(&[pre_warn(
        "leaky",
        "echo 'applying with password=hunter2'\necho 'Authorization: Bearer abc.def.ghi'\nexit 3",
    )])
    .existing_ledger();
    let (code, _, err) = tree.run(&[]);
    assert_eq!(code, 0, "{err}");
    let entry = tree.entry("leaky").unwrap();
    let message = entry["message"].as_str().unwrap();
    assert!(
        !message.contains("hunter2") && !message.contains("abc.def.ghi"),
        "{message}"
    );
    assert!(
        message.contains("2 secret-shaped value(s) redacted"),
        "{message}"
    );
    assert_eq!(entry["reason"], "exit-status-3");
}

#[test]
fn an_only_rerun_keeps_entry_fields_written_by_a_newer_engine() {
    let tree = Tree::new(&[pre("again", "true")]);
    std::fs::write(
        tree.file("ledger.json"),
        r#"{"format":"migration-ledger/v1","ledger":{"revision":1,"data":{"m.again":"{\"state\":\"ok\",\"at\":\"2026-01-01T00:00:00Z\",\"attempts\":1,\"checked_by\":\"engine-v9\"}"}},"lock":null,"lock_generation":0}"#,
    )
    .unwrap();
    let (code, _, err) = tree.run(&["--only", "again"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(tree.entry("again").unwrap()["attempts"], 2);
    let stored = std::fs::read_to_string(tree.file("ledger.json")).unwrap();
    assert!(
        stored.contains(r##"\"checked_by\":\"engine-v9\""##),
        "the newer engine's field must survive the re-run: {stored}"
    );
}

#[test]
fn an_empty_only_as_a_templated_job_sets_it_means_unset_for_run_and_plan() {
    let tree = Tree::new(&[pre("first", "echo one >> \"$SCRATCH/ran\"")]).existing_ledger();
    let (code, doc, err) = parse(tree.command(&[]).env("ONLY", "").output().unwrap());
    assert_eq!(code, 0, "{doc}\n{err}");
    assert_eq!(doc["only"], serde_json::Value::Null, "{doc}");
    assert_eq!(tree.lines("ran"), ["one"]);
    let (code, plan, err) = parse(
        migrate()
            .args([
                "plan",
                tree.root().to_str().unwrap(),
                "--ledger",
                &tree.ledger(),
            ])
            .args(["--output", "json"])
            .env("ONLY", "")
            .output()
            .unwrap(),
    );
    assert_eq!(code, 0, "{plan}\n{err}");
    assert_eq!(plan["only"], serde_json::Value::Null);
    // An empty --only flag given by hand is still a usage error: only the
    // environment's empty value means "not set".
    let (code, _, _) = parse_or_empty(tree.command(&["--only", ""]).output().unwrap());
    assert_eq!(code, 2);
}

/// (exit code, JSON or Null, stderr) for commands that may print no JSON.
fn parse_or_empty(out: std::process::Output) -> (i32, serde_json::Value, String) {
    let doc = serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null);
    (
        out.status.code().unwrap_or(-1),
        doc,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}
