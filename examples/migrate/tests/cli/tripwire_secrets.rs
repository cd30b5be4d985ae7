//! Secrets never reach the ledger through the tripwire or a failure's tail
//! (issue 27, "Secrets reach the ledger"): a cluster call is recorded by
//! its command, verb and resource, never its argument values (the `ok`
//! entry of a tolerated call, a `masked-failure` message, the run report),
//! and the values of a Secret printed by a failing script are redacted even
//! when its `data:` line scrolled out of the kept tail.
//!
//! Built only with the `failpoints` feature, as `tripwire.rs` is: a masked
//! failure is proven at run time with the pre-run scan switched off.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use common::parse;
use common::shells;
use common::tripwire::Scratch;

/// A value no redactor could recognise as secret (its key is `dsn`): only
/// leaving argument values out keeps it out of the ledger.
const PASSWORD: &str = "postgres-app-hunter2-not-for-the-ledger";

#[test]
fn a_tolerated_call_is_recorded_by_command_verb_and_resource_without_its_argument_values() {
    let (shell, s) = Scratch::dash(
        "abort",
        &[(
            "tolerated",
            &format!(
                "migrate-tolerate --already-exists -- kubectl create secret generic db --from-literal=dsn={PASSWORD}"
            ),
        )],
    );
    let (code, doc, err) = parse(
        s.command(&shell, "fail", "already-exists")
            .output()
            .unwrap(),
    );
    assert_eq!(code, 0, "{err}");
    let entry = s.entry("tolerated");
    assert_eq!(entry["state"], "ok", "{entry}");
    let message = entry["message"].as_str().unwrap();
    assert!(
        message.starts_with("1 tolerated cluster-command failure: kubectl create secret"),
        "{message}"
    );
    assert!(!message.contains(PASSWORD), "{message}");
    assert!(!doc.to_string().contains(PASSWORD), "run report: {doc}");
    assert!(
        s.calls().iter().any(|c| c.contains(PASSWORD)),
        "the real command still got its arguments: {:?}",
        s.calls()
    );
}

#[test]
fn a_masked_failure_names_the_call_without_its_argument_values_under_every_shell() {
    for shell in shells::all() {
        let s = Scratch::under(
            &shell,
            "warn",
            &[(
                "masked",
                &format!(
                    "kubectl create secret generic db --from-literal=dsn={PASSWORD} -n tenant-x || true"
                ),
            )],
        );
        let (code, doc, err) = s.run(&shell, "fail");
        assert_eq!(code, 0, "{}: {err}", shell.name);
        let entry = s.assert_masked("masked", "kubectl create secret");
        assert!(
            !entry.to_string().contains(PASSWORD),
            "{}: {entry}",
            shell.name
        );
        assert!(!doc.to_string().contains(PASSWORD), "{}: {doc}", shell.name);
    }
}

#[test]
fn a_secrets_values_are_redacted_when_its_data_line_is_outside_the_kept_tail() {
    // 200 data lines of about 30 bytes: the 4 KiB tail keeps the last ones,
    // not the `data:` line that says they are secret values.
    let (shell, s) = Scratch::dash(
        "warn",
        &[(
            "prints-a-secret",
            "echo 'apiVersion: v1'\necho 'kind: Secret'\necho 'data:'\ni=0\nwhile [ $i -lt 200 ]; do echo \"  key$i: c2VjcmV0dmFsdWUxMjM0\"; i=$((i+1)); done\necho 'metadata:'\necho '  name: db'\nexit 3",
        )],
    );
    s.runs_ok(&shell);
    let entry = s.entry("prints-a-secret");
    assert_eq!(entry["reason"], "exit-status-3", "{entry}");
    let message = entry["message"].as_str().unwrap();
    assert!(message.contains("  key199: [redacted]"), "{message}");
    assert!(!message.contains("c2VjcmV0dmFsdWUxMjM0"), "{message}");
    assert!(
        message.contains("secret-shaped value(s) redacted"),
        "{message}"
    );
}
