//! One reconcile of the index ConfigMap: decide, then act.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::PostParams;
use kube::runtime::controller::Action;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::{Api, Client, Resource, ResourceExt};
use migration_core::{Clock, EntryState, Ledger, LedgerEntry, WriteMode};

use crate::*;

/// Everything the reconciler needs.
pub struct Context {
    /// The API client.
    pub client: Client,
    /// The ledger.
    pub ledger: Arc<dyn Ledger>,
    /// Settings.
    pub config: OperatorConfig,
    /// Time source.
    pub clock: Arc<dyn Clock>,
    /// Event recorder.
    pub recorder: Recorder,
    /// Called with (reason, message) when the readiness changes, for
    /// backends that keep conditions.
    pub conditions: Option<Arc<dyn ConditionReporter>>,
    /// The operator's Jobs, kept by the watch [`run_controller`] runs
    /// (tests that call [`reconcile()`] directly drive
    /// [`OwnedJobs::watch`] themselves).
    pub jobs: OwnedJobs,
}

impl Context {
    /// A context with an event recorder reporting as `reporter_instance`.
    pub fn new(
        client: Client,
        ledger: Arc<dyn Ledger>,
        config: OperatorConfig,
        clock: Arc<dyn Clock>,
        instance: &str,
    ) -> Self {
        let reporter = Reporter {
            controller: OPERATOR_NAME.into(),
            instance: Some(instance.to_owned()),
        };
        let recorder = Recorder::new(client.clone(), reporter);
        Context {
            client,
            ledger,
            config,
            clock,
            recorder,
            conditions: None,
            jobs: OwnedJobs::default(),
        }
    }
}

