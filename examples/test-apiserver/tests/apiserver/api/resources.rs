//! Status subresources, custom resources, typed built-in resources and object
//! lifecycle (finalizers, delete preconditions).

use super::*;

#[tokio::test]
async fn status_subresource_isolates_status_from_spec_on_a_custom_resource() {
    let server = TestApiServer::start().await;
    let api = widgets(&server, &server.client());
    let mut w = widget("w", json!({"size": 1}));
    w.data["status"] = json!({"phase": "Injected"});
    let created = create(&api, &w).await;
    assert!(
        created.data.get("status").is_none(),
        "create must drop status"
    );
    assert_eq!(created.metadata.generation, Some(1));

    // A write to /status changes only .status.
    let st = api
        .patch_status(
            "w",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"size": 99}, "status": {"phase": "Ready"}})),
        )
        .await
        .unwrap();
    assert_eq!(st.data["status"]["phase"], "Ready");
    assert_eq!(
        st.data["spec"]["size"], 1,
        "a status write must not change spec"
    );
    assert_eq!(
        st.metadata.generation,
        Some(1),
        "a status write must not bump generation"
    );

    // A write to the main resource cannot change .status.
    let main = merge(
        &api,
        "w",
        json!({"spec": {"size": 2}, "status": {"phase": "Hacked"}}),
    )
    .await;
    assert_eq!(
        main.data["status"]["phase"], "Ready",
        "a main write must keep the stored status"
    );
    assert_eq!(main.data["spec"]["size"], 2);
    assert_eq!(
        main.metadata.generation,
        Some(2),
        "a spec change bumps generation"
    );

    // The resourceVersion precondition applies on /status too.
    let stale = rv(&st);
    let mut replacement = main.clone();
    replacement.metadata.resource_version = Some(stale);
    replacement.data["status"] = json!({"phase": "Stale"});
    let err = status(
        api.replace_status("w", &PostParams::default(), &replacement)
            .await,
    );
    assert_eq!((err.code, err.reason.as_str()), (409, "Conflict"));
    assert_eq!(
        server.object("widgets", NS, "w").unwrap()["status"]["phase"],
        "Ready"
    );
}

#[tokio::test]
async fn custom_resource_replace_requires_a_resource_version_and_cluster_scope_works() {
    let server = TestApiServer::start().await;
    server.register_custom_resource(
        "example.com",
        "v1",
        "clusterthings",
        "ClusterThing",
        false,
        false,
    );
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("example.com", "v1", "ClusterThing"),
        "clusterthings",
    );
    let api: Api<DynamicObject> = Api::all_with(server.client(), &ar);
    let created = create(
        &api,
        &DynamicObject::new("t", &ar).data(json!({"spec": {"a": 1}})),
    )
    .await;
    assert!(created.metadata.namespace.is_none());
    let mut unconditional = created.clone();
    unconditional.metadata.resource_version = None;
    let st = status(
        api.replace("t", &PostParams::default(), &unconditional)
            .await,
    );
    assert_eq!((st.code, st.reason.as_str()), (422, "Invalid"));
    assert_eq!(server.objects("clusterthings").len(), 1);
}

#[tokio::test]
async fn job_status_subresource_and_the_test_hook() {
    let server = TestApiServer::start().await;
    let jobs: Api<Job> = Api::namespaced(server.client(), NS);
    let mut job: Job = serde_json::from_value(json!({
        "metadata": {"name": "migrate"},
        "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "m", "image": "busybox"}]}}},
        "status": {"succeeded": 5}
    }))
    .unwrap();
    let created = create(&jobs, &job).await;
    assert_eq!(
        created.status.unwrap_or_default().succeeded,
        None,
        "create resets Job status"
    );
    server
        .set_job_status(
            NS,
            "migrate",
            json!({"succeeded": 1, "conditions": [{"type": "Complete", "status": "True"}]}),
        )
        .unwrap();
    let done = jobs.get_status("migrate").await.unwrap();
    assert_eq!(done.status.as_ref().unwrap().succeeded, Some(1));
    // Replacing the Job keeps the status the controller set.
    job = done.clone();
    job.status = None;
    job.metadata.labels = Some(BTreeMap::from([("l".into(), "v".into())]));
    let replaced = jobs
        .replace("migrate", &PostParams::default(), &job)
        .await
        .unwrap();
    assert_eq!(replaced.status.unwrap().succeeded, Some(1));
}

