//! `migrate run` with scripts that answer "not yet" (exit 75) under dash,
//! busybox ash and bash: recorded `not-yet` (never `ok`) whatever their
//! `on-error`, shown by `status`, `plan` and `verify`, run again next time;
//! `requires` dependents wait with them; the rest of the tier runs. And
//! `migrate run --dry-run`: nothing executes, nothing is written.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::shells::{self, Shell};
use common::{migrate, parse};

/// A fake `kubectl` that always fails as an unreachable API server would.
const FAILING_KUBECTL: &str = "#!/bin/sh\necho \"$*\" >> \"$SCRATCH/calls\"\necho 'The connection to the server localhost:8080 was refused - did you specify the right host or port?' >&2\nexit 1\n";

/// The tripwire tests' scratch world (tree, file ledger, fake cluster commands first on
/// PATH) with a `kubectl` that always fails, and scripts that may `require` one another.
struct Scratch {
    world: common::tripwire::Scratch,
}

impl Scratch {
    fn new() -> Self {
        let world = common::tripwire::Scratch::new();
        world.fake_kubectl(FAILING_KUBECTL);
        Scratch { world }
    }

    fn path(&self) -> &Path {
        self.world.path()
    }

    fn tree(&self) -> PathBuf {
        self.world.tree()
    }

    fn ledger_path(&self) -> PathBuf {
        self.world.ledger_path()
    }

    fn ledger(&self) -> String {
        self.world.ledger()
    }

    /// Writes pre-apply scripts (slug, on-error, requires, body) under
    /// `shell`, in this manifest order.
    fn scripts(&self, shell: &Shell, scripts: &[(&str, &str, &[&str], &str)]) {
        let mut order = String::new();
        for (slug, on_error, requires, body) in scripts {
            let mut text = format!(
                "#!{}\n# cozystack-migration: tier=pre-apply\n# cozystack-migration: on-error={on_error}\n",
                shell.shebang
            );
            for r in *requires {
                text.push_str(&format!("# cozystack-migration: requires={r}\n"));
            }
            text.push_str(&format!("set -eu\n{body}\n"));
            std::fs::write(self.tree().join("pre-apply").join(slug), text).unwrap();
            order.push_str(slug);
            order.push('\n');
        }
        std::fs::write(self.tree().join("order.d/00001-v1.0.0"), order).unwrap();
    }

    /// `migrate SUBCOMMAND TREE --ledger ...` with the fake kubectl first on PATH.
    fn command(&self, shell: &Shell, subcommand: &str) -> Command {
        let mut cmd = migrate();
        let path = format!(
            "{}:{}",
            self.world.bin().display(),
            std::env::var("PATH").unwrap_or_default()
        );
        cmd.arg(subcommand)
            .arg(self.tree())
            .args(["--ledger", &self.ledger(), "--output", "json"])
            .env("PATH", path)
            .env("SCRATCH", self.path())
            .env_remove("MIGRATION_DRY_RUN")
            .env_remove("MIGRATE_CLUSTER_COMMANDS")
            .env_remove("KUBECTL");
        if subcommand == "run" {
            cmd.args(["--allow-interpreter", &shell.shebang]);
        }
        cmd
    }

    fn run(&self, shell: &Shell) -> (i32, serde_json::Value, String) {
        parse(self.command(shell, "run").output().unwrap())
    }

    /// [`Self::new`] holding `scripts` (see [`Self::scripts`]).
    fn with(shell: &Shell, scripts: &[(&str, &str, &[&str], &str)]) -> Self {
        let s = Self::new();
        s.scripts(shell, scripts);
        s
    }

    /// Runs, asserting exit 0 with `expected` as the (slug, outcome) of
    /// every result; returns the report.
    fn run_ok(&self, shell: &Shell, expected: &[(&str, &str)]) -> serde_json::Value {
        let (code, report, stderr) = self.run(shell);
        assert_eq!(code, 0, "{}: {report}\n{stderr}", shell.name);
        assert_eq!(outcomes(&report), pairs(expected), "{}", shell.name);
        report
    }

    fn entry(&self, slug: &str) -> serde_json::Value {
        self.world.entry(slug)
    }
}

/// `(state, reason, attempts)` of a ledger entry.
fn state_reason_attempts(e: &serde_json::Value) -> (Option<&str>, Option<&str>, Option<u64>) {
    (
        e["state"].as_str(),
        e["reason"].as_str(),
        e["attempts"].as_u64(),
    )
}

fn outcomes(report: &serde_json::Value) -> Vec<(String, String)> {
    common::field_pairs(&report["results"], "slug", "outcome")
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
        .collect()
}

