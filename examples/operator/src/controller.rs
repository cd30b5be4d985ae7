//! The controller loop: watches and reconciles.

use std::sync::Arc;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;

use crate::*;

/// Runs the controller: watches the index ConfigMap and the Jobs the
/// operator owns, and reconciles on every change (and on requeue timers).
pub async fn run_controller(ctx: Arc<Context>) {
    use futures_util::StreamExt;
    use kube::runtime::watcher;
    let config = &ctx.config;
    let indexes: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), &config.namespace);
    let jobs: Api<Job> = Api::namespaced(ctx.client.clone(), &config.namespace);
    kube::runtime::Controller::new(
        indexes,
        watcher::Config::default().fields(&format!("metadata.name={}", config.index_name)),
    )
    .owns(
        jobs,
        watcher::Config::default().labels(&format!("{}={}", MANAGED_BY.0, MANAGED_BY.1)),
    )
    .run(reconcile, error_policy, ctx.clone())
    .for_each(|result| async move {
        if let Err(e) = result {
            tracing::debug!(error = %e, "controller event");
        }
    })
    .await;
}
