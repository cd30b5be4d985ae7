//! The background-tier operator (spec §7): runs background migrations one
//! at a time, each in a Job, from the image the index ConfigMap names.
//!
//! The decision of what to do next is a pure function ([`decide`]) of the
//! index, the ledger and the Jobs that exist; the reconciler only carries it
//! out. That keeps every rule testable without a cluster:
//!
//! - pending work is the index order minus recorded minus revoked;
//! - strictly one Job at a time, in index order; a running Job (even one
//!   created before a restart) is adopted, never duplicated;
//! - a failed Job is retried with exponential backoff up to a limit, then a
//!   `failed` entry is ensured and the slug is not retried again (only a
//!   manual `ONLY=<slug>` run re-runs it);
//! - a corrupt ledger entry stops the queue at that slug: the operator does
//!   not guess.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{ListParams, ObjectMeta, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::{Api, Client, Resource, ResourceExt};
use migration_core::ledger::{LedgerSnapshot, Record};
use migration_core::{
    Clock, EntryState, Ledger, LedgerEntry, Sha256Digest, Slug, Timestamp, WriteMode,
};
use serde_json::json;

/// Label on every Job the operator creates.
pub const MANAGED_BY: (&str, &str) = (
    "app.kubernetes.io/managed-by",
    "cozystack-migrations-operator",
);
/// Label naming the slug a Job runs.
pub const SLUG_LABEL: &str = "migrations.cozystack.io/slug";
/// Label with the attempt number of a Job.
pub const ATTEMPT_LABEL: &str = "migrations.cozystack.io/attempt";

/// Index ConfigMap keys.
pub mod index_keys {
    /// The image reference migrations run from.
    pub const IMAGE: &str = "image";
    /// The migrations tree's path inside the image.
    pub const TREE: &str = "tree";
    /// Background slugs in manifest order, one per line.
    pub const SLUGS: &str = "slugs";
    /// Revoked slugs, one per line.
    pub const REVOKED: &str = "revoked";
}

/// The index: what the current release ships for the background tier.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Index {
    /// The image reference.
    pub image: String,
    /// The tree's path inside the image.
    pub tree: String,
    /// Background slugs, in manifest order.
    pub slugs: Vec<Slug>,
    /// Revoked slugs.
    pub revoked: Vec<Slug>,
}

/// Why an index ConfigMap cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("index {name}: {reason}")]
pub struct IndexError {
    /// The ConfigMap.
    pub name: String,
    /// What is wrong.
    pub reason: String,
}

impl Index {
    /// Reads an index ConfigMap. A missing or malformed key is an error:
    /// an index that cannot be read is never "nothing to do".
    pub fn from_configmap(cm: &ConfigMap) -> Result<Index, IndexError> {
        let name = cm.name_any();
        let bad = |reason: String| IndexError {
            name: name.clone(),
            reason,
        };
        let data = cm.data.clone().unwrap_or_default();
        let get = |key: &str| {
            data.get(key)
                .cloned()
                .ok_or_else(|| bad(format!("missing key '{key}'")))
        };
        let image = get(index_keys::IMAGE)?;
        if image.trim().is_empty() {
            return Err(bad("empty image".into()));
        }
        let tree = get(index_keys::TREE)?;
        let list = |key: &str, text: &str| -> Result<Vec<Slug>, IndexError> {
            text.lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .enumerate()
                .map(|(i, l)| Slug::parse(l).map_err(|e| bad(format!("{key} line {}: {e}", i + 1))))
                .collect()
        };
        let slugs = list(index_keys::SLUGS, &get(index_keys::SLUGS)?)?;
        let revoked = list(
            index_keys::REVOKED,
            data.get(index_keys::REVOKED).map_or("", String::as_str),
        )?;
        Ok(Index {
            image: image.trim().to_owned(),
            tree,
            slugs,
            revoked,
        })
    }

    /// The index as ConfigMap data.
    pub fn to_data(&self) -> BTreeMap<String, String> {
        let lines = |v: &[Slug]| v.iter().map(|s| format!("{s}\n")).collect::<String>();
        BTreeMap::from([
            (index_keys::IMAGE.to_owned(), self.image.clone()),
            (index_keys::TREE.to_owned(), self.tree.clone()),
            (index_keys::SLUGS.to_owned(), lines(&self.slugs)),
            (index_keys::REVOKED.to_owned(), lines(&self.revoked)),
        ])
    }

