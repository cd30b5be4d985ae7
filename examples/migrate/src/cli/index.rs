//! `migrate index`: renders the index ConfigMap the background operator reads.

use migration_core::MigrationsTree;

use super::args::IndexArgs;
use super::{Failure, Out};
use crate::render::configmap_yaml_data;
use migrate_spec::index::{Index, index_configmap};

/// Builds the index of the tree's runnable background migrations and
/// prints it as a ConfigMap.
pub fn index(args: IndexArgs, out: &Out) -> Result<(), Failure> {
    if !args.allow_tag && !args.image.contains("@sha256:") {
        return Err(Failure::bad_input(vec![format!(
            "--image {:?} has no digest (NAME@sha256:HEX): a tag can move, so the operator could run other scripts than these; pin the digest, or pass --allow-tag",
            args.image
        )]));
    }
    let tree = MigrationsTree::load(&args.tree)?;
    let Some(index) = Index::from_tree(&tree, &args.image, &args.tree_path) else {
        return Err(super::no_manifest(&tree));
    };
    let cm = index_configmap(&index, &args.namespace, &args.name);
    let data = index.to_data();
    out.emit(&cm, |_| {
        configmap_yaml_data(&args.namespace, &args.name, &data)
    });
    Ok(())
}
