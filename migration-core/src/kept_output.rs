//! A failure's output tail kept out of the ledger object (issue 35, CONTRACT.md §5.2).
//!
//! Redaction is the second line, not the first: whoever may read a ledger would otherwise read
//! every value the redactor does not know. The Kubernetes backends keep the output part of a
//! message in a Secret owned by the ledger (where the platform already guards secrets), and the
//! entry keeps the rest (the runner's own text: the cluster calls a message names, by command,
//! verb and resource) and a [`KeptAt`] naming where the output is. This module decides which
//! part of a message is output and writes and reads the reference; it knows nothing of
//! Kubernetes.

use crate::entry::EntryState;

/// What separates the runner's own text from the script's output in a composed message.
pub const OUTPUT_MARK: &str = "\n--- output ---\n";

/// The reasons whose message, when it holds no [`OUTPUT_MARK`], is the engine's own text and no
/// output (a blocked or waiting migration's `not run: …`, a not-yet's or a masked failure's
/// list of calls, a repair's, the operator's give-up without a Job's log). Every other reason's message is output (an exit status, a
/// signal, a time limit), so a reason this list does
/// not know keeps its message out of the ledger object: an omission errs towards the Secret.
const ENGINE_TEXT_REASONS: [&str; 7] = [
    "masked-failure",
    "retries-exhausted",
    "requirement-unmet",
    "requirement-not-yet",
    "exit-status-75",
    "repair-rerun",
    "repair-done",
];

/// How a reference to a kept tail starts (and how a reader finds one in a message).
const KEPT_PREFIX: &str = "[output tail kept in Secret ";

/// How a message whose tail could not be kept says so.
const NOT_KEPT_PREFIX: &str = "[output tail not kept: ";

/// Where an output tail is kept: the data key `key` of the Secret `namespace/secret`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeptAt {
    /// The Secret's namespace.
    pub namespace: String,
    /// The Secret's name.
    pub secret: String,
    /// The data key: the ledger key of the entry (`m.<slug>`) or last failure (`f.<slug>`).
    pub key: String,
}

impl KeptAt {
    /// The reference as the ledger object stores it, in place of the tail.
    pub fn text(&self) -> String {
        format!(
            "{KEPT_PREFIX}{}/{}, key {}]",
            self.namespace, self.secret, self.key
        )
    }

    /// The reference a stored message ends with, if any.
    pub fn find(message: &str) -> Option<KeptAt> {
        let at = message.rfind(KEPT_PREFIX)?;
        let rest = message[at + KEPT_PREFIX.len()..].strip_suffix(']')?;
        let (object, key) = rest.split_once(", key ")?;
        let (namespace, secret) = object.split_once('/')?;
        let fine = |s: &str| {
            !s.is_empty()
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_'))
        };
        (fine(namespace) && fine(secret) && fine(key)).then(|| KeptAt {
            namespace: namespace.to_owned(),
            secret: secret.to_owned(),
            key: key.to_owned(),
        })
    }
}

/// Whether a stored message names a kept tail (its key must be removed from the Secret when the
/// message is replaced by one that does not).
pub fn names_kept_tail(message: &str) -> bool {
    message.contains(KEPT_PREFIX)
}

/// The output part of `message` (an entry's or a last failure's, with `state` and `reason`), to
/// keep outside the ledger object, and the text that stays in it before the reference: `None`
/// when the message holds no output (an `ok` entry's tolerated calls, the engine's own text, a
/// message already kept).
pub fn output_of<'m>(
    state: Option<EntryState>,
    reason: Option<&str>,
    message: &'m str,
) -> Option<(&'m str, &'m str)> {
    if state == Some(EntryState::Ok) || message.is_empty() {
        return None;
    }
    let (head, tail) = match message.split_once(OUTPUT_MARK) {
        Some(parts) => parts,
        None if reason.is_some_and(|r| ENGINE_TEXT_REASONS.contains(&r)) => return None,
        None => ("", message),
    };
    // A tail that is exactly a reference is one already kept (a record written again): it
    // holds nothing but the reference. Anything else that merely contains one, or a note
    // that a tail was not kept, is output like any other (a script can print those words).
    let is_reference = KeptAt::find(tail).is_some_and(|at| at.text() == tail);
    (!tail.is_empty() && !is_reference).then_some((head, tail))
}

/// The message the ledger object stores: `head`, then the reference (or the note that the tail
/// could not be kept, `not_kept`) in place of the output.
pub fn stored_message(head: &str, kept: Result<&KeptAt, &str>) -> String {
    let reference = match kept {
        Ok(at) => at.text(),
        Err(why) => format!("{NOT_KEPT_PREFIX}{why}]"),
    };
    if head.is_empty() {
        reference
    } else {
        format!("{head}{OUTPUT_MARK}{reference}")
    }
}

/// `message` with its reference replaced by `tail`, as `migrate status` shows it to a reader
/// who may read the Secret.
pub fn with_tail(message: &str, tail: &str) -> String {
    match message.rfind(KEPT_PREFIX) {
        Some(at) => format!("{}{tail}", &message[..at]),
        None => message.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at() -> KeptAt {
        KeptAt {
            namespace: "cozy-system".into(),
            secret: "cozystack-version-output".into(),
            key: "m.add-labels".into(),
        }
    }

    #[test]
    fn a_reference_reads_back_from_the_message_that_stores_it() {
        let stored = stored_message("masked-failure: kubectl get ns: exit 1", Ok(&at()));
        assert_eq!(KeptAt::find(&stored), Some(at()));
        assert_eq!(
            with_tail(&stored, "the tail"),
            format!("masked-failure: kubectl get ns: exit 1{OUTPUT_MARK}the tail")
        );
        assert_eq!(KeptAt::find(&stored_message("", Ok(&at()))), Some(at()));
    }

    #[test]
    fn only_the_output_leaves_the_entry() {
        let failed = Some(EntryState::Failed);
        let composed = format!("masked-failure: kubectl get ns: exit 1{OUTPUT_MARK}token=abc");
        assert_eq!(
            output_of(failed, Some("masked-failure"), &composed),
            Some(("masked-failure: kubectl get ns: exit 1", "token=abc"))
        );
        assert_eq!(
            output_of(failed, Some("exit-status-3"), "token=abc"),
            Some(("", "token=abc"))
        );
        assert_eq!(
            output_of(failed, Some("some-reason-of-a-later-engine"), "x"),
            Some(("", "x"))
        );
        assert_eq!(
            output_of(failed, Some("requirement-unmet"), "not run: a failed"),
            None
        );
        assert_eq!(
            output_of(
                Some(EntryState::Ok),
                None,
                "1 tolerated cluster-command failure"
            ),
            None
        );
        let give_up = "2 job(s) failed; last: job migrate-x-2: BackoffLimitExceeded";
        assert_eq!(output_of(failed, Some("retries-exhausted"), give_up), None);
        let with_log = format!("{give_up}{OUTPUT_MARK}the log");
        assert_eq!(
            output_of(failed, Some("retries-exhausted"), &with_log),
            Some((give_up, "the log"))
        );
        let kept = stored_message("", Ok(&at()));
        assert_eq!(output_of(failed, Some("exit-status-3"), &kept), None);
        // Output that only looks like a reference or a note is still output.
        let printed = format!("{}\npassword is hunter2", at().text());
        assert_eq!(
            output_of(failed, Some("exit-status-3"), &printed),
            Some(("", printed.as_str()))
        );
        let note = format!("{} hunter2", stored_message("", Err("x")));
        assert_eq!(
            output_of(failed, Some("exit-status-3"), &note),
            Some(("", note.as_str()))
        );
    }
}
