//! Counts and the `Ready` condition over a ledger's entries, and the condition
//! convention (a transition time that moves only when the status changes).

use migration_core::entry::Contexts;
use migration_core::{EntryState, LedgerEntry, Slug, Timestamp, keys};
use serde_json::{Value, json};

/// How many slugs a condition message names before it says "and N more".
const NAMED_IN_MESSAGE: usize = 20;

/// Counts and the Ready condition over a full entry map.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Tally {
    pub(crate) ok: usize,
    pub(crate) failed: Vec<String>,
    pub(crate) other: usize,
    pub(crate) corrupt: Vec<String>,
    pub(crate) newest: Option<Timestamp>,
}

impl Tally {
    /// Counts `entries`, resolving compact ones in `contexts`.
    pub(crate) fn of<'v>(
        entries: impl IntoIterator<Item = (&'v String, &'v Value)>,
        contexts: &Contexts,
    ) -> Self {
        let mut tally = Tally::default();
        for (key, value) in entries {
            let ledger_key = keys::entry_key(key);
            let parsed = Slug::parse(key).ok().and_then(|_| {
                LedgerEntry::from_value_in(&ledger_key, value.clone(), contexts).ok()
            });
            let Some(entry) = parsed else {
                tally.corrupt.push(ledger_key);
                continue;
            };
            match entry.state {
                EntryState::Ok => tally.ok += 1,
                EntryState::Failed => tally.failed.push(key.clone()),
                EntryState::Legacy
                | EntryState::Revoked
                | EntryState::SkippedFreshInstall
                | EntryState::NotYet => {
                    tally.other += 1;
                }
            }
            tally.newest = tally.newest.max(Some(entry.at));
        }
        tally.failed.sort();
        tally.corrupt.sort();
        tally
    }

    pub(crate) fn summary(&self) -> Value {
        let mut summary = json!({
            "ok": self.ok,
            "failed": self.failed.len(),
            "other": self.other,
            "corrupt": self.corrupt.len(),
        });
        if let Some(newest) = self.newest {
            summary["newest"] = Value::String(newest.to_string());
        }
        summary
    }

    /// `Ready` without its timestamps: True when no entry is failed or
    /// corrupt. A corrupt entry outranks a failure as the reason, because the
    /// engine refuses to act at all while one is on its path (a key that is
    /// not a slug blocks nothing, but somebody wrote it by hand and should
    /// look).
    pub(crate) fn ready(&self) -> (bool, &'static str, String) {
        let total = self.ok + self.failed.len() + self.other + self.corrupt.len();
        let failed = (!self.failed.is_empty()).then(|| {
            format!(
                "{} failed: {}",
                plural(self.failed.len(), "migration"),
                named(&self.failed)
            )
        });
        if !self.corrupt.is_empty() {
            let mut message = format!(
                "{} corrupt: {}",
                plural(self.corrupt.len(), "entry"),
                named(&self.corrupt)
            );
            if let Some(failed) = failed {
                message.push_str("; ");
                message.push_str(&failed);
            }
            return (false, "CorruptEntries", message);
        }
        match failed {
            Some(message) => (false, "MigrationsFailed", message),
            None => (
                true,
                "NoFailures",
                format!("{}, none failed", plural(total, "entry")),
            ),
        }
    }
}

fn plural(n: usize, noun: &str) -> String {
    match (n, noun) {
        (1, _) => format!("1 {noun}"),
        (_, "entry") => format!("{n} entries"),
        _ => format!("{n} {noun}s"),
    }
}

fn named(items: &[String]) -> String {
    let shown = items
        .iter()
        .take(NAMED_IN_MESSAGE)
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join(", ");
    match items.len().saturating_sub(NAMED_IN_MESSAGE) {
        0 => shown,
        more => format!("{shown} and {more} more"),
    }
}

/// metav1.Time precision.
fn condition_time(now: Timestamp) -> Value {
    Value::String(now.truncated().to_string())
}

