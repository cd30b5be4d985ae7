//! Helpers shared by this crate's black-box tests beyond
//! `migration_core::testing::fixtures`: reliability figures and the proptest
//! runner that records them.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

/// Asserts that generation refuses `history` for exactly one problem, `expected`, and
/// returns that problem's message.
#[track_caller]
pub fn generation_refusal(
    history: &migration_core::ReleaseHistory,
    expected: migration_core::generate::GenerateProblem,
) -> String {
    let problems = migration_core::generate(history).unwrap_err().problems;
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(problems[0], expected);
    problems[0].to_string()
}

/// Records one reliability figure: `target/tmp/reliability/<suite>--<name>.txt`.
/// `.ci/run` prints them all at the end of a CI run.
pub fn figure(suite: &str, name: &str, text: &str) {
    migration_core::testing::fixtures::write_figure(
        Path::new(env!("CARGO_TARGET_TMPDIR")),
        suite,
        name,
        text,
    );
}

/// Proptest settings with `PROPTEST_CASES` cases, else `default`.
pub fn cases(default: u32) -> proptest::test_runner::Config {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default);
    proptest::test_runner::Config {
        cases,
        ..proptest::test_runner::Config::default()
    }
}

/// Runs a property with proptest's runner (cases from `PROPTEST_CASES`, else
/// `default_cases`), panicking with the minimal failing input, and records
/// how many inputs were tried.
pub fn check<S: proptest::strategy::Strategy>(
    suite: &str,
    name: &str,
    default_cases: u32,
    strategy: S,
    test: impl Fn(S::Value) -> Result<(), proptest::test_runner::TestCaseError>,
) {
    use std::sync::atomic::{AtomicU64, Ordering};
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default_cases);
    let config = proptest::test_runner::Config {
        cases,
        failure_persistence: None,
        ..Default::default()
    };
    let mut runner = proptest::test_runner::TestRunner::new(config);
    let tried = AtomicU64::new(0);
    let result = runner.run(&strategy, |value| {
        tried.fetch_add(1, Ordering::Relaxed);
        test(value)
    });
    if let Err(e) = result {
        panic!("{name}: {e}");
    }
    figure(
        suite,
        name,
        &format!("{} inputs tried, all passed", tried.load(Ordering::Relaxed)),
    );
}
