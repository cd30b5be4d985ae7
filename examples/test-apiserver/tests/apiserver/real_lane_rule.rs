//! The rule a real-server test follows (`test_apiserver::real`, issue 38): it is ignored unless
//! asked for, and once asked for it runs or fails, never passes by not running.

use std::panic::catch_unwind;
use test_apiserver::real::{NEEDS_REAL_SERVER, check_real_lane};

fn message(result: std::thread::Result<()>) -> String {
    let payload = result.expect_err("the check let the test run");
    payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| (*s).to_owned()))
        .unwrap_or_default()
}

#[test]
fn a_real_server_test_asked_to_run_without_the_server_fails_instead_of_passing() {
    let said = message(catch_unwind(|| check_real_lane("some lane", true, false)));
    assert!(said.contains("some lane"), "{said}");
    assert!(
        said.contains("MIGRATE_TEST_KUBECONFIG is not set"),
        "{said}"
    );
    assert!(said.contains("testenv.sh"), "{said}");
}

#[test]
fn a_real_server_test_that_runs_without_being_asked_for_is_unmarked_and_fails() {
    let said = message(catch_unwind(|| check_real_lane("some lane", false, true)));
    assert!(
        said.contains(&format!("#[ignore = \"{NEEDS_REAL_SERVER}\"]")),
        "{said}"
    );
}

#[test]
fn a_marked_real_server_test_asked_for_with_the_server_set_runs() {
    check_real_lane("some lane", true, true);
}

/// Every `.rs` file under `dir`, skipping build output.
fn rust_files(dir: &std::path::Path, into: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if path.is_dir() {
            if !name.starts_with("target") && !name.starts_with('.') {
                rust_files(&path, into);
            }
        } else if name.ends_with(".rs") {
            into.push(path);
        }
    }
}

/// A cheap check over the workspace's sources of what the runtime check catches only when a
/// server is set: every `#[ignore]` gives the one reason, and every file that reaches the real
/// server and holds tests has at least one test so marked.
#[test]
fn every_ignored_test_gives_the_real_server_reason_and_every_real_server_file_marks_its_tests() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    let marked = format!("#[ignore = \"{NEEDS_REAL_SERVER}\"]");
    let mut wrong = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        if file.ends_with("src/real.rs") || file.ends_with("real_lane_rule.rs") {
            continue;
        }
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.starts_with("#[ignore") && line != marked {
                wrong.push(format!("{}:{}: {line}", file.display(), n + 1));
            }
        }
        let reaches = ["RealCluster::from_env(", "RealCluster::private("]
            .iter()
            .any(|call| text.contains(call));
        // A helper module (a fixture) reaches the server for the tests of other files.
        let has_tests = text.contains("#[test]") || text.contains("#[tokio::test");
        if reaches && has_tests && !text.contains(&marked) {
            wrong.push(format!(
                "{}: reaches the real server, marks no test {marked}",
                file.display()
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