/// Why a reconcile failed (it is retried by the controller).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OperatorError {
    /// The Kubernetes API failed.
    #[error("kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    /// The ledger failed.
    #[error(transparent)]
    Ledger(#[from] migration_core::LedgerError),
    /// The index is unusable.
    #[error(transparent)]
    Index(#[from] IndexError),
    /// A record could not be confirmed.
    #[error(transparent)]
    Record(#[from] migration_core::MigrateError),
    /// The Job for the next attempt cannot be built.
    #[error(transparent)]
    Job(#[from] JobError),
    /// The cached Jobs cannot be used yet.
    #[error(transparent)]
    Cache(#[from] CacheError),
}

async fn event(ctx: &Context, cm: &ConfigMap, type_: EventType, reason: &str, note: String) {
    let ev = Event {
        type_,
        reason: reason.into(),
        note: Some(note),
        action: "Reconcile".into(),
        secondary: None,
    };
    if let Err(e) = ctx.recorder.publish(&ev, &cm.object_ref(&())).await {
        tracing::warn!(error = %e, reason, "could not publish event");
    }
}

async fn condition(ctx: &Context, reason: &'static str, ready: bool, message: String) {
    if let Some(reporter) = &ctx.conditions {
        reporter.report(reason, ready, message).await;
    }
}

/// Reports `slug` running in the Job `job` and polls again: waiting on a
/// Job and having just created (or adopted) one end alike.
async fn running(
    ctx: &Context,
    slug: impl std::fmt::Display,
    job: impl std::fmt::Display,
) -> Result<Action, OperatorError> {
    let message = format!("{slug} is running in job {job}");
    condition(ctx, "MigrationRunning", false, message).await;
    Ok(Action::requeue(ctx.config.poll))
}

/// One reconcile of the index ConfigMap: decide, then act.
pub async fn reconcile(cm: Arc<ConfigMap>, ctx: Arc<Context>) -> Result<Action, OperatorError> {
    let config = &ctx.config;
    let index = match Index::from_configmap(&cm) {
        Ok(index) => index,
        Err(e) => {
            tracing::error!(error = %e, "index unusable; doing nothing until it is fixed");
            event(&ctx, &cm, EventType::Warning, "IndexInvalid", e.to_string()).await;
            condition(&ctx, "IndexInvalid", false, e.to_string()).await;
            return Err(e.into());
        }
    };
    // From the watch's store, not a LIST: at most `poll` for the first
    // listing after a (re)start, then no request at all.
    let jobs: Vec<JobView> = ctx
        .jobs
        .jobs(config.poll)
        .await?
        .iter()
        .filter_map(|job| JobView::from_job(job))
        .collect();
    let snapshot = ctx.ledger.read().await?;
    let now = ctx.clock.now();
    let decision = decide(&index, snapshot.as_ref(), &jobs, now, &config.retries);
    match decision {
        Decision::Idle => {
            tracing::info!(
                slugs = index.slugs.len(),
                "decision: idle, every background migration is recorded"
            );
            condition(
                &ctx,
                "AllMigrationsDone",
                true,
                format!("{} background migrations recorded", index.slugs.len()),
            )
            .await;
            Ok(Action::requeue(config.poll * 10))
        }
        Decision::Wait { slug, job } => {
            tracing::info!(%slug, %job, "decision: wait for the running job");
            running(&ctx, &slug, &job).await
        }
        Decision::Create { slug, attempt } => {
            let job = job_for(config, &index, &cm, &slug, attempt)?;
            let name = job.name_any();
            let jobs_api: Api<Job> = Api::namespaced(ctx.client.clone(), &config.namespace);
            match jobs_api.create(&PostParams::default(), &job).await {
                Ok(_) => {
                    tracing::info!(%slug, attempt, job = %name, "decision: create job");
                    event(
                        &ctx,
                        &cm,
                        EventType::Normal,
                        "JobCreated",
                        format!("running {slug} (attempt {attempt}) in job {name}"),
                    )
                    .await;
                }
                // Another replica or an earlier life of this one got there: adopt it.
                Err(kube::Error::Api(s)) if s.code == 409 => {
                    tracing::info!(%slug, job = %name, "decision: adopt existing job");
                }
                Err(e) => return Err(e.into()),
            }
            running(&ctx, &slug, &name).await
        }
        Decision::Backoff {
            slug,
            until,
            failures,
        } => {
            let wait = until.since(now).max(Duration::from_secs(1));
            tracing::info!(%slug, failures, %until, "decision: back off before retrying");
            condition(
                &ctx,
                "BackingOff",
                false,
                format!("{slug} failed {failures} time(s); retrying after {until}"),
            )
            .await;
            Ok(Action::requeue(wait))
        }
        Decision::GiveUp {
            slug,
            failures,
            message,
        } => {
            let attempts = snapshot
                .as_ref()
                .and_then(|s| s.attempts_started.get(&slug).copied())
                .unwrap_or(failures);
            let entry = LedgerEntry {
                reason: Some("retries-exhausted".into()),
                message: Some(format!("{failures} job(s) failed; last: {message}")),
                image: Some(index.image.clone()),
                attempts,
                ..LedgerEntry::new(EntryState::Failed, now.truncated())
            };
            // The same recording path as the runner's: a lost reply is
            // reconciled by reading back, never assumed either way.
            let written = migration_core::migrator::record(
                ctx.ledger.as_ref(),
                &slug,
                &entry,
                WriteMode::OnlyIfAbsent,
            )
            .await?;
            tracing::warn!(%slug, failures, written, "decision: give up; recorded failed, not retrying");
            event(&ctx, &cm, EventType::Warning, "RetriesExhausted", format!("{slug} failed {failures} time(s); recorded failed; re-run by hand with ONLY={slug}")).await;
            condition(
                &ctx,
                "RetriesExhausted",
                false,
                format!("{slug} failed {failures} time(s)"),
            )
            .await;
            Ok(Action::requeue(Duration::from_secs(1)))
        }
        Decision::Blocked { slug, reason } => {
            tracing::error!(%slug, %reason, "decision: blocked by an unreadable ledger entry");
            event(
                &ctx,
                &cm,
                EventType::Warning,
                "CorruptEntry",
                reason.clone(),
            )
            .await;
            condition(&ctx, "CorruptEntry", false, reason).await;
            Ok(Action::requeue(config.poll * 5))
        }
    }
}

/// How the controller treats a failed reconcile: retry after a pause.
pub fn error_policy(_cm: Arc<ConfigMap>, error: &OperatorError, ctx: Arc<Context>) -> Action {
    tracing::warn!(%error, "reconcile failed; retrying");
    Action::requeue(ctx.config.poll)
}
