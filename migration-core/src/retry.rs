//! Transient-error retries, written once: the policy (how many tries, how
//! long between them) and the one loop ([`RetryPolicy::run`]) every
//! backend runs its requests through.
//!
//! The layer that retries is the backend: it knows which of its errors are
//! transient and what a request costs. The [`Migrator`](crate::Migrator)
//! does not retry on top; it only re-reads to reconcile a reply that may
//! have been lost. Core has no async runtime, so the backend passes in how
//! to wait.

use std::future::Future;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

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

/// The tries one caller's whole operation has made so far (reads and
/// writes alike), counted against one [`RetryPolicy::attempts`]: a read
/// that needed three tries leaves the write after it fewer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Attempts(u32);

impl Attempts {
    /// No try made yet.
    pub const fn new() -> Self {
        Attempts(0)
    }

    /// The tries made so far.
    pub const fn made(self) -> u32 {
        self.0
    }

    /// Counts one more try (a request, or a remembered copy standing in for
    /// a read) and answers its number, counting from 1.
    pub fn count_one(&mut self) -> u32 {
        self.0 = self.0.saturating_add(1);
        self.0
    }

    /// Whether `policy` allows another try after the ones made.
    pub fn left(self, policy: &RetryPolicy) -> bool {
        self.0 < policy.attempts
    }
}

impl RetryPolicy {
    /// The one retry loop: sends the request `send` makes, again while it
    /// fails with an error `transient` accepts and `attempts` has tries
    /// left, after `pause(attempt)` (the caller's timer, waiting
    /// [`RetryPolicy::delay`]: core has no runtime). Each try counts in
    /// `attempts`. Any other error, and the last transient one, is the
    /// caller's, at once. Only for requests that are idempotent when
    /// repeated: every `Ledger` operation is (writes carry their whole
    /// intended state, attempt marks their token).
    pub async fn run<T, E, F, Fut, P, Paused>(
        &self,
        attempts: &mut Attempts,
        transient: impl Fn(&E) -> bool + Send,
        mut pause: P,
        mut send: F,
    ) -> Result<T, E>
    where
        T: Send,
        E: std::fmt::Display + Send,
        F: FnMut() -> Fut + Send,
        Fut: Future<Output = Result<T, E>> + Send,
        P: FnMut(u32) -> Paused + Send,
        Paused: Future<Output = ()> + Send,
    {
        loop {
            let attempt = attempts.count_one();
            match send().await {
                Err(e) if transient(&e) && attempts.left(self) => {
                    tracing::debug!(error = %e, attempt, "transient error; retrying");
                    pause(attempt).await;
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
