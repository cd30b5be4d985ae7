//! The ConfigMap as a manifest: a seeded ledger, so that a Helm chart can
//! create the ledger already seeded at install time (`migrate seed-fresh
//! --render`), and a ConfigMap of any string data (the background index).
//! Beside [`crate::ConfigMapLedger`], as the CRD's manifest is beside its
//! ledger.

use std::fmt::Write as _;

use migration_core::{LedgerEntry, Slug};

/// A YAML string literal: single-quoted, with `'` doubled. Every ledger value
/// (compact JSON) is safe in this form, whatever it contains.
fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

/// The common head of a ConfigMap manifest, up to and including metadata's
/// name and namespace.
fn head(namespace: &str, name: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "apiVersion: v1");
    let _ = writeln!(out, "kind: ConfigMap");
    let _ = writeln!(out, "metadata:");
    let _ = writeln!(out, "  name: {}", quote(name));
    let _ = writeln!(out, "  namespace: {}", quote(namespace));
    out
}

/// A ConfigMap manifest holding `entries` under `m.<slug>` keys, with the
/// shared records they name under `c.<id>` (CONTRACT.md §5.2), kept by Helm
/// on uninstall.
pub fn seeded_manifest(namespace: &str, name: &str, entries: &[(Slug, LedgerEntry)]) -> String {
    let mut out = head(namespace, name);
    let _ = writeln!(out, "  annotations:");
    let _ = writeln!(out, "    helm.sh/resource-policy: keep");
    if entries.is_empty() {
        let _ = writeln!(out, "data: {{}}");
    } else {
        let _ = writeln!(out, "data:");
        let data = migration_core::entry::flat_data(entries.iter().map(|(s, e)| (s, e)));
        for (key, value) in &data {
            let _ = writeln!(out, "  {}: {}", quote(key), quote(value));
        }
    }
    out
}

/// A ConfigMap manifest with arbitrary string data (multi-line values as
/// literal blocks), for the operator's index.
pub fn data_manifest(
    namespace: &str,
    name: &str,
    data: &std::collections::BTreeMap<String, String>,
) -> String {
    let mut out = head(namespace, name);
    let _ = writeln!(out, "data:");
    for (key, value) in data {
        if value.contains('\n') {
            let _ = writeln!(out, "  {}: |", quote(key));
            for line in value.lines() {
                let _ = writeln!(out, "    {line}");
            }
        } else {
            let _ = writeln!(out, "  {}: {}", quote(key), quote(value));
        }
    }
    out
}

/// The [`seeded_manifest`] ConfigMap as a JSON object.
pub fn seeded_object(
    namespace: &str,
    name: &str,
    entries: &[(Slug, LedgerEntry)],
) -> serde_json::Value {
    let data: serde_json::Map<String, serde_json::Value> =
        migration_core::entry::flat_data(entries.iter().map(|(s, e)| (s, e)))
            .into_iter()
            .map(|(k, v)| (k, serde_json::Value::String(v)))
            .collect();
    serde_json::json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "annotations": {"helm.sh/resource-policy": "keep"},
        },
        "data": data,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use migration_core::{EntryState, Timestamp};

    #[test]
    fn yaml_quotes_values_so_any_json_survives() {
        let mut entry = LedgerEntry::new(EntryState::SkippedFreshInstall, Timestamp::from_unix(0));
        entry.image = Some("it's: {odd} #image".into());
        let yaml = seeded_manifest(
            "cozy-system",
            "cozystack-version",
            &[(Slug::parse("a").unwrap(), entry.clone())],
        );
        let data: Vec<(String, String)> = yaml
            .lines()
            .filter(|l| l.starts_with("  '"))
            .map(|line| {
                let (key, value) = line.trim_start().split_once(": ").unwrap();
                let unquote = |s: &str| s.trim_matches('\'').replace("''", "'");
                (unquote(key), unquote(value))
            })
            .collect();
        assert!(data.iter().any(|(k, _)| k == "c.1"), "{yaml}");
        let snapshot = migration_core::LedgerSnapshot::from_raw_data(
            data.iter().map(|(k, v)| (k.as_str(), v.as_str())),
            None,
        );
        assert_eq!(snapshot.entry(&Slug::parse("a").unwrap()), Some(&entry));
    }
}
