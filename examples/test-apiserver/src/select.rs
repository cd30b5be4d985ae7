//! Label and field selectors for list and watch.

use serde_json::Value;

#[derive(Debug, Clone)]
enum Requirement {
    Equals(String, String),
    NotEquals(String, String),
    Exists(String),
    NotExists(String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
}

/// A parsed `labelSelector` plus `fieldSelector`.
#[derive(Debug, Clone, Default)]
pub(crate) struct Selector {
    labels: Vec<Requirement>,
    /// Only `metadata.name` and `metadata.namespace`, with `=`, `==` or `!=`.
    fields: Vec<(String, String, bool)>,
}

impl Selector {
    /// True when neither a label nor a field selector was given.
    pub(crate) fn is_empty(&self) -> bool {
        self.labels.is_empty() && self.fields.is_empty()
    }

    /// Parses both selectors; the error text becomes a 400 message.
    pub(crate) fn parse(labels: Option<&str>, fields: Option<&str>) -> Result<Self, String> {
        let mut selector = Self::default();
        if let Some(labels) = labels {
            for term in split_terms(labels) {
                selector.labels.push(parse_label_term(&term)?);
            }
        }
        if let Some(fields) = fields {
            for term in fields.split(',').map(str::trim).filter(|t| !t.is_empty()) {
                let (key, value, equal) = if let Some((k, v)) = term.split_once("!=") {
                    (k, v, false)
                } else if let Some((k, v)) = term.split_once("==") {
                    (k, v, true)
                } else if let Some((k, v)) = term.split_once('=') {
                    (k, v, true)
                } else {
                    return Err(format!(
                        "invalid selector: '{fields}'; can't understand '{term}'"
                    ));
                };
                let key = key.trim();
                if key != "metadata.name" && key != "metadata.namespace" {
                    return Err(format!(
                        "{key:?} is not a known field selector: only \"metadata.name\", \"metadata.namespace\""
                    ));
                }
                selector
                    .fields
                    .push((key.to_string(), value.trim().to_string(), equal));
            }
        }
        Ok(selector)
    }

    pub(crate) fn matches(&self, obj: &Value) -> bool {
        let labels = obj.pointer("/metadata/labels").and_then(Value::as_object);
        let label = |key: &str| labels.and_then(|l| l.get(key)).and_then(Value::as_str);
        let labels_ok = self.labels.iter().all(|req| match req {
            Requirement::Equals(k, v) => label(k) == Some(v.as_str()),
            Requirement::NotEquals(k, v) => label(k) != Some(v.as_str()),
            Requirement::Exists(k) => label(k).is_some(),
            Requirement::NotExists(k) => label(k).is_none(),
            Requirement::In(k, vs) => label(k).is_some_and(|l| vs.iter().any(|v| v == l)),
            Requirement::NotIn(k, vs) => !label(k).is_some_and(|l| vs.iter().any(|v| v == l)),
        });
        labels_ok
            && self.fields.iter().all(|(key, want, equal)| {
                let pointer = if key == "metadata.name" {
                    "/metadata/name"
                } else {
                    "/metadata/namespace"
                };
                let have = obj.pointer(pointer).and_then(Value::as_str).unwrap_or("");
                (have == want) == *equal
            })
    }
}

/// Splits on commas that are not inside a `( … )` value set.
fn split_terms(selector: &str) -> Vec<String> {
    let mut terms = Vec::new();
    let mut depth = 0usize;
    let mut current = String::new();
    for c in selector.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                terms.push(std::mem::take(&mut current));
                continue;
            }
            _ => {}
        }
        current.push(c);
    }
    terms.push(current);
    terms
        .into_iter()
        .map(|t| t.trim().to_string())
        .filter(|t| !t.is_empty())
        .collect()
}

fn parse_label_term(term: &str) -> Result<Requirement, String> {
    let invalid = || format!("unable to parse requirement: {term:?}");
    if let Some((key, value)) = term.split_once("!=") {
        return Ok(Requirement::NotEquals(
            key.trim().into(),
            value.trim().into(),
        ));
    }
    if let Some((key, value)) = term.split_once("==") {
        return Ok(Requirement::Equals(key.trim().into(), value.trim().into()));
    }
    if let Some((key, value)) = term.split_once('=') {
        return Ok(Requirement::Equals(key.trim().into(), value.trim().into()));
    }
    if let Some(open) = term.find('(') {
        let head: Vec<&str> = term[..open].split_whitespace().collect();
        let inner = term[open + 1..].strip_suffix(')').ok_or_else(invalid)?;
        let values = inner
            .split(',')
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
            .collect();
        return match head.as_slice() {
            [key, "in"] => Ok(Requirement::In((*key).into(), values)),
            [key, "notin"] => Ok(Requirement::NotIn((*key).into(), values)),
            _ => Err(invalid()),
        };
    }
    if let Some(key) = term.strip_prefix('!') {
        return Ok(Requirement::NotExists(key.trim().into()));
    }
    if term.contains(char::is_whitespace) || term.contains(['<', '>']) {
        return Err(invalid());
    }
    Ok(Requirement::Exists(term.into()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn label_terms() {
        let obj =
            json!({"metadata": {"name": "n", "namespace": "ns", "labels": {"a": "b", "c": "d"}}});
        let ok = |l: &str| Selector::parse(Some(l), None).unwrap().matches(&obj);
        assert!(ok("a=b,c"));
        assert!(ok("a==b, !z"));
        assert!(ok("a!=x"));
        assert!(ok("a in (x, b),c notin (q)"));
        assert!(!ok("a=x"));
        assert!(!ok("z"));
        assert!(!ok("a notin (b)"));
        assert!(Selector::parse(Some("a in (b"), None).is_err());
    }

    #[test]
    fn field_terms() {
        let obj = json!({"metadata": {"name": "n", "namespace": "ns"}});
        let ok = |f: &str| Selector::parse(None, Some(f)).unwrap().matches(&obj);
        assert!(ok("metadata.name=n"));
        assert!(ok("metadata.namespace==ns,metadata.name!=x"));
        assert!(!ok("metadata.name=x"));
        assert!(Selector::parse(None, Some("spec.x=1")).is_err());
    }
}
