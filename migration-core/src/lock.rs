//! The run lock: its own trait beside the storage trait, and the one keeper
//! that renews it.
//!
//! A run holds the lock from before it reads the ledger until it has
//! recorded its last outcome, so two runners never interleave. The lock is
//! a lease: it lapses unless renewed, so a crashed holder frees it by
//! itself. The [`LockKeeper`] decides when to renew (every third of the
//! lease, so two renewals can fail before it lapses) and is shared by the
//! hook runner and the operator's leader election.

use std::fmt;
use std::time::{Duration, Instant};

use async_trait::async_trait;

use crate::ledger::{Ledger, LedgerError};
use crate::time::Timestamp;

/// A held run lock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    /// Who holds it (pod name, host and pid, ...).
    pub holder: String,
    /// Backend-specific token that proves this holder's tenure (a
    /// resourceVersion, a counter), checked on renew and release.
    pub token: String,
    /// When this holder acquired it.
    pub acquired_at: Timestamp,
    /// When it lapses unless renewed.
    pub expires_at: Timestamp,
}

/// A lease-based lock. Backends implement it beside [`Ledger`] (the
/// Kubernetes ones with a `Lease` object next to the ledger object).
///
/// Guarantees every implementation gives: at most one holder at a time
/// while leases are renewed before they lapse; an expired lease can be taken
/// over; every call is one operation that never waits for another holder.
/// Transient errors are retried by the backend.
#[async_trait]
pub trait Lock: Send + Sync + fmt::Debug {
    /// Takes the run lock for `holder` for `ttl`.
    ///
    /// Succeeds if the lock is free, expired, or already held by `holder`
    /// (which renews it). Otherwise returns [`LedgerError::LockHeld`] naming
    /// the holder; it never waits. The lock is independent of the ledger
    /// object, so it can be taken before a fresh install creates it.
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

/// A backend handle that is both the ledger and its lock: what programs
/// open from a ledger spec.
pub trait LockedLedger: Ledger + Lock {}

impl<T: Ledger + Lock + ?Sized> LockedLedger for T {}

/// Holds a lease and renews it when due.
#[derive(Debug)]
pub struct LockKeeper<'l> {
    lock: &'l dyn Lock,
    lease: Lease,
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
        let lease = lock.acquire(holder, ttl).await?;
        Ok(LockKeeper {
            lock,
            lease,
            ttl,
            renewed: Instant::now(),
        })
    }

    /// The lease as last renewed.
    pub fn lease(&self) -> &Lease {
        &self.lease
    }

    /// How often the lease is renewed: a third of its lifetime, so two
    /// renewals can fail before it lapses (at least 100 ms).
    pub fn period(&self) -> Duration {
        (self.ttl / 3).max(Duration::from_millis(100))
    }

    /// Renews now. An error means the lock is lost (someone else holds it,
    /// or the backend gave up retrying): the holder must stop mutating.
    pub async fn renew(&mut self) -> Result<(), LedgerError> {
        self.lease = self.lock.renew(&self.lease, self.ttl).await?;
        self.renewed = Instant::now();
        Ok(())
    }

    /// Renews only when a period has passed since the last renewal: between
    /// quick steps the lease is still fresh, and renewing anyway costs a
    /// round trip each time.
    pub async fn renew_if_due(&mut self) -> Result<(), LedgerError> {
        if self.renewed.elapsed() >= self.period() {
            self.renew().await
        } else {
            Ok(())
        }
    }

    /// Releases the lock.
    pub async fn release(self) -> Result<(), LedgerError> {
        self.lock.release(&self.lease).await
    }
}
