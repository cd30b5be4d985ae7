//! The run lock: a lease kept in the ledger object, and the one keeper
//! that renews it.
//!
//! A run holds the lock while it writes, so two runners never interleave.
//! Every backend keeps it in the ledger object itself: the run's first
//! write takes it, conditional on the revision the run planned on, its
//! writes hold it and its last releases it
//! ([`crate::step::StepMode`], CONTRACT.md §5.5). The lock is a lease: it
//! lapses unless renewed, so a crashed holder frees it by itself. The
//! [`LockKeeper`] decides when to renew (every third of the lease, so two
//! renewals can fail before it lapses); the [`Lock`] trait is what it
//! renews through, and what the operator's leader election (a Lease
//! object) implements.

use std::fmt;
use std::time::{Duration, Instant};

use async_trait::async_trait;

pub use crate::lease::Lease;
use crate::ledger::{Ledger, LedgerError};

/// A lease-based lock: every ledger backend implements it on the lock in
/// its object (a lock-only conditional write, which raises the revision);
/// the operator's leader election on a `Lease`.
///
/// Guarantees every implementation gives: at most one holder at a time
/// while leases are renewed before they lapse; an expired lease can be taken
/// over; every call is one operation that never waits for another holder.
/// Transient errors are retried by the backend. A lock kept in a ledger
/// object can only be taken once the ledger exists
/// ([`LedgerError::NotFound`] before: a fresh install needs no lock).
#[async_trait]
pub trait Lock: Send + Sync + fmt::Debug {
    /// Takes the run lock for `holder` for `ttl`.
    ///
    /// Succeeds if the lock is free, expired, or already held by `holder`
    /// (which renews the same tenure while it is live). Otherwise returns
    /// [`LedgerError::LockHeld`] naming the holder; it never waits.
    async fn acquire(&self, holder: &str, ttl: Duration) -> Result<Lease, LedgerError>;

    /// Extends a held lock by `ttl` from now.
    ///
    /// Returns [`LedgerError::LockLost`] if the lease expired and someone
    /// else took it (or it was released); the caller must stop mutating.
    async fn renew(&self, lease: &Lease, ttl: Duration) -> Result<Lease, LedgerError>;

    /// Releases a held lock. Idempotent: releasing a lock that this holder
    /// no longer holds succeeds and leaves the current holder alone.
    async fn release(&self, lease: &Lease) -> Result<(), LedgerError>;
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

/// Where a keeper's tenure stands.
#[derive(Debug, Clone)]
enum Tenure {
    /// Not taken yet: the run's first write takes it.
    NotTaken,
    /// Held under this lease.
    Held(Lease),
    /// Released (or given up).
    Released,
}

/// Holds a lease and renews it when due.
///
/// A run's keeper starts with nothing taken ([`LockKeeper::new`]): the
/// run's first write takes the lock in the ledger object
/// ([`LockKeeper::took`]); until then renewing does nothing (no script runs
/// before that write) and releasing sends nothing.
#[derive(Debug)]
pub struct LockKeeper<'l> {
    lock: &'l dyn Lock,
    holder: String,
    tenure: Tenure,
    ttl: Duration,
    renewed: Instant,
}

impl<'l> LockKeeper<'l> {
    /// A keeper of `lock` for `holder` for `ttl`, holding nothing yet.
    pub fn new(lock: &'l dyn Lock, holder: &str, ttl: Duration) -> Self {
        LockKeeper {
            lock,
            holder: holder.to_owned(),
            tenure: Tenure::NotTaken,
            ttl,
            renewed: Instant::now(),
        }
    }

    /// Takes `lock` for `holder` for `ttl` now, once (no waiting: a held
    /// lock is [`LedgerError::LockHeld`]): the operator's leader election.
    pub async fn acquire(
        lock: &'l dyn Lock,
        holder: &str,
        ttl: Duration,
    ) -> Result<Self, LedgerError> {
        let asked = Instant::now();
        let lease = lock.acquire(holder, ttl).await?;
        let mut keeper = Self::new(lock, holder, ttl);
        keeper.took(lease, asked);
        Ok(keeper)
    }

    /// Who holds (or will hold) the lock.
    pub fn holder(&self) -> &str {
        &self.holder
    }

    /// The lease's lifetime, renewed from each renewal.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// The lease as last taken or renewed; `None` before the lock is taken
    /// and after it is released.
    pub fn lease(&self) -> Option<&Lease> {
        match &self.tenure {
            Tenure::Held(lease) => Some(lease),
            Tenure::NotTaken | Tenure::Released => None,
        }
    }

    /// Whether the lock has not been taken yet: a refusal now (the lock
    /// held by another runner, the ledger changed since it was read) wrote
    /// nothing and ran nothing, so the run may plan again.
    pub fn not_taken_yet(&self) -> bool {
        matches!(self.tenure, Tenure::NotTaken)
    }

    /// Keeps `lease`, taken or renewed by a write of the run asked for at
    /// `asked`, and restarts the renewal period from then.
    pub fn took(&mut self, lease: Lease, asked: Instant) {
        self.tenure = Tenure::Held(lease);
        self.renewed = asked;
    }

    /// Until when the lease is known to be live: the instant its last
    /// taking or renewal was asked for (the holder's lease starts no
    /// earlier), plus its lifetime. `None` while nothing is held.
    pub fn live_until(&self) -> Option<Instant> {
        self.lease().map(|_| self.renewed + self.ttl)
    }

    /// Forgets the lease: a write of the run released it.
    pub fn released(&mut self) {
        self.tenure = Tenure::Released;
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
    /// keeper holding nothing renews nothing.
    pub async fn renew(&mut self) -> Result<(), LedgerError> {
        let Tenure::Held(lease) = &self.tenure else {
            return Ok(());
        };
        let asked = Instant::now();
        let renewed = self.lock.renew(lease, self.ttl).await?;
        self.took(renewed, asked);
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
        match &self.tenure {
            Tenure::Held(lease) => self.lock.release(lease).await,
            Tenure::NotTaken | Tenure::Released => Ok(()),
        }
    }
}
