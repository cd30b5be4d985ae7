//! The `status` document: the ledger's entries, failures first, each slug
//! with the last failure of its `on-error=abort` runs when the ledger keeps
//! one.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use migration_core::EntryState;
use migration_core::last_failure::LastFailure;
use migration_core::ledger::{LedgerSnapshot, LegacyVersion, Record};
use serde::Serialize;

use super::{Colour, paint, paint_line, printable, table};

/// One entry in the `status` document.
#[derive(Debug, Clone, Serialize)]
pub struct EntryView {
    /// The slug.
    pub slug: String,
    /// The state.
    pub state: &'static str,
    /// When it was recorded.
    pub at: String,
    /// Real executions.
    pub attempts: u32,
    /// The batch.
    pub batch: Option<String>,
    /// The image it ran from.
    pub image: Option<String>,
    /// The script checksum.
    pub sha256: Option<String>,
    /// Failure reason.
    pub reason: Option<String>,
    /// Failure detail.
    pub message: Option<String>,
    /// The last `on-error=abort` failure, kept until the slug's next
    /// outcome is recorded (absent when there is none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_failure: Option<LastFailureView>,
    /// The repairs of the slug (`migrate repair`), oldest first: who, why,
    /// when, which mark and the entry each replaced (absent when none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub repairs: Option<serde_json::Value>,
}

/// The last failure of an `on-error=abort` migration, as the ledger keeps it
/// (`f.<slug>`): not an outcome, the report of the run that stopped on it.
#[derive(Debug, Clone, Serialize)]
pub struct LastFailureView {
    /// Why it failed (`exit-status-1`, `timeout`, ...).
    pub reason: String,
    /// The end of its output, redacted.
    pub message: String,
    /// When.
    pub at: String,
    /// The image it ran from.
    pub image: Option<String>,
    /// Executions counted when it failed, that one included.
    pub attempts: u32,
}

impl From<&LastFailure> for LastFailureView {
    fn from(f: &LastFailure) -> Self {
        LastFailureView {
            reason: f.reason.clone(),
            message: f.message.clone(),
            at: f.at.to_string(),
            image: f.image.clone(),
            attempts: f.attempts,
        }
    }
}

impl LastFailureView {
    /// One line for a table cell: when, why and the output's last line
    /// (not the redaction note after it).
    pub fn summary(&self) -> String {
        let last = self
            .message
            .lines()
            .rev()
            .find(|l| !l.starts_with("[migrate: "))
            .unwrap_or("");
        if last.is_empty() {
            format!("last failure {}: {}", self.at, self.reason)
        } else {
            format!("last failure {}: {}: {last}", self.at, self.reason)
        }
    }
}

/// A corrupt key in the `status` document.
#[derive(Debug, Serialize)]
pub struct CorruptView {
    /// The key.
    pub key: String,
    /// Why it does not parse.
    pub reason: String,
}

/// The `status` document.
#[derive(Debug, Serialize)]
pub struct StatusView {
    /// The ledger described.
    pub ledger: String,
    /// Whether the ledger object exists.
    pub exists: bool,
    /// The legacy integer, when present and valid.
    pub version: Option<u64>,
    /// The raw `version` value when it is not an integer.
    pub version_corrupt: Option<String>,
    /// Entry counts by state (the `unrecorded` and `corrupt` lists are
    /// counted by their lengths; the text summary adds them).
    pub counts: BTreeMap<&'static str, usize>,
    /// Entries: failures first, then by slug.
    pub entries: Vec<EntryView>,
    /// Slugs attempted but never recorded (state `unrecorded`, the attempt
    /// count only): a run died, or an `on-error=abort` script failed.
    pub unrecorded: Vec<EntryView>,
    /// Keys whose values (or names) do not parse.
    pub corrupt: Vec<CorruptView>,
}

