//! Object storage, the global resourceVersion, the watch history, and the registry strategies
//! (what create/update/delete do to an object before it is stored).

use std::collections::{BTreeMap, VecDeque};

use serde_json::{Map, Value, json};

use crate::error::{ApiError, resource_details};
use crate::resource::{ResourceDef, builtins};
use crate::select::Selector;

/// The real limit on a ConfigMap's `data` plus `binaryData` (`MaxSecretSize`).
pub(crate) const CONFIGMAP_MAX_BYTES: usize = 1024 * 1024;
/// The real limit on the total size of `metadata.annotations`.
const ANNOTATIONS_MAX_BYTES: usize = 256 * 1024;

/// (storage key of the resource, namespace or `""`, name)
type Key = (String, String, String);

/// What happened to an object, as a watch reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ChangeType {
    Added,
    Modified,
    Deleted,
}

impl ChangeType {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Added => "ADDED",
            Self::Modified => "MODIFIED",
            Self::Deleted => "DELETED",
        }
    }
}

/// One entry of the watch history.
#[derive(Debug, Clone)]
pub(crate) struct Change {
    pub(crate) rv: u64,
    pub(crate) resource: String,
    pub(crate) namespace: String,
    pub(crate) change: ChangeType,
    /// The object after the change (for `Deleted`: its last state, carrying the deletion's resourceVersion).
    pub(crate) object: Value,
    /// The object before the change (`None` for `Added`).
    pub(crate) old: Option<Value>,
}

/// A watch start or continue token that is older than the retained history.
#[derive(Debug)]
pub(crate) struct Expired {
    pub(crate) requested: u64,
    pub(crate) oldest: u64,
}

/// Tunables fixed at start.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    pub(crate) history: usize,
    pub(crate) max_object_bytes: usize,
}

/// Options common to the write verbs.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct WriteOpts {
    pub(crate) dry_run: bool,
    /// Write to the `status` subresource.
    pub(crate) status: bool,
}

#[derive(Debug)]
pub(crate) struct Store {
    resources: Vec<ResourceDef>,
    objects: BTreeMap<Key, Value>,
    rv: u64,
    history: VecDeque<Change>,
    /// Every change with `rv > floor` is in `history`.
    floor: u64,
    limits: Limits,
    counter: u64,
    seed: u64,
}

impl Store {
    pub(crate) fn new(limits: Limits) -> Self {
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        Self {
            resources: builtins(),
            objects: BTreeMap::new(),
            // A real server never reports 0, which list and watch read as "any version".
            rv: 1,
            history: VecDeque::new(),
            floor: 1,
            limits,
            counter: 0,
            seed,
        }
    }

    pub(crate) fn rv(&self) -> u64 {
        self.rv
    }

    pub(crate) fn register(&mut self, def: ResourceDef) {
        self.resources.retain(|r| {
            !(r.group == def.group && r.version == def.version && r.plural == def.plural)
        });
        self.resources.push(def);
    }

    pub(crate) fn lookup(&self, group: &str, version: &str, plural: &str) -> Option<ResourceDef> {
        self.resources
            .iter()
            .find(|r| r.group == group && r.version == version && r.plural == plural)
            .cloned()
    }

    /// Resolves `plural` or `plural.group`; a bare plural prefers the core group.
    pub(crate) fn lookup_name(&self, resource: &str) -> Option<ResourceDef> {
        self.resources
            .iter()
            .find(|r| r.qualified() == resource)
            .or_else(|| self.resources.iter().find(|r| r.plural == resource))
            .cloned()
    }

