//! `migrate lint`: checks a tree; any error-level finding fails the command.

use super::args::LintArgs;
use super::{Failure, Out};
use crate::report::LintView;
use migrate_lint::shell::shellcheck;
use migrate_lint::{LintConfig, lint_tree};
use migrate_spec::exit;

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
    let view = LintView::new(lint_tree(&args.tree, &config)?);
    out.emit(&view, |_| view.text());
    if view.errors > 0 {
        return Err(Failure::quiet(exit::BAD_INPUT));
    }
    Ok(())
}
