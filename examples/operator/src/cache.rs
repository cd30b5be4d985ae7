//! The operator's Jobs as a kube-runtime reflector keeps them, so that a
//! reconcile reads them from memory instead of listing them every time.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures_util::Stream;
use k8s_openapi::api::batch::v1::Job;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};

use crate::MANAGED_BY;

/// Why the cached Jobs cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CacheError {
    /// No watch has filled the cache since it was (re)started: deciding on
    /// it would take every running Job for missing.
    #[error("the cache of owned Jobs is not filled: {reason}")]
    NotSynced {
        /// Why: nothing watches the Jobs, or the first listing has not
        /// arrived within the wait.
        reason: String,
    },
}

/// The Jobs labelled as the operator's, in one namespace, as the current
/// controller run's watch last saw them.
///
/// Each [`OwnedJobs::watch`] starts a fresh store, so a replica that leads
/// again after losing leadership never decides on what it saw in an
/// earlier term. The store is eventually consistent: a Job this process
/// just created may be missing from it for a moment, which is harmless
/// because Job names are deterministic (a second create answers 409 and the
/// Job is adopted); the watch then triggers another reconcile.
pub struct OwnedJobs {
    current: Mutex<Store<Job>>,
}

impl Default for OwnedJobs {
    /// A cache nothing fills yet: reads fail with [`CacheError::NotSynced`]
    /// until [`OwnedJobs::watch`] is polled.
    fn default() -> Self {
        let (store, _writer) = reflector::store();
        OwnedJobs {
            current: Mutex::new(store),
        }
    }
}

impl std::fmt::Debug for OwnedJobs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OwnedJobs")
            .field("cached", &self.store().len())
            .finish()
    }
}

/// The label selector of the operator's Jobs.
pub fn owned_selector() -> String {
    format!("{}={}", MANAGED_BY.0, MANAGED_BY.1)
}

impl OwnedJobs {
    fn store(&self) -> Store<Job> {
        self.current
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Starts a fresh store and returns the watch that fills it: every Job
    /// with the operator's label in `namespace`. Each item is a Job that
    /// changed, yielded after the store has it, so a reconcile it triggers
    /// sees the change. The store is only filled while the stream is polled.
    pub fn watch(
        &self,
        client: Client,
        namespace: &str,
    ) -> impl Stream<Item = Result<Job, watcher::Error>> + Send + 'static {
        let (store, writer) = reflector::store();
        *self.current.lock().unwrap_or_else(PoisonError::into_inner) = store;
        let api: Api<Job> = Api::namespaced(client, namespace);
        watcher(api, watcher::Config::default().labels(&owned_selector()))
            .default_backoff()
            .reflect(writer)
            .touched_objects()
    }

    /// The cached Jobs, waiting up to `within` for the watch's first
    /// listing.
    pub async fn jobs(&self, within: Duration) -> Result<Vec<Arc<Job>>, CacheError> {
        let store = self.store();
        match tokio::time::timeout(within, store.wait_until_ready()).await {
            Ok(Ok(())) => Ok(store.state()),
            Ok(Err(_dropped)) => Err(CacheError::NotSynced {
                reason: "no watch fills it (OwnedJobs::watch is not running)".into(),
            }),
            Err(_elapsed) => Err(CacheError::NotSynced {
                reason: format!(
                    "the first listing has not arrived within {} ms",
                    within.as_millis()
                ),
            }),
        }
    }

    /// The cached Jobs as they are now, without waiting (empty before the
    /// first listing); for tests that wait for the cache to catch up.
    pub fn snapshot(&self) -> Vec<Arc<Job>> {
        self.store().state()
    }
}
