//! The rights the operator needs, checked at start: each one the API server
//! would refuse is said (a warning naming the verb and the resource, and
//! the condition `MissingRights`) before it is first needed, rather than
//! found by a request that fails later, perhaps only at debug level.

use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};
use kube::api::PostParams;
use kube::{Api, Client};

use crate::{LedgerObject, OperatorConfig};

/// One right: a verb on a resource, perhaps on one object by name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Right {
    /// The verb (`get`, `create`, ...).
    pub verb: &'static str,
    /// The API group (`""` for the core group).
    pub group: &'static str,
    /// The resource (plural), with `/subresource` when it is one.
    pub resource: &'static str,
    /// The object's name, when the right is needed on one object only.
    pub name: Option<String>,
    /// The namespace (`None`: cluster-scoped).
    pub namespace: Option<String>,
}

impl std::fmt::Display for Right {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.verb, self.resource)?;
        if !self.group.is_empty() {
            write!(f, ".{}", self.group)?;
        }
        if let Some(name) = &self.name {
            write!(f, " {name}")?;
        }
        if let Some(ns) = &self.namespace {
            write!(f, " in namespace {ns}")?;
        }
        Ok(())
    }
}

/// Every right the operator uses with `config` and the leader Lease
/// `lease`, as `deploy/rbac.yaml` and the chart grant them.
pub fn needed(config: &OperatorConfig, lease: &str) -> Vec<Right> {
    let ns = Some(config.namespace.clone());
    let right = |verb, group, resource, name: Option<&str>, namespace: &Option<String>| Right {
        verb,
        group,
        resource,
        name: name.map(str::to_owned),
        namespace: namespace.clone(),
    };
    let mut rights = Vec::new();
    let mut configmaps = vec![config.index_name.as_str(), config.status_name.as_str()];
    let mut ledger_ns = None;
    if let Some(LedgerObject::ConfigMap { namespace, name }) = &config.ledger_object {
        if *namespace == config.namespace {
            configmaps.push(name);
        } else {
            ledger_ns = Some((namespace.clone(), name.clone()));
        }
    }
    for name in configmaps {
        for verb in ["get", "list", "watch"] {
            rights.push(right(verb, "", "configmaps", Some(name), &ns));
        }
    }
    rights.push(right(
        "patch",
        "",
        "configmaps",
        Some(&config.status_name),
        &ns,
    ));
    if let Some((namespace, name)) = &ledger_ns {
        for verb in ["get", "list", "watch"] {
            rights.push(right(
                verb,
                "",
                "configmaps",
                Some(name),
                &Some(namespace.clone()),
            ));
        }
    }
    if let Some(LedgerObject::ConfigMap { namespace, name }) = &config.ledger_object {
        // The give-up record.
        rights.push(right(
            "patch",
            "",
            "configmaps",
            Some(name),
            &Some(namespace.clone()),
        ));
    }
    rights.push(right("create", "", "configmaps", None, &ns));
    for verb in ["get", "list", "watch", "create"] {
        rights.push(right(verb, "batch", "jobs", None, &ns));
    }
    rights.push(right("list", "", "pods", None, &ns));
    rights.push(right("create", "events.k8s.io", "events", None, &ns));
    for verb in ["get", "patch", "delete"] {
        rights.push(right(
            verb,
            "coordination.k8s.io",
            "leases",
            Some(lease),
            &ns,
        ));
    }
    rights.push(right("create", "coordination.k8s.io", "leases", None, &ns));
    if let Some(LedgerObject::Crd { name }) = &config.ledger_object {
        let group = ledger_crd::GROUP;
        for verb in ["get", "list", "watch"] {
            rights.push(right(verb, group, ledger_crd::PLURAL, Some(name), &None));
        }
        // Its status subresource: `PLURAL/status`, spelled out as a `'static` name.
        for verb in ["get", "patch"] {
            rights.push(right(
                verb,
                group,
                "migrationledgers/status",
                Some(name),
                &None,
            ));
        }
    }
    rights
}

/// The rights of `rights` the API server says this client lacks (each
/// asked with a SelfSubjectAccessReview, which every authenticated user
/// may create). A review that cannot be made is an error: nothing is
/// known then.
pub async fn missing(client: &Client, rights: &[Right]) -> Result<Vec<Right>, kube::Error> {
    let api: Api<SelfSubjectAccessReview> = Api::all(client.clone());
    let mut missing = Vec::new();
    for r in rights {
        let (resource, subresource) = match r.resource.split_once('/') {
            Some((res, sub)) => (res, Some(sub.to_owned())),
            None => (r.resource, None),
        };
        let review = SelfSubjectAccessReview {
            spec: SelfSubjectAccessReviewSpec {
                resource_attributes: Some(ResourceAttributes {
                    verb: Some(r.verb.to_owned()),
                    group: Some(r.group.to_owned()),
                    resource: Some(resource.to_owned()),
                    subresource,
                    name: r.name.clone(),
                    namespace: r.namespace.clone(),
                    ..ResourceAttributes::default()
                }),
                ..SelfSubjectAccessReviewSpec::default()
            },
            ..SelfSubjectAccessReview::default()
        };
        let answer = api.create(&PostParams::default(), &review).await?;
        if !answer.status.is_some_and(|s| s.allowed) {
            missing.push(r.clone());
        }
    }
    Ok(missing)
}
