//! The tripwire tests' scratch world: a tree of scripts for one shell, a
//! file ledger, and fake cluster commands (`kubectl`, `helm`, `flux`,
//! `mykube`, `oc`) first on PATH that answer like a healthy cluster or fail
//! with a recorded kubectl error.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::shells::{self, Shell};
use super::{migrate, parse};

/// What kubectl printed to stderr when the API server was down (recorded
/// from the real kubectl, tests/fixtures/kubectl-errors/).
pub fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/kubectl-errors")
        .join(format!("{name}.txt"))
}

/// A fake cluster command: `FAKE_CLUSTER=ok` answers like a healthy
/// cluster, `fail` prints `FAKE_STDERR` (a recorded kubectl error) and exits
/// 1. Every call is appended to `$SCRATCH/calls`.
const FAKE: &str = r#"#!/bin/sh
echo "$(basename "$0") $*" >> "$SCRATCH/calls"
case "${FAKE_CLUSTER:-fail}" in
ok)
    case "$*" in
    *"-f -"*) cat > "$SCRATCH/stdin-seen" ;;
    esac
    printf 'namespace/default\nnamespace/kube-system\n'
    exit 0 ;;
*)
    cat "$FAKE_STDERR" >&2
    exit 1 ;;
esac
"#;

/// One scratch world; see the module.
pub struct Scratch {
    dir: tempfile::TempDir,
}

impl Scratch {
    /// An empty tree, an empty file ledger and the fake commands.
    pub fn new() -> Self {
        let s = Scratch {
            dir: tempfile::tempdir().unwrap(),
        };
        let bin = s.bin();
        std::fs::create_dir_all(&bin).unwrap();
        for name in ["kubectl", "helm", "flux", "mykube", "oc"] {
            s.write_exec(&bin.join(name), FAKE);
        }
        for d in [
            "tree/pre-apply",
            "tree/background",
            "tree/order.d",
            "tree/lib",
        ] {
            std::fs::create_dir_all(s.path().join(d)).unwrap();
        }
        super::empty_file_ledger(&s.ledger_path());
        s
    }

    /// Dash, and a scratch world holding `scripts` for it (see
    /// [`Self::scripts`]): the start of most tripwire tests.
    pub fn dash(on_error: &str, scripts: &[(&str, &str)]) -> (Shell, Self) {
        let shell = shells::dash();
        let s = Self::under(&shell, on_error, scripts);
        (shell, s)
    }

    /// A scratch world holding `scripts` for `shell` (see
    /// [`Self::scripts`]).
    pub fn under(shell: &Shell, on_error: &str, scripts: &[(&str, &str)]) -> Self {
        let s = Self::new();
        s.scripts(shell, on_error, scripts);
        s
    }

    /// The text of the file `name` in the scratch directory.
    pub fn read(&self, name: &str) -> String {
        std::fs::read_to_string(self.path().join(name)).unwrap()
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn bin(&self) -> PathBuf {
        self.path().join("fakebin")
    }

    pub fn tree(&self) -> PathBuf {
        self.path().join("tree")
    }

    pub fn write_exec(&self, path: &Path, text: &str) {
        use std::os::unix::fs::PermissionsExt;
        std::fs::write(path, text).unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    /// Replaces the fake `kubectl` with `script`.
    pub fn fake_kubectl(&self, script: &str) {
        self.write_exec(&self.bin().join("kubectl"), script);
    }

    /// Writes the scripts (in this order) under `shell`, with `on_error`.
    pub fn scripts(&self, shell: &Shell, on_error: &str, scripts: &[(&str, &str)]) {
        let mut order = String::new();
        for (slug, body) in scripts {
            std::fs::write(
                self.tree().join("pre-apply").join(slug),
                format!(
                    "#!{}\n# cozystack-migration: tier=pre-apply\n# cozystack-migration: on-error={on_error}\nset -eu\n{body}\n",
                    shell.shebang
                ),
            )
            .unwrap();
            order.push_str(slug);
            order.push('\n');
        }
        std::fs::write(self.tree().join("order.d/00001-v1"), order).unwrap();
    }

    pub fn lib(&self, name: &str, text: &str) {
        std::fs::write(self.tree().join("lib").join(name), text).unwrap();
    }

    /// `migrate run` with the fake commands first on PATH.
    pub fn command(&self, shell: &Shell, cluster: &str, stderr_fixture: &str) -> Command {
        let mut cmd = migrate();
        let path = format!(
            "{}:{}",
            self.bin().display(),
            std::env::var("PATH").unwrap_or_default()
        );
        cmd.args(["run", self.tree().to_str().unwrap(), "--ledger"])
            .arg(self.ledger())
            .args(["--allow-interpreter", &shell.shebang, "--output", "json"])
            .env("PATH", path)
            .env("SCRATCH", self.path())
            .env("FAKE_CLUSTER", cluster)
            .env("FAKE_STDERR", fixture(stderr_fixture))
            .env_remove("MIGRATE_CLUSTER_COMMANDS")
            .env_remove("KUBECTL");
        if cfg!(feature = "failpoints") {
            cmd.env("MIGRATE_TEST_SKIP_PRERUN_SCAN", "1");
        }
        cmd
    }

    /// [`Self::run`] on a working cluster, which must exit 0: its stderr.
    pub fn runs_ok(&self, shell: &Shell) -> String {
        let (code, _, err) = self.run(shell, "ok");
        assert_eq!(code, 0, "{}: {err}", shell.name);
        err
    }

    pub fn run(&self, shell: &Shell, cluster: &str) -> (i32, serde_json::Value, String) {
        parse(
            self.command(shell, cluster, "connection-refused")
                .output()
                .unwrap(),
        )
    }

    fn status(&self) -> serde_json::Value {
        super::json(&["status", "--ledger", &self.ledger()]).1
    }

    /// This world's file ledger.
    pub fn ledger_path(&self) -> PathBuf {
        self.path().join("ledger.json")
    }

    /// The `--ledger` spec of this world's file ledger.
    pub fn ledger(&self) -> String {
        super::file_spec(&self.ledger_path())
    }

    pub fn entries(&self) -> Vec<serde_json::Value> {
        self.status()["entries"].as_array().unwrap().clone()
    }

    pub fn entry(&self, slug: &str) -> serde_json::Value {
        let status = self.status();
        super::by_slug(&status["entries"], slug)
            .cloned()
            .unwrap_or_else(|| panic!("no entry for {slug}: {status}"))
    }

    pub fn calls(&self) -> Vec<String> {
        std::fs::read_to_string(self.path().join("calls"))
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    /// Asserts that `slug` was recorded with reason `masked-failure` and a
    /// message containing `needle`; returns its entry.
    pub fn assert_masked(&self, slug: &str, needle: &str) -> serde_json::Value {
        let entry = self.entry(slug);
        assert_eq!(entry["reason"], "masked-failure", "{slug}: {entry}");
        assert!(
            entry["message"].as_str().unwrap().contains(needle),
            "{slug}: {entry}"
        );
        entry
    }

    /// The `(rule, line)` of every lint finding for the tree, with the
    /// exit code of `migrate lint`.
    pub fn lint_findings(&self, shell: &Shell) -> (i32, Vec<(String, u64)>) {
        let (code, doc, _) = super::json(&[
            "lint",
            self.tree().to_str().unwrap(),
            "--shebang",
            &shell.shebang,
        ]);
        (code, super::placed(&doc))
    }
}
