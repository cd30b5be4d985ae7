//! The background operator's give-up record (CONTRACT.md §7.5): the `failed`
//! entry written when a background migration's Jobs have failed as many
//! times as the retry limit allows.
//!
//! The operator decides *when* to give up; what the entry says is policy,
//! and lives here so that every engine records a give-up the same way: what
//! ran (the failed Job's image, not the index's image of the moment, which
//! may have changed while the last attempt ran), the batch, the attempts,
//! and why the last attempt failed with the end of its output.

use crate::run::{DEFAULT_MESSAGE_LIMIT_BYTES, recorded_message};
use crate::{EntryState, LedgerEntry, Timestamp};

/// The reason of a give-up entry.
pub const RETRIES_EXHAUSTED: &str = "retries-exhausted";

/// One failed attempt of a background migration: a Job and how it ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailedAttempt {
    /// The Job's name.
    pub job: String,
    /// The image the Job ran (its container's), when known.
    pub image: Option<String>,
    /// Why it failed, as the Job controller or the operator says it
    /// ("Job has reached the specified backoff limit", a deadline, a Job
    /// that succeeded without recording anything).
    pub reason: String,
    /// The end of the attempt's output (the container's termination
    /// message), when it was available.
    pub output_tail: Option<String>,
}

/// What a give-up records: every failure counted, and the last one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GiveUp {
    /// Failed attempts counted against the retry limit.
    pub failures: u32,
    /// The slug's attempt mark (`a.<slug>`), when the ledger has one: the
    /// executions the runner counted, which a Job that failed before its
    /// script started does not add to.
    pub attempts_marked: Option<u32>,
    /// The manifest batch that placed the slug, when the index names it.
    pub batch: Option<String>,
    /// The last failed attempt.
    pub last: FailedAttempt,
}

/// The `failed` entry of a give-up at `now`: reason `retries-exhausted`, the
/// last attempt's image and the batch, `attempts` from the attempt mark
/// (else the failure count), and as message `<n> job(s) failed; last: job
/// <name>: <reason>`, `--- output ---` and the last attempt's output tail, redacted and
/// cut (from its start) to the same 4096 bytes as a runner's failure
/// message.
pub fn give_up_entry(give_up: &GiveUp, now: Timestamp) -> LedgerEntry {
    let last = &give_up.last;
    let head = format!(
        "{} job(s) failed; last: job {}: {}",
        give_up.failures, last.job, last.reason
    );
    let message = match last.output_tail.as_deref().map(str::trim_end) {
        Some(tail) if !tail.is_empty() => {
            // The head explains which attempt; the tail's end explains why.
            // Both fit: the tail gives up its start first.
            // The runner's separator: a Kubernetes ledger keeps the head in the entry and the
            // output in its Secret (CONTRACT.md §5.2).
            let mark = crate::kept_output::OUTPUT_MARK;
            let room = DEFAULT_MESSAGE_LIMIT_BYTES.saturating_sub(head.len() + mark.len());
            format!("{head}{mark}{}", recorded_message(tail, room))
        }
        _ => recorded_message(&head, DEFAULT_MESSAGE_LIMIT_BYTES),
    };
    LedgerEntry {
        reason: Some(RETRIES_EXHAUSTED.into()),
        message: Some(message),
        image: last.image.clone(),
        batch: give_up.batch.clone(),
        attempts: give_up.attempts_marked.unwrap_or(give_up.failures),
        ..LedgerEntry::new(EntryState::Failed, now.truncated())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn give_up(tail: Option<&str>) -> GiveUp {
        GiveUp {
            failures: 3,
            attempts_marked: Some(2),
            batch: Some("00003-v1.8.0".into()),
            last: FailedAttempt {
                job: "migrate-bg-3".into(),
                image: Some("img@sha256:old".into()),
                reason: "Job has reached the specified backoff limit".into(),
                output_tail: tail.map(str::to_owned),
            },
        }
    }

    #[test]
    fn a_give_up_records_what_the_last_job_ran_its_batch_and_its_output_tail() {
        let at = Timestamp::from_unix(1_786_529_040);
        let entry = give_up_entry(&give_up(Some("step 1\nkubectl: boom\n")), at);
        assert_eq!(entry.state, EntryState::Failed);
        assert_eq!(entry.reason.as_deref(), Some(RETRIES_EXHAUSTED));
        assert_eq!(entry.image.as_deref(), Some("img@sha256:old"));
        assert_eq!(entry.batch.as_deref(), Some("00003-v1.8.0"));
        assert_eq!(entry.attempts, 2, "the attempt mark counts executions");
        assert_eq!(
            entry.message.as_deref(),
            Some(
                "3 job(s) failed; last: job migrate-bg-3: Job has reached the specified backoff limit\n--- output ---\nstep 1\nkubectl: boom"
            )
        );
        assert_eq!(entry.at, at);
        // The entry is one the ledger accepts (a failed entry needs a reason and a message).
        assert_eq!(LedgerEntry::decode("m.bg", &entry.encode()), Ok(entry));
    }

    #[test]
    fn a_give_up_without_an_attempt_mark_or_output_counts_the_failures_and_says_why() {
        let mut g = give_up(None);
        g.attempts_marked = None;
        let entry = give_up_entry(&g, Timestamp::from_unix(0));
        assert_eq!(entry.attempts, 3);
        assert_eq!(
            entry.message.as_deref(),
            Some(
                "3 job(s) failed; last: job migrate-bg-3: Job has reached the specified backoff limit"
            )
        );
    }

    #[test]
    fn a_long_or_secret_bearing_tail_is_redacted_and_cut_from_its_start() {
        let tail = format!("{}\npassword=hunter2\nthe end", "x".repeat(10_000));
        let entry = give_up_entry(&give_up(Some(&tail)), Timestamp::from_unix(0));
        let message = entry.message.unwrap();
        assert!(
            message.len() <= DEFAULT_MESSAGE_LIMIT_BYTES,
            "{}",
            message.len()
        );
        assert!(message.starts_with("3 job(s) failed; last: job migrate-bg-3"));
        assert!(!message.contains("hunter2"), "{message}");
        assert!(message.contains("the end"), "{message}");
    }
}