#[test]
fn exit_75_is_recorded_not_yet_under_abort_its_dependents_wait_and_the_rest_of_the_tier_runs() {
    for shell in shells::all() {
        let s = Scratch::with(
            &shell,
            &[
                (
                    "crd-waits",
                    "abort",
                    &[],
                    "[ -e \"$SCRATCH/crd-ready\" ] || { echo 'the CRD is not served yet'; exit 75; }\necho ready",
                ),
                (
                    "uses-crd",
                    "abort",
                    &["crd-waits"],
                    "touch \"$SCRATCH/uses-crd-ran\"",
                ),
                (
                    "independent",
                    "abort",
                    &[],
                    "touch \"$SCRATCH/independent-ran\"",
                ),
            ],
        );
        s.run_ok(
            &shell,
            &[
                ("crd-waits", "not-yet"),
                ("uses-crd", "not-yet"),
                ("independent", "ok"),
            ],
        );
        assert!(
            !s.path().join("uses-crd-ran").exists(),
            "{}: a dependent of a not-yet ran",
            shell.name
        );
        assert!(s.path().join("independent-ran").exists());

        let e = s.entry("crd-waits");
        assert_eq!(
            state_reason_attempts(&e),
            (Some("not-yet"), Some("exit-status-75"), Some(1)),
            "{}: {e}",
            shell.name
        );
        assert!(
            e["message"].as_str().unwrap().contains("not served yet"),
            "{e}"
        );
        let d = s.entry("uses-crd");
        assert_eq!(
            state_reason_attempts(&d),
            (Some("not-yet"), Some("requirement-not-yet"), Some(0)),
            "{}: {d}",
            shell.name
        );

        // status counts it; plan lists both as pending again; verify fails.
        let (_, status, _) = common::json(&["status", "--ledger", &s.ledger()]);
        assert_eq!(status["counts"]["not-yet"], 2, "{status}");
        // (`run --dry-run` is the plan of the tier, with the run's allowed interpreters.)
        let (code, plan, _) = parse(s.command(&shell, "run").arg("--dry-run").output().unwrap());
        assert_eq!(code, 0, "{plan}");
        let pending: Vec<&str> = common::fields(&plan["pending"], "slug");
        assert_eq!(pending, ["crd-waits", "uses-crd"], "{plan}");
        assert_eq!(plan["pending"][0]["not_yet"], "exit-status-75");
        assert_eq!(plan["pending"][0]["attempts_before"], 1);
        let (code, verify, _) = parse(s.command(&shell, "verify").output().unwrap());
        assert_eq!(
            code, 5,
            "{}: verify must fail while a not-yet remains: {verify}",
            shell.name
        );
        assert!(
            verify
                .to_string()
                .contains("'crd-waits' (00001-v1.0.0) is 'not-yet'"),
            "{verify}"
        );

        // Preconditions met on the next run: both run, in order, and verify passes.
        std::fs::write(s.path().join("crd-ready"), "").unwrap();
        s.run_ok(&shell, &[("crd-waits", "ok"), ("uses-crd", "ok")]);
        assert_eq!(s.entry("crd-waits")["attempts"], 2);
        let (code, verify, _) = parse(s.command(&shell, "verify").output().unwrap());
        assert_eq!(code, 0, "{}: {verify}", shell.name);
    }
}

#[test]
fn a_failed_cluster_command_followed_by_exit_75_is_not_yet_naming_the_call_never_ok() {
    for shell in shells::all() {
        // The precondition check itself fails (the API server is down): the
        // script says "not yet", and the record names the failed call.
        let s = Scratch::with(
            &shell,
            &[(
                "check-crd",
                "warn",
                &[],
                "kubectl get crd widgets.example.io >/dev/null 2>&1 || exit 75\necho would-migrate",
            )],
        );
        s.run_ok(&shell, &[("check-crd", "not-yet")]);
        let e = s.entry("check-crd");
        assert_eq!(e["state"], "not-yet", "{}: {e}", shell.name);
        let message = e["message"].as_str().unwrap();
        assert!(
            message.contains("1 cluster-command call(s) failed before it")
                && message.contains("kubectl get crd …"),
            "{}: {message}",
            shell.name
        );
        assert!(
            std::fs::read_to_string(s.path().join("calls"))
                .unwrap()
                .contains("get crd"),
            "the fake kubectl was called through the shim"
        );
    }
}

#[test]
fn dry_run_executes_nothing_takes_no_lock_and_writes_nothing_whatever_the_scripts_do() {
    for shell in shells::all() {
        // A script whose own dry-run switch exits 0 having done nothing: a
        // run that executed it would have recorded it `ok`.
        let s = Scratch::with(
            &shell,
            &[(
                "honours-dry-run",
                "abort",
                &[],
                "touch \"$SCRATCH/executed\"\n[ -n \"${MIGRATION_DRY_RUN:-}\" ] && exit 0\ntouch \"$SCRATCH/did-the-work\"",
            )],
        );
        let before = std::fs::read(s.ledger_path()).unwrap();
        for how in ["flag", "env"] {
            let mut cmd = s.command(&shell, "run");
            match how {
                "flag" => cmd.arg("--dry-run"),
                _ => cmd.env("MIGRATION_DRY_RUN", "1"),
            };
            let (code, plan, stderr) = parse(cmd.output().unwrap());
            assert_eq!(code, 0, "{} {how}: {plan}\n{stderr}", shell.name);
            assert_eq!(
                common::fields(&plan["pending"], "slug"),
                ["honours-dry-run"],
                "{plan}"
            );
            assert!(
                !s.path().join("executed").exists(),
                "{} {how}: a dry run executed a script",
                shell.name
            );
            assert_eq!(
                std::fs::read(s.ledger_path()).unwrap(),
                before,
                "{} {how}: a dry run changed the ledger file (lock or entry)",
                shell.name
            );
        }

        // A real run never passes a dry-run switch on to the script, even
        // one set to a false value in the runner's environment.
        let (code, report, stderr) = parse(
            s.command(&shell, "run")
                .env("MIGRATION_DRY_RUN", "0")
                .output()
                .unwrap(),
        );
        assert_eq!(code, 0, "{}: {report}\n{stderr}", shell.name);
        assert!(
            s.path().join("did-the-work").exists(),
            "{}: the script saw MIGRATION_DRY_RUN",
            shell.name
        );
        assert_eq!(s.entry("honours-dry-run")["state"], "ok");
    }
}
