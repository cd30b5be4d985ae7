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

const TESTS_LIB_SH: &str = "\
# Helpers for migration tests, sourced as . \"$(dirname \"$0\")/lib.sh\".
# A test runs its migration from the tree root against the fake kubectl and
# checks the calls it made.
set -eu
TREE=$(cd \"$(dirname \"$0\")/..\" && pwd)
cd \"$TREE\"
export KUBECTL=\"$TREE/tests/fake-kubectl\"
export FAKE_KUBECTL_LOG
FAKE_KUBECTL_LOG=$(mktemp)
trap 'rm -f \"$FAKE_KUBECTL_LOG\"' EXIT

# Runs a migration as the runner does (errexit on).
run_migration() {
    sh -e \"$1\"
}

# The call log must hold 'kubectl ARGS'.
expect_call() {
    grep -qF -- \"kubectl $1\" \"$FAKE_KUBECTL_LOG\" || { echo \"expected call: kubectl $1\" >&2; exit 1; }
}

# The migration must fail when the kubectl call matching $2 fails.
expect_failure_when_kubectl_fails() {
    if FAKE_KUBECTL_FAIL=\"$2\" sh -e \"$1\" >/dev/null 2>&1; then
        echo \"$1 succeeded although kubectl failed on '$2'\" >&2
        exit 1
    fi
}
";

const FAKE_KUBECTL: &str = "\
#!/bin/sh
# A stand-in kubectl for script tests: logs each call to $FAKE_KUBECTL_LOG,
# fails when the arguments contain $FAKE_KUBECTL_FAIL, else prints 'ok: ...'.
# Teach it the answers your scripts read.
set -eu
echo \"kubectl $*\" >> \"${FAKE_KUBECTL_LOG:-/dev/null}\"
if [ -n \"${FAKE_KUBECTL_FAIL:-}\" ]; then
    case \"$*\" in *\"$FAKE_KUBECTL_FAIL\"*) echo \"error: the server is unavailable\" >&2; exit 1 ;; esac
fi
echo \"ok: $*\"
";

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
        ("tests/fake-kubectl".to_owned(), FAKE_KUBECTL, 0o755),
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
