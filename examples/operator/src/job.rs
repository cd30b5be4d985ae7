//! The Job one attempt of a background migration runs in.

use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Resource;
use migration_core::{Sha256Digest, Slug};
use migration_kube::defaults;
use serde_json::json;

use crate::*;

/// A Job name within Kubernetes' 63-character label limit: long slugs are
/// cut and made unique with a hash.
pub fn job_name(slug: &Slug, attempt: u32) -> String {
    let s = slug.as_str();
    let short = if s.len() <= 48 {
        s.to_owned()
    } else {
        format!(
            "{}-{}",
            &s[..39],
            &Sha256Digest::of(s.as_bytes()).to_string()[..8]
        )
    };
    format!("migrate-{short}-{attempt}")
}

/// Operator settings.
#[derive(Debug, Clone)]
pub struct OperatorConfig {
    /// Namespace of the index, the Jobs and the leader Lease.
    pub namespace: String,
    /// Name of the index ConfigMap.
    pub index_name: String,
    /// The `--ledger` spec passed to the Jobs' runner.
    pub ledger_spec: String,
    /// ServiceAccount the Jobs run as.
    pub service_account: String,
    /// Retry policy for failed Jobs.
    pub retries: Retries,
    /// How often to look again while a Job runs (watches usually wake us sooner).
    pub poll: Duration,
}

impl OperatorConfig {
    /// The operator in `namespace`, with the [`defaults`]: the index
    /// `cozystack-migrations-index`, ServiceAccount `cozystack-migrations`,
    /// the ConfigMap ledger `cozystack-version` in the same namespace.
    pub fn new(namespace: &str) -> Self {
        OperatorConfig {
            namespace: namespace.to_owned(),
            index_name: defaults::INDEX_NAME.into(),
            ledger_spec: format!("configmap:{namespace}/{}", defaults::LEDGER_NAME),
            service_account: defaults::SERVICE_ACCOUNT.into(),
            retries: Retries::default(),
            poll: Duration::from_secs(60),
        }
    }
}

/// Builds the Job for one attempt.
pub fn job_for(
    config: &OperatorConfig,
    index: &Index,
    owner: &ConfigMap,
    slug: &Slug,
    attempt: u32,
) -> Job {
    let labels = json!({
        MANAGED_BY.0: MANAGED_BY.1,
        SLUG_LABEL: slug.as_str(),
        ATTEMPT_LABEL: attempt.to_string(),
    });
    let owner_ref = owner.controller_owner_ref(&());
    let job = json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": job_name(slug, attempt),
            "namespace": config.namespace,
            "labels": labels,
            "ownerReferences": owner_ref.into_iter().collect::<Vec<_>>(),
        },
        "spec": {
            // The operator owns retries (with backoff and a ledger record);
            // the Job controller must not retry behind its back.
            "backoffLimit": 0,
            "template": {
                "metadata": { "labels": labels },
                "spec": {
                    "serviceAccountName": config.service_account,
                    "restartPolicy": "Never",
                    "containers": [{
                        "name": "migrate",
                        "image": index.image,
                        "command": [
                            "migrate", "run", index.tree,
                            "--only", slug.as_str(),
                            "--tier", "background",
                            "--ledger", config.ledger_spec,
                        ],
                        "env": [
                            { "name": "ONLY", "value": slug.as_str() },
                            { "name": "MIGRATION_IMAGE", "value": index.image },
                            { "name": "MIGRATION_NAMESPACE", "value": config.namespace },
                            { "name": "POD_NAME", "valueFrom": { "fieldRef": { "fieldPath": "metadata.name" } } },
                        ],
                    }],
                },
            },
        },
    });
    // The JSON above is our own and always matches the Job schema.
    serde_json::from_value(job).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(x: &str) -> Slug {
        Slug::parse(x).unwrap()
    }

    #[test]
    fn job_names_fit_the_label_limit_and_stay_unique() {
        let long = s(&"x".repeat(60));
        let other = s(&format!("{}y", "x".repeat(59)));
        assert!(job_name(&long, 99).len() <= 63);
        assert_ne!(job_name(&long, 1), job_name(&other, 1));
        assert_eq!(job_name(&s("short"), 2), "migrate-short-2");
    }
}
