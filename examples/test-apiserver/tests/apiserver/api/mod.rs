//! Black-box tests: every modelled behaviour, observed through a real `kube::Client`.
//!
//! One test binary on purpose: each extra binary costs a link of kube on CI's 2 cores (its
//! modules are the files beside this one).
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

mod errors;
mod faults;
mod lists_and_watches;
mod patches;
mod resources;
