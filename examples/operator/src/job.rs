//! The Job one attempt of a background migration runs in.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::batch::v1::{Job, JobSpec};
use k8s_openapi::api::core::v1::{
    Container, EmptyDirVolumeSource, EnvVar, EnvVarSource, LocalObjectReference,
    ObjectFieldSelector, PodSecurityContext, PodSpec, PodTemplateSpec, ResourceRequirements,
    SecurityContext, Toleration, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
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

/// What bounds each Job the operator creates, so that one hung or greedy
/// script cannot hold the queue or the node for ever.
#[derive(Debug, Clone, PartialEq)]
pub struct JobBounds {
    /// The Job's `activeDeadlineSeconds`: past it the Job fails
    /// (`DeadlineExceeded`) and counts as a failed attempt. `None`: no
    /// deadline (not recommended).
    pub active_deadline: Option<Duration>,
    /// The Job's `ttlSecondsAfterFinished`: finished Jobs are deleted after
    /// it. The attempt history the retries rely on is kept in the status
    /// ConfigMap, so deleting a Job does not reset its slug's count.
    /// `None`: finished Jobs stay.
    pub ttl_after_finished: Option<Duration>,
    /// The container's resources.
    pub resources: Option<ResourceRequirements>,
}

impl Default for JobBounds {
    /// One hour per attempt (the hook Job's default), finished Jobs kept a
    /// week (long enough to read their logs after a weekend), and the hook
    /// Job's resources: requests `10m` CPU and `32Mi`, limit `256Mi`.
    fn default() -> Self {
        JobBounds {
            active_deadline: Some(Duration::from_secs(3600)),
            ttl_after_finished: Some(Duration::from_secs(7 * 24 * 3600)),
            resources: Some(default_resources()),
        }
    }
}

/// The default resources of a migration Job's container.
pub fn default_resources() -> ResourceRequirements {
    let q = |s: &str| Quantity(s.to_owned());
    ResourceRequirements {
        requests: Some(BTreeMap::from([
            ("cpu".to_owned(), q("10m")),
            ("memory".to_owned(), q("32Mi")),
        ])),
        limits: Some(BTreeMap::from([("memory".to_owned(), q("256Mi"))])),
        ..ResourceRequirements::default()
    }
}

/// `text` as a JSON object whose keys are all `allowed`, or what is wrong
/// with it: a flag's misspelt key is an error, never a setting left out.
fn json_object(
    text: &str,
    allowed: &[&str],
) -> Result<serde_json::Map<String, serde_json::Value>, String> {
    let value: serde_json::Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
    let serde_json::Value::Object(object) = value else {
        return Err("not a JSON object".into());
    };
    if let Some(key) = object.keys().find(|k| !allowed.contains(&k.as_str())) {
        return Err(format!(
            "unknown key {key:?} (expected one of {})",
            allowed.join(", ")
        ));
    }
    Ok(object)
}

/// Parses `--job-resources`: a JSON object in the shape of a container's
/// `resources` (`{"requests": {"cpu": "10m"}, "limits": {...}}`). Unknown
/// fields are refused, so a misspelt key is an error rather than no limit.
pub fn parse_resources(text: &str) -> Result<ResourceRequirements, JobError> {
    let bad = |reason: String| JobError::BadResources {
        input: text.chars().take(200).collect(),
        reason,
    };
    let object = json_object(text, &["requests", "limits", "claims"]).map_err(bad)?;
    for (key, list) in &object {
        let Some(list) = list.as_object() else {
            continue;
        };
        if let Some((name, v)) = list.iter().find(|(_, v)| !v.is_string()) {
            return Err(bad(format!(
                "{key}.{name}: {v} is not a quantity string (write \"{v}\")"
            )));
        }
    }
    serde_json::from_value(serde_json::Value::Object(object)).map_err(|e| bad(e.to_string()))
}

/// Where and how each Job's pod runs: the settings a platform gives its own
/// pods (a private registry's pull secret, a node pool, a restricted
/// security context), which the Jobs need as much as the hook Job does.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct JobPod {
    /// `imagePullSecrets` of the pod.
    pub image_pull_secrets: Vec<LocalObjectReference>,
    /// The container's `imagePullPolicy` (`None`: the API server's default).
    pub image_pull_policy: Option<String>,
    /// `nodeSelector` of the pod.
    pub node_selector: BTreeMap<String, String>,
    /// `tolerations` of the pod.
    pub tolerations: Vec<Toleration>,
    /// The pod's `securityContext`.
    pub security_context: Option<PodSecurityContext>,
    /// The container's `securityContext`.
    pub container_security_context: Option<SecurityContext>,
    /// Annotations of the pod (not of the Job).
    pub annotations: BTreeMap<String, String>,
}

