//! Watch streams: replay from a resourceVersion, live changes, bookmarks, selectors.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use hyper::Response;
use hyper::header::{CONTENT_TYPE, HeaderValue};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::error::ApiError;
use crate::resource::ResourceDef;
use crate::select::Selector;
use crate::store::{ChangeType, Store};

use super::Shared;
use super::body::{ApiBody, error_response};
use super::routing::{Target, param};

pub(super) fn start_watch(
    shared: &Arc<Shared>,
    target: &Target,
    query: &[(String, String)],
) -> Response<ApiBody> {
    let selector =
        match Selector::parse(param(query, "labelSelector"), param(query, "fieldSelector")) {
            Ok(s) => s,
            Err(e) => return error_response(&ApiError::bad_request(e)),
        };
    let bookmarks = param(query, "allowWatchBookmarks") == Some("true");
    let send_initial = param(query, "sendInitialEvents") == Some("true");
    let timeout = match param(query, "timeoutSeconds").filter(|t| !t.is_empty()) {
        Some(t) => match t.parse::<u64>() {
            Ok(secs) => Some(Duration::from_secs(secs)),
            Err(_) => {
                return error_response(&ApiError::bad_request(format!(
                    "invalid timeoutSeconds {t:?}"
                )));
            }
        },
        None => None,
    };
    let requested = param(query, "resourceVersion").filter(|rv| !rv.is_empty() && *rv != "0");
    let requested = match requested.map(str::parse::<u64>) {
        Some(Ok(rv)) => Some(rv),
        Some(Err(_)) => {
            return error_response(&ApiError::bad_request("invalid resourceVersion for watch"));
        }
        None => None,
    };
    // Subscribe before reading the store so no change between the read and the loop is missed.
    let mut changes = shared.changes.subscribe();
    let mut shutdown = shared.shutdown.subscribe();
    let res = target.res.clone();
    let namespace = target.namespace.clone();
    let (initial, start_rv) = {
        let store = shared.store();
        // No resourceVersion (or "0"), or a streaming list: synthetic ADDED events for the current state.
        if requested.is_none() || send_initial {
            (
                store.matching(&res, namespace.as_deref(), &selector),
                store.rv(),
            )
        } else {
            (Vec::new(), requested.unwrap_or_default())
        }
    };
    let (tx, rx) = mpsc::channel::<Bytes>(64);
    let shared = Arc::clone(shared);
    let bookmark_interval = shared.bookmark_interval;
    tokio::spawn(async move {
        let send = |kind: &str, object: Value| {
            let mut line =
                serde_json::to_vec(&json!({ "type": kind, "object": object })).unwrap_or_default();
            line.push(b'\n');
            Bytes::from(line)
        };
        let bookmark = |rv: u64, initial_end: bool| {
            let mut meta = json!({ "resourceVersion": rv.to_string() });
            if initial_end {
                meta["annotations"] = json!({ "k8s.io/initial-events-end": "true" });
            }
            send(
                "BOOKMARK",
                json!({ "kind": res.kind, "apiVersion": res.api_version(), "metadata": meta }),
            )
        };
        for obj in initial {
            if tx.send(send("ADDED", obj)).await.is_err() {
                return;
            }
        }
        if send_initial && bookmarks && tx.send(bookmark(start_rv, true)).await.is_err() {
            return;
        }
        let deadline = timeout.map(|t| tokio::time::Instant::now() + t);
        let mut ticker = tokio::time::interval(bookmark_interval);
        ticker.tick().await;
        let qualified = res.qualified();
        let mut last = start_rv;
        loop {
            let batch = {
                let store = shared.store();
                store
                    .changes_since(&qualified, last)
                    .map(|c| (c, store.rv()))
            };
            match batch {
                Err(expired) => {
                    let status = ApiError::new(
                        410,
                        "Expired",
                        format!(
                            "too old resource version: {} ({})",
                            expired.requested, expired.oldest
                        ),
                    );
                    let _ = tx.send(send("ERROR", status.to_status())).await;
                    return;
                }
                Ok((batch, current)) => {
                    for change in batch {
                        if let Some((kind, obj)) =
                            render(&res, namespace.as_deref(), &selector, &change)
                            && tx.send(send(kind, obj)).await.is_err()
                        {
                            return;
                        }
                    }
                    // Everything up to `current` has been seen, so bookmarks may carry it.
                    last = last.max(current);
                }
            }
            tokio::select! {
                changed = changes.changed() => if changed.is_err() { return },
                _ = ticker.tick(), if bookmarks => {
                    if tx.send(bookmark(last, false)).await.is_err() {
                        return;
                    }
                }
                () = sleep_until(deadline) => {
                    if bookmarks {
                        let _ = tx.send(bookmark(last, false)).await;
                    }
                    return;
                }
                _ = shutdown.changed() => return,
                () = tx.closed() => return,
            }
        }
    });
    let mut response = Response::new(ApiBody::Stream(rx));
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

pub(super) async fn sleep_until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

/// How one stored change looks to a watcher with a namespace and selector: objects that start or
/// stop matching appear as ADDED or DELETED, as in the real watch cache.
pub(super) fn render(
    res: &ResourceDef,
    namespace: Option<&str>,
    selector: &Selector,
    change: &crate::store::Change,
) -> Option<(&'static str, Value)> {
    if namespace.is_some_and(|ns| ns != change.namespace) {
        return None;
    }
    let now = selector.matches(&change.object);
    let before = change.old.as_ref().is_some_and(|o| selector.matches(o));
    let kind = match change.change {
        ChangeType::Added => now.then_some(ChangeType::Added),
        ChangeType::Deleted => now.then_some(ChangeType::Deleted),
        ChangeType::Modified => match (before, now) {
            (true, true) => Some(ChangeType::Modified),
            (false, true) => Some(ChangeType::Added),
            (true, false) => Some(ChangeType::Deleted),
            (false, false) => None,
        },
    }?;
    Some((kind.as_str(), Store::present(res, &change.object)))
}
