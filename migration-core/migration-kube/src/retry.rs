//! Retries on the Kubernetes API: core's [`RetryPolicy`] with tokio's timer.

pub use migration_core::retry::RetryPolicy;

/// What the Kubernetes backends add to [`RetryPolicy`]: waiting on tokio's
/// timer and a retrying typed read.
pub trait Backoff {
    /// Sleeps for [`RetryPolicy::delay`] of `attempt`.
    fn pause(&self, attempt: u32) -> impl std::future::Future<Output = ()> + Send;

    /// Reads object `name`, retrying transient errors. `attempt` counts tries
    /// across the caller's whole operation (reads and writes share the
    /// budget). `Ok(None)` only for a real 404: an error is never "absent".
    fn get_opt<K>(
        &self,
        api: &kube::Api<K>,
        name: &str,
        attempt: &mut u32,
    ) -> impl std::future::Future<Output = Result<Option<K>, kube::Error>> + Send
    where
        K: Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + Sync;
}

impl Backoff for RetryPolicy {
    async fn pause(&self, attempt: u32) {
        let d = self.delay(attempt);
        if !d.is_zero() {
            tokio::time::sleep(d).await;
        }
    }

    async fn get_opt<K>(
        &self,
        api: &kube::Api<K>,
        name: &str,
        attempt: &mut u32,
    ) -> Result<Option<K>, kube::Error>
    where
        K: Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + Sync,
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
