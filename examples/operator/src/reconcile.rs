//! One reconcile of the index ConfigMap: decide, then act, then say what
//! was done (Events, a condition, the status ConfigMap, metrics).

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, ObjectReference, Pod};
use kube::api::{ListParams, PostParams};
use kube::runtime::events::{EventType, Reporter};
use kube::{Api, Client, ResourceExt};
use migration_core::give_up::{GiveUp, give_up_entry};
use migration_core::ledger::{LedgerSnapshot, Record};
use migration_core::{Clock, EntryState, Ledger, WriteMode};
use serde_json::json;

use crate::status::{JOB_PREFIX, STATUS_KEY, decode_attempt, encode_attempt};
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
    /// Who publishes the Events: this operator, as replica `instance`.
    reporter: Reporter,
    /// Where the condition goes on ledgers that keep conditions (the
    /// `MigrationLedger`), besides the status ConfigMap every ledger gets.
    pub conditions: Option<Arc<dyn ConditionReporter>>,
    /// The operator's Jobs, kept by the watch [`run_controller`] runs
    /// (tests that call [`reconcile()`] directly drive
    /// [`OwnedJobs::watch`] themselves).
    pub jobs: OwnedJobs,
    /// The status ConfigMap: condition, figures, attempt history.
    pub status: StatusStore,
    /// The metrics this process serves.
    pub metrics: Arc<Metrics>,
    /// Events this process has published (reason, object, note), so that
    /// a decision taken again on every wake-up is announced once rather
    /// than folded into a series by the recorder.
    published: Mutex<HashSet<String>>,
    /// The Job this process created last, until the Job cache shows it:
    /// the cache lags a create by a moment, and a decision taken in that
    /// moment must still see the Job as running.
    created: Mutex<Option<String>>,
}

impl Context {
    /// A context with an event recorder reporting as `instance`.
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
        let status = StatusStore::new(client.clone(), &config.namespace, &config.status_name);
        Context {
            client,
            ledger,
            config,
            clock,
            reporter,
            conditions: None,
            jobs: OwnedJobs::default(),
            status,
            metrics: Arc::new(Metrics::default()),
            published: Mutex::new(HashSet::new()),
            created: Mutex::new(None),
        }
    }

    /// Starts a leadership term: what an earlier term read or announced
    /// is not trusted.
    pub fn begin_term(&self) {
        self.status.forget();
        self.published
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
        *self.created.lock().unwrap_or_else(PoisonError::into_inner) = None;
    }

    /// A reference to the index ConfigMap, which need not exist (an Event
    /// about a missing index regards it by name).
    fn index_ref(&self) -> ObjectReference {
        ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("ConfigMap".into()),
            name: Some(self.config.index_name.clone()),
            namespace: Some(self.config.namespace.clone()),
            ..ObjectReference::default()
        }
    }

    /// A reference to Job `name`, which need not exist any more; with its
    /// `uid` when known, so that a Job re-created under the same name is
    /// another object to its Events.
    fn job_ref(&self, name: &str, uid: Option<String>) -> ObjectReference {
        ObjectReference {
            api_version: Some("batch/v1".into()),
            kind: Some("Job".into()),
            name: Some(name.to_owned()),
            namespace: Some(self.config.namespace.clone()),
            uid,
            ..ObjectReference::default()
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
    /// The cached Jobs cannot be used yet.
    #[error(transparent)]
    Cache(#[from] CacheError),
    /// The status ConfigMap holds an attempt record this version cannot
    /// read: counting without it could retry a slug past its limit.
    #[error("status ConfigMap {name}: key {key}: unreadable attempt record: {excerpt}")]
    History {
        /// The status ConfigMap.
        name: String,
        /// The key.
        key: String,
        /// The start of its value.
        excerpt: String,
    },
}

/// Publishes an Event regarding `regarding`, once per (reason, object,
/// note) in this leadership term: each Job, each outcome, each distinct
/// cause its own Event.
///
/// Written here rather than with kube's `Recorder`: the recorder folds
/// every Event of one (object, reason) into the first as a series, keeping
/// the first one's note, so a second cause or a re-created Job would read
/// as the first.
async fn event(
    ctx: &Context,
    regarding: &ObjectReference,
    type_: EventType,
    reason: &str,
    note: String,
) {
    let key = format!(
        "{reason}\u{0}{}\u{0}{}\u{0}{note}",
        regarding.name.as_deref().unwrap_or_default(),
        regarding.uid.as_deref().unwrap_or_default()
    );
    if !ctx
        .published
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .insert(key.clone())
    {
        return;
    }
    let now = k8s_openapi::jiff::Timestamp::now();
    let object = regarding.name.as_deref().unwrap_or(OPERATOR_NAME);
    let ev = k8s_openapi::api::events::v1::Event {
        metadata: kube::api::ObjectMeta {
            name: Some(format!("{object}.{:x}", now.as_nanosecond())),
            namespace: Some(ctx.config.namespace.clone()),
            ..Default::default()
        },
        action: Some("Reconcile".into()),
        reason: Some(reason.into()),
        note: Some(cut_note(&note).to_owned()),
        regarding: Some(regarding.clone()),
        event_time: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(
            now,
        )),
        reporting_controller: Some(ctx.reporter.controller.clone()),
        reporting_instance: Some(
            ctx.reporter
                .instance
                .clone()
                .unwrap_or_else(|| ctx.reporter.controller.clone()),
        ),
        type_: Some(
            match type_ {
                EventType::Normal => "Normal",
                EventType::Warning => "Warning",
            }
            .into(),
        ),
        ..Default::default()
    };
    let api: Api<k8s_openapi::api::events::v1::Event> =
        Api::namespaced(ctx.client.clone(), &ctx.config.namespace);
    if let Err(e) = api.create(&PostParams::default(), &ev).await {
        if forbidden(&e) {
            tracing::warn!(error = %e, reason, "missing right: create events (events.k8s.io); the Event is not published");
        } else {
            tracing::warn!(error = %e, reason, "could not publish event");
        }
        // Not published: try again on the next decision.
        ctx.published
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&key);
    }
}

