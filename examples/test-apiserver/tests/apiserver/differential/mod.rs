//! The differential test: every behaviour of the double that our tests rely on, asked of the
//! double and of a real kube-apiserver, and the answers compared.
//!
//! One walk ([`observe`]) sends the same requests to a server and records its answers (status
//! codes, `Status` reasons and messages, the parts of returned objects the tests read, watch
//! events), with run-specific names replaced by placeholders. The answers of a real
//! kube-apiserver v1.34 are committed in `tests/differential.real.json`, so the double is held to
//! them on every run, Go or no Go; with `MIGRATE_TEST_KUBECONFIG` set, the real server is asked
//! again and must still give exactly those answers (`UPDATE_DIFFERENTIAL=1` rewrites the file
//! from it instead). Where the double answers otherwise on purpose, [`KNOWN_DIFFERENCES`] says
//! what it answers and why; `README.md` lists the same.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::collections::BTreeMap;
use std::time::Duration;

use futures_util::StreamExt;
use http_body_util::BodyExt;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, DeleteParams, Patch, PatchParams, WatchEvent, WatchParams};
use serde_json::{Value, json};
use test_apiserver::TestApiServer;
use test_apiserver::real::{RealCluster, unique_name};

const GROUP: &str = "difftest.example.com";
const RECORDED: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/differential.real.json");

/// Answers of the double that differ from the real server's on purpose, with the reason.
const KNOWN_DIFFERENCES: &[(&str, &str, &str)] = &[(
    "list/a malformed continue token",
    r#"{"code":400,"status":{"code":400,"details":{"group":null,"kind":null,"name":null},"message":"invalid continue token \"garbage\"","reason":"BadRequest","status":"Failure"}}"#,
    "same code and reason; the real message quotes the decoder error for the token's bytes, \
     which the double's token format does not reproduce",
)];

/// A server under test and where the walk puts its objects.
struct Target {
    client: Client,
    namespace: String,
    double: Option<TestApiServer>,
}

impl Target {
    async fn double() -> Self {
        let server = TestApiServer::start().await;
        server.register_custom_resource(GROUP, "v1", "widgets", "Widget", true, true);
        Self {
            client: server.client(),
            namespace: unique_name("difftest"),
            double: Some(server),
        }
    }

    async fn real(cluster: &RealCluster) -> Self {
        let namespace = unique_name("difftest");
        cluster.ensure_namespace(&namespace).await;
        install_widgets(&cluster.client()).await;
        Self {
            client: cluster.client(),
            namespace,
            double: None,
        }
    }
}

/// The walk's custom resource on a real server: namespaced, with a status subresource and no
/// schema to speak of (the double checks none).
async fn install_widgets(client: &Client) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("widgets.{GROUP}")},
        "spec": {
            "group": GROUP, "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
            }],
        },
    }))
    .unwrap();
    crds.patch(
        &format!("widgets.{GROUP}"),
        &PatchParams::apply("difftest").force(),
        &Patch::Apply(&crd),
    )
    .await
    .unwrap();
    test_apiserver::real::wait_until_established(client, &format!("widgets.{GROUP}")).await;
}

enum Body {
    None,
    Json(Value),
    Raw(Vec<u8>),
}

/// One walk over one server: sends requests, records normalised answers.
struct Probe<'a> {
    t: &'a Target,
    answers: BTreeMap<String, Value>,
    /// Run-specific strings and their placeholders.
    names: Vec<(String, String)>,
}

impl<'a> Probe<'a> {
    fn new(t: &'a Target) -> Self {
        Self {
            t,
            answers: BTreeMap::new(),
            names: vec![(t.namespace.clone(), "NS".into())],
        }
    }

    /// A fresh name for an object, shown as `placeholder` in the answers.
    fn name(&mut self, placeholder: &str) -> String {
        let name = unique_name(&format!("d{}", self.names.len()));
        self.names.push((name.clone(), placeholder.to_owned()));
        name
    }

    fn cm_path(&self, name: &str) -> String {
        format!("/api/v1/namespaces/{}/configmaps/{name}", self.t.namespace)
    }

    fn cms_path(&self) -> String {
        format!("/api/v1/namespaces/{}/configmaps", self.t.namespace)
    }

    fn widget_path(&self, name: &str) -> String {
        format!(
            "/apis/{GROUP}/v1/namespaces/{}/widgets/{name}",
            self.t.namespace
        )
    }

    fn lease_path(&self, name: &str) -> String {
        format!(
            "/apis/coordination.k8s.io/v1/namespaces/{}/leases/{name}",
            self.t.namespace
        )
    }

