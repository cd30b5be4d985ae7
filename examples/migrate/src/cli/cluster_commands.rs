//! The cluster commands a command works with, from every setting (`run`,
//! `plan` and `lint` share this, so none of them calls into another).

use migrate_lint::cluster_commands;
use migrate_shared::exit;

use super::Failure;

/// The cluster commands: kubectl, helm, flux, plus the tree's
/// `cluster-commands` file (when `tree` is given), `MIGRATE_CLUSTER_COMMANDS`
/// and the flags. A bad name is a usage error.
pub(crate) fn settings(
    tree: Option<&std::path::Path>,
    flags: &[String],
) -> Result<Vec<String>, Failure> {
    let env = std::env::var(cluster_commands::ENV_COMMANDS).ok();
    cluster_commands::resolve(tree, env.as_deref(), flags)
        .map_err(|problems| Failure::new(exit::BAD_INPUT, "bad-input", problems))
}
