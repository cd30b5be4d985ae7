//! `migrate crd`: the MigrationLedger CRD manifest, for `kubectl apply -f -`.

use super::Out;

/// Prints the CRD: YAML in text mode, the object in JSON mode.
pub fn crd(out: &Out) {
    let yaml = ledger_crd::crd_manifest();
    let json = serde_json::to_value(ledger_crd::crd()).unwrap_or_default();
    out.emit(&json, |_| yaml.clone());
}