    fn next_random(&mut self) -> u64 {
        // splitmix64: enough to make uids and generated names unique and unpredictable-looking.
        self.counter += 1;
        let mut z = self
            .seed
            .wrapping_add(self.counter.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn uid(&mut self) -> String {
        let a = self.next_random();
        let b = self.next_random();
        format!(
            "{:08x}-{:04x}-4{:03x}-8{:03x}-{:012x}",
            a >> 32,
            (a >> 16) & 0xffff,
            a & 0xfff,
            (b >> 48) & 0xfff,
            b & 0xffff_ffff_ffff
        )
    }

    fn generated_suffix(&mut self) -> String {
        // The alphabet the real name generator uses (no vowels, no confusable digits).
        const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
        let mut r = self.next_random();
        (0..5)
            .map(|_| {
                let c = ALPHABET[(r % ALPHABET.len() as u64) as usize];
                r /= ALPHABET.len() as u64;
                c as char
            })
            .collect()
    }

    fn key(res: &ResourceDef, ns: &str, name: &str) -> Key {
        let ns = if res.namespaced { ns } else { "" };
        (res.qualified(), ns.to_string(), name.to_string())
    }

    /// The stored object as the given version serves it.
    pub(crate) fn present(res: &ResourceDef, obj: &Value) -> Value {
        let mut obj = obj.clone();
        if let Some(map) = obj.as_object_mut() {
            map.insert("apiVersion".into(), Value::from(res.api_version()));
            map.insert("kind".into(), Value::from(res.kind.as_str()));
        }
        obj
    }

    pub(crate) fn get(&self, res: &ResourceDef, ns: &str, name: &str) -> Result<Value, ApiError> {
        self.objects
            .get(&Self::key(res, ns, name))
            .map(|o| Self::present(res, o))
            .ok_or_else(|| ApiError::not_found(res, name))
    }

    /// Raw access for the test-side inspection API.
    pub(crate) fn raw(&self, res: &ResourceDef, ns: &str, name: &str) -> Option<Value> {
        self.objects.get(&Self::key(res, ns, name)).cloned()
    }

    /// Every stored object of one resource, in (namespace, name) order.
    pub(crate) fn all(&self, res: &ResourceDef) -> Vec<Value> {
        let q = res.qualified();
        self.objects
            .iter()
            .filter(|((r, _, _), _)| *r == q)
            .map(|(_, o)| o.clone())
            .collect()
    }

    /// Matching objects of `res` (all namespaces when `ns` is `None`), in (namespace, name) order.
    pub(crate) fn matching(
        &self,
        res: &ResourceDef,
        ns: Option<&str>,
        selector: &Selector,
    ) -> Vec<Value> {
        let q = res.qualified();
        self.objects
            .iter()
            .filter(|((r, n, _), o)| *r == q && ns.is_none_or(|ns| ns == n) && selector.matches(o))
            .map(|(_, o)| Self::present(res, o))
            .collect()
    }

    pub(crate) fn list(
        &self,
        res: &ResourceDef,
        ns: Option<&str>,
        selector: &Selector,
        limit: Option<usize>,
        continue_token: Option<&str>,
    ) -> Result<Value, ApiError> {
        let q = res.qualified();
        // A continued list is served from the snapshot at the first page's resourceVersion, so the
        // pages are consistent, as etcd-backed pagination is.
        let (at_rv, after, snapshot) = match continue_token {
            Some(token) => {
                let mut parts = token.splitn(3, '/');
                let (Some(rv), Some(cns), Some(cname)) = (parts.next(), parts.next(), parts.next())
                else {
                    return Err(ApiError::bad_request(format!(
                        "invalid continue token {token:?}"
                    )));
                };
                let rv: u64 = rv.parse().map_err(|_| {
                    ApiError::bad_request(format!("invalid continue token {token:?}"))
                })?;
                let snapshot = self.snapshot(&q, rv).map_err(|_| {
                    ApiError::new(
                        410,
                        "Expired",
                        "The provided continue parameter is too old to display a consistent list result. \
                         You can start a new list without the continue parameter.",
                    )
                })?;
                (rv, Some((cns.to_string(), cname.to_string())), snapshot)
            }
            None => {
                let current = self
                    .objects
                    .iter()
                    .filter(|((r, _, _), _)| *r == q)
                    .map(|((_, n, name), o)| ((n.clone(), name.clone()), o.clone()))
                    .collect();
                (self.rv, None, current)
            }
        };
        let mut items: Vec<((String, String), Value)> = snapshot
            .into_iter()
            .filter(|((n, name), o)| {
                ns.is_none_or(|ns| ns == n)
                    && after.as_ref().is_none_or(|a| (n, name) > (&a.0, &a.1))
                    && selector.matches(o)
            })
            .collect();
        let mut meta = Map::new();
        meta.insert("resourceVersion".into(), Value::from(at_rv.to_string()));
        if let Some(limit) = limit.filter(|l| *l > 0 && *l < items.len()) {
            let remaining = items.len() - limit;
            items.truncate(limit);
            if let Some(((n, name), _)) = items.last() {
                meta.insert(
                    "continue".into(),
                    Value::from(format!("{at_rv}/{n}/{name}")),
                );
                meta.insert("remainingItemCount".into(), Value::from(remaining));
            }
        }
        Ok(json!({
            "kind": format!("{}List", res.kind),
            "apiVersion": res.api_version(),
            "metadata": meta,
            "items": items.iter().map(|(_, o)| Self::present(res, o)).collect::<Vec<_>>(),
        }))
    }

    /// The objects of one resource as they were at `rv`, rebuilt by undoing newer history.
    fn snapshot(
        &self,
        resource: &str,
        rv: u64,
    ) -> Result<BTreeMap<(String, String), Value>, Expired> {
        if rv < self.floor {
            return Err(Expired {
                requested: rv,
                oldest: self.floor,
            });
        }
        let mut objects: BTreeMap<(String, String), Value> = self
            .objects
            .iter()
            .filter(|((r, _, _), _)| r == resource)
            .map(|((_, n, name), o)| ((n.clone(), name.clone()), o.clone()))
            .collect();
        for change in self.history.iter().rev().take_while(|c| c.rv > rv) {
            if change.resource != resource {
                continue;
            }
            let key = (
                change.namespace.clone(),
                name_of(&change.object).to_string(),
            );
            match (&change.change, &change.old) {
                (ChangeType::Added, _) => {
                    objects.remove(&key);
                }
                (_, Some(old)) => {
                    objects.insert(key, old.clone());
                }
                (_, None) => {}
            }
        }
        Ok(objects)
    }

    /// Changes to `resource` after `rv`, oldest first.
    pub(crate) fn changes_since(&self, resource: &str, rv: u64) -> Result<Vec<Change>, Expired> {
        if rv < self.floor {
            return Err(Expired {
                requested: rv,
                oldest: self.floor,
            });
        }
        let start = self.history.partition_point(|c| c.rv <= rv);
        Ok(self
            .history
            .range(start..)
            .filter(|c| c.resource == resource)
            .cloned()
            .collect())
    }

    /// Forgets the whole watch history, as an etcd compaction plus a watch-cache rollover would.
    pub(crate) fn compact(&mut self) {
        self.history.clear();
        self.floor = self.rv;
    }

    fn commit(
        &mut self,
        res: &ResourceDef,
        key: Key,
        object: Option<Value>,
        change: ChangeType,
    ) -> Value {
        self.rv += 1;
        let rv = self.rv;
        let old = self.objects.get(&key).cloned();
        let mut stored = match object {
            Some(o) => o,
            None => old.clone().unwrap_or(Value::Null),
        };
        set_meta(&mut stored, "resourceVersion", Value::from(rv.to_string()));
        if change == ChangeType::Deleted {
            self.objects.remove(&key);
        } else {
            self.objects.insert(key.clone(), stored.clone());
        }
        self.history.push_back(Change {
            rv,
            resource: res.qualified(),
            namespace: key.1,
            change,
            object: stored.clone(),
            old,
        });
        while self.history.len() > self.limits.history {
            if let Some(dropped) = self.history.pop_front() {
                self.floor = dropped.rv;
            }
        }
        stored
    }

    /// Plants an object as-is (test hook): no validation, no strategy; system fields are filled if absent.
    pub(crate) fn put_raw(&mut self, res: &ResourceDef, mut obj: Value) -> Result<Value, String> {
        let name = name_of(&obj).to_string();
        if name.is_empty() {
            return Err("metadata.name is required".into());
        }
        let ns = namespace_of(&obj).to_string();
        if res.namespaced && ns.is_empty() {
            return Err("metadata.namespace is required for a namespaced resource".into());
        }
        let key = Self::key(res, &ns, &name);
        let existing = self.objects.get(&key).cloned();
        if let Some(map) = obj.as_object_mut() {
            map.entry("apiVersion")
                .or_insert_with(|| Value::from(res.api_version()));
            map.entry("kind")
                .or_insert_with(|| Value::from(res.kind.as_str()));
        }
        if meta_str(&obj, "uid").is_empty() {
            let uid = existing
                .as_ref()
                .map(|e| meta_str(e, "uid").to_string())
                .unwrap_or_else(|| self.uid());
            set_meta(&mut obj, "uid", Value::from(uid));
        }
        if meta_str(&obj, "creationTimestamp").is_empty() {
            set_meta(&mut obj, "creationTimestamp", Value::from(now()));
        }
        let change = if existing.is_some() {
            ChangeType::Modified
        } else {
            ChangeType::Added
        };
        Ok(self.commit(res, key, Some(obj), change))
    }

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
        let key = Self::key(res, ns, name);
        let Some(old) = self.objects.get(&key).cloned() else {
            return Err(ApiError::not_found(res, name));
        };
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
            return Err(ApiError::precondition(res, name, "UID", want_uid, have_uid));
        }
        let want_rv = meta_str(&new, "resourceVersion");
        if want_rv.is_empty() {
            if !unconditional_allowed {
                return Err(ApiError::invalid(
                    res,
                    name,
                    "metadata.resourceVersion",
                    "FieldValueInvalid",
                    "Invalid value: 0x0: must be specified for an update",
                ));
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
                             found new finalizers {added:?}"
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
        let key = Self::key(res, ns, name);
        let Some(old) = self.objects.get(&key).cloned() else {
            return Err(ApiError::not_found(res, name));
        };
        let pre = |field: &str| {
            options
                .pointer(&format!("/preconditions/{field}"))
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
        };
        if let Some(uid) = pre("uid")
            && uid != meta_str(&old, "uid")
        {
            return Err(ApiError::precondition(
                res,
                name,
                "UID",
                uid,
                meta_str(&old, "uid"),
            ));
        }
        if let Some(rv) = pre("resourceVersion")
            && rv != meta_str(&old, "resourceVersion")
        {
            return Err(ApiError::precondition(
                res,
                name,
                "ResourceVersion",
                rv,
                meta_str(&old, "resourceVersion"),
            ));
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

    /// Sets `.status` of a stored object, bypassing preconditions (test hook).
    pub(crate) fn set_status(
        &mut self,
        res: &ResourceDef,
        ns: &str,
        name: &str,
        status: Value,
    ) -> Result<Value, ApiError> {
        let key = Self::key(res, ns, name);
        let Some(mut obj) = self.objects.get(&key).cloned() else {
            return Err(ApiError::not_found(res, name));
        };
        if let Some(map) = obj.as_object_mut() {
            map.insert("status".into(), status);
        }
        Ok(self.commit(res, key, Some(obj), ChangeType::Modified))
    }

    fn validate(&self, res: &ResourceDef, name: &str, obj: &Value) -> Result<(), ApiError> {
        if !is_dns_subdomain(name) {
            return Err(ApiError::invalid(
                res,
                name,
                "metadata.name",
                "FieldValueInvalid",
                &format!(
                    "Invalid value: {name:?}: a lowercase RFC 1123 subdomain must consist of lower case \
                     alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character"
                ),
            ));
        }
        if let Some(labels) = obj.pointer("/metadata/labels").and_then(Value::as_object) {
            for (key, value) in labels {
                let value = value.as_str().unwrap_or_default();
                if !is_qualified_name(key) {
                    return Err(ApiError::invalid(
                        res,
                        name,
                        "metadata.labels",
                        "FieldValueInvalid",
                        &format!(
                            "Invalid value: {key:?}: name part must consist of alphanumeric characters, '-', '_' or '.'"
                        ),
                    ));
                }
                if !is_label_value(value) {
                    return Err(ApiError::invalid(
                        res,
                        name,
                        "metadata.labels",
                        "FieldValueInvalid",
                        &format!(
                            "Invalid value: {value:?}: a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character, at most 63 characters"
                        ),
                    ));
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
                    &format!("Too long: must have at most {ANNOTATIONS_MAX_BYTES} bytes"),
                ));
            }
        }
        if !res.custom && res.group.is_empty() && res.plural == "configmaps" {
            validate_configmap(res, name, obj)?;
        }
        let size = serde_json::to_vec(obj).map_or(0, |v| v.len());
        if size > self.limits.max_object_bytes {
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
            total += key.len()
                + if field == "binaryData" {
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
            &format!("Too long: must have at most {CONFIGMAP_MAX_BYTES} bytes"),
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

fn check_object(obj: &Value) -> Result<(), ApiError> {
    if !obj.is_object() {
        return Err(ApiError::bad_request("the body must be a JSON object"));
    }
    if obj.get("metadata").is_some_and(|m| !m.is_object()) {
        return Err(ApiError::bad_request("metadata must be an object"));
    }
    Ok(())
}

fn check_namespace(res: &ResourceDef, ns: &str, obj: &Value) -> Result<(), ApiError> {
    let body_ns = meta_str(obj, "namespace");
    if res.namespaced && !body_ns.is_empty() && body_ns != ns {
        return Err(ApiError::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        ));
    }
    Ok(())
}

fn finalizers(obj: &Value) -> Vec<String> {
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

fn meta_str<'a>(obj: &'a Value, field: &str) -> &'a str {
    obj.get("metadata")
        .and_then(|m| m.get(field))
        .and_then(Value::as_str)
        .unwrap_or("")
}

fn set_meta(obj: &mut Value, field: &str, value: Value) {
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

fn remove_meta(obj: &mut Value, field: &str) {
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
