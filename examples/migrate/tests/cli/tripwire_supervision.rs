//! What the tripwire holds with the pre-run scan on (without the
//! `failpoints` feature too): shims armed once a run with a fresh report a
//! script, a script's process group ended with a runner killed by SIGKILL,
//! no script run without the shim binary, and calls by path and PATH
//! resets refused by lint and run.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use std::path::Path;
use std::process::Command;

use common::tripwire::Scratch;
use common::{parse, shells};

/// Sets `$r` to the tripwire's report path without naming its variable in
/// the script's text: the pre-run scan refuses a script that names it, and
/// these scripts look behind the tripwire as only a deliberate one would.
const TAKE_REPORT: &str = "r=$(env | sed -n 's/^MIGRATE_TRIP[W]IRE_REPORT=//p')\n";

/// Two scripts `first` and `second` under dash, each [`TAKE_REPORT`] then
/// `body`, run on a working cluster, which must succeed.
fn first_and_second(body: &str) -> Scratch {
    let body = format!("{TAKE_REPORT}{body}");
    let (shell, s) = Scratch::dash("warn", &[("first", &body), ("second", &body)]);
    s.runs_ok(&shell);
    s
}

#[test]
fn the_shims_are_armed_once_per_run_and_every_script_gets_a_fresh_report_of_its_own() {
    let s = first_and_second(
        "kubectl get ns\necho \"$PATH $KUBECTL\" > \"$SCRATCH/env-$MIGRATION_SLUG\"\necho \"$r\" > \"$SCRATCH/report-$MIGRATION_SLUG\"",
    );
    let read = |name: &str| s.read(name);
    assert_eq!(read("env-first"), read("env-second"));
    let (first, second) = (read("report-first"), read("report-second"));
    assert_ne!(first, second);
    // Read and removed as soon as its script was over: nothing can append
    // to it any more (the shim never creates a report).
    assert!(!Path::new(first.trim()).exists(), "{first}");
    assert_eq!(s.entry("first")["state"], "ok");
    assert_eq!(s.entry("second")["state"], "ok");
}

/// The processes of group `pgid` that are still alive (zombies waiting
/// for a reaper are dead), from /proc.
fn live_members(pgid: i32) -> Vec<i32> {
    let mut live = Vec::new();
    for (pid, stat) in common::processes() {
        let fields: Vec<&str> = stat.split_whitespace().collect();
        if fields.len() > 2 && fields[0] != "Z" && fields[2] == pgid.to_string() {
            live.push(pid);
        }
    }
    live
}

