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
            image: "ghcr.io/example/migrations@sha256:0123".into(),
            tree: "/migrations".into(),
            slugs: slugs.iter().map(|x| s(x)).collect(),
            revoked: revoked.iter().map(|x| s(x)).collect(),
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
            let stored = self
                .jobs_api()
                .list(&ListParams::default())
                .await
                .unwrap()
                .items;
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

    /// Jobs as (slug, attempt), sorted.
    async fn jobs(&self) -> Vec<(String, String)> {
        let mut jobs: Vec<_> = self
            .jobs_api()
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
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

#[tokio::test]
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
    let owner = &job.metadata.owner_references.unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str()),
        ("ConfigMap", INDEX)
    );
    // Events are one store with two views on a real server (the test double keeps two).
    assert_eq!(t.event_reasons(true).await, ["JobCreated"]);
    assert_eq!(t.event_reasons(false).await, ["JobCreated"]);
}

#[tokio::test]
async fn job_status_set_through_the_status_subresource_drives_success_retries_and_give_up() {
    let t = or_skip!(Env::new("operator: Job outcomes", &["first", "flaky", "last"], &[]).await);
    let retries = Retries {
        limit: 2,
        base: Duration::from_secs(30),
        cap: Duration::from_secs(300),
    };
    let ctx = t.context(t.cluster.client(), retries);
    t.reconcile(&ctx).await.unwrap();
    t.record_ok("first").await;
    t.finish("migrate-first-1", true).await;
    t.reconcile(&ctx).await.unwrap();
    assert_eq!(t.jobs().await, pairs(&[("first", "1"), ("flaky", "1")]));
    t.finish("migrate-flaky-1", false).await;
    t.reconcile(&ctx).await.unwrap();
    assert_eq!(t.jobs().await.len(), 2, "backing off: no retry yet");
    t.clock.advance(Duration::from_secs(31));
    t.reconcile(&ctx).await.unwrap();
    assert_eq!(
        t.jobs().await,
        pairs(&[("first", "1"), ("flaky", "1"), ("flaky", "2")])
    );
    t.finish("migrate-flaky-2", false).await;
    t.reconcile(&ctx).await.unwrap();
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
async fn the_controller_under_its_own_serviceaccount_reacts_to_real_watches() {
    let t = or_skip!(Env::new("operator: controller and RBAC", &["first", "second"], &[]).await);
    t.apply_rbac(|m| m);
    let operator = t.cluster.service_account_client(&t.ns, OPERATOR_SA).await;
    let controller = tokio::spawn(run_controller(t.context(operator, Retries::default())));
    t.wait_for_jobs(1).await;
    t.record_ok("first").await;
    t.finish("migrate-first-1", true).await;
    t.wait_for_jobs(2).await;
    // kube's Recorder folds the second JobCreated into the first Event as a series (its key
    // leaves out the note), so the real server holds one Event counted twice: the Role allowed
    // the create and the patch. The patch follows the Job's creation, so wait for it before
    // stopping the controller (stopping it at once raced the patch under load).
    let events = t
        .events_until(|e| e.len() == 1 && e[0]["series"]["count"] == 2)
        .await;
    controller.abort();
    assert_eq!(t.jobs().await, pairs(&[("first", "1"), ("second", "1")]));
    assert_eq!(events.len(), 1, "{events:#?}");
    assert_eq!(events[0]["reason"], "JobCreated");
    assert_eq!(events[0]["series"]["count"], 2, "{events:#?}");
}

#[tokio::test]
async fn the_roles_grant_what_the_operator_and_the_runner_do() {
    let t = or_skip!(Env::new("operator and runner RBAC", &["flaky"], &[]).await);
    t.apply_rbac(|m| m);
    // The operator: reads the index and the ledger, creates Jobs, publishes Events, records a
    // failed entry, and holds its leader Lease.
    let operator = t.cluster.service_account_client(&t.ns, OPERATOR_SA).await;
    let retries = Retries {
        limit: 1,
        base: Duration::from_secs(1),
        cap: Duration::from_secs(1),
    };
    let ctx = t.context(operator.clone(), retries);
    t.reconcile(&ctx).await.unwrap();
    t.finish("migrate-flaky-1", false).await;
    t.reconcile(&ctx).await.unwrap();
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
    let err = t
        .reconcile(&t.context(operator, Retries::default()))
        .await
        .unwrap_err();
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
async fn with_two_replicas_only_the_leader_acts_on_a_real_server() {
    let t = or_skip!(Env::new("operator leader election", &[], &[]).await);
    common::only_the_leader_acts(t.cluster.client(), &t.ns).await;
}