/// `note` cut to what the API server takes (1 kB), at a character boundary.
fn cut_note(note: &str) -> &str {
    let mut end = note.len().min(1024);
    while !note.is_char_boundary(end) {
        end -= 1;
    }
    &note[..end]
}

/// Whether the API server refused the request for want of a right.
fn forbidden(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 403)
}

/// Says what keeps the queue from running: a Warning Event about
/// `regarding`, then the condition `reason` (not ready) with `message`.
async fn warn(
    ctx: &Context,
    regarding: &ObjectReference,
    reason: &'static str,
    message: String,
    summary: Option<Summary>,
) -> Result<(), OperatorError> {
    event(ctx, regarding, EventType::Warning, reason, message.clone()).await;
    report(ctx, reason, false, message, summary).await
}

/// Reports the readiness: on the `MigrationLedger` when the ledger is one,
/// and in the status ConfigMap (for every ledger), with the queue's figures.
async fn report(
    ctx: &Context,
    reason: &'static str,
    ready: bool,
    message: String,
    summary: Option<Summary>,
) -> Result<(), OperatorError> {
    if let Some(reporter) = &ctx.conditions {
        reporter.report(reason, ready, message.clone()).await;
    }
    if let Some(summary) = summary {
        ctx.metrics.set_summary(summary);
    }
    let data = ctx.status.data().await?;
    let previous: Option<serde_json::Value> = data
        .get(STATUS_KEY)
        .and_then(|raw| serde_json::from_str(raw).ok());
    let status = if ready { "True" } else { "False" };
    // The transition time moves only when the status does, as a
    // Kubernetes condition's does.
    let since = previous
        .as_ref()
        .filter(|p| p["status"] == status)
        .and_then(|p| p["lastTransitionTime"].as_str().map(str::to_owned))
        .unwrap_or_else(|| ctx.clock.now().truncated().to_string());
    let mut value = json!({
        "type": OPERATOR_CONDITION,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": since,
    });
    // Figures of the last decision that had them (a missing index has none).
    let figures = summary.map(|q| {
        json!({
            "pending": q.pending,
            "running": q.running,
            "failed": q.failed,
            "notYet": q.not_yet,
            "lastSuccess": q.last_success.map(|t| migration_core::Timestamp::from_unix(t).to_string()),
        })
    });
    if let Some(f) = figures.or_else(|| previous.and_then(|p| p.get("queue").cloned())) {
        value["queue"] = f;
    }
    let changes = BTreeMap::from([(STATUS_KEY.to_owned(), Some(value.to_string()))]);
    ctx.status.update(&changes).await?;
    Ok(())
}

