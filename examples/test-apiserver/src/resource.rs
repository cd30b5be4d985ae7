//! The resource types the server knows, built-in and registered at runtime.

/// One served resource type (one group/version/plural).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ResourceDef {
    /// `""` for the core group.
    pub(crate) group: String,
    pub(crate) version: String,
    pub(crate) plural: String,
    pub(crate) kind: String,
    pub(crate) namespaced: bool,
    pub(crate) status_subresource: bool,
    /// Custom resources differ from built-ins in a few registry strategies (see README).
    pub(crate) custom: bool,
    /// Whether the registry maintains `metadata.generation` for this type.
    pub(crate) generation: bool,
    /// Whether DELETE answers with the object instead of a `Status` (per-type in the real registry).
    pub(crate) return_deleted_object: bool,
}

impl ResourceDef {
    /// The type `group/version` `plural` (`kind`) as a built-in registry serves it;
    /// [`ResourceDef::custom`] makes it a custom resource.
    pub(crate) fn builtin(
        group: &str,
        version: &str,
        plural: &str,
        kind: &str,
        namespaced: bool,
    ) -> Self {
        Self {
            group: group.to_string(),
            version: version.to_string(),
            plural: plural.to_string(),
            kind: kind.to_string(),
            namespaced,
            status_subresource: false,
            custom: false,
            generation: false,
            return_deleted_object: false,
        }
    }

    /// This type served as a custom resource, with or without a `/status` subresource.
    pub(crate) fn custom(self, status_subresource: bool) -> Self {
        Self {
            status_subresource,
            custom: true,
            generation: true,
            ..self
        }
    }

    /// `plural` for core, `plural.group` otherwise: the storage key and the name used in messages.
    ///
    /// Versions of one group/plural share it, so they share storage as CRD versions do.
    pub(crate) fn qualified(&self) -> String {
        if self.group.is_empty() {
            self.plural.clone()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }

    /// The etcd key a real API server stores the object under (error messages quote it):
    /// `/registry/<plural>/...` for built-ins, `/registry/<group>/<plural>/...` for custom
    /// resources, then the namespace (if namespaced) and the name.
    pub(crate) fn storage_key(&self, namespace: &str, name: &str) -> String {
        let mut key = String::from("/registry/");
        if self.custom {
            key.push_str(&self.group);
            key.push('/');
        }
        key.push_str(&self.plural);
        if self.namespaced {
            key.push('/');
            key.push_str(namespace);
        }
        key.push('/');
        key.push_str(name);
        key
    }

    /// `Kind` or `Kind.group`, as `schema.GroupKind` prints (validation errors name it).
    pub(crate) fn qualified_kind(&self) -> String {
        if self.group.is_empty() {
            self.kind.clone()
        } else {
            format!("{}.{}", self.kind, self.group)
        }
    }

    pub(crate) fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// Updates without `metadata.resourceVersion` are allowed for built-ins but not for custom resources.
    pub(crate) fn allow_unconditional_update(&self) -> bool {
        !self.custom
    }
}

/// The built-in types this double serves.
pub(crate) fn builtins() -> Vec<ResourceDef> {
    let mut jobs = ResourceDef::builtin("batch", "v1", "jobs", "Job", true);
    jobs.status_subresource = true;
    jobs.generation = true;
    let mut serviceaccounts =
        ResourceDef::builtin("", "v1", "serviceaccounts", "ServiceAccount", true);
    serviceaccounts.return_deleted_object = true;
    vec![
        ResourceDef::builtin("", "v1", "configmaps", "ConfigMap", true),
        ResourceDef::builtin("", "v1", "events", "Event", true),
        ResourceDef::builtin("", "v1", "namespaces", "Namespace", false),
        // The Kubernetes ledgers keep their failures' output tails in a Secret (#35).
        ResourceDef::builtin("", "v1", "secrets", "Secret", true),
        serviceaccounts,
        ResourceDef::builtin("coordination.k8s.io", "v1", "leases", "Lease", true),
        jobs,
        ResourceDef::builtin("events.k8s.io", "v1", "events", "Event", true),
    ]
}
