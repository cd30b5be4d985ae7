//! Black-box tests: every modelled behaviour, observed through a real `kube::Client`.
//!
//! One test binary on purpose: each extra binary costs a link of kube on CI's 2 cores.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::collections::BTreeMap;
use std::time::Duration;

use futures_util::{StreamExt, TryStreamExt};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::{ConfigMap, Event as CoreEvent, Namespace, ServiceAccount};
use k8s_openapi::api::events::v1::Event as NewEvent;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch,
    PatchParams, PostParams, WatchEvent, WatchParams,
};
use kube::runtime::watcher;
use kube::{Client, Error};
use serde_json::{Value, json};
use test_apiserver::{FaultRule, LostReply, TestApiServer, Verb};

const NS: &str = "cozy-system";

fn cm(name: &str, data: &[(&str, &str)]) -> ConfigMap {
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some(name.to_string());
    cm.data = Some(
        data.iter()
            .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
            .collect(),
    );
    cm
}

/// A test server started by `builder` and the ConfigMaps of namespace [`NS`] on it.
async fn served_by(builder: test_apiserver::Builder) -> (TestApiServer, Api<ConfigMap>) {
    let server = builder.start().await.unwrap();
    let api = cms(&server.client());
    (server, api)
}

/// A fresh test server and the ConfigMaps of namespace [`NS`] on it.
async fn served() -> (TestApiServer, Api<ConfigMap>) {
    let server = TestApiServer::start().await;
    let api = cms(&server.client());
    (server, api)
}

fn cms(client: &Client) -> Api<ConfigMap> {
    Api::namespaced(client.clone(), NS)
}

/// What the helpers below create: any resource kube can send and read back.
trait Object:
    kube::Resource
    + Clone
    + k8s_openapi::serde::Serialize
    + k8s_openapi::serde::de::DeserializeOwned
    + std::fmt::Debug
{
}

impl<K> Object for K where
    K: kube::Resource
        + Clone
        + k8s_openapi::serde::Serialize
        + k8s_openapi::serde::de::DeserializeOwned
        + std::fmt::Debug
{
}

/// The `Status` with which the server refuses to create `object`.
async fn create_refused<K: Object>(api: &Api<K>, object: &K) -> Box<kube::core::Status> {
    status(api.create(&PostParams::default(), object).await)
}

/// The `Status` of an API error, or a panic naming what came back instead.
fn status<T: std::fmt::Debug>(result: Result<T, Error>) -> Box<kube::core::Status> {
    match result {
        Err(Error::Api(status)) => status,
        other => panic!("expected an API error, got {other:?}"),
    }
}

fn widgets(server: &TestApiServer, client: &Client) -> Api<DynamicObject> {
    server.register_custom_resource("example.com", "v1", "widgets", "Widget", true, true);
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("example.com", "v1", "Widget"),
        "widgets",
    );
    Api::namespaced_with(client.clone(), NS, &ar)
}

fn widget(name: &str, spec: Value) -> DynamicObject {
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("example.com", "v1", "Widget"),
        "widgets",
    );
    DynamicObject::new(name, &ar).data(json!({ "spec": spec }))
}

/// Creates `obj`, panicking with the server's answer if it is refused.
async fn create<K: Object>(api: &Api<K>, obj: &K) -> K {
    api.create(&PostParams::default(), obj).await.unwrap()
}

/// Applies a JSON merge patch to `name`, panicking if it is refused.
async fn merge<K>(api: &Api<K>, name: &str, patch: Value) -> K
where
    K: kube::Resource + Clone + k8s_openapi::serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.patch(name, &PatchParams::default(), &Patch::Merge(patch))
        .await
        .unwrap()
}

fn rv<K: kube::Resource>(obj: &K) -> String {
    obj.meta().resource_version.clone().unwrap()
}

/// The names of the objects `api` lists with `params`, in order.
async fn listed(api: &Api<ConfigMap>, params: ListParams) -> Vec<String> {
    api.list(&params)
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|c| c.metadata.name.unwrap())
        .collect()
}

/// A watch of `api`'s ConfigMaps from resource version `from`.
async fn watch_from(
    api: &Api<ConfigMap>,
    from: &str,
) -> impl futures_util::Stream<Item = Result<WatchEvent<ConfigMap>, Error>> + Unpin + use<> {
    api.watch(&WatchParams::default(), from)
        .await
        .unwrap()
        .boxed()
}

