//! Errors and preconditions: conflicts, not-found, malformed bodies, the size
//! limits and validation a real API server applies.

use super::*;

#[tokio::test]
async fn create_of_an_existing_name_is_already_exists() {
    let (_server, api) = served().await;
    create(&api, &cm("a", &[])).await;
    let st = status(api.create(&PostParams::default(), &cm("a", &[])).await);
    assert_eq!((st.code, st.reason.as_str()), (409, "AlreadyExists"));
    assert_eq!(st.message, r#"configmaps "a" already exists"#);
    let details = st.details.unwrap();
    assert_eq!(
        (details.name.as_str(), details.kind.as_str()),
        ("a", "configmaps")
    );
}

#[tokio::test]
async fn merge_patch_carrying_a_stale_resource_version_is_conflict() {
    let (_server, api) = served().await;
    let created = create(&api, &cm("a", &[("k", "1")])).await;
    let stale = rv(&created);
    let patch = |v: &str, rv: &str| json!({"metadata": {"resourceVersion": rv}, "data": {"k": v}});
    let updated = api
        .patch(
            "a",
            &PatchParams::default(),
            &Patch::Merge(patch("2", &stale)),
        )
        .await
        .unwrap();
    assert_ne!(rv(&updated), stale, "a write must move the resourceVersion");
    let st = status(
        api.patch(
            "a",
            &PatchParams::default(),
            &Patch::Merge(patch("3", &stale)),
        )
        .await,
    );
    assert_eq!((st.code, st.reason.as_str()), (409, "Conflict"));
    assert!(
        st.message.contains("the object has been modified"),
        "{}",
        st.message
    );
    let current = api.get("a").await.unwrap();
    assert_eq!(
        current.data.unwrap()["k"],
        "2",
        "the conflicting patch must not apply"
    );
    // With the current resourceVersion the same patch goes through.
    api.patch(
        "a",
        &PatchParams::default(),
        &Patch::Merge(patch("3", &rv(&updated))),
    )
    .await
    .unwrap();
}

#[tokio::test]
async fn replace_with_a_stale_resource_version_is_conflict() {
    let (_server, api) = served().await;
    let created = create(&api, &cm("a", &[("k", "1")])).await;
    let mut first = created.clone();
    first.data = Some(BTreeMap::from([("k".into(), "2".into())]));
    api.replace("a", &PostParams::default(), &first)
        .await
        .unwrap();
    let mut second = created;
    second.data = Some(BTreeMap::from([("k".into(), "3".into())]));
    let st = status(api.replace("a", &PostParams::default(), &second).await);
    assert_eq!((st.code, st.reason.as_str()), (409, "Conflict"));
    assert_eq!(api.get("a").await.unwrap().data.unwrap()["k"], "2");
}

#[tokio::test]
async fn verbs_on_a_missing_object_are_not_found() {
    let (server, api) = served().await;
    let st = status(api.get("nope").await);
    assert_eq!((st.code, st.reason.as_str()), (404, "NotFound"));
    assert_eq!(st.message, r#"configmaps "nope" not found"#);
    let merge = Patch::Merge(json!({"data": {"k": "v"}}));
    assert_eq!(
        status(api.patch("nope", &PatchParams::default(), &merge).await).code,
        404
    );
    let mut obj = cm("nope", &[]);
    obj.metadata.resource_version = Some("1".into());
    assert_eq!(
        status(api.replace("nope", &PostParams::default(), &obj).await).code,
        404
    );
    assert_eq!(
        status(api.delete("nope", &DeleteParams::default()).await).code,
        404
    );
    let leases: Api<Lease> = Api::namespaced(server.client(), NS);
    let st = status(leases.get("nope").await);
    assert_eq!(st.message, r#"leases.coordination.k8s.io "nope" not found"#);
    assert!(
        server.objects("configmaps").is_empty(),
        "a patch must not create"
    );
}

#[tokio::test]
async fn malformed_json_body_is_bad_request() {
    let server = TestApiServer::start().await;
    let client = server.client();
    let request = hyper::Request::post(format!("/api/v1/namespaces/{NS}/configmaps"))
        .header("content-type", "application/json")
        .body(b"{\"metadata\": {\"name\": ".to_vec())
        .unwrap();
    let st = status(client.request_text(request).await);
    assert_eq!((st.code, st.reason.as_str()), (400, "BadRequest"));
    let request = hyper::Request::patch(format!("/api/v1/namespaces/{NS}/configmaps/a"))
        .header("content-type", "application/merge-patch+json")
        .body(b"not json".to_vec())
        .unwrap();
    assert_eq!(status(client.request_text(request).await).code, 400);
}

#[tokio::test]
async fn configmap_values_over_one_mebibyte_are_invalid() {
    let (_server, api) = served().await;
    // Values only, as the real server counts: exactly at the limit is accepted (keys beside it
    // do not count), one byte more is not.
    let at_limit = "x".repeat(1_048_575);
    create(&api, &cm("fits", &[("k", &at_limit), ("a-long-key", "y")])).await;
    let over = "x".repeat(1_048_577);
    let st = status(
        api.create(&PostParams::default(), &cm("big", &[("k", &over)]))
            .await,
    );
    assert_eq!((st.code, st.reason.as_str()), (422, "Invalid"));
    assert!(
        st.message
            .contains("Too long: may not be more than 1048576 bytes"),
        "{}",
        st.message
    );
    assert_eq!(st.details.unwrap().kind, "ConfigMap");
    // The limit also holds for growth by patch, and counts binaryData (decoded).
    let st = status(
        api.patch(
            "fits",
            &PatchParams::default(),
            &Patch::Merge(json!({"binaryData": {"b": "AAAA"}})),
        )
        .await,
    );
    assert_eq!(st.code, 422);
}

#[tokio::test]
async fn configmap_keys_are_validated() {
    let (_server, api) = served().await;
    let st = status(
        api.create(&PostParams::default(), &cm("a", &[("migrations/001", "x")]))
            .await,
    );
    assert_eq!((st.code, st.reason.as_str()), (422, "Invalid"));
}

#[tokio::test]
async fn oversize_object_is_refused_like_etcd() {
    let server = TestApiServer::start().await;
    let api = widgets(&server, &server.client());
    // Custom resources have no 1 MiB rule; only the storage limit (1.5 MiB) stops them.
    let ok = "y".repeat(1_400_000);
    create(&api, &widget("ok", json!({ "blob": ok }))).await;
    let big = "y".repeat(1_600_000);
    let st = create_refused(&api, &widget("big", json!({ "blob": big }))).await;
    assert_eq!(st.code, 500);
    assert_eq!(st.message, "etcdserver: request is too large");
    assert!(server.object("widgets", NS, "big").is_none());
    // Past 3 MiB the request body itself is refused before decoding.
    let huge = "y".repeat(3_200_000);
    let st = create_refused(&api, &widget("huge", json!({ "blob": huge }))).await;
    assert_eq!(
        (st.code, st.reason.as_str()),
        (413, "RequestEntityTooLarge")
    );
}

#[tokio::test]
async fn configurable_object_size_limit() {
    let (_server, api) = served_by(TestApiServer::builder().max_object_bytes(2_000)).await;
    let st = create_refused(&api, &cm("a", &[("k", &"z".repeat(3_000))])).await;
    assert_eq!(st.code, 500);
}
