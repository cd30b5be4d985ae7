//! The real-server lane: the conformance suite and the custom-resource backend's
//! own behaviours against a real API server. Set `MIGRATE_TEST_KUBECONFIG` to a
//! kubeconfig (and optionally `MIGRATE_TEST_NAMESPACE`, default `default`, for the
//! Leases); `examples/kube-testenv/testenv.sh start` provides one. The lane
//! installs (or updates) the `MigrationLedger` CRD by server-side apply and
//! waits until it is established; each case uses its own `MigrationLedger`
//! and Lease, deleted afterwards. The CRD itself is never deleted: that
//! would delete every ledger on the cluster. Unset, the test says it skipped.
//!
//! ```sh
//! MIGRATE_TEST_KUBECONFIG=$HOME/.kube/config \
//!   cargo test -p ledger-crd --test real_cluster -- --nocapture
//! ```

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::scenarios::{self, entries};

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{DeleteParams, Patch, PatchParams};
use kube::core::{ApiResource, DynamicObject};
use kube::{Api, Client, CustomResourceExt};
use ledger_crd::{CrdLedger, DEFAULT_BUDGET_BYTES, MigrationLedger, Options};
use migration_core::{Ledger, Lock, LockedLedger};
use migration_kube::fault_suite::assert_permanent;
use migration_kube::real_lane::{LaneBackend, LaneCase, run_lane};
use serde_json::json;
use test_apiserver::or_skip;
use test_apiserver::real::{RealCluster, api_status};

/// The field manager of the lane's CRD apply and planted values.
const LANE_MANAGER: &str = "cozystack-migrate-test-lane";

fn ledgers(client: Client) -> Api<DynamicObject> {
    Api::all_with(client, &ApiResource::erase::<MigrationLedger>(&()))
}

/// The custom-resource backend on the conformance lane.
struct Ledgers;

#[async_trait]
impl LaneBackend for Ledgers {
    fn ledger(&self, case: &LaneCase) -> Arc<dyn LockedLedger> {
        let options = Options {
            lease_namespace: case.namespace.clone(),
            clock: case.clock.clone(),
            ..Options::default()
        };
        Arc::new(CrdLedger::with_options(
            case.client.clone(),
            &case.name,
            options,
        ))
    }

    async fn plant_raw(&self, case: &LaneCase, key: &str, value: &str) {
        let slot = common::slot(key);
        let (patch, status) = common::planting_patch(&slot, common::raw_value(&slot, value));
        let params = PatchParams {
            field_manager: Some(LANE_MANAGER.into()),
            ..PatchParams::default()
        };
        let api = ledgers(case.client.clone());
        if status {
            api.patch_status(&case.name, &params, &Patch::Merge(&patch))
                .await
                .unwrap();
        } else {
            api.patch(&case.name, &params, &Patch::Merge(&patch))
                .await
                .unwrap();
        }
    }

    async fn raw(&self, case: &LaneCase, key: &str) -> Option<String> {
        let object = ledgers(case.client.clone())
            .get_opt(&case.name)
            .await
            .unwrap()?;
        common::read_slot(&serde_json::to_value(object).unwrap(), &common::slot(key))
    }

    fn budget_bytes(&self) -> u64 {
        DEFAULT_BUDGET_BYTES
    }
}

/// Installs or updates the CRD, and waits until the API server serves it.
async fn install_crd(client: &Client) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let name = MigrationLedger::crd_name();
    crds.patch(
        name,
        &PatchParams::apply(LANE_MANAGER),
        &Patch::Apply(ledger_crd::crd()),
    )
    .await
    .unwrap_or_else(|e| panic!("cannot apply the CRD {name}: {e}"));
    test_apiserver::real::wait_until_established(client, name).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_against_a_real_cluster() {
    let cluster = or_skip!(RealCluster::from_env("MigrationLedger conformance lane").await);
    lane(cluster.client(), cluster.namespace()).await;
}

/// Installs the CRD, then runs the shared lane (against the test API server too, below).
async fn lane(client: Client, namespace: &str) {
    install_crd(&client).await;
    run_lane(Ledgers, "lane", client.clone(), namespace, ledgers(client)).await;
}

