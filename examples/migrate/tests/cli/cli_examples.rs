//! Every subcommand's `--help` ends with examples that use only flags it
//! takes, and `-o` spells `--output` as kubectl's does.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use common::{help_flags, subcommands, text};

#[test]
fn every_subcommands_help_ends_with_examples_that_use_only_its_flags() {
    for name in subcommands::<Vec<String>>() {
        let (code, help, err) = text(&[&name, "--help"]);
        assert_eq!(code, 0, "{name}: {err}");
        let examples = help
            .split("Examples:\n")
            .nth(1)
            .unwrap_or_else(|| panic!("{name} --help has no Examples section:\n{help}"));
        let lines: Vec<&str> = examples.lines().filter(|l| !l.trim().is_empty()).collect();
        assert!(!lines.is_empty(), "{name}: an empty Examples section");
        for line in lines {
            let words: Vec<&str> = line.split_whitespace().collect();
            let at = words
                .iter()
                .position(|w| *w == "migrate")
                .unwrap_or_else(|| panic!("{name}: {line:?} does not run migrate"));
            assert!(
                words[at..].contains(&name.as_str()),
                "{name}: the example {line:?} runs another subcommand"
            );
            let taken: Vec<String> = help_flags(&help);
            for flag in words.iter().filter(|w| w.starts_with("--")) {
                let flag = flag.split('=').next().unwrap();
                assert!(
                    taken.iter().any(|t| t == flag),
                    "{name}: the example {line:?} uses {flag}, which {name} does not take"
                );
            }
        }
    }
}

#[test]
fn dash_o_json_is_output_json_for_results_and_for_usage_errors() {
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("m");
    let (code, out, err) = text(&["-o", "json", "init", tree.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(doc["created"].is_array(), "{doc}");
    let (code, out, _) = text(&["-ojson", "status", "--no-such-flag"]);
    assert_eq!(code, 2);
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(doc["error"], "bad-input", "{doc}");
}

#[test]
fn kubeconfig_and_context_are_taken_only_by_the_commands_that_talk_to_a_cluster() {
    let cluster = [
        "plan",
        "run",
        "status",
        "seed-fresh",
        "adopt",
        "verify",
        "repair",
    ];
    for name in subcommands::<Vec<String>>() {
        let (_, help, _) = text(&[&name, "--help"]);
        let flags: Vec<String> = help_flags(&help);
        let takes =
            flags.iter().any(|f| f == "--kubeconfig") && flags.iter().any(|f| f == "--context");
        assert_eq!(takes, cluster.contains(&name.as_str()), "{name}: {flags:?}");
    }
    let dir = tempfile::tempdir().unwrap();
    let (code, _, err) = text(&["lint", dir.path().to_str().unwrap(), "--kubeconfig", "x"]);
    assert_eq!(code, 2);
    assert!(err.contains("--kubeconfig"), "{err}");
}