    /// Builds the index from a tree's manifest: background slugs whose
    /// scripts exist, in manifest order (retired lines cannot run).
    pub fn from_tree(
        tree: &migration_core::MigrationsTree,
        image: &str,
        tree_path: &str,
    ) -> Option<Index> {
        let manifest = tree.manifest()?;
        let slugs = manifest
            .iter()
            .filter(|(_, line)| !line.retired)
            .filter(|(_, line)| {
                tree.script(&line.slug)
                    .is_some_and(|s| s.tier == migration_core::Tier::Background)
            })
            .map(|(_, line)| line.slug.clone())
            .collect();
        let revoked = tree.revoked().iter().map(|r| r.slug.clone()).collect();
        Some(Index {
            image: image.to_owned(),
            tree: tree_path.to_owned(),
            slugs,
            revoked,
        })
    }
}

/// What a Job says about its run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobState {
    /// Still running (or pending).
    Active,
    /// Completed successfully at the given time.
    Succeeded(Timestamp),
    /// Failed at the given time, with the controller's message.
    Failed(Timestamp, String),
}

/// The part of a Job the decision needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobView {
    /// The Job's name.
    pub name: String,
    /// The slug it runs.
    pub slug: Slug,
    /// Its attempt number.
    pub attempt: u32,
    /// Its state.
    pub state: JobState,
}

impl JobView {
    /// Reads a Job created by the operator (`None` for a Job without our labels).
    pub fn from_job(job: &Job) -> Option<JobView> {
        let labels = job.metadata.labels.as_ref()?;
        let slug = Slug::parse(labels.get(SLUG_LABEL)?).ok()?;
        let attempt = labels
            .get(ATTEMPT_LABEL)
            .and_then(|a| a.parse().ok())
            .unwrap_or(1);
        let status = job.status.clone().unwrap_or_default();
        let conditions = status.conditions.unwrap_or_default();
        let finished = |kind: &str| {
            conditions
                .iter()
                .find(|c| c.type_ == kind && c.status == "True")
                .map(|c| {
                    let at = c
                        .last_transition_time
                        .as_ref()
                        .map(|t| Timestamp::from_unix(t.0.as_second()))
                        .unwrap_or(Timestamp::from_unix(0));
                    (at, c.message.clone().unwrap_or_default())
                })
        };
        let state = if let Some((at, _)) = finished("Complete") {
            JobState::Succeeded(at)
        } else if let Some((at, message)) = finished("Failed") {
            JobState::Failed(at, message)
        } else {
            JobState::Active
        };
        Some(JobView {
            name: job.name_any(),
            slug,
            attempt,
            state,
        })
    }
}

/// Retry settings for failed Jobs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retries {
    /// Jobs tried per slug before giving up.
    pub limit: u32,
    /// Wait after the first failure; doubles after each further one.
    pub base: Duration,
    /// Longest wait.
    pub cap: Duration,
}

impl Default for Retries {
    fn default() -> Self {
        Retries {
            limit: 3,
            base: Duration::from_secs(30),
            cap: Duration::from_secs(600),
        }
    }
}

impl Retries {
    /// The wait after `failures` failures.
    pub fn backoff(&self, failures: u32) -> Duration {
        self.base
            .saturating_mul(1 << failures.saturating_sub(1).min(16))
            .min(self.cap)
    }
}

/// What to do next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Nothing is pending.
    Idle,
    /// A Job is running for this slug; wait for it (adopting it if it
    /// predates this process).
    Wait {
        /// The slug.
        slug: Slug,
        /// The running Job.
        job: String,
    },
    /// Create the Job for this attempt.
    Create {
        /// The slug.
        slug: Slug,
        /// The attempt number (1-based).
        attempt: u32,
    },
    /// The last attempt failed; wait until the backoff has passed.
    Backoff {
        /// The slug.
        slug: Slug,
        /// When the next attempt may start.
        until: Timestamp,
        /// Failures so far.
        failures: u32,
    },
    /// The retry limit is reached: ensure a `failed` entry, then move on.
    GiveUp {
        /// The slug.
        slug: Slug,
        /// Failed attempts.
        failures: u32,
        /// The last failure's message.
        message: String,
    },
    /// The ledger entry for this slug cannot be read: stop, do not guess.
    Blocked {
        /// The slug.
        slug: Slug,
        /// Why.
        reason: String,
    },
}

