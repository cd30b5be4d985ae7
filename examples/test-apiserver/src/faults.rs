//! Programmable fault injection and the request log.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// A Kubernetes API verb, named as RBAC names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Verb {
    /// `GET` of one object.
    Get,
    /// `GET` of a collection.
    List,
    /// `GET` of a collection with `watch=true`.
    Watch,
    /// `POST`.
    Create,
    /// `PUT` (replace).
    Update,
    /// `PATCH`, any content type, including server-side apply.
    Patch,
    /// `DELETE` of one object.
    Delete,
}

/// Which of the matching calls a [`FaultRule`] fires on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum When {
    /// Every matching call.
    Always,
    /// Only the Nth matching call counted from injection (1-based).
    Nth(u64),
    /// The next K matching calls.
    Times(u64),
}

/// How a "lost reply" is lost after its effect was stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LostReply {
    /// Answer 500 `InternalError` instead of the real result.
    InternalError,
    /// Close the connection without any response.
    DropConnection,
}

/// What a firing [`FaultRule`] does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Answer with a `Status` failure instead of handling the request (nothing is stored).
    Respond {
        /// HTTP status code, e.g. 429, 500, 503, 409, 422.
        code: u16,
        /// The `Status.reason`, e.g. `TooManyRequests`, `InternalError`, `ServiceUnavailable`, `Conflict`.
        reason: String,
        /// The `Status.message`.
        message: String,
        /// Sent as the `Retry-After` header (seconds) and `details.retryAfterSeconds`.
        retry_after: Option<u64>,
    },
    /// Wait this long, then handle the request normally.
    ///
    /// The request is handled after the delay even if the client has given up by then, as a real
    /// server that had already accepted the write would.
    Delay(Duration),
    /// Handle the request (its effect is stored and watchers see it), then lose the reply.
    LostReply(LostReply),
}

/// One fault-injection rule: which calls it matches, on which of them it fires, and what it does.
///
/// Build with [`FaultRule::on`], narrow with [`name`](Self::name)/[`namespace`](Self::namespace),
/// pick the calls with [`nth`](Self::nth)/[`times`](Self::times)/[`once`](Self::once) (default:
/// every call), and set the action (default: 500 `InternalError`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FaultRule {
    verb: Option<Verb>,
    resource: String,
    name: Option<String>,
    namespace: Option<String>,
    when: When,
    action: Action,
}

impl FaultRule {
    /// Matches `verb` on `resource`.
    ///
    /// `resource` is the plural (`"configmaps"`), optionally group-qualified
    /// (`"leases.coordination.k8s.io"`), with `/status` for the status subresource
    /// (`"jobs/status"`), or `"*"` for every resource.
    pub fn on(verb: Verb, resource: &str) -> Self {
        Self {
            verb: Some(verb),
            resource: resource.to_string(),
            name: None,
            namespace: None,
            when: When::Always,
            action: Action::Respond {
                code: 500,
                reason: "InternalError".into(),
                message: "injected fault".into(),
                retry_after: None,
            },
        }
    }

    /// Matches every verb on `resource` (same spelling as [`FaultRule::on`]).
    pub fn on_any_verb(resource: &str) -> Self {
        Self {
            verb: None,
            ..Self::on(Verb::Get, resource)
        }
    }

    /// Only calls on the object with this name.
    pub fn name(mut self, name: &str) -> Self {
        self.name = Some(name.to_string());
        self
    }

    /// Only calls in this namespace.
    pub fn namespace(mut self, namespace: &str) -> Self {
        self.namespace = Some(namespace.to_string());
        self
    }

    /// Fires on the Nth matching call only (1-based, counted from injection).
    pub fn nth(self, n: u64) -> Self {
        self.when(When::Nth(n))
    }

    /// Fires on the next `k` matching calls.
    pub fn times(self, k: u64) -> Self {
        self.when(When::Times(k))
    }

    /// Fires on the next matching call only.
    pub fn once(self) -> Self {
        self.times(1)
    }

    /// Fires on every matching call (the default).
    pub fn always(self) -> Self {
        self.when(When::Always)
    }

    /// Sets when the rule fires; the setters above name each choice.
    fn when(mut self, when: When) -> Self {
        self.when = when;
        self
    }

    /// Answers `code` with `reason` and a generic message.
    pub fn respond(self, code: u16, reason: &str) -> Self {
        self.action(Action::Respond {
            code,
            reason: reason.to_string(),
            message: format!("injected fault: {reason}"),
            retry_after: None,
        })
    }

    /// Answers 429 `TooManyRequests` with `Retry-After: secs`, as API priority and fairness does.
    ///
    /// kube's default client retries 429 itself (see the crate README).
    pub fn too_many_requests(self, retry_after_secs: u64) -> Self {
        self.action(Action::Respond {
            code: 429,
            reason: "TooManyRequests".into(),
            message: "Too many requests, please try again later.".into(),
            retry_after: Some(retry_after_secs),
        })
    }

    /// Delays the call, then handles it normally.
    pub fn delay(self, by: Duration) -> Self {
        self.action(Action::Delay(by))
    }

    /// Applies the call, then loses the reply.
    pub fn lost_reply(self, how: LostReply) -> Self {
        self.action(Action::LostReply(how))
    }

