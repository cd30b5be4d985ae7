//! Which commands are cluster commands (the tripwire shims them, lint
//! follows their exit status), and the tree's `cluster-commands` file.
//!
//! The set is a union, so a setting can only add commands, never take the
//! tripwire off one: the defaults (`kubectl`, `helm`, `flux`), the tree's
//! `cluster-commands` file (one name per line, `#` comments, like `revoked`
//! and `legacy-map`), the `MIGRATE_CLUSTER_COMMANDS` environment variable
//! (comma- or space-separated) and `--cluster-command NAME` flags.

use std::path::Path;

use crate::finding::{Finding, Level};

/// The commands that are always cluster commands.
pub const DEFAULT_COMMANDS: [&str; 3] = ["kubectl", "helm", "flux"];

/// The per-tree list file, at the tree root.
pub const TREE_FILE: &str = "cluster-commands";
/// The environment variable adding commands.
pub const ENV_COMMANDS: &str = "MIGRATE_CLUSTER_COMMANDS";
/// The tolerance helper's name (`argv[0]` dispatch).
pub const TOLERATE: &str = "migrate-tolerate";

/// Checks one command name: a plain file name that a shim can stand in for.
pub fn validate_name(name: &str) -> Result<(), String> {
    let ok_chars = name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "._+-".contains(c));
    if name.is_empty() || !ok_chars || name.starts_with(['.', '-']) {
        return Err(format!(
            "{name:?} is not a command name (letters, digits, '.', '_', '+', '-'; no path)"
        ));
    }
    if migration_core::settings::ENGINE_PROGRAMS.contains(&name) {
        return Err(format!("{name:?} is the migrate binary itself"));
    }
    Ok(())
}

/// The environment key of a command: upper case, other characters as `_`
/// (`kubectl` -> `KUBECTL`, `kubectl-cnpg` -> `KUBECTL_CNPG`).
pub fn env_key(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect()
}

/// Parses a `cluster-commands` file: `(line, problem)` for each bad line.
pub fn parse_list(text: &str) -> Result<Vec<String>, Vec<(usize, String)>> {
    let mut names = Vec::new();
    let mut problems = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        match validate_name(line) {
            Ok(()) => names.push(line.to_owned()),
            Err(e) => problems.push((i + 1, e)),
        }
    }
    if problems.is_empty() {
        Ok(names)
    } else {
        Err(problems)
    }
}

/// The tree's own cluster commands (none when the file is absent). Errors
/// name the file and line.
pub fn read_tree(root: &Path) -> Result<Vec<String>, Vec<String>> {
    match crate::supplied::tree_file(root, TREE_FILE) {
        Ok(None) => Ok(Vec::new()),
        // A dangling symlink is an error, not "no file": the commands it
        // names would be neither scanned nor shimmed.
        Err(e) => Err(vec![e.to_string()]),
        Ok(Some(bytes)) => {
            let text =
                String::from_utf8(bytes).map_err(|_| vec![format!("{TREE_FILE}: not UTF-8")])?;
            parse_list(&text).map_err(|problems| {
                problems
                    .into_iter()
                    .map(|(line, p)| format!("{TREE_FILE}:{line}: {p}"))
                    .collect()
            })
        }
    }
}

/// Splits an environment value (commas or white space).
pub fn parse_env(value: &str) -> Result<Vec<String>, Vec<String>> {
    let mut names = Vec::new();
    let mut problems = Vec::new();
    for name in value
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|s| !s.is_empty())
    {
        match validate_name(name) {
            Ok(()) => names.push(name.to_owned()),
            Err(e) => problems.push(format!("{ENV_COMMANDS}: {e}")),
        }
    }
    if problems.is_empty() {
        Ok(names)
    } else {
        Err(problems)
    }
}

/// The union of the defaults and `extra`, first occurrence kept, in order.
pub fn union<'a>(extra: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for name in DEFAULT_COMMANDS.into_iter().chain(extra) {
        if !out.iter().any(|n| n == name) {
            out.push(name.to_owned());
        }
    }
    out
}

