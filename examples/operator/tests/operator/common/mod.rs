//! What the operator's test files share: scenarios run on the test API server (`operator.rs`)
//! and on a real one (`real_cluster.rs`), written once against a kube client.

#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::PodTemplateSpec;
use migrate_operator::Leadership;
use migration_core::{EntryState, LedgerEntry};

/// The image of the test indexes: digest-pinned, as `migrate index` renders it.
pub const IMAGE: &str = "ghcr.io/example/migrations@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
/// The image of the next release.
pub const NEXT_IMAGE: &str = "ghcr.io/example/migrations@sha256:4567456745674567456745674567456745674567456745674567456745674567";

/// Owned copies of `(a, b)` pairs, to compare with what a test read back.
pub fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

/// Two replicas elect a leader through Lease `operator-leader` in `ns` (2 s TTL, wall clock):
/// only the first acts; once it dies without releasing, the other takes over when the Lease
/// lapses.
pub async fn only_the_leader_acts(client: kube::Client, ns: &str) {
    let clock = Arc::new(migration_core::SystemClock);
    let acted = Arc::new(std::sync::Mutex::new(Vec::<&str>::new()));
    let replica = |name: &'static str| {
        let leadership = Leadership::new(
            client.clone(),
            ns,
            "operator-leader",
            name,
            clock.clone(),
            Duration::from_secs(2),
        );
        let acted = acted.clone();
        tokio::spawn(async move {
            leadership
                .run(|| {
                    let acted = acted.clone();
                    async move {
                        acted.lock().unwrap().push(name);
                        std::future::pending::<()>().await;
                    }
                })
                .await;
        })
    };
    let a = replica("replica-a");
    tokio::time::sleep(Duration::from_millis(500)).await;
    let b = replica("replica-b");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        *acted.lock().unwrap(),
        ["replica-a"],
        "only the leader works"
    );
    // The leader dies without releasing: the other takes over once the lease lapses.
    a.abort();
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(*acted.lock().unwrap(), ["replica-a", "replica-b"]);
    b.abort();
}

/// The entry the operator records when a Job exhausts its retries: `failed`,
/// `retries-exhausted`, its message carrying `detail` (the Job's reason as the server gave it).
pub fn assert_gave_up(entry: &LedgerEntry, detail: &str) {
    assert_eq!(entry.state, EntryState::Failed);
    assert_eq!(entry.reason.as_deref(), Some("retries-exhausted"));
    assert!(
        entry
            .message
            .as_deref()
            .unwrap_or_default()
            .contains(detail),
        "{entry:?}"
    );
}

/// Asserts that a Job's pod `template` carries the platform's pod settings the tests give the
/// operator (the `example.com/team` annotation, pull secret `regcred`, node pool `system`, the
/// `dedicated` toleration, user 65532, a read-only root filesystem) and pull policy
/// `pull_policy`: the Job the operator builds and the Job a real server stores alike.
pub fn assert_platform_pod_settings(template: &PodTemplateSpec, pull_policy: &str) {
    let annotations = template.metadata.as_ref().unwrap().annotations.as_ref();
    assert_eq!(annotations.unwrap()["example.com/team"], "platform");
    let pod = template.spec.as_ref().unwrap();
    assert_eq!(pod.image_pull_secrets.as_ref().unwrap()[0].name, "regcred");
    assert_eq!(pod.node_selector.as_ref().unwrap()["pool"], "system");
    assert_eq!(
        pod.tolerations.as_ref().unwrap()[0].key.as_deref(),
        Some("dedicated")
    );
    assert_eq!(
        pod.security_context.as_ref().unwrap().run_as_user,
        Some(65532)
    );
    let container = &pod.containers[0];
    assert_eq!(container.image_pull_policy.as_deref(), Some(pull_policy));
    assert_eq!(
        container
            .security_context
            .as_ref()
            .and_then(|c| c.read_only_root_filesystem),
        Some(true)
    );
}
