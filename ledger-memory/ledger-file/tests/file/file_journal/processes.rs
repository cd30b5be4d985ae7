//! Separate processes: writers that lose no update, readers that never see
//! damage, and the run lock between processes.

use super::*;

/// Re-runs this test binary as a child doing `role`.
fn child(role: &str, path: &Path, index: usize) -> Command {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    // The test's name is its module path without the crate's name.
    let module = module_path!().split_once("::").map_or("", |(_, rest)| rest);
    cmd.args([
        &format!("{module}::child_process"),
        "--exact",
        "--nocapture",
        "--test-threads=1",
    ])
    .env("LEDGER_CHILD_ROLE", role)
    .env("LEDGER_CHILD_PATH", path)
    .env("LEDGER_CHILD_INDEX", index.to_string())
    // The child's own libtest summary would read as this run's.
    .stdout(std::process::Stdio::null());
    cmd
}

const WRITES_PER_CHILD: usize = 40;

/// The children's side; does nothing in an ordinary test run.
#[test]
fn child_process() {
    let Ok(role) = std::env::var("LEDGER_CHILD_ROLE") else {
        return;
    };
    let path = PathBuf::from(std::env::var("LEDGER_CHILD_PATH").unwrap());
    let index: usize = std::env::var("LEDGER_CHILD_INDEX")
        .unwrap()
        .parse()
        .unwrap();
    let rt = rt();
    // Small compaction threshold: files get replaced under the others.
    let ledger = FileLedger::new(&path).with_compact_min(4096);
    match role.as_str() {
        "writer" => {
            for i in 0..WRITES_PER_CHILD {
                let n = index * 1000 + i;
                rt.block_on(ledger.note_attempt(&slug(n), &format!("c{index}"), 0))
                    .unwrap();
                rt.block_on(ledger.write(
                    &[(slug(n), sample_entry(EntryState::Ok, n as u32))],
                    WriteMode::Replace,
                ))
                .unwrap();
                // Everyone also races for one shared key.
                rt.block_on(ledger.write(
                    &[(slug(999_999), sample_entry(EntryState::Ok, index as u32))],
                    WriteMode::OnlyIfAbsent,
                ))
                .unwrap();
            }
        }
        "reader" => {
            let mut seen = 0;
            for _ in 0..200 {
                // Fresh and long-lived handles alike never see damage.
                let snapshot = rt.block_on(ledger.read()).unwrap();
                let fresh = rt.block_on(FileLedger::new(&path).read()).unwrap();
                let count = snapshot.map_or(0, |s| s.records.len());
                assert!(
                    count >= seen,
                    "a reader went back in time: {count} < {seen}"
                );
                seen = count;
                assert!(fresh.is_some());
            }
        }
        "holder" => {
            let lease = rt
                .block_on(ledger.acquire("child-holder", Duration::from_secs(600)))
                .unwrap();
            println!("HELD {}", lease.token);
            let mut line = String::new();
            std::io::stdin().read_line(&mut line).unwrap();
            rt.block_on(ledger.release(&lease)).unwrap();
        }
        "taker" => {
            // Takes the lock with its record on the revision the parent
            // read, once the parent says go, and says whether it won.
            let revision = std::env::var("LEDGER_CHILD_REVISION").unwrap();
            let go = path.with_extension("go");
            while !go.exists() {
                std::thread::sleep(Duration::from_millis(1));
            }
            let holder = format!("taker-{index}");
            let record = [(slug(index), sample_entry(EntryState::Ok, 1))];
            let taken = rt.block_on(ledger.write_step(&StepWrite {
                records: &record,
                attempt: None,
                mode: StepMode::Take {
                    holder: &holder,
                    ttl: Duration::from_secs(600),
                    revision: Some(&revision),
                },
                failure: None,
            }));
            match taken {
                Ok(_) => eprintln!("TAKER WON"),
                Err(LedgerError::LockHeld { .. } | LedgerError::Changed { .. }) => {
                    eprintln!("TAKER REFUSED")
                }
                Err(e) => panic!("a losing taker is refused as held or changed, got {e}"),
            }
        }
        other => panic!("unknown role {other}"),
    }
}

