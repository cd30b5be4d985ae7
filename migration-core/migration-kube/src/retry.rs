//! Retries on the Kubernetes API: core's [`RetryPolicy`] and its one loop
//! ([`RetryPolicy::run`]) with tokio's timer and the API's transient
//! errors ([`Backoff::retry`]), which every read and write of the
//! Kubernetes backends and of the Lease goes through.

use std::future::Future;

use tracing::Instrument;

pub use migration_core::retry::{Attempts, RetryPolicy};

use crate::error::{Class, classify};

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
        send: F,
    ) -> Result<T, kube::Error>
    where
        T: Send,
        F: FnMut() -> Fut + Send,
        Fut: Future<Output = Result<T, kube::Error>> + Send,
    {
        let transient = |e: &kube::Error| classify(e) == Class::Transient;
        self.run(attempts, transient, |a| self.pause(a), send)
            .instrument(tracing::debug_span!("api request", operation, object))
            .await
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
