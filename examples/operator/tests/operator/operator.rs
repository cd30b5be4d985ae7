//! The background operator against the in-process test API server: Jobs,
//! Events, the index ConfigMap and the ConfigMap ledger are all real API
//! objects behind a real `kube::Client`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use common::pairs;
use futures_util::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use ledger_configmap::{ConfigMapLedger, Options};
use ledger_crd::{GROUP, KIND, PLURAL, VERSION};
use migrate_operator::{
    ATTEMPT_LABEL, Context, Index, OperatorConfig, OperatorError, Retries, SLUG_LABEL,
    index_configmap, reconcile, run_controller,
};
use migration_core::testing::fixtures::s;
use migration_core::{Clock, EntryState, Ledger, LedgerEntry, ManualClock, Timestamp, WriteMode};
use migration_kube::RetryPolicy;
use serde_json::json;
use test_apiserver::{TestApiServer, Verb};

const NS: &str = "cozy-system";
const INDEX: &str = "cozystack-migrations-index";

struct Setup {
    server: TestApiServer,
    ledger: Arc<dyn Ledger>,
    clock: Arc<ManualClock>,
}

async fn setup(slugs: &[&str], revoked: &[&str]) -> Setup {
    let server = TestApiServer::start().await;
    let index = Index {
        image: common::IMAGE.into(),
        tree: "/migrations".into(),
        slugs: slugs.iter().map(|x| s(x)).collect(),
        revoked: revoked.iter().map(|x| s(x)).collect(),
        batches: Default::default(),
    };
    let cms: Api<ConfigMap> = Api::namespaced(server.client(), NS);
    cms.create(&Default::default(), &index_configmap(&index, NS, INDEX))
        .await
        .unwrap();
    let clock = Arc::new(ManualClock::new(Timestamp::from_unix(1_786_529_040)));
    let options = Options {
        retry: RetryPolicy::immediate(5),
        clock: clock.clone(),
        ..Options::default()
    };
    let ledger: Arc<dyn Ledger> = Arc::new(ConfigMapLedger::with_options(
        server.client(),
        NS,
        "cozystack-version",
        options,
    ));
    ledger.create(&[]).await.unwrap();
    Setup {
        server,
        ledger,
        clock,
    }
}

/// Fills `ctx`'s Job cache from `server`, as `run_controller` does, for
/// tests that call `reconcile` directly.
fn watch_jobs(server: &TestApiServer, ctx: &Context) {
    let watch = ctx.jobs.watch(server.client(), NS);
    tokio::spawn(watch.for_each(|_| std::future::ready(())));
}

