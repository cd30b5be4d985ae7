//! Fail-open shapes a careless author can write (issue 27): each ends
//! not-`ok` at run time (the pre-run scan switched off, as in
//! `tripwire.rs`), under dash, busybox ash and bash, and the same scripts
//! record `ok` with a working cluster; or, where nothing at run time can see
//! it, the pre-run scan refuses it with a finding naming file and line.
//!
//! Built only with the `failpoints` feature (see `tripwire.rs`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use common::shells;
use common::tripwire::Scratch;

/// Runs `body` under every shell against a failing cluster (not `ok`: its
/// reason is returned for the caller to check) and a working one (`ok`).
fn fails_then_passes(slug: &str, body: &str, env: &[(&str, String)]) {
    for shell in shells::all() {
        for (cluster, want_ok) in [("fail", false), ("ok", true)] {
            let s = Scratch::under(&shell, "warn", &[(slug, body)]);
            let mut cmd = s.command(&shell, cluster, "connection-refused");
            for (k, v) in env {
                cmd.env(k, v.replace("{fakebin}", s.bin().to_str().unwrap()));
            }
            let (code, _, err) = common::parse(cmd.output().unwrap());
            assert_eq!(code, 0, "{}: {err}", shell.name);
            let entry = s.entry(slug);
            if want_ok {
                assert_eq!(
                    entry["state"], "ok",
                    "{} ({cluster}): {entry}\n{err}",
                    shell.name
                );
                assert!(!s.calls().is_empty(), "{}: the command ran", shell.name);
            } else {
                assert_eq!(
                    entry["state"], "failed",
                    "{} ({cluster}): {entry}\n{err}",
                    shell.name
                );
            }
        }
    }
}

#[test]
fn a_cluster_command_whose_path_comes_from_the_environment_goes_through_the_shim() {
    fails_then_passes(
        "from-env",
        "K=${KUBECTL_BIN:-kubectl}\n\"$K\" get ns || true",
        &[("KUBECTL_BIN", "{fakebin}/kubectl".into())],
    );
}

#[test]
fn the_variables_that_named_the_real_commands_lead_to_the_shims() {
    fails_then_passes(
        "real-var",
        "\"${MIGRATE_TRIPWIRE_REAL_KUBECTL:-kubectl}\" get ns || true",
        &[],
    );
}

#[test]
fn a_child_with_a_stripped_environment_is_still_reported() {
    fails_then_passes(
        "stripped",
        "env -i PATH=\"$PATH\" SCRATCH=\"$SCRATCH\" FAKE_CLUSTER=\"$FAKE_CLUSTER\" FAKE_STDERR=\"$FAKE_STDERR\" kubectl get ns || true",
        &[],
    );
}

/// Runs the `(slug, body)` scripts `failing` and `passing` under `shell`
/// (on-error warn) on a working cluster: `failing` is recorded failed,
/// `passing` ok. The scratch and `failing`'s entry.
fn fails_beside(
    shell: &shells::Shell,
    failing: (&str, &str),
    passing: (&str, &str),
) -> (Scratch, serde_json::Value) {
    let s = Scratch::under(shell, "warn", &[failing, passing]);
    let err = s.runs_ok(shell);
    let entry = s.entry(failing.0);
    assert_eq!(entry["state"], "failed", "{}: {entry}\n{err}", shell.name);
    let ok = s.entry(passing.0);
    assert_eq!(ok["state"], "ok", "{}: {err}", shell.name);
    (s, entry)
}

#[test]
fn an_argument_too_long_for_execve_in_a_masked_pipeline_is_a_failure() {
    // Over 128 KiB in one argument: the shell cannot start kubectl at all.
    for shell in shells::all() {
        fails_beside(
            &shell,
            (
                "too-long",
                "big=$(head -c 140000 /dev/zero | tr '\\0' a)\nkubectl annotate ns x note=\"$big\" | cat\necho went-on",
            ),
            ("short", "kubectl annotate ns x note=short | cat"),
        );
    }
}

