//! PATCH by content type: merge, JSON, strategic merge and server-side apply.

use serde_json::{Value, json};

use crate::error::ApiError;
use crate::patch::{JsonPatchError, json_patch, merge_patch};
use crate::store::WriteOpts;

use super::Shared;
use super::routing::{Target, param};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum PatchKind {
    Merge,
    Strategic,
    Json,
    Apply,
}

pub(super) fn patch(
    shared: &Shared,
    target: &Target,
    query: &[(String, String)],
    content_type: &str,
    body: &[u8],
    opts: WriteOpts,
) -> Result<(u16, Value), ApiError> {
    let res = &target.res;
    let ns = target.namespace.as_deref().unwrap_or("");
    let name = target.name.as_deref().unwrap_or("");
    let media = content_type.split(';').next().unwrap_or("").trim();
    const PATCH_TYPES: [&str; 4] = [
        "application/json-patch+json",
        "application/merge-patch+json",
        "application/strategic-merge-patch+json",
        "application/apply-patch+yaml",
    ];
    if !PATCH_TYPES.contains(&media) {
        // Not a patch type at all: refused by content negotiation, before the patch handler.
        return Err(ApiError::new(
            415,
            "UnsupportedMediaType",
            "415: Unsupported Media Type",
        ));
    }
    let kind = match media {
        "application/merge-patch+json" => PatchKind::Merge,
        // Custom resources have no Go struct to carry patch strategies, so the real server refuses this.
        "application/strategic-merge-patch+json" if !res.custom => PatchKind::Strategic,
        "application/json-patch+json" => PatchKind::Json,
        "application/apply-patch+yaml" => PatchKind::Apply,
        _ => {
            let mut accepted = vec![
                "application/json-patch+json",
                "application/merge-patch+json",
                "application/apply-patch+yaml",
            ];
            if !res.custom {
                accepted.push("application/strategic-merge-patch+json");
            }
            return Err(ApiError::new(
                415,
                "UnsupportedMediaType",
                format!(
                    "the body of the request was in an unknown format - accepted media types include: {}",
                    accepted.join(", ")
                ),
            ));
        }
    };
    let patch: Value = serde_json::from_slice(body).map_err(|e| {
        ApiError::bad_request(match kind {
            PatchKind::Apply => {
                format!("error decoding YAML (only its JSON subset is modelled): {e}")
            }
            _ => format!("error decoding patch: {e}"),
        })
    })?;
    if kind == PatchKind::Apply && param(query, "fieldManager").is_none_or(str::is_empty) {
        let mut err = ApiError::new(
            422,
            "Invalid",
            "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch",
        );
        err.details = Some(Box::new(json!({
            "group": "meta.k8s.io", "kind": "PatchOptions",
            "causes": [{"reason": "FieldValueRequired", "message": "Required value: is required for apply patch", "field": "fieldManager"}],
        })));
        return Err(err);
    }
    if kind == PatchKind::Strategic && has_directive(&patch) {
        return Err(ApiError::bad_request(
            "strategic merge patch directives ($patch, $retainKeys, $setElementOrder, ...) are not \
             modelled by the test API server",
        ));
    }
    if kind != PatchKind::Json && !patch.is_object() {
        return Err(ApiError::bad_request("the patch must be a JSON object"));
    }
    let mut store = shared.store();
    let current = match store.get(res, ns, name) {
        Ok(current) => current,
        Err(err) if err.code == 404 && kind == PatchKind::Apply && !opts.status => {
            // Server-side apply creates what does not exist.
            let mut obj = patch;
            if let Some(meta) = obj.get("metadata").and_then(Value::as_object)
                && meta
                    .get("name")
                    .and_then(Value::as_str)
                    .is_some_and(|n| n != name)
            {
                return Err(ApiError::bad_request(format!(
                    "the name of the object does not match the name on the URL ({name})"
                )));
            }
            if let Some(map) = obj.as_object_mut() {
                let meta = map.entry("metadata").or_insert_with(|| json!({}));
                if let Some(meta) = meta.as_object_mut() {
                    meta.insert("name".into(), Value::from(name));
                }
            }
            return store.create(res, ns, obj, opts).map(|o| (201, o));
        }
        Err(err) => return Err(err),
    };
    let uid = current.pointer("/metadata/uid").cloned();
    let mut patched = current;
    match kind {
        PatchKind::Json => json_patch(&mut patched, &patch).map_err(|e| match e {
            JsonPatchError::Malformed(m) => {
                ApiError::bad_request(format!("error decoding patch: {m}"))
            }
            // The real server says only this, whichever operation failed and why.
            JsonPatchError::Failed => ApiError::new(
                422,
                "Invalid",
                "the server rejected our request due to an error in our request",
            ),
        })?,
        _ => merge_patch(&mut patched, &patch),
    }
    // A patch has no uid precondition: a changed uid is an invalid update of an immutable field.
    if let Some(changed) = patched
        .pointer("/metadata/uid")
        .filter(|u| Some(*u) != uid.as_ref())
    {
        return Err(ApiError::invalid(
            res,
            name,
            "metadata.uid",
            "FieldValueInvalid",
            &format!("Invalid value: {changed}: field is immutable"),
        ));
    }
    store
        .update(res, ns, name, patched, opts, true)
        .map(|o| (200, o))
}

pub(super) fn has_directive(value: &Value) -> bool {
    match value {
        Value::Object(map) => map
            .iter()
            .any(|(k, v)| k.starts_with('$') || has_directive(v)),
        Value::Array(items) => items.iter().any(has_directive),
        _ => false,
    }
}
