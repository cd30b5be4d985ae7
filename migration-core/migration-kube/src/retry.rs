//! Bounded exponential backoff with jitter.

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
    pub fn immediate(attempts: u32) -> Self {
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

    /// Sleeps for [`RetryPolicy::delay`].
    pub async fn pause(&self, attempt: u32) {
        let d = self.delay(attempt);
        if !d.is_zero() {
            tokio::time::sleep(d).await;
        }
    }
}

impl RetryPolicy {
    /// Reads object `name`, retrying transient errors. `attempt` counts tries
    /// across the caller's whole operation (reads and writes share the
    /// budget). `Ok(None)` only for a real 404: an error is never "absent".
    pub async fn get_opt<K>(
        &self,
        api: &kube::Api<K>,
        name: &str,
        attempt: &mut u32,
    ) -> Result<Option<K>, kube::Error>
    where
        K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
    {
        loop {
            *attempt += 1;
            match api.get_opt(name).await {
                Err(e)
                    if crate::classify(&e) == crate::Class::Transient
                        && *attempt < self.attempts =>
                {
                    tracing::debug!(error = %e, attempt = *attempt, object = name, "transient read error; retrying");
                    self.pause(*attempt).await;
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