/// The names a watcher's initial listing delivers, up to its `InitDone`.
async fn initial_names<S>(stream: &mut S) -> Vec<String>
where
    S: futures_util::Stream<Item = Result<watcher::Event<ConfigMap>, watcher::Error>> + Unpin,
{
    let mut names = Vec::new();
    loop {
        match next_event(stream).await.unwrap() {
            watcher::Event::InitApply(cm) => names.push(cm.metadata.name.unwrap()),
            watcher::Event::InitDone => return names,
            _ => {}
        }
    }
}

async fn next_event<S, T>(stream: &mut S) -> T
where
    S: futures_util::Stream<Item = T> + Unpin,
{
    tokio::time::timeout(Duration::from_secs(5), stream.next())
        .await
        .expect("no watch event within 5 s")
        .expect("watch stream ended")
}

// ---------------------------------------------------------------- errors and preconditions

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

// ---------------------------------------------------------------- patches

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

// ---------------------------------------------------------------- status subresource

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

// ---------------------------------------------------------------- list

#[tokio::test]
async fn label_and_field_selectors_filter_lists() {
    let (_server, api) = served().await;
    for (name, labels) in [
        ("a", vec![("app", "ledger"), ("tier", "x")]),
        ("b", vec![("app", "ledger")]),
        ("c", vec![("app", "other"), ("tier", "y")]),
    ] {
        let mut obj = cm(name, &[]);
        obj.metadata.labels = Some(
            labels
                .into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
        );
        create(&api, &obj).await;
    }
    assert_eq!(
        listed(&api, ListParams::default().labels("app=ledger,tier")).await,
        ["a"]
    );
    assert_eq!(
        listed(&api, ListParams::default().labels("app=ledger")).await,
        ["a", "b"]
    );
    assert_eq!(
        listed(&api, ListParams::default().labels("app!=ledger")).await,
        ["c"]
    );
    assert_eq!(
        listed(&api, ListParams::default().fields("metadata.name=b")).await,
        ["b"]
    );
}

#[tokio::test]
async fn paginated_list_is_a_consistent_snapshot() {
    let (server, api) = served().await;
    for name in ["a", "b", "c"] {
        create(&api, &cm(name, &[])).await;
    }
    let first = api.list(&ListParams::default().limit(1)).await.unwrap();
    assert_eq!(first.items.len(), 1);
    assert_eq!(first.metadata.remaining_item_count, Some(2));
    api.delete("b", &DeleteParams::default()).await.unwrap();
    let token = first.metadata.continue_.clone().unwrap();
    let rest = api
        .list(&ListParams::default().continue_token(&token))
        .await
        .unwrap();
    let names: Vec<_> = rest
        .items
        .iter()
        .map(|c| c.metadata.name.clone().unwrap())
        .collect();
    assert_eq!(
        names,
        ["b", "c"],
        "pages come from the first page's snapshot"
    );
    assert_eq!(
        rest.metadata.resource_version,
        first.metadata.resource_version
    );
    server.compact_history();
    let st = status(
        api.list(&ListParams::default().continue_token(&token))
            .await,
    );
    assert_eq!(st.code, 410);
}

// ---------------------------------------------------------------- watch

#[tokio::test]
async fn watch_from_an_older_resource_version_replays_history() {
    let (_server, api) = served().await;
    let a = create(&api, &cm("a", &[("k", "1")])).await;
    merge(&api, "a", json!({"data": {"k": "2"}})).await;
    create(&api, &cm("b", &[])).await;
    api.delete("b", &DeleteParams::default()).await.unwrap();
    let mut stream = watch_from(&api, &rv(&a)).await;
    match next_event(&mut stream).await.unwrap() {
        WatchEvent::Modified(cm) => assert_eq!(cm.data.unwrap()["k"], "2"),
        other => panic!("expected MODIFIED, got {other:?}"),
    }
    assert!(
        matches!(next_event(&mut stream).await.unwrap(), WatchEvent::Added(cm) if cm.metadata.name.as_deref() == Some("b"))
    );
    assert!(matches!(
        next_event(&mut stream).await.unwrap(),
        WatchEvent::Deleted(_)
    ));
    // And it goes on live.
    create(&api, &cm("c", &[])).await;
    assert!(
        matches!(next_event(&mut stream).await.unwrap(), WatchEvent::Added(cm) if cm.metadata.name.as_deref() == Some("c"))
    );
}