impl StatusView {
    /// Builds the document from a snapshot (`None`: no ledger object).
    pub fn new(snapshot: Option<&LedgerSnapshot>, ledger: &str) -> Self {
        let mut view = StatusView {
            ledger: ledger.to_owned(),
            exists: snapshot.is_some(),
            version: None,
            version_corrupt: None,
            counts: BTreeMap::new(),
            entries: Vec::new(),
            unrecorded: Vec::new(),
            corrupt: Vec::new(),
        };
        let Some(snapshot) = snapshot else {
            return view;
        };
        match &snapshot.version {
            LegacyVersion::Known(v) => view.version = Some(*v),
            LegacyVersion::Corrupt { raw } => view.version_corrupt = Some(raw.clone()),
            LegacyVersion::Absent => {}
        }
        for (slug, record) in &snapshot.records {
            match record {
                Record::Entry(e) => {
                    *view.counts.entry(e.state.as_str()).or_default() += 1;
                    view.entries.push(EntryView {
                        slug: slug.to_string(),
                        state: e.state.as_str(),
                        at: e.at.to_string(),
                        attempts: e.attempts,
                        batch: e.batch.clone(),
                        image: e.image.clone(),
                        sha256: e.sha256.map(|d| d.to_string()),
                        reason: e.reason.clone(),
                        message: e.message.clone(),
                        last_failure: snapshot.failures.get(slug).map(Into::into),
                        repairs: e.extra.get(migration_core::repair::REPAIRS_FIELD).cloned(),
                    });
                }
                Record::Corrupt(c) => view.corrupt.push(CorruptView {
                    key: c.key.clone(),
                    reason: c.reason.clone(),
                }),
            }
        }
        for c in &snapshot.unreadable_keys {
            view.corrupt.push(CorruptView {
                key: c.key.clone(),
                reason: c.reason.clone(),
            });
        }
        // Started but never recorded: the ledger holds only the attempt
        // count, and the last failure when an `on-error=abort` run stopped
        // on it (a blocked one has no attempt count, only the failure).
        let mut unrecorded: BTreeMap<&migration_core::Slug, (u32, Option<&LastFailure>)> =
            BTreeMap::new();
        for (slug, count) in &snapshot.attempts_started {
            unrecorded.entry(slug).or_default().0 = *count;
        }
        for (slug, failure) in &snapshot.failures {
            let row = unrecorded.entry(slug).or_default();
            row.0 = row.0.max(failure.attempts);
            row.1 = Some(failure);
        }
        for (slug, (count, failure)) in unrecorded {
            if snapshot.records.contains_key(slug) {
                continue;
            }
            view.unrecorded.push(EntryView {
                slug: slug.to_string(),
                state: UNRECORDED,
                at: String::new(),
                attempts: count,
                batch: None,
                image: None,
                sha256: None,
                reason: Some("attempted, no outcome recorded".to_owned()),
                message: None,
                last_failure: failure.map(Into::into),
                repairs: None,
            });
        }
        if !view.corrupt.is_empty() {
            view.counts.insert("corrupt", view.corrupt.len());
        }
        // Failures first, then what has not done its work yet: that is
        // what a person opens the status for.
        let rank = |state: &str| match state {
            s if s == EntryState::Failed.as_str() => 0,
            s if s == EntryState::NotYet.as_str() => 1,
            UNRECORDED => 1,
            _ => 2,
        };
        view.entries
            .sort_by(|a, b| (rank(a.state), &a.slug).cmp(&(rank(b.state), &b.slug)));
        view
    }

    /// The entry of `slug`, if the ledger has one (or an attempt count).
    pub fn entry(&self, slug: &str) -> Option<&EntryView> {
        self.entries
            .iter()
            .chain(&self.unrecorded)
            .find(|e| e.slug == slug)
    }

