//! The tree's `cluster-commands` file, for lint: its names, and a
//! `list-file` finding per bad line. (Calling a cluster command by path is
//! the shell rules' `cluster-command-path`.)

use std::path::Path;

use crate::lint::{Finding, Level};

use super::config;

/// The tree's `cluster-commands` file: its names, and a `list-file` finding
/// for each bad line.
pub fn tree_file(root: &Path) -> (Vec<String>, Vec<Finding>) {
    match config::read_tree(root) {
        Ok(names) => (names, Vec::new()),
        Err(problems) => (
            Vec::new(),
            problems
                .into_iter()
                .map(|p| {
                    let line = p
                        .strip_prefix(config::TREE_FILE)
                        .and_then(|r| r.strip_prefix(':'))
                        .and_then(|r| r.split(':').next())
                        .and_then(|n| n.parse().ok());
                    Finding {
                        file: config::TREE_FILE.into(),
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

    #[test]
    fn a_bad_cluster_commands_line_is_a_list_file_finding_with_its_line() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(config::TREE_FILE), "oc\n/usr/bin/kubectl\n").unwrap();
        let (names, findings) = tree_file(dir.path());
        assert!(names.is_empty());
        assert_eq!(findings.len(), 1);
        assert_eq!((findings[0].rule, findings[0].line), ("list-file", Some(2)));
        std::fs::write(dir.path().join(config::TREE_FILE), "oc\n").unwrap();
        assert_eq!(tree_file(dir.path()).0, ["oc"]);
    }
}
