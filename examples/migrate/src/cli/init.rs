//! `migrate init DIR`: an empty migrations tree with the layout `new`,
//! `lint` and `manifest` expect, and the test helpers the first test sources.

use std::path::Path;

use migration_core::header::Tier;
use migration_core::tree::{LEGACY_MAP_FILE, REVOKED_FILE};
use serde::Serialize;

use super::args::InitArgs;
use super::{Failure, Out};

/// What `init` created.
#[derive(Debug, Serialize)]
pub struct InitView {
    /// The tree's root.
    pub tree: String,
    /// Every file created, relative to the root.
    pub created: Vec<String>,
}

const REVOKED_TEXT: &str = "\
# Slugs never to be run on a cluster that has not run them already,
# one a line (a comment after '#' says why).
";

const LEGACY_MAP_TEXT: &str = "\
# \"<integer> <slug>\" lines: the scripts of an older integer-numbered
# scheme, converted to slugs (see CONTRACT.md on the legacy version key).
";

const KUBE_SH: &str = "\
# Shared helpers, sourced by migration scripts from the tree root:
#   . ./lib/kube.sh
# A failing kubectl call returns non-zero, and the runner executes scripts
# with errexit, so the script stops there.

kube() {
    \"${KUBECTL:-kubectl}\" \"$@\"
}
";

/// `.gitignore`: the manifest is generated when a release is built and
/// never committed (AUTHORING.md), so the first `git add` after the quick
/// start must not pick it up.
const GITIGNORE: &str = "# order.d/ is generated when a release is built (migrate manifest); never committed.\n/order.d/\n";

/// `tests/lib.sh`: the helpers a test sources (the fake cluster in front
/// on `PATH`, `answer`, `run_migration`, `expect_safe_to_run_twice`, ...).
/// The demo's copy is the source, so the demo's tests run exactly what
/// `init` writes.
pub const TESTS_LIB_SH: &str = include_str!("../../../demo/tests/lib.sh");

/// `tests/fake-cluster`: the stand-in for every cluster command, answering
/// with the real commands' own error texts and exit statuses (the demo's
/// copy, as for `tests/lib.sh`).
pub const FAKE_CLUSTER: &str = include_str!("../../../demo/tests/fake-cluster");

/// Creates the tree; refuses a directory that exists and is not empty.
pub fn init(args: InitArgs, out: &Out) -> Result<(), Failure> {
    let root = args.dir;
    let bad = |what: String| Failure::bad_input(vec![what]);
    match std::fs::read_dir(&root).map(|mut entries| entries.next().is_some()) {
        Ok(true) => {
            return Err(bad(format!(
                "{}: exists and is not empty; init creates a new tree",
                root.display()
            )));
        }
        Ok(false) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(bad(format!("{}: {e}", root.display()))),
    }
    let mut files: Vec<(String, &str, u32)> = Tier::ALL
        .iter()
        .map(|t| (format!("{}/.gitkeep", t.as_str()), "", 0o644))
        .collect();
    files.extend([
        (REVOKED_FILE.to_owned(), REVOKED_TEXT, 0o644),
        (LEGACY_MAP_FILE.to_owned(), LEGACY_MAP_TEXT, 0o644),
        ("lib/kube.sh".to_owned(), KUBE_SH, 0o644),
        ("tests/lib.sh".to_owned(), TESTS_LIB_SH, 0o644),
        ("tests/fake-cluster".to_owned(), FAKE_CLUSTER, 0o755),
        (".gitignore".to_owned(), GITIGNORE, 0o644),
    ]);
    for (rel, text, mode) in &files {
        write_new(&root.join(rel), text, *mode).map_err(|e| {
            Failure::environment(vec![format!("{}: {e}", root.join(rel).display())])
        })?;
    }
    let view = InitView {
        tree: root.display().to_string(),
        created: files.into_iter().map(|(rel, _, _)| rel).collect(),
    };
    out.emit(&view, |_| {
        format!(
            "created the migrations tree {}\nnext: migrate new {} SLUG\n",
            view.tree, view.tree
        )
    });
    Ok(())
}

/// Writes a file that must not exist yet, with `mode`.
fn write_new(path: &Path, text: &str, mode: u32) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)?;
    std::io::Write::write_all(&mut file, text.as_bytes())?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
}
