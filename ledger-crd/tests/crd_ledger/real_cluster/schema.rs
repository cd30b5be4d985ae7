//! What the real API server makes of the CRD: server-side apply, printer
//! columns, the status subresource and its preconditions.

use super::*;

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
#[ignore = "needs MIGRATE_TEST_KUBECONFIG (examples/kube-testenv)"]
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
#[ignore = "needs MIGRATE_TEST_KUBECONFIG (examples/kube-testenv)"]
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
#[ignore = "needs MIGRATE_TEST_KUBECONFIG (examples/kube-testenv)"]
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
#[ignore = "needs MIGRATE_TEST_KUBECONFIG (examples/kube-testenv)"]
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

/// The CRD this engine prints with `fields` of the status left out: what a
/// cluster still runs after an upgrade of the engine but not of the CRD.
fn crd_without(fields: &[&str]) -> serde_json::Value {
    let mut crd = serde_json::to_value(ledger_crd::crd()).unwrap();
    let status = crd
        .pointer_mut("/spec/versions/0/schema/openAPIV3Schema/properties/status/properties")
        .and_then(serde_json::Value::as_object_mut)
        .expect("the status schema");
    for field in fields {
        assert!(
            status.remove(*field).is_some(),
            "the CRD declares status.{field}"
        );
    }
    crd
}

async fn apply_crd(client: &Client, crd: &serde_json::Value) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.patch(
        MigrationLedger::crd_name(),
        &PatchParams::apply(LANE_MANAGER).force(),
        &Patch::Apply(crd),
    )
    .await
    .unwrap();
    test_apiserver::real::wait_until_established(client, MigrationLedger::crd_name()).await;
}

#[tokio::test]
#[ignore = "needs MIGRATE_TEST_KUBECONFIG (examples/kube-testenv)"]
async fn an_installed_crd_older_than_this_engine_is_reported_naming_the_field_before_anything_is_written()
 {
    // A private server: installing an older CRD on a shared one would break
    // every other test's ledgers.
    let cluster = or_skip!(RealCluster::private("an outdated installed CRD").await);
    let client = cluster.client();
    // The CRD of the release before the lock moved into the object.
    apply_crd(&client, &crd_without(&["lock"])).await;
    let name = test_apiserver::real::unique_name("outdated");
    let ledger = CrdLedger::with_options(
        client.clone(),
        &name,
        Options {
            lease_namespace: cluster.namespace().to_owned(),
            ..Options::default()
        },
    );
    ledger
        .create(&entries(0..2, migration_core::EntryState::Ok))
        .await
        .unwrap();
    let api = ledgers(client.clone());
    let before = serde_json::to_value(api.get(&name).await.unwrap()).unwrap();
    let err = ledger
        .acquire("runner-a", Duration::from_secs(30))
        .await
        .unwrap_err();
    let text = err.to_string();
    for needle in [
        "migrationledgers.migrations.cozystack.io",
        "status.lock",
        "migrate crd | kubectl apply -f -",
    ] {
        assert!(text.contains(needle), "{needle:?} missing from: {text}");
    }
    assert!(
        text.len() < 1000,
        "the quoted object is not repeated: {text}"
    );
    let after = serde_json::to_value(api.get(&name).await.unwrap()).unwrap();
    assert_eq!(
        after["metadata"]["resourceVersion"], before["metadata"]["resourceVersion"],
        "nothing was written"
    );

    // A CRD that would prune the last failures: the write carrying one is
    // refused, naming `status.failures`, instead of dropping it.
    apply_crd(&client, &crd_without(&["failures"])).await;
    let failure = migration_core::last_failure::LastFailure::from_value(
        "f.s-0",
        &json!({"reason": "exit-status-3", "message": "boom", "at": "2026-12-04T19:00:00Z", "attempts": 1}),
    )
    .unwrap();
    let err = ledger
        .note_failure(&migration_core::testing::slug(0), &failure)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("status.failures"), "{err}");

    // The CRD this engine prints: the same lock is taken.
    install_crd(&client).await;
    let lease = ledger
        .acquire("runner-a", Duration::from_secs(30))
        .await
        .unwrap();
    ledger.release(&lease).await.unwrap();
    api.delete(&name, &DeleteParams::default()).await.unwrap();
}