/// Plays the part of the apiextensions controller on the test server: once
/// the CRD is applied, serve its resource and mark it established.
fn establish_crds(server: &test_apiserver::TestApiServer) -> impl Fn() -> bool + '_ {
    move || {
        let name = MigrationLedger::crd_name();
        let Some(crd) = server.object("customresourcedefinitions.apiextensions.k8s.io", "", name)
        else {
            return false;
        };
        let spec = &crd["spec"];
        let version = &spec["versions"][0];
        server.register_custom_resource(
            spec["group"].as_str().unwrap(),
            version["name"].as_str().unwrap(),
            spec["names"]["plural"].as_str().unwrap(),
            spec["names"]["kind"].as_str().unwrap(),
            spec["scope"] == "Namespaced",
            version["subresources"].get("status").is_some(),
        );
        server
            .set_status(
                "customresourcedefinitions.apiextensions.k8s.io",
                "",
                name,
                json!({"conditions": [{"type": "Established", "status": "True"}]}),
            )
            .unwrap();
        true
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lane_installs_the_crd_runs_every_case_and_cleans_up_against_the_test_server() {
    let server = Arc::new(test_apiserver::TestApiServer::start().await);
    server.register_custom_resource(
        "apiextensions.k8s.io",
        "v1",
        "customresourcedefinitions",
        "CustomResourceDefinition",
        false,
        true,
    );
    let controller = {
        let server = server.clone();
        tokio::spawn(async move {
            let establish = establish_crds(&server);
            while !establish() {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
    };
    lane(server.client(), "lane").await;
    controller.await.unwrap();
    assert!(
        server
            .objects("migrationledgers.migrations.cozystack.io")
            .is_empty(),
        "the lane deletes the ledgers it made"
    );
    assert!(server.objects("leases").is_empty());
    assert_eq!(
        server
            .objects("customresourcedefinitions.apiextensions.k8s.io")
            .len(),
        1,
        "the lane never deletes the CRD"
    );
}

// ------------------------------------------------------------------ the backend's own tests

/// One test's `MigrationLedger` (cluster-scoped, so its name is unique per run) and Lease on
/// the real cluster, deleted by [`Fixture::cleanup`], which every test calls last. A failed
/// test leaves them for inspection; the test environment is thrown away with its etcd data.
struct Fixture {
    cluster: RealCluster,
    ledgers: Api<DynamicObject>,
    name: String,
}

impl Fixture {
    async fn new(what: &str, prefix: &str) -> Option<Self> {
        let cluster = RealCluster::from_env(what).await?;
        let client = cluster.client();
        install_crd(&client).await;
        let name = test_apiserver::real::unique_name(prefix);
        let ledgers = ledgers(client);
        Some(Self {
            cluster,
            ledgers,
            name,
        })
    }

    fn options(&self) -> Options {
        Options {
            lease_namespace: self.cluster.namespace().to_owned(),
            ..Options::default()
        }
    }

    fn ledger_with(&self, options: Options) -> CrdLedger {
        CrdLedger::with_options(self.cluster.client(), &self.name, options)
    }

    fn ledger(&self) -> CrdLedger {
        self.ledger_with(self.options())
    }

    fn api(&self) -> Api<DynamicObject> {
        self.ledgers.clone()
    }

    async fn stored(&self) -> serde_json::Value {
        serde_json::to_value(self.api().get(&self.name).await.unwrap()).unwrap()
    }

    /// Creates the object as a chart or a human would: no engine annotation.
    async fn declare(&self, spec: serde_json::Value) -> Result<DynamicObject, kube::Error> {
        let object: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "migrations.cozystack.io/v1alpha1", "kind": "MigrationLedger",
            "metadata": {"name": self.name}, "spec": spec,
        }))
        .unwrap();
        self.api().create(&Default::default(), &object).await
    }

    async fn cleanup(self) {
        self.cluster.delete_with_lock(&self.api(), &self.name).await;
    }
}

/// A JSON Patch to the ledger's status subresource, as the backend sends it (kube's typed JSON
/// Patch needs the `json-patch` crate: this is its merge-patch request with the body swapped).
async fn json_patch_status(
    f: &Fixture,
    ops: &serde_json::Value,
) -> Result<serde_json::Value, kube::Error> {
    let params = PatchParams {
        field_manager: Some(LANE_MANAGER.into()),
        ..PatchParams::default()
    };
    let mut request =
        kube::core::Request::new("/apis/migrations.cozystack.io/v1alpha1/migrationledgers")
            .patch_subresource("status", &f.name, &params, &Patch::Merge(json!({})))
            .unwrap();
    *request.body_mut() = serde_json::to_vec(ops).unwrap();
    request.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json-patch+json"),
    );
    f.cluster
        .client()
        .request::<serde_json::Value>(request)
        .await
}

