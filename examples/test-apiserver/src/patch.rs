//! JSON merge patch (RFC 7386) and JSON patch (RFC 6902).

use serde_json::{Map, Value};

/// RFC 7386 `MergePatch(target, patch)`.
pub(crate) fn merge_patch(target: &mut Value, patch: &Value) {
    let Value::Object(patch) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    if let Value::Object(target) = target {
        for (key, value) in patch {
            if value.is_null() {
                target.remove(key);
            } else {
                merge_patch(target.entry(key.clone()).or_insert(Value::Null), value);
            }
        }
    }
}

/// An RFC 6902 failure: `Malformed` is a 400 (the patch did not decode), `Failed` a 422.
#[derive(Debug)]
pub(crate) enum JsonPatchError {
    Malformed(String),
    /// An operation failed (a `test` that did not hold, a missing path): the real server
    /// answers every such failure with the same words, so no detail is kept.
    Failed,
}

fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Applies an RFC 6902 document atomically: on error `target` is left untouched.
pub(crate) fn json_patch(target: &mut Value, patch: &Value) -> Result<(), JsonPatchError> {
    let Value::Array(ops) = patch else {
        // Go's decoder names the type it could not fill, as the real server reports it.
        return Err(JsonPatchError::Malformed(format!(
            "json: cannot unmarshal {} into Go value of type []handlers.jsonPatchOp",
            json_type(patch)
        )));
    };
    let mut doc = target.clone();
    for op in ops {
        let name = op
            .get("op")
            .and_then(Value::as_str)
            .ok_or_else(|| JsonPatchError::Malformed("operation is missing \"op\"".into()))?;
        let path = op.get("path").and_then(Value::as_str).ok_or_else(|| {
            JsonPatchError::Malformed(format!("{name} operation is missing \"path\""))
        })?;
        let value = || {
            op.get("value").cloned().ok_or_else(|| {
                JsonPatchError::Malformed(format!("{name} operation is missing \"value\""))
            })
        };
        let from = || {
            op.get("from").and_then(Value::as_str).ok_or_else(|| {
                JsonPatchError::Malformed(format!("{name} operation is missing \"from\""))
            })
        };
        match name {
            "add" => add(&mut doc, path, value()?)?,
            "remove" => {
                remove(&mut doc, path)?;
            }
            "replace" => {
                remove(&mut doc, path)?;
                add(&mut doc, path, value()?)?;
            }
            "move" => {
                let from = from()?;
                if path.starts_with(&format!("{from}/")) {
                    return Err(JsonPatchError::Failed);
                }
                let moved = remove(&mut doc, from)?;
                add(&mut doc, path, moved)?;
            }
            "copy" => {
                let from = from()?;
                let copied = doc
                    .pointer(&check_pointer(from)?)
                    .cloned()
                    .ok_or(JsonPatchError::Failed)?;
                add(&mut doc, path, copied)?;
            }
            "test" => {
                let expected = value()?;
                let actual = doc.pointer(&check_pointer(path)?);
                if actual != Some(&expected) {
                    return Err(JsonPatchError::Failed);
                }
            }
            other => {
                return Err(JsonPatchError::Malformed(format!(
                    "unexpected json patch operation {other:?}"
                )));
            }
        }
    }
    *target = doc;
    Ok(())
}

fn check_pointer(path: &str) -> Result<String, JsonPatchError> {
    if path.is_empty() || path.starts_with('/') {
        Ok(path.to_string())
    } else {
        Err(JsonPatchError::Malformed(format!(
            "invalid JSON pointer {path:?}"
        )))
    }
}

/// Splits a pointer into its parent pointer and its unescaped last token.
fn split(path: &str) -> Result<(String, String), JsonPatchError> {
    check_pointer(path)?;
    let Some(idx) = path.rfind('/') else {
        return Err(JsonPatchError::Failed);
    };
    let token = path[idx + 1..].replace("~1", "/").replace("~0", "~");
    Ok((path[..idx].to_string(), token))
}

fn array_index(token: &str, len: usize, allow_end: bool) -> Result<usize, JsonPatchError> {
    if token == "-" && allow_end {
        return Ok(len);
    }
    let leading_zero = token.len() > 1 && token.starts_with('0');
    match token.parse::<usize>() {
        Ok(i) if !leading_zero && (i < len || (allow_end && i == len)) => Ok(i),
        _ => Err(JsonPatchError::Failed),
    }
}