    async fn send(&self, method: &str, path: &str, content_type: &str, body: Body) -> (u16, Value) {
        let bytes = match body {
            Body::None => Vec::new(),
            Body::Json(v) => serde_json::to_vec(&v).unwrap(),
            Body::Raw(b) => b,
        };
        let mut request = http::Request::builder().method(method).uri(path);
        if !content_type.is_empty() {
            request = request.header(http::header::CONTENT_TYPE, content_type);
        }
        let request = request.body(kube::client::Body::from(bytes)).unwrap();
        let response = self.t.client.send(request).await.unwrap();
        let code = response.status().as_u16();
        let body = response.into_body().collect().await.unwrap().to_bytes();
        let value = serde_json::from_slice(&body)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&body).into_owned()));
        (code, value)
    }

    async fn get(&self, path: &str) -> (u16, Value) {
        self.send("GET", path, "", Body::None).await
    }
    async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        self.send("POST", path, "application/json", Body::Json(body))
            .await
    }
    async fn put(&self, path: &str, body: Value) -> (u16, Value) {
        self.send("PUT", path, "application/json", Body::Json(body))
            .await
    }
    async fn patch(&self, path: &str, content_type: &str, body: Value) -> (u16, Value) {
        self.send("PATCH", path, content_type, Body::Json(body))
            .await
    }
    /// A JSON merge patch (RFC 7386).
    async fn merge(&self, path: &str, body: Value) -> (u16, Value) {
        self.patch(path, "application/merge-patch+json", body).await
    }
    /// A JSON patch (RFC 6902).
    async fn json_patch(&self, path: &str, body: Value) -> (u16, Value) {
        self.patch(path, "application/json-patch+json", body).await
    }
    async fn delete(&self, path: &str, body: Option<Value>) -> (u16, Value) {
        let body = body.map_or(Body::None, Body::Json);
        self.send("DELETE", path, "application/json", body).await
    }

    /// Replaces run-specific names everywhere in a value.
    fn normalise(&self, value: Value) -> Value {
        match value {
            Value::String(mut s) => {
                // Longest first, so that a name is not half-replaced by a shorter one.
                let mut names = self.names.clone();
                names.sort_by_key(|(n, _)| std::cmp::Reverse(n.len()));
                for (name, placeholder) in &names {
                    s = s.replace(name.as_str(), placeholder);
                }
                Value::String(s)
            }
            Value::Array(a) => Value::Array(a.into_iter().map(|v| self.normalise(v)).collect()),
            Value::Object(o) => Value::Object(
                o.into_iter()
                    .map(|(k, v)| {
                        let k = match self.normalise(Value::String(k)) {
                            Value::String(k) => k,
                            _ => unreachable!(),
                        };
                        (k, self.normalise(v))
                    })
                    .collect(),
            ),
            other => other,
        }
    }

    fn record(&mut self, key: &str, value: Value) {
        let value = self.normalise(value);
        assert!(
            self.answers.insert(key.to_owned(), value).is_none(),
            "{key} recorded twice"
        );
    }

    /// Records a failure: code, reason, message and details, as our code reads them.
    fn record_status(&mut self, key: &str, (code, body): (u16, Value)) {
        let mut answer = json!({"code": code});
        if body["kind"] == "Status" {
            let message = mask(body["message"].as_str().unwrap_or_default());
            answer["status"] = json!({
                "status": body["status"], "code": body["code"], "reason": body["reason"],
                "message": message,
                "details": {
                    "name": body["details"]["name"], "group": body["details"]["group"],
                    "kind": body["details"]["kind"],
                },
            });
        } else {
            answer["kind"] = body["kind"].clone();
        }
        self.record(key, answer);
    }

    /// Records a success: the code and the projection `pick` of the returned object.
    fn record_object(&mut self, key: &str, (code, body): (u16, Value), pick: &[&str]) {
        let mut answer = json!({"code": code});
        if code >= 300 {
            answer["unexpected"] = body;
        } else {
            for pointer in pick {
                answer[*pointer] = body.pointer(pointer).cloned().unwrap_or(Value::Null);
            }
        }
        self.record(key, answer);
    }
}