/// The keys `--job-pod` takes, in the spelling of a pod spec.
const JOB_POD_KEYS: [&str; 7] = [
    "imagePullSecrets",
    "imagePullPolicy",
    "nodeSelector",
    "tolerations",
    "securityContext",
    "containerSecurityContext",
    "annotations",
];

/// Parses `--job-pod`: a JSON object with any of `imagePullSecrets`,
/// `imagePullPolicy`, `nodeSelector`, `tolerations`, `securityContext`,
/// `containerSecurityContext` and `annotations`, each in
/// the shape the pod spec gives it (`containerSecurityContext` is the
/// container's `securityContext`). An unknown key is refused, so a misspelt
/// one is an error rather than a Job scheduled without it.
pub fn parse_job_pod(text: &str) -> Result<JobPod, JobError> {
    let bad = |reason: String| JobError::BadPod {
        input: text.chars().take(200).collect(),
        reason,
    };
    let object = &json_object(text, &JOB_POD_KEYS).map_err(bad)?;
    fn field<T: serde::de::DeserializeOwned + Default>(
        object: &serde_json::Map<String, serde_json::Value>,
        key: &str,
    ) -> Result<T, String> {
        match object.get(key) {
            None | Some(serde_json::Value::Null) => Ok(T::default()),
            Some(v) => serde_json::from_value(v.clone()).map_err(|e| format!("{key}: {e}")),
        }
    }
    Ok(JobPod {
        image_pull_secrets: field(object, "imagePullSecrets").map_err(bad)?,
        image_pull_policy: field(object, "imagePullPolicy").map_err(bad)?,
        node_selector: field(object, "nodeSelector").map_err(bad)?,
        tolerations: field(object, "tolerations").map_err(bad)?,
        security_context: field(object, "securityContext").map_err(bad)?,
        container_security_context: field(object, "containerSecurityContext").map_err(bad)?,
        annotations: field(object, "annotations").map_err(bad)?,
    })
}

/// Operator settings.
#[derive(Debug, Clone)]
pub struct OperatorConfig {
    /// Namespace of the index, the Jobs and the leader Lease.
    pub namespace: String,
    /// Name of the index ConfigMap.
    pub index_name: String,
    /// Name of the status ConfigMap the operator writes (its condition, and
    /// the history of finished attempts the retries count).
    pub status_name: String,
    /// The `--ledger` spec passed to the Jobs' runner.
    pub ledger_spec: String,
    /// The ledger object to watch, so that a change to it (a repaired entry,
    /// an `ONLY` re-run) wakes the operator at once. `None`: a ledger that is
    /// no Kubernetes object; only the timers re-read it.
    pub ledger_object: Option<LedgerObject>,
    /// ServiceAccount the Jobs run as.
    pub service_account: String,
    /// Retry policy for failed Jobs.
    pub retries: Retries,
    /// What bounds each Job.
    pub bounds: JobBounds,
    /// Where and how each Job's pod runs.
    pub pod: JobPod,
    /// How often to look again while a Job runs (watches usually wake us sooner).
    pub poll: Duration,
}

/// The Kubernetes object a ledger lives in.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum LedgerObject {
    /// A ConfigMap (`configmap:NAMESPACE/NAME`).
    ConfigMap {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
    },
    /// A cluster-scoped `MigrationLedger` (`crd:NAME`).
    Crd {
        /// Its name.
        name: String,
    },
}

