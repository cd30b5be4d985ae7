//! The controller loop: watches and reconciles.

use std::future::ready;
use std::sync::Arc;

use futures_util::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::runtime::{Controller, watcher};

use crate::*;

/// Runs the controller: watches the index ConfigMap and the Jobs the
/// operator owns, and reconciles on every change (and on requeue timers).
///
/// The Jobs are watched once, through [`Context::jobs`]: the same watch fills
/// the store reconcile reads and triggers the reconcile, after the store has
/// the change. The controller's only object is the index (selected by
/// name), so a Job change reconciles it, as an owner reference would.
pub async fn run_controller(ctx: Arc<Context>) {
    let config = &ctx.config;
    let indexes: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), &config.namespace);
    let job_changes = ctx
        .jobs
        .watch(ctx.client.clone(), &config.namespace)
        .filter_map(|change| {
            ready(match change {
                Ok(_job) => Some(()),
                Err(e) => {
                    tracing::warn!(error = %e, "watching the operator's Jobs failed; retrying");
                    None
                }
            })
        });
    Controller::new(
        indexes,
        watcher::Config::default().fields(&format!("metadata.name={}", config.index_name)),
    )
    .reconcile_all_on(job_changes)
    .run(reconcile, error_policy, ctx.clone())
    .for_each(|result| async move {
        if let Err(e) = result {
            tracing::debug!(error = %e, "controller event");
        }
    })
    .await;
}
