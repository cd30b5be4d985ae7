//! Patches: merge, JSON, server-side apply and strategic merge, and writes
//! that change nothing.

use super::*;

#[tokio::test]
async fn merge_patch_null_removes_a_key() {
    let (_server, api) = served().await;
    create(&api, &cm("a", &[("m.foo", "1"), ("m.bar", "2")])).await;
    let patched = merge(&api, "a", json!({"data": {"m.foo": null}})).await;
    assert_eq!(
        patched.data.unwrap(),
        BTreeMap::from([("m.bar".into(), "2".into())])
    );
}

/// A raw request through the kube client, for bodies kube's typed API would not send.
async fn raw(
    client: &Client,
    method: &str,
    path: &str,
    content_type: &str,
    body: Value,
) -> Result<String, Error> {
    let request = hyper::Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", content_type)
        .body(serde_json::to_vec(&body).unwrap())
        .unwrap();
    client.request_text(request).await
}

#[tokio::test]
async fn json_patch_add_replace_remove_test() {
    let server = TestApiServer::start().await;
    let client = server.client();
    let api = cms(&client);
    create(&api, &cm("a", &[("x", "1"), ("y", "2")])).await;
    let path = format!("/api/v1/namespaces/{NS}/configmaps/a");
    let json_patch = "application/json-patch+json";
    let ops = json!([
        {"op": "test", "path": "/data/x", "value": "1"},
        {"op": "replace", "path": "/data/x", "value": "10"},
        {"op": "add", "path": "/data/z", "value": "3"},
        {"op": "remove", "path": "/data/y"}
    ]);
    raw(&client, "PATCH", &path, json_patch, ops).await.unwrap();
    assert_eq!(
        api.get("a").await.unwrap().data.unwrap(),
        BTreeMap::from([("x".into(), "10".into()), ("z".into(), "3".into())])
    );
    // A failing test op rejects the whole patch (422) and changes nothing.
    let failing = json!([
        {"op": "add", "path": "/data/w", "value": "4"},
        {"op": "test", "path": "/data/x", "value": "1"}
    ]);
    let st = status(raw(&client, "PATCH", &path, json_patch, failing).await);
    assert_eq!((st.code, st.reason.as_str()), (422, "Invalid"));
    assert!(!api.get("a").await.unwrap().data.unwrap().contains_key("w"));
    // A document that is not a patch is a 400.
    let st = status(raw(&client, "PATCH", &path, json_patch, json!({"op": "add"})).await);
    assert_eq!(st.code, 400);
}

#[tokio::test]
async fn server_side_apply_creates_then_merges() {
    let (_server, api) = served().await;
    let apply = |data: Value| {
        Patch::Apply(
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "data": data}),
        )
    };
    let params = PatchParams::apply("ledger").force();
    let created = api
        .patch("a", &params, &apply(json!({"k": "1"})))
        .await
        .unwrap();
    assert_eq!(created.data.unwrap()["k"], "1");
    assert!(
        created.metadata.uid.is_some(),
        "apply on a missing object must create it"
    );
    let merged = api
        .patch("a", &params, &apply(json!({"j": "2"})))
        .await
        .unwrap();
    // Field ownership is not modelled: the field the manager dropped is kept (a real server prunes it).
    assert_eq!(
        merged.data.unwrap(),
        BTreeMap::from([("j".into(), "2".into()), ("k".into(), "1".into())])
    );
}

#[tokio::test]
async fn strategic_merge_patch_merges_maps_and_is_refused_for_custom_resources() {
    let server = TestApiServer::start().await;
    let client = server.client();
    let api = cms(&client);
    create(&api, &cm("a", &[("x", "1")])).await;
    let patched = api
        .patch(
            "a",
            &PatchParams::default(),
            &Patch::Strategic(json!({"metadata": {"labels": {"l": "v"}}, "data": {"y": "2"}})),
        )
        .await
        .unwrap();
    assert_eq!(patched.data.unwrap().len(), 2);
    assert_eq!(patched.metadata.labels.unwrap()["l"], "v");
    let widgets = widgets(&server, &client);
    create(&widgets, &widget("w", json!({}))).await;
    let st = status(
        widgets
            .patch("w", &PatchParams::default(), &Patch::Strategic(json!({})))
            .await,
    );
    assert_eq!((st.code, st.reason.as_str()), (415, "UnsupportedMediaType"));
}

#[tokio::test]
async fn a_no_op_write_keeps_the_resource_version() {
    let (server, api) = served().await;
    let created = create(&api, &cm("a", &[("k", "1")])).await;
    let same = merge(&api, "a", json!({"data": {"k": "1"}})).await;
    assert_eq!(rv(&same), rv(&created));
    assert_eq!(server.resource_version().to_string(), rv(&created));
}
