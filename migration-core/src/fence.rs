//! The fence's rules, written once: who may take the run lock, whether a
//! lease still holds it, and what each step of a run does to the lock kept
//! in the ledger object ([`ObjectLock`], the planner every backend uses:
//! the memory and file ledgers on their object's [`LOCK_KEY`], the
//! ConfigMap on an annotation, the custom resource on `status.lock`). The
//! backends, the run ([`crate::Run`]) and the protocol model
//! (`migration-core/protocol-model`, checked exhaustively) all decide by
//! these functions, so what the model proves is what the code does
//! (CONTRACT.md §5.5). A backend needs no Kubernetes crate to use them.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::lease::Lease;
use crate::ledger::LedgerError;
use crate::step::StepMode;
use crate::time::Timestamp;

/// What taking the run lock does, given who holds it now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Take {
    /// The lock is held by the same holder: its tenure goes on, renewed (a
    /// take whose reply was lost, retried). Holders are unique per run
    /// ([`crate::lock::run_holder`]), so this is never another run.
    Renew,
    /// Another holder holds a live lease: refused, nothing changes.
    Held,
    /// Free, or lapsed: a new tenure begins, with a new token.
    NewTenure,
}

/// What taking the lock as `holder` does while `current` holds it (`None`:
/// free), `lapsed` telling whether that holder's lease has expired.
pub fn take(current: Option<&str>, lapsed: bool, holder: &str) -> Take {
    match current {
        Some(c) if c == holder => Take::Renew,
        Some(_) if !lapsed => Take::Held,
        _ => Take::NewTenure,
    }
}

/// Whether the lease of `holder` in the tenure `token` still holds the lock
/// whose holder and token are `current`: the tenure goes on until a take
/// ends it. A write under a lapsed lease is refused all the same
/// ([`ObjectLock::require_live`]); a renewal of it is not.
pub fn holds(current: Option<(&str, &str)>, holder: &str, token: &str) -> bool {
    current == Some((holder, token))
}

/// The key of the memory and file ledgers' object that holds the run lock
/// ([`StoredLock::encode`]); a release removes it. Not an entry key, so a
/// snapshot never shows it and an older engine ignores it.
pub const LOCK_KEY: &str = "run-lock";

/// The run lock as the ledger object stores it: a lease as
/// `{"holder","token","acquired","renewed","ttl_seconds"}`. It lapses at
/// `renewed + ttl_seconds`, judged on the writer's clock as a Lease's
/// `renewTime + leaseDurationSeconds` is. Every change of it is part of a
/// write conditional on the object's revision, so two takers cannot both
/// win, and a change of the ledger's data and of its lock is one write.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoredLock {
    /// Who holds it (a run's holder, [`crate::lock::run_holder`]).
    pub holder: String,
    /// The tenure: a new one on each take by a new holder ([`new_token`]).
    pub token: String,
    /// When the tenure began.
    pub acquired: Timestamp,
    /// When it was last taken or renewed.
    pub renewed: Timestamp,
    /// Its lifetime from `renewed`, in seconds.
    pub ttl_seconds: u64,
}

impl StoredLock {
    /// When the lease lapses unless renewed.
    pub fn expires(&self) -> Timestamp {
        self.renewed.plus(Duration::from_secs(self.ttl_seconds))
    }

    /// The lease this stored lock is.
    pub fn lease(&self) -> Lease {
        Lease {
            holder: self.holder.clone(),
            token: self.token.clone(),
            acquired_at: self.acquired,
            expires_at: self.expires(),
        }
    }

    /// Whether this is `lease`'s tenure.
    pub fn is(&self, lease: &Lease) -> bool {
        holds(
            Some((self.holder.as_str(), self.token.as_str())),
            &lease.holder,
            &lease.token,
        )
    }

    /// The same tenure, renewed at `now` for `ttl`.
    pub fn renewed(self, now: Timestamp, ttl: Duration) -> Self {
        StoredLock {
            renewed: now,
            ttl_seconds: ttl_seconds(ttl),
            ..self
        }
    }

    /// A new tenure of `holder` from `now` for `ttl`.
    pub fn new_tenure(holder: &str, token: &str, now: Timestamp, ttl: Duration) -> Self {
        StoredLock {
            holder: holder.to_owned(),
            token: token.to_owned(),
            acquired: now,
            renewed: now,
            ttl_seconds: ttl_seconds(ttl),
        }
    }