#[tokio::test]
async fn the_crd_is_accepted_by_server_side_apply_and_becomes_established() {
    let cluster = or_skip!(RealCluster::from_env("CRD installation").await);
    install_crd(&cluster.client()).await;
    let crds: Api<CustomResourceDefinition> = Api::all(cluster.client());
    let crd = crds.get(MigrationLedger::crd_name()).await.unwrap();
    let conditions: Vec<_> = crd
        .status
        .unwrap()
        .conditions
        .unwrap_or_default()
        .into_iter()
        .map(|c| (c.type_, c.status))
        .collect();
    for wanted in ["NamesAccepted", "Established"] {
        assert!(
            conditions.contains(&(wanted.to_owned(), "True".to_owned())),
            "{conditions:?}"
        );
    }
    assert!(
        !conditions.iter().any(|(t, _)| t == "NonStructuralSchema"),
        "the real server takes the generated schema as structural: {conditions:?}"
    );
    // Applying the same manifest again changes nothing.
    let before = crd.metadata.resource_version;
    install_crd(&cluster.client()).await;
    let again = crds.get(MigrationLedger::crd_name()).await.unwrap();
    assert_eq!(again.metadata.resource_version, before);
}

#[tokio::test]
async fn printer_columns_read_back_through_the_table_format() {
    let f = or_skip!(Fixture::new("printer columns", "columns").await);
    use migration_core::EntryState;
    let l = f.ledger();
    let mut seed = entries(0..3, EntryState::Ok);
    seed.extend(entries(3..5, EntryState::SkippedFreshInstall));
    l.create(&seed).await.unwrap();
    l.write(
        &entries(5..6, EntryState::Failed),
        migration_core::WriteMode::Replace,
    )
    .await
    .unwrap();
    let request = http::Request::get(format!(
        "/apis/migrations.cozystack.io/v1alpha1/migrationledgers/{}",
        f.name
    ))
    .header(
        http::header::ACCEPT,
        "application/json;as=Table;g=meta.k8s.io;v=v1",
    )
    .body(Vec::new())
    .unwrap();
    let text = f.cluster.client().request_text(request).await.unwrap();
    let table: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(table["kind"], "Table", "{table:#}");
    let columns: Vec<_> = table["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["name"].as_str().unwrap(),
                c["priority"].as_i64().unwrap_or(0),
            )
        })
        .collect();
    assert_eq!(
        columns,
        [
            ("Name", 0),
            ("Ready", 0),
            ("OK", 0),
            ("Failed", 0),
            ("Other", 0),
            ("Corrupt", 1),
            ("Newest", 0),
            ("Age", 0)
        ]
    );
    let cells = table["rows"][0]["cells"].as_array().unwrap();
    assert_eq!(
        cells[..6],
        [
            json!(f.name),
            json!("False"),
            json!(3),
            json!(1),
            json!(2),
            json!(0)
        ]
    );
    // Columns of type date are rendered as ages, as kubectl prints them.
    for (column, cell) in [("Newest", &cells[6]), ("Age", &cells[7])] {
        let age = cell.as_str().unwrap_or_default();
        assert!(
            age.len() >= 2
                && age.ends_with(['s', 'm', 'h', 'd', 'y'])
                && age.starts_with(|c: char| c.is_ascii_digit()),
            "{column}: {cell}"
        );
    }
    f.cleanup().await;
}

