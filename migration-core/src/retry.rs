//! Transient-error retries, written once: the policy (how many tries, how
//! long between them) and the loop every backend runs its requests through.
//!
//! The layer that retries is the backend: it knows which of its errors are
//! transient and what a request costs. The [`Migrator`](crate::Migrator)
//! does not retry on top; it only re-reads to reconcile a reply that may
//! have been lost. Core has no async runtime, so waiting goes through
//! [`Sleep`], which each backend provides.

use std::future::Future;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;

use crate::ledger::LedgerError;

/// How many times and how patiently to retry transient API errors and
/// precondition conflicts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Total tries, the first included.
    pub attempts: u32,
    /// Delay before the first retry.
    pub base: Duration,
    /// Longest delay between tries.
    pub cap: Duration,
}

impl Default for RetryPolicy {
    /// Six tries, 100 ms doubling to at most 3 s: about 6 s of patience in
    /// total, within a hook Job's budget.
    fn default() -> Self {
        RetryPolicy {
            attempts: 6,
            base: Duration::from_millis(100),
            cap: Duration::from_secs(3),
        }
    }
}

impl RetryPolicy {
    /// No waiting between tries (tests).
    pub const fn immediate(attempts: u32) -> Self {
        RetryPolicy {
            attempts,
            base: Duration::ZERO,
            cap: Duration::ZERO,
        }
    }

    /// The delay before try `attempt + 1` (`attempt` counts from 1): "equal
    /// jitter", half fixed and half random, so concurrent retriers spread out
    /// but never retry immediately.
    pub fn delay(&self, attempt: u32) -> Duration {
        let exp = self
            .base
            .saturating_mul(1u32 << attempt.saturating_sub(1).min(16))
            .min(self.cap);
        let half = exp / 2;
        half + half.mul_f64(jitter())
    }
}

/// Waits between tries. Backends on an async runtime implement it with the
/// runtime's timer; [`NoSleep`] serves backends that never wait.
#[async_trait]
pub trait Sleep: Send + Sync {
    /// Waits `duration` (never called with zero).
    async fn sleep(&self, duration: Duration);
}

/// Does not wait: for in-process backends and tests, whose retries are
/// immediate by policy.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoSleep;

#[async_trait]
impl Sleep for NoSleep {
    async fn sleep(&self, _duration: Duration) {}
}

impl RetryPolicy {
    /// Runs `request` until it succeeds, fails with an error that is not
    /// transient, or the policy's tries are used up (the last error is
    /// returned). Only safe for requests that are idempotent when repeated:
    /// every `Ledger` operation is (writes carry their whole intended
    /// state, attempt marks their token).
    pub async fn run<T, F, Fut>(&self, sleep: &dyn Sleep, mut request: F) -> Result<T, LedgerError>
    where
        F: FnMut() -> Fut + Send,
        Fut: Future<Output = Result<T, LedgerError>> + Send,
        T: Send,
    {
        let mut attempt = 1;
        loop {
            match request().await {
                Err(e) if e.is_transient() && attempt < self.attempts => {
                    tracing::debug!(attempt, error = %e, "transient ledger error; retrying");
                    let delay = self.delay(attempt);
                    if !delay.is_zero() {
                        sleep.sleep(delay).await;
                    }
                    attempt += 1;
                }
                other => return other,
            }
        }
    }
}

/// A number in [0, 1) from the clock's low bits, mixed: jitter needs spread,
/// not cryptographic quality, and a dependency for it would cost build time.
fn jitter() -> f64 {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let mut x = u64::from(nanos) ^ 0x9E37_79B9_7F4A_7C15 ^ (u64::from(std::process::id()) << 32);
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    (x >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_grow_stay_bounded_and_keep_half_fixed() {
        let p = RetryPolicy::default();
        for attempt in 1..20 {
            let d = p.delay(attempt);
            let exp = p.base.saturating_mul(1 << (attempt - 1).min(16)).min(p.cap);
            assert!(
                d >= exp / 2 && d <= exp,
                "attempt {attempt}: {d:?} vs {exp:?}"
            );
        }
        assert!(p.delay(30) <= p.cap);
        assert_eq!(RetryPolicy::immediate(3).delay(5), Duration::ZERO);
    }
}
