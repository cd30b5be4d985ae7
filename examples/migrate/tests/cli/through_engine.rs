//! `examples/migrate/scripts/through-engine.sh`: a platform's own tests of its numbered scripts,
//! pointed at the wrappers it writes, run the converted content through `migrate run`; the
//! numbered runner's version stamp happens only when the engine recorded the migration `ok`.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::{self, Repo, shells};

/// The script under test.
fn through_engine() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/through-engine.sh")
}

/// A released tree of two converted slots (1 and 2, whose content is `2-label`), a fake
/// `kubectl` that logs each call and answers `FAIL=forbidden` with kubectl's Forbidden text.
fn platform() -> (Repo, PathBuf) {
    let repo = Repo::new();
    repo.add("pre-apply", "1", "echo one");
    repo.add_requiring(
        "pre-apply",
        "2-label",
        &["1"],
        "kubectl label namespace tenant-a team=a --overwrite\necho labelled",
    );
    repo.write("legacy-map", "1 1\n2 2-label\n");
    repo.release("v1.0.0");
    let (code, _, err) = repo.manifest();
    assert_eq!(code, 0, "{err}");
    let bin = repo.path().join("fake");
    std::fs::create_dir_all(&bin).unwrap();
    let kubectl = bin.join("kubectl");
    std::fs::write(
        &kubectl,
        "#!/bin/sh\necho \"$*\" >>\"$CALLS\"\n\
         if [ \"${FAIL:-}\" = forbidden ]; then\n\
         echo 'Error from server (Forbidden): namespaces \"tenant-a\" is forbidden: User \"x\" cannot patch resource \"namespaces\"' >&2\n\
         exit 1\nfi\necho 'namespace/tenant-a labeled'\n",
    )
    .unwrap();
    std::fs::set_permissions(
        &kubectl,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    (repo, bin)
}

/// `shell through-engine.sh ... args`: (exit code, stderr).
fn write_wrappers(shell: &shells::Shell, tree: &Path, out: &Path, args: &[&str]) -> (i32, String) {
    let mut words = shell.shebang.split_whitespace();
    let output = Command::new(words.next().unwrap())
        .args(words)
        .arg(through_engine())
        .args(["--migrate", env!("CARGO_BIN_EXE_migrate")])
        .args([
            "--tree",
            tree.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ])
        .args(["--stamp", "echo \"stamped $1 of slot $2\" >>\"$STAMPS\""])
        .args(args)
        .output()
        .unwrap();
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// Runs the wrapper of `slot` as the platform's test would, with the fake cluster first on
/// `PATH`: (exit code, cluster calls, stamps).
fn run_slot(repo: &Repo, bin: &Path, out: &Path, slot: &str, fail: &str) -> (i32, String, String) {
    let (calls, stamps) = (repo.path().join("calls"), repo.path().join("stamps"));
    for f in [&calls, &stamps] {
        std::fs::write(f, "").unwrap();
    }
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    let status = Command::new(out.join(slot))
        .env("PATH", path)
        .env("CALLS", &calls)
        .env("STAMPS", &stamps)
        .env("FAIL", fail)
        .env("MIGRATE_LOG", "error")
        .output()
        .unwrap();
    let read = |p: &Path| std::fs::read_to_string(p).unwrap();
    (
        status.status.code().unwrap_or(-1),
        read(&calls),
        read(&stamps),
    )
}

#[test]
fn a_platform_test_sees_the_engine_run_its_slot_and_the_stamp_only_after_an_ok_record() {
    for shell in shells::all() {
        let (repo, bin) = platform();
        let out = repo.path().join("wrappers");
        let (code, err) = write_wrappers(&shell, &repo.tree(), &out, &["2"]);
        assert_eq!(code, 0, "{}: {err}", shell.name);

        // Either way the slot makes its one cluster call; a failed call fails the slot.
        for (fail, ok, stamped, why) in [
            (
                "",
                true,
                "stamped 2-label of slot 2\n",
                "the engine recorded it ok",
            ),
            (
                "forbidden",
                false,
                "",
                "a failed migration is never stamped",
            ),
        ] {
            let (code, calls, stamps) = run_slot(&repo, &bin, &out, "2", fail);
            assert_eq!(code == 0, ok, "{}: exit {code}: {calls}", shell.name);
            let label = "label namespace tenant-a team=a --overwrite\n";
            assert_eq!(calls, label, "{}", shell.name);
            assert_eq!(stamps, stamped, "{}: {why}", shell.name);
        }
    }
}

#[test]
fn a_slot_the_tree_does_not_know_is_refused_naming_it_and_nothing_is_written() {
    let (repo, _) = platform();
    let out = repo.path().join("wrappers");
    let (code, err) = write_wrappers(&shells::all()[0], &repo.tree(), &out, &["9"]);
    assert_eq!(code, 2, "{err}");
    common::assert_contains_all(&err, &["slot 9", "legacy-map"]);
    assert!(!out.join("9").exists());
}
