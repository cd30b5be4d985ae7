//! HTTP plumbing: routing, verbs, patch content types, watch streaming, fault application.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use hyper::header::CONTENT_TYPE;
use hyper::{Request, Response};
use serde_json::{Value, json};
use tokio::sync::watch;

use crate::error::ApiError;
use crate::faults::{Action, Call, Faults, LostReply, RequestRecord, Requests, Verb};
use crate::resource::ResourceDef;
use crate::select::Selector;
use crate::store::{Store, WriteOpts};

mod body;
mod patch;
mod routing;
mod stream;

use body::{
    ApiBody, DropConnection, error_response, json_response, method_not_allowed, not_served,
};
use patch::patch;
use routing::{Route, Target, param, parse_query, route, verb_of};
use stream::start_watch;

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
