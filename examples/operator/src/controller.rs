//! The controller loop: watches, and one reconcile per wake-up.

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use futures_util::stream::{self, BoxStream};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, ResourceExt};

use crate::*;

/// A watch reduced to "something changed"; its errors are logged (the
/// watcher's backoff retries them).
fn changes<K, S>(what: &'static str, events: S) -> BoxStream<'static, ()>
where
    S: futures_util::Stream<Item = Result<K, watcher::Error>> + Send + 'static,
{
    events
        .filter_map(move |change| {
            std::future::ready(match change {
                Ok(_) => Some(()),
                Err(e) => {
                    tracing::warn!(error = %e, "watching {what} failed; retrying");
                    None
                }
            })
        })
        .boxed()
}

/// The ledger's changes: a repaired entry, a manual `ONLY` re-run or a
/// deleted ledger wakes the operator at once instead of at its next timer.
fn ledger_changes(ctx: &Context) -> BoxStream<'static, ()> {
    match &ctx.config.ledger_object {
        Some(LedgerObject::ConfigMap { namespace, name }) => {
            let api: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), namespace);
            let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
            changes("the ledger", watcher(api, config).default_backoff())
        }
        Some(LedgerObject::Crd { name }) => {
            let api: Api<ledger_crd::MigrationLedger> = Api::all(ctx.client.clone());
            let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
            changes("the ledger", watcher(api, config).default_backoff())
        }
        None => stream::pending().boxed(),
    }
}

/// Runs the controller until it is dropped: watches the index ConfigMap,
/// the Jobs the operator labels as its own, and the ledger, and reconciles
/// after every change they bring (several changes that arrive together
/// make one reconcile), and when the last reconcile's timer runs out.
///
/// The index is read from its watch's store: when it does not exist the
/// operator says so ([`index_missing`]) instead of falling silent.
pub async fn run_controller(ctx: Arc<Context>) {
    let config = &ctx.config;
    ctx.begin_term();
    ctx.metrics.set_leader(true);
    let _follower = Follower(ctx.metrics.clone());
    let indexes: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), &config.namespace);
    let (index_store, writer) = reflector::store();
    let index_changes = changes(
        "the index",
        watcher(
            indexes,
            watcher::Config::default().fields(&format!("metadata.name={}", config.index_name)),
        )
        .default_backoff()
        .reflect(writer)
        .touched_objects(),
    );
    let job_changes = changes(
        "the operator's Jobs",
        ctx.jobs.watch(ctx.client.clone(), &config.namespace),
    );
    // The watches run on their own task: they fill the stores a reconcile
    // reads, so they must go on while it runs. A change only leaves a
    // permit; changes that arrive together make one reconcile.
    let changed = Arc::new(tokio::sync::Notify::new());
    let watches = {
        let changed = changed.clone();
        let triggers = stream::select_all([index_changes, job_changes, ledger_changes(&ctx)]);
        AbortOnDrop(tokio::spawn(triggers.for_each(move |()| {
            changed.notify_one();
            std::future::ready(())
        })))
    };
    let mut wait: Option<Duration> = None;
    loop {
        match wait {
            None => changed.notified().await,
            Some(d) => tokio::select! {
                () = changed.notified() => {}
                () = tokio::time::sleep(d) => {}
            },
        }
        if watches.0.is_finished() {
            tracing::error!("the watches ended; stopping the controller");
            return;
        }
        wait = Some(once(&ctx, &index_store).await);
    }
}

/// Stops the watches when the controller stops (leadership lost, shutdown).
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// One reconcile on the index as the store holds it; the time to wait
/// before the next one unless something changes.
async fn once(ctx: &Arc<Context>, index_store: &Store<ConfigMap>) -> Duration {
    let ready = tokio::time::timeout(ctx.config.poll, index_store.wait_until_ready()).await;
    if !matches!(ready, Ok(Ok(()))) {
        return Duration::from_secs(1);
    }
    let index = index_store.find(|cm| cm.name_any() == ctx.config.index_name);
    match index {
        Some(cm) => match reconcile(cm, ctx.clone()).await {
            Ok(wait) => wait,
            Err(e) => failed(&e, ctx).await,
        },
        None => index_missing(ctx).await,
    }
}

/// Marks the replica a follower again when its controller stops.
struct Follower(Arc<Metrics>);

impl Drop for Follower {
    fn drop(&mut self) {
        self.0.set_leader(false);
    }
}
