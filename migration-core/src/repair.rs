//! `migrate repair`: an operator's mark on one slug (Flyway's `repair`,
//! golang-migrate's `force`), written through the [`crate::Ledger`] trait so
//! it works on every backend.
//!
//! Two marks: **run again** (the entry becomes `not-yet`, which the next run
//! executes: a `failed` entry the background tier gave up on, an `ok` one
//! whose effect was lost, a corrupt value) and **done by hand** (the entry
//! becomes `ok`, carrying the script's checksum, for a migration an
//! operator carried out themselves).
//!
//! Revocation's rule holds: what happened is never rewritten. The new entry
//! keeps, under the unknown-to-older-engines field `repairs`, every earlier
//! repair and this one: who, why, when, which mark, and the entry it
//! replaced (or the corrupt value's reason and excerpt). Unknown fields
//! survive every later write of the slug ([`LedgerEntry::extra`]), so the
//! history outlives the re-run the mark asks for. What would lose data is
//! refused: a corrupt value longer than its excerpt (the rest would be
//! gone), a mark that changes nothing, a revoked slug (its revocation is
//! the tree's `revoked` file, not the ledger's).

use serde_json::{Map, Value};

use crate::entry::CorruptEntry;
use crate::{EntryState, LedgerEntry, Sha256Digest, Slug, Timestamp};

/// The `extra` field holding a slug's repair history.
pub const REPAIRS_FIELD: &str = "repairs";

/// The mark an operator puts on a slug.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Mark {
    /// Run it again: the entry becomes `not-yet`.
    Rerun,
    /// Record it as done by hand: the entry becomes `ok`.
    Done,
}

impl Mark {
    /// The spelling in the history and in messages.
    pub const fn as_str(self) -> &'static str {
        match self {
            Mark::Rerun => "rerun",
            Mark::Done => "done",
        }
    }
}

/// One repair, as asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repair {
    /// The mark.
    pub mark: Mark,
    /// Who asks (a person or a ticket), never empty.
    pub by: String,
    /// Why, never empty.
    pub why: String,
    /// When.
    pub at: Timestamp,
    /// The checksum of the slug's script in the tree, recorded on a
    /// `done` entry as a run would.
    pub sha256: Option<Sha256Digest>,
}

/// What the ledger holds for the slug.
#[derive(Debug, Clone, Copy)]
pub enum Previous<'a> {
    /// No entry.
    Absent,
    /// A valid entry.
    Entry(&'a LedgerEntry),
    /// A value that does not parse.
    Corrupt(&'a CorruptEntry),
}

/// Why a repair is refused; nothing is written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RepairRefusal {
    /// `by` or `why` is empty: a repair says who and why.
    #[error("{slug}: a repair says who and why (--by and --reason, neither empty)")]
    Unexplained {
        /// The slug.
        slug: String,
    },
    /// Run-again on a slug with no entry: it is pending already.
    #[error(
        "{slug}: nothing to run again: the ledger has no entry for it, so the next run executes it already"
    )]
    NothingToRerun {
        /// The slug.
        slug: String,
    },
    /// Run-again on a `not-yet` entry: the next run executes it already.
    #[error("{slug}: nothing to run again: it is recorded not-yet, which the next run executes")]
    AlreadyPending {
        /// The slug.
        slug: String,
    },
    /// Done on an entry whose effect is recorded in place already.
    #[error("{slug}: already recorded {state}: marking it done would change nothing")]
    AlreadyDone {
        /// The slug.
        slug: String,
        /// Its state.
        state: &'static str,
    },
    /// A revoked slug: revocation is the tree's `revoked` file.
    #[error(
        "{slug}: recorded revoked: it never runs, by the tree's revoked file; remove it from there (and release) instead of repairing the ledger"
    )]
    Revoked {
        /// The slug.
        slug: String,
    },
    /// A corrupt value longer than the excerpt the engine keeps: replacing
    /// it would lose the rest.
    #[error(
        "{key}: the corrupt value is longer than the {kept} characters a repair can keep in the history; save it first (kubectl get ... -o yaml, or a copy of the file) and remove the key by hand, then repair"
    )]
    CorruptTooLong {
        /// The ledger key.
        key: String,
        /// The excerpt's length in characters.
        kept: usize,
    },
}