#[test]
fn writers_in_separate_processes_lose_no_update_and_readers_never_see_damage() {
    let (_dir, path) = scratch();
    rt().block_on(FileLedger::new(&path).create(&[])).unwrap();
    let mut children: Vec<_> = (0..3)
        .map(|i| child("writer", &path, i).spawn().unwrap())
        .collect();
    children.push(child("reader", &path, 9).spawn().unwrap());
    for mut c in children {
        assert!(c.wait().unwrap().success(), "a child failed");
    }
    let snapshot = rt()
        .block_on(FileLedger::new(&path).read())
        .unwrap()
        .unwrap();
    assert_eq!(snapshot.records.len(), 3 * WRITES_PER_CHILD + 1);
    assert_eq!(snapshot.attempts_started.len(), 3 * WRITES_PER_CHILD);
    assert!(snapshot.attempts_started.values().all(|&n| n == 1));
    assert_eq!(
        snapshot.revision.as_deref(),
        Some((1 + 3 * 2 * WRITES_PER_CHILD + 1).to_string().as_str()),
        "one revision per stored mutation: create, 2 per step, one race winner"
    );
}

#[test]
fn the_run_lock_excludes_another_process_until_it_releases() {
    use std::io::{BufRead, Write};
    let (_dir, path) = scratch();
    // The lock lives in the ledger object, which must exist.
    rt().block_on(FileLedger::new(&path).create(&[])).unwrap();
    let mut holder = child("holder", &path, 0)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = std::io::BufReader::new(holder.stdout.take().unwrap());
    let mut line = String::new();
    // libtest prints "test child_process ... " before the test's own output.
    while !line.contains("HELD") {
        line.clear();
        assert!(out.read_line(&mut line).unwrap() > 0, "the holder died");
    }
    let rt = rt();
    match rt.block_on(FileLedger::new(&path).acquire("parent", Duration::from_secs(5))) {
        Err(LedgerError::LockHeld { holder, .. }) => assert_eq!(holder, "child-holder"),
        other => panic!("another process's lease must hold: {other:?}"),
    }
    // Ledger writes are not blocked by somebody else's lease (the lease
    // is advisory for runners; the flock is held only per call).
    rt.block_on(FileLedger::new(&path).write(&entries(0..1, EntryState::Ok), WriteMode::Replace))
        .unwrap();
    holder.stdin.take().unwrap().write_all(b"done\n").unwrap();
    assert!(holder.wait().unwrap().success());
    let lease = rt
        .block_on(FileLedger::new(&path).acquire("parent", Duration::from_secs(5)))
        .unwrap();
    assert_eq!(lease.holder, "parent");
}

#[test]
fn takers_in_separate_processes_never_both_win() {
    const TAKERS: usize = 4;
    let (_dir, path) = scratch();
    let rt = rt();
    rt.block_on(FileLedger::new(&path).create(&[])).unwrap();
    let revision = rt
        .block_on(FileLedger::new(&path).read())
        .unwrap()
        .unwrap()
        .revision
        .unwrap();
    let children: Vec<_> = (0..TAKERS)
        .map(|i| {
            child("taker", &path, i)
                .env("LEDGER_CHILD_REVISION", &revision)
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    // All of them wait for this file, then race for the flock.
    std::fs::write(path.with_extension("go"), "").unwrap();
    let said: Vec<String> = children
        .into_iter()
        .map(|c| {
            let out = c.wait_with_output().unwrap();
            let text = String::from_utf8_lossy(&out.stderr).into_owned();
            assert!(out.status.success(), "a taker failed: {text}");
            text
        })
        .collect();
    let won = said.iter().filter(|t| t.contains("TAKER WON")).count();
    let refused = said.iter().filter(|t| t.contains("TAKER REFUSED")).count();
    assert_eq!(
        (won, refused),
        (1, TAKERS - 1),
        "one taker on one revision wins, every other is refused: {said:?}"
    );
    let snapshot = rt.block_on(FileLedger::new(&path).read()).unwrap().unwrap();
    assert_eq!(
        snapshot.records.len(),
        1,
        "only the winner's record lands: {said:?}"
    );
}
