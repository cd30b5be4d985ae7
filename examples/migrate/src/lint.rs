//! `migrate lint`: static checks of a migrations tree.
//!
//! Structural rules come from the tree loader (the same checks the engine
//! applies before running). Text rules look for the fail-open shell patterns
//! that have destroyed data before. Every finding names the file, the line,
//! a stable rule id and what to do.

use std::path::{Path, PathBuf};

use migration_core::header::{HEADER_MARKER, Tier};
use migration_core::{MigrationsTree, TreeError};
use serde::Serialize;

/// How serious a finding is. Any error makes `lint` exit non-zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    /// Must be fixed.
    Error,
    /// Worth a look.
    Warning,
}

/// One finding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// Path relative to the tree root.
    pub file: String,
    /// One-based line, where there is one.
    pub line: Option<usize>,
    /// Stable rule id.
    pub rule: &'static str,
    /// Severity.
    pub level: Level,
    /// What is wrong and what to do.
    pub message: String,
}

/// Lint settings.
#[derive(Debug, Clone)]
pub struct LintConfig {
    /// The one shebang every script must use (without `#!`).
    pub shebang: String,
    /// Where script tests live, relative to the tree root.
    pub tests_dir: PathBuf,
    /// Commands that talk to the cluster (`kubectl` and wrappers of it).
    pub kubectl_commands: Vec<String>,
    /// Name of the ledger ConfigMap scripts must never write.
    pub ledger_name: String,
}

impl Default for LintConfig {
    fn default() -> Self {
        LintConfig {
            shebang: "/bin/sh".into(),
            tests_dir: PathBuf::from("tests"),
            kubectl_commands: vec!["kubectl".into(), "kube".into()],
            ledger_name: "cozystack-version".into(),
        }
    }
}

/// Every rule id, for documentation and tests.
pub const RULES: [&str; 15] = [
    "layout",
    "slug",
    "header",
    "tier",
    "duplicate-slug",
    "requires",
    "symlink",
    "size",
    "list-file",
    "manifest",
    "shell-dialect",
    "ledger-write",
    "for-command-substitution",
    "kubectl-error-ignored",
    "missing-test",
];

/// The warning-level rule, listed apart because it is advisory.
pub const WARNING_RULES: [&str; 1] = ["kubectl-in-pipeline"];

/// Lints the tree at `root`. I/O failures (the tree cannot be read at all)
/// are returned as the error; everything else is a finding.
pub fn lint(root: &Path, config: &LintConfig) -> Result<Vec<Finding>, TreeError> {
    let mut findings = Vec::new();
    match MigrationsTree::load(root) {
        Ok(_) => {}
        Err(TreeError::Invalid { problems, .. }) => {
            for p in &problems {
                let (file, line) = p.location();
                findings.push(Finding {
                    file: file.map(|f| f.display().to_string()).unwrap_or_default(),
                    line,
                    rule: p.rule(),
                    level: Level::Error,
                    message: p.to_string(),
                });
            }
        }
        Err(other) => return Err(other),
    }
    for tier in Tier::ALL {
        let dir = root.join(tier.as_str());
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut files: Vec<(String, PathBuf)> = entries
            .filter_map(Result::ok)
            .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
            .filter_map(|e| e.file_name().to_str().map(|n| (n.to_owned(), e.path())))
            .filter(|(n, _)| !n.starts_with('.'))
            .collect();
        files.sort();
        for (name, path) in files {
            let relative = format!("{}/{name}", tier.as_str());
            // Oversized files are already reported by the loader.
            let Ok(bytes) = std::fs::read(&path) else {
                continue;
            };
            findings.extend(lint_script(&relative, &bytes, config));
            let tests = root.join(&config.tests_dir);
            let has_test = ["", ".sh", ".bats"]
                .iter()
                .any(|ext| tests.join(format!("{name}{ext}")).is_file());
            if !has_test {
                findings.push(Finding {
                    file: relative,
                    line: None,
                    rule: "missing-test",
                    level: Level::Error,
                    message: format!(
                        "no test for this script in {}/ (expected {name}.sh); every migration ships with a test",
                        config.tests_dir.display()
                    ),
                });
            }
        }
    }
    findings.sort_by(|a, b| (&a.file, a.line, a.rule).cmp(&(&b.file, b.line, b.rule)));
    findings.dedup();
    Ok(findings)
}