fn poll_until(limit: std::time::Duration, mut done: impl FnMut() -> bool) -> bool {
    let deadline = std::time::Instant::now() + limit;
    while std::time::Instant::now() < deadline {
        if done() {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    done()
}

#[test]
fn a_runner_killed_with_sigkill_leaves_no_script_group_and_no_tripwire_directory_behind() {
    let (shell, s) = Scratch::dash(
        "abort",
        &[(
            "long",
            &format!(
                "{TAKE_REPORT}trap '' TERM\necho \"$r\" > \"$SCRATCH/report\"\necho \"$KUBECTL\" > \"$SCRATCH/kubectl\"\necho $$ > \"$SCRATCH/pid.tmp\"\nmv \"$SCRATCH/pid.tmp\" \"$SCRATCH/pid\"\nsleep 600\necho survived"
            ),
        )],
    );
    // The script ignores SIGTERM, so only the run supervisor's SIGKILL
    // after the grace period can end it (and the `sleep` it started).
    let mut runner = s.command(&shell, "ok", "not-found");
    // A temporary directory of its own: whatever the run makes there (the
    // shims, the private copies of the scripts) must be gone after it.
    let tmp = s.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    runner
        .args(["--grace", "1"])
        .env("TMPDIR", &tmp)
        .stdout(std::process::Stdio::null());
    let mut runner = runner.spawn().unwrap();
    let pid_file = s.path().join("pid");
    assert!(
        poll_until(std::time::Duration::from_secs(60), || pid_file.exists()),
        "the script never started"
    );
    let shell_pid: i32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let stat = std::fs::read_to_string(format!("/proc/{shell_pid}/stat")).unwrap();
    let pgid: i32 = stat
        .rsplit_once(')')
        .unwrap()
        .1
        .split_whitespace()
        .nth(2)
        .unwrap()
        .parse()
        .unwrap();
    assert!(
        poll_until(std::time::Duration::from_secs(10), || live_members(pgid)
            .len()
            >= 2),
        "the script's sleep never started: {:?}",
        live_members(pgid)
    );
    runner.kill().unwrap(); // SIGKILL: no handler of the runner runs.
    runner.wait().unwrap();
    // Bound: the supervisor sees its pipe close at once, then gives the
    // group the 1 s grace; the rest is room for a loaded machine.
    assert!(
        poll_until(std::time::Duration::from_secs(15), || live_members(pgid)
            .is_empty()),
        "the script's process group outlived its runner: {:?}",
        live_members(pgid)
    );
    // The run's private directories (the reports', on /dev/shm when it can
    // be used, and the shims') go with it: the supervisor removes them once
    // the group is gone, as the runner's own exit would have.
    let read = |name: &str| s.read(name);
    let reports = Path::new(read("report").trim())
        .parent()
        .unwrap()
        .to_path_buf();
    let kubectl = read("kubectl");
    let shims = Path::new(kubectl.trim())
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .to_path_buf();
    for dir in [&reports, &shims] {
        assert!(
            poll_until(std::time::Duration::from_secs(15), || !dir.exists()),
            "left behind by a runner killed with SIGKILL: {}",
            dir.display()
        );
    }
    // Nothing else of the run stays in its temporary directory either (the
    // private copies of the scripts were left as migrate-scripts-*).
    let left = || {
        std::fs::read_dir(&tmp)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect::<Vec<_>>()
    };
    assert!(
        poll_until(std::time::Duration::from_secs(15), || left().is_empty()),
        "left in the run's TMPDIR by a runner killed with SIGKILL: {:?}",
        left()
    );
}

#[test]
fn without_the_shim_binary_beside_migrate_no_script_runs() {
    let (shell, s) = Scratch::dash("warn", &[("guarded", "echo ran > \"$SCRATCH/ran\"")]);
    // A migrate executable alone in its directory (a hard link keeps
    // /proc/self/exe there; a copy where linking is not possible).
    let lone = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let exe = lone.path().join("migrate");
    std::fs::hard_link(env!("CARGO_BIN_EXE_migrate"), &exe)
        .or_else(|_| std::fs::copy(env!("CARGO_BIN_EXE_migrate"), &exe).map(|_| ()))
        .unwrap();
    let base = s.command(&shell, "ok", "not-found");
    let mut cmd = Command::new(&exe);
    cmd.args(base.get_args());
    for (k, v) in base.get_envs() {
        match v {
            Some(v) => cmd.env(k, v),
            None => cmd.env_remove(k),
        };
    }
    let (code, doc, err) = parse(cmd.output().unwrap());
    assert_ne!(code, 0, "{doc}");
    assert!(doc.to_string().contains("migrate-shim"), "{doc}\n{err}");
    assert!(!s.path().join("ran").exists(), "the script ran unguarded");
    assert!(
        s.entries()
            .iter()
            .all(|e| e["slug"] != "guarded" || e["state"] != "ok"),
        "{:?}",
        s.entries()
    );
}

#[test]
fn calling_a_cluster_command_by_path_is_a_lint_error_and_refused_by_run() {
    let (shell, s) = Scratch::dash("abort", &[("by-path", "/usr/bin/kubectl get ns")]);
    let (code, found) = s.lint_findings(&shell);
    assert_eq!(code, 2);
    assert!(
        found.iter().any(|(rule, _)| rule == "cluster-command-path"),
        "{found:?}"
    );
    let mut cmd = s.command(&shell, "ok", "not-found");
    cmd.env_remove("MIGRATE_TEST_SKIP_PRERUN_SCAN");
    let (code, doc, _) = parse(cmd.output().unwrap());
    assert_eq!(code, 3, "{doc:#}");
    common::assert_first_problem(&doc, "cluster-command-path");
}

#[test]
fn resetting_path_is_a_lint_error_naming_the_line_and_refused_by_run() {
    let shell = shells::dash();
    // Each body's reset is on the script's line 5 (after the 4 header lines).
    for body in [
        "PATH=/usr/bin:/bin kubectl get ns",
        "PATH=/usr/bin:/bin",
        "export PATH=\"/opt/bin:$PATH\"",
        "env -i kubectl get ns",
        "env PATH=/usr/bin kubectl get ns",
        "command -p kubectl get ns",
        "unset PATH",
    ] {
        let s = Scratch::under(&shell, "abort", &[("reset", body)]);
        let (code, found) = s.lint_findings(&shell);
        assert_eq!(code, 2, "{body}: {found:?}");
        assert!(
            found.contains(&("path-reset".to_owned(), 5)),
            "{body}: {found:?}"
        );
        let mut cmd = s.command(&shell, "ok", "not-found");
        cmd.env_remove("MIGRATE_TEST_SKIP_PRERUN_SCAN");
        let (code, doc, _) = parse(cmd.output().unwrap());
        assert_eq!(code, 3, "{body}: {doc:#}");
        assert!(doc.to_string().contains("path-reset"), "{body}: {doc:#}");
        assert!(s.calls().is_empty(), "{body}: ran anyway");
    }
}

#[test]
fn appending_to_path_and_mentioning_path_are_not_lint_findings() {
    let (shell, s) = Scratch::dash(
        "abort",
        &[(
            "append",
            "PATH=\"$PATH:/opt/bin\"\nexport PATH=\"${PATH}:/usr/local/sbin\"\necho 'PATH=/usr/bin env -i'\n# PATH=/usr/bin:/bin\nenv FOO=1 kubectl get ns",
        )],
    );
    let (_, found) = s.lint_findings(&shell);
    assert!(
        found.iter().all(|(rule, _)| rule != "path-reset"),
        "{found:?}"
    );
}

#[test]
fn reports_live_in_a_private_directory_on_dev_shm_which_a_script_cannot_take_from_the_next_one() {
    let shell = shells::dash();
    let s = Scratch::new();
    let note = format!(
        "{TAKE_REPORT}echo \"$r\" > \"$SCRATCH/report-$MIGRATION_SLUG\"\nstat -c %a \"$(dirname \"$r\")\" \"$(dirname \"$(dirname \"$KUBECTL\")\")\" | tr '\\n' ' ' > \"$SCRATCH/mode-$MIGRATION_SLUG\""
    );
    s.scripts(
        &shell,
        "warn",
        &[
            ("remover", &format!("{note}\nrm -rf \"$(dirname \"$r\")\"")),
            ("after", &format!("kubectl get ns\n{note}")),
        ],
    );
    s.runs_ok(&shell);
    let read = |name: &str| s.read(name);
    let shm = Path::new(migrate_runner::tripwire::arm::REPORT_BASE);
    let shm_usable = tempfile::tempdir_in(shm).is_ok();
    for slug in ["remover", "after"] {
        let report = read(&format!("report-{slug}"));
        assert_eq!(
            Path::new(report.trim()).starts_with(shm),
            shm_usable,
            "{slug}: {report}"
        );
        // Both private: the reports' directory and the shim directory.
        assert_eq!(read(&format!("mode-{slug}")).trim(), "700 700", "{slug}");
    }
    // Removing the reports' directory fails the script that did it (its
    // report is gone) and the next script gets the directory back.
    assert_eq!(s.entry("remover")["reason"], "masked-failure");
    assert_eq!(s.entry("after")["state"], "ok", "{}", s.entry("after"));
    let dir = Path::new(read("report-after").trim())
        .parent()
        .unwrap()
        .to_path_buf();
    assert!(
        !dir.exists(),
        "the run removes its reports' directory: {}",
        dir.display()
    );
}

#[test]
fn a_scripts_private_copy_lives_beside_its_report_and_only_while_it_runs() {
    // On a disk file system (the shim directory in TMPDIR) a copy created
    // and removed per script cost an inode allocation that grew with the
    // run: 41 % of the runner's CPU at 10^3 scripts (benches/README.md).
    // `sh -e -c ". 'COPY'" PATH`: the copy is the `-c` argument.
    let s = first_and_second(
        "echo \"$r\" > \"$SCRATCH/report-$MIGRATION_SLUG\"\ntr '\\0' '\\n' < /proc/$$/cmdline > \"$SCRATCH/cmdline-$MIGRATION_SLUG\"\nls \"$(dirname \"$r\")\" > \"$SCRATCH/listing-$MIGRATION_SLUG\"",
    );
    let read = |name: &str| s.read(name);
    for slug in ["first", "second"] {
        let report = read(&format!("report-{slug}"));
        let cmdline = read(&format!("cmdline-{slug}"));
        let copy = cmdline
            .lines()
            .find_map(|l| l.strip_prefix(". '")?.strip_suffix('\''))
            .unwrap_or_else(|| panic!("{slug}: no sourced copy in {cmdline:?}"));
        assert_eq!(
            Path::new(copy).parent(),
            Path::new(report.trim()).parent(),
            "{slug}: the copy {copy} is not beside the report {report}"
        );
    }
    // The first script's copy went when it ended: one copy at a time.
    let listing = read("listing-second");
    assert!(listing.contains("script-second"), "{listing}");
    assert!(!listing.contains("script-first"), "{listing}");
}
