//! The run lock: its own trait beside the storage trait, and the one keeper
//! that renews it.
//!
//! A run holds the lock while it writes, so two runners never interleave.
//! Where it lives decides when it is taken: a lock beside the ledger object
//! (a Lease, a lock file) is taken before the run reads the ledger; one kept
//! in the ledger object itself ([`Lock::kept_in_ledger`]) is taken by the
//! run's first write, conditional on the revision the run planned on, and
//! released by its last (CONTRACT.md §5.5). The lock is a lease: it lapses
//! unless renewed, so a crashed holder frees it by itself. The [`LockKeeper`] decides when to renew (every third of the
//! lease, so two renewals can fail before it lapses) and is shared by the
//! hook runner and the operator's leader election.

use std::fmt;
use std::time::{Duration, Instant};

use async_trait::async_trait;

pub use crate::lease::Lease;
use crate::ledger::{Ledger, LedgerError};

/// A lease-based lock. Backends implement it beside [`Ledger`] (the
/// Kubernetes ones with a `Lease` object next to the ledger object).
///
/// Guarantees every implementation gives: at most one holder at a time
/// while leases are renewed before they lapse; an expired lease can be taken
/// over; every call is one operation that never waits for another holder.
/// Transient errors are retried by the backend.
///
/// A lock kept in the ledger object answers `true` to
/// [`Self::kept_in_ledger`]; it can only be taken once the ledger exists
/// ([`LedgerError::NotFound`] before), and its ledger's
/// [`Ledger::write_step`] takes, renews and releases it with the writes of a
/// run.
#[async_trait]
pub trait Lock: Send + Sync + fmt::Debug {
    /// Takes the run lock for `holder` for `ttl`.
    ///
    /// Succeeds if the lock is free, expired, or already held by `holder`
    /// (which renews it). Otherwise returns [`LedgerError::LockHeld`] naming
    /// the holder; it never waits. A lock beside the ledger object can be
    /// taken before a fresh install creates it; one kept in it cannot.
    async fn acquire(&self, holder: &str, ttl: Duration) -> Result<Lease, LedgerError>;

    /// Extends a held lock by `ttl` from now.
    ///
    /// Returns [`LedgerError::LockLost`] if the lease expired and someone
    /// else took it (or it was released); the caller must stop mutating.
    async fn renew(&self, lease: &Lease, ttl: Duration) -> Result<Lease, LedgerError>;

    /// Releases a held lock. Idempotent: releasing a lock that this holder
    /// no longer holds succeeds and leaves the current holder alone.
    async fn release(&self, lease: &Lease) -> Result<(), LedgerError>;

    /// Whether the lock lives in the ledger object itself, so that a run
    /// takes it with its first [`Ledger::write_step`] instead of before
    /// reading ([`crate::step::LockStep`]). `false` unless the backend says
    /// otherwise.
    fn kept_in_ledger(&self) -> bool {
        false
    }
}

/// The holder a run takes the lock as: `holder` (what `--holder` says, a
/// pod name, a host and pid) followed by `/run-` and 16 hex digits unique
/// to this call.
///
/// Why: taking the lock succeeds when it is held by the same holder (a
/// retried take whose reply was lost must not lock its own caller out), so
/// two runs given one holder name would both hold it. A token drawn per run
/// makes every run a holder of its own, whatever it was told to call
/// itself. The digits are the SHA-256 of the wall clock's nanoseconds, the
/// process id and a process-wide counter: two runs in one process differ
/// by the counter, two processes by the pid or the time.
pub fn run_holder(holder: &str) -> String {
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let seed = format!("{nanos}/{}/{n}", std::process::id());
    let mut token = crate::digest::Sha256Digest::of(seed.as_bytes()).to_string();
    token.truncate(16);
    format!("{holder}/run-{token}")
}

/// A backend handle that is both the ledger and its lock: what programs
/// open from a ledger spec.
pub trait LockedLedger: Ledger + Lock {}

impl<T: Ledger + Lock + ?Sized> LockedLedger for T {}