    /// Sets any action.
    pub fn action(mut self, action: Action) -> Self {
        self.action = action;
        self
    }

    fn matches(&self, call: &Call<'_>) -> bool {
        self.verb.is_none_or(|v| v == call.verb)
            && resource_matches(&self.resource, call)
            && self.name.as_deref().is_none_or(|n| Some(n) == call.name)
            && self
                .namespace
                .as_deref()
                .is_none_or(|n| Some(n) == call.namespace)
    }
}

/// What the fault and request machinery sees of one request.
pub(crate) struct Call<'a> {
    pub(crate) verb: Verb,
    pub(crate) plural: &'a str,
    pub(crate) group: &'a str,
    pub(crate) subresource: Option<&'a str>,
    pub(crate) namespace: Option<&'a str>,
    pub(crate) name: Option<&'a str>,
}

fn resource_matches(pattern: &str, call: &Call<'_>) -> bool {
    if pattern == "*" {
        return true;
    }
    let (resource, sub) = match pattern.split_once('/') {
        Some((r, s)) => (r, Some(s)),
        None => (pattern, None),
    };
    let resource_ok = resource == call.plural
        || (!call.group.is_empty() && resource == format!("{}.{}", call.plural, call.group));
    resource_ok && sub == call.subresource
}

/// Identifies an injected rule; see [`Faults::fired`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RuleId(u64);

#[derive(Debug)]
struct RuleState {
    id: RuleId,
    rule: FaultRule,
    matched: u64,
    fired: u64,
}

#[derive(Debug, Default)]
struct FaultsInner {
    next_id: u64,
    rules: Vec<RuleState>,
}

/// Handle on the server's fault rules; cheap to clone, usable while requests are in flight.
#[derive(Debug, Clone, Default)]
pub struct Faults {
    inner: Arc<Mutex<FaultsInner>>,
}

impl Faults {
    /// Adds a rule. Rules are checked in injection order; every matching rule counts the call,
    /// the first one that fires decides the action.
    pub fn inject(&self, rule: FaultRule) -> RuleId {
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        inner.next_id += 1;
        let id = RuleId(inner.next_id);
        inner.rules.push(RuleState {
            id,
            rule,
            matched: 0,
            fired: 0,
        });
        id
    }

    /// Removes one rule; its firing count is forgotten.
    pub fn remove(&self, id: RuleId) {
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        inner.rules.retain(|r| r.id != id);
    }

    /// Removes every rule.
    pub fn clear(&self) {
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        inner.rules.clear();
    }

    /// How many times the rule has fired (0 for an unknown or removed rule).
    pub fn fired(&self, id: RuleId) -> u64 {
        let inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        inner
            .rules
            .iter()
            .find(|r| r.id == id)
            .map_or(0, |r| r.fired)
    }

    pub(crate) fn check(&self, call: &Call<'_>) -> Option<Action> {
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let mut action = None;
        for state in inner.rules.iter_mut() {
            if !state.rule.matches(call) {
                continue;
            }
            state.matched += 1;
            let fires = match state.rule.when {
                When::Always => true,
                When::Nth(n) => state.matched == n,
                When::Times(k) => state.fired < k,
            };
            if fires && action.is_none() {
                state.fired += 1;
                action = Some(state.rule.action.clone());
            }
        }
        action
    }
}

/// One request as received (recorded before faults are applied, so faulted calls count too).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestRecord {
    /// The verb; requests outside the resource API (`/version`, unknown paths) are logged as `Get`.
    pub verb: Verb,
    /// `plural`, or `plural/status`; empty outside the resource API.
    pub resource: String,
    /// The API group (`""` for core).
    pub group: String,
    /// The namespace in the path, if any.
    pub namespace: Option<String>,
    /// The object name in the path, if any.
    pub name: Option<String>,
    /// HTTP method and path with query, as sent.
    pub method_path: String,
    /// The `Content-Type` header, if any.
    pub content_type: Option<String>,
    /// The request body as received (reference-counted, so cheap to keep).
    pub body: bytes::Bytes,
}

/// Handle on the request log; cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct Requests {
    log: Arc<Mutex<Vec<RequestRecord>>>,
}

impl Requests {
    pub(crate) fn record(&self, record: RequestRecord) {
        self.log
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(record);
    }

    /// Forgets every recorded request.
    pub fn reset(&self) {
        self.log
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }

    /// Requests with `verb` on `resource` since the last reset. `resource` is spelled as for
    /// [`FaultRule::on`]: `"configmaps"`, `"leases.coordination.k8s.io"`, `"jobs/status"`, `"*"`.
    pub fn count(&self, verb: Verb, resource: &str) -> usize {
        let log = self.log.lock().unwrap_or_else(PoisonError::into_inner);
        log.iter()
            .filter(|r| {
                r.verb == verb
                    && resource_matches(
                        resource,
                        &Call {
                            verb,
                            plural: r.resource.split('/').next().unwrap_or(""),
                            group: &r.group,
                            subresource: r.resource.split_once('/').map(|(_, s)| s),
                            namespace: None,
                            name: None,
                        },
                    )
            })
            .count()
    }

    /// Every request since the last reset, API round trips of all kinds.
    pub fn total(&self) -> usize {
        self.log
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// A copy of the log since the last reset, oldest first.
    pub fn log(&self) -> Vec<RequestRecord> {
        self.log
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}