/// The queue's figures, from the same inputs as the decision.
pub fn summarize(index: &Index, ledger: Option<&LedgerSnapshot>, jobs: &[JobView]) -> Summary {
    let mut q = Summary {
        running: jobs.iter().filter(|j| j.state == JobState::Active).count() as u64,
        ..Summary::default()
    };
    for slug in index.slugs.iter().filter(|s| !index.revoked.contains(s)) {
        match ledger.and_then(|l| l.record(slug)) {
            None | Some(Record::Corrupt(_)) => q.pending += 1,
            Some(Record::Entry(e)) => match e.state {
                EntryState::Failed => q.failed += 1,
                EntryState::NotYet => q.not_yet += 1,
                EntryState::Ok => {
                    let at = e.at.unix_seconds();
                    q.last_success = Some(q.last_success.map_or(at, |t| t.max(at)));
                }
                _ => {}
            },
        }
    }
    q
}

/// Whether `slug`'s attempts need no remembering: its record ends its
/// queue position for good, and not as a failure. A `not-yet` asks to be
/// run again; a `failed` one keeps its history, so that a deleted `failed`
/// entry is decided from the attempts this operator saw (given up again at
/// once), not from whether their Jobs are still there.
fn settled(ledger: Option<&LedgerSnapshot>, slug: &migration_core::Slug) -> bool {
    matches!(ledger.and_then(|l| l.record(slug)), Some(Record::Entry(e)) if e.state != EntryState::NotYet && e.state != EntryState::Failed)
}

/// The end of a failed Job's output: its pod's terminated container's
/// message (the kubelet fills it from the log, `FallbackToLogsOnError`).
/// Best effort: the tail explains a failure, it decides nothing.
async fn output_tail(ctx: &Context, job: &str) -> Option<String> {
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &ctx.config.namespace);
    let list = match pods
        .list(&ListParams::default().labels(&format!("batch.kubernetes.io/job-name={job}")))
        .await
    {
        Ok(list) => list,
        Err(e) => {
            tracing::warn!(%job, error = %e, "cannot read the failed Job's pod for its output tail");
            return None;
        }
    };
    list.items
        .iter()
        .flat_map(|p| p.status.iter())
        .flat_map(|s| s.container_statuses.iter().flatten())
        .filter_map(|c| c.state.as_ref()?.terminated.as_ref()?.message.clone())
        .find(|m| !m.trim().is_empty())
}