    /// Text for people.
    pub fn text(&self, colour: bool) -> String {
        let mut out = String::new();
        if !self.exists {
            let _ = writeln!(
                out,
                "{}: no ledger (a fresh install will create it)",
                self.ledger
            );
            return out;
        }
        // The summary counts what is not an entry too: it is what to look at.
        let mut all = self.counts.clone();
        for (name, n) in [
            (UNRECORDED, self.unrecorded.len()),
            ("corrupt", self.corrupt.len()),
        ] {
            if n > 0 {
                all.insert(name, n);
            }
        }
        let counts: Vec<String> = all.iter().map(|(s, n)| format!("{n} {s}")).collect();
        let version = match (&self.version, &self.version_corrupt) {
            (Some(v), _) => format!(", legacy version {v}"),
            (None, Some(raw)) => format!(", legacy version CORRUPT ({raw:?})"),
            _ => String::new(),
        };
        let summary = if counts.is_empty() {
            "empty".to_owned()
        } else {
            counts.join(", ")
        };
        let heading = format!("{}: {summary}{version}", self.ledger);
        paint_line(&mut out, &heading, Colour::Bold, colour);
        // Corrupt keys first: each blocks the slug it names.
        for c in &self.corrupt {
            let corrupt = format!("CORRUPT {}: {}", printable(&c.key), printable(&c.reason));
            paint_line(&mut out, &corrupt, Colour::Red, colour);
        }
        let mut rows = Vec::new();
        // The table: failures, then the unrecorded attempts, then the rest.
        let failed = self
            .entries
            .iter()
            .take_while(|e| e.state == EntryState::Failed.as_str());
        let rest = self
            .entries
            .iter()
            .skip_while(|e| e.state == EntryState::Failed.as_str());
        for e in failed.chain(&self.unrecorded).chain(rest) {
            let state = match e.state {
                "failed" | UNRECORDED => paint(e.state, Colour::Red, colour),
                "ok" => paint(e.state, Colour::Green, colour),
                "not-yet" => paint(e.state, Colour::Yellow, colour),
                other => other.to_owned(),
            };
            // The ledger's text is anybody's: escaped (`printable`).
            let reason = match (&e.reason, &e.message, &e.last_failure) {
                (_, _, Some(f)) if e.state == UNRECORDED => f.summary(),
                (Some(r), Some(m), f) => with_failure(
                    format!("{r}: {}", m.lines().last().unwrap_or("")),
                    f.as_ref(),
                ),
                (Some(r), None, f) => with_failure(r.clone(), f.as_ref()),
                (None, _, f) => with_failure(String::new(), f.as_ref()),
            };
            rows.push(vec![
                e.slug.clone(),
                state,
                e.at.clone(),
                e.attempts.to_string(),
                printable(e.batch.as_deref().unwrap_or_default()).into_owned(),
                printable(&reason).into_owned(),
            ]);
        }
        if self.entries.is_empty() && self.unrecorded.is_empty() {
            let _ = writeln!(out, "no entries");
        } else {
            let header = ["SLUG", "STATE", "WHEN", "ATTEMPTS", "BATCH", "REASON"];
            out.push_str(&table(&header, rows));
        }
        out
    }
}

/// `reason` followed by the last failure's summary, when there is one.
fn with_failure(reason: String, failure: Option<&LastFailureView>) -> String {
    match failure {
        Some(f) if reason.is_empty() => f.summary(),
        Some(f) => format!("{reason}; {}", f.summary()),
        None => reason,
    }
}

/// The state shown for a slug the ledger counts attempts of but holds no
/// entry for.
pub const UNRECORDED: &str = "unrecorded";

impl EntryView {
    /// The entry whole, one `key: value` line each, the failure output last
    /// and in full; what the ledger holds is escaped ([`printable`]).
    pub fn text(&self) -> String {
        let mut out = String::new();
        let mut field = |key: &str, value: Option<&str>| {
            if let Some(value) = value.filter(|v| !v.is_empty()) {
                let _ = writeln!(out, "{key:<9} {}", printable(value));
            }
        };
        field("slug:", Some(&self.slug));
        field("state:", Some(self.state));
        field("at:", Some(&self.at));
        field("attempts:", Some(&self.attempts.to_string()));
        field("batch:", self.batch.as_deref());
        field("image:", self.image.as_deref());
        field("sha256:", self.sha256.as_deref());
        field("reason:", self.reason.as_deref());
        if let Some(message) = &self.message {
            let _ = writeln!(out, "output:");
            for line in message.lines() {
                let _ = writeln!(out, "  {}", printable(line));
            }
        }
        if let Some(f) = &self.last_failure {
            let _ = writeln!(out, "last failure:");
            let mut field = |key: &str, value: Option<&str>| {
                if let Some(value) = value.filter(|v| !v.is_empty()) {
                    let _ = writeln!(out, "  {key:<9} {}", printable(value));
                }
            };
            field("at:", Some(&f.at));
            field("reason:", Some(&f.reason));
            field("attempts:", Some(&f.attempts.to_string()));
            field("image:", f.image.as_deref());
            let _ = writeln!(out, "  output:");
            for line in f.message.lines() {
                let _ = writeln!(out, "    {}", printable(line));
            }
        }
        for repair in self
            .repairs
            .iter()
            .flat_map(|r| r.as_array().into_iter().flatten())
        {
            let word = |key: &str| repair[key].as_str().unwrap_or_default().to_owned();
            let was = repair["was"]["state"]
                .as_str()
                .map(str::to_owned)
                .or_else(|| {
                    repair["was"]["corrupt"]
                        .is_object()
                        .then(|| "corrupt".to_owned())
                })
                .unwrap_or_else(|| "no entry".to_owned());
            let _ = writeln!(
                out,
                "repaired: {} {} by {} (was {was}): {}",
                word("at"),
                word("mark"),
                printable(&word("by")),
                printable(&word("why"))
            );
        }
        out
    }
}