/// Masks what differs between runs and servers inside a message: UIDs, and numbers in
/// parentheses (resourceVersions, gRPC message sizes).
fn mask(message: &str) -> String {
    let chars: Vec<char> = message.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    let is_uid = |at: usize| {
        let shape = "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx";
        chars.len() >= at + shape.len()
            && shape.chars().zip(&chars[at..]).all(|(want, c)| {
                if want == '-' {
                    *c == '-'
                } else {
                    c.is_ascii_hexdigit()
                }
            })
    };
    while i < chars.len() {
        if is_uid(i) {
            out.push_str("UID");
            i += 36;
        } else if chars[i] == '(' && chars.get(i + 1).is_some_and(char::is_ascii_digit) {
            let mut j = i + 1;
            while chars.get(j).is_some_and(char::is_ascii_digit) {
                j += 1;
            }
            if matches!(chars.get(j), Some(')' | ' ')) {
                out.push_str("(N");
                i = j;
            } else {
                out.push('(');
                i += 1;
            }
        } else {
            out.push(chars[i]);
            i += 1;
        }
    }
    out
}

fn cm(name: &str, data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data})
}

fn rv(object: &Value) -> String {
    object["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or_else(|| panic!("no resourceVersion in {object}"))
        .to_owned()
}

/// Sends the walk to one server and returns its answers.
async fn observe(t: &Target) -> BTreeMap<String, Value> {
    let mut p = Probe::new(t);
    writes::configmap_errors(&mut p).await;
    writes::patches(&mut p).await;
    writes::sizes(&mut p).await;
    writes::leases(&mut p).await;
    reads::custom_resources(&mut p).await;
    reads::lists(&mut p).await;
    reads::watches(&mut p).await;
    p.answers
}

/// The case whose real answer depends on the server's age.
const OLD_RV_WATCH: &str = "watch/from a resourceVersion older than the history";

fn recorded() -> BTreeMap<String, Value> {
    let text = std::fs::read_to_string(RECORDED).unwrap_or_else(|e| {
        panic!("{RECORDED}: {e} (record it: UPDATE_DIFFERENTIAL=1 with a real server)")
    });
    serde_json::from_str(&text).unwrap()
}

/// Every answer in `got` that is not `want`, as readable lines.
fn differences(got: &BTreeMap<String, Value>, want: &BTreeMap<String, Value>) -> Vec<String> {
    let keys: std::collections::BTreeSet<_> = got.keys().chain(want.keys()).collect();
    keys.into_iter()
        .filter(|k| got.get(*k) != want.get(*k))
        .map(|k| {
            format!(
                "{k}:\n    real:   {}\n    double: {}",
                want.get(k).map_or("(none)".into(), Value::to_string),
                got.get(k).map_or("(none)".into(), Value::to_string)
            )
        })
        .collect()
}

#[tokio::test]
#[ignore = "needs MIGRATE_TEST_KUBECONFIG (examples/kube-testenv)"]
async fn the_real_kube_apiserver_still_answers_as_recorded() {
    let cluster =
        test_apiserver::or_skip!(RealCluster::from_env("differential test (real side)").await);
    let target = Target::real(&cluster).await;
    let mut real = observe(&target).await;
    if std::env::var_os("UPDATE_DIFFERENTIAL").is_some() {
        std::fs::write(
            RECORDED,
            serde_json::to_string_pretty(&real).unwrap() + "\n",
        )
        .unwrap();
    }
    let recorded = recorded();
    // Whether a young real server still serves rv 1 depends on its age (its watch cache
    // and etcd compaction), not on the API: a server that has not expired it yet says
    // nothing about the recorded answer, which the double is still held to.
    if real[OLD_RV_WATCH]["type"] != "ERROR" {
        eprintln!(
            "note: the real server still serves resourceVersion 1 (too young to have expired it); '{OLD_RV_WATCH}' is compared with the recording only"
        );
        real.insert(OLD_RV_WATCH.to_owned(), recorded[OLD_RV_WATCH].clone());
    }
    let drift = differences(&real, &recorded);
    assert!(
        drift.is_empty(),
        "the real server no longer answers as recorded in {RECORDED} (UPDATE_DIFFERENTIAL=1 rewrites it):\n{}",
        drift.join("\n").replace("double:", "now:  ")
    );
}

#[tokio::test]
async fn the_double_answers_as_the_recorded_real_kube_apiserver_did() {
    let recorded = recorded();
    let mut want = recorded.clone();
    for (key, answer, why) in KNOWN_DIFFERENCES {
        assert!(!why.is_empty());
        assert!(
            want.contains_key(*key),
            "known difference {key} is not in the walk"
        );
        want.insert((*key).to_owned(), serde_json::from_str(answer).unwrap());
    }
    let double = observe(&Target::double().await).await;
    let found = differences(&double, &want);
    assert!(
        found.is_empty(),
        "the double differs from the real server ({} answers):\n{}",
        found.len(),
        found.join("\n")
    );
}

mod reads;
mod writes;
