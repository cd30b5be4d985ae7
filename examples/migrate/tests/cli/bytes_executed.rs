//! The bytes a run executes are the bytes its pre-run scan read and hashed,
//! and the entry records their checksum: a script edited on disk after the
//! scan (here by the migration before it) runs as it was scanned, under
//! dash, busybox ash and bash, and still finds its `lib/` helpers through
//! `$0` as the authoring guide allows.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use common::tripwire::Scratch;

#[test]
fn a_script_edited_after_the_scan_runs_the_scanned_bytes_and_records_their_checksum() {
    for shell in common::shells::all() {
        let world = Scratch::new();
        world.lib("helper.sh", "helper() { echo HELPER-SOURCED; }\n");
        world.scripts(
            &shell,
            "abort",
            &[
                (
                    "a-edits",
                    "printf 'echo EDITED-AFTER-THE-SCAN\\n' >> pre-apply/b-runs",
                ),
                (
                    "b-runs",
                    ". \"$(dirname \"$0\")/../lib/helper.sh\"\nhelper\necho \"ran as $0\"",
                ),
            ],
        );
        let script = world.tree().join("pre-apply/b-runs");
        let scanned = std::fs::read(&script).unwrap();
        let (code, doc, stderr) = world.run(&shell, "ok");
        assert_eq!(code, 0, "{}: {doc}\n{stderr}", shell.name);
        let edited = std::fs::read(&script).unwrap();
        assert_ne!(
            edited, scanned,
            "{}: the first script edited the second",
            shell.name
        );
        assert!(
            !stderr.contains("EDITED-AFTER-THE-SCAN"),
            "{}: the bytes written after the scan ran:\n{stderr}",
            shell.name
        );
        assert!(
            stderr.contains("HELPER-SOURCED"),
            "{}: {stderr}",
            shell.name
        );
        assert!(
            stderr.contains(&format!("ran as {}", script.display())),
            "{}: $0 names the script in the tree:\n{stderr}",
            shell.name
        );
        let entry = world.entry("b-runs");
        assert_eq!(entry["state"], "ok", "{}: {entry}", shell.name);
        assert_eq!(
            entry["sha256"],
            migration_core::Sha256Digest::of(&scanned).to_string(),
            "{}: the entry records the checksum of the bytes that ran",
            shell.name
        );
    }
}
