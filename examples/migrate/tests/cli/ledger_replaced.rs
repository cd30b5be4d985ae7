//! `migrate run` on a file ledger that is replaced while the run holds the lock, between two
//! migrations (issue 35): by an editor's save (a new file renamed over it), by `sed -i`, by a
//! restore of an older copy. The second migration's script does it, under dash, busybox ash and
//! bash. The run stops, naming the file and the record of its own that is gone; it never reports
//! success with a record it acknowledged silently missing.

use crate::common;

use common::shells;
use common::tripwire::Scratch;

/// What the second migration does to the ledger file (`$L`; `$SCRATCH/before` is a copy taken
/// by the first migration, while only its attempt mark was recorded).
const REPLACEMENTS: [(&str, &str); 3] = [
    (
        "an editor's save",
        r#"sed '/"m\.m-a"/d' "$L" > "$L.swp" && mv "$L.swp" "$L""#,
    ),
    ("sed -i", r#"sed -i '/"m\.m-a"/d' "$L""#),
    ("a restore of an older copy", r#"cp "$SCRATCH/before" "$L""#),
];

#[test]
fn a_run_whose_ledger_file_is_replaced_between_two_migrations_stops_naming_the_file() {
    for shell in shells::all() {
        for (how, replace) in REPLACEMENTS {
            let s = Scratch::new();
            let ledger = s.ledger_path();
            let l = ledger.display().to_string();
            s.scripts(
                &shell,
                "abort",
                &[
                    ("m-a", &format!("L='{l}'\ncp \"$L\" \"$SCRATCH/before\"")),
                    ("m-b", &format!("L='{l}'\n{replace}")),
                    ("m-c", "echo third >> \"$SCRATCH/third\""),
                ],
            );
            let (code, report, stderr) = s.run(&shell, "ok");
            let context = format!("{} / {how}: exit {code}\n{report}\n{stderr}", shell.name);
            assert_ne!(code, 0, "the run reported success: {context}");
            let said = format!("{report}\n{stderr}");
            assert!(
                said.contains(&l),
                "the run does not name the file: {context}"
            );
            assert!(
                said.contains("no longer the one this run"),
                "the run does not say the file was replaced: {context}"
            );
            assert!(
                said.contains("m.m-a"),
                "the run does not name its record that is gone: {context}"
            );
            assert!(
                !s.path().join("third").exists(),
                "a migration ran after the file was replaced: {context}"
            );
        }
    }
}