// ---------------------------------------------------------------- typed resources, lifecycle

#[tokio::test]
async fn every_builtin_path_round_trips_through_typed_apis() {
    let server = TestApiServer::start().await;
    let client = server.client();
    assert_eq!(client.apiserver_version().await.unwrap().major, "1");
    let leases: Api<Lease> = Api::namespaced(client.clone(), NS);
    let mut lease = Lease::default();
    lease.metadata.name = Some("leader".into());
    lease.spec = Some(LeaseSpec {
        holder_identity: Some("pod-a".into()),
        lease_duration_seconds: Some(15),
        ..LeaseSpec::default()
    });
    let created = create(&leases, &lease).await;
    let mut taken = created.clone();
    taken.spec.as_mut().unwrap().holder_identity = Some("pod-b".into());
    leases
        .replace("leader", &PostParams::default(), &taken)
        .await
        .unwrap();
    let st = status(
        leases
            .replace("leader", &PostParams::default(), &taken)
            .await,
    );
    assert_eq!(
        st.code, 409,
        "the second holder update raced on a stale resourceVersion"
    );

    let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), NS);
    let mut sa = ServiceAccount::default();
    sa.metadata.name = Some("op".into());
    create(&sas, &sa).await;
    let deleted = sas.delete("op", &DeleteParams::default()).await.unwrap();
    assert!(
        deleted.is_left(),
        "ServiceAccount deletion returns the object"
    );

    let events: Api<NewEvent> = Api::namespaced(client.clone(), NS);
    let mut ev = NewEvent::default();
    ev.metadata.generate_name = Some("migrate.".into());
    let ev = create(&events, &ev).await;
    assert!(ev.metadata.name.unwrap().starts_with("migrate."));
    let core: Api<CoreEvent> = Api::namespaced(client.clone(), NS);
    assert!(
        core.list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );

    let nss: Api<Namespace> = Api::all(client.clone());
    let mut ns = Namespace::default();
    ns.metadata.name = Some(NS.into());
    create(&nss, &ns).await;
    let all: Api<ConfigMap> = Api::all(client);
    cms(&server.client())
        .create(&PostParams::default(), &cm("a", &[]))
        .await
        .unwrap();
    Api::<ConfigMap>::namespaced(server.client(), "other")
        .create(&PostParams::default(), &cm("b", &[]))
        .await
        .unwrap();
    assert_eq!(
        all.list(&ListParams::default()).await.unwrap().items.len(),
        2
    );
    let deleted = cms(&server.client())
        .delete("a", &DeleteParams::default())
        .await
        .unwrap();
    assert!(deleted.is_right(), "ConfigMap deletion returns a Status");
}

#[tokio::test]
async fn finalizers_hold_deletion_until_removed() {
    let (_server, api) = served().await;
    let mut obj = cm("a", &[]);
    obj.metadata.finalizers = Some(vec!["example.com/cleanup".into()]);
    create(&api, &obj).await;
    let pending = api.delete("a", &DeleteParams::default()).await.unwrap();
    let pending = pending.left().expect("a held deletion returns the object");
    assert!(pending.metadata.deletion_timestamp.is_some());
    assert!(
        api.get("a").await.is_ok(),
        "still there while a finalizer remains"
    );
    merge(&api, "a", json!({"metadata": {"finalizers": null}})).await;
    assert_eq!(status(api.get("a").await).code, 404);
}

#[tokio::test]
async fn delete_preconditions_are_checked() {
    let (server, api) = served().await;
    let created = create(&api, &cm("a", &[])).await;
    merge(&api, "a", json!({"data": {"k": "v"}})).await;
    let stale = DeleteParams {
        preconditions: Some(kube::api::Preconditions {
            resource_version: Some(rv(&created)),
            uid: None,
        }),
        ..DeleteParams::default()
    };
    assert_eq!(status(api.delete("a", &stale).await).code, 409);
    assert!(server.object("configmaps", NS, "a").is_some());
}
