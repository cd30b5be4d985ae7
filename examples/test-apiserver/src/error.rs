//! Kubernetes `Status` failures, shaped as the real API server shapes them.

use serde_json::{Map, Value, json};

use crate::resource::ResourceDef;

/// A failed request, rendered as a `kind: Status` body.
#[derive(Debug, Clone)]
pub(crate) struct ApiError {
    pub(crate) code: u16,
    /// Empty for errors the real server does not classify (it then omits `reason`).
    pub(crate) reason: String,
    pub(crate) message: String,
    /// Boxed: a `Value` is large, and this error travels in every `Result`.
    pub(crate) details: Option<Box<Value>>,
    pub(crate) retry_after: Option<u64>,
}

impl ApiError {
    pub(crate) fn new(code: u16, reason: &str, message: impl Into<String>) -> Self {
        Self {
            code,
            reason: reason.to_string(),
            message: message.into(),
            details: None,
            retry_after: None,
        }
    }

    fn with_details(mut self, details: Value) -> Self {
        self.details = Some(Box::new(details));
        self
    }

    /// An error about the object `name` of `res`: its details name the
    /// object by resource, as the real server's do.
    fn about(
        res: &ResourceDef,
        name: &str,
        code: u16,
        reason: &str,
        message: impl Into<String>,
    ) -> Self {
        Self::new(code, reason, message).with_details(resource_details(res, name))
    }

    pub(crate) fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    pub(crate) fn internal(message: impl Into<String>) -> Self {
        Self::new(500, "InternalError", message)
    }

    pub(crate) fn not_found(res: &ResourceDef, name: &str) -> Self {
        Self::about(
            res,
            name,
            404,
            "NotFound",
            format!("{} \"{name}\" not found", res.qualified()),
        )
    }

    pub(crate) fn already_exists(res: &ResourceDef, name: &str) -> Self {
        Self::about(
            res,
            name,
            409,
            "AlreadyExists",
            format!("{} \"{name}\" already exists", res.qualified()),
        )
    }

    /// apimachinery's `NewConflict`: 409 `Conflict` with the message "Operation cannot be
    /// fulfilled on <what> "<name>": <why>", where `what` is the qualified plural or Kind the
    /// caller names the object by, and `details` names it the same way.
    fn cannot_fulfil(what: &str, name: &str, why: &str, details: Value) -> Self {
        Self::new(
            409,
            "Conflict",
            format!("Operation cannot be fulfilled on {what} \"{name}\": {why}"),
        )
        .with_details(details)
    }

    /// The optimistic-concurrency failure (stale `metadata.resourceVersion`).
    pub(crate) fn conflict(res: &ResourceDef, name: &str) -> Self {
        Self::cannot_fulfil(
            &res.qualified(),
            name,
            "the object has been modified; please apply your changes to the latest version and \
             try again",
            resource_details(res, name),
        )
    }

    /// An update whose body carries another `metadata.uid` (the storage precondition a real
    /// server derives from it).
    pub(crate) fn precondition(
        res: &ResourceDef,
        namespace: &str,
        name: &str,
        what: &str,
        want: &str,
        have: &str,
    ) -> Self {
        let key = res.storage_key(namespace, name);
        Self::cannot_fulfil(
            &res.qualified(),
            name,
            &format!(
                "StorageError: invalid object, Code: 4, Key: {key}, ResourceVersion: 0, \
                 AdditionalErrorMsg: Precondition failed: {what} in precondition: {want}, {what} \
                 in object meta: {have}"
            ),
            resource_details(res, name),
        )
    }

    /// A failed delete precondition. The real server names the Kind here, not the plural
    /// (`rest.BeforeDelete`: `NewConflict(GroupResource{Group, Resource: Kind})`).
    pub(crate) fn delete_precondition(
        res: &ResourceDef,
        name: &str,
        what: &str,
        want: &str,
        have: &str,
    ) -> Self {
        let consequence = if what == "UID" {
            "The object might have been deleted and then recreated"
        } else {
            "The object might have been modified"
        };
        Self::cannot_fulfil(
            &res.qualified_kind(),
            name,
            &format!(
                "the {what} in the precondition ({want}) does not match the {what} in record \
                 ({have}). {consequence}"
            ),
            kind_details(res, name),
        )
    }

    /// A field validation failure; `details.kind` is the Kind here, not the plural, as in the real server.
    pub(crate) fn invalid(
        res: &ResourceDef,
        name: &str,
        field: &str,
        cause: &str,
        detail: &str,
    ) -> Self {
        let mut details = kind_details(res, name);
        details["causes"] = json!([{ "reason": cause, "message": detail, "field": field }]);
        Self::new(
            422,
            "Invalid",
            format!(
                "{} \"{name}\" is invalid: {field}: {detail}",
                res.qualified_kind()
            ),
        )
        .with_details(details)
    }

    /// An update of a custom resource without `metadata.resourceVersion`: this one the real
    /// server reports with the plural resource, not the Kind.
    pub(crate) fn resource_version_required(res: &ResourceDef, name: &str) -> Self {
        let mut details = resource_details(res, name);
        details["causes"] = json!([{
            "reason": "FieldValueInvalid",
            "message": "Invalid value: 0: must be specified for an update",
            "field": "metadata.resourceVersion",
        }]);
        Self::new(
            422,
            "Invalid",
            format!(
                "{} \"{name}\" is invalid: metadata.resourceVersion: Invalid value: 0: must be \
                 specified for an update",
                res.qualified()
            ),
        )
        .with_details(details)
    }

    pub(crate) fn to_status(&self) -> Value {
        let mut status = Map::new();
        status.insert("kind".into(), Value::from("Status"));
        status.insert("apiVersion".into(), Value::from("v1"));
        status.insert("metadata".into(), json!({}));
        status.insert("status".into(), Value::from("Failure"));
        status.insert("message".into(), Value::from(self.message.as_str()));
        if !self.reason.is_empty() {
            status.insert("reason".into(), Value::from(self.reason.as_str()));
        }
        if let Some(details) = &self.details {
            status.insert("details".into(), (**details).clone());
        } else if let Some(secs) = self.retry_after {
            status.insert("details".into(), json!({ "retryAfterSeconds": secs }));
        }
        status.insert("code".into(), Value::from(self.code));
        Value::Object(status)
    }
}

/// `details` naming the Kind, as validation errors fill them.
pub(crate) fn kind_details(res: &ResourceDef, name: &str) -> Value {
    details(res, name, &res.kind)
}

/// `details` as the generic registry fills it: `kind` carries the plural resource name.
pub(crate) fn resource_details(res: &ResourceDef, name: &str) -> Value {
    details(res, name, &res.plural)
}

/// `details` naming the object `name` of `res`'s group, with `kind` as given.
fn details(res: &ResourceDef, name: &str, kind: &str) -> Value {
    let mut details = Map::new();
    details.insert("name".into(), Value::from(name));
    if !res.group.is_empty() {
        details.insert("group".into(), Value::from(res.group.as_str()));
    }
    details.insert("kind".into(), Value::from(kind));
    Value::Object(details)
}
