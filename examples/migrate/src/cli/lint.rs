//! `migrate lint`: checks a tree; any error-level finding fails the command.

use super::args::{DEFAULT_TAG_PATTERN, LintArgs};
use super::{Failure, Out};
use crate::report::LintView;
use migrate_lint::shell::shellcheck;
use migrate_lint::{Finding, Level, LintConfig, lint_tree};
use migrate_shared::exit;
use migration_core::{LoadOptions, MigrationsTree};

/// Lints the tree and prints the findings.
pub fn lint(args: LintArgs, out: &Out) -> Result<(), Failure> {
    // The tree's migrate.toml: refused before anything is read when broken.
    let settings = super::settings::read(&args.tree)?;
    let mut config = LintConfig {
        shebang: args.shebang,
        tests_dir: args.tests_dir,
        shellcheck: shellcheck::Settings {
            level: args.shellcheck_level.into(),
            severity: args.shellcheck_severity.into(),
        },
        ..super::settings::lint_config(&settings, args.ledger_name, args.kubectl_commands)
    };
    // The tripwire's cluster commands (MIGRATE_CLUSTER_COMMANDS; lint reads
    // the tree's cluster-commands file itself) are cluster commands for lint
    // too.
    for name in super::cluster_commands::settings(None, &[])? {
        if !config.kubectl_commands.contains(&name) {
            config.kubectl_commands.push(name);
        }
    }
    let mut report = lint_tree(&args.tree, &config)?;
    // A flag beats the file, the file beats the default, as for `manifest`.
    let tag_pattern = args
        .tag_pattern
        .clone()
        .or_else(|| settings.tag_pattern.clone())
        .unwrap_or_else(|| DEFAULT_TAG_PATTERN.to_owned());
    report.findings.extend(shipped_edit_findings(
        &args.tree,
        &tag_pattern,
        &settings.header_marker(),
    ));
    let view = LintView::new(report);
    out.emit(&view, |_| view.text());
    if view.errors > 0 {
        return Err(Failure::quiet(exit::BAD_INPUT));
    }
    Ok(())
}

/// The rule of a shipped script edited since (and of a repository that
/// could not be compared).
const SHIPPED_RULE: &str = "shipped-script-edited";

/// With the tree in a git repository, each script whose slug a release tag
/// matching `pattern` shipped with other bytes (the guard `migrate
/// manifest` applies at the release, asked before it), an error naming the
/// file, the tag and the fix; a repository that cannot be compared is a
/// warning saying why. Nothing outside a repository, and nothing for a tree
/// that does not load (lint reported why already).
fn shipped_edit_findings(
    root: &std::path::Path,
    pattern: &str,
    marker: &migration_core::header::HeaderMarker,
) -> Vec<Finding> {
    let Some((repo, path)) = migrate_repo::git::locate(root) else {
        return Vec::new();
    };
    // A stale manifest must not hide an edit (it is its own finding).
    let options = LoadOptions {
        read_manifest: false,
        header_marker: Some(marker.clone()),
        ..LoadOptions::default()
    };
    let Ok(tree) = MigrationsTree::load_with(root, options) else {
        return Vec::new();
    };
    match repo.shipped_edits(&path, pattern, &tree, marker) {
        Ok(edits) => edits
            .into_iter()
            .map(|edit| Finding {
                file: edit.file.display().to_string(),
                line: None,
                rule: SHIPPED_RULE,
                level: Level::Error,
                message: edit.to_string(),
            })
            .collect(),
        // About the tree as a whole: named by its directory, so the line
        // never starts with an empty file name.
        Err(e) => vec![Finding {
            file: root.display().to_string(),
            line: None,
            rule: SHIPPED_RULE,
            level: Level::Warning,
            message: format!("cannot compare the scripts with what release tags shipped: {e}"),
        }],
    }
}
