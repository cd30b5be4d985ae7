//! `migrate manifest`: generates `order.d/` from the release tags of HEAD's
//! line.

use std::path::Path;

use migration_core::generate::{ReleaseHistory, generate};
use migration_core::{LoadOptions, MigrationsTree};

use super::args::{DEFAULT_TAG_PATTERN, ManifestArgs};
use super::{Failure, Out};
use crate::report::ManifestView;
use migrate_repo::git::Repo;

/// Generates the manifest, writes it to `--out` if given, and prints it.
pub fn manifest(args: ManifestArgs, out: &Out) -> Result<(), Failure> {
    let ManifestArgs {
        repo,
        path: paths,
        tree_since,
        tag_pattern,
        out: dir,
        allow_new_path,
    } = args;
    // The first --path is the tree in the working copy (it must exist);
    // the others are where older tags kept it, gone from disk now.
    let mut paths = paths;
    if let Some(first) = paths.first_mut() {
        *first = repo_relative(&repo, first)?;
    }
    // The tree's migrate.toml: a flag beats it, it beats the default. Its
    // old-paths stand for the earlier --path flags when none is given.
    let settings = super::settings::read(&repo.join(paths.first().cloned().unwrap_or_default()))?;
    if paths.len() == 1
        && let Some(old) = &settings.old_paths
    {
        paths.extend(old.iter().cloned());
    }
    let tree_since = tree_since.or_else(|| settings.tree_since.clone());
    let tag_pattern = tag_pattern
        .or_else(|| settings.tag_pattern.clone())
        .unwrap_or_else(|| DEFAULT_TAG_PATTERN.to_owned());
    let marker = settings.header_marker();
    for old in paths.iter_mut().skip(1) {
        *old = lexical_relative(&repo, old)?;
    }
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
    let reading = migrate_repo::git::TreePaths {
        paths: &paths,
        tree_since: tree_since.as_deref(),
        marker: &marker,
    };
    refuse_no_commits(&repo)?;
    let migrate_repo::git::LineHistory {
        mut history,
        off_line,
    } = Repo::new(&repo).allow_new_path(allow_new_path).history_at(
        &reading,
        &tag_pattern,
        disk,
        legacy,
    )?;
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
    let mut view = ManifestView::new(&manifest, dir.map(|d| d.display().to_string()));
    view.off_line = off_line;
    out.emit(&view, |_| view.text(&manifest));
    Ok(())
}

/// A repository without a commit has no HEAD and no tags: git's own words
/// for it (`fatal: malformed object name HEAD`) say nothing of what to do,
/// so it is refused first, saying it. A directory that is no repository, or
/// a git that cannot run, is left to the history reader's own messages.
fn refuse_no_commits(repo: &Path) -> Result<(), Failure> {
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .arg("-C")
            .arg(repo)
            .args(args)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    if git(&["rev-parse", "--git-dir"])
        && !git(&["rev-parse", "--verify", "--quiet", "HEAD^{commit}"])
    {
        return Err(Failure::bad_input(vec![format!(
            "{}: the repository has no commit yet: the manifest is built from release tags; commit the tree and tag a release (git tag v1.0.0) first",
            repo.display()
        )]));
    }
    Ok(())
}

/// `--path` as git names it inside `repo`: `./x`, `x/` and an absolute
/// path inside the repository all become `x`; a path outside it, or one
/// that does not exist, is refused (git would find it in no tag and every
/// script would be untagged).
fn repo_relative(repo: &Path, path: &str) -> Result<String, Failure> {
    let bad = |why: String| bad_path(path, &why);
    let root = canonical_root(repo, path)?;
    let given = Path::new(path);
    let full = if given.is_absolute() {
        given.to_path_buf()
    } else {
        root.join(given)
    };
    let full = std::fs::canonicalize(&full)
        .map_err(|e| bad(format!("{} does not exist ({e})", full.display())))?;
    let relative = full.strip_prefix(&root).map_err(|_| {
        bad(format!(
            "{} is outside the repository {}; give the tree's path inside it",
            full.display(),
            root.display()
        ))
    })?;
    let relative = relative
        .to_str()
        .ok_or_else(|| bad("the path is not UTF-8".to_owned()))?;
    Ok(if relative.is_empty() {
        ".".to_owned()
    } else {
        relative.to_owned()
    })
}

/// An older `--path` (the tree before it moved; it need not exist on disk
/// any more) as git names it: `./x` and `x/` become `x`, an absolute path
/// must lie inside the repository, `..` is refused.
fn lexical_relative(repo: &Path, path: &str) -> Result<String, Failure> {
    let bad = |why: &str| bad_path(path, why);
    let given = Path::new(path);
    let relative = if given.is_absolute() {
        let root = canonical_root(repo, path)?;
        given
            .strip_prefix(&root)
            .map_err(|_| bad("outside the repository; give the tree's path inside it"))?
            .to_path_buf()
    } else {
        given.to_path_buf()
    };
    let mut parts = Vec::new();
    for part in relative.components() {
        match part {
            std::path::Component::Normal(p) => parts.push(
                p.to_str()
                    .ok_or_else(|| bad("the path is not UTF-8"))?
                    .to_owned(),
            ),
            std::path::Component::CurDir => {}
            _ => return Err(bad("'..' and roots are not paths inside the repository")),
        }
    }
    if parts.is_empty() {
        return Err(bad("names the repository itself, not a tree inside it"));
    }
    Ok(parts.join("/"))
}

/// `--path PATH` refused for `why`.
fn bad_path(path: &str, why: &str) -> Failure {
    Failure::bad_input(vec![format!("--path {path:?}: {why}")])
}

/// The repository's canonical root, against which both kinds of `--path`
/// are made relative; an unreadable repository refuses `path`.
fn canonical_root(repo: &Path, path: &str) -> Result<std::path::PathBuf, Failure> {
    std::fs::canonicalize(repo).map_err(|e| {
        bad_path(
            path,
            &format!("the repository {} cannot be read: {e}", repo.display()),
        )
    })
}
