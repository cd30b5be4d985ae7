//! HTTP plumbing: routing, verbs, patch content types, watch streaming, fault application.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Limited};
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::header::{CONTENT_TYPE, HeaderValue, RETRY_AFTER};
use hyper::{Method, Request, Response, StatusCode};
use serde_json::{Value, json};
use tokio::sync::{mpsc, watch};

use crate::error::ApiError;
use crate::faults::{Action, Call, Faults, LostReply, RequestRecord, Requests, Verb};
use crate::patch::{JsonPatchError, json_patch, merge_patch};
use crate::resource::ResourceDef;
use crate::select::Selector;
use crate::store::{ChangeType, Store, WriteOpts};

/// The real API server's request body limit (`MaxRequestBodyBytes`).
const MAX_BODY_BYTES: usize = 3 * 1024 * 1024;

/// State shared by the accept loop, every connection, every watch and the test-side handle.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) store: Mutex<Store>,
    /// Carries the latest resourceVersion; watchers wake on every change.
    pub(crate) changes: watch::Sender<u64>,
    pub(crate) shutdown: watch::Sender<bool>,
    pub(crate) faults: Faults,
    pub(crate) requests: Requests,
    pub(crate) bookmark_interval: Duration,
}

impl Shared {
    pub(crate) fn store(&self) -> MutexGuard<'_, Store> {
        // A panic while holding the lock cannot leave the map half-written (every write is a
        // single insert/remove), so a poisoned lock is still consistent.
        self.store.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn notify(&self) {
        let rv = self.store().rv();
        self.changes.send_replace(rv);
    }
}

/// A response body: either complete, or a stream of watch event lines (sent chunked).
pub(crate) enum ApiBody {
    Full(Option<Bytes>),
    Stream(mpsc::Receiver<Bytes>),
}

impl Body for ApiBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match self.get_mut() {
            Self::Full(bytes) => Poll::Ready(bytes.take().map(|b| Ok(Frame::data(b)))),
            Self::Stream(rx) => rx
                .poll_recv(cx)
                .map(|line| line.map(|b| Ok(Frame::data(b)))),
        }
    }

    fn is_end_stream(&self) -> bool {
        matches!(self, Self::Full(None))
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            Self::Full(Some(b)) => SizeHint::with_exact(b.len() as u64),
            Self::Full(None) => SizeHint::with_exact(0),
            Self::Stream(_) => SizeHint::default(),
        }
    }
}

/// Returned to hyper to make it close the connection without answering.
#[derive(Debug)]
pub(crate) struct DropConnection;

impl std::fmt::Display for DropConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("injected fault: connection dropped after the request was applied")
    }
}

impl std::error::Error for DropConnection {}

fn json_response(code: u16, body: &Value) -> Response<ApiBody> {
    let bytes = serde_json::to_vec(body).unwrap_or_default();
    let mut response = Response::new(ApiBody::Full(Some(Bytes::from(bytes))));
    *response.status_mut() =
        StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

fn error_response(err: &ApiError) -> Response<ApiBody> {
    let mut response = json_response(err.code, &err.to_status());
    if let Some(secs) = err.retry_after {
        response
            .headers_mut()
            .insert(RETRY_AFTER, HeaderValue::from(secs));
    }
    response
}

fn not_served() -> ApiError {
    let mut err = ApiError::new(
        404,
        "NotFound",
        "the server could not find the requested resource",
    );
    err.details = Some(Box::new(json!({})));
    err
}

fn method_not_allowed() -> ApiError {
    ApiError::new(
        405,
        "MethodNotAllowed",
        "the server does not allow this method on the requested resource",
    )
}

/// What a resource path addresses.
struct Target {
    res: ResourceDef,
    /// `None` for cluster-scoped resources and all-namespace collections.
    namespace: Option<String>,
    name: Option<String>,
    status: bool,
}

enum Route {
    Version,
    Resource(Target),
    /// A path the real server answers with a 404 for this object.
    Missing(ResourceDef, String),
    Unknown,
}

fn route(shared: &Shared, path: &str) -> Route {
    let segs: Vec<String> = path
        .split('/')
        .filter(|s| !s.is_empty())
        .map(percent_decode)
        .collect();
    let segs: Vec<&str> = segs.iter().map(String::as_str).collect();
    let (group, version, rest) = match segs.as_slice() {
        ["version"] => return Route::Version,
        ["api", "v1", rest @ ..] => ("", "v1", rest),
        ["apis", group, version, rest @ ..] => (*group, *version, rest),
        _ => return Route::Unknown,
    };
    let (namespace, rest) = match rest {
        ["namespaces", ns, rest @ ..] if !rest.is_empty() => (Some((*ns).to_string()), rest),
        _ => (None, rest),
    };
    let (plural, name, sub) = match rest {
        [plural] => (*plural, None, None),
        [plural, name] => (*plural, Some((*name).to_string()), None),
        [plural, name, sub] => (*plural, Some((*name).to_string()), Some(*sub)),
        _ => return Route::Unknown,
    };
    let Some(res) = shared.store().lookup(group, version, plural) else {
        return Route::Unknown;
    };
    let scope_ok = if res.namespaced {
        namespace.is_some() || name.is_none()
    } else {
        namespace.is_none()
    };
    let sub_ok = sub.is_none_or(|s| s == "status" && res.status_subresource);
    if !scope_ok {
        return Route::Unknown;
    }
    if !sub_ok {
        // The custom-resource handler answers an unknown subresource of an object with a 404
        // naming the object (whether it exists or not); built-in types with the generic one.
        return match name {
            Some(name) if res.custom => Route::Missing(res, name),
            _ => Route::Unknown,
        };
    }
    Route::Resource(Target {
        res,
        namespace,
        name,
        status: sub.is_some(),
    })
}

fn percent_decode(s: &str) -> String {
    let hex = |b: u8| char::from(b).to_digit(16);
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => match (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                (Some(hi), Some(lo)) => {
                    out.push((hi * 16 + lo) as u8);
                    i += 2;
                }
                _ => out.push(b'%'),
            },
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn parse_query(query: Option<&str>) -> Vec<(String, String)> {
    query
        .unwrap_or("")
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|pair| match pair.split_once('=') {
            Some((k, v)) => (percent_decode(k), percent_decode(v)),
            None => (percent_decode(pair), String::new()),
        })
        .collect()
}

fn param<'a>(query: &'a [(String, String)], key: &str) -> Option<&'a str> {
    query
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

