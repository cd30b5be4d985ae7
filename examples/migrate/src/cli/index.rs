//! `migrate index`: renders the index ConfigMap the background operator reads.

use migration_core::MigrationsTree;

use super::args::IndexArgs;
use super::{Failure, Out};
use ledger_configmap::manifest::data_manifest;
use migrate_shared::index::{Index, index_configmap};

/// Builds the index of the tree's runnable background migrations and
/// prints it as a ConfigMap.
pub fn index(args: IndexArgs, out: &Out) -> Result<(), Failure> {
    let mut problems = Vec::new();
    if let Err(why) = migrate_shared::index::check_image(&args.image, args.allow_tag) {
        problems.push(format!("--image {:?}: {why}", args.image));
    }
    if !migrate_shared::is_dns_label(&args.namespace) {
        problems.push(format!(
            "--namespace {:?} is not a namespace name (1 to 63 of a-z, 0-9 and '-', alphanumeric at both ends)",
            args.namespace
        ));
    }
    if !migrate_shared::is_dns_subdomain(&args.name) {
        problems.push(format!(
            "--name {:?} is not a ConfigMap name (1 to 253 characters: dot-separated labels of a-z, 0-9 and '-')",
            args.name
        ));
    }
    if !problems.is_empty() {
        return Err(Failure::bad_input(problems));
    }
    let tree = MigrationsTree::load(&args.tree)?;
    let Some(index) = Index::from_tree(&tree, &args.image, &args.tree_path) else {
        return Err(super::no_manifest(&tree));
    };
    let cm = index_configmap(&index, &args.namespace, &args.name);
    let data = index.to_data();
    out.emit(&cm, |_| data_manifest(&args.namespace, &args.name, &data));
    Ok(())
}
