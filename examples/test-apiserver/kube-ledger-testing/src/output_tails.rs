//! What both Kubernetes ledgers keep of a failure where (issue 35, CONTRACT.md §5.2), against a
//! real API server: the output tail in the Secret owned by the ledger, never in the ledger
//! object; everything else (reason, the calls by command, verb and resource) in the entry. A
//! reader who may read the ledger but not the Secret is refused the tail; a later outcome
//! removes the tail; a Secret that cannot be written still lets the entry record the failure,
//! without the tail.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams};
use migration_core::last_failure::LastFailure;
use migration_core::step::{FailureNote, StepMode, StepWrite};
use migration_core::testing::{read_resolved, sample_entry, sample_record, slug};
use migration_core::{EntryState, LedgerEntry, LockedLedger, WriteMode};
use serde_json::json;
use test_apiserver::real::RealCluster;

/// A value that looks like a credential but that no rule of the redactor knows (no key name, no
/// known prefix): only keeping it out of the ledger object keeps it from the ledger's readers.
pub const UNKNOWN_SECRET: &str = "xq7Rv9LmT2pW8sKdN4bZ";

/// One ledger under test.
pub struct Subject {
    /// The ledger as the runner opens it.
    pub ledger: Arc<dyn LockedLedger>,
    /// The same ledger opened by a user who may read the ledger object but no Secret.
    pub reader: Arc<dyn LockedLedger>,
    /// Secrets in the namespace the ledger keeps its tails in.
    pub secrets: Api<Secret>,
    /// The name of the ledger's Secret.
    pub secret: String,
}

impl Subject {
    /// The ledger `name` on `cluster`, opened as the runner opens it (`ledger`) and by a user
    /// who may read it but no Secret (`reader`), its tails kept in the cluster's namespace.
    pub fn new(
        cluster: &RealCluster,
        name: &str,
        ledger: impl LockedLedger + 'static,
        reader: impl LockedLedger + 'static,
    ) -> Self {
        Self {
            ledger: Arc::new(ledger),
            reader: Arc::new(reader),
            secrets: Api::namespaced(cluster.client(), cluster.namespace()),
            secret: migration_kube::output_secret::secret_name(name),
        }
    }
}

/// Where a ledger reader's right to `get` the ledger object is granted: a Role in the
/// cluster's namespace (the ConfigMap ledger) or a ClusterRole (the cluster-scoped
/// MigrationLedger).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// A Role and RoleBinding in the cluster's namespace.
    Namespace,
    /// A ClusterRole and ClusterRoleBinding.
    Cluster,
}

