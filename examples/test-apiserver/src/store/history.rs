//! Lists and the watch history: every change is kept (up to the history
//! limit), so a list can be continued from the snapshot its first page saw
//! and a watch can resume from an older resourceVersion (or get `410`).

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::Store;
use super::meta::name_of;
use crate::error::ApiError;
use crate::resource::ResourceDef;
use crate::select::Selector;

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

impl Store {
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
                // The real server cannot count what a selector would keep, so it says nothing.
                if selector.is_empty() {
                    meta.insert("remainingItemCount".into(), Value::from(remaining));
                }
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
}
