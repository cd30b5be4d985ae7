//! The script's process: a timeout ends its whole process group, SIGTERM
//! stops it mid-script.

use super::*;

/// True while `pid` runs; a zombie waiting for a reaper counts as dead (in
/// a container nothing may reap it).
fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

fn dies_soon(pid: i32) -> bool {
    let deadline = Instant::now() + Duration::from_secs(5);
    while alive(pid) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    !alive(pid)
}

#[test]
fn a_timeout_kills_the_whole_process_group_including_grandchildren() {
    let body = r#"sleep 300 & echo $! > "$SCRATCH/grandchild"; sleep 300"#;
    let tree = Tree::new(&[pre_warn("hangs", body), pre("after", "true")]).existing_ledger();
    let started = Instant::now();
    let (code, doc, err) = tree.run(&["--timeout", "1", "--grace", "1"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "the timeout did not stop the script"
    );
    assert_eq!(
        outcomes(&doc),
        [pair("hangs", "failed"), pair("after", "ok")]
    );
    assert_eq!(tree.entry("hangs").unwrap()["reason"], "timeout");
    let grandchild: i32 = std::fs::read_to_string(tree.file("grandchild"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(
        dies_soon(grandchild),
        "grandchild {grandchild} survived the timeout"
    );
}

#[test]
fn sigterm_mid_script_stops_it_records_nothing_and_exits_non_zero() {
    let body =
        r#"echo started > "$SCRATCH/started"; sleep 300 & echo $! > "$SCRATCH/grandchild"; wait"#;
    let tree = Tree::new(&[pre("long", body)]).existing_ledger();
    let child = tree.spawn(&["--grace", "2"]);
    wait_for(&tree.file("started"), Duration::from_secs(20));
    let grandchild: i32 = wait_for(&tree.file("grandchild"), Duration::from_secs(5))
        .trim()
        .parse()
        .unwrap();
    Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    let started = Instant::now();
    let out = child.wait_with_output().unwrap();
    assert!(started.elapsed() < Duration::from_secs(15));
    let (code, doc, _) = parse(out);
    assert_eq!(code, 4, "{doc}");
    assert_eq!(outcomes(&doc), [pair("long", "interrupted")]);
    assert!(
        tree.entry("long").is_none(),
        "nothing recorded for the interrupted script"
    );
    assert!(
        dies_soon(grandchild),
        "the script's process group must be stopped"
    );
    // The lock was released: a new run starts at once (and is interrupted-free).
    std::fs::write(
        tree.root().join("pre-apply/long"),
        script_text("pre-apply", "abort", &[], "true"),
    )
    .unwrap();
    let (code, _, err) = tree.run(&["--lock-wait", "0"]);
    assert_eq!(code, 0, "{err}");
}