#[test]
fn a_detached_process_that_outlives_the_script_is_a_failure_and_never_calls_the_cluster() {
    for shell in shells::all() {
        let (s, entry) = fails_beside(
            &shell,
            (
                "detached",
                // The pause lets it leave the script's group first; a
                // process still in the group when the script exits is
                // killed with it, before it could call anything.
                "setsid sh -c 'sleep 1; kubectl delete ns later' >/dev/null 2>&1 </dev/null &\nsleep 0.3\necho left-it",
            ),
            ("waited", "sh -c 'kubectl get ns' &\nwait"),
        );
        assert!(
            entry["message"]
                .as_str()
                .unwrap()
                .contains("outlived the script"),
            "{}: {entry}",
            shell.name
        );
        std::thread::sleep(std::time::Duration::from_millis(1500));
        assert!(
            !s.calls().iter().any(|c| c.contains("later")),
            "{}: the detached call ran: {:?}",
            shell.name,
            s.calls()
        );
    }
}

/// Each script's test (lint requires one), so lint speaks of nothing else.
fn with_tests(s: &Scratch, slugs: &[&str]) {
    let dir = s.tree().join("tests");
    std::fs::create_dir_all(&dir).unwrap();
    for slug in slugs {
        std::fs::write(dir.join(format!("{slug}.sh")), "#!/bin/sh\nexit 0\n").unwrap();
    }
}

/// Shapes only the text can show: the scan refuses each at its line.
#[test]
fn login_shells_profile_scripts_and_tripwire_internals_are_refused_before_anything_runs() {
    let cases: &[(&str, &str, &str)] = &[
        ("bash-login", "bash -lc 'kubectl get ns'", "path-reset"),
        ("sh-login", "sh -l -c 'kubectl get ns'", "path-reset"),
        (
            "bash-login-long",
            "bash --login -c 'kubectl get ns'",
            "path-reset",
        ),
        ("su-login", "su - root -c 'kubectl get ns'", "path-reset"),
        ("profile", ". /etc/profile\nkubectl get ns", "path-reset"),
        (
            "home-profile",
            ". \"$HOME/.profile\"\nkubectl get ns",
            "path-reset",
        ),
        (
            "internals",
            "\"$MIGRATE_TRIPWIRE_REAL_KUBECTL\" get ns",
            "tripwire-internals",
        ),
        (
            "report",
            ": > \"$MIGRATE_TRIPWIRE_REPORT\"\nkubectl get ns",
            "tripwire-internals",
        ),
        (
            "env-default",
            "\"${KUBECTL_BIN:-kubectl}\" get ns",
            "cluster-command-from-environment",
        ),
        (
            "env-default-var",
            "K=${KUBECTL_BIN:-kubectl}\n\"$K\" get ns",
            "cluster-command-from-environment",
        ),
    ];
    for shell in shells::all() {
        for (slug, body, rule) in cases {
            let s = Scratch::under(&shell, "abort", &[(slug, body)]);
            with_tests(&s, &[slug]);
            let (code, found) = s.lint_findings(&shell);
            assert_ne!(code, 0, "{} {slug}: {found:?}", shell.name);
            // Line 5 is the body's first line (shebang, two directives, set -eu).
            assert!(
                found.iter().any(|(r, line)| r == rule && *line >= 5),
                "{} {slug}: want {rule}: {found:?}",
                shell.name
            );
            let mut plan = common::migrate();
            plan.args(["run", s.tree().to_str().unwrap(), "--ledger", &s.ledger()])
                .args(["--allow-interpreter", &shell.shebang]);
            let out = plan.output().unwrap();
            assert_eq!(
                out.status.code(),
                Some(3),
                "{} {slug}: run refuses",
                shell.name
            );
        }
    }
    // Appending to PATH, a plain `bash -c` and $KUBECTL stay fine.
    for shell in [shells::dash(), shells::bash()] {
        let s = Scratch::under(
            &shell,
            "abort",
            &[(
                "fine",
                "PATH=\"$PATH:/opt/bin\"\nbash -c 'kubectl get ns'\n\"${KUBECTL:-kubectl}\" get ns",
            )],
        );
        with_tests(&s, &["fine"]);
        let (code, found) = s.lint_findings(&shell);
        assert_eq!(code, 0, "{}: {found:?}", shell.name);
    }
}
