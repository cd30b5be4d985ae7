//! An in-process Kubernetes API server double for tests.
//!
//! It speaks real HTTP/1.1 on `127.0.0.1` (a random port), so code under test talks to it through
//! a real [`kube::Client`]: requests are serialised, sent and decoded exactly as against a
//! cluster. It models the API server behaviours a storage backend or an operator depends on
//! (resourceVersion preconditions, `Status` errors, patch content types, status subresources,
//! size limits, list/watch with history and `410 Gone`) and adds what a real cluster cannot give a
//! test: programmable faults and request counters. See the crate's `README.md` for exactly what is
//! and is not modelled.
//!
//! ```no_run
//! # async fn demo() {
//! use test_apiserver::{FaultRule, TestApiServer, Verb};
//!
//! let server = TestApiServer::start().await;
//! let client = server.client();
//! server
//!     .faults()
//!     .inject(FaultRule::on(Verb::Patch, "configmaps").once().respond(409, "Conflict"));
//! // ... drive code under test with `client` ...
//! assert_eq!(server.requests().count(Verb::Patch, "configmaps"), 1);
//! # drop(client);
//! # }
//! ```
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

mod error;
mod faults;
mod patch;
pub mod real;
mod resource;
mod select;
mod server;
mod store;

use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use serde_json::Value;
use tokio::net::TcpListener;
use tokio::sync::watch;

pub use faults::{
    Action, FaultRule, Faults, LostReply, RequestRecord, Requests, RuleId, Verb, When,
};

use resource::ResourceDef;
use server::Shared;
use store::{Limits, Store};

/// Default bound on one stored object's serialised size: etcd's default `--max-request-bytes`.
pub const DEFAULT_MAX_OBJECT_BYTES: usize = 1_572_864;

/// Default number of changes kept for watches that resume from an older resourceVersion.
pub const DEFAULT_HISTORY_LIMIT: usize = 1000;

/// Options for [`TestApiServer`]; start with [`TestApiServer::builder`].
#[derive(Debug, Clone)]
pub struct Builder {
    max_object_bytes: usize,
    history_limit: usize,
    bookmark_interval: Duration,
}

impl Default for Builder {
    fn default() -> Self {
        Self {
            max_object_bytes: DEFAULT_MAX_OBJECT_BYTES,
            history_limit: DEFAULT_HISTORY_LIMIT,
            bookmark_interval: Duration::from_secs(10),
        }
    }
}

impl Builder {
    /// Objects whose serialised JSON exceeds this are refused as etcd refuses them
    /// (default [`DEFAULT_MAX_OBJECT_BYTES`]).
    pub fn max_object_bytes(mut self, bytes: usize) -> Self {
        self.max_object_bytes = bytes;
        self
    }

    /// How many changes the watch history keeps (default [`DEFAULT_HISTORY_LIMIT`]); a watch that
    /// resumes from before the oldest kept change gets `410 Expired`.
    pub fn history_limit(mut self, changes: usize) -> Self {
        self.history_limit = changes.max(1);
        self
    }

    /// How often a watch with `allowWatchBookmarks=true` gets a BOOKMARK (default 10 s; a real
    /// server sends one about every minute, and one before a timed-out watch closes).
    pub fn bookmark_interval(mut self, every: Duration) -> Self {
        self.bookmark_interval = every.max(Duration::from_millis(1));
        self
    }

    /// Binds `127.0.0.1:0` and serves on the current tokio runtime.
    ///
    /// # Errors
    /// If the listener cannot be bound.
    pub async fn start(self) -> io::Result<TestApiServer> {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let (changes, _) = watch::channel(0);
        let (shutdown, _) = watch::channel(false);
        let shared = Arc::new(Shared {
            store: Mutex::new(Store::new(Limits {
                history: self.history_limit,
                max_object_bytes: self.max_object_bytes,
            })),
            changes,
            shutdown,
            faults: Faults::default(),
            requests: Requests::default(),
            bookmark_interval: self.bookmark_interval,
        });
        tokio::spawn(accept_loop(listener, Arc::clone(&shared)));
        Ok(TestApiServer { shared, addr })
    }
}

async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    let mut shutdown = shared.shutdown.subscribe();
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                // Transient accept failures (fd exhaustion) should not kill the server.
                Err(_) => continue,
            },
            _ = shutdown.changed() => return,
        };
        let shared = Arc::clone(&shared);
        tokio::spawn(async move {
            let mut shutdown = shared.shutdown.subscribe();
            let service = {
                let shared = Arc::clone(&shared);
                service_fn(move |req| server::handle(Arc::clone(&shared), req))
            };
            let conn = http1::Builder::new().serve_connection(TokioIo::new(stream), service);
            tokio::pin!(conn);
            tokio::select! {
                _ = conn.as_mut() => {}
                _ = shutdown.changed() => {
                    conn.as_mut().graceful_shutdown();
                    let _ = conn.await;
                }
            }
        });
    }
}

/// A running test API server. Dropping it stops the server: the listener closes, open watches
/// end, and idle connections are shut down.
#[derive(Debug)]
pub struct TestApiServer {
    shared: Arc<Shared>,
    addr: SocketAddr,
}

impl Drop for TestApiServer {
    fn drop(&mut self) {
        self.shared.shutdown.send_replace(true);
    }
}

