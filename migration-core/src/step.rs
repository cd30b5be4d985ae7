//! One combined write of a run: the outcomes recorded since the last write,
//! the attempt mark of the execution about to start, and (on a backend that
//! keeps its run lock in the ledger object) what happens to that lock, all
//! sent as one conditional write ([`crate::Ledger::write_step`]).
//!
//! Why: a run of K migrations used to write twice per migration (the
//! attempt mark before the script, the record after it). The record of one
//! migration and the attempt mark of the next need no durable point between
//! them, so they travel together; the run lock, when it lives in the same
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

/// What a step does with the run lock: for a lock kept in the ledger
/// object ([`crate::Lock::kept_in_ledger`]) every variant but
/// [`LockStep::Separate`] and [`LockStep::Beside`]; for a lock beside the
/// ledger, [`LockStep::Beside`] while a run holds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockStep<'a> {
    /// No run lock is involved: the step does not look at one.
    Separate,
    /// The run lock lives beside the ledger and `lease` holds it: the write
    /// is the run's, and must not land once the lease is lost. The run
    /// proves the lease right before sending the step (it renews it,
    /// [`crate::LockKeeper::renew`]); a backend that can check its lock in
    /// the same atomic operation as the write (the file ledger, under its
    /// `flock`) also does so, and refuses with
    /// [`crate::LedgerError::LockLost`], writing nothing, when another
    /// holder has taken the lock since. The step never changes the lock.
    Beside {
        /// The lease the run holds.
        lease: &'a Lease,
    },
    /// Take the lock for `holder` for `ttl` with this write, on the
    /// condition that the object is still at `revision` (the one the run
    /// planned on) and no other holder holds the lock. Refused, writing
    /// nothing, with [`crate::LedgerError::LockHeld`] or
    /// [`crate::LedgerError::Changed`]. A retry that finds this very take
    /// already stored (a lost reply) succeeds.
    Take {
        /// Who takes it.
        holder: &'a str,
        /// For how long.
        ttl: Duration,
        /// The revision the run planned on.
        revision: Option<&'a str>,
    },
    /// Write under the lock only if it is free for `holder` (as for
    /// [`LockStep::Take`]), leaving it as it was: for a run that records
    /// without executing anything (every pending migration blocked).
    Check {
        /// Who would hold it.
        holder: &'a str,
        /// The revision the run planned on.
        revision: Option<&'a str>,
    },
    /// Write under `lease`, renewing it for `ttl`; refused with
    /// [`crate::LedgerError::LockLost`] when another holder has it.
    Hold {
        /// The lease held.
        lease: &'a Lease,
        /// The new lifetime from now.
        ttl: Duration,
    },
    /// Write under `lease` and release it in the same write; refused with
    /// [`crate::LedgerError::LockLost`] when another holder has it.
    Release {
        /// The lease held.
        lease: &'a Lease,
    },
}

/// One combined write: `records` replaced (as [`crate::WriteMode::Replace`]),
/// then `attempt` noted and `failure` stored, under `lock`. Atomic on backends that override
/// [`crate::Ledger::write_step`]; the default sends the records, then the
/// attempt, so a failure between them leaves the records written and no
/// attempt noted (the script has not started).
#[derive(Debug, Clone, Copy)]
pub struct StepWrite<'a> {
    /// Outcomes to record, overwriting.
    pub records: &'a [(Slug, LedgerEntry)],
    /// The execution about to start, if any.
    pub attempt: Option<AttemptNote<'a>>,
    /// The run lock, when it lives in the ledger object.
    pub lock: LockStep<'a>,
    /// The last failure of an `on-error=abort` migration, stored with the
    /// run's closing write (the run stops on it).
    pub failure: Option<FailureNote<'a>>,
}

/// What a step stored.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StepReport {
    /// The attempt count noted, when the step noted one.
    pub attempts: Option<u32>,
    /// The lease as the step left it: taken or renewed ([`LockStep::Take`],
    /// [`LockStep::Hold`]); `None` after [`LockStep::Release`] and for
    /// [`LockStep::Separate`], [`LockStep::Beside`] (left as it was) and
    /// [`LockStep::Check`].
    pub lease: Option<Lease>,
}