/// Logical lines: comment lines dropped, backslash continuations joined,
/// each with the number of its first physical line.
fn logical_lines(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut pending: Option<(usize, String)> = None;
    for (i, raw) in text.lines().enumerate() {
        let line_no = i + 1;
        let trimmed = raw.trim_start();
        if pending.is_none() && trimmed.starts_with('#') {
            continue;
        }
        let (start, mut acc) = pending.take().unwrap_or((line_no, String::new()));
        if let Some(body) = raw.strip_suffix('\\') {
            acc.push_str(body);
            acc.push(' ');
            pending = Some((start, acc));
        } else {
            acc.push_str(raw);
            out.push((start, acc));
        }
    }
    if let Some(last) = pending {
        out.push(last);
    }
    out
}

/// Splits a shell line into rough words (quotes kept), enough to find
/// commands and operators.
fn words(line: &str) -> Vec<&str> {
    line.split(|c: char| c.is_whitespace() || c == ';' || c == '(' || c == ')')
        .filter(|w| !w.is_empty())
        .collect()
}

fn calls_kubectl(line: &str, config: &LintConfig) -> bool {
    words(line).iter().any(|w| {
        let w = w
            .trim_start_matches(['"', '\''])
            .trim_end_matches(['"', '\'']);
        config.kubectl_commands.iter().any(|k| w == k)
            || w.starts_with("$KUBECTL")
            || w.starts_with("${KUBECTL")
            || w.ends_with("/kubectl")
    })
}