/// Holds a lease and renews it when due.
///
/// A keeper made by [`LockKeeper::deferred`] holds nothing yet: the run's
/// first write takes the lock ([`LockKeeper::took`]); until then renewing
/// does nothing (no script runs before that write) and releasing sends
/// nothing.
#[derive(Debug)]
pub struct LockKeeper<'l> {
    lock: &'l dyn Lock,
    holder: String,
    lease: Option<Lease>,
    ttl: Duration,
    renewed: Instant,
}

impl<'l> LockKeeper<'l> {
    /// Takes the lock for `holder` for `ttl`, once (no waiting: a held lock
    /// is [`LedgerError::LockHeld`]).
    pub async fn acquire(
        lock: &'l dyn Lock,
        holder: &str,
        ttl: Duration,
    ) -> Result<Self, LedgerError> {
        let asked = Instant::now();
        let lease = lock.acquire(holder, ttl).await?;
        Ok(LockKeeper {
            lock,
            holder: holder.to_owned(),
            lease: Some(lease),
            ttl,
            renewed: asked,
        })
    }

    /// A keeper for a lock kept in the ledger object, not taken yet: the
    /// run's first write takes it for `holder` for `ttl`.
    pub fn deferred(lock: &'l dyn Lock, holder: &str, ttl: Duration) -> Self {
        LockKeeper {
            lock,
            holder: holder.to_owned(),
            lease: None,
            ttl,
            renewed: Instant::now(),
        }
    }

    /// Who holds (or will hold) the lock.
    pub fn holder(&self) -> &str {
        &self.holder
    }

    /// The lease's lifetime, renewed from each renewal.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// Whether the lock lives in the ledger object ([`Lock::kept_in_ledger`]).
    pub fn kept_in_ledger(&self) -> bool {
        self.lock.kept_in_ledger()
    }

    /// The lease as last taken or renewed; `None` before a deferred keeper's
    /// lock is taken and after it is released.
    pub fn lease(&self) -> Option<&Lease> {
        self.lease.as_ref()
    }

    /// Keeps `lease`, taken or renewed by a write of the run asked for at
    /// `asked`, and restarts the renewal period from then.
    pub fn took(&mut self, lease: Lease, asked: Instant) {
        self.lease = Some(lease);
        self.renewed = asked;
    }

    /// Until when the lease is known to be live: the instant its last
    /// taking or renewal was asked for (the holder's lease starts no
    /// earlier), plus its lifetime. `None` while nothing is held.
    pub fn live_until(&self) -> Option<Instant> {
        self.lease.as_ref().map(|_| self.renewed + self.ttl)
    }

    /// Forgets the lease: a write of the run released it.
    pub fn released(&mut self) {
        self.lease = None;
    }

    /// How often the lease is renewed: a third of its lifetime, so two
    /// renewals can fail before it lapses (at least 100 ms).
    pub fn period(&self) -> Duration {
        (self.ttl / 3).max(Duration::from_millis(100))
    }

    /// How long until the next renewal is due (zero: now).
    pub fn renewal_due(&self) -> Duration {
        self.period().saturating_sub(self.renewed.elapsed())
    }

    /// Renews now. An error means the lock is lost (someone else holds it,
    /// or the backend gave up retrying): the holder must stop mutating. A
    /// keeper holding nothing yet renews nothing.
    pub async fn renew(&mut self) -> Result<(), LedgerError> {
        let Some(lease) = &self.lease else {
            return Ok(());
        };
        let asked = Instant::now();
        self.lease = Some(self.lock.renew(lease, self.ttl).await?);
        self.renewed = asked;
        Ok(())
    }

    /// Renews only when a period has passed since the last renewal: between
    /// quick steps the lease is still fresh, and renewing anyway costs a
    /// round trip each time.
    pub async fn renew_if_due(&mut self) -> Result<(), LedgerError> {
        if self.renewal_due().is_zero() {
            self.renew().await
        } else {
            Ok(())
        }
    }

    /// Releases the lock, if this keeper still holds it.
    pub async fn release(self) -> Result<(), LedgerError> {
        match &self.lease {
            Some(lease) => self.lock.release(lease).await,
            None => Ok(()),
        }
    }
}