fn verb_of(method: &Method, has_name: bool, watch: bool) -> Option<Verb> {
    Some(match *method {
        Method::GET if has_name => Verb::Get,
        Method::GET if watch => Verb::Watch,
        Method::GET => Verb::List,
        Method::POST => Verb::Create,
        Method::PUT => Verb::Update,
        Method::PATCH => Verb::Patch,
        Method::DELETE => Verb::Delete,
        _ => return None,
    })
}

/// Entry point for every HTTP request.
pub(crate) async fn handle(
    shared: Arc<Shared>,
    req: Request<Incoming>,
) -> Result<Response<ApiBody>, DropConnection> {
    let (parts, body) = req.into_parts();
    let query = parse_query(parts.uri.query());
    let watch = matches!(param(&query, "watch"), Some("true" | "1"));
    let route = route(&shared, parts.uri.path());
    let target = match &route {
        Route::Resource(t) => Some(t),
        _ => None,
    };
    let verb = verb_of(
        &parts.method,
        target.is_some_and(|t| t.name.is_some()),
        watch,
    );
    let call = Call {
        verb: verb.unwrap_or(Verb::Get),
        plural: target.map_or("", |t| t.res.plural.as_str()),
        group: target.map_or("", |t| t.res.group.as_str()),
        subresource: target.and_then(|t| t.status.then_some("status")),
        namespace: target.and_then(|t| t.namespace.as_deref()),
        name: target.and_then(|t| t.name.as_deref()),
    };
    // Every request is logged, the refused oversized ones included.
    let record = |body: bytes::Bytes| {
        shared.requests.record(RequestRecord {
            verb: call.verb,
            resource: match call.subresource {
                Some(sub) => format!("{}/{sub}", call.plural),
                None => call.plural.to_string(),
            },
            group: call.group.to_string(),
            namespace: call.namespace.map(str::to_string),
            name: call.name.map(str::to_string),
            method_path: format!(
                "{} {}",
                parts.method,
                parts.uri.path_and_query().map_or("/", |p| p.as_str())
            ),
            content_type: parts
                .headers
                .get(hyper::header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned),
            body,
        });
    };
    let body = match Limited::new(body, MAX_BODY_BYTES).collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(err) if err.is::<http_body_util::LengthLimitError>() => {
            record(bytes::Bytes::new());
            return Ok(error_response(&ApiError::new(
                413,
                "RequestEntityTooLarge",
                format!("Request entity too large: limit is {MAX_BODY_BYTES}"),
            )));
        }
        Err(err) => {
            record(bytes::Bytes::new());
            return Ok(error_response(&ApiError::bad_request(format!(
                "reading the body: {err}"
            ))));
        }
    };
    record(body.clone());
    let action = match target {
        Some(_) => shared.faults.check(&call),
        None => None,
    };
    let (target, verb) = match (route, verb) {
        (Route::Version, _) => {
            return Ok(json_response(
                200,
                &json!({
                    "major": "1", "minor": "33", "gitVersion": "v1.33.0-test-apiserver",
                    "gitCommit": "", "gitTreeState": "clean", "buildDate": "",
                    "goVersion": "", "compiler": "gc", "platform": "linux/amd64",
                }),
            ));
        }
        (Route::Unknown, _) => return Ok(error_response(&not_served())),
        (Route::Missing(res, name), _) => {
            return Ok(error_response(&ApiError::not_found(&res, &name)));
        }
        (Route::Resource(_), None) => return Ok(error_response(&method_not_allowed())),
        (Route::Resource(target), Some(verb)) => (target, verb),
    };
    let content_type = parts
        .headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let work = async move {
        match action {
            Some(Action::Respond {
                code,
                reason,
                message,
                retry_after,
            }) => {
                let mut err = ApiError::new(code, &reason, message);
                err.retry_after = retry_after;
                return Ok(error_response(&err));
            }
            Some(Action::Delay(by)) => tokio::time::sleep(by).await,
            _ => {}
        }
        if verb == Verb::Watch {
            return Ok(start_watch(&shared, &target, &query));
        }
        let result = dispatch(&shared, &target, verb, &query, &content_type, &body);
        shared.notify();
        match action {
            Some(Action::LostReply(LostReply::InternalError)) => {
                Ok(error_response(&ApiError::internal(
                    "injected fault: the request was applied but its reply was lost",
                )))
            }
            Some(Action::LostReply(LostReply::DropConnection)) => Err(DropConnection),
            _ => Ok(match result {
                Ok((code, value)) => json_response(code, &value),
                Err(err) => error_response(&err),
            }),
        }
    };
    // Run on its own task so a client that hangs up mid-delay does not cancel the write.
    match tokio::spawn(work).await {
        Ok(result) => result,
        Err(err) => Ok(error_response(&ApiError::internal(format!(
            "handler failed: {err}"
        )))),
    }
}