    /// The compact JSON the ConfigMap's annotation holds.
    pub fn encode(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// A token for a new tenure: the time it starts and a process-wide counter,
/// so two takes by one holder never share one.
pub fn new_token(now: Timestamp) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!("{now}/{n}")
}

fn ttl_seconds(ttl: Duration) -> u64 {
    ttl.as_secs().max(1)
}

/// What a step does to the stored lock: `None` leaves it, `Some(None)`
/// removes it, `Some(Some(lock))` stores `lock`.
pub type LockWrite = Option<Option<StoredLock>>;

/// The lock of one ledger object as one conditional write finds it: the
/// decisions of taking, proving, renewing and releasing it.
#[derive(Debug)]
pub struct ObjectLock<'a> {
    /// The ledger, as errors name it.
    pub ledger: &'a str,
    /// The lock stored on the object (`None`: free).
    pub stored: Option<StoredLock>,
    /// The object's `resourceVersion`.
    pub revision: Option<&'a str>,
    /// Now, on the clock expiry is judged on.
    pub now: Timestamp,
}

impl ObjectLock<'_> {
    /// Refuses when someone other than `holder` holds an unexpired lock.
    pub fn refuse_if_held(&self, holder: &str) -> Result<(), LedgerError> {
        match &self.stored {
            Some(l) if take(Some(&l.holder), self.now >= l.expires(), holder) == Take::Held => {
                Err(LedgerError::LockHeld {
                    ledger: self.ledger.to_owned(),
                    holder: l.holder.clone(),
                    expires_at: l.expires(),
                })
            }
            _ => Ok(()),
        }
    }

    /// The stored lock if it is `lease`'s tenure; otherwise the lock is lost.
    pub fn require(&self, lease: &Lease) -> Result<StoredLock, LedgerError> {
        match &self.stored {
            Some(l) if l.is(lease) => Ok(l.clone()),
            other => Err(LedgerError::LockLost {
                ledger: self.ledger.to_owned(),
                holder: lease.holder.clone(),
                reason: match other {
                    Some(l) => format!("now held by {}", l.holder),
                    None => "the lock was released".into(),
                },
            }),
        }
    }

    /// [`Self::require`], and the lease has not lapsed at `now`: what a
    /// run's write under its lease checks. A lapsed lease refuses even when
    /// nobody took the lock over: its holder stalled past its lifetime, and
    /// another runner may take it between this write and the next.
    pub fn require_live(&self, lease: &Lease) -> Result<StoredLock, LedgerError> {
        let stored = self.require(lease)?;
        if self.now >= stored.expires() {
            return Err(LedgerError::LockLost {
                ledger: self.ledger.to_owned(),
                holder: lease.holder.clone(),
                reason: format!("the lease lapsed at {}", stored.expires()),
            });
        }
        Ok(stored)
    }

    /// Refuses unless the object is still at `planned`, the revision a run
    /// planned on.
    pub fn refuse_if_changed(&self, planned: Option<&str>) -> Result<(), LedgerError> {
        if self.revision.is_some() && self.revision == planned {
            return Ok(());
        }
        Err(LedgerError::Changed {
            ledger: self.ledger.to_owned(),
            expected: planned.unwrap_or("unknown").into(),
            found: self.revision.unwrap_or("none").into(),
        })
    }

    /// What taking the lock as `holder` for `ttl` stores ([`Lock::acquire`]):
    /// the same tenure renewed when it is already `holder`'s and live, a new
    /// tenure (`fresh_token`) otherwise; held by another, refused.
    ///
    /// [`Lock::acquire`]: crate::Lock::acquire
    pub fn take(
        &self,
        holder: &str,
        ttl: Duration,
        fresh_token: &str,
    ) -> Result<StoredLock, LedgerError> {
        self.refuse_if_held(holder)?;
        Ok(match &self.stored {
            Some(l) if l.holder == holder && self.now < l.expires() => {
                l.clone().renewed(self.now, ttl)
            }
            _ => StoredLock::new_tenure(holder, fresh_token, self.now, ttl),
        })
    }

    /// What `step` does to the lock: the change and the lease it leaves, or
    /// the refusal. `take_token` is the tenure a [`StepMode::Take`] creates;
    /// finding it stored means this take already landed (a lost reply),
    /// which then needs no change.
    pub fn step(
        &self,
        step: &StepMode<'_>,
        take_token: &str,
    ) -> Result<(LockWrite, Option<Lease>), LedgerError> {
        match *step {
            StepMode::Overwrite => Ok((None, None)),
            StepMode::Take {
                holder,
                ttl,
                revision,
            } => {
                if let Some(l) = self
                    .stored
                    .as_ref()
                    .filter(|l| l.holder == holder && l.token == take_token)
                {
                    return Ok((None, Some(l.lease())));
                }
                // The holder's own live tenure: this take already landed and
                // is being retried (its reply was lost, and the retry may be
                // outside the backend, with another token). A run's holder is
                // unique to it ([`crate::lock::run_holder`]), so this is never
                // another run: its tenure is renewed, whatever the revision
                // now (its own write raised it).
                if let Some(l) = self
                    .stored
                    .as_ref()
                    .filter(|l| l.holder == holder && self.now < l.expires())
                {
                    let renewed = l.clone().renewed(self.now, ttl);
                    let lease = renewed.lease();
                    return Ok((Some(Some(renewed)), Some(lease)));
                }
                self.refuse_if_held(holder)?;
                self.refuse_if_changed(revision)?;
                let taken = StoredLock::new_tenure(holder, take_token, self.now, ttl);
                let lease = taken.lease();
                Ok((Some(Some(taken)), Some(lease)))
            }
            StepMode::Check { holder, revision } => {
                self.refuse_if_held(holder)?;
                self.refuse_if_changed(revision)?;
                Ok((None, None))
            }
            StepMode::Hold { lease, ttl } => {
                let renewed = self.require_live(lease)?.renewed(self.now, ttl);
                let lease = renewed.lease();
                Ok((Some(Some(renewed)), Some(lease)))
            }
            StepMode::Release { lease } => {
                self.require_live(lease)?;
                Ok((Some(None), None))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lapsed_lease_is_taken_over_and_a_live_one_refuses() {
        assert_eq!(take(None, false, "a"), Take::NewTenure);
        assert_eq!(take(Some("b"), false, "a"), Take::Held);
        assert_eq!(take(Some("b"), true, "a"), Take::NewTenure);
        assert_eq!(take(Some("a"), true, "a"), Take::Renew);
        assert!(holds(Some(("a", "1")), "a", "1"));
        assert!(!holds(Some(("a", "2")), "a", "1"));
        assert!(!holds(None, "a", "1"));
    }

    fn at(s: i64) -> Timestamp {
        Timestamp::from_unix(s)
    }

    /// A take by `a`, planned on revision 6.
    fn take_at_6(ttl: Duration) -> StepMode<'static> {
        StepMode::Take {
            holder: "a",
            ttl,
            revision: Some("6"),
        }
    }

    fn object(stored: Option<StoredLock>, now: i64) -> ObjectLock<'static> {
        ObjectLock {
            ledger: "l",
            stored,
            revision: Some("7"),
            now: at(now),
        }
    }

    #[test]
    fn a_live_lock_of_another_refuses_and_a_lapsed_one_is_taken_with_a_new_tenure() {
        let ttl = Duration::from_secs(30);
        let held = StoredLock::new_tenure("a", "t1", at(0), ttl);
        let err = object(Some(held.clone()), 10)
            .take("b", ttl, "t2")
            .unwrap_err();
        assert!(matches!(err, LedgerError::LockHeld { ref holder, .. } if holder == "a"));
        let taken = object(Some(held.clone()), 31).take("b", ttl, "t2").unwrap();
        assert_eq!((taken.holder.as_str(), taken.token.as_str()), ("b", "t2"));
        // The holder taking its own live lock renews the same tenure.
        let again = object(Some(held), 10).take("a", ttl, "t3").unwrap();
        assert_eq!((again.token.as_str(), again.renewed), ("t1", at(10)));
    }

    #[test]
    fn a_take_step_is_refused_on_a_changed_object_and_recognised_after_a_lost_reply() {
        let ttl = Duration::from_secs(30);
        let take = take_at_6(ttl);
        let err = object(None, 0).step(&take, "t1").unwrap_err();
        assert!(matches!(err, LedgerError::Changed { .. }), "{err}");
        // Its own take already stored (the reply was lost): no change.
        let landed = StoredLock::new_tenure("a", "t1", at(0), ttl);
        let (write, lease) = object(Some(landed), 1).step(&take, "t1").unwrap();
        assert_eq!(write, None);
        assert_eq!(lease.unwrap().token, "t1");
    }

    #[test]
    fn a_take_retried_with_another_token_renews_the_holders_live_tenure_only() {
        let ttl = Duration::from_secs(30);
        let take = take_at_6(ttl);
        let landed = StoredLock::new_tenure("a", "t1", at(0), ttl);
        // The revision moved (its own write): still its take, renewed.
        let (write, lease) = object(Some(landed.clone()), 5).step(&take, "t2").unwrap();
        assert_eq!(lease.unwrap().token, "t1");
        assert_eq!(write, Some(Some(landed.clone().renewed(at(5), ttl))));
        // Lapsed: a new tenure, on the revision it planned on only.
        let err = object(Some(landed), 31).step(&take, "t2").unwrap_err();
        assert!(matches!(err, LedgerError::Changed { .. }), "{err}");
    }

    #[test]
    fn holding_or_releasing_a_lease_another_holds_is_a_lost_lock() {
        let ttl = Duration::from_secs(30);
        let mine = StoredLock::new_tenure("a", "t1", at(0), ttl).lease();
        let other = StoredLock::new_tenure("b", "t2", at(40), ttl);
        for step in [
            StepMode::Hold { lease: &mine, ttl },
            StepMode::Release { lease: &mine },
        ] {
            let err = object(Some(other.clone()), 41)
                .step(&step, "t9")
                .unwrap_err();
            assert!(matches!(err, LedgerError::LockLost { .. }), "{err}");
        }
    }
}
