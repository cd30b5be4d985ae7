//! The registry strategies: what create, update (PUT, and the second half
//! of PATCH) and delete do to an object before it is stored, as the real
//! registry does (system fields, generation, status subresource,
//! finalizers and graceful deletion, preconditions).

use serde_json::{Value, json};

use super::meta::{finalizers, meta_str, now, remove_meta, set_meta};
use super::validate::{check_namespace, check_object};
use super::{ChangeType, Store, WriteOpts};
use crate::error::{ApiError, resource_details};
use crate::resource::ResourceDef;

impl Store {
    pub(crate) fn create(
        &mut self,
        res: &ResourceDef,
        ns: &str,
        mut obj: Value,
        opts: WriteOpts,
    ) -> Result<Value, ApiError> {
        if opts.status {
            return Err(ApiError::new(
                405,
                "MethodNotAllowed",
                "the server does not allow this method on the requested resource",
            ));
        }
        check_object(&obj)?;
        check_namespace(res, ns, &obj)?;
        if !meta_str(&obj, "resourceVersion").is_empty() {
            return Err(ApiError::bad_request(
                "resourceVersion should not be set on objects to be created",
            ));
        }
        let mut name = meta_str(&obj, "name").to_string();
        if name.is_empty() {
            let prefix = meta_str(&obj, "generateName").to_string();
            if prefix.is_empty() {
                return Err(ApiError::invalid(
                    res,
                    "",
                    "metadata.name",
                    "FieldValueRequired",
                    "Required value: name or generateName is required",
                ));
            }
            name = loop {
                let candidate = format!("{prefix}{}", self.generated_suffix());
                if !self.objects.contains_key(&Self::key(res, ns, &candidate)) {
                    break candidate;
                }
            };
        }
        let key = Self::key(res, ns, &name);
        if self.objects.contains_key(&key) {
            return Err(ApiError::already_exists(res, &name));
        }
        set_meta(&mut obj, "name", Value::from(name.as_str()));
        if res.namespaced {
            set_meta(&mut obj, "namespace", Value::from(ns));
        } else {
            remove_meta(&mut obj, "namespace");
        }
        let uid = self.uid();
        set_meta(&mut obj, "uid", Value::from(uid));
        set_meta(&mut obj, "creationTimestamp", Value::from(now()));
        remove_meta(&mut obj, "deletionTimestamp");
        remove_meta(&mut obj, "deletionGracePeriodSeconds");
        if res.generation {
            set_meta(&mut obj, "generation", Value::from(1));
        } else {
            remove_meta(&mut obj, "generation");
        }
        if res.status_subresource
            && let Some(map) = obj.as_object_mut()
        {
            // Custom resources drop status on create; built-ins (Job) reset it to empty.
            if res.custom {
                map.remove("status");
            } else {
                map.insert("status".into(), json!({}));
            }
        }
        let obj = Self::present(res, &obj);
        self.validate(res, &name, &obj)?;
        if opts.dry_run {
            let mut obj = obj;
            set_meta(
                &mut obj,
                "resourceVersion",
                Value::from(self.rv.to_string()),
            );
            return Ok(obj);
        }
        let stored = self.commit(res, key, Some(obj), ChangeType::Added);
        Ok(Self::present(res, &stored))
    }