/// The attempts to decide on: the Jobs that exist, and the finished ones
/// the status ConfigMap remembers (a Job deleted by its TTL or by hand
/// still counts). Newly finished Jobs of slugs not settled (see
/// [`settled`]) are remembered first, with their output tail; records of
/// settled slugs are dropped.
async fn attempts(
    ctx: &Context,
    live: Vec<JobView>,
    ledger: Option<&LedgerSnapshot>,
) -> Result<Vec<JobView>, OperatorError> {
    let data = ctx.status.data().await?;
    let mut all: BTreeMap<String, JobView> = BTreeMap::new();
    for (key, raw) in data.iter().filter(|(k, _)| k.starts_with(JOB_PREFIX)) {
        let view = decode_attempt(key, raw).ok_or_else(|| OperatorError::History {
            name: ctx.config.status_name.clone(),
            key: key.clone(),
            excerpt: raw.chars().take(80).collect(),
        })?;
        all.insert(view.name.clone(), view);
    }
    let mut changes = BTreeMap::new();
    for mut job in live {
        let known = all.get(&job.name);
        if job.state == JobState::Active || settled(ledger, &job.slug) {
            all.insert(job.name.clone(), job);
            continue;
        }
        match known {
            Some(k) if k.state == job.state => {
                job.output_tail = k.output_tail.clone();
            }
            _ => {
                if matches!(job.state, JobState::Failed(..)) {
                    job.output_tail = output_tail(ctx, &job.name).await;
                }
                if let Some(raw) = encode_attempt(&job) {
                    changes.insert(format!("{JOB_PREFIX}{}", job.name), Some(raw));
                }
            }
        }
        all.insert(job.name.clone(), job);
    }
    for (name, job) in &all {
        if settled(ledger, &job.slug) && data.contains_key(&format!("{JOB_PREFIX}{name}")) {
            changes.insert(format!("{JOB_PREFIX}{name}"), None);
        }
    }
    if !changes.is_empty() {
        ctx.status.update(&changes).await?;
    }
    Ok(all.into_values().collect())
}

/// Reports `slug` running in the Job `job` and polls again: waiting on a
/// Job and having just created (or adopted) one end alike.
async fn running(
    ctx: &Context,
    slug: impl std::fmt::Display,
    job: impl std::fmt::Display,
    summary: Summary,
) -> Result<Duration, OperatorError> {
    let message = format!("{slug} is running in job {job}");
    report(ctx, "MigrationRunning", false, message, Some(summary)).await?;
    Ok(ctx.config.poll)
}

/// What to do when the index ConfigMap does not exist (deleted, renamed by
/// a chart, not installed yet): nothing, said loudly (a warning, an Event
/// regarding the index by name, the condition `IndexMissing`). Returns when
/// to look again; the index's watch wakes the operator sooner.
pub async fn index_missing(ctx: &Context) -> Duration {
    let config = &ctx.config;
    let message = format!(
        "index ConfigMap {}/{} not found: no background migration runs until it exists (it is rendered by the chart, or by `migrate index`)",
        config.namespace, config.index_name
    );
    tracing::warn!("{message}");
    if let Err(e) = warn(ctx, &ctx.index_ref(), "IndexMissing", message, None).await {
        tracing::warn!(error = %e, "could not report the missing index");
    }
    config.poll * 5
}

/// One reconcile of the index ConfigMap: decide, then act. Returns when to
/// look again if nothing wakes the operator sooner.
pub async fn reconcile(cm: Arc<ConfigMap>, ctx: Arc<Context>) -> Result<Duration, OperatorError> {
    let result = reconcile_inner(&cm, &ctx).await;
    ctx.metrics.reconciled(result.is_ok());
    result
}

