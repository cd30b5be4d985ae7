//! The validation the real API server applies before storing: names,
//! labels, the annotations' total size, ConfigMap keys and size, and etcd's
//! request limit.

use serde_json::Value;

use super::Store;
use super::meta::meta_str;
use crate::error::ApiError;
use crate::resource::ResourceDef;

/// The real limit on a ConfigMap's `data` plus `binaryData` values (`MaxSecretSize`; keys are
/// not counted).
const CONFIGMAP_MAX_BYTES: usize = 1024 * 1024;
/// The largest request the API server's etcd client sends (gRPC `MaxCallSendMsgSize`).
const ETCD_CLIENT_MAX_SEND_BYTES: usize = 2 * 1024 * 1024;
/// The real limit on the total size of `metadata.annotations`.
const ANNOTATIONS_MAX_BYTES: usize = 256 * 1024;

impl Store {
    pub(super) fn validate(
        &self,
        res: &ResourceDef,
        name: &str,
        obj: &Value,
    ) -> Result<(), ApiError> {
        if !is_dns_subdomain(name) {
            return Err(ApiError::invalid(
                res,
                name,
                "metadata.name",
                "FieldValueInvalid",
                &format!(
                    "Invalid value: {name:?}: a lowercase RFC 1123 subdomain must consist of lower case \
                     alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character \
                     (e.g. 'example.com', regex used for validation is \
                     '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
                ),
            ));
        }
        if let Some(labels) = obj.pointer("/metadata/labels").and_then(Value::as_object) {
            let invalid = |detail: String| {
                ApiError::invalid(res, name, "metadata.labels", "FieldValueInvalid", &detail)
            };
            for (key, value) in labels {
                let value = value.as_str().unwrap_or_default();
                if !is_qualified_name(key) {
                    return Err(invalid(format!(
                        "Invalid value: {key:?}: name part must consist of alphanumeric characters, '-', '_' or '.'"
                    )));
                }
                if !is_label_value(value) {
                    return Err(invalid(format!(
                        "Invalid value: {value:?}: a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character, at most 63 characters"
                    )));
                }
            }
        }
        if let Some(annotations) = obj
            .pointer("/metadata/annotations")
            .and_then(Value::as_object)
        {
            let total: usize = annotations
                .iter()
                .map(|(k, v)| k.len() + v.as_str().map_or(0, str::len))
                .sum();
            if total > ANNOTATIONS_MAX_BYTES {
                return Err(ApiError::invalid(
                    res,
                    name,
                    "metadata.annotations",
                    "FieldValueTooLong",
                    &format!("Too long: may not be more than {ANNOTATIONS_MAX_BYTES} bytes"),
                ));
            }
        }
        if !res.custom && res.group.is_empty() && res.plural == "configmaps" {
            validate_configmap(res, name, obj)?;
        }
        let size = serde_json::to_vec(obj).map_or(0, |v| v.len());
        if size > self.limits.max_object_bytes {
            if size > ETCD_CLIENT_MAX_SEND_BYTES
                && self.limits.max_object_bytes <= ETCD_CLIENT_MAX_SEND_BYTES
            {
                // Above the API server's own etcd client limit the request never reaches etcd:
                // gRPC refuses to send it (the size it names counts framing; ours is the JSON).
                return Err(ApiError::new(
                    500,
                    "",
                    format!(
                        "rpc error: code = ResourceExhausted desc = trying to send message \
                         larger than max ({size} vs. {ETCD_CLIENT_MAX_SEND_BYTES})"
                    ),
                ));
            }
            // What etcd's --max-request-bytes rejection looks like through the API server: an
            // unclassified 500 (kubernetes/kubernetes#112152).
            return Err(ApiError::new(500, "", "etcdserver: request is too large"));
        }
        Ok(())
    }
}

fn validate_configmap(res: &ResourceDef, name: &str, obj: &Value) -> Result<(), ApiError> {
    let mut total = 0usize;
    let data = obj.get("data").and_then(Value::as_object);
    let binary = obj.get("binaryData").and_then(Value::as_object);
    for (field, map) in [("data", data), ("binaryData", binary)] {
        for (key, value) in map.into_iter().flatten() {
            if let Some(problem) = config_key_problem(key) {
                return Err(ApiError::invalid(
                    res,
                    name,
                    &format!("{field}[{key}]"),
                    "FieldValueInvalid",
                    &format!("Invalid value: {key:?}: {problem}"),
                ));
            }
            if field == "binaryData" && data.is_some_and(|d| d.contains_key(key)) {
                return Err(ApiError::invalid(
                    res,
                    name,
                    &format!("{field}[{key}]"),
                    "FieldValueInvalid",
                    &format!("Invalid value: {key:?}: duplicate of key present in data"),
                ));
            }
            let value = value.as_str().unwrap_or_default();
            // As ValidateConfigMap: the values count, the keys do not.
            total += if field == "binaryData" {
                base64_decoded_len(value)
            } else {
                value.len()
            };
        }
    }
    if total > CONFIGMAP_MAX_BYTES {
        return Err(ApiError::invalid(
            res,
            name,
            "[]",
            "FieldValueTooLong",
            &format!("Too long: may not be more than {CONFIGMAP_MAX_BYTES} bytes"),
        ));
    }
    Ok(())
}

fn config_key_problem(key: &str) -> Option<&'static str> {
    if key.len() > 253 {
        return Some("must be no more than 253 characters");
    }
    if key.is_empty()
        || !key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._".contains(&b))
    {
        return Some(
            "a valid config key must consist of alphanumeric characters, '-', '_' or '.' \
             (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')",
        );
    }
    match key {
        "." => Some("must not be '.'"),
        ".." => Some("must not be '..'"),
        k if k.starts_with("..") => Some("must not start with '..'"),
        _ => None,
    }
}

fn base64_decoded_len(s: &str) -> usize {
    let padding = s.bytes().rev().take_while(|b| *b == b'=').count();
    (s.len() / 4 * 3).saturating_sub(padding)
        + match s.len() % 4 {
            2 => 1,
            3 => 2,
            _ => 0,
        }
}

fn is_dns_subdomain(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s.split('.').all(|label| {
            !label.is_empty()
                && label
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}

fn is_name_part(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
        && s.starts_with(|c: char| c.is_ascii_alphanumeric())
        && s.ends_with(|c: char| c.is_ascii_alphanumeric())
}

fn is_qualified_name(s: &str) -> bool {
    match s.split_once('/') {
        Some((prefix, name)) => is_dns_subdomain(prefix) && is_name_part(name),
        None => is_name_part(s),
    }
}

fn is_label_value(s: &str) -> bool {
    s.is_empty() || is_name_part(s)
}

pub(super) fn check_object(obj: &Value) -> Result<(), ApiError> {
    if !obj.is_object() {
        return Err(ApiError::bad_request("the body must be a JSON object"));
    }
    if obj.get("metadata").is_some_and(|m| !m.is_object()) {
        return Err(ApiError::bad_request("metadata must be an object"));
    }
    Ok(())
}

pub(super) fn check_namespace(res: &ResourceDef, ns: &str, obj: &Value) -> Result<(), ApiError> {
    let body_ns = meta_str(obj, "namespace");
    if res.namespaced && !body_ns.is_empty() && body_ns != ns {
        return Err(ApiError::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        ));
    }
    Ok(())
}