    /// PUT, and the second half of PATCH (the patched object goes through the same update strategy).
    ///
    /// Returns the object as stored (or, when the update removed the last finalizer of an object
    /// being deleted, as it was when it was deleted).
    pub(crate) fn update(
        &mut self,
        res: &ResourceDef,
        ns: &str,
        name: &str,
        mut new: Value,
        opts: WriteOpts,
        unconditional_allowed: bool,
    ) -> Result<Value, ApiError> {
        let (key, old) = self.existing(res, ns, name)?;
        check_object(&new)?;
        check_namespace(res, ns, &new)?;
        let body_name = meta_str(&new, "name");
        if body_name != name {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({body_name}) does not match the name on the URL ({name})"
            )));
        }
        let (want_uid, have_uid) = (meta_str(&new, "uid"), meta_str(&old, "uid"));
        if !want_uid.is_empty() && want_uid != have_uid {
            return Err(ApiError::precondition(
                res, ns, name, "UID", want_uid, have_uid,
            ));
        }
        let want_rv = meta_str(&new, "resourceVersion");
        if want_rv.is_empty() {
            if !unconditional_allowed {
                return Err(ApiError::resource_version_required(res, name));
            }
        } else if want_rv != meta_str(&old, "resourceVersion") {
            return Err(ApiError::conflict(res, name));
        }

        if opts.status {
            // The status strategy keeps everything but .status from the stored object.
            let status = new.get("status").cloned();
            new = old.clone();
            if let Some(map) = new.as_object_mut() {
                match status {
                    Some(s) => map.insert("status".into(), s),
                    None => map.remove("status"),
                };
            }
        } else {
            if res.status_subresource
                && let Some(map) = new.as_object_mut()
            {
                match old.get("status") {
                    Some(s) => map.insert("status".into(), s.clone()),
                    None => map.remove("status"),
                };
            }
            for field in [
                "uid",
                "creationTimestamp",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
                "generation",
                "resourceVersion",
            ] {
                match old.pointer(&format!("/metadata/{field}")) {
                    Some(v) => set_meta(&mut new, field, v.clone()),
                    None => remove_meta(&mut new, field),
                }
            }
            if res.namespaced {
                set_meta(&mut new, "namespace", Value::from(ns));
            }
            if old.pointer("/metadata/deletionTimestamp").is_some() {
                let old_fin = finalizers(&old);
                let added: Vec<String> = finalizers(&new)
                    .into_iter()
                    .filter(|f| !old_fin.contains(f))
                    .collect();
                if !added.is_empty() {
                    return Err(ApiError::invalid(
                        res,
                        name,
                        "metadata.finalizers",
                        "FieldValueForbidden",
                        &format!(
                            "Forbidden: no new finalizers can be added if the object is being deleted, \
                             found new finalizers {}",
                            go_string_slice(&added)
                        ),
                    ));
                }
            }
            if res.generation && spec_changed(res, &old, &new) {
                let generation = old
                    .pointer("/metadata/generation")
                    .and_then(Value::as_i64)
                    .unwrap_or(0);
                set_meta(&mut new, "generation", Value::from(generation + 1));
            }
        }
        let new = Self::present(res, &new);
        self.validate(res, name, &new)?;
        if new == Self::present(res, &old) {
            // A no-op write stores nothing and keeps the resourceVersion, as the real registry does.
            return Ok(new);
        }
        if opts.dry_run {
            return Ok(new);
        }
        let deleting = new.pointer("/metadata/deletionTimestamp").is_some();
        let change = if deleting && finalizers(&new).is_empty() {
            ChangeType::Deleted
        } else {
            ChangeType::Modified
        };
        let stored = self.commit(res, key, Some(new), change);
        Ok(Self::present(res, &stored))
    }

    /// DELETE. Returns the HTTP body: the object for types that return it (or while finalizers are
    /// pending), else a success `Status`.
    pub(crate) fn delete(
        &mut self,
        res: &ResourceDef,
        ns: &str,
        name: &str,
        options: &Value,
        opts: WriteOpts,
    ) -> Result<Value, ApiError> {
        let (key, old) = self.existing(res, ns, name)?;
        let pre = |field: &str| {
            options
                .pointer(&format!("/preconditions/{field}"))
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
        };
        // The UID first, in the order the real registry checks them (`rest.BeforeDelete`).
        for (field, what) in [("uid", "UID"), ("resourceVersion", "ResourceVersion")] {
            let have = meta_str(&old, field);
            if let Some(want) = pre(field)
                && want != have
            {
                return Err(ApiError::delete_precondition(res, name, what, want, have));
            }
        }
        if !finalizers(&old).is_empty() {
            // Graceful deletion: mark it and wait for the finalizers to be removed by updates.
            if old.pointer("/metadata/deletionTimestamp").is_some() || opts.dry_run {
                return Ok(Self::present(res, &old));
            }
            let mut marked = old.clone();
            set_meta(&mut marked, "deletionTimestamp", Value::from(now()));
            set_meta(&mut marked, "deletionGracePeriodSeconds", Value::from(0));
            if res.generation {
                let generation = old
                    .pointer("/metadata/generation")
                    .and_then(Value::as_i64)
                    .unwrap_or(0);
                set_meta(&mut marked, "generation", Value::from(generation + 1));
            }
            let stored = self.commit(res, key, Some(marked), ChangeType::Modified);
            return Ok(Self::present(res, &stored));
        }
        let gone = if opts.dry_run {
            old
        } else {
            self.commit(res, key, None, ChangeType::Deleted)
        };
        if res.return_deleted_object {
            return Ok(Self::present(res, &gone));
        }
        let mut details = resource_details(res, name);
        if let Some(map) = details.as_object_mut() {
            map.insert("uid".into(), Value::from(meta_str(&gone, "uid")));
        }
        Ok(json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Success",
            "details": details,
        }))
    }
}

fn spec_changed(res: &ResourceDef, old: &Value, new: &Value) -> bool {
    let strip = |v: &Value| {
        let mut v = v.clone();
        if let Some(map) = v.as_object_mut() {
            map.remove("metadata");
            map.remove("apiVersion");
            map.remove("kind");
            if res.status_subresource {
                map.remove("status");
            }
        }
        v
    };
    strip(old) != strip(new)
}

/// A `[]string` as Go's `%#v` prints it: `[]string{"a", "b"}`.
fn go_string_slice(items: &[String]) -> String {
    let quoted: Vec<String> = items.iter().map(|s| format!("{s:?}")).collect();
    format!("[]string{{{}}}", quoted.join(", "))
}
