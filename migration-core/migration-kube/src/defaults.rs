//! The names the platform's deployment uses, in one place: the backends,
//! the `migrate` command and the operator default to these, and clap's
//! `default_value` attributes name them (`default_value = defaults::NAMESPACE`).
//!
//! They live here, not in `migration-core`, because every one of them names
//! a Kubernetes object or a Kubernetes-side setting; the core knows no
//! cluster.

/// The namespace of the ledger ConfigMap, the run-lock and leader Leases,
/// the index ConfigMap and the operator's Jobs.
pub const NAMESPACE: &str = "cozy-system";

/// The name of the ledger ConfigMap (and of the object the legacy integer
/// `version` lived in before the ledger).
pub const LEDGER_NAME: &str = "cozystack-version";

/// The `--ledger` spec of the ConfigMap ledger at its default place:
/// `configmap:<NAMESPACE>/<LEDGER_NAME>` (spelled out because a `const`
/// cannot be formatted; a test keeps it in step).
pub const LEDGER_SPEC: &str = "configmap:cozy-system/cozystack-version";

/// The name of the index ConfigMap the background operator reads.
pub const INDEX_NAME: &str = "cozystack-migrations-index";

/// The ServiceAccount the operator's migration Jobs run as.
pub const SERVICE_ACCOUNT: &str = "cozystack-migrations";

/// What a ledger's run-lock Lease is called: the ledger's name followed by
/// this (`cozystack-version-lock`).
pub const LOCK_SUFFIX: &str = "-lock";

/// The field manager every write of ours carries, so that server-side field
/// ownership names the engine (`managedFields[].manager`); the engine names
/// itself so on what it creates too (the output Secret's
/// `app.kubernetes.io/managed-by`, the custom resource's creator mark).
pub const FIELD_MANAGER: &str = "cozystack-migrate";

/// The name of the run-lock Lease of the ledger called `ledger`:
/// `<ledger>-lock`.
pub fn lock_name(ledger: &str) -> String {
    format!("{ledger}{LOCK_SUFFIX}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_ledger_spec_names_the_default_namespace_and_ledger() {
        assert_eq!(LEDGER_SPEC, format!("configmap:{NAMESPACE}/{LEDGER_NAME}"));
    }

    #[test]
    fn a_lock_is_named_after_its_ledger() {
        assert_eq!(lock_name(LEDGER_NAME), "cozystack-version-lock");
    }
}