async fn reconcile_inner(cm: &ConfigMap, ctx: &Context) -> Result<Duration, OperatorError> {
    let config = &ctx.config;
    let index = match Index::from_configmap(cm).and_then(|index| checked_image(cm, index)) {
        Ok(index) => index,
        Err(e) => {
            tracing::error!(error = %e, "index unusable; doing nothing until it is fixed");
            warn(ctx, &ctx.index_ref(), "IndexInvalid", e.to_string(), None).await?;
            return Err(e.into());
        }
    };
    // From the watch's store, not a LIST: at most `poll` for the first
    // listing after a (re)start, then no request at all.
    let live: Vec<JobView> = ctx
        .jobs
        .jobs(config.poll)
        .await?
        .iter()
        .filter_map(|job| JobView::from_job(job))
        .collect();
    let live = with_created(ctx, live).await?;
    let snapshot = ctx.ledger.read().await?;
    let jobs = attempts(ctx, live, snapshot.as_ref()).await?;
    let now = ctx.clock.now();
    let summary = summarize(&index, snapshot.as_ref(), &jobs);
    if snapshot.is_none() {
        return ledger_missing(ctx, summary).await;
    }
    let decision = decide(&index, snapshot.as_ref(), &jobs, now, &config.retries);
    match decision {
        Decision::Idle => {
            tracing::info!(
                slugs = index.slugs.len(),
                "decision: idle, every background migration is recorded"
            );
            report(
                ctx,
                "AllMigrationsDone",
                true,
                format!("{} background migrations recorded", index.slugs.len()),
                Some(summary),
            )
            .await?;
            Ok(config.poll * 10)
        }
        Decision::Wait { slug, job } => {
            tracing::info!(%slug, %job, "decision: wait for the running job");
            running(ctx, &slug, &job, summary).await
        }
        Decision::Create { slug, attempt } => {
            let job = job_for(config, &index, &slug, attempt);
            let name = job.name_any();
            let jobs_api: Api<Job> = Api::namespaced(ctx.client.clone(), &config.namespace);
            match jobs_api.create(&PostParams::default(), &job).await {
                Ok(created) => {
                    *ctx.created.lock().unwrap_or_else(PoisonError::into_inner) =
                        Some(name.clone());
                    tracing::info!(%slug, attempt, job = %name, "decision: create job");
                    event(
                        ctx,
                        &ctx.job_ref(&name, created.metadata.uid),
                        EventType::Normal,
                        "JobCreated",
                        format!(
                            "running {slug} (attempt {attempt}) in job {name} from image {}",
                            index.image
                        ),
                    )
                    .await;
                }
                // Another replica or an earlier life of this one got there: adopt it.
                Err(kube::Error::Api(s)) if s.code == 409 => {
                    tracing::info!(%slug, job = %name, "decision: adopt existing job");
                }
                Err(e) => return Err(e.into()),
            }
            let summary = Summary {
                running: summary.running + 1,
                ..summary
            };
            running(ctx, &slug, &name, summary).await
        }
        Decision::Backoff {
            slug,
            job,
            until,
            failures,
            cause,
        } => {
            let wait = until.since(now).max(Duration::from_secs(1));
            tracing::info!(%slug, %job, failures, %until, %cause, "decision: back off before retrying");
            let message = format!(
                "{slug} failed {failures} of {} attempt(s), last in job {job}: {cause}; retrying after {until}",
                config.retries.limit
            );
            warn(
                ctx,
                &ctx.job_ref(&job, None),
                "BackingOff",
                message,
                Some(summary),
            )
            .await?;
            Ok(wait)
        }
        Decision::GiveUp {
            slug,
            failures,
            last,
        } => {
            let job = last.job.clone();
            let give_up = GiveUp {
                failures,
                attempts_marked: snapshot
                    .as_ref()
                    .and_then(|s| s.attempts_started.get(&slug).copied()),
                batch: index.batch_of(&slug).map(ToString::to_string),
                last,
            };
            let entry = give_up_entry(&give_up, now);
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
            let message = format!(
                "{slug} failed {failures} time(s), last in job {job}; recorded failed; re-run by hand with ONLY={slug}"
            );
            let summary = Summary {
                pending: summary.pending.saturating_sub(1),
                failed: summary.failed + 1,
                ..summary
            };
            warn(
                ctx,
                &ctx.job_ref(&job, None),
                "RetriesExhausted",
                message,
                Some(summary),
            )
            .await?;
            Ok(Duration::from_secs(1))
        }
        Decision::Blocked { slug, reason } => {
            tracing::error!(%slug, %reason, "decision: blocked by an unreadable ledger entry");
            let message = format!(
                "the queue stops at {slug}: {reason}; repair or remove the entry (see `migrate status`), the operator wakes on the ledger's change"
            );
            warn(
                ctx,
                &ctx.index_ref(),
                "CorruptEntry",
                message,
                Some(summary),
            )
            .await?;
            // The ledger's watch wakes the operator when it is repaired.
            Ok(config.poll * 5)
        }
    }
}

