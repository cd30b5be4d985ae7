//! The background operator against a real API server (`MIGRATE_TEST_KUBECONFIG`; see
//! `test_apiserver::real`). No controller-manager runs there, as in envtest: the tests play the
//! Job controller and set Job status through `/status`, which the real server validates. RBAC is
//! real too: the operator and the Jobs' runner run under the ServiceAccounts and Roles of
//! `deploy/rbac.yaml`, with tokens minted for them. Each test works in its own namespace.
//! Unset, every test prints that it skipped.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;

use common::pairs;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{ListParams, Patch, PatchParams};
use kube::{Api, Client};
use ledger_configmap::{ConfigMapLedger, Options};
use migrate_operator::{
    ATTEMPT_LABEL, Context, Index, OperatorConfig, OperatorError, Retries, SLUG_LABEL,
    index_configmap, reconcile, run_controller,
};
use migration_core::testing::fixtures::s;
use migration_core::{
    Clock, EntryState, Ledger, LedgerEntry, LedgerError, Lock, ManualClock, Timestamp, WriteMode,
};
use migration_kube::RetryPolicy;
use serde_json::json;
use test_apiserver::or_skip;
use test_apiserver::real::{RealCluster, unique_name};

const INDEX: &str = "cozystack-migrations-index";
const LEDGER: &str = "cozystack-version";
const OPERATOR_SA: &str = "cozystack-migrations-operator";
const RUNNER_SA: &str = "cozystack-migrations";
const RBAC: &str = include_str!("../../deploy/rbac.yaml");

/// One test's namespace on the real cluster, with the index and an empty ledger in it.
struct Env {
    cluster: RealCluster,
    ns: String,
    clock: Arc<ManualClock>,
}

impl Env {
    async fn new(what: &str, slugs: &[&str], revoked: &[&str]) -> Option<Self> {
        let cluster = RealCluster::from_env(what).await?;
        let ns = unique_name("op");
        cluster.ensure_namespace(&ns).await;
        let index = Index {
            image: common::IMAGE.into(),
            tree: "/migrations".into(),
            slugs: slugs.iter().map(|x| s(x)).collect(),
            revoked: revoked.iter().map(|x| s(x)).collect(),
            // Every slug in the release that first shipped it, as `migrate index` renders it.
            batches: slugs
                .iter()
                .map(|x| (s(x), "00002-v1.8.0".parse().unwrap()))
                .collect(),
        };
        let cms: Api<ConfigMap> = Api::namespaced(cluster.client(), &ns);
        cms.create(&Default::default(), &index_configmap(&index, &ns, INDEX))
            .await
            .unwrap();
        let env = Self {
            cluster,
            ns,
            clock: Arc::new(ManualClock::new(Timestamp::now())),
        };
        env.ledger(env.cluster.client()).create(&[]).await.unwrap();
        Some(env)
    }

    /// The ledger (and its run lock) with `client`'s credentials.
    fn configmap_ledger(&self, client: Client) -> ConfigMapLedger {
        let options = Options {
            retry: RetryPolicy::immediate(5),
            clock: self.clock.clone(),
            ..Options::default()
        };
        ConfigMapLedger::with_options(client, &self.ns, LEDGER, options)
    }

    fn ledger(&self, client: Client) -> Arc<dyn Ledger> {
        Arc::new(self.configmap_ledger(client))
    }

    /// The operator's context; `client` decides whose credentials it acts with.
    fn context(&self, client: Client, retries: Retries) -> Arc<Context> {
        let mut config = OperatorConfig::new(&self.ns);
        config.retries = retries;
        let ctx = Arc::new(Context::new(
            client.clone(),
            self.ledger(client.clone()),
            config,
            self.clock.clone(),
            "test-replica",
        ));
        // Fill the Job cache as `run_controller` does, with the same credentials.
        let watch = ctx.jobs.watch(client, &self.ns);
        tokio::spawn(watch.for_each(|_| std::future::ready(())));
        ctx
    }