/// The default name of the status ConfigMap.
pub const STATUS_NAME: &str = "cozystack-migrations-status";

impl OperatorConfig {
    /// The operator in `namespace`, with the [`defaults`]: the index
    /// `cozystack-migrations-index`, ServiceAccount `cozystack-migrations`,
    /// the ConfigMap ledger `cozystack-version` in the same namespace, the
    /// status ConfigMap [`STATUS_NAME`], the default [`JobBounds`].
    pub fn new(namespace: &str) -> Self {
        OperatorConfig {
            namespace: namespace.to_owned(),
            index_name: defaults::INDEX_NAME.into(),
            status_name: STATUS_NAME.into(),
            ledger_spec: format!("configmap:{namespace}/{}", defaults::LEDGER_NAME),
            ledger_object: Some(LedgerObject::ConfigMap {
                namespace: namespace.to_owned(),
                name: defaults::LEDGER_NAME.into(),
            }),
            service_account: defaults::SERVICE_ACCOUNT.into(),
            retries: Retries::default(),
            bounds: JobBounds::default(),
            pod: JobPod::default(),
            poll: Duration::from_secs(60),
        }
    }
}

/// Why the Job settings cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum JobError {
    /// `--job-resources` is not a container's `resources`.
    #[error("--job-resources {input:?}: {reason}")]
    BadResources {
        /// The value given (its first 200 characters).
        input: String,
        /// What is wrong.
        reason: String,
    },
    /// `--job-pod` is not a set of pod settings.
    #[error("--job-pod {input:?}: {reason}")]
    BadPod {
        /// The value given (its first 200 characters).
        input: String,
        /// What is wrong.
        reason: String,
    },
}

/// `None` for an empty list, so an unset setting stays unset in the Job.
fn some_vec<T: Clone>(v: &[T]) -> Option<Vec<T>> {
    (!v.is_empty()).then(|| v.to_vec())
}

