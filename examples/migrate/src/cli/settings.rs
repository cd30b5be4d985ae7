//! The tree's settings file (`migrate.toml`, [`migration_core::settings`])
//! as the commands apply it: a flag beats the file, the file beats the
//! default. A broken file refuses the command before anything runs.

use std::path::Path;

use migrate_lint::LintConfig;
use migration_core::Settings;

use super::Failure;

/// The settings of the tree at `tree` (the defaults without a file); a
/// broken file is bad input, each problem naming the file, line and key.
pub(crate) fn read(tree: &Path) -> Result<Settings, Failure> {
    Settings::read(tree)
        .map_err(|errors| Failure::bad_input(errors.iter().map(ToString::to_string).collect()))
}

/// What lint and the pre-run scan are told by the flags, then the file:
/// the ledger name, and the cluster commands (a `--kubectl-command` list
/// replaces the defaults `kubectl`, `kube`, `helm`, `flux`; the file's
/// `cluster-commands` join them, since a setting never takes a command off
/// the scan, as with the tree's `cluster-commands` file).
pub(crate) fn lint_config(
    settings: &Settings,
    ledger_name: Option<String>,
    commands: Vec<String>,
) -> LintConfig {
    let mut config = LintConfig::default();
    if let Some(name) = ledger_name.or_else(|| settings.ledger_name.clone()) {
        config.ledger_name = name;
    }
    if !commands.is_empty() {
        config.kubectl_commands = commands;
    } else {
        for name in settings.cluster_commands.iter().flatten() {
            if !config.kubectl_commands.contains(name) {
                config.kubectl_commands.push(name.clone());
            }
        }
    }
    config
}