/// Decides the next step. Pure: same inputs, same decision.
pub fn decide(
    index: &Index,
    ledger: Option<&LedgerSnapshot>,
    jobs: &[JobView],
    now: Timestamp,
    retries: &Retries,
) -> Decision {
    for slug in &index.slugs {
        if index.revoked.contains(slug) {
            continue;
        }
        match ledger.and_then(|l| l.record(slug)) {
            Some(Record::Entry(_)) => continue,
            Some(Record::Corrupt(c)) => {
                return Decision::Blocked {
                    slug: slug.clone(),
                    reason: c.to_string(),
                };
            }
            None => {}
        }
        let mine: Vec<&JobView> = jobs.iter().filter(|j| &j.slug == slug).collect();
        if let Some(active) = mine.iter().find(|j| j.state == JobState::Active) {
            return Decision::Wait {
                slug: slug.clone(),
                job: active.name.clone(),
            };
        }
        // A Job that succeeded without the runner recording anything did not
        // do the work as far as anyone can prove: it counts as a failure.
        let failures: Vec<(Timestamp, String)> = mine
            .iter()
            .filter_map(|j| match &j.state {
                JobState::Failed(at, message) => Some((*at, message.clone())),
                JobState::Succeeded(at) => Some((
                    *at,
                    format!("job {} succeeded but recorded nothing", j.name),
                )),
                JobState::Active => None,
            })
            .collect();
        let count = u32::try_from(failures.len()).unwrap_or(u32::MAX);
        let last = failures.iter().max_by_key(|(at, _)| *at).cloned();
        let next_attempt = mine.iter().map(|j| j.attempt).max().unwrap_or(0) + 1;
        return match last {
            None => Decision::Create {
                slug: slug.clone(),
                attempt: next_attempt,
            },
            Some((_, message)) if count >= retries.limit => Decision::GiveUp {
                slug: slug.clone(),
                failures: count,
                message,
            },
            Some((at, _)) => {
                let until = at.plus(retries.backoff(count));
                if now < until {
                    Decision::Backoff {
                        slug: slug.clone(),
                        until,
                        failures: count,
                    }
                } else {
                    Decision::Create {
                        slug: slug.clone(),
                        attempt: next_attempt,
                    }
                }
            }
        };
    }
    Decision::Idle
}

/// A Job name within Kubernetes' 63-character label limit: long slugs are
/// cut and made unique with a hash.
pub fn job_name(slug: &Slug, attempt: u32) -> String {
    let s = slug.as_str();
    let short = if s.len() <= 48 {
        s.to_owned()
    } else {
        format!(
            "{}-{}",
            &s[..39],
            &Sha256Digest::of(s.as_bytes()).to_string()[..8]
        )
    };
    format!("migrate-{short}-{attempt}")
}

/// Operator settings.
#[derive(Debug, Clone)]
pub struct OperatorConfig {
    /// Namespace of the index, the Jobs and the leader Lease.
    pub namespace: String,
    /// Name of the index ConfigMap.
    pub index_name: String,
    /// The `--ledger` spec passed to the Jobs' runner.
    pub ledger_spec: String,
    /// ServiceAccount the Jobs run as.
    pub service_account: String,
    /// Retry policy for failed Jobs.
    pub retries: Retries,
    /// How often to look again while a Job runs (watches usually wake us sooner).
    pub poll: Duration,
}

impl OperatorConfig {
    /// Defaults: `cozy-system/cozystack-migrations-index`, ServiceAccount
    /// `cozystack-migrations`, the ConfigMap ledger.
    pub fn new(namespace: &str) -> Self {
        OperatorConfig {
            namespace: namespace.to_owned(),
            index_name: "cozystack-migrations-index".into(),
            ledger_spec: format!("configmap:{namespace}/cozystack-version"),
            service_account: "cozystack-migrations".into(),
            retries: Retries::default(),
            poll: Duration::from_secs(60),
        }
    }
}