/// The full set: defaults, the tree file (when `root` is given), the
/// environment value and the flags. Every problem is returned.
pub fn resolve(
    root: Option<&Path>,
    env_value: Option<&str>,
    flags: &[String],
) -> Result<Vec<String>, Vec<String>> {
    let mut problems = Vec::new();
    let tree = root.map_or(Ok(Vec::new()), read_tree).unwrap_or_else(|p| {
        problems.extend(p);
        Vec::new()
    });
    let env = env_value
        .map(parse_env)
        .transpose()
        .unwrap_or_else(|p| {
            problems.extend(p);
            None
        })
        .unwrap_or_default();
    for f in flags {
        if let Err(e) = validate_name(f) {
            problems.push(format!("--cluster-command: {e}"));
        }
    }
    if !problems.is_empty() {
        return Err(problems);
    }
    let all = union(
        tree.iter()
            .chain(env.iter())
            .chain(flags.iter())
            .map(String::as_str),
    );
    let mut keys: Vec<(String, &str)> = all.iter().map(|n| (env_key(n), n.as_str())).collect();
    keys.sort();
    for pair in keys.windows(2) {
        if pair[0].0 == pair[1].0 {
            return Err(vec![format!(
                "cluster commands {:?} and {:?} share the environment key {}",
                pair[0].1, pair[1].1, pair[0].0
            )]);
        }
    }
    Ok(all)
}

/// The tree's `cluster-commands` file: its names, and a `list-file` finding
/// for each bad line.
pub fn tree_file(root: &Path) -> (Vec<String>, Vec<Finding>) {
    match read_tree(root) {
        Ok(names) => (names, Vec::new()),
        Err(problems) => (
            Vec::new(),
            problems
                .into_iter()
                .map(|p| {
                    let line = p
                        .strip_prefix(TREE_FILE)
                        .and_then(|r| r.strip_prefix(':'))
                        .and_then(|r| r.split(':').next())
                        .and_then(|n| n.parse().ok());
                    Finding {
                        file: TREE_FILE.into(),
                        line,
                        rule: "list-file",
                        level: Level::Error,
                        message: p,
                    }
                })
                .collect(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Resolves the three sources for a tree whose `cluster-commands` file
    /// holds `tree_file`.
    fn resolve_in_tree(
        tree_file: &str,
        env_value: &str,
        flag: &str,
    ) -> Result<Vec<String>, Vec<String>> {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(TREE_FILE), tree_file).unwrap();
        resolve(Some(dir.path()), Some(env_value), &[flag.into()])
    }

    #[test]
    fn settings_only_add_to_the_defaults() {
        let all = resolve_in_tree(
            "# ours\noc\nkubectl # again\n",
            "talosctl, argocd",
            "kubectl-cnpg",
        )
        .unwrap();
        assert_eq!(
            all,
            [
                "kubectl",
                "helm",
                "flux",
                "oc",
                "talosctl",
                "argocd",
                "kubectl-cnpg"
            ]
        );
    }

    #[test]
    fn bad_names_are_reported_with_file_and_line() {
        let problems =
            resolve_in_tree("ok\n/usr/bin/kubectl\n", "a b/c", "migrate-tolerate").unwrap_err();
        assert_eq!(problems.len(), 3, "{problems:?}");
        assert!(
            problems[0].starts_with("cluster-commands:2: "),
            "{problems:?}"
        );
        assert!(
            problems[1].starts_with("MIGRATE_CLUSTER_COMMANDS: "),
            "{problems:?}"
        );
        assert!(
            problems[2].contains("migrate binary itself"),
            "{problems:?}"
        );
    }

    #[test]
    fn environment_keys_are_upper_case_with_underscores() {
        assert_eq!(env_key("kubectl"), "KUBECTL");
        assert_eq!(env_key("kubectl-cnpg"), "KUBECTL_CNPG");
        let dir = tempfile::tempdir().unwrap();
        assert!(resolve(Some(dir.path()), None, &["a-b".into(), "a_b".into()]).is_err());
    }

    #[test]
    fn a_bad_cluster_commands_line_is_a_list_file_finding_with_its_line() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(TREE_FILE), "oc\n/usr/bin/kubectl\n").unwrap();
        let (names, findings) = tree_file(dir.path());
        assert!(names.is_empty());
        assert_eq!(findings.len(), 1);
        assert_eq!((findings[0].rule, findings[0].line), ("list-file", Some(2)));
        std::fs::write(dir.path().join(TREE_FILE), "oc\n").unwrap();
        assert_eq!(tree_file(dir.path()).0, ["oc"]);
    }
}