impl TestApiServer {
    /// Starts a server with default options on the current tokio runtime.
    ///
    /// # Panics
    /// If no loopback port can be bound (use [`Builder::start`] to handle that).
    pub async fn start() -> Self {
        match Builder::default().start().await {
            Ok(server) => server,
            Err(err) => panic!("test-apiserver: cannot bind 127.0.0.1:0: {err}"),
        }
    }

    /// Options for a server that does not use the defaults.
    pub fn builder() -> Builder {
        Builder::default()
    }

    /// The address the server listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// A client configuration for this server: no auth, default namespace `default`, and kube's
    /// defaults otherwise (including its built-in retry of 429/503/504). Adjust fields and build a
    /// client with `kube::Client::try_from(config)`.
    pub fn config(&self) -> kube::Config {
        let uri = match self.url().parse() {
            Ok(uri) => uri,
            Err(err) => panic!("test-apiserver: own url does not parse: {err}"),
        };
        kube::Config::new(uri)
    }

    /// A real [`kube::Client`] for this server, from [`config`](Self::config).
    ///
    /// # Panics
    /// If kube cannot build a client from the configuration.
    pub fn client(&self) -> kube::Client {
        match kube::Client::try_from(self.config()) {
            Ok(client) => client,
            Err(err) => panic!("test-apiserver: cannot build a kube::Client: {err}"),
        }
    }

    /// Serves a custom resource at `/apis/{group}/{version}/[namespaces/{ns}/]{plural}`, as an
    /// established CRD would. Registering several versions of one group/plural makes them share
    /// storage (conversion strategy `None`: only `apiVersion` changes).
    pub fn register_custom_resource(
        &self,
        group: &str,
        version: &str,
        plural: &str,
        kind: &str,
        namespaced: bool,
        status_subresource: bool,
    ) {
        let def = ResourceDef::builtin(group, version, plural, kind, namespaced)
            .custom(status_subresource);
        self.shared.store().register(def);
    }

    /// The fault-injection rules; see [`FaultRule`].
    pub fn faults(&self) -> Faults {
        self.shared.faults.clone()
    }

    /// The request log and counters.
    pub fn requests(&self) -> Requests {
        self.shared.requests.clone()
    }

    /// The current global resourceVersion (the one a list would report).
    pub fn resource_version(&self) -> u64 {
        self.shared.store().rv()
    }

    /// Forgets the watch history, so a watch or continued list from any older resourceVersion
    /// gets `410 Expired`, as after an etcd compaction.
    pub fn compact_history(&self) {
        self.shared.store().compact();
    }

    /// A stored object, read directly (no HTTP, not counted). `resource` is `"configmaps"`,
    /// `"leases"`, `"jobs"`, or `plural.group` (`"events.events.k8s.io"`; a bare plural prefers the
    /// core group); `namespace` is ignored for cluster-scoped resources.
    pub fn object(&self, resource: &str, namespace: &str, name: &str) -> Option<Value> {
        let store = self.shared.store();
        let res = store.lookup_name(resource)?;
        store.raw(&res, namespace, name)
    }

    /// Every stored object of a resource (all namespaces), read directly.
    pub fn objects(&self, resource: &str) -> Vec<Value> {
        let store = self.shared.store();
        store
            .lookup_name(resource)
            .map(|res| store.all(&res))
            .unwrap_or_default()
    }

    /// Stores `object` as-is, bypassing validation, size limits and strategies (to plant corrupt
    /// or oversized state). Fills `uid` and `creationTimestamp` if absent, assigns a new
    /// resourceVersion, and notifies watchers. Returns the stored object.
    ///
    /// # Errors
    /// If the resource is unknown or the object lacks `metadata.name` (or `metadata.namespace` for
    /// a namespaced resource).
    pub fn put_object(&self, resource: &str, object: Value) -> Result<Value, String> {
        let stored = {
            let mut store = self.shared.store();
            let res = store
                .lookup_name(resource)
                .ok_or_else(|| format!("unknown resource {resource:?}"))?;
            store.put_raw(&res, object)?
        };
        self.shared.notify();
        Ok(stored)
    }

    /// Replaces a Job's `.status` as the Job controller would (no precondition), e.g.
    /// `json!({"succeeded": 1, "conditions": [{"type": "Complete", "status": "True"}]})`.
    /// Watchers see a MODIFIED event. Returns the stored Job.
    ///
    /// # Errors
    /// If the Job does not exist.
    pub fn set_job_status(
        &self,
        namespace: &str,
        name: &str,
        status: Value,
    ) -> Result<Value, String> {
        self.set_status("jobs", namespace, name, status)
    }

    /// Replaces any object's `.status` as its controller would (no precondition).
    ///
    /// # Errors
    /// If the resource or the object does not exist.
    pub fn set_status(
        &self,
        resource: &str,
        namespace: &str,
        name: &str,
        status: Value,
    ) -> Result<Value, String> {
        let stored = {
            let mut store = self.shared.store();
            let res = store
                .lookup_name(resource)
                .ok_or_else(|| format!("unknown resource {resource:?}"))?;
            store
                .set_status(&res, namespace, name, status)
                .map_err(|e| e.message)?
        };
        self.shared.notify();
        Ok(stored)
    }
}
