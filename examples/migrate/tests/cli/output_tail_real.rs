//! `migrate run` then `migrate status SLUG` on a ConfigMap ledger of a real API server (issue 35,
//! CONTRACT.md §5.2): a failing script's output, holding a credential-looking value no rule of
//! the redactor knows, is not in the ledger ConfigMap but in its Secret; `status` shows it to a
//! user who may read the Secret, and to one who may read only the ledger says where it is and
//! why it is not shown. Unset `MIGRATE_TEST_KUBECONFIG`: the test fails as every real-server
//! test does when asked for without it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use k8s_openapi::api::core::v1::{ConfigMap, Secret, ServiceAccount};
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use migration_core::testing::fixtures::TreeBuilder;
use migration_core::{OnError, Tier};
use serde_json::json;
use test_apiserver::real::{RealCluster, unique_name};

/// A value shaped like a credential that no redaction rule knows (no key name, no prefix).
const UNKNOWN_SECRET: &str = "xq7Rv9LmT2pW8sKdN4bZ";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs MIGRATE_TEST_KUBECONFIG (examples/kube-testenv)"]
async fn status_shows_a_failures_output_only_to_who_may_read_the_ledgers_secret() {
    let cluster = RealCluster::from_env("status and the output Secret")
        .await
        .unwrap();
    let ns = cluster.namespace().to_owned();
    let name = unique_name("safe35-status");
    let configmaps: Api<ConfigMap> = Api::namespaced(cluster.client(), &ns);
    let cm: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": name}, "data": {}})).unwrap();
    configmaps
        .create(&PostParams::default(), &cm)
        .await
        .unwrap();
    let scratch = TreeBuilder::new()
        .script_with(
            Tier::PreApply,
            "b",
            OnError::Warn,
            &[],
            &format!("echo 'connecting with {UNKNOWN_SECRET}'\nexit 2"),
        )
        .manifest(&[("00001-v1", "b\n")])
        .scratch();
    let root = scratch.root();
    let spec = format!("configmap:{ns}/{name}");
    let (code, doc, err) = common::json_on_cluster(
        cluster.kubeconfig(),
        &["run", root.to_str().unwrap(), "--ledger", &spec],
    )
    .await;
    assert_eq!(code, 0, "{doc}\n{err}");
    let stored = serde_json::to_string(&configmaps.get(&name).await.unwrap()).unwrap();
    assert!(!stored.contains(UNKNOWN_SECRET), "in the ledger: {stored}");
    assert!(stored.contains("exit-status-2"), "{stored}");

    // Whoever may read the Secret (here the admin) sees the output.
    let (code, entry, err) =
        common::json_on_cluster(cluster.kubeconfig(), &["status", "--ledger", &spec, "b"]).await;
    assert_eq!(code, 0, "{err}");
    let shown = entry["message"].as_str().unwrap_or_default();
    assert!(shown.contains(UNKNOWN_SECRET), "{entry}");
    assert_eq!(entry["reason"], "exit-status-2");

    // A ServiceAccount that may read the ledger ConfigMap and nothing else.
    let reader = format!("{name}-reader");
    let rbac = json!({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": reader, "namespace": ns}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
         "metadata": {"name": reader, "namespace": ns},
         "rules": [{"apiGroups": [""], "resources": ["configmaps"], "resourceNames": [name], "verbs": ["get"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
         "metadata": {"name": reader, "namespace": ns},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": reader},
         "subjects": [{"kind": "ServiceAccount", "name": reader, "namespace": ns}]},
    ]});
    cluster.kubectl_ok(&["apply", "-f", "-"], &rbac.to_string());
    let kubeconfig = scratch.dir().join("reader.kubeconfig");
    std::fs::write(
        &kubeconfig,
        cluster.service_account_kubeconfig(&ns, &reader).await,
    )
    .unwrap();
    let (code, entry, err) =
        common::json_on_cluster(&kubeconfig, &["status", "--ledger", &spec, "b"]).await;
    assert_eq!(code, 0, "{err}");
    let shown = entry["message"].as_str().unwrap_or_default();
    assert!(!shown.contains(UNKNOWN_SECRET), "{entry}");
    assert!(
        shown.contains(&format!("Secret {ns}/{name}-output")) && shown.contains("forbidden"),
        "the reader is told where the output is and why it is not shown: {entry}"
    );

    let secrets: Api<Secret> = Api::namespaced(cluster.client(), &ns);
    let accounts: Api<ServiceAccount> = Api::namespaced(cluster.client(), &ns);
    secrets
        .delete(&format!("{name}-output"), &DeleteParams::default())
        .await
        .unwrap();
    accounts
        .delete(&reader, &DeleteParams::default())
        .await
        .unwrap();
    configmaps
        .delete(&name, &DeleteParams::default())
        .await
        .unwrap();
}