fn add(doc: &mut Value, path: &str, value: Value) -> Result<(), JsonPatchError> {
    if path.is_empty() {
        *doc = value;
        return Ok(());
    }
    let (parent, token) = split(path)?;
    match doc.pointer_mut(&parent) {
        Some(Value::Object(map)) => {
            map.insert(token, value);
            Ok(())
        }
        Some(Value::Array(items)) => {
            let idx = array_index(&token, items.len(), true)?;
            items.insert(idx, value);
            Ok(())
        }
        _ => Err(JsonPatchError::Failed),
    }
}

fn remove(doc: &mut Value, path: &str) -> Result<Value, JsonPatchError> {
    let (parent, token) = split(path)?;
    match doc.pointer_mut(&parent) {
        Some(Value::Object(map)) => map.remove(&token).ok_or(JsonPatchError::Failed),
        Some(Value::Array(items)) => {
            let idx = array_index(&token, items.len(), false)?;
            Ok(items.remove(idx))
        }
        _ => Err(JsonPatchError::Failed),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn merge_patch_rfc7386_examples() {
        let cases = [
            (json!({"a":"b"}), json!({"a":"c"}), json!({"a":"c"})),
            (json!({"a":"b"}), json!({"b":"c"}), json!({"a":"b","b":"c"})),
            (json!({"a":"b"}), json!({"a":null}), json!({})),
            (
                json!({"a":"b","b":"c"}),
                json!({"a":null}),
                json!({"b":"c"}),
            ),
            (json!({"a":["b"]}), json!({"a":"c"}), json!({"a":"c"})),
            (json!({"a":"c"}), json!({"a":["b"]}), json!({"a":["b"]})),
            (
                json!({"a":{"b":"c"}}),
                json!({"a":{"b":"d","c":null}}),
                json!({"a":{"b":"d"}}),
            ),
            (json!({"a":[{"b":"c"}]}), json!({"a":[1]}), json!({"a":[1]})),
            (json!(["a", "b"]), json!(["c", "d"]), json!(["c", "d"])),
            (json!({"a":"b"}), json!(["c"]), json!(["c"])),
            (json!({"a":"foo"}), json!(null), json!(null)),
            (json!({"e":null}), json!({"a":1}), json!({"e":null,"a":1})),
            (json!([1, 2]), json!({"a":"b","c":null}), json!({"a":"b"})),
            (
                json!({}),
                json!({"a":{"bb":{"ccc":null}}}),
                json!({"a":{"bb":{}}}),
            ),
        ];
        for (mut target, patch, want) in cases {
            merge_patch(&mut target, &patch);
            assert_eq!(target, want, "patch {patch}");
        }
    }

    #[test]
    fn json_patch_ops() {
        let mut doc = json!({"a": {"b": [1, 2]}, "c": "x", "d~/e": 1});
        let patch = json!([
            {"op": "add", "path": "/a/b/-", "value": 3},
            {"op": "add", "path": "/a/b/0", "value": 0},
            {"op": "remove", "path": "/c"},
            {"op": "replace", "path": "/d~0~1e", "value": 2},
            {"op": "copy", "from": "/a/b", "path": "/f"},
            {"op": "move", "from": "/f", "path": "/g"},
            {"op": "test", "path": "/g/3", "value": 3}
        ]);
        json_patch(&mut doc, &patch).unwrap();
        assert_eq!(
            doc,
            json!({"a": {"b": [0, 1, 2, 3]}, "d~/e": 2, "g": [0, 1, 2, 3]})
        );
    }

    #[test]
    fn json_patch_is_atomic_and_classifies_errors() {
        let mut doc = json!({"a": 1});
        let failing = json!([{"op": "add", "path": "/b", "value": 2}, {"op": "test", "path": "/a", "value": 9}]);
        assert!(matches!(
            json_patch(&mut doc, &failing),
            Err(JsonPatchError::Failed)
        ));
        assert_eq!(doc, json!({"a": 1}));
        assert!(matches!(
            json_patch(
                &mut doc,
                &json!([{"op": "replace", "path": "/zz", "value": 1}])
            ),
            Err(JsonPatchError::Failed)
        ));
        assert!(matches!(
            json_patch(&mut doc, &json!({"op": "add"})),
            Err(JsonPatchError::Malformed(_))
        ));
        assert!(matches!(
            json_patch(&mut doc, &json!([{"op": "frob", "path": "/a"}])),
            Err(JsonPatchError::Malformed(_))
        ));
    }
}
