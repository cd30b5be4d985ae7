//! `migrate new`: scaffold a migration script and its test, following the
//! conventions `lint` enforces.

use std::path::{Path, PathBuf};
use std::process::Command;

use migration_core::header::{OnError, Tier};
use migration_core::tree::{LEGACY_MAP_FILE, REVOKED_FILE};
use migration_core::{LoadOptions, MigrationsTree, Slug};

/// Why a slug cannot be scaffolded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ScaffoldError {
    /// The slug is taken, now or in the past.
    #[error(
        "slug '{slug}' cannot be used: {reason}; a slug that ever shipped is never reused, pick a new one"
    )]
    Taken {
        /// The slug.
        slug: Slug,
        /// Where it was found.
        reason: String,
    },
    /// The tree does not load.
    #[error(transparent)]
    Tree(#[from] migration_core::TreeError),
    /// Writing failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The path.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
}

/// What was created.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Scaffolded {
    /// The script.
    pub script: PathBuf,
    /// Its test stub.
    pub test: PathBuf,
}

/// Checks `slug` is unused anywhere the tree or its git history knows it.
fn check_unused(root: &Path, slug: &Slug) -> Result<(), ScaffoldError> {
    let taken = |reason: String| {
        Err(ScaffoldError::Taken {
            slug: slug.clone(),
            reason,
        })
    };
    let tree = MigrationsTree::load_with(
        root,
        LoadOptions {
            read_manifest: true,
            ..LoadOptions::default()
        },
    )?;
    if let Some(script) = tree.script(slug) {
        return taken(format!("{} exists", script.relative_path().display()));
    }
    if let Some((batch, _)) = tree.manifest().and_then(|m| m.lookup(slug)) {
        return taken(format!("the manifest lists it in {}", batch.name));
    }
    if tree.is_revoked(slug) {
        return taken(format!("it is listed in {REVOKED_FILE}"));
    }
    if tree.legacy_map().iter().any(|p| &p.slug == slug) {
        return taken(format!("it is listed in {LEGACY_MAP_FILE}"));
    }
    // A retired script is gone from disk but not from history.
    let paths: Vec<String> = Tier::ALL
        .iter()
        .map(|t| format!("{}/{slug}", t.as_str()))
        .collect();
    let output = Command::new("git")
        .arg("-C")
        .arg(root)
        .args(["log", "--all", "--format=%h %s", "-1", "--"])
        .args(&paths)
        .output();
    if let Ok(out) = output
        && out.status.success()
        && !out.stdout.is_empty()
    {
        return taken(format!(
            "git history has it (commit {})",
            String::from_utf8_lossy(&out.stdout).trim()
        ));
    }
    Ok(())
}

/// Creates `<tier>/<slug>` and `<tests_dir>/<slug>.sh`.
pub fn scaffold(
    root: &Path,
    slug: &Slug,
    tier: Tier,
    on_error: OnError,
    tests_dir: &Path,
) -> Result<Scaffolded, ScaffoldError> {
    check_unused(root, slug)?;
    // The tree's header marker (its migrate.toml; the load above already
    // refused a broken one, naming its line).
    let marker = migration_core::Settings::read(root)
        .map_err(|errors| {
            ScaffoldError::Tree(migration_core::TreeError::Invalid {
                root: root.to_path_buf(),
                problems: errors
                    .into_iter()
                    .map(migration_core::TreeProblem::Settings)
                    .collect(),
            })
        })?
        .header_marker();
    let script = root.join(tier.as_str()).join(slug.as_str());
    let test = root.join(tests_dir).join(format!("{slug}.sh"));
    let lib_line = if root.join("lib").is_dir() {
        ". ./lib/kube.sh\n"
    } else {
        ""
    };
    let header = migration_core::header::render_header(&marker, tier, on_error, &[]);
    let body = format!(
        "#!/bin/sh\n\
         {header}\
         #\n\
         # TODO: say what this migration changes and why it must run before\n\
         # (pre-apply) or after (background) the platform chart applies.\n\
         # Conventions: fail closed (no '|| true' after kubectl, no $(...) as a\n\
         # for list, no kubectl output piped without capturing it first), be\n\
         # safe to run twice, never write the ledger.\n\
         set -eu\n\
         {lib_line}\n\
         echo \"{slug}: nothing to do yet\" >&2\n\
         exit 1\n"
    );
    // The helpers `migrate init` writes, when the tree has them.
    let helpers = if root.join(tests_dir).join("lib.sh").is_file() {
        ". \"$(dirname \"$0\")/lib.sh\"\n\
         # answer 'kubectl get ...' ok|not-found|forbidden|... (tests/lib.sh)\n\
         # run_migration {tier}/{slug}\n\
         # expect_call '...'\n\
         # expect_failure_when_kubectl_fails {tier}/{slug} '...'\n\
         # expect_safe_to_run_twice {tier}/{slug}\n"
            .replace("{tier}", tier.as_str())
            .replace("{slug}", slug.as_str())
    } else {
        "set -eu\n".to_owned()
    };
    let test_body = format!(
        "#!/bin/sh\n\
         # Test for {tier}/{slug}. Runs the migration against the fake cluster and\n\
         # checks what it did, that it fails when a call it depends on fails, and\n\
         # that it is safe to run twice.\n\
         {helpers}\
         echo \"TODO: write the test for {slug}\" >&2\n\
         exit 1\n"
    );
    for (path, text, mode) in [(&script, &body, 0o755), (&test, &test_body, 0o755)] {
        let io = |source| ScaffoldError::Io {
            path: path.clone(),
            source,
        };
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(io)?;
        }
        // create_new: never clobber a file that appeared since the check.
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(path)
            .map_err(io)?;
        std::io::Write::write_all(&mut file, text.as_bytes()).map_err(io)?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).map_err(io)?;
        }
        #[cfg(not(unix))]
        let _ = mode;
    }
    Ok(Scaffolded { script, test })
}