/// Waits until `ctx`'s Job cache holds exactly the Jobs the server stores,
/// each at its stored resourceVersion. A reconcile the controller runs
/// follows the watch event that brought the change; one a test calls
/// directly must wait for it.
async fn caught_up(server: &TestApiServer, ctx: &Context) {
    let versions = |jobs: Vec<serde_json::Value>| -> BTreeMap<String, String> {
        jobs.iter()
            .map(|j| {
                (
                    j["metadata"]["name"].as_str().unwrap().to_owned(),
                    j["metadata"]["resourceVersion"]
                        .as_str()
                        .unwrap()
                        .to_owned(),
                )
            })
            .collect()
    };
    for _ in 0..400 {
        let cached = ctx
            .jobs
            .snapshot()
            .iter()
            .map(|j| serde_json::to_value(j.as_ref()).unwrap())
            .collect();
        if versions(cached) == versions(server.objects("jobs")) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("the Job cache never caught up with the server");
}

impl Setup {
    fn context(&self, retries: Retries) -> Arc<Context> {
        let mut config = OperatorConfig::new(NS);
        config.retries = retries;
        config.service_account = "migrations-sa".into();
        let ctx = Arc::new(Context::new(
            self.server.client(),
            self.ledger.clone(),
            config,
            self.clock.clone(),
            "test-replica",
        ));
        watch_jobs(&self.server, &ctx);
        ctx
    }

    async fn reconcile(&self, ctx: &Arc<Context>) {
        caught_up(&self.server, ctx).await;
        let cms: Api<ConfigMap> = Api::namespaced(self.server.client(), NS);
        let cm = cms.get(INDEX).await.unwrap();
        reconcile(Arc::new(cm), ctx.clone()).await.unwrap();
    }

    /// Jobs as (slug, attempt), sorted by name.
    fn jobs(&self) -> Vec<(String, String)> {
        let mut jobs: Vec<(String, String)> = self
            .server
            .objects("jobs")
            .iter()
            .map(|j| {
                let labels = &j["metadata"]["labels"];
                (
                    labels[SLUG_LABEL].as_str().unwrap().to_owned(),
                    labels[ATTEMPT_LABEL].as_str().unwrap().to_owned(),
                )
            })
            .collect();
        jobs.sort();
        jobs
    }

    fn finish(&self, job: &str, succeeded: bool) {
        let (kind, message) = if succeeded {
            ("Complete", "")
        } else {
            ("Failed", "BackoffLimitExceeded")
        };
        let time = self.clock.now().to_string();
        self.server
            .set_job_status(
                NS,
                job,
                json!({"conditions": [{"type": kind, "status": "True", "lastTransitionTime": time, "message": message}]}),
            )
            .unwrap();
    }

    /// What the runner inside a successful Job does.
    async fn record_ok(&self, slug: &str) {
        let entry = LedgerEntry {
            attempts: 1,
            ..LedgerEntry::new(EntryState::Ok, self.clock.now().truncated())
        };
        self.ledger
            .write(&[(s(slug), entry)], WriteMode::Replace)
            .await
            .unwrap();
    }

    fn events(&self) -> Vec<String> {
        self.server
            .objects("events.events.k8s.io")
            .iter()
            .map(|e| e["reason"].as_str().unwrap_or_default().to_owned())
            .collect()
    }
}

#[tokio::test]
async fn a_job_is_created_for_the_first_pending_slug_only_and_carries_the_run() {
    let t = setup(&["first", "second"], &[]).await;
    let ctx = t.context(Retries::default());
    t.reconcile(&ctx).await;
    t.reconcile(&ctx).await;
    assert_eq!(
        t.jobs(),
        pairs(&[("first", "1")]),
        "one Job at a time, never a duplicate"
    );
    let job = t.server.object("jobs", NS, "migrate-first-1").unwrap();
    let pod = &job["spec"]["template"]["spec"];
    assert_eq!(pod["serviceAccountName"], "migrations-sa");
    assert_eq!(pod["restartPolicy"], "Never");
    assert_eq!(job["spec"]["backoffLimit"], 0);
    let container = &pod["containers"][0];
    assert_eq!(container["image"], common::IMAGE);
    let command: Vec<&str> = container["command"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    assert_eq!(
        command,
        [
            "migrate",
            "run",
            "/migrations",
            "--only",
            "first",
            "--tier",
            "background",
            "--ledger",
            "configmap:cozy-system/cozystack-version",
            "--require-existing-ledger"
        ]
    );
    let env = container["env"].as_array().unwrap();
    assert!(
        env.iter()
            .any(|e| e["name"] == "ONLY" && e["value"] == "first")
    );
    assert_eq!(
        job["metadata"]["ownerReferences"],
        serde_json::Value::Null,
        "owned by nothing: the garbage collector never takes a running migration"
    );
    assert_eq!(job["metadata"]["labels"][SLUG_LABEL], "first");
    assert!(t.events().contains(&"JobCreated".to_owned()));
}

#[tokio::test]
async fn a_reconcile_reads_the_jobs_from_the_watch_cache_never_a_list() {
    let t = setup(&["first", "second"], &[]).await;
    let ctx = t.context(Retries::default());
    t.reconcile(&ctx).await;
    caught_up(&t.server, &ctx).await;
    t.server.requests().reset();
    t.reconcile(&ctx).await;
    t.reconcile(&ctx).await;
    assert_eq!(t.server.requests().count(Verb::List, "jobs"), 0);
    assert_eq!(t.jobs(), pairs(&[("first", "1")]), "the cached Job is seen");
}

#[tokio::test]
async fn a_reconcile_without_a_watch_filling_the_cache_fails_instead_of_guessing() {
    let t = setup(&["first"], &[]).await;
    let ctx = Arc::new(Context::new(
        t.server.client(),
        t.ledger.clone(),
        OperatorConfig::new(NS),
        t.clock.clone(),
        "unwatched",
    ));
    let cms: Api<ConfigMap> = Api::namespaced(t.server.client(), NS);
    let cm = cms.get(INDEX).await.unwrap();
    let err = reconcile(Arc::new(cm), ctx).await.unwrap_err();
    assert!(matches!(err, OperatorError::Cache(_)), "{err:?}");
    assert!(t.jobs().is_empty(), "no Job is created on an unknown state");
}

#[tokio::test]
async fn success_advances_to_the_next_slug() {
    let t = setup(&["first", "second"], &[]).await;
    let ctx = t.context(Retries::default());
    t.reconcile(&ctx).await;
    t.record_ok("first").await;
    t.finish("migrate-first-1", true);
    t.reconcile(&ctx).await;
    assert_eq!(t.jobs(), pairs(&[("first", "1"), ("second", "1")]));
    t.record_ok("second").await;
    t.finish("migrate-second-1", true);
    t.reconcile(&ctx).await;
    assert_eq!(t.jobs().len(), 2, "nothing left: no new Job");
}

#[tokio::test]
async fn failure_retries_with_backoff_then_records_failed_and_stops_retrying() {
    let t = setup(&["flaky", "next"], &[]).await;
    let retries = Retries {
        limit: 2,
        base: Duration::from_secs(30),
        cap: Duration::from_secs(300),
    };
    let ctx = t.context(retries);
    t.reconcile(&ctx).await;
    t.finish("migrate-flaky-1", false);
    t.reconcile(&ctx).await;
    assert_eq!(
        t.jobs(),
        pairs(&[("flaky", "1")]),
        "backing off: no retry yet"
    );
    t.clock.advance(Duration::from_secs(31));
    t.reconcile(&ctx).await;
    assert_eq!(t.jobs(), pairs(&[("flaky", "1"), ("flaky", "2")]));
    t.finish("migrate-flaky-2", false);
    t.reconcile(&ctx).await;
    let snapshot = t.ledger.read().await.unwrap().unwrap();
    let entry = snapshot
        .entry(&s("flaky"))
        .expect("a failed entry is ensured");
    common::assert_gave_up(entry, "BackoffLimitExceeded");
    assert!(t.events().contains(&"RetriesExhausted".to_owned()));
    t.reconcile(&ctx).await;
    t.clock.advance(Duration::from_secs(3600));
    t.reconcile(&ctx).await;
    assert_eq!(
        t.jobs(),
        pairs(&[("flaky", "1"), ("flaky", "2"), ("next", "1")]),
        "flaky is never retried again"
    );
}

#[tokio::test]
async fn revoked_slugs_never_get_a_job() {
    let t = setup(&["bad", "good"], &["bad"]).await;
    let ctx = t.context(Retries::default());
    t.reconcile(&ctx).await;
    assert_eq!(t.jobs(), pairs(&[("good", "1")]));
}

#[tokio::test]
async fn after_a_restart_the_running_job_is_adopted_not_duplicated() {
    let t = setup(&["first"], &[]).await;
    t.reconcile(&t.context(Retries::default())).await;
    // A new process, with nothing in memory.
    let restarted = t.context(Retries::default());
    t.reconcile(&restarted).await;
    t.reconcile(&restarted).await;
    assert_eq!(t.jobs(), pairs(&[("first", "1")]));
}

#[tokio::test]
async fn a_corrupt_entry_stops_the_queue_with_a_warning_event() {
    let t = setup(&["first", "second"], &[]).await;
    let mut cm = t
        .server
        .object("configmaps", NS, "cozystack-version")
        .unwrap();
    cm["data"] = json!({"m.first": "{not json"});
    t.server.put_object("configmaps", cm).unwrap();
    t.reconcile(&t.context(Retries::default())).await;
    assert!(t.jobs().is_empty(), "never guess past an unreadable entry");
    assert!(t.events().contains(&"CorruptEntry".to_owned()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_controller_reacts_to_job_changes_through_watches() {
    let t = setup(&["first", "second"], &[]).await;
    let ctx = t.context(Retries::default());
    let controller = tokio::spawn(run_controller(ctx));
    let wait_for = |n: usize| {
        let server = &t.server;
        async move {
            for _ in 0..200 {
                if server.objects("jobs").len() >= n {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            panic!("expected {n} job(s)");
        }
    };
    wait_for(1).await;
    t.record_ok("first").await;
    t.finish("migrate-first-1", true);
    wait_for(2).await;
    controller.abort();
    assert_eq!(t.jobs(), pairs(&[("first", "1"), ("second", "1")]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_two_replicas_only_the_leader_acts() {
    let server = TestApiServer::start().await;
    common::only_the_leader_acts(server.client(), NS).await;
}

#[tokio::test]
async fn with_the_crd_ledger_readiness_is_a_condition_with_a_distinct_reason() {
    let server = TestApiServer::start().await;
    server.register_custom_resource(GROUP, VERSION, PLURAL, KIND, false, true);
    let index = Index {
        image: common::IMAGE.into(),
        tree: "/m".into(),
        slugs: vec![s("only-one")],
        revoked: vec![],
        batches: Default::default(),
    };
    let cms: Api<ConfigMap> = Api::namespaced(server.client(), NS);
    cms.create(&Default::default(), &index_configmap(&index, NS, INDEX))
        .await
        .unwrap();
    let crd = ledger_crd::CrdLedger::new(server.client(), "platform");
    crd.create(&[]).await.unwrap();
    let clock = Arc::new(ManualClock::new(Timestamp::from_unix(1_786_529_040)));
    let mut ctx = Context::new(
        server.client(),
        Arc::new(crd.clone()),
        OperatorConfig::new(NS),
        clock.clone(),
        "r",
    );
    ctx.conditions = Some(Arc::new(migrate_operator::CrdConditions::new(crd.clone())));
    let ctx = Arc::new(ctx);
    watch_jobs(&server, &ctx);
    let condition = || {
        let object = server
            .object(
                &format!("{}.{}", ledger_crd::PLURAL, ledger_crd::GROUP),
                "",
                "platform",
            )
            .unwrap();
        let conditions = object["status"]["conditions"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let c = conditions
            .iter()
            .find(|c| c["type"] == migrate_operator::OPERATOR_CONDITION)
            .cloned()
            .unwrap();
        (
            c["status"].as_str().unwrap().to_owned(),
            c["reason"].as_str().unwrap().to_owned(),
        )
    };
    let cm = Arc::new(cms.get(INDEX).await.unwrap());
    caught_up(&server, &ctx).await;
    reconcile(cm.clone(), ctx.clone()).await.unwrap();
    assert_eq!(
        condition(),
        ("False".to_owned(), "MigrationRunning".to_owned())
    );
    crd.write(
        &[(s("only-one"), LedgerEntry::new(EntryState::Ok, clock.now()))],
        WriteMode::Replace,
    )
    .await
    .unwrap();
    server
        .set_job_status(NS, "migrate-only-one-1", json!({"conditions": [{"type": "Complete", "status": "True", "lastTransitionTime": clock.now().to_string()}]}))
        .unwrap();
    caught_up(&server, &ctx).await;
    reconcile(cm, ctx).await.unwrap();
    assert_eq!(
        condition(),
        ("True".to_owned(), "AllMigrationsDone".to_owned())
    );
}

#[test]
fn the_pod_settings_given_reach_every_job_and_none_given_leave_the_api_defaults() {
    use migrate_operator::job::{job_for, parse_job_pod};
    let index = Index {
        image: "img@sha256:1".into(),
        tree: "/m".into(),
        slugs: vec![s("a")],
        revoked: vec![],
        batches: Default::default(),
    };
    let mut config = OperatorConfig::new("ns");
    let plain = job_for(&config, &index, &s("a"), 1);
    let pod = plain.spec.unwrap().template.spec.unwrap();
    assert_eq!(pod.image_pull_secrets, None);
    assert_eq!(pod.node_selector, None);
    assert_eq!(pod.tolerations, None);
    assert_eq!(pod.security_context, None);
    // /tmp is writable whatever the security context.
    assert_eq!(pod.volumes.unwrap()[0].name, "tmp");
    config.pod = parse_job_pod(
        r#"{"imagePullSecrets":[{"name":"regcred"}],"imagePullPolicy":"Always",
            "nodeSelector":{"pool":"system"},
            "tolerations":[{"key":"dedicated","operator":"Exists","effect":"NoSchedule"}],
            "securityContext":{"runAsNonRoot":true,"runAsUser":65532},
            "containerSecurityContext":{"readOnlyRootFilesystem":true},
            "annotations":{"example.com/team":"platform"}}"#,
    )
    .unwrap();
    let job = job_for(&config, &index, &s("a"), 1);
    let template = job.spec.unwrap().template;
    common::assert_platform_pod_settings(&template, "Always");
    let container = &template.spec.unwrap().containers[0];
    assert_eq!(
        container.volume_mounts.as_ref().unwrap()[0].mount_path,
        "/tmp"
    );
}
