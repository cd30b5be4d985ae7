//! Retries on the Kubernetes API: core's [`RetryPolicy`] with tokio's timer,
//! and the one loop ([`Backoff::retry`]) every read and write of the
//! Kubernetes backends and of the Lease goes through.

use std::future::Future;

pub use migration_core::retry::RetryPolicy;

use crate::error::{Class, classify};

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

/// What the Kubernetes backends add to [`RetryPolicy`]: waiting on tokio's
/// timer, the one retry loop, and a retrying typed read.
pub trait Backoff {
    /// Sleeps for [`RetryPolicy::delay`] of `attempt`.
    fn pause(&self, attempt: u32) -> impl Future<Output = ()> + Send;

    /// Sends the request `send` makes, again while it fails with a
    /// transient error ([`Class::Transient`]) and `attempts` has tries left,
    /// pausing [`RetryPolicy::delay`] between tries. Each try counts in
    /// `attempts`. Any other error, and the last transient one, is the
    /// caller's, at once: what a 404, a 409 or an AlreadyExists means is the
    /// call site's to say. `operation` and `object` name the request in the
    /// debug line of each retry.
    fn retry<T, F, Fut>(
        &self,
        attempts: &mut Attempts,
        operation: &str,
        object: &str,
        send: F,
    ) -> impl Future<Output = Result<T, kube::Error>> + Send
    where
        T: Send,
        F: FnMut() -> Fut + Send,
        Fut: Future<Output = Result<T, kube::Error>> + Send;

    /// Reads object `name` through [`Backoff::retry`]. `Ok(None)` only for
    /// a real 404: an error is never "absent".
    fn get_opt<K>(
        &self,
        api: &kube::Api<K>,
        name: &str,
        attempts: &mut Attempts,
    ) -> impl Future<Output = Result<Option<K>, kube::Error>> + Send
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

    async fn retry<T, F, Fut>(
        &self,
        attempts: &mut Attempts,
        operation: &str,
        object: &str,
        mut send: F,
    ) -> Result<T, kube::Error>
    where
        T: Send,
        F: FnMut() -> Fut + Send,
        Fut: Future<Output = Result<T, kube::Error>> + Send,
    {
        loop {
            let attempt = attempts.count_one();
            match send().await {
                Err(e) if classify(&e) == Class::Transient && attempts.left(self) => {
                    tracing::debug!(error = %e, attempt, operation, object, "transient API error; retrying");
                    self.pause(attempt).await;
                }
                other => return other,
            }
        }
    }

    async fn get_opt<K>(
        &self,
        api: &kube::Api<K>,
        name: &str,
        attempts: &mut Attempts,
    ) -> Result<Option<K>, kube::Error>
    where
        K: Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + Sync,
    {
        self.retry(attempts, "read", name, || api.get_opt(name))
            .await
    }
}
