//! One combined write of a run: the outcomes recorded since the last write,
//! the attempt mark of the execution about to start, and what happens to
//! the run lock kept in the ledger object, all sent as one conditional
//! write ([`crate::Ledger::write_step`]).
//!
//! Why: a run of K migrations used to write twice per migration (the
//! attempt mark before the script, the record after it). The record of one
//! migration and the attempt mark of the next need no durable point between
//! them, so they travel together; the run lock, which lives in the same
//! object, rides on the first and the last of those writes (CONTRACT.md
//! §5.5, §7.2).

use std::time::Duration;

use crate::entry::LedgerEntry;
use crate::last_failure::LastFailure;
use crate::lease::Lease;
use crate::slug::Slug;

/// The attempt mark to note in a step: see [`crate::Ledger::note_attempt`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AttemptNote<'a> {
    /// The migration about to execute.
    pub slug: &'a Slug,
    /// A token unique to this execution (noting it twice counts once).
    pub token: &'a str,
    /// The attempts an existing entry already records.
    pub floor: u32,
}

/// The last failure to store in a step: see [`crate::Ledger::note_failure`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FailureNote<'a> {
    /// The `on-error=abort` migration that failed.
    pub slug: &'a Slug,
    /// What to store.
    pub failure: &'a LastFailure,
}

/// The condition a step is written under, and what it does to the run lock
/// kept in the ledger object: the one concurrency primitive every backend
/// honours, shaped like object_store's `PutMode` (`Overwrite`, and
/// `Update` on a version) with the lock change riding on the write.
///
/// Every backend keeps its run lock in the ledger object (an annotation, a
/// status field, a key of the memory and file ledgers' object), so checking
/// the condition, changing the lock and storing the records are one atomic
/// operation (CONTRACT.md §5.5). The decisions are
/// [`crate::fence::ObjectLock::step`]'s, written once for every backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepMode<'a> {
    /// Unconditional (`PutMode::Overwrite`): the step does not look at the
    /// lock. For writes outside a run (tests, tools).
    Overwrite,
    /// The run's first write when it executes something (`PutMode::Update`
    /// on the revision the run planned on): take the lock for `holder` for
    /// `ttl`, on the condition that the object is still at `revision` and no
    /// other holder holds a live lock. Refused, writing nothing, with
    /// [`crate::LedgerError::LockHeld`] or [`crate::LedgerError::Changed`].
    /// A new tenure begins (a new token), even when `holder` held a lapsed
    /// lease. A retry that finds this take already stored (a lost reply:
    /// `holder`'s live lease, whatever the revision now, since a run's
    /// holder is unique to it) succeeds and renews that tenure.
    Take {
        /// Who takes it.
        holder: &'a str,
        /// For how long.
        ttl: Duration,
        /// The revision the run planned on.
        revision: Option<&'a str>,
    },
    /// The condition of [`StepMode::Take`] without taking: for a run that
    /// records without executing anything (every pending migration
    /// blocked). The lock is left as it was.
    Check {
        /// Who would hold it.
        holder: &'a str,
        /// The revision the run planned on.
        revision: Option<&'a str>,
    },
    /// Write under `lease` (`PutMode::Update` on its tenure), renewing it
    /// for `ttl` from now. Refused with [`crate::LedgerError::LockLost`]
    /// when the lease no longer holds the lock: another holder took it, it
    /// was released, or it lapsed (even if nobody took it over since).
    Hold {
        /// The lease held.
        lease: &'a Lease,
        /// The new lifetime from now.
        ttl: Duration,
    },
    /// Write under `lease` (as [`StepMode::Hold`]) and release the lock in
    /// the same write.
    Release {
        /// The lease held.
        lease: &'a Lease,
    },
}

/// One combined write: `records` replaced (as [`crate::WriteMode::Replace`]),
/// then `attempt` noted and `failure` stored, under `mode`, as one atomic
/// conditional write ([`crate::Ledger::write_step`]).
#[derive(Debug, Clone, Copy)]
pub struct StepWrite<'a> {
    /// Outcomes to record, overwriting.
    pub records: &'a [(Slug, LedgerEntry)],
    /// The execution about to start, if any.
    pub attempt: Option<AttemptNote<'a>>,
    /// The condition and the lock change the write carries.
    pub mode: StepMode<'a>,
    /// The last failure of an `on-error=abort` migration, stored with the
    /// run's closing write (the run stops on it).
    pub failure: Option<FailureNote<'a>>,
}

/// What a step stored.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StepReport {
    /// The attempt count noted, when the step noted one.
    pub attempts: Option<u32>,
    /// The lease as the step left it: taken or renewed ([`StepMode::Take`],
    /// [`StepMode::Hold`]); `None` after [`StepMode::Release`] and for
    /// [`StepMode::Overwrite`] and [`StepMode::Check`].
    pub lease: Option<Lease>,
}