/// The longest excerpt [`CorruptEntry::new`] keeps: a value this long may
/// have been cut.
const EXCERPT_CHARS: usize = 120;

/// The entry that records `repair` of `slug` over `previous`, or why not.
pub fn repaired_entry(
    slug: &Slug,
    previous: Previous<'_>,
    repair: &Repair,
) -> Result<LedgerEntry, RepairRefusal> {
    let slug_text = || slug.as_str().to_owned();
    if repair.by.trim().is_empty() || repair.why.trim().is_empty() {
        return Err(RepairRefusal::Unexplained { slug: slug_text() });
    }
    match (repair.mark, previous) {
        (_, Previous::Entry(e)) if e.state == EntryState::Revoked => {
            return Err(RepairRefusal::Revoked { slug: slug_text() });
        }
        (Mark::Rerun, Previous::Absent) => {
            return Err(RepairRefusal::NothingToRerun { slug: slug_text() });
        }
        (Mark::Rerun, Previous::Entry(e)) if e.state == EntryState::NotYet => {
            return Err(RepairRefusal::AlreadyPending { slug: slug_text() });
        }
        (Mark::Done, Previous::Entry(e)) if e.state.satisfies_requirement() => {
            return Err(RepairRefusal::AlreadyDone {
                slug: slug_text(),
                state: e.state.as_str(),
            });
        }
        (_, Previous::Corrupt(c)) if c.excerpt.chars().count() >= EXCERPT_CHARS => {
            return Err(RepairRefusal::CorruptTooLong {
                key: c.key.clone(),
                kept: EXCERPT_CHARS,
            });
        }
        _ => {}
    }
    // The history so far, and the entry (or value) this one replaces.
    let (mut extra, mut repairs, was, attempts) = match previous {
        Previous::Absent => (Map::new(), Vec::new(), Value::Null, 0),
        Previous::Entry(e) => {
            let mut extra = e.extra.clone().into_map();
            let repairs = match extra.remove(REPAIRS_FIELD) {
                Some(Value::Array(list)) => list,
                Some(other) => vec![other],
                None => Vec::new(),
            };
            let was = serde_json::from_str(&e.encode()).unwrap_or(Value::Null);
            (extra, repairs, was, e.attempts)
        }
        Previous::Corrupt(c) => (
            Map::new(),
            Vec::new(),
            serde_json::json!({"corrupt": {"key": c.key, "reason": c.reason, "value": c.excerpt}}),
            0,
        ),
    };
    repairs.push(serde_json::json!({
        "mark": repair.mark.as_str(),
        "by": repair.by,
        "why": repair.why,
        "at": repair.at.to_string(),
        "was": was,
    }));
    extra.insert(REPAIRS_FIELD.to_owned(), Value::Array(repairs));
    let message = format!(
        "marked {} by {}: {}",
        match repair.mark {
            Mark::Rerun => "to run again",
            Mark::Done => "done by hand",
        },
        repair.by,
        repair.why
    );
    let kept = |e: &LedgerEntry| (e.batch.clone(), e.image.clone(), e.lib_sha256);
    let (batch, image, lib_sha256) = match previous {
        Previous::Entry(e) => kept(e),
        _ => (None, None, None),
    };
    let entry = LedgerEntry {
        batch,
        image,
        lib_sha256,
        attempts,
        message: Some(message),
        extra: crate::entry::Extra::from(extra),
        ..LedgerEntry::new(
            match repair.mark {
                Mark::Rerun => EntryState::NotYet,
                Mark::Done => EntryState::Ok,
            },
            repair.at.truncated(),
        )
    };
    Ok(match repair.mark {
        Mark::Rerun => LedgerEntry {
            reason: Some("repair-rerun".into()),
            sha256: match previous {
                Previous::Entry(e) => e.sha256,
                _ => None,
            },
            ..entry
        },
        Mark::Done => LedgerEntry {
            reason: Some("repair-done".into()),
            sha256: repair.sha256,
            ..entry
        },
    })
}

/// The known slug `word` was probably meant to be (the near-miss rule of
/// the headers' and `requires=`'s "did you mean"), for a command that names
/// a slug to repair or show.
pub fn nearest<'c>(word: &str, known: impl IntoIterator<Item = &'c str>) -> Option<&'c str> {
    crate::header::near_miss::closest(word, known)
}