/// A user `<name>-reader` who may `get` the ledger object `name` (`resource` in `api_group`)
/// and nothing else (no Secret): whoever may read the ledger. A client acting as that user.
pub fn ledger_reader(
    cluster: &RealCluster,
    name: &str,
    scope: Scope,
    api_group: &str,
    resource: &str,
) -> kube::Client {
    let user = format!("{name}-reader");
    let (role, metadata) = match scope {
        Scope::Namespace => (
            "Role",
            json!({"name": user, "namespace": cluster.namespace()}),
        ),
        Scope::Cluster => ("ClusterRole", json!({"name": user})),
    };
    let rbac = json!({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": role, "metadata": metadata,
         "rules": [{"apiGroups": [api_group], "resources": [resource], "resourceNames": [name],
                    "verbs": ["get"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": format!("{role}Binding"),
         "metadata": metadata,
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role, "name": user},
         "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}]},
    ]});
    cluster.kubectl_ok(&["apply", "-f", "-"], &rbac.to_string());
    cluster.impersonating(&user, &[])
}

/// A masked failure as the runner records it: its call (command, verb, resource), then the
/// output.
pub fn masked_failure(n: u32) -> LedgerEntry {
    LedgerEntry {
        reason: Some("masked-failure".into()),
        message: Some(format!(
            "masked-failure: the script exited 0 after 1 failed cluster-command call(s):\n  kubectl get secret: exit 1\n--- output ---\nconnecting with {UNKNOWN_SECRET}\nerror: boom {n}"
        )),
        ..sample_entry(EntryState::Failed, n)
    }
}

fn last_failure() -> LastFailure {
    LastFailure {
        reason: "exit-status-3".into(),
        message: format!("login {UNKNOWN_SECRET} refused"),
        at: sample_entry(EntryState::Ok, 1).at,
        image: None,
        attempts: 1,
    }
}

async fn step(ledger: &dyn LockedLedger, records: &[(migration_core::Slug, LedgerEntry)]) {
    let three = slug(3);
    let failure = last_failure();
    ledger
        .write_step(&StepWrite {
            records,
            attempt: None,
            mode: StepMode::Overwrite,
            failure: Some(FailureNote {
                slug: &three,
                failure: &failure,
            }),
        })
        .await
        .unwrap();
}

async fn secret_data(s: &Subject, key: &str) -> Option<String> {
    let secret = s.secrets.get_opt(&s.secret).await.unwrap()?;
    let bytes = secret.data?.remove(key)?;
    Some(String::from_utf8(bytes.0).unwrap())
}

/// The whole case. `object` answers the ledger object as stored (JSON text), `owner_uid` its
/// uid. Leaves the ledger's Secret deleted.
pub async fn a_failures_output_is_kept_in_a_secret_owned_by_the_ledger(
    s: &Subject,
    object: impl AsyncFn() -> String,
    owner_uid: impl AsyncFn() -> String,
) {
    let ledger = &*s.ledger;
    ledger
        .create(&[sample_record(1, EntryState::Ok)])
        .await
        .unwrap();
    ledger.read().await.unwrap();
    step(ledger, &[(slug(2), masked_failure(2))]).await;

    let stored = object().await;
    assert!(
        !stored.contains(UNKNOWN_SECRET),
        "the ledger object holds the output: {stored}"
    );
    for kept in [
        "masked-failure",
        "kubectl get secret: exit 1",
        "exit-status-3",
    ] {
        assert!(stored.contains(kept), "the entry lost {kept:?}: {stored}");
    }
    for key in ["m.s-2", "f.s-3"] {
        let tail = secret_data(s, key).await.unwrap_or_default();
        assert!(
            tail.contains(UNKNOWN_SECRET),
            "{key} in the Secret: {tail:?}"
        );
    }
    let secret = s.secrets.get(&s.secret).await.unwrap();
    let owners = secret.metadata.owner_references.unwrap_or_default();
    assert_eq!(
        owners.iter().map(|o| o.uid.clone()).collect::<Vec<_>>(),
        vec![owner_uid().await],
        "the Secret is owned by the ledger object"
    );

    // The runner (and whoever may read the Secret) reads the whole failure back.
    let resolved = read_resolved(ledger).await;
    assert_eq!(resolved.entry(&slug(2)), Some(&masked_failure(2)));
    assert_eq!(resolved.failures.get(&slug(3)), Some(&last_failure()));

    // A reader of the ledger who may not read Secrets gets the entry, not the tail.
    let snapshot = s.reader.read().await.unwrap().unwrap();
    let message = snapshot.entry(&slug(2)).unwrap().message.clone().unwrap();
    assert!(!message.contains(UNKNOWN_SECRET));
    let refused = s.reader.kept_output(&message).await.unwrap_err();
    assert!(
        refused.to_string().contains("forbidden"),
        "the reader is refused: {refused}"
    );

    // A later outcome removes the tails its slug's entry and last failure no longer name.
    ledger
        .write(
            &[
                sample_record(2, EntryState::Ok),
                sample_record(3, EntryState::Ok),
            ],
            WriteMode::Replace,
        )
        .await
        .unwrap();
    assert_eq!(secret_data(s, "m.s-2").await, None);
    assert_eq!(secret_data(s, "f.s-3").await, None);

    // A Secret that cannot be written: the entry still records the failure, without the tail.
    s.secrets
        .patch(
            &s.secret,
            &PatchParams::default(),
            &Patch::Merge(&serde_json::json!({"immutable": true})),
        )
        .await
        .unwrap();
    ledger
        .write(&[(slug(4), masked_failure(4))], WriteMode::Replace)
        .await
        .unwrap();
    let stored = object().await;
    assert!(!stored.contains(UNKNOWN_SECRET), "{stored}");
    let entry = ledger
        .read()
        .await
        .unwrap()
        .unwrap()
        .entry(&slug(4))
        .cloned()
        .unwrap();
    assert_eq!(entry.state, EntryState::Failed);
    assert_eq!(entry.reason.as_deref(), Some("masked-failure"));
    let message = entry.message.unwrap_or_default();
    assert!(
        message.contains("kubectl get secret: exit 1") && message.contains("output tail not kept"),
        "{message}"
    );
    s.secrets
        .delete(&s.secret, &DeleteParams::default())
        .await
        .unwrap();
}
