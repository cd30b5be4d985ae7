//! Object storage and the global resourceVersion: what is stored under
//! which key, and the one place a change is committed (bumping the
//! resourceVersion and appending to the watch history).
//!
//! - [`history`]: lists (paginated, consistent) and the watch history;
//! - [`strategy`]: the registry strategies, what create, update and delete
//!   do to an object before it is stored;
//! - [`validate`]: the validation the real API server applies;
//! - [`meta`]: reading and writing `metadata` fields of raw objects.

mod history;
mod meta;
mod strategy;
mod validate;

use std::collections::{BTreeMap, VecDeque};

use serde_json::Value;

use crate::error::ApiError;
use crate::resource::{ResourceDef, builtins};
use crate::select::Selector;

pub(crate) use history::{Change, ChangeType};
pub(crate) use meta::{name_of, namespace_of, now};

use meta::{meta_str, set_meta};

/// (storage key of the resource, namespace or `""`, name)
type Key = (String, String, String);

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

    /// The stored object under `name` (as stored, not as a version serves it) with its key: what
    /// every change to an existing object starts from, or 404 when there is none.
    fn existing(&self, res: &ResourceDef, ns: &str, name: &str) -> Result<(Key, Value), ApiError> {
        let key = Self::key(res, ns, name);
        match self.objects.get(&key).cloned() {
            Some(obj) => Ok((key, obj)),
            None => Err(ApiError::not_found(res, name)),
        }
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

    /// Sets `.status` of a stored object, bypassing preconditions (test hook).
    pub(crate) fn set_status(
        &mut self,
        res: &ResourceDef,
        ns: &str,
        name: &str,
        status: Value,
    ) -> Result<Value, ApiError> {
        let (key, mut obj) = self.existing(res, ns, name)?;
        if let Some(map) = obj.as_object_mut() {
            map.insert("status".into(), status);
        }
        Ok(self.commit(res, key, Some(obj), ChangeType::Modified))
    }
}
