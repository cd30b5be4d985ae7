//! The committed CRD manifest is the one the Rust type generates, and it is
//! a CRD a real API server accepts (as far as can be checked without one).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

use ledger_crd::{GROUP, KIND, PLURAL, VERSION, crd, crd_manifest};
use serde_json::Value;

fn committed_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("migrationledger.crd.yaml")
}

#[test]
fn the_committed_crd_is_the_generated_one() {
    let generated = crd_manifest();
    let path = committed_path();
    if std::env::var_os("UPDATE_CRD").is_some() {
        std::fs::write(&path, &generated).unwrap();
        eprintln!("wrote {}", path.display());
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "{} differs from the CRD the Rust type generates.\n\
         Regenerate it with:\n\n    UPDATE_CRD=1 cargo test -p ledger-crd --test crd_manifest\n\n\
         and commit the result (review the diff: it is the cluster's API).",
        path.display()
    );
}

fn generated() -> Value {
    serde_json::to_value(crd()).unwrap()
}

#[test]
fn the_yaml_parses_back_to_the_generated_crd() {
    let parsed: Value = serde_saphyr::from_str(&crd_manifest()).unwrap();
    assert_eq!(parsed, generated());
}

#[test]
fn names_scope_and_subresources() {
    let crd = generated();
    assert_eq!(crd["metadata"]["name"], format!("{PLURAL}.{GROUP}"));
    assert_eq!(crd["spec"]["group"], GROUP);
    assert_eq!(crd["spec"]["scope"], "Cluster");
    assert_eq!(crd["spec"]["names"]["kind"], KIND);
    assert_eq!(crd["spec"]["names"]["plural"], PLURAL);
    let versions = crd["spec"]["versions"].as_array().unwrap();
    assert_eq!(versions.len(), 1);
    assert_eq!(versions[0]["name"], VERSION);
    assert_eq!(versions[0]["served"], true);
    assert_eq!(versions[0]["storage"], true);
    assert_eq!(
        versions[0]["subresources"]["status"],
        serde_json::json!({}),
        "entries live in the status subresource"
    );
}

#[test]
fn printer_columns_show_counts_newest_and_ready() {
    let crd = generated();
    let columns = crd["spec"]["versions"][0]["additionalPrinterColumns"]
        .as_array()
        .unwrap();
    let find = |name: &str| {
        columns
            .iter()
            .find(|c| c["name"] == name)
            .unwrap_or_else(|| panic!("no printer column {name}"))
    };
    assert_eq!(find("OK")["jsonPath"], ".status.summary.ok");
    assert_eq!(find("Failed")["jsonPath"], ".status.summary.failed");
    assert_eq!(find("Other")["jsonPath"], ".status.summary.other");
    assert_eq!(find("Newest")["jsonPath"], ".status.summary.newest");
    assert_eq!(find("Newest")["type"], "date");
    assert_eq!(
        find("Ready")["jsonPath"],
        ".status.conditions[?(@.type==\"Ready\")].status"
    );
}

/// Walks a schema and collects what a real API server would refuse of a
/// structural schema (the rules in apiextensions' ValidateStructural and the
/// CRD validation), so a broken schema fails here rather than on install.
fn structural_problems(node: &Value, path: &str, problems: &mut Vec<String>) {
    let Some(map) = node.as_object() else {
        problems.push(format!("{path}: not an object"));
        return;
    };
    let preserve = map.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true));
    let int_or_string = map.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true));
    if map.get("type").is_none() && !preserve && !int_or_string {
        problems.push(format!("{path}: no type"));
    }
    if map.contains_key("properties") && map.contains_key("additionalProperties") {
        problems.push(format!(
            "{path}: properties and additionalProperties together"
        ));
    }
    for forbidden in ["$ref", "$schema", "definitions", "uniqueItems", "default"] {
        if map.contains_key(forbidden) {
            problems.push(format!("{path}: {forbidden} is not allowed"));
        }
    }
    for key in ["anyOf", "oneOf", "allOf"] {
        if map.contains_key(key) && !int_or_string {
            problems.push(format!("{path}: {key} outside int-or-string"));
        }
    }
    if let Some(Value::Object(props)) = map.get("properties") {
        for (name, sub) in props {
            structural_problems(sub, &format!("{path}.{name}"), problems);
        }
    }
    if let Some(sub @ Value::Object(_)) = map.get("additionalProperties") {
        structural_problems(sub, &format!("{path}.*"), problems);
    }
    if let Some(items) = map.get("items") {
        structural_problems(items, &format!("{path}[]"), problems);
    }
}

#[test]
fn the_schema_is_structural() {
    let crd = generated();
    let schema = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"];
    let mut problems = Vec::new();
    structural_problems(schema, "", &mut problems);
    assert!(problems.is_empty(), "{problems:#?}\n{schema:#}");
}

#[test]
fn entries_are_typed_objects_that_keep_unknown_fields() {
    let crd = generated();
    let status = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"];
    let entry = &status["properties"]["entries"]["additionalProperties"];
    let fields: Vec<&str> = entry["properties"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    let mut expected = vec![
        "at",
        "attempts",
        "batch",
        "image",
        "lib_sha256",
        "message",
        "reason",
        "sha256",
        "state",
        "s",
        "t",
        "h",
        "c",
        "n",
        "r",
        "m",
    ];
    expected.sort_unstable();
    let mut fields = fields;
    fields.sort_unstable();
    assert_eq!(
        fields, expected,
        "exactly the fields of CONTRACT.md §5.2, both forms"
    );
    assert_eq!(entry["properties"]["n"]["type"], "integer");
    assert_eq!(entry["properties"]["t"]["format"], "date-time");
    let context = &status["properties"]["contexts"]["additionalProperties"];
    assert_eq!(context["x-kubernetes-preserve-unknown-fields"], true);
    assert!(context["properties"]["lib_sha256"].is_object());
    assert_eq!(entry["properties"]["attempts"]["type"], "integer");
    assert_eq!(entry["properties"]["at"]["format"], "date-time");
    assert_eq!(
        entry["x-kubernetes-preserve-unknown-fields"], true,
        "a newer engine's fields must not be pruned"
    );
    assert!(
        entry["properties"]["state"].get("enum").is_none(),
        "an enum would refuse a newer engine's state"
    );
    let conditions = &status["properties"]["conditions"];
    assert_eq!(conditions["x-kubernetes-list-type"], "map");
    assert_eq!(conditions["x-kubernetes-list-map-keys"][0], "type");
    let version = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
        ["version"];
    assert_eq!(version["x-kubernetes-int-or-string"], true);
}
