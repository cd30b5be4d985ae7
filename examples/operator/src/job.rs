//! The Job one attempt of a background migration runs in.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::batch::v1::{Job, JobSpec};
use k8s_openapi::api::core::v1::{
    ConfigMap, Container, EnvVar, EnvVarSource, ObjectFieldSelector, PodSpec, PodTemplateSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use migration_core::{Sha256Digest, Slug};
use migration_kube::defaults;

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

/// Why the Job for an attempt cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum JobError {
    /// The index ConfigMap has no name or uid, so the Job could not name it
    /// as its controlling owner: the Job would neither wake the reconciler
    /// nor be collected with the index.
    #[error("index ConfigMap {name:?} has no uid; a Job cannot name it as its owner")]
    OwnerWithoutUid {
        /// The ConfigMap's name, empty if it has none.
        name: String,
    },
}

/// Builds the Job for attempt `attempt` (counting from 1) of `slug`, owned
/// by the index ConfigMap `owner`.
pub fn job_for(
    config: &OperatorConfig,
    index: &Index,
    owner: &ConfigMap,
    slug: &Slug,
    attempt: u32,
) -> Result<Job, JobError> {
    let owner_ref = owner
        .controller_owner_ref(&())
        .ok_or_else(|| JobError::OwnerWithoutUid {
            name: owner.metadata.name.clone().unwrap_or_default(),
        })?;
    let labels = BTreeMap::from([
        (MANAGED_BY.0.to_owned(), MANAGED_BY.1.to_owned()),
        (SLUG_LABEL.to_owned(), slug.as_str().to_owned()),
        (ATTEMPT_LABEL.to_owned(), attempt.to_string()),
    ]);
    let env = |name: &str, value: &str| EnvVar {
        name: name.to_owned(),
        value: Some(value.to_owned()),
        ..EnvVar::default()
    };
    let container = Container {
        name: "migrate".to_owned(),
        image: Some(index.image.clone()),
        command: Some(
            [
                "migrate",
                "run",
                &index.tree,
                "--only",
                slug.as_str(),
                "--tier",
                "background",
                "--ledger",
                &config.ledger_spec,
                // The ledger exists before any background Job (the chart or
                // the first hook run created it): an absent one was deleted,
                // and must not be re-created as a fresh install that skips
                // everything pending (CONTRACT.md §6.1).
                "--require-existing-ledger",
            ]
            .map(str::to_owned)
            .to_vec(),
        ),
        env: Some(vec![
            env("ONLY", slug.as_str()),
            env("MIGRATION_IMAGE", &index.image),
            env("MIGRATION_NAMESPACE", &config.namespace),
            EnvVar {
                name: "POD_NAME".to_owned(),
                value_from: Some(EnvVarSource {
                    field_ref: Some(ObjectFieldSelector {
                        field_path: "metadata.name".to_owned(),
                        ..ObjectFieldSelector::default()
                    }),
                    ..EnvVarSource::default()
                }),
                ..EnvVar::default()
            },
        ]),
        ..Container::default()
    };
    Ok(Job {
        metadata: ObjectMeta {
            name: Some(job_name(slug, attempt)),
            namespace: Some(config.namespace.clone()),
            labels: Some(labels.clone()),
            owner_references: Some(vec![owner_ref]),
            ..ObjectMeta::default()
        },
        spec: Some(JobSpec {
            // The operator owns retries (with backoff and a ledger record);
            // the Job controller must not retry behind its back.
            backoff_limit: Some(0),
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels),
                    ..ObjectMeta::default()
                }),
                spec: Some(PodSpec {
                    service_account_name: Some(config.service_account.clone()),
                    restart_policy: Some("Never".to_owned()),
                    containers: vec![container],
                    ..PodSpec::default()
                }),
            },
            ..JobSpec::default()
        }),
        ..Job::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use migration_core::testing::fixtures::s;

    fn index_configmap_with_uid() -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                name: Some("cozystack-migrations-index".into()),
                namespace: Some("cozy-system".into()),
                uid: Some("0f0e-uid".into()),
                ..ObjectMeta::default()
            },
            ..ConfigMap::default()
        }
    }

    fn index() -> Index {
        Index {
            image: "img@sha256:1".into(),
            tree: "/m".into(),
            slugs: vec![s("a")],
            revoked: vec![],
        }
    }

    #[test]
    fn the_job_runs_one_slug_once_as_the_configured_account_owned_by_the_index() {
        let config = OperatorConfig::new("cozy-system");
        let job = job_for(&config, &index(), &index_configmap_with_uid(), &s("a"), 2).unwrap();
        assert_eq!(job.metadata.name.as_deref(), Some("migrate-a-2"));
        let owner = &job.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.uid.as_str(), owner.controller),
            ("ConfigMap", "0f0e-uid", Some(true))
        );
        let spec = job.spec.unwrap();
        assert_eq!(spec.backoff_limit, Some(0));
        let labels = spec.template.metadata.unwrap().labels.unwrap();
        assert_eq!(labels[ATTEMPT_LABEL], "2");
        let pod = spec.template.spec.unwrap();
        assert_eq!(
            pod.service_account_name.as_deref(),
            Some(defaults::SERVICE_ACCOUNT)
        );
        let env = pod.containers[0].env.as_ref().unwrap();
        let pod_name = env.iter().find(|e| e.name == "POD_NAME").unwrap();
        assert_eq!(
            pod_name
                .value_from
                .as_ref()
                .and_then(|v| v.field_ref.as_ref())
                .map(|f| f.field_path.as_str()),
            Some("metadata.name")
        );
    }

    #[test]
    fn an_index_without_a_uid_is_refused_rather_than_owning_nothing() {
        let mut owner = index_configmap_with_uid();
        owner.metadata.uid = None;
        let config = OperatorConfig::new("cozy-system");
        assert_eq!(
            job_for(&config, &index(), &owner, &s("a"), 1),
            Err(JobError::OwnerWithoutUid {
                name: "cozystack-migrations-index".into()
            })
        );
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