/// Builds the Job for one attempt.
pub fn job_for(
    config: &OperatorConfig,
    index: &Index,
    owner: &ConfigMap,
    slug: &Slug,
    attempt: u32,
) -> Job {
    let labels = json!({
        MANAGED_BY.0: MANAGED_BY.1,
        SLUG_LABEL: slug.as_str(),
        ATTEMPT_LABEL: attempt.to_string(),
    });
    let owner_ref = owner.controller_owner_ref(&());
    let job = json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": job_name(slug, attempt),
            "namespace": config.namespace,
            "labels": labels,
            "ownerReferences": owner_ref.into_iter().collect::<Vec<_>>(),
        },
        "spec": {
            // The operator owns retries (with backoff and a ledger record);
            // the Job controller must not retry behind its back.
            "backoffLimit": 0,
            "template": {
                "metadata": { "labels": labels },
                "spec": {
                    "serviceAccountName": config.service_account,
                    "restartPolicy": "Never",
                    "containers": [{
                        "name": "migrate",
                        "image": index.image,
                        "command": [
                            "migrate", "run", index.tree,
                            "--only", slug.as_str(),
                            "--tier", "background",
                            "--ledger", config.ledger_spec,
                        ],
                        "env": [
                            { "name": "ONLY", "value": slug.as_str() },
                            { "name": "MIGRATION_IMAGE", "value": index.image },
                            { "name": "MIGRATION_NAMESPACE", "value": config.namespace },
                            { "name": "POD_NAME", "valueFrom": { "fieldRef": { "fieldPath": "metadata.name" } } },
                        ],
                    }],
                },
            },
        },
    });
    // The JSON above is our own and always matches the Job schema.
    serde_json::from_value(job).unwrap_or_default()
}