#[tokio::test]
async fn watch_from_a_compacted_resource_version_is_gone() {
    let (server, api) = served().await;
    let a = create(&api, &cm("a", &[])).await;
    merge(&api, "a", json!({"data": {"k": "2"}})).await;
    server.compact_history();
    let mut stream = watch_from(&api, &rv(&a)).await;
    match next_event(&mut stream).await.unwrap() {
        WatchEvent::Error(st) => assert_eq!((st.code, st.reason.as_str()), (410, "Expired")),
        other => panic!("expected a 410 ERROR event, got {other:?}"),
    }
}

#[tokio::test]
async fn bounded_history_expires_old_resource_versions() {
    let (_server, api) = served_by(TestApiServer::builder().history_limit(2)).await;
    let a = create(&api, &cm("a", &[])).await;
    for i in 0..3 {
        merge(&api, "a", json!({"data": {"i": i.to_string()}})).await;
    }
    let mut stream = watch_from(&api, &rv(&a)).await;
    assert!(
        matches!(next_event(&mut stream).await.unwrap(), WatchEvent::Error(st) if st.code == 410)
    );
}

#[tokio::test]
async fn watch_with_a_selector_sees_objects_leave_it() {
    let (_server, api) = served().await;
    let mut obj = cm("a", &[]);
    obj.metadata.labels = Some(BTreeMap::from([("app".into(), "ledger".into())]));
    create(&api, &obj).await;
    let list = api.list(&ListParams::default()).await.unwrap();
    let wp = WatchParams::default().labels("app=ledger");
    let mut stream = api
        .watch(&wp, &list.metadata.resource_version.unwrap())
        .await
        .unwrap()
        .boxed();
    merge(&api, "a", json!({"metadata": {"labels": {"app": null}}})).await;
    assert!(matches!(
        next_event(&mut stream).await.unwrap(),
        WatchEvent::Deleted(_)
    ));
}

#[tokio::test]
async fn watch_times_out_with_a_bookmark() {
    let (_server, api) = served().await;
    let wp = WatchParams::default().timeout(1);
    let started = std::time::Instant::now();
    let events: Vec<_> = api
        .watch(&wp, "0")
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert!(started.elapsed() >= Duration::from_millis(900));
    assert!(
        matches!(events.last(), Some(WatchEvent::Bookmark(_))),
        "{events:?}"
    );
}

#[tokio::test]
async fn runtime_watcher_sees_a_create_and_an_update() {
    let (_server, api) = served().await;
    let mut stream = watcher(api.clone(), watcher::Config::default()).boxed();
    initial_names(&mut stream).await;
    create(&api, &cm("a", &[("k", "1")])).await;
    match next_event(&mut stream).await.unwrap() {
        watcher::Event::Apply(cm) => assert_eq!(cm.data.unwrap()["k"], "1"),
        other => panic!("expected Apply, got {other:?}"),
    }
    merge(&api, "a", json!({"data": {"k": "2"}})).await;
    match next_event(&mut stream).await.unwrap() {
        watcher::Event::Apply(cm) => assert_eq!(cm.data.unwrap()["k"], "2"),
        other => panic!("expected Apply, got {other:?}"),
    }
}

#[tokio::test]
async fn runtime_watcher_relists_after_410() {
    let (server, api) = served().await;
    let mut stream = watcher(api.clone(), watcher::Config::default()).boxed();
    initial_names(&mut stream).await;
    // The watcher has listed but not yet started its watch; move its position out of history.
    create(&api, &cm("a", &[])).await;
    server.compact_history();
    match next_event(&mut stream).await {
        Err(watcher::Error::WatchError(st)) => assert_eq!(st.code, 410),
        other => panic!("expected the 410 to surface, got {other:?}"),
    }
    // It then relists and finds what it missed.
    let relisted = initial_names(&mut stream).await;
    assert_eq!(relisted, ["a"]);
    assert_eq!(server.requests().count(Verb::List, "configmaps"), 2);
}