/// Builds the Job for attempt `attempt` (counting from 1) of `slug`.
///
/// The Job has no owner: an owner whose life is shorter than the Job's
/// (the index, which a chart may delete or rename) would have the garbage
/// collector delete a running migration. The operator finds its Jobs by
/// their labels.
pub fn job_for(config: &OperatorConfig, index: &Index, slug: &Slug, attempt: u32) -> Job {
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
    let seconds = |d: Duration| i64::try_from(d.as_secs()).unwrap_or(i64::MAX);
    let bounds = &config.bounds;
    let pod = &config.pod;
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
        resources: bounds.resources.clone(),
        // The kubelet copies the end of a failed container's log into its
        // terminated state, where the operator reads it for the give-up
        // record without the right to read logs.
        termination_message_policy: Some("FallbackToLogsOnError".to_owned()),
        image_pull_policy: pod.image_pull_policy.clone(),
        security_context: pod.container_security_context.clone(),
        // The runner's scratch files (the tripwire's shims, kubectl's cache)
        // need a writable /tmp under a read-only root file system.
        volume_mounts: Some(vec![VolumeMount {
            name: "tmp".to_owned(),
            mount_path: "/tmp".to_owned(),
            ..VolumeMount::default()
        }]),
        ..Container::default()
    };
    let some_map = |m: &BTreeMap<String, String>| (!m.is_empty()).then(|| m.clone());

    Job {
        metadata: ObjectMeta {
            name: Some(job_name(slug, attempt)),
            namespace: Some(config.namespace.clone()),
            labels: Some(labels.clone()),
            ..ObjectMeta::default()
        },
        spec: Some(JobSpec {
            // The operator owns retries (with backoff and a ledger record);
            // the Job controller must not retry behind its back.
            backoff_limit: Some(0),
            active_deadline_seconds: bounds.active_deadline.map(seconds),
            ttl_seconds_after_finished: bounds
                .ttl_after_finished
                .map(|d| i32::try_from(d.as_secs()).unwrap_or(i32::MAX)),
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels),
                    annotations: some_map(&pod.annotations),
                    ..ObjectMeta::default()
                }),
                spec: Some(PodSpec {
                    service_account_name: Some(config.service_account.clone()),
                    restart_policy: Some("Never".to_owned()),
                    containers: vec![container],
                    image_pull_secrets: some_vec(&pod.image_pull_secrets),
                    node_selector: some_map(&pod.node_selector),
                    tolerations: some_vec(&pod.tolerations),
                    security_context: pod.security_context.clone(),
                    volumes: Some(vec![Volume {
                        name: "tmp".to_owned(),
                        empty_dir: Some(EmptyDirVolumeSource::default()),
                        ..Volume::default()
                    }]),
                    ..PodSpec::default()
                }),
            },
            ..JobSpec::default()
        }),
        ..Job::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use migration_core::testing::fixtures::s;

    fn index() -> Index {
        Index {
            image: "img@sha256:1".into(),
            tree: "/m".into(),
            slugs: vec![s("a")],
            revoked: vec![],
            batches: Default::default(),
        }
    }

    #[test]
    fn the_job_runs_one_slug_once_as_the_configured_account_owned_by_nothing() {
        let config = OperatorConfig::new("cozy-system");
        let job = job_for(&config, &index(), &s("a"), 2);
        assert_eq!(job.metadata.name.as_deref(), Some("migrate-a-2"));
        assert_eq!(job.metadata.owner_references, None);
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
    fn every_job_is_bounded_by_default_in_time_lifetime_and_resources() {
        let job = job_for(&OperatorConfig::new("ns"), &index(), &s("a"), 1);
        let spec = job.spec.unwrap();
        assert_eq!(spec.active_deadline_seconds, Some(3600));
        assert_eq!(spec.ttl_seconds_after_finished, Some(604_800));
        let container = &spec.template.spec.unwrap().containers[0];
        assert_eq!(container.resources, Some(default_resources()));
        assert_eq!(
            container.termination_message_policy.as_deref(),
            Some("FallbackToLogsOnError")
        );
    }

    #[test]
    fn job_resources_are_parsed_strictly() {
        let r = parse_resources(r#"{"requests": {"cpu": "50m"}, "limits": {"memory": "1Gi"}}"#)
            .unwrap();
        assert_eq!(r.requests.unwrap()["cpu"], Quantity("50m".into()));
        for (bad, why) in [
            (r#"{"limit": {"memory": "1Gi"}}"#, "unknown key \"limit\""),
            (
                r#"{"limits": {"memory": 1}}"#,
                "limits.memory: 1 is not a quantity string",
            ),
            ("[]", "not a JSON object"),
            ("{", "EOF"),
        ] {
            let err = parse_resources(bad).unwrap_err().to_string();
            assert!(
                err.contains(why) && err.contains("--job-resources"),
                "{bad}: {err}"
            );
        }
    }

    #[test]
    fn job_names_fit_the_label_limit_and_stay_unique() {
        let long = s(&"x".repeat(60));
        let other = s(&format!("{}y", "x".repeat(59)));
        assert!(job_name(&long, 99).len() <= 63);
        assert_ne!(job_name(&long, 1), job_name(&other, 1));
        assert_eq!(job_name(&s("short"), 2), "migrate-short-2");
    }

    #[test]
    fn job_pod_settings_that_are_not_pod_settings_are_refused_naming_what_is_wrong() {
        for (text, says) in [
            ("[]", "not a JSON object"),
            ("{", "EOF"),
            (r#"{"nodeSelectors":{}}"#, "unknown key \"nodeSelectors\""),
            (r#"{"tolerations":{"key":"x"}}"#, "tolerations:"),
            (r#"{"imagePullSecrets":["regcred"]}"#, "imagePullSecrets:"),
        ] {
            let err = parse_job_pod(text).unwrap_err().to_string();
            assert!(
                err.starts_with("--job-pod ") && err.contains(says),
                "{text}: {err}"
            );
        }
        assert_eq!(parse_job_pod("{}").unwrap(), JobPod::default());
    }
}
