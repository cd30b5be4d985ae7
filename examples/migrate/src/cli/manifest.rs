//! `migrate manifest`: generates `order.d/` from the release tags of HEAD's
//! line.

use migration_core::generate::{ReleaseHistory, generate};
use migration_core::{LoadOptions, MigrationsTree};

use super::args::ManifestArgs;
use super::{Failure, Out};
use crate::git::Repo;
use crate::report::ManifestView;

/// Generates the manifest, writes it to `--out` if given, and prints it.
pub fn manifest(args: ManifestArgs, out: &Out) -> Result<(), Failure> {
    let ManifestArgs {
        repo,
        path: paths,
        tree_since,
        tag_pattern,
        out: dir,
    } = args;
    // The manifest on disk is what is being regenerated: a stale one must
    // not stop its own regeneration.
    let options = LoadOptions {
        read_manifest: false,
        ..LoadOptions::default()
    };
    let path = paths.first().cloned().unwrap_or_default();
    let tree = MigrationsTree::load_with(&repo.join(&path), options)?;
    let disk = ReleaseHistory::disk_from_tree(&tree);
    let legacy = ReleaseHistory::legacy_from_pairs(tree.legacy_map());
    let reading = crate::git::TreePaths {
        paths: &paths,
        tree_since: tree_since.as_deref(),
    };
    let mut history = Repo::new(&repo).history_at(&reading, &tag_pattern, disk, legacy)?;
    // The working tree's legacy-map, compared with the tags' by the guard.
    history
        .legacy_maps
        .push(migration_core::generate::LegacyMapAt {
            place: migration_core::generate::Place::Disk,
            pairs: tree.legacy_map().to_vec(),
        });
    let manifest = generate(&history)
        .map_err(|e| Failure::bad_input(e.problems.iter().map(ToString::to_string).collect()))?;
    if let Some(dir) = &dir {
        manifest
            .write_dir(dir)
            .map_err(|e| Failure::environment(vec![format!("writing {}: {e}", dir.display())]))?;
    }
    let view = ManifestView::new(&manifest, dir.map(|d| d.display().to_string()));
    out.emit(&view, |_| view.text(&manifest));
    Ok(())
}