#[tokio::test]
async fn streaming_list_watcher_gets_initial_events() {
    let (server, api) = served().await;
    create(&api, &cm("a", &[])).await;
    let config = watcher::Config::default().streaming_lists();
    let mut stream = watcher(api, config).boxed();
    let initial = initial_names(&mut stream).await;
    assert_eq!(initial, ["a"]);
    assert_eq!(
        server.requests().count(Verb::List, "configmaps"),
        0,
        "a streaming list does not list"
    );
}

// ---------------------------------------------------------------- faults and counters

#[tokio::test]
async fn fault_on_the_nth_call_only() {
    let (server, api) = served().await;
    create(&api, &cm("a", &[])).await;
    let rule = server.faults().inject(
        FaultRule::on(Verb::Patch, "configmaps")
            .name("a")
            .nth(2)
            .respond(409, "Conflict"),
    );
    let merge = |v: &str| Patch::Merge(json!({"data": {"k": v}}));
    api.patch("a", &PatchParams::default(), &merge("1"))
        .await
        .unwrap();
    let st = status(api.patch("a", &PatchParams::default(), &merge("2")).await);
    assert_eq!((st.code, st.reason.as_str()), (409, "Conflict"));
    assert_eq!(
        api.get("a").await.unwrap().data.unwrap()["k"],
        "1",
        "a Respond fault stores nothing"
    );
    api.patch("a", &PatchParams::default(), &merge("3"))
        .await
        .unwrap();
    assert_eq!(server.faults().fired(rule), 1);
}

#[tokio::test]
async fn fault_500_and_422_reach_the_client() {
    let (server, api) = served().await;
    server.faults().inject(
        FaultRule::on(Verb::Create, "configmaps")
            .once()
            .respond(500, "InternalError"),
    );
    server.faults().inject(
        FaultRule::on(Verb::Create, "configmaps")
            .once()
            .respond(422, "Invalid"),
    );
    // Rules fire in injection order; the second create meets the second rule.
    assert_eq!(
        status(api.create(&PostParams::default(), &cm("a", &[])).await).code,
        500
    );
    assert_eq!(
        status(api.create(&PostParams::default(), &cm("a", &[])).await).code,
        422
    );
    create(&api, &cm("a", &[])).await;
}

#[tokio::test]
async fn fault_429_with_retry_after_is_retried_by_kubes_default_client() {
    let (server, api) = served().await;
    let rule = server.faults().inject(
        FaultRule::on(Verb::Get, "configmaps")
            .times(2)
            .too_many_requests(0),
    );
    create(&api, &cm("a", &[])).await;
    server.requests().reset();
    api.get("a").await.unwrap();
    assert_eq!(server.faults().fired(rule), 2);
    assert_eq!(
        server.requests().count(Verb::Get, "configmaps"),
        3,
        "two 429s then success"
    );
}

#[tokio::test]
async fn fault_429_and_503_are_visible_without_client_retries() {
    let server = TestApiServer::start().await;
    let mut config = server.config();
    config.default_retry = false;
    let api = cms(&Client::try_from(config).unwrap());
    server.faults().inject(
        FaultRule::on(Verb::List, "configmaps")
            .once()
            .too_many_requests(7),
    );
    server.faults().inject(
        FaultRule::on(Verb::List, "configmaps")
            .once()
            .respond(503, "ServiceUnavailable"),
    );
    let st = status(api.list(&ListParams::default()).await);
    assert_eq!((st.code, st.reason.as_str()), (429, "TooManyRequests"));
    assert_eq!(st.details.unwrap().retry_after_seconds, 7);
    let st = status(api.list(&ListParams::default()).await);
    assert_eq!((st.code, st.reason.as_str()), (503, "ServiceUnavailable"));
    api.list(&ListParams::default()).await.unwrap();
}

#[tokio::test]
async fn fault_delay_provokes_a_client_timeout_and_still_applies() {
    let server = TestApiServer::start().await;
    let mut config = server.config();
    config.read_timeout = Some(Duration::from_millis(200));
    let api = cms(&Client::try_from(config).unwrap());
    server.faults().inject(
        FaultRule::on(Verb::Create, "configmaps")
            .once()
            .delay(Duration::from_millis(600)),
    );
    let result = api.create(&PostParams::default(), &cm("slow", &[])).await;
    assert!(
        !matches!(result, Ok(_) | Err(Error::Api(_))),
        "expected a client timeout, got {result:?}"
    );
    assert!(
        server.object("configmaps", NS, "slow").is_none(),
        "not applied before the delay ends"
    );
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert!(
        server.object("configmaps", NS, "slow").is_some(),
        "applied once the delay ends"
    );
}