/// Where the operator's readiness goes, for ledger backends that keep
/// conditions. Called after every decision with a distinct reason per
/// situation (AllMigrationsDone, MigrationRunning, BackingOff,
/// RetriesExhausted, CorruptEntry, IndexInvalid).
#[async_trait::async_trait]
pub trait ConditionReporter: Send + Sync {
    /// Reports the current readiness.
    async fn report(&self, reason: &'static str, ready: bool, message: String);
}

/// Reports the operator's readiness as the `BackgroundMigrations` condition
/// of a `MigrationLedger` (the ledger keeps `Ready` for its own entries).
/// Only changes are written, so a steady state costs no requests.
pub struct CrdConditions {
    ledger: ledger_crd::CrdLedger,
    last: std::sync::Mutex<Option<(&'static str, bool, String)>>,
}

/// The condition type the operator owns on a `MigrationLedger`.
pub const OPERATOR_CONDITION: &str = "BackgroundMigrations";

impl CrdConditions {
    /// Reports on `ledger`.
    pub fn new(ledger: ledger_crd::CrdLedger) -> Self {
        CrdConditions {
            ledger,
            last: std::sync::Mutex::new(None),
        }
    }
}

#[async_trait::async_trait]
impl ConditionReporter for CrdConditions {
    async fn report(&self, reason: &'static str, ready: bool, message: String) {
        let current = Some((reason, ready, message.clone()));
        if *self
            .last
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            == current
        {
            return;
        }
        let condition = ledger_crd::LedgerCondition {
            type_: OPERATOR_CONDITION.into(),
            status: if ready {
                ledger_crd::ConditionStatus::True
            } else {
                ledger_crd::ConditionStatus::False
            },
            reason: reason.into(),
            message,
        };
        match self.ledger.set_condition(&condition).await {
            Ok(()) => {
                *self
                    .last
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner) = current
            }
            Err(e) => tracing::warn!(error = %e, reason, "could not report the condition"),
        }
    }
}

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
            controller: "cozystack-migrations-operator".into(),
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
    let jobs_api: Api<Job> = Api::namespaced(ctx.client.clone(), &config.namespace);
    let selector = format!("{}={}", MANAGED_BY.0, MANAGED_BY.1);
    let jobs: Vec<JobView> = jobs_api
        .list(&ListParams::default().labels(&selector))
        .await?
        .items
        .iter()
        .filter_map(JobView::from_job)
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
            condition(
                &ctx,
                "MigrationRunning",
                false,
                format!("{slug} is running in job {job}"),
            )
            .await;
            Ok(Action::requeue(config.poll))
        }
        Decision::Create { slug, attempt } => {
            let job = job_for(config, &index, &cm, &slug, attempt);
            let name = job.name_any();
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
            condition(
                &ctx,
                "MigrationRunning",
                false,
                format!("{slug} is running in job {name}"),
            )
            .await;
            Ok(Action::requeue(config.poll))
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
            let report = ctx
                .ledger
                .write(&[(slug.clone(), entry)], WriteMode::OnlyIfAbsent)
                .await?;
            tracing::warn!(%slug, failures, written = !report.written.is_empty(), "decision: give up; recorded failed, not retrying");
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

/// Leader election: a Lease in the operator's namespace. Only the holder
/// reconciles; a replica that loses it stops acting until it wins it back.
pub struct Leadership {
    lock: migration_kube::LeaseLock,
    identity: String,
    ttl: Duration,
}

impl Leadership {
    /// Leader election through Lease `name` in `namespace`.
    pub fn new(
        client: Client,
        namespace: &str,
        name: &str,
        identity: &str,
        clock: Arc<dyn Clock>,
        ttl: Duration,
    ) -> Self {
        let lock = migration_kube::LeaseLock::new(
            client,
            namespace,
            name,
            &format!("leader election {namespace}/{name}"),
            clock,
            migration_kube::RetryPolicy::default(),
        );
        Leadership {
            lock,
            identity: identity.to_owned(),
            ttl,
        }
    }

    /// Runs `work` whenever this replica leads, until `work` returns.
    /// Leadership is renewed every third of the lease; when a renewal
    /// fails, `work` is dropped (stopping the controller) and the replica
    /// goes back to campaigning.
    pub async fn run<F, Fut>(&self, work: F)
    where
        F: Fn() -> Fut,
        Fut: std::future::Future<Output = ()>,
    {
        let period = (self.ttl / 3).max(Duration::from_millis(200));
        loop {
            let lease = match self.lock.acquire(&self.identity, self.ttl).await {
                Ok(lease) => lease,
                Err(e) => {
                    tracing::debug!(error = %e, "not the leader; campaigning");
                    tokio::time::sleep(period).await;
                    continue;
                }
            };
            tracing::info!(identity = %self.identity, "became the leader");
            let mut lease = lease;
            let keep = async {
                loop {
                    tokio::time::sleep(period).await;
                    match self.lock.renew(&lease, self.ttl).await {
                        Ok(renewed) => lease = renewed,
                        Err(e) => {
                            tracing::warn!(error = %e, "lost leadership; stopping");
                            return;
                        }
                    }
                }
            };
            tokio::select! {
                () = work() => return,
                () = keep => {}
            }
        }
    }
}

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

/// Builds the index ConfigMap object.
pub fn index_configmap(index: &Index, namespace: &str, name: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(namespace.to_owned()),
            ..ObjectMeta::default()
        },
        data: Some(index.to_data()),
        ..ConfigMap::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(x: &str) -> Slug {
        Slug::parse(x).unwrap()
    }

    fn index(slugs: &[&str], revoked: &[&str]) -> Index {
        Index {
            image: "img".into(),
            tree: "/migrations".into(),
            slugs: slugs.iter().map(|x| s(x)).collect(),
            revoked: revoked.iter().map(|x| s(x)).collect(),
        }
    }

    fn ledger(entries: &[(&str, EntryState)]) -> LedgerSnapshot {
        let data: Vec<(String, String)> = entries
            .iter()
            .map(|(slug, state)| {
                let mut e = LedgerEntry::new(*state, Timestamp::from_unix(0));
                if *state == EntryState::Failed {
                    e.reason = Some("r".into());
                    e.message = Some("m".into());
                }
                (format!("m.{slug}"), e.encode())
            })
            .collect();
        LedgerSnapshot::from_raw_data(data.iter().map(|(k, v)| (k.as_str(), v.as_str())), None)
    }

    fn job(slug: &str, attempt: u32, state: JobState) -> JobView {
        JobView {
            name: job_name(&s(slug), attempt),
            slug: s(slug),
            attempt,
            state,
        }
    }

    const NOW: Timestamp = Timestamp::from_unix(10_000);

    #[test]
    fn the_first_pending_slug_in_index_order_gets_the_only_job() {
        let d = decide(
            &index(&["b", "a", "c"], &[]),
            Some(&ledger(&[("b", EntryState::Ok)])),
            &[],
            NOW,
            &Retries::default(),
        );
        assert_eq!(
            d,
            Decision::Create {
                slug: s("a"),
                attempt: 1
            }
        );
    }

    #[test]
    fn revoked_and_recorded_slugs_never_get_a_job() {
        let l = ledger(&[("a", EntryState::Failed), ("b", EntryState::Revoked)]);
        assert_eq!(
            decide(
                &index(&["a", "b", "bad"], &["bad"]),
                Some(&l),
                &[],
                NOW,
                &Retries::default()
            ),
            Decision::Idle
        );
    }

    #[test]
    fn a_running_job_is_waited_for_not_duplicated() {
        let d = decide(
            &index(&["a", "b"], &[]),
            None,
            &[job("a", 1, JobState::Active)],
            NOW,
            &Retries::default(),
        );
        assert_eq!(
            d,
            Decision::Wait {
                slug: s("a"),
                job: "migrate-a-1".into()
            }
        );
    }

    #[test]
    fn a_failure_backs_off_exponentially_then_retries_then_gives_up() {
        let r = Retries {
            limit: 3,
            base: Duration::from_secs(30),
            cap: Duration::from_secs(600),
        };
        let i = index(&["a", "b"], &[]);
        let f1 = job("a", 1, JobState::Failed(NOW, "boom".into()));
        assert_eq!(
            decide(&i, None, std::slice::from_ref(&f1), NOW, &r),
            Decision::Backoff {
                slug: s("a"),
                until: NOW.plus(Duration::from_secs(30)),
                failures: 1
            }
        );
        let later = NOW.plus(Duration::from_secs(31));
        assert_eq!(
            decide(&i, None, std::slice::from_ref(&f1), later, &r),
            Decision::Create {
                slug: s("a"),
                attempt: 2
            }
        );
        let f2 = job("a", 2, JobState::Failed(later, "boom".into()));
        assert_eq!(
            decide(&i, None, &[f1.clone(), f2.clone()], later, &r),
            Decision::Backoff {
                slug: s("a"),
                until: later.plus(Duration::from_secs(60)),
                failures: 2
            }
        );
        let f3 = job("a", 3, JobState::Failed(later, "last words".into()));
        assert_eq!(
            decide(&i, None, &[f1, f2, f3], later, &r),
            Decision::GiveUp {
                slug: s("a"),
                failures: 3,
                message: "last words".into()
            }
        );
    }

    #[test]
    fn a_job_that_succeeded_without_a_record_counts_as_a_failure() {
        let d = decide(
            &index(&["a"], &[]),
            None,
            &[job("a", 1, JobState::Succeeded(NOW))],
            NOW,
            &Retries::default(),
        );
        assert!(matches!(d, Decision::Backoff { failures: 1, .. }), "{d:?}");
    }

    #[test]
    fn a_corrupt_entry_blocks_the_queue() {
        let l = LedgerSnapshot::from_raw_data([("m.a", "{")], None);
        assert!(matches!(
            decide(
                &index(&["a", "b"], &[]),
                Some(&l),
                &[],
                NOW,
                &Retries::default()
            ),
            Decision::Blocked { .. }
        ));
    }

    #[test]
    fn job_names_fit_the_label_limit_and_stay_unique() {
        let long = s(&"x".repeat(60));
        let other = s(&format!("{}y", "x".repeat(59)));
        assert!(job_name(&long, 99).len() <= 63);
        assert_ne!(job_name(&long, 1), job_name(&other, 1));
        assert_eq!(job_name(&s("short"), 2), "migrate-short-2");
    }

    #[test]
    fn the_index_round_trips_and_rejects_bad_slugs() {
        let i = index(&["a", "b"], &["c"]);
        let cm = index_configmap(&i, "ns", "idx");
        assert_eq!(Index::from_configmap(&cm).unwrap(), i);
        let mut bad = cm.clone();
        bad.data
            .as_mut()
            .unwrap()
            .insert("slugs".into(), "ok\nNot Ok\n".into());
        assert!(
            Index::from_configmap(&bad)
                .unwrap_err()
                .reason
                .contains("slugs line 2")
        );
        let mut missing = cm;
        missing.data.as_mut().unwrap().remove("image");
        assert!(Index::from_configmap(&missing).is_err());
    }
}
