//! Ctrl-C as people press it: a runner interrupted while it waits for the
//! lock says that nothing ran, and a second interrupt kills the running
//! script at once instead of waiting out its grace period.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use std::io::BufRead;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::{Repo, migrate};

fn interrupt(child: &Child) {
    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

/// Forwards `child`'s stderr lines to a channel (and keeps them).
fn stderr_lines(child: &mut Child) -> mpsc::Receiver<String> {
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

fn wait_for_line(rx: &mpsc::Receiver<String>, needle: &str, seen: &mut Vec<String>) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        if let Ok(line) = rx.recv_timeout(Duration::from_millis(200)) {
            let found = line.contains(needle);
            seen.push(line);
            if found {
                return;
            }
        }
    }
    panic!("no line with {needle:?} in {seen:#?}");
}

fn wait_with_deadline(child: &mut Child, limit: Duration) -> Option<std::process::ExitStatus> {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    None
}

#[test]
fn interrupted_while_waiting_for_the_lock_says_nothing_ran_and_a_second_interrupt_kills_at_once() {
    let repo = Repo::new();
    let scratch = tempfile::tempdir().unwrap();
    let started = scratch.path().join("started");
    // Ignores SIGTERM (and so does its sleep): only SIGKILL stops it.
    repo.add(
        "pre-apply",
        "stubborn",
        &format!(
            "trap '' TERM\necho started > '{}'\nsleep 120",
            started.display()
        ),
    );
    repo.release("v1.0.0");
    assert_eq!(repo.manifest().0, 0);
    let ledger = common::empty_file_ledger(&scratch.path().join("ledger.json"));
    let tree = repo.tree();
    let tree = tree.to_str().unwrap();
    let run = |extra: &[&str]| {
        migrate()
            .args(["run", tree, "--ledger", &ledger, "--output", "json"])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let mut holder = run(&["--grace", "120"]);
    let holder_lines = stderr_lines(&mut holder);
    let deadline = Instant::now() + Duration::from_secs(60);
    while !started.exists() {
        assert!(
            Instant::now() < deadline,
            "the first runner never started its script"
        );
        std::thread::sleep(Duration::from_millis(50));
    }

    let mut waiter = run(&["--lock-wait", "300"]);
    let waiter_lines = stderr_lines(&mut waiter);
    let mut seen = Vec::new();
    wait_for_line(&waiter_lines, "waiting for the run lock", &mut seen);
    interrupt(&waiter);
    let status =
        wait_with_deadline(&mut waiter, Duration::from_secs(20)).expect("the waiter stops");
    let mut stdout = String::new();
    std::io::Read::read_to_string(&mut waiter.stdout.take().unwrap(), &mut stdout).unwrap();
    let doc: serde_json::Value =
        serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    assert_eq!(status.code(), Some(4), "{doc}");
    let problem = doc["problems"][0].as_str().unwrap();
    assert!(problem.contains("nothing ran"), "{problem}");
    assert!(!problem.contains("interrupted migration"), "{problem}");
    assert!(
        doc["report"]["results"].as_array().unwrap().is_empty(),
        "{doc}"
    );

    interrupt(&holder);
    assert!(
        wait_with_deadline(&mut holder, Duration::from_secs(2)).is_none(),
        "one interrupt waits out the grace period of a script ignoring SIGTERM"
    );
    let second = Instant::now();
    interrupt(&holder);
    let status = wait_with_deadline(&mut holder, Duration::from_secs(20))
        .expect("a second interrupt kills at once");
    assert!(second.elapsed() < Duration::from_secs(20));
    assert_eq!(status.code(), Some(4));
    let mut seen = Vec::new();
    wait_for_line(&holder_lines, "second interrupt", &mut seen);
}
