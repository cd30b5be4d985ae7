//! A held run lock: what the lock hands out and every fenced write carries.
//! Its own module, so that the ledger's step types and the lock trait both
//! use it without importing each other.

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