    /// Waits until `ctx`'s Job cache holds exactly the Jobs the server stores, each at its
    /// stored resourceVersion (a reconcile the controller runs follows the watch event that
    /// brought the change; one a test calls directly must wait for it).
    async fn caught_up(&self, ctx: &Context) {
        let versions = |jobs: Vec<Job>| -> Vec<(Option<String>, Option<String>)> {
            let mut v: Vec<_> = jobs
                .into_iter()
                .map(|j| (j.metadata.name, j.metadata.resource_version))
                .collect();
            v.sort();
            v
        };
        for _ in 0..400 {
            let cached = ctx.jobs.snapshot().iter().map(|j| (**j).clone()).collect();
            let stored = self.stored_jobs().await;
            if versions(cached) == versions(stored) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!("the Job cache never caught up with the server");
    }

    async fn reconcile(&self, ctx: &Arc<Context>) -> Result<(), OperatorError> {
        self.caught_up(ctx).await;
        let cms: Api<ConfigMap> = Api::namespaced(self.cluster.client(), &self.ns);
        let cm = cms.get(INDEX).await.unwrap();
        reconcile(Arc::new(cm), ctx.clone()).await.map(drop)
    }

    fn jobs_api(&self) -> Api<Job> {
        Api::namespaced(self.cluster.client(), &self.ns)
    }

    /// Every Job the server stores in the namespace.
    async fn stored_jobs(&self) -> Vec<Job> {
        self.jobs_api()
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
    }

    /// Jobs as (slug, attempt), sorted.
    async fn jobs(&self) -> Vec<(String, String)> {
        let mut jobs: Vec<_> = self
            .stored_jobs()
            .await
            .into_iter()
            .map(|j| {
                let labels = j.metadata.labels.unwrap_or_default();
                (labels[SLUG_LABEL].clone(), labels[ATTEMPT_LABEL].clone())
            })
            .collect();
        jobs.sort();
        jobs
    }

    /// What the Job controller would write when the Job's pod ends: the status the real server
    /// requires of a finished Job (start and completion times, SuccessCriteriaMet before
    /// Complete, FailureTarget before Failed).
    async fn finish(&self, job: &str, succeeded: bool) {
        let at = self.clock.now().to_string();
        let status = if succeeded {
            json!({"startTime": at, "completionTime": at, "succeeded": 1, "conditions": [
                {"type": "SuccessCriteriaMet", "status": "True", "lastTransitionTime": at},
                {"type": "Complete", "status": "True", "lastTransitionTime": at},
            ]})
        } else {
            let failed = |kind: &str| {
                json!({"type": kind, "status": "True", "lastTransitionTime": at,
                       "reason": "BackoffLimitExceeded", "message": "Job has reached the specified backoff limit"})
            };
            json!({"startTime": at, "failed": 1, "conditions": [failed("FailureTarget"), failed("Failed")]})
        };
        self.jobs_api()
            .patch_status(
                job,
                &PatchParams::default(),
                &Patch::Merge(json!({ "status": status })),
            )
            .await
            .unwrap_or_else(|e| panic!("setting the status of job {job}: {e}"));
    }

    /// `job` ends (as [`Env::finish`]) and the operator reconciles once.
    async fn ended(&self, ctx: &Arc<Context>, job: &str, succeeded: bool) {
        self.finish(job, succeeded).await;
        self.reconcile(ctx).await.unwrap();
    }

    /// What the runner inside a successful Job records.
    async fn record_ok(&self, slug: &str) {
        let entry = LedgerEntry {
            attempts: 1,
            ..LedgerEntry::new(EntryState::Ok, self.clock.now().truncated())
        };
        self.ledger(self.cluster.client())
            .write(&[(s(slug), entry)], WriteMode::Replace)
            .await
            .unwrap();
    }

    /// The `events.k8s.io/v1` Events of this namespace.
    async fn events(&self) -> Vec<serde_json::Value> {
        let path = format!("/apis/events.k8s.io/v1/namespaces/{}/events", self.ns);
        let request = http::Request::get(path).body(Vec::new()).unwrap();
        let list: serde_json::Value = self.cluster.client().request(request).await.unwrap();
        list["items"].as_array().unwrap().clone()
    }

    /// The Events once `done` holds of them (or after 20 s, for the caller's
    /// assertions to report what is there).
    async fn events_until(
        &self,
        done: impl Fn(&[serde_json::Value]) -> bool,
    ) -> Vec<serde_json::Value> {
        for _ in 0..200 {
            let events = self.events().await;
            if done(&events) {
                return events;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        self.events().await
    }

    /// Event reasons, read through `events.k8s.io/v1` or through core/v1.
    async fn event_reasons(&self, new_api: bool) -> Vec<String> {
        let path = if new_api {
            format!("/apis/events.k8s.io/v1/namespaces/{}/events", self.ns)
        } else {
            format!("/api/v1/namespaces/{}/events", self.ns)
        };
        let request = http::Request::get(path).body(Vec::new()).unwrap();
        let list: serde_json::Value = self.cluster.client().request(request).await.unwrap();
        let mut reasons: Vec<_> = list["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["reason"].as_str().unwrap_or_default().to_owned())
            .collect();
        reasons.sort();
        reasons
    }

    /// Applies `deploy/rbac.yaml` (edited by `edit`) in this namespace with the real kubectl.
    fn apply_rbac(&self, edit: impl Fn(String) -> String) {
        let manifest = edit(
            RBAC.replace("namespace: cozy-system", &format!("namespace: {}", self.ns))
                .replace(
                    "name: cozystack-migrations-ledger-crd",
                    &format!("name: cozystack-migrations-ledger-crd-{}", self.ns),
                ),
        );
        self.cluster.kubectl_ok(&["apply", "-f", "-"], &manifest);
    }

    /// The operator's client, under its ServiceAccount with the chart's RBAC applied as it is.
    async fn operator_under_rbac(&self) -> Client {
        self.apply_rbac(|m| m);
        self.cluster
            .service_account_client(&self.ns, OPERATOR_SA)
            .await
    }

    /// The status ConfigMap's `status` value, parsed.
    async fn status(&self) -> serde_json::Value {
        let cms: Api<ConfigMap> = Api::namespaced(self.cluster.client(), &self.ns);
        let cm = cms.get(migrate_operator::STATUS_NAME).await.unwrap();
        serde_json::from_str(&cm.data.unwrap()["status"]).unwrap()
    }

    async fn wait_for_jobs(&self, n: usize) {
        for _ in 0..200 {
            if self.jobs().await.len() >= n {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("expected {n} job(s), have {:?}", self.jobs().await);
    }
}

/// Retries of `limit` Jobs a slug, waiting `base` seconds after the first failure, doubling up
/// to `cap`.
fn retries(limit: u32, base: u64, cap: u64) -> Retries {
    Retries {
        limit,
        base: Duration::from_secs(base),
        cap: Duration::from_secs(cap),
    }
}

/// Asserts that the condition's message in `status` contains `part`.
fn message_contains(status: &serde_json::Value, part: &str) {
    let message = status["message"].as_str().unwrap();
    assert!(message.contains(part), "{part:?} not in {status:#}");
}

/// Asserts that the rendered `metrics` contain each of `lines`.
fn metrics_contain(metrics: &str, lines: &[&str]) {
    for line in lines {
        assert!(metrics.contains(line), "{line:?} not in {metrics}");
    }
}

/// (reason, regarding object's name) of each Event, sorted.
fn regarding(events: &[serde_json::Value]) -> Vec<(String, String)> {
    let mut v: Vec<_> = events
        .iter()
        .map(|e| {
            (
                e["reason"].as_str().unwrap_or_default().to_owned(),
                e["regarding"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
            )
        })
        .collect();
    v.sort();
    v
}

#[tokio::test]
#[ignore = "needs MIGRATE_TEST_KUBECONFIG (examples/kube-testenv)"]
async fn the_job_for_the_first_pending_slug_passes_real_validation_and_is_announced_by_an_event() {
    let t = or_skip!(Env::new("operator: Job creation", &["first", "second"], &[]).await);
    let ctx = t.context(t.cluster.client(), Retries::default());
    t.reconcile(&ctx).await.unwrap();
    t.reconcile(&ctx).await.unwrap();
    assert_eq!(
        t.jobs().await,
        pairs(&[("first", "1")]),
        "one Job, never a duplicate"
    );
    let job = t.jobs_api().get("migrate-first-1").await.unwrap();
    let spec = job.spec.unwrap();
    assert_eq!(spec.backoff_limit, Some(0));
    assert!(
        spec.selector.is_some(),
        "the real server defaulted the selector"
    );
    assert_eq!(
        job.metadata.owner_references, None,
        "owned by nothing: deleting the index must not collect a running migration"
    );
    assert_eq!(spec.active_deadline_seconds, Some(3600));
    assert_eq!(spec.ttl_seconds_after_finished, Some(604_800));
    let container = &spec.template.spec.as_ref().unwrap().containers[0];
    assert_eq!(
        container.resources,
        Some(migrate_operator::default_resources())
    );
    // Events are one store with two views on a real server (the test double keeps two).
    assert_eq!(t.event_reasons(true).await, ["JobCreated"]);
    assert_eq!(t.event_reasons(false).await, ["JobCreated"]);
}

#[tokio::test]
#[ignore = "needs MIGRATE_TEST_KUBECONFIG (examples/kube-testenv)"]
async fn job_status_set_through_the_status_subresource_drives_success_retries_and_give_up() {
    let t = or_skip!(Env::new("operator: Job outcomes", &["first", "flaky", "last"], &[]).await);
    let ctx = t.context(t.cluster.client(), retries(2, 30, 300));
    t.reconcile(&ctx).await.unwrap();
    t.record_ok("first").await;
    t.ended(&ctx, "migrate-first-1", true).await;
    assert_eq!(t.jobs().await, pairs(&[("first", "1"), ("flaky", "1")]));
    t.ended(&ctx, "migrate-flaky-1", false).await;
    assert_eq!(t.jobs().await.len(), 2, "backing off: no retry yet");
    t.clock.advance(Duration::from_secs(31));
    t.reconcile(&ctx).await.unwrap();
    assert_eq!(
        t.jobs().await,
        pairs(&[("first", "1"), ("flaky", "1"), ("flaky", "2")])
    );
    t.ended(&ctx, "migrate-flaky-2", false).await;
    let snapshot = t.ledger(t.cluster.client()).read().await.unwrap().unwrap();
    let entry = snapshot.entry(&s("flaky")).expect("a failed entry");
    common::assert_gave_up(entry, "Job has reached the specified backoff limit");
    t.reconcile(&ctx).await.unwrap();
    assert_eq!(
        t.jobs().await,
        pairs(&[
            ("first", "1"),
            ("flaky", "1"),
            ("flaky", "2"),
            ("last", "1")
        ]),
        "flaky is never retried again; the queue moves on"
    );
    let reasons = t.event_reasons(true).await;
    assert!(
        reasons.contains(&"RetriesExhausted".to_owned()),
        "{reasons:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs MIGRATE_TEST_KUBECONFIG (examples/kube-testenv)"]
async fn the_controller_under_its_own_serviceaccount_reacts_to_real_watches() {
    let t = or_skip!(Env::new("operator: controller and RBAC", &["first", "second"], &[]).await);
    let operator = t.operator_under_rbac().await;
    let controller = tokio::spawn(run_controller(t.context(operator, Retries::default())));
    t.wait_for_jobs(1).await;
    t.record_ok("first").await;
    t.finish("migrate-first-1", true).await;
    t.wait_for_jobs(2).await;
    // Each Job is its own Event, regarding the Job: the Role allowed both creates. The second
    // follows the Job's creation, so wait for it before stopping the controller.
    let events = t.events_until(|e| e.len() >= 2).await;
    controller.abort();
    assert_eq!(t.jobs().await, pairs(&[("first", "1"), ("second", "1")]));
    assert_eq!(
        regarding(&events),
        pairs(&[
            ("JobCreated", "migrate-first-1"),
            ("JobCreated", "migrate-second-1")
        ]),
        "{events:#?}"
    );
}

#[tokio::test]
#[ignore = "needs MIGRATE_TEST_KUBECONFIG (examples/kube-testenv)"]
async fn the_roles_grant_what_the_operator_and_the_runner_do() {
    let t = or_skip!(Env::new("operator and runner RBAC", &["flaky"], &[]).await);
    // The operator: reads the index and the ledger, creates Jobs, publishes Events, records a
    // failed entry, and holds its leader Lease.
    let operator = t.operator_under_rbac().await;
    let ctx = t.context(operator.clone(), retries(1, 1, 1));
    t.reconcile(&ctx).await.unwrap();
    t.ended(&ctx, "migrate-flaky-1", false).await;
    let snapshot = t.ledger(t.cluster.client()).read().await.unwrap().unwrap();
    assert_eq!(
        snapshot.entry(&s("flaky")).unwrap().state,
        EntryState::Failed
    );
    let leader = migration_kube::LeaseLock::new(
        operator,
        &t.ns,
        "cozystack-migrations-operator",
        migration_kube::Writer {
            ledger: "leader election".to_owned(),
            retry: RetryPolicy::immediate(2),
        },
        t.clock.clone(),
    );
    let lease = leader
        .acquire("replica-a", Duration::from_secs(15))
        .await
        .unwrap();
    leader.renew(&lease, Duration::from_secs(15)).await.unwrap();
    // The Jobs' runner: reads and writes the ledger, counts attempts, takes the run lock.
    let runner = t.configmap_ledger(t.cluster.service_account_client(&t.ns, RUNNER_SA).await);
    let lock = runner
        .acquire("job-pod", Duration::from_secs(30))
        .await
        .unwrap();
    runner.note_attempt(&s("other"), "t-1", 0).await.unwrap();
    runner
        .write(
            &[(s("other"), LedgerEntry::new(EntryState::Ok, t.clock.now()))],
            WriteMode::Replace,
        )
        .await
        .unwrap();
    assert_eq!(runner.read().await.unwrap().unwrap().records.len(), 2);
    runner.release(&lock).await.unwrap();
}

#[tokio::test]
#[ignore = "needs MIGRATE_TEST_KUBECONFIG (examples/kube-testenv)"]
async fn a_verb_missing_from_a_role_fails_with_a_forbidden_error_naming_it() {
    let t = or_skip!(Env::new("RBAC: a missing verb", &["first"], &[]).await);
    // The operator's Role without `create` on Jobs, the runner's without `patch` on the ledger.
    t.apply_rbac(|m| {
        m.replace(
            r#"resources: ["jobs"]
    verbs: ["get", "list", "watch", "create"]"#,
            r#"resources: ["jobs"]
    verbs: ["get", "list", "watch"]"#,
        )
        .replace(
            r#"resourceNames: ["cozystack-version"]
    verbs: ["get", "patch"]"#,
            r#"resourceNames: ["cozystack-version"]
    verbs: ["get"]"#,
        )
    });
    let operator = t.cluster.service_account_client(&t.ns, OPERATOR_SA).await;
    let ctx = t.context(operator, Retries::default());
    let err = t.reconcile(&ctx).await.unwrap_err();
    // Said as the controller says a failed reconcile: the condition names the refused verb.
    migrate_operator::failed(&err, &ctx).await;
    let status = t.status().await;
    assert_eq!(status["reason"], "MissingRights", "{status:#}");
    message_contains(&status, "cannot create resource \"jobs\"");
    let text = err.to_string();
    assert!(
        text.contains(&format!(
            "User \"system:serviceaccount:{}:{OPERATOR_SA}\" cannot create resource \"jobs\" in API group \"batch\"",
            t.ns
        )),
        "{text}"
    );
    assert!(t.jobs().await.is_empty());
    let runner = t.ledger(t.cluster.service_account_client(&t.ns, RUNNER_SA).await);
    let err = runner.note_attempt(&s("first"), "t", 0).await.unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, LedgerError::Permanent { .. }), "{err:?}");
    assert!(
        text.contains("403 Forbidden") && text.contains("cannot patch resource \"configmaps\""),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs MIGRATE_TEST_KUBECONFIG (examples/kube-testenv)"]
async fn with_two_replicas_only_the_leader_acts_on_a_real_server() {
    let t = or_skip!(Env::new("operator leader election", &[], &[]).await);
    common::only_the_leader_acts(t.cluster.client(), &t.ns).await;
}

// What a platform operator meets (issue 30): Events per Job and outcome, the give-up record,
// the attempt history, the ledger's watch, a missing index, the chart, SIGTERM and logs.

impl Env {
    /// Finishes Job `job` as failed with the output `tail` in its pod's terminated container, as
    /// the kubelet leaves it under `terminationMessagePolicy: FallbackToLogsOnError` (the pod is
    /// created here: no controller runs on the test server).
    async fn fail_with_output(&self, job: &str, tail: &str) {
        let pods: Api<k8s_openapi::api::core::v1::Pod> =
            Api::namespaced(self.cluster.client(), &self.ns);
        let pod: k8s_openapi::api::core::v1::Pod = serde_json::from_value(json!({
            "metadata": {"name": format!("{job}-pod"), "labels": {"batch.kubernetes.io/job-name": job}},
            "spec": {"serviceAccountName": RUNNER_SA, "automountServiceAccountToken": false,
                     "restartPolicy": "Never", "containers": [{"name": "migrate", "image": "img"}]},
        }))
        .unwrap();
        pods.create(&Default::default(), &pod).await.unwrap();
        let at = self.clock.now().to_string();
        let status = json!({"status": {"phase": "Failed", "containerStatuses": [{
            "name": "migrate", "image": "img", "imageID": "", "ready": false, "restartCount": 0,
            "state": {"terminated": {"exitCode": 4, "reason": "Error", "message": tail,
                                     "startedAt": at, "finishedAt": at}}}]}});
        pods.patch_status(
            &format!("{job}-pod"),
            &PatchParams::default(),
            &Patch::Merge(status),
        )
        .await
        .unwrap();
        self.finish(job, false).await;
    }

    /// Merge-patches `data` into the `data` of ConfigMap `name` (the index or the ledger), as a
    /// person or the chart changes it (`null` removes a key).
    async fn patch_data(&self, name: &str, data: serde_json::Value) {
        let cms: Api<ConfigMap> = Api::namespaced(self.cluster.client(), &self.ns);
        cms.patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({ "data": data })),
        )
        .await
        .unwrap();
    }
}

#[tokio::test]
#[ignore = "needs MIGRATE_TEST_KUBECONFIG (examples/kube-testenv)"]
async fn each_job_and_each_outcome_is_its_own_event_regarding_its_job() {
    let t = or_skip!(
        Env::new(
            "operator: one Event per Job",
            &["alpha", "beta", "gamma"],
            &[]
        )
        .await
    );
    let ctx = t.context(t.cluster.client(), retries(2, 30, 300));
    t.reconcile(&ctx).await.unwrap();
    t.record_ok("alpha").await;
    t.ended(&ctx, "migrate-alpha-1", true).await;
    t.ended(&ctx, "migrate-beta-1", false).await;
    t.reconcile(&ctx).await.unwrap();
    t.clock.advance(Duration::from_secs(31));
    t.reconcile(&ctx).await.unwrap();
    t.ended(&ctx, "migrate-beta-2", false).await;
    t.reconcile(&ctx).await.unwrap();
    assert_eq!(
        t.jobs().await,
        pairs(&[("alpha", "1"), ("beta", "1"), ("beta", "2"), ("gamma", "1")])
    );
    let events = t.events_until(|e| e.len() >= 6).await;
    assert_eq!(
        regarding(&events),
        pairs(&[
            ("BackingOff", "migrate-beta-1"),
            ("JobCreated", "migrate-alpha-1"),
            ("JobCreated", "migrate-beta-1"),
            ("JobCreated", "migrate-beta-2"),
            ("JobCreated", "migrate-gamma-1"),
            ("RetriesExhausted", "migrate-beta-2"),
        ]),
        "{events:#?}"
    );
    for e in &events {
        assert!(e["series"].is_null(), "no Event folded into another: {e:#}");
        let job = e["regarding"]["name"].as_str().unwrap();
        assert!(e["note"].as_str().unwrap().contains(job), "{e:#}");
    }
    // With the ConfigMap ledger, the condition is in the status ConfigMap.
    let status = t.status().await;
    assert_eq!(
        (&status["type"], &status["status"], &status["reason"]),
        (
            &json!("BackgroundMigrations"),
            &json!("False"),
            &json!("MigrationRunning")
        ),
        "{status:#}"
    );
    assert_eq!(status["queue"]["running"], 1, "{status:#}");
    assert_eq!(status["queue"]["failed"], 1, "{status:#}");
    assert_eq!(status["queue"]["pending"], 1, "{status:#}");
    let metrics = ctx.metrics.render();
    metrics_contain(
        &metrics,
        &[
            "migrate_operator_migrations_failed 1\n",
            "migrate_operator_migrations_pending 1\n",
            "migrate_operator_last_success_timestamp_seconds ",
        ],
    );
}

#[tokio::test]
#[ignore = "needs MIGRATE_TEST_KUBECONFIG (examples/kube-testenv)"]
async fn a_give_up_records_the_image_and_output_of_the_last_job_and_deleted_jobs_still_count() {
    let t = or_skip!(Env::new("operator: the give-up record", &["bg"], &[]).await);
    let operator = t.operator_under_rbac().await;
    let ctx = t.context(operator, retries(3, 30, 300));
    t.reconcile(&ctx).await.unwrap();
    t.ended(&ctx, "migrate-bg-1", false).await;
    // The first Job goes (its TTL, or a person): its failure still counts. Background
    // propagation, as the TTL controller deletes (the default, orphan, leaves a finalizer only a
    // garbage collector removes, and none runs here).
    t.jobs_api()
        .delete("migrate-bg-1", &kube::api::DeleteParams::background())
        .await
        .unwrap();
    t.clock.advance(Duration::from_secs(31));
    t.reconcile(&ctx).await.unwrap();
    assert_eq!(
        t.jobs().await,
        pairs(&[("bg", "2")]),
        "attempt 2, not 1 again"
    );
    t.finish("migrate-bg-2", false).await;
    t.clock.advance(Duration::from_secs(61));
    t.reconcile(&ctx).await.unwrap();
    assert_eq!(t.jobs().await, pairs(&[("bg", "2"), ("bg", "3")]));
    // A new release is rolled out while attempt 3 runs the old image.
    t.patch_data(INDEX, json!({ "image": common::NEXT_IMAGE }))
        .await;
    t.fail_with_output(
        "migrate-bg-3",
        "step 1 done\nkubectl: error: the server is gone\n",
    )
    .await;
    t.reconcile(&ctx).await.unwrap();
    let ledger = t.ledger(t.cluster.client());
    let snapshot = ledger.read().await.unwrap().unwrap();
    let entry = snapshot.entry(&s("bg")).expect("a failed entry");
    common::assert_gave_up(entry, "job migrate-bg-3: BackoffLimitExceeded");
    assert_eq!(
        entry.image.as_deref(),
        Some(common::IMAGE),
        "the image the Jobs ran, not the index's new one"
    );
    assert_eq!(
        entry.batch.as_deref(),
        Some("00002-v1.8.0"),
        "the batch the index names, as a runner's entry records it"
    );
    // The Job's output is kept in the ledger's Secret, the entry naming it (CONTRACT.md §5.2).
    let message = entry.message.as_deref().unwrap();
    assert!(!message.contains("the server is gone"), "{entry:?}");
    let tail = ledger.kept_output(message).await.unwrap();
    assert_eq!(
        tail.as_deref(),
        Some("step 1 done\nkubectl: error: the server is gone"),
        "{entry:?}"
    );
    assert_eq!(entry.attempts, 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs MIGRATE_TEST_KUBECONFIG (examples/kube-testenv)"]
async fn a_repaired_configmap_ledger_entry_wakes_the_operator_without_touching_the_index() {
    let t = or_skip!(Env::new("operator: the ledger's watch", &["first"], &[]).await);
    let set_entry = |value: serde_json::Value| t.patch_data(LEDGER, json!({ "m.first": value }));
    set_entry(json!("{not json")).await;
    let ctx = t.context(t.cluster.client(), Retries::default());
    let controller = tokio::spawn(run_controller(ctx));
    let events = t
        .events_until(|e| e.iter().any(|e| e["reason"] == "CorruptEntry"))
        .await;
    assert!(
        events.iter().any(|e| e["reason"] == "CorruptEntry"),
        "{events:#?}"
    );
    assert!(
        t.jobs().await.is_empty(),
        "the queue stops at the corrupt entry"
    );
    // The repair (here: removing the unreadable value, so `first` is pending again).
    set_entry(serde_json::Value::Null).await;
    t.wait_for_jobs(1).await;
    controller.abort();
    assert_eq!(t.jobs().await, pairs(&[("first", "1")]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs MIGRATE_TEST_KUBECONFIG (examples/kube-testenv)"]
async fn a_repaired_crd_ledger_entry_wakes_the_operator_and_the_condition_says_so() {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let t = or_skip!(Env::new("operator: the CRD ledger's watch", &["first"], &[]).await);
    let client = t.cluster.client();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd_name = format!("{}.{}", ledger_crd::PLURAL, ledger_crd::GROUP);
    crds.patch(
        &crd_name,
        &PatchParams::apply("operator-tests"),
        &Patch::Apply(ledger_crd::crd()),
    )
    .await
    .unwrap();
    test_apiserver::real::wait_until_established(&client, &crd_name).await;
    let name = unique_name("op-crd");
    let crd_ledger = ledger_crd::CrdLedger::new(client.clone(), &name);
    crd_ledger.create(&[]).await.unwrap();
    let ledgers: Api<ledger_crd::MigrationLedger> = Api::all(client.clone());
    let set_entry = |value: serde_json::Value| {
        let ledgers = ledgers.clone();
        let name = name.clone();
        async move {
            ledgers
                .patch_status(
                    &name,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"status": {"entries": {"first": value}}})),
                )
                .await
                .unwrap();
        }
    };
    set_entry(json!({"s": "bogus", "t": "2026-08-12T10:04:00Z"})).await;
    let mut config = OperatorConfig::new(&t.ns);
    config.ledger_spec = format!("crd:{name}");
    config.ledger_object = Some(migrate_operator::LedgerObject::Crd { name: name.clone() });
    let mut ctx = Context::new(
        client.clone(),
        Arc::new(crd_ledger.clone()),
        config,
        t.clock.clone(),
        "test-replica",
    );
    ctx.conditions = Some(Arc::new(migrate_operator::CrdConditions::new(
        crd_ledger.clone(),
    )));
    let ctx = Arc::new(ctx);
    let condition = || {
        let ledgers = ledgers.clone();
        let name = name.clone();
        async move {
            let object = ledgers.get(&name).await.unwrap();
            object
                .status
                .unwrap_or_default()
                .conditions
                .iter()
                .find(|c| c.type_ == migrate_operator::OPERATOR_CONDITION)
                .map(|c| c.reason.clone())
        }
    };
    let wait_for_reason = |want: &'static str| async move {
        for _ in 0..200 {
            if condition().await.as_deref() == Some(want) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("condition never became {want}: {:?}", condition().await);
    };
    let controller = tokio::spawn(run_controller(ctx));
    wait_for_reason("CorruptEntry").await;
    assert!(t.jobs().await.is_empty());
    set_entry(serde_json::Value::Null).await;
    t.wait_for_jobs(1).await;
    wait_for_reason("MigrationRunning").await;
    controller.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs MIGRATE_TEST_KUBECONFIG (examples/kube-testenv)"]
async fn a_deleted_index_is_announced_and_its_running_job_is_kept_and_adopted_again() {
    let t = or_skip!(Env::new("operator: a missing index", &["first"], &[]).await);
    let ctx = t.context(t.cluster.client(), Retries::default());
    let controller = tokio::spawn(run_controller(ctx));
    t.wait_for_jobs(1).await;
    let cms: Api<ConfigMap> = Api::namespaced(t.cluster.client(), &t.ns);
    let index = cms.get(INDEX).await.unwrap();
    cms.delete(INDEX, &Default::default()).await.unwrap();
    let events = t
        .events_until(|e| e.iter().any(|e| e["reason"] == "IndexMissing"))
        .await;
    let missing = events
        .iter()
        .find(|e| e["reason"] == "IndexMissing")
        .unwrap_or_else(|| panic!("no IndexMissing Event: {events:#?}"));
    assert_eq!(missing["type"], "Warning");
    assert_eq!(missing["regarding"]["name"], INDEX);
    // The Event is sent before the status is written: wait for the status too.
    for _ in 0..100 {
        if t.status().await["reason"] == "IndexMissing" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(t.status().await["reason"], "IndexMissing");
    // Re-created (as a chart upgrade would): a new uid, and the running Job is waited for.
    let mut again = index.clone();
    again.metadata = kube::api::ObjectMeta {
        name: Some(INDEX.into()),
        ..Default::default()
    };
    cms.create(&Default::default(), &again).await.unwrap();
    for _ in 0..100 {
        if t.status().await["reason"] == "MigrationRunning" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    controller.abort();
    assert_eq!(t.status().await["reason"], "MigrationRunning");
    assert_eq!(
        t.jobs().await,
        pairs(&[("first", "1")]),
        "kept, never duplicated"
    );
}

/// `GET path` from a local listener, the response.
fn get(port: u16, path: &str) -> String {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .write_all(format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n").as_bytes())
        .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    response
}

/// `GET /metrics` from a local listener, the response.
fn scrape(port: u16) -> String {
    let response = get(port, "/metrics");
    assert!(response.starts_with("HTTP/1.1 200 OK\r\n"), "{response}");
    response
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs MIGRATE_TEST_KUBECONFIG (examples/kube-testenv)"]
async fn the_chart_runs_the_operator_binary_with_bounded_jobs_metrics_plain_logs_and_a_lease_released_on_sigterm()
 {
    let Some(cluster) = RealCluster::from_env("operator binary from the helm chart").await else {
        return;
    };
    let ns = unique_name("op-chart");
    cluster.ensure_namespace(&ns).await;
    let chart = concat!(env!("CARGO_MANIFEST_DIR"), "/../chart");
    let mut helm = cluster.helm();
    helm.args(["install", "platform", chart, "--namespace", &ns])
        .args(["--set", "operator.job.activeDeadlineSeconds=1200"])
        .args(["--set", "operator.job.ttlSecondsAfterFinished=600"])
        .args(["--set", "operator.job.resources.limits.memory=300Mi"])
        // The pod settings a platform gives its pods reach the Jobs too.
        .args(["--set", "imagePullSecrets[0].name=regcred"])
        .args(["--set", "nodeSelector.pool=system"])
        .args([
            "--set",
            "tolerations[0].key=dedicated,tolerations[0].operator=Exists",
        ])
        .args(["--set", "podAnnotations.example\\.com/team=platform"]);
    test_apiserver::real::succeeded("helm install", &helm.output().unwrap());
    let deployments: Api<k8s_openapi::api::apps::v1::Deployment> =
        Api::namespaced(cluster.client(), &ns);
    let deployment = deployments.get(OPERATOR_SA).await.unwrap();
    let pod_spec = deployment.spec.unwrap().template.spec.unwrap();
    let anti = pod_spec
        .affinity
        .as_ref()
        .and_then(|a| a.pod_anti_affinity.as_ref())
        .and_then(|a| {
            a.preferred_during_scheduling_ignored_during_execution
                .as_ref()
        })
        .expect("the replicas spread over nodes");
    assert_eq!(
        anti[0].pod_affinity_term.topology_key,
        "kubernetes.io/hostname"
    );
    let container = &pod_spec.containers[0];
    assert_eq!(container.ports.as_ref().unwrap()[0].container_port, 9090);
    for (probe, path) in [
        (&container.liveness_probe, "/healthz"),
        (&container.readiness_probe, "/readyz"),
    ] {
        let get = probe.as_ref().and_then(|p| p.http_get.clone()).expect(path);
        assert_eq!(get.path.as_deref(), Some(path));
    }
    let budgets: Api<k8s_openapi::api::policy::v1::PodDisruptionBudget> =
        Api::namespaced(cluster.client(), &ns);
    let budget = budgets.get(OPERATOR_SA).await.unwrap().spec.unwrap();
    assert_eq!(
        budget.max_unavailable,
        Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(1))
    );
    let command = container.command.clone().unwrap();
    assert_eq!(command[0], "migrate-operator");
    // The chart's command, under the chart's ServiceAccount, metrics on a free local port.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let args = |metrics: &str| -> Vec<String> {
        command[1..]
            .iter()
            .map(|a| {
                if a.starts_with("--metrics-address=") {
                    format!("--metrics-address={metrics}")
                } else {
                    a.clone()
                }
            })
            .collect()
    };
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(&ns);
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig = dir.join("operator.kubeconfig");
    std::fs::write(
        &kubeconfig,
        cluster.service_account_kubeconfig(&ns, OPERATOR_SA).await,
    )
    .unwrap();
    let replica = |name: &str, metrics: &str| {
        let log = std::fs::File::create(dir.join(format!("{name}.log"))).unwrap();
        std::process::Command::new(env!("CARGO_BIN_EXE_migrate-operator"))
            .args(args(metrics))
            .env("KUBECONFIG", &kubeconfig)
            .env("POD_NAME", name)
            .env("MIGRATE_LOG", "info")
            .stdout(std::process::Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap()
    };
    let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
        Api::namespaced(cluster.client(), &ns);
    let holder = || {
        let leases = leases.clone();
        async move {
            leases
                .get_opt(OPERATOR_SA)
                .await
                .unwrap()
                .and_then(|l| l.spec?.holder_identity)
                .unwrap_or_default()
        }
    };
    let mut a = replica("replica-a", &format!("127.0.0.1:{port}"));
    for _ in 0..100 {
        if holder().await.contains("replica-a") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(holder().await.contains("replica-a"), "{}", holder().await);
    // Work for it: the chart seeded the demo's background slug; removing its entry makes it
    // pending.
    let slug = "reindex-tenant-dashboards";
    let cms: Api<ConfigMap> = Api::namespaced(cluster.client(), &ns);
    cms.patch(
        LEDGER,
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {format!("m.{slug}"): null}})),
    )
    .await
    .unwrap();
    let jobs: Api<Job> = Api::namespaced(cluster.client(), &ns);
    let name = format!("migrate-{slug}-1");
    let mut job = None;
    for _ in 0..200 {
        job = jobs.get_opt(&name).await.unwrap();
        if job.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let job = job.unwrap_or_else(|| panic!("no Job {name}"));
    // The API server names a writer that gives no field manager by its User-Agent.
    let managers: Vec<_> = job
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .filter_map(|m| m.manager.clone())
        .collect();
    assert_eq!(managers, ["migrate-operator"], "the binary's User-Agent");
    let spec = job.spec.unwrap();
    assert_eq!(spec.active_deadline_seconds, Some(1200));
    assert_eq!(spec.ttl_seconds_after_finished, Some(600));
    let template = spec.template;
    common::assert_platform_pod_settings(&template, "IfNotPresent");
    let pod = template.spec.unwrap();
    let resources = pod.containers[0].resources.clone().unwrap();
    assert_eq!(resources.limits.unwrap()["memory"].0, "300Mi");
    assert_eq!(resources.requests.unwrap()["cpu"].0, "10m");
    let mut metrics = String::new();
    for _ in 0..50 {
        metrics = scrape(port);
        if metrics.contains("migrate_operator_migrations_running 1\n") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(metrics.contains("migrate_operator_leader 1\n"), "{metrics}");
    for probe in ["/healthz", "/readyz"] {
        let answer = get(port, probe);
        assert!(
            answer.starts_with("HTTP/1.1 200 OK\r\n"),
            "{probe}: {answer}"
        );
    }
    metrics_contain(
        &metrics,
        &[
            "migrate_operator_migrations_running 1\n",
            "# TYPE migrate_operator_migrations_pending gauge\n",
        ],
    );
    // A second replica follows; SIGTERM to the leader hands over at the follower's next
    // campaign (a third of the 15 s Lease), not when the Lease lapses.
    let mut b = replica("replica-b", "off");
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(holder().await.contains("replica-a"));
    let term = |pid: u32| {
        let status = std::process::Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    };
    let stopped = std::time::Instant::now();
    term(a.id());
    let mut exited = None;
    for _ in 0..100 {
        exited = a.try_wait().unwrap();
        if exited.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let exited = exited.expect("replica-a exits on SIGTERM");
    assert!(exited.success(), "{exited:?}");
    while !holder().await.contains("replica-b") && stopped.elapsed() < Duration::from_secs(20) {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let handover = stopped.elapsed();
    term(b.id());
    b.wait().unwrap();
    assert!(
        handover < Duration::from_secs(8),
        "the follower took over after {handover:?}"
    );
    let log = std::fs::read_to_string(dir.join("replica-a.log")).unwrap();
    assert!(log.contains("released leadership"), "{log}");
    assert!(
        !log.contains('\u{1b}'),
        "colour codes in a log file: {log:?}"
    );
    eprintln!("handover after SIGTERM: {handover:?}");
}

// Issue 37: serial means serial, say what is wrong, decided once, what cluster admins expect.

impl Env {
    /// Jobs without a Complete or Failed condition.
    async fn active_jobs(&self) -> Vec<String> {
        let mut active: Vec<String> = self
            .stored_jobs()
            .await
            .into_iter()
            .filter(|j| {
                !j.status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|c| {
                        c.iter().any(|c| {
                            (c.type_ == "Complete" || c.type_ == "Failed") && c.status == "True"
                        })
                    })
            })
            .map(|j| j.metadata.name.unwrap_or_default())
            .collect();
        active.sort();
        active
    }

    async fn status_until(&self, reason: &str) -> serde_json::Value {
        for _ in 0..100 {
            let cms: Api<ConfigMap> = Api::namespaced(self.cluster.client(), &self.ns);
            if let Some(cm) = cms.get_opt(migrate_operator::STATUS_NAME).await.unwrap()
                && let Some(raw) = cm.data.unwrap_or_default().get("status")
            {
                let status: serde_json::Value = serde_json::from_str(raw).unwrap();
                if status["reason"] == reason {
                    return status;
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        self.status().await
    }
}

/// Notes of the Events with `reason`, sorted.
fn notes(events: &[serde_json::Value], reason: &str) -> Vec<String> {
    let mut v: Vec<String> = events
        .iter()
        .filter(|e| e["reason"] == reason)
        .map(|e| e["note"].as_str().unwrap_or_default().to_owned())
        .collect();
    v.sort();
    v
}

#[tokio::test]
#[ignore = "needs MIGRATE_TEST_KUBECONFIG (examples/kube-testenv)"]
async fn changing_the_index_while_a_job_runs_never_starts_a_second_job() {
    let t = or_skip!(
        Env::new(
            "operator: index changed while a Job runs",
            &["first", "second", "third"],
            &[]
        )
        .await
    );
    let ctx = t.context(t.cluster.client(), Retries::default());
    t.reconcile(&ctx).await.unwrap();
    assert_eq!(t.active_jobs().await, ["migrate-first-1"]);
    // The running slug revoked: its Job is left to finish, nothing raced beside it.
    t.patch_data(INDEX, json!({"revoked": "first\n"})).await;
    t.reconcile(&ctx).await.unwrap();
    assert_eq!(t.active_jobs().await, ["migrate-first-1"], "revoked");
    // Reordered: still the one Job.
    t.patch_data(INDEX, json!({"slugs": "third\nsecond\nfirst\n"}))
        .await;
    t.reconcile(&ctx).await.unwrap();
    assert_eq!(t.active_jobs().await, ["migrate-first-1"], "reordered");
    let metrics = ctx.metrics.render();
    assert!(
        metrics.contains("migrate_operator_migrations_running 1\n"),
        "{metrics}"
    );
    // Once it has finished, the next in the index's new order.
    t.ended(&ctx, "migrate-first-1", true).await;
    assert_eq!(t.active_jobs().await, ["migrate-third-1"]);
}

#[tokio::test]
#[ignore = "needs MIGRATE_TEST_KUBECONFIG (examples/kube-testenv)"]
async fn the_next_job_starts_when_the_previous_job_has_finished_not_on_its_record() {
    let t = or_skip!(Env::new("operator: hand-off on finish", &["first", "second"], &[]).await);
    let ctx = t.context(t.cluster.client(), Retries::default());
    t.reconcile(&ctx).await.unwrap();
    // The runner records its entry before its pod ends.
    t.record_ok("first").await;
    t.reconcile(&ctx).await.unwrap();
    assert_eq!(
        t.jobs().await,
        pairs(&[("first", "1")]),
        "recorded, not finished"
    );
    assert_eq!(t.status().await["reason"], "MigrationRunning");
    t.ended(&ctx, "migrate-first-1", true).await;
    assert_eq!(t.jobs().await, pairs(&[("first", "1"), ("second", "1")]));
    assert_eq!(t.active_jobs().await, ["migrate-second-1"]);
}

#[tokio::test]
#[ignore = "needs MIGRATE_TEST_KUBECONFIG (examples/kube-testenv)"]
async fn a_deleted_ledger_is_ledger_missing_with_no_job_and_true_figures() {
    let t = or_skip!(Env::new("operator: a deleted ledger", &["first", "second"], &[]).await);
    let ctx = t.context(t.cluster.client(), Retries::default());
    t.reconcile(&ctx).await.unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(t.cluster.client(), &t.ns);
    cms.delete(LEDGER, &Default::default()).await.unwrap();
    // The Job ends as the runner ends it without a ledger: refused, failed.
    t.finish("migrate-first-1", false).await;
    for _ in 0..2 {
        t.reconcile(&ctx).await.unwrap();
        t.clock.advance(Duration::from_secs(600));
    }
    assert_eq!(
        t.jobs().await,
        pairs(&[("first", "1")]),
        "no Job without a ledger"
    );
    let status = t.status().await;
    assert_eq!(status["reason"], "LedgerMissing", "{status:#}");
    message_contains(&status, &format!("configmap:{}/{LEDGER}", t.ns));
    assert_eq!(status["queue"]["running"], 0, "{status:#}");
    let metrics = ctx.metrics.render();
    assert!(
        metrics.contains("migrate_operator_migrations_running 0\n"),
        "{metrics}"
    );
    let events = t
        .events_until(|e| e.iter().any(|e| e["reason"] == "LedgerMissing"))
        .await;
    assert_eq!(notes(&events, "LedgerMissing").len(), 1, "{events:#?}");
}

#[tokio::test]
#[ignore = "needs MIGRATE_TEST_KUBECONFIG (examples/kube-testenv)"]
async fn an_index_image_migrate_index_refuses_is_index_invalid_in_its_words_each_cause_its_own_event()
 {
    let t = or_skip!(Env::new("operator: the index image", &["first"], &[]).await);
    let ctx = t.context(t.cluster.client(), Retries::default());
    let bad = ["ghcr.io/x/m@sha256:zz", "ghcr.io/x/m@md5:00"];
    for image in bad {
        t.patch_data(INDEX, json!({ "image": image })).await;
        let err = t.reconcile(&ctx).await.unwrap_err().to_string();
        let why = migrate_shared::index::check_image(image, true).unwrap_err();
        assert!(err.contains(&why), "{err} lacks {why}");
        let status = t.status().await;
        assert_eq!(status["reason"], "IndexInvalid", "{status:#}");
        message_contains(&status, &why);
    }
    assert!(t.jobs().await.is_empty(), "no Job from an unpinned image");
    let events = t
        .events_until(|e| notes(e, "IndexInvalid").len() >= 2)
        .await;
    let said = notes(&events, "IndexInvalid");
    assert_eq!(said.len(), 2, "one Event per cause: {events:#?}");
    for image in bad {
        assert!(said.iter().any(|n| n.contains(image)), "{said:?}");
    }
}

#[tokio::test]
#[ignore = "needs MIGRATE_TEST_KUBECONFIG (examples/kube-testenv)"]
async fn a_job_recreated_under_its_name_gets_an_event_with_its_own_image() {
    let t = or_skip!(Env::new("operator: a re-created Job's Event", &["first"], &[]).await);
    let ctx = t.context(t.cluster.client(), Retries::default());
    t.reconcile(&ctx).await.unwrap();
    // Deleted before it ran (by a person); a new release meanwhile.
    t.jobs_api()
        .delete("migrate-first-1", &kube::api::DeleteParams::background())
        .await
        .unwrap();
    t.patch_data(INDEX, json!({ "image": common::NEXT_IMAGE }))
        .await;
    t.reconcile(&ctx).await.unwrap();
    assert_eq!(t.jobs().await, pairs(&[("first", "1")]));
    let events = t.events_until(|e| notes(e, "JobCreated").len() >= 2).await;
    let said = notes(&events, "JobCreated");
    assert_eq!(said.len(), 2, "{events:#?}");
    assert!(said.iter().any(|n| n.contains(common::IMAGE)), "{said:?}");
    assert!(
        said.iter().any(|n| n.contains(common::NEXT_IMAGE)),
        "{said:?}"
    );
    for e in &events {
        assert!(e["series"].is_null(), "folded: {e:#}");
    }
}

#[tokio::test]
#[ignore = "needs MIGRATE_TEST_KUBECONFIG (examples/kube-testenv)"]
async fn backing_off_names_the_cause_of_the_failure() {
    let t = or_skip!(Env::new("operator: BackingOff's cause", &["quiet", "loud"], &[]).await);
    let ctx = t.context(t.cluster.client(), Retries::default());
    t.reconcile(&ctx).await.unwrap();
    // Succeeded without recording anything.
    t.ended(&ctx, "migrate-quiet-1", true).await;
    let status = t.status().await;
    assert_eq!(status["reason"], "BackingOff", "{status:#}");
    message_contains(&status, "succeeded but recorded nothing");
    t.clock.advance(Duration::from_secs(31));
    t.reconcile(&ctx).await.unwrap();
    t.ended(&ctx, "migrate-quiet-2", false).await;
    let status = t.status().await;
    message_contains(
        &status,
        "BackoffLimitExceeded: Job has reached the specified backoff limit",
    );
    let events = t.events_until(|e| notes(e, "BackingOff").len() >= 2).await;
    let said = notes(&events, "BackingOff");
    assert!(
        said.iter()
            .any(|n| n.contains("succeeded but recorded nothing")),
        "{said:?}"
    );
    assert!(
        said.iter().any(|n| n.contains("BackoffLimitExceeded")),
        "{said:?}"
    );
}

#[tokio::test]
#[ignore = "needs MIGRATE_TEST_KUBECONFIG (examples/kube-testenv)"]
async fn a_deleted_failed_entry_is_given_up_again_from_the_history_whether_or_not_its_jobs_remain()
{
    for jobs_deleted in [false, true] {
        let t = or_skip!(Env::new("operator: a failed entry decided once", &["bg"], &[]).await);
        let ctx = t.context(t.cluster.client(), retries(1, 1, 1));
        t.reconcile(&ctx).await.unwrap();
        t.ended(&ctx, "migrate-bg-1", false).await;
        let failed = |snapshot: Option<migration_core::LedgerSnapshot>| {
            snapshot
                .and_then(|snap| snap.entry(&s("bg")).cloned())
                .map(|e| e.state)
        };
        let ledger = t.ledger(t.cluster.client());
        assert_eq!(
            failed(ledger.read().await.unwrap()),
            Some(EntryState::Failed)
        );
        // The operator moves on past the recorded failure.
        t.reconcile(&ctx).await.unwrap();
        if jobs_deleted {
            // Its TTL ran out.
            t.jobs_api()
                .delete("migrate-bg-1", &kube::api::DeleteParams::background())
                .await
                .unwrap();
        }
        // Someone deletes the failed entry.
        t.patch_data(LEDGER, json!({ "m.bg": null })).await;
        t.clock.advance(Duration::from_secs(60));
        t.reconcile(&ctx).await.unwrap();
        assert_eq!(
            failed(ledger.read().await.unwrap()),
            Some(EntryState::Failed),
            "jobs deleted: {jobs_deleted}"
        );
        t.reconcile(&ctx).await.unwrap();
        let expected = if jobs_deleted {
            vec![]
        } else {
            pairs(&[("bg", "1")])
        };
        assert_eq!(t.jobs().await, expected, "jobs deleted: {jobs_deleted}");
    }
}

#[tokio::test]
#[ignore = "needs MIGRATE_TEST_KUBECONFIG (examples/kube-testenv)"]
async fn the_roles_scope_configmaps_and_leases_to_the_objects_by_name() {
    let t = or_skip!(Env::new("RBAC: rights by name", &["first"], &[]).await);
    let operator = t.operator_under_rbac().await;
    let cms: Api<ConfigMap> = Api::namespaced(operator.clone(), &t.ns);
    let all = cms.list(&ListParams::default()).await.unwrap_err();
    assert!(
        matches!(&all, kube::Error::Api(s) if s.code == 403),
        "the operator lists every ConfigMap: {all:?}"
    );
    let one = cms
        .list(&ListParams::default().fields(&format!("metadata.name={INDEX}")))
        .await
        .unwrap();
    assert_eq!(one.items.len(), 1);
    // The rights the operator checks at start are all granted.
    let config = OperatorConfig::new(&t.ns);
    let needed = migrate_operator::rights::needed(&config, OPERATOR_SA);
    let missing = migrate_operator::rights::missing(&operator, &needed)
        .await
        .unwrap();
    assert!(missing.is_empty(), "{missing:?}");
    // The Jobs' runner reads the one Lease, and writes none.
    let runner = t.cluster.service_account_client(&t.ns, RUNNER_SA).await;
    let leases: Api<k8s_openapi::api::coordination::v1::Lease> = Api::namespaced(runner, &t.ns);
    let lock = format!("{LEDGER}-lock");
    assert!(leases.get_opt(&lock).await.unwrap().is_none());
    for name in ["other-lease", lock.as_str()] {
        let lease: k8s_openapi::api::coordination::v1::Lease =
            serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
        let err = leases
            .create(&Default::default(), &lease)
            .await
            .unwrap_err();
        assert!(
            matches!(&err, kube::Error::Api(s) if s.code == 403),
            "{name}: {err:?}"
        );
    }
    let err = leases.get("other-lease").await.unwrap_err();
    assert!(
        matches!(&err, kube::Error::Api(s) if s.code == 403),
        "{err:?}"
    );
}

#[tokio::test]
#[ignore = "needs MIGRATE_TEST_KUBECONFIG (examples/kube-testenv)"]
async fn every_request_names_the_program_and_its_version() {
    let t = or_skip!(Env::new("operator: User-Agent", &["first"], &[]).await);
    let client = migrate_operator::client::from_config(t.cluster.config()).unwrap();
    let ctx = t.context(client, Retries::default());
    t.reconcile(&ctx).await.unwrap();
    // The API server names a writer that gives no field manager by its User-Agent.
    let job = t.jobs_api().get("migrate-first-1").await.unwrap();
    let managers: Vec<_> = job
        .metadata
        .managed_fields
        .unwrap_or_default()
        .into_iter()
        .filter_map(|m| m.manager)
        .collect();
    assert_eq!(managers, ["migrate-operator"], "{managers:?}");
    assert!(
        migrate_operator::client::AGENT
            .starts_with(concat!("migrate-operator/", env!("CARGO_PKG_VERSION")))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs MIGRATE_TEST_KUBECONFIG (examples/kube-testenv)"]
async fn a_failed_lease_renewal_keeps_leadership_while_the_lease_is_valid() {
    let t = or_skip!(Env::new("operator: a renewal blip", &[], &[]).await);
    let operator = t.operator_under_rbac().await;
    let leadership = migrate_operator::Leadership::new(
        operator,
        &t.ns,
        OPERATOR_SA,
        "replica-a",
        Arc::new(migration_core::SystemClock),
        Duration::from_secs(20),
    );
    let started = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let stopped = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    struct Stopped(Arc<std::sync::atomic::AtomicUsize>);
    impl Drop for Stopped {
        fn drop(&mut self) {
            self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    }
    let (s1, s2) = (started.clone(), stopped.clone());
    let leader = tokio::spawn(async move {
        leadership
            .run(|| {
                let (s1, s2) = (s1.clone(), s2.clone());
                async move {
                    s1.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    let _guard = Stopped(s2);
                    std::future::pending::<()>().await;
                }
            })
            .await;
    });
    for _ in 0..50 {
        if started.load(std::sync::atomic::Ordering::SeqCst) == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(started.load(std::sync::atomic::Ordering::SeqCst), 1);
    // A blip: renewals are refused for 6 s (plus two `kubectl apply`s) of a 20 s Lease (a
    // renewal every 6.7 s): leading stops only 18 s after the last renewal.
    let no_patch = |m: String| {
        m.replace(
            r#"resourceNames: ["cozystack-migrations-operator"]
    verbs: ["get", "patch", "delete"]"#,
            r#"resourceNames: ["cozystack-migrations-operator"]
    verbs: ["get", "delete"]"#,
        )
    };
    t.apply_rbac(no_patch);
    tokio::time::sleep(Duration::from_secs(6)).await;
    t.apply_rbac(|m| m);
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert_eq!(
        (
            started.load(std::sync::atomic::Ordering::SeqCst),
            stopped.load(std::sync::atomic::Ordering::SeqCst)
        ),
        (1, 0),
        "leadership kept through the blip"
    );
    // Refused for longer than the Lease: the leader stops before it could lapse.
    t.apply_rbac(no_patch);
    let refused = std::time::Instant::now();
    while stopped.load(std::sync::atomic::Ordering::SeqCst) == 0
        && refused.elapsed() < Duration::from_secs(30)
    {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let after = refused.elapsed();
    leader.abort();
    assert_eq!(stopped.load(std::sync::atomic::Ordering::SeqCst), 1);
    assert!(after < Duration::from_secs(20), "stopped after {after:?}");
}

/// The operator binary under the operator's ServiceAccount in `t`'s namespace, logging to
/// `log`, with metrics on `port`.
async fn operator_binary(
    t: &Env,
    name: &str,
    port: u16,
) -> (std::process::Child, std::path::PathBuf) {
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(&t.ns);
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig = dir.join("operator.kubeconfig");
    std::fs::write(
        &kubeconfig,
        t.cluster
            .service_account_kubeconfig(&t.ns, OPERATOR_SA)
            .await,
    )
    .unwrap();
    let log = dir.join(format!("{name}.log"));
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_migrate-operator"))
        .args([
            &format!("--namespace={}", t.ns),
            &format!("--ledger=configmap:{}/{LEDGER}", t.ns),
            &format!("--metrics-address=127.0.0.1:{port}"),
        ])
        .env("KUBECONFIG", &kubeconfig)
        .env("POD_NAME", name)
        .env("MIGRATE_LOG", "info")
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    (child, log)
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs MIGRATE_TEST_KUBECONFIG (examples/kube-testenv)"]
async fn missing_lease_rights_are_a_warning_naming_the_verb_and_a_condition() {
    let t = or_skip!(Env::new("operator: Leases get-only", &["first"], &[]).await);
    t.apply_rbac(|m| {
        m.replace(
            r#"resourceNames: ["cozystack-migrations-operator"]
    verbs: ["get", "patch", "delete"]"#,
            r#"resourceNames: ["cozystack-migrations-operator"]
    verbs: ["get"]"#,
        )
        .replace(
            r#"resources: ["leases"]
    verbs: ["create"]"#,
            r#"resources: ["leases"]
    verbs: ["get"]"#,
        )
    });
    let port = free_port();
    let (mut child, log) = operator_binary(&t, "replica-a", port).await;
    let status = t.status_until("MissingRights").await;
    let mut text = String::new();
    for _ in 0..100 {
        text = std::fs::read_to_string(&log).unwrap();
        if text.contains("cannot create resource \"leases\"") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let metrics = scrape(port);
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(status["reason"], "MissingRights", "{status:#}");
    // At start the access review's words, on the refused create the API server's.
    let message = status["message"].as_str().unwrap();
    assert!(
        message.contains("create leases.coordination.k8s.io")
            || message.contains("cannot create resource \"leases\""),
        "{message}"
    );
    for line in [
        "missing right: create leases.coordination.k8s.io",
        "missing right: patch leases.coordination.k8s.io cozystack-migrations-operator",
        "cannot create resource \"leases\"",
    ] {
        assert!(text.contains(line), "{line:?} not in the log:\n{text}");
    }
    assert!(text.contains(" WARN "), "{text}");
    assert!(metrics.contains("migrate_operator_leader 0\n"), "{metrics}");
    assert!(t.jobs().await.is_empty());
}

#[tokio::test]
#[ignore = "needs MIGRATE_TEST_KUBECONFIG (examples/kube-testenv)"]
async fn a_job_just_created_counts_as_running_while_the_job_cache_lags() {
    let t = or_skip!(Env::new("operator: the Job cache lags", &["first", "second"], &[]).await);
    let ctx = Arc::new(Context::new(
        t.cluster.client(),
        t.ledger(t.cluster.client()),
        OperatorConfig::new(&t.ns),
        t.clock.clone(),
        "test-replica",
    ));
    // The cache filled once (no Jobs), then frozen: every later change lags for ever.
    let watch = ctx.jobs.watch(t.cluster.client(), &t.ns);
    let filling = tokio::spawn(watch.for_each(|_| std::future::ready(())));
    ctx.jobs.jobs(Duration::from_secs(10)).await.unwrap();
    filling.abort();
    let _ = filling.await;
    let cms: Api<ConfigMap> = Api::namespaced(t.cluster.client(), &t.ns);
    let index = || async { Arc::new(cms.get(INDEX).await.unwrap()) };
    reconcile(index().await, ctx.clone()).await.unwrap();
    assert_eq!(t.active_jobs().await, ["migrate-first-1"]);
    t.patch_data(INDEX, json!({"revoked": "first\n"})).await;
    reconcile(index().await, ctx.clone()).await.unwrap();
    assert_eq!(
        t.active_jobs().await,
        ["migrate-first-1"],
        "the cache has not seen the Job yet; it runs all the same"
    );
}
