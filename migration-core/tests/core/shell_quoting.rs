//! `migration_core::shell`: what it quotes, dash, busybox ash and bash read
//! back as the same words.

use std::process::Command;

use migration_core::shell;

/// Words a shell would otherwise split, expand or end on.
const AWKWARD: &[&str] = &[
    "plain",
    "",
    "two words",
    "it's",
    "'",
    "''",
    "$(touch /tmp/never)",
    "`id`",
    "$HOME",
    "a*b?[c]",
    "semi;colon|pipe&amp",
    "new\nline",
    "tab\there",
    "back\\slash",
    "\"double\"",
    "{brace}",
    "~tilde",
    "#hash",
    "…",
    "--flag=value,more",
];

/// The shells every script runs under, as argv prefixes; each is part of
/// the base system or installed by `.ci/install-test-tools`.
const SHELLS: &[&[&str]] = &[&["dash"], &["busybox", "ash"], &["bash"]];

/// What `shell` prints for `line`, each word it reads on a line of its own
/// between `<` and `>`.
fn read_back(shell: &[&str], line: &str) -> String {
    let script = format!("for w in {line}; do printf '<%s>\\n' \"$w\"; done");
    let out = Command::new(shell[0])
        .args(&shell[1..])
        .args(["-c", &script])
        .output()
        .unwrap_or_else(|e| panic!("{shell:?} is needed for this test: {e}"));
    assert!(out.status.success(), "{shell:?}: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

fn expected(words: &[&str]) -> String {
    words.iter().map(|w| format!("<{w}>\n")).collect()
}

#[test]
fn every_word_quoted_reads_back_as_itself_under_dash_busybox_ash_and_bash() {
    for shell_argv in SHELLS {
        let quoted: Vec<String> = AWKWARD.iter().map(|w| shell::quoted(w)).collect();
        assert_eq!(
            read_back(shell_argv, &quoted.join(" ")),
            expected(AWKWARD),
            "{shell_argv:?}"
        );
        assert_eq!(
            read_back(shell_argv, &shell::line(AWKWARD)),
            expected(AWKWARD),
            "{shell_argv:?}"
        );
        let bytes: Vec<String> = AWKWARD
            .iter()
            .map(|w| String::from_utf8(shell::quoted_bytes(w.as_bytes())).unwrap())
            .collect();
        assert_eq!(bytes, quoted, "bytes and text quote alike");
    }
}

#[test]
fn a_plain_word_stays_as_it_is_and_anything_else_is_quoted() {
    assert_eq!(
        shell::line(&["migrate", "status", "--ledger", "file:/var/x.json", "it's"]),
        r"migrate status --ledger file:/var/x.json 'it'\''s'"
    );
    assert_eq!(shell::word(""), "''");
    assert_eq!(shell::word("a b"), "'a b'");
}
