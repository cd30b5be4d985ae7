//! Reading and writing `metadata` fields of raw JSON objects.

use serde_json::{Value, json};

pub(super) fn finalizers(obj: &Value) -> Vec<String> {
    obj.pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .map(|f| {
            f.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

pub(crate) fn name_of(obj: &Value) -> &str {
    meta_str(obj, "name")
}

pub(crate) fn namespace_of(obj: &Value) -> &str {
    meta_str(obj, "namespace")
}

pub(super) fn meta_str<'a>(obj: &'a Value, field: &str) -> &'a str {
    obj.get("metadata")
        .and_then(|m| m.get(field))
        .and_then(Value::as_str)
        .unwrap_or("")
}

pub(super) fn set_meta(obj: &mut Value, field: &str, value: Value) {
    if let Some(map) = obj.as_object_mut() {
        let meta = map.entry("metadata").or_insert_with(|| json!({}));
        if !meta.is_object() {
            *meta = json!({});
        }
        if let Some(meta) = meta.as_object_mut() {
            meta.insert(field.to_string(), value);
        }
    }
}

pub(super) fn remove_meta(obj: &mut Value, field: &str) {
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove(field);
    }
}

/// RFC 3339 in UTC with second precision, as `metav1.Time` serialises.
pub(crate) fn now() -> String {
    k8s_openapi::jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}