#[tokio::test]
async fn the_status_subresource_keeps_entries_out_of_reach_of_spec_writes() {
    let f = or_skip!(Fixture::new("status subresource", "status").await);
    // Created with a status: the real server drops it.
    let object: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "migrations.cozystack.io/v1alpha1", "kind": "MigrationLedger",
        "metadata": {"name": f.name}, "spec": {"bundle": "x"},
        "status": {"initialized": true, "entries": {}},
    }))
    .unwrap();
    let created = f.api().create(&Default::default(), &object).await.unwrap();
    assert!(
        serde_json::to_value(&created)
            .unwrap()
            .get("status")
            .is_none(),
        "{created:?}"
    );
    f.api()
        .delete(&f.name, &DeleteParams::default())
        .await
        .unwrap();
    let l = f.ledger();
    scenarios::a_chart_applies_spec_over_entries(&l, &f.api(), &f.name).await;
    let generation = f.stored().await["metadata"]["generation"].clone();
    scenarios::entry_writes_leave_the_charts_fields_alone(&l, &f.api(), &f.name).await;
    assert_eq!(
        f.stored().await["metadata"]["generation"],
        generation,
        "status writes do not move the generation"
    );
    f.cleanup().await;
}

#[tokio::test]
async fn a_status_json_patch_on_a_stale_resource_version_is_rejected_and_changes_nothing() {
    let f = or_skip!(Fixture::new("JSON-Patch precondition on /status", "stale").await);
    use migration_core::EntryState;
    f.ledger()
        .create(&entries(0..1, EntryState::Ok))
        .await
        .unwrap();
    let first = f.stored().await;
    let stale = first["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_owned();
    f.ledger()
        .note_attempt(&migration_core::testing::slug(1), "t", 0)
        .await
        .unwrap();
    let current = f.stored().await;
    assert_ne!(current["metadata"]["resourceVersion"], stale);
    let entry = json!({"op": "add", "path": "/status/entries/s-9", "value": {"state": "ok", "at": "2026-01-01T00:00:00Z"}});
    // Our backend's precondition: the first operation sets the resourceVersion read.
    let ops =
        json!([{"op": "replace", "path": "/metadata/resourceVersion", "value": stale}, entry]);
    let status = api_status(json_patch_status(&f, &ops).await);
    assert_eq!(
        (status.code, status.reason.as_str()),
        (409, "Conflict"),
        "{status:?}"
    );
    assert!(
        status.message.contains("the object has been modified"),
        "{status:?}"
    );
    // The RFC 6902 `test` operation on the resourceVersion: refused as well.
    let ops = json!([{"op": "test", "path": "/metadata/resourceVersion", "value": stale}, entry]);
    let status = api_status(json_patch_status(&f, &ops).await);
    assert_eq!(
        (status.code, status.reason.as_str(), status.message.as_str()),
        (
            422,
            "Invalid",
            "the server rejected our request due to an error in our request"
        ),
        "{status:?}"
    );
    let after = f.stored().await;
    assert_eq!(
        after["metadata"]["resourceVersion"],
        current["metadata"]["resourceVersion"]
    );
    assert!(after["status"]["entries"].get("s-9").is_none());
    // With the current resourceVersion, the same patch applies.
    let ops = json!([{"op": "test", "path": "/metadata/resourceVersion", "value": current["metadata"]["resourceVersion"]}, entry]);
    json_patch_status(&f, &ops).await.unwrap();
    assert!(f.stored().await["status"]["entries"].get("s-9").is_some());
    f.cleanup().await;
}

#[tokio::test]
async fn a_fresh_install_stores_typed_entries_and_reads_back_on_a_real_server() {
    let f = or_skip!(Fixture::new("fresh install", "fresh").await);
    use migration_core::EntryState;
    let l = f.ledger();
    assert_eq!(l.read().await.unwrap(), None, "no object: a fresh install");
    l.create(&entries(0..5, EntryState::SkippedFreshInstall))
        .await
        .unwrap();
    let object = f.stored().await;
    assert_eq!(object["status"]["initialized"], true);
    assert_eq!(
        object["metadata"]["annotations"]["migrations.cozystack.io/created-by"],
        "cozystack-migrate"
    );
    // Compact, naming a shared record in status.contexts, which the real
    // server's schema keeps too.
    let id = object["status"]["entries"]["s-1"]["c"].as_str();
    assert!(
        object["status"]["contexts"][id.unwrap()].is_object(),
        "{object}"
    );
    assert_eq!(
        object["status"]["entries"]["s-1"],
        migration_core::testing::sample_entry(EntryState::SkippedFreshInstall, 1).compact_value(id),
        "typed JSON objects, kept exactly by the real server's schema"
    );
    assert_eq!(
        l.read()
            .await
            .unwrap()
            .unwrap()
            .entry(&migration_core::testing::slug(1)),
        Some(&migration_core::testing::sample_entry(
            EntryState::SkippedFreshInstall,
            1
        ))
    );
    let managers: Vec<_> = object["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["manager"].as_str().unwrap().to_owned())
        .collect();
    assert!(
        managers.iter().all(|m| m == "cozystack-migrate"),
        "{managers:?}"
    );
    assert!(matches!(
        l.create(&entries(0..1, EntryState::Ok)).await.unwrap_err(),
        migration_core::LedgerError::AlreadyExists { .. }
    ));
    assert_eq!(l.read().await.unwrap().unwrap().records.len(), 5);
    f.cleanup().await;
}

#[tokio::test]
async fn a_ledger_declared_by_a_chart_is_an_existing_cluster_on_a_real_server() {
    let f = or_skip!(Fixture::new("chart-declared ledger", "declared").await);
    f.declare(json!({"version": 45})).await.unwrap();
    scenarios::a_declared_ledger_is_an_existing_cluster(&f.ledger(), &f.api(), &f.name).await;
    f.cleanup().await;
}

#[tokio::test]
async fn two_racing_fresh_installs_store_exactly_one_seed_on_a_real_server() {
    let f = or_skip!(Fixture::new("racing fresh installs", "race").await);
    use migration_core::{EntryState, LedgerError};
    let (a, b) = (f.ledger(), f.ledger());
    let seed_a = entries(0..3, EntryState::SkippedFreshInstall);
    let seed_b = entries(10..12, EntryState::SkippedFreshInstall);
    let (ra, rb) = tokio::join!(a.create(&seed_a), b.create(&seed_b));
    let snapshot = a.read().await.unwrap().unwrap();
    match (ra, rb) {
        (Ok(()), Err(LedgerError::AlreadyExists { .. })) => assert_eq!(snapshot.records.len(), 3),
        (Err(LedgerError::AlreadyExists { .. }), Ok(())) => assert_eq!(snapshot.records.len(), 2),
        other => panic!("exactly one create must win: {other:?}"),
    }
    f.cleanup().await;
}

#[tokio::test]
async fn the_real_schema_takes_an_integer_or_a_string_version_and_refuses_other_types() {
    let f = or_skip!(Fixture::new("spec.version schema", "version").await);
    use migration_core::LegacyVersion;
    for (version, expected) in [
        (json!(45), LegacyVersion::Known(45)),
        (json!("46"), LegacyVersion::Known(46)),
    ] {
        f.declare(json!({"version": version})).await.unwrap();
        assert_eq!(f.ledger().read().await.unwrap().unwrap().version, expected);
        f.api()
            .delete(&f.name, &DeleteParams::default())
            .await
            .unwrap();
    }
    // Values the schema lets through but that are no version: corrupt, never "absent".
    for odd in [json!(-1), json!("v45")] {
        f.declare(json!({"version": odd})).await.unwrap();
        assert!(
            matches!(
                f.ledger().read().await.unwrap().unwrap().version,
                LegacyVersion::Corrupt { .. }
            ),
            "{odd}"
        );
        f.api()
            .delete(&f.name, &DeleteParams::default())
            .await
            .unwrap();
    }
    // The real server's schema refuses the rest outright (the test double does not check
    // schemas; crd.rs covers how the engine reads such values).
    for bad in [json!(4.5), json!([45]), json!({"v": 45})] {
        let status = api_status(f.declare(json!({"version": bad})).await);
        assert_eq!(
            (status.code, status.reason.as_str()),
            (422, "Invalid"),
            "{bad}: {status:?}"
        );
        assert!(status.message.contains("spec.version"), "{status:?}");
    }
    f.cleanup().await;
}

#[tokio::test]
async fn entries_are_replaced_whole_and_unknown_fields_survive_the_real_schema() {
    let f = or_skip!(Fixture::new("entry replacement and unknown fields", "fields").await);
    use migration_core::testing::{sample_entry, slug};
    use migration_core::{EntryState, WriteMode};
    let l = f.ledger();
    let mut failed = sample_entry(EntryState::Failed, 1);
    failed
        .extra
        .insert("retry_after".into(), json!({"seconds": 30}));
    let mut newer = sample_entry(EntryState::Ok, 2);
    newer
        .extra
        .insert("node".into(), json!({"a": [1, null], "gone": null}));
    newer
        .extra
        .insert("cleared".into(), serde_json::Value::Null);
    l.create(&[(slug(1), failed), (slug(2), newer.clone())])
        .await
        .unwrap();
    let ok = sample_entry(EntryState::Ok, 3);
    l.write(&[(slug(1), ok.clone())], WriteMode::Replace)
        .await
        .unwrap();
    let object = f.stored().await;
    let stored = &object["status"]["entries"]["s-1"];
    assert_eq!(
        *stored,
        ok.compact_value(stored["c"].as_str()),
        "a merge would have kept reason, message and retry_after"
    );
    let snapshot = l.read().await.unwrap().unwrap();
    assert_eq!(
        snapshot.entry(&slug(2)),
        Some(&newer),
        "fields a newer engine recorded (nulls included) are not pruned by the real server"
    );
    f.cleanup().await;
}

#[tokio::test]
async fn the_budget_stays_below_what_the_real_server_accepts() {
    let f = or_skip!(Fixture::new("the CRD size budget", "budget").await);
    use migration_core::testing::{sample_entry, slug};
    use migration_core::{EntryState, LedgerError, WriteMode};
    let message_entry = |bytes: usize| {
        let mut entry = sample_entry(EntryState::Failed, 1);
        entry.message = Some("x".repeat(bytes));
        entry
    };
    let l = f.ledger();
    l.create(&entries(0..3, EntryState::Ok)).await.unwrap();
    let size = |v: &serde_json::Value| serde_json::to_vec(v).unwrap().len() as u64;
    let room = DEFAULT_BUDGET_BYTES - size(&f.stored().await);
    // Grow to just under the budget: the real server accepts it.
    l.write(
        &[(slug(10), message_entry((room - 2_000) as usize))],
        WriteMode::Replace,
    )
    .await
    .unwrap();
    let stored = f.stored().await;
    let after = size(&stored);
    assert!(after <= DEFAULT_BUDGET_BYTES, "{after}");
    // The budget's own measure of the object agrees with what the real server returns.
    let refused = l
        .write(&[(slug(11), message_entry(3_000))], WriteMode::Replace)
        .await
        .unwrap_err();
    let LedgerError::Full { current_bytes, .. } = refused else {
        panic!("{refused:?}")
    };
    let drift = current_bytes.abs_diff(after);
    assert!(
        drift < 1_000,
        "the budget measured {current_bytes} bytes, the real server returns {after}"
    );
    // Misconfigured above etcd's limit, the real server's refusal fails closed, in both of its
    // forms: etcd's own limit (1.5 MiB), and the API server's etcd client limit (2 MiB).
    let careless = f.ledger_with(Options {
        budget: 4 * ETCD_REQUEST_LIMIT,
        retry: ledger_crd::RetryPolicy::immediate(2),
        ..f.options()
    });
    let before = f.stored().await["metadata"]["resourceVersion"].clone();
    for (bytes, answer) in [
        ((room + 60_000) as usize, "etcdserver: request is too large"),
        (2_300_000, "trying to send message larger than max"),
    ] {
        let err = careless
            .write(&[(slug(10), message_entry(bytes))], WriteMode::Replace)
            .await
            .unwrap_err();
        assert_permanent(&err, "write", bytes);
        assert!(err.to_string().contains(answer), "{err}");
    }
    assert_eq!(f.stored().await["metadata"]["resourceVersion"], before);
    f.cleanup().await;
}

const ETCD_REQUEST_LIMIT: u64 = ledger_crd::ETCD_REQUEST_LIMIT_BYTES;

#[tokio::test]
async fn the_lock_is_a_lease_in_the_lease_namespace_on_a_real_server() {
    let f = or_skip!(Fixture::new("CRD ledger lock", "lock").await);
    let l = f.ledger();
    let lease = l
        .acquire("runner-a/pid-1", Duration::from_secs(30))
        .await
        .unwrap();
    assert_eq!(
        f.cluster.lock_holder(&f.name).await.as_deref(),
        Some("runner-a/pid-1")
    );
    l.release(&lease).await.unwrap();
    assert!(f.cluster.lock_lease(&f.name).await.is_none());
    f.cleanup().await;
}