/// Text rules over one script.
pub fn lint_script(file: &str, bytes: &[u8], config: &LintConfig) -> Vec<Finding> {
    let mut findings = Vec::new();
    let mut push = |line: usize, rule: &'static str, level: Level, message: String| {
        findings.push(Finding {
            file: file.to_owned(),
            line: Some(line),
            rule,
            level,
            message,
        });
    };
    let text = String::from_utf8_lossy(bytes);
    if let Some(first) = text.lines().next().and_then(|l| l.strip_prefix("#!"))
        && first.trim() != config.shebang
    {
        push(
            1,
            "shell-dialect",
            Level::Error,
            format!(
                "shebang '#!{}' differs from the tree's dialect '#!{}'",
                first.trim(),
                config.shebang
            ),
        );
    }
    for (line, content) in logical_lines(&text) {
        if content.contains(HEADER_MARKER) {
            continue;
        }
        let w = words(&content);
        if content.contains(&config.ledger_name) {
            let read_only = w.iter().any(|x| *x == "get" || *x == "describe");
            if !read_only {
                push(
                    line,
                    "ledger-write",
                    Level::Error,
                    format!(
                        "the script touches the ledger ConfigMap '{}'; scripts never write the ledger or stamp a version, the runner records outcomes",
                        config.ledger_name
                    ),
                );
            }
        }
        if w.first() == Some(&"for") && w.get(2) == Some(&"in") {
            let list = content.split_once(" in ").map_or("", |(_, rest)| rest);
            let list = list.split_once("; do").map_or(list, |(l, _)| l);
            if list.contains("$(") || list.contains('`') {
                push(
                    line,
                    "for-command-substitution",
                    Level::Error,
                    "a command substitution as a for word list runs zero iterations when the command fails, even under errexit; assign it to a variable first (list=$(cmd)), then loop".into(),
                );
            }
        }
        if calls_kubectl(&content, config) {
            let mut rest = content.as_str();
            while let Some(i) = rest.find("||") {
                let after = rest[i + 2..].trim_start();
                let first = after
                    .split(|c: char| c.is_whitespace() || c == ';')
                    .next()
                    .unwrap_or("");
                if matches!(first, "true" | "echo" | ":" | "printf") {
                    push(
                        line,
                        "kubectl-error-ignored",
                        Level::Error,
                        format!(
                            "'|| {first}' after a kubectl call turns its failure into success; let it fail, or handle the specific error explicitly"
                        ),
                    );
                    break;
                }
                rest = &rest[i + 2..];
            }
            let piped = content.match_indices('|').any(|(i, _)| {
                let b = content.as_bytes();
                b.get(i + 1) != Some(&b'|') && (i == 0 || b[i - 1] != b'|')
            });
            if piped {
                push(
                    line,
                    "kubectl-in-pipeline",
                    Level::Warning,
                    "kubectl output piped into another command: the pipeline's status is the last command's, so a kubectl failure is hidden; capture the output first (out=$(kubectl ...)) then filter it".into(),
                );
            }
        }
    }
    findings
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(text: &str) -> Vec<&'static str> {
        lint_script("pre-apply/x", text.as_bytes(), &LintConfig::default())
            .iter()
            .map(|f| f.rule)
            .collect()
    }

    const HEAD: &str = "#!/bin/sh\n# cozystack-migration: tier=pre-apply\n# cozystack-migration: on-error=abort\nset -eu\n";

    fn script(body: &str) -> String {
        format!("{HEAD}{body}\n")
    }

    #[test]
    fn a_clean_script_has_no_findings() {
        let text = script(
            "list=$(kubectl get ns -o name)\nfor ns in $list; do\n  kubectl label \"$ns\" a=b\ndone",
        );
        assert!(rules(&text).is_empty(), "{:?}", rules(&text));
    }

    #[test]
    fn shell_dialect_flags_another_shebang_only() {
        assert_eq!(
            rules(&script("").replace("#!/bin/sh", "#!/bin/bash")),
            ["shell-dialect"]
        );
        assert!(rules(&script("")).is_empty());
    }

    #[test]
    fn ledger_write_flags_patching_the_ledger_but_not_reading_it() {
        assert_eq!(
            rules(&script(
                "kubectl -n cozy-system patch configmap cozystack-version -p '{\"data\":{\"version\":\"46\"}}'"
            )),
            ["ledger-write"]
        );
        assert_eq!(
            rules(&script("  name: cozystack-version")),
            ["ledger-write"]
        );
        assert!(rules(&script("v=$(kubectl -n cozy-system get configmap cozystack-version -o jsonpath='{.data.version}')")).is_empty());
    }

    #[test]
    fn for_command_substitution_flags_both_spellings() {
        assert_eq!(
            rules(&script(
                "for ns in $(kubectl get ns -o name); do echo $ns; done"
            )),
            ["for-command-substitution"]
        );
        assert_eq!(
            rules(&script("for ns in `cat list`; do echo $ns; done")),
            ["for-command-substitution"]
        );
        assert!(rules(&script("for ns in a b c; do echo $ns; done")).is_empty());
        assert!(
            rules(&script("for ns in $list; do echo \"$(date)\"; done")).is_empty(),
            "a substitution in the body is fine"
        );
    }

    #[test]
    fn kubectl_error_ignored_flags_true_echo_and_colon() {
        for tail in ["|| true", "|| echo skipped", "|| :"] {
            assert_eq!(
                rules(&script(&format!("kubectl delete pod x {tail}"))),
                ["kubectl-error-ignored"],
                "{tail}"
            );
        }
        assert!(rules(&script("kubectl delete pod x || exit 1")).is_empty());
        assert!(
            rules(&script("grep x file || true")).is_empty(),
            "only kubectl calls are flagged"
        );
        assert_eq!(
            rules(&script("\"$KUBECTL\" delete pod x || true")),
            ["kubectl-error-ignored"]
        );
    }

    #[test]
    fn kubectl_in_pipeline_is_a_warning() {
        let findings = lint_script(
            "f",
            script("kubectl get ns -o name | sed 's/x//'").as_bytes(),
            &LintConfig::default(),
        );
        assert_eq!(findings.len(), 1);
        assert_eq!(
            (findings[0].rule, findings[0].level),
            ("kubectl-in-pipeline", Level::Warning)
        );
        assert!(
            rules(&script(
                "out=$(kubectl get ns -o name)\nprintf '%s\\n' \"$out\" | sed 's/x//'"
            ))
            .is_empty()
        );
    }

    #[test]
    fn continuation_lines_are_joined_and_reported_at_their_first_line() {
        let text = script("kubectl annotate x \\\n   a=b || true");
        let findings = lint_script("f", text.as_bytes(), &LintConfig::default());
        assert_eq!(findings[0].line, Some(5));
    }

    #[test]
    fn comments_are_not_linted() {
        assert!(rules(&script("# for ns in $(kubectl get ns); do ... || true")).is_empty());
    }
}