fn parse_body(res: &ResourceDef, body: &[u8]) -> Result<Value, ApiError> {
    serde_json::from_slice(body).map_err(|e| {
        // Go's decoder words a truncated body this way, and quotes the body; other syntax
        // errors keep serde's wording (listed in the README).
        let detail = if e.is_eof() {
            format!(
                "unexpected end of JSON input ({})",
                String::from_utf8_lossy(body)
            )
        } else {
            e.to_string()
        };
        ApiError::bad_request(format!(
            "the object provided is unrecognized (must be of type {}): couldn't get version/kind; \
             json parse error: {detail}",
            res.kind
        ))
    })
}

fn dispatch(
    shared: &Shared,
    target: &Target,
    verb: Verb,
    query: &[(String, String)],
    content_type: &str,
    body: &[u8],
) -> Result<(u16, Value), ApiError> {
    let res = &target.res;
    let ns = target.namespace.as_deref().unwrap_or("");
    let name = target.name.as_deref().unwrap_or("");
    let opts = WriteOpts {
        dry_run: match param(query, "dryRun") {
            None | Some("") => false,
            Some("All") => true,
            Some(other) => {
                return Err(ApiError::bad_request(format!(
                    "Invalid dry run value: {other}"
                )));
            }
        },
        status: target.status,
    };
    if res.namespaced && target.namespace.is_none() && verb != Verb::List {
        return Err(method_not_allowed());
    }
    match verb {
        Verb::Get => shared.store().get(res, ns, name).map(|o| (200, o)),
        Verb::List => {
            let selector =
                Selector::parse(param(query, "labelSelector"), param(query, "fieldSelector"))
                    .map_err(ApiError::bad_request)?;
            let limit = match param(query, "limit").filter(|l| !l.is_empty()) {
                Some(l) => Some(
                    l.parse::<usize>()
                        .map_err(|_| ApiError::bad_request(format!("invalid limit {l:?}")))?,
                ),
                None => None,
            };
            let continue_token = param(query, "continue").filter(|c| !c.is_empty());
            shared
                .store()
                .list(
                    res,
                    target.namespace.as_deref(),
                    &selector,
                    limit,
                    continue_token,
                )
                .map(|l| (200, l))
        }
        Verb::Create => {
            let obj = parse_body(res, body)?;
            shared.store().create(res, ns, obj, opts).map(|o| (201, o))
        }
        Verb::Update => {
            let obj = parse_body(res, body)?;
            shared
                .store()
                .update(res, ns, name, obj, opts, res.allow_unconditional_update())
                .map(|o| (200, o))
        }
        Verb::Patch => patch(shared, target, query, content_type, body, opts),
        Verb::Delete => {
            let options = if body.iter().all(u8::is_ascii_whitespace) {
                json!({})
            } else {
                serde_json::from_slice(body)
                    .map_err(|e| ApiError::bad_request(format!("invalid DeleteOptions: {e}")))?
            };
            shared
                .store()
                .delete(res, ns, name, &options, opts)
                .map(|o| (200, o))
        }
        Verb::Watch => Err(ApiError::internal("watch is not dispatched here")),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PatchKind {
    Merge,
    Strategic,
    Json,
    Apply,
}

fn patch(
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

fn has_directive(value: &Value) -> bool {
    match value {
        Value::Object(map) => map
            .iter()
            .any(|(k, v)| k.starts_with('$') || has_directive(v)),
        Value::Array(items) => items.iter().any(has_directive),
        _ => false,
    }
}

fn start_watch(
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

async fn sleep_until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

/// How one stored change looks to a watcher with a namespace and selector: objects that start or
/// stop matching appear as ADDED or DELETED, as in the real watch cache.
fn render(
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