/// How the controller treats a failed reconcile: retry after a pause.
pub fn error_policy(error: &OperatorError, ctx: &Context) -> Duration {
    tracing::warn!(%error, "reconcile failed; retrying");
    ctx.config.poll
}

/// Whether `error` is the API server refusing a request for want of a
/// right (a 403, from the operator's own requests or through the ledger).
pub fn is_forbidden(error: &OperatorError) -> bool {
    match error {
        OperatorError::Kube(e) => forbidden(e),
        OperatorError::Ledger(e) => {
            let text = e.to_string();
            text.contains("403") || text.contains("forbidden")
        }
        _ => false,
    }
}

/// A failed reconcile, said: a refused request is a warning naming what
/// was refused (the API server's message names the verb and the resource)
/// and the condition `MissingRights`; anything else is retried after
/// [`error_policy`]'s pause.
pub async fn failed(error: &OperatorError, ctx: &Context) -> Duration {
    if is_forbidden(error) {
        let message = format!("a request was refused: {error}");
        tracing::warn!("missing right: {message}");
        missing_rights(ctx, message).await;
    }
    error_policy(error, ctx)
}

/// Says that the operator lacks a right (`message` names the verb and the
/// resource): an Event and the condition `MissingRights`, as far as the
/// rights it has allow. Used at start, for what the access review found
/// missing, and whenever a request is refused, leader or not (a replica
/// that may not take the Lease never leads, and must still say why).
pub async fn missing_rights(ctx: &Context, message: String) {
    if let Err(e) = warn(ctx, &ctx.index_ref(), "MissingRights", message, None).await {
        tracing::warn!(error = %e, "could not write the MissingRights condition to the status ConfigMap");
    }
}

/// The index with its image checked as `migrate index` checks it (the same
/// function, the same words). A tag is let through: `migrate index
/// --allow-tag` renders one; a digest is checked whenever one is given.
fn checked_image(cm: &ConfigMap, index: Index) -> Result<Index, IndexError> {
    match migrate_shared::index::check_image(&index.image, true) {
        Ok(()) => Ok(index),
        Err(why) => Err(IndexError {
            name: cm.name_any(),
            reason: format!("image {:?}: {why}", index.image),
        }),
    }
}

/// `live` with the Job this process created last, while the cache does not
/// show it yet (read from the server: it may have gone since).
async fn with_created(
    ctx: &Context,
    mut live: Vec<JobView>,
) -> Result<Vec<JobView>, OperatorError> {
    let created = ctx
        .created
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    let Some(name) = created else {
        return Ok(live);
    };
    if !live.iter().any(|j| j.name == name) {
        let api: Api<Job> = Api::namespaced(ctx.client.clone(), &ctx.config.namespace);
        if let Some(view) = api
            .get_opt(&name)
            .await?
            .as_ref()
            .and_then(JobView::from_job)
        {
            live.push(view);
            return Ok(live);
        }
    }
    *ctx.created.lock().unwrap_or_else(PoisonError::into_inner) = None;
    Ok(live)
}

/// What to do when the ledger does not exist (deleted, or not created
/// yet): no Job (the runner would refuse it: `--require-existing-ledger`),
/// said loudly (a warning, an Event, the condition `LedgerMissing`), with
/// the queue's figures as they are (a running Job is left to finish and
/// counted). The ledger's watch wakes the operator when it is back.
async fn ledger_missing(ctx: &Context, summary: Summary) -> Result<Duration, OperatorError> {
    let message = format!(
        "ledger {} not found: no background migration runs until it exists (restore it, or let the chart or the hook create it; a fresh one would skip what is pending)",
        ctx.config.ledger_spec
    );
    tracing::warn!(running = summary.running, "{message}");
    warn(
        ctx,
        &ctx.index_ref(),
        "LedgerMissing",
        message,
        Some(summary),
    )
    .await?;
    Ok(ctx.config.poll * 5)
}