/// Sets `new` (which has no `lastTransitionTime`) in `conditions`, by type.
/// The transition time moves only when the status changes, as the
/// Kubernetes condition convention says.
pub(super) fn upsert_condition(conditions: &mut Vec<Value>, mut new: Value, now: Timestamp) {
    let kind = new.get("type").cloned();
    let existing = conditions
        .iter()
        .position(|c| c.get("type").is_some() && c.get("type") == kind.as_ref());
    let kept_time = existing
        .and_then(|i| conditions.get(i))
        .filter(|old| old.get("status") == new.get("status"))
        .and_then(|old| old.get("lastTransitionTime"))
        .filter(|t| t.is_string())
        .cloned();
    new["lastTransitionTime"] = kept_time.unwrap_or_else(|| condition_time(now));
    match existing {
        Some(i) => conditions[i] = new,
        None => conditions.push(new),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::test_entry as entry;

    /// The tally of the entries map `entries`, without contexts.
    fn tally_of(entries: Value) -> Tally {
        Tally::of(entries.as_object().unwrap(), &Contexts::default())
    }

    #[test]
    fn the_tally_counts_by_outcome_and_names_failed_and_corrupt_keys() {
        let entries = json!({
            "b": entry("failed", "2026-01-02T00:00:00Z"),
            "a": entry("failed", "2026-01-01T00:00:00Z"),
            "c": entry("ok", "2026-01-03T00:00:00Z"),
            "d": entry("legacy", "2025-01-01T00:00:00Z"),
            "e": "garbage",
            "Not_Slug": entry("ok", "2027-01-01T00:00:00Z"),
        });
        let tally = tally_of(entries);
        assert_eq!(tally.ok, 1);
        assert_eq!(tally.failed, ["a", "b"]);
        assert_eq!(tally.other, 1);
        assert_eq!(tally.corrupt, ["m.Not_Slug", "m.e"]);
        assert_eq!(
            tally.summary()["newest"],
            "2026-01-03T00:00:00Z",
            "corrupt entries and non-slug keys have no trustworthy time"
        );
        let (ready, reason, message) = tally.ready();
        assert!(!ready);
        assert_eq!(reason, "CorruptEntries");
        assert_eq!(
            message,
            "2 entries corrupt: m.Not_Slug, m.e; 2 migrations failed: a, b"
        );
    }

    #[test]
    fn ready_is_true_only_without_failures_or_corruption() {
        let empty = Tally::default();
        assert_eq!(
            empty.ready(),
            (true, "NoFailures", "0 entries, none failed".into())
        );
        assert_eq!(
            empty.summary(),
            json!({"ok": 0, "failed": 0, "other": 0, "corrupt": 0})
        );
        let one = tally_of(json!({"a": entry("ok", "2026-01-01T00:00:00Z")}));
        assert_eq!(
            one.ready(),
            (true, "NoFailures", "1 entry, none failed".into())
        );
        let failed = tally_of(json!({"a": entry("failed", "2026-01-01T00:00:00Z")}));
        assert_eq!(
            failed.ready(),
            (false, "MigrationsFailed", "1 migration failed: a".into())
        );
    }

    #[test]
    fn a_condition_keeps_its_transition_time_while_its_status_holds() {
        let mut conditions = vec![json!({"type": "Other", "status": "True"})];
        let t0 = Timestamp::from_unix(100);
        let t1 = Timestamp::from_unix(200);
        upsert_condition(
            &mut conditions,
            json!({"type": "Ready", "status": "True", "reason": "A"}),
            t0,
        );
        upsert_condition(
            &mut conditions,
            json!({"type": "Ready", "status": "True", "reason": "B"}),
            t1,
        );
        assert_eq!(conditions.len(), 2);
        assert_eq!(conditions[1]["reason"], "B");
        assert_eq!(conditions[1]["lastTransitionTime"], t0.to_string());
        upsert_condition(
            &mut conditions,
            json!({"type": "Ready", "status": "False", "reason": "C"}),
            t1,
        );
        assert_eq!(conditions[1]["lastTransitionTime"], t1.to_string());
        assert_eq!(
            conditions[0],
            json!({"type": "Other", "status": "True"}),
            "others untouched"
        );
    }
}