#[tokio::test]
async fn lost_reply_as_500_really_applies_the_write() {
    let (server, api) = served().await;
    server.faults().inject(
        FaultRule::on(Verb::Create, "configmaps")
            .once()
            .lost_reply(LostReply::InternalError),
    );
    let st = status(
        api.create(&PostParams::default(), &cm("a", &[("k", "v")]))
            .await,
    );
    assert_eq!(st.code, 500);
    assert_eq!(
        server.object("configmaps", NS, "a").unwrap()["data"]["k"],
        "v"
    );
    // The retry a careful client makes now meets its own earlier write.
    let st = status(
        api.create(&PostParams::default(), &cm("a", &[("k", "v")]))
            .await,
    );
    assert_eq!(st.reason, "AlreadyExists");
}

#[tokio::test]
async fn lost_reply_as_dropped_connection_really_applies_the_write() {
    let (server, api) = served().await;
    let created = create(&api, &cm("a", &[("k", "1")])).await;
    server.faults().inject(
        FaultRule::on(Verb::Patch, "configmaps")
            .once()
            .lost_reply(LostReply::DropConnection),
    );
    let patch =
        Patch::Merge(json!({"metadata": {"resourceVersion": rv(&created)}, "data": {"k": "2"}}));
    let result = api.patch("a", &PatchParams::default(), &patch).await;
    assert!(
        !matches!(result, Ok(_) | Err(Error::Api(_))),
        "expected a transport error, got {result:?}"
    );
    assert_eq!(
        server.object("configmaps", NS, "a").unwrap()["data"]["k"],
        "2"
    );
    // Retrying the same conditional patch now conflicts with its own effect.
    assert_eq!(
        status(api.patch("a", &PatchParams::default(), &patch).await).code,
        409
    );
}

#[tokio::test]
async fn request_counters_count_round_trips_and_reset() {
    let server = TestApiServer::start().await;
    let client = server.client();
    let api = cms(&client);
    create(&api, &cm("a", &[])).await;
    api.get("a").await.unwrap();
    merge(&api, "a", json!({"data": {"k": "1"}})).await;
    let _ = api.get("missing").await;
    let requests = server.requests();
    assert_eq!(requests.count(Verb::Create, "configmaps"), 1);
    assert_eq!(requests.count(Verb::Get, "configmaps"), 2);
    assert_eq!(requests.count(Verb::Patch, "configmaps"), 1);
    assert_eq!(requests.total(), 4);
    let widgets = widgets(&server, &client);
    create(&widgets, &widget("w", json!({}))).await;
    widgets
        .patch_status(
            "w",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"p": 1}})),
        )
        .await
        .unwrap();
    assert_eq!(requests.count(Verb::Patch, "widgets/status"), 1);
    assert_eq!(requests.count(Verb::Patch, "widgets.example.com/status"), 1);
    assert_eq!(requests.count(Verb::Patch, "widgets"), 0);
    requests.reset();
    assert_eq!(requests.total(), 0);
    api.list(&ListParams::default()).await.unwrap();
    assert_eq!(requests.count(Verb::List, "configmaps"), 1);
    assert_eq!(
        requests.log()[0].method_path,
        format!("GET /api/v1/namespaces/{NS}/configmaps?")
    );
}

#[tokio::test]
async fn planted_objects_are_served_and_inspectable() {
    let (server, api) = served().await;
    // Bypasses validation: a key the real server would refuse, as left by an older writer.
    server
        .put_object(
            "configmaps",
            json!({"metadata": {"name": "corrupt", "namespace": NS}, "data": {"bad/key": "{not json"}}),
        )
        .unwrap();
    let got = api.get("corrupt").await.unwrap();
    assert_eq!(got.data.unwrap()["bad/key"], "{not json");
    assert!(got.metadata.uid.is_some() && got.metadata.resource_version.is_some());
    assert_eq!(server.objects("configmaps").len(), 1);
}
