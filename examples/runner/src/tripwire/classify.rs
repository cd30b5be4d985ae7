//! What a failed cluster command's stderr says: the answer classes
//! `migrate-tolerate` may accept, and the failures it never accepts.
//!
//! The texts are the ones the real `kubectl` prints (recorded from kubectl
//! v1.32 against a loopback API endpoint, see
//! `tests/fixtures/kubectl-errors/README.md`), plus the two helm texts from
//! helm's source (`release: not found`, `cannot re-use a name that is still
//! in use`). Every line of stderr is looked at; a line that reads like an
//! error but matches no known class is [`Class::Unknown`], which is never
//! accepted. klog-formatted lines (`E1201 09:11:32.660248 ...`, kubectl's
//! discovery cache chatter) are ignored: the last line kubectl prints is
//! its verdict, and for an unreachable server that line says so too.

use std::collections::BTreeSet;

/// One kind of answer or failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Class {
    /// The object is not there: `Error from server (NotFound): ...`.
    NotFound,
    /// The resource type is not served: `the server doesn't have a resource
    /// type`, `no matches for kind`.
    NotServed,
    /// The object is already there: `Error from server (AlreadyExists)`.
    AlreadyExists,
    /// A write lost a race: `Error from server (Conflict)`.
    Conflict,
    /// The API server could not be reached: connection refused, reset, DNS.
    Unreachable,
    /// No answer in time: client or server timeouts, etcd timeouts.
    Timeout,
    /// The server asked us to slow down: `TooManyRequests`.
    Throttled,
    /// The server failed: `InternalError`, `ServiceUnavailable`, etcd leader change.
    ServerError,
    /// Not allowed: `Error from server (Forbidden)`.
    Forbidden,
    /// Not logged in: `You must be logged in to the server (Unauthorized)`.
    Unauthorized,
    /// Anything else that reads like an error (invalid objects, admission
    /// webhooks, an empty stderr with a non-zero status, ...).
    Unknown,
}

impl Class {
    /// The stable name used in flags, reports and messages.
    pub fn name(self) -> &'static str {
        match self {
            Class::NotFound => "not-found",
            Class::NotServed => "not-served",
            Class::AlreadyExists => "already-exists",
            Class::Conflict => "conflict",
            Class::Unreachable => "unreachable",
            Class::Timeout => "timeout",
            Class::Throttled => "throttled",
            Class::ServerError => "server-error",
            Class::Forbidden => "forbidden",
            Class::Unauthorized => "unauthorized",
            Class::Unknown => "unknown",
        }
    }

    /// The classes a `migrate-tolerate` flag can accept.
    pub const ACCEPTABLE: [Class; 4] = [
        Class::NotFound,
        Class::NotServed,
        Class::AlreadyExists,
        Class::Conflict,
    ];

    /// Failures that may go away by themselves, so `--retry` retries them.
    pub fn is_transient(self) -> bool {
        matches!(
            self,
            Class::Unreachable | Class::Timeout | Class::Throttled | Class::ServerError
        )
    }
}

impl std::fmt::Display for Class {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Every class found in one call's stderr.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Verdict {
    /// The classes of the error lines (never empty: no error line at all is
    /// `Unknown`).
    pub classes: BTreeSet<Class>,
}

impl Verdict {
    /// True when every error line is of a class in `accepted`.
    pub fn accepted_by(&self, accepted: &BTreeSet<Class>) -> bool {
        self.classes.iter().all(|c| accepted.contains(c))
    }

    /// True when every error line is of a transient class.
    pub fn is_transient(&self) -> bool {
        self.classes.iter().all(|c| c.is_transient())
    }

    /// The class names, comma-separated.
    pub fn names(&self) -> String {
        self.classes
            .iter()
            .map(|c| c.name())
            .collect::<Vec<_>>()
            .join(",")
    }
}

/// Classifies the stderr of a call that exited non-zero.
pub fn classify(stderr: &str) -> Verdict {
    let mut classes: BTreeSet<Class> = stderr.lines().filter_map(classify_line).collect();
    if classes.is_empty() {
        classes.insert(Class::Unknown);
    }
    Verdict { classes }
}

/// A klog line (kubectl's discovery chatter, not the command's answer):
/// `E1201 09:11:32.660248   29722 memcache.go:265] ...`.
pub(crate) fn is_klog(line: &str) -> bool {
    let b = line.as_bytes();
    b.len() > 14
        && matches!(b[0], b'I' | b'W' | b'E' | b'F')
        && b[1..5].iter().all(u8::is_ascii_digit)
        && b[5] == b' '
        && b[8] == b':'
}

fn reads_like_error(line: &str) -> bool {
    let lower = line.to_ascii_lowercase();
    lower.starts_with("error")
        || lower.starts_with("unable to connect to the server")
        || lower.starts_with("the connection to the server")
        || line.starts_with('✗')
        || lower.starts_with("fatal")
}

/// What kubectl and helm print for a failed call, by class, in the order
/// they are tried (the first class with a matching text wins, so a
/// throttled deadline is `Throttled`, not `Timeout`). A text matches when
/// the line contains every one of its parts.
const FAILURES: &[(Class, &[&[&str]])] = &[
    (
        Class::Unreachable,
        &[
            &["connect: connection refused"],
            &["The connection to the server", "was refused"],
            &["connection reset by peer"],
            &["no such host"],
            &["no route to host"],
            &["network is unreachable"],
            &["http2: client connection lost"],
            &["Unable to connect to the server: EOF"],
            &["Unable to connect to the server: dial tcp"],
        ],
    ),
    (
        Class::Throttled,
        &[
            &["context deadline exceeded", "rate limiter"],
            &["(TooManyRequests)"],
        ],
    ),
    (
        Class::Timeout,
        &[
            &["context deadline exceeded"],
            &["Client.Timeout exceeded"],
            &["i/o timeout"],
            &["TLS handshake timeout"],
            &["Error from server (Timeout)"],
            &["Error from server (ServerTimeout)"],
            &["etcdserver: request timed out"],
            &["Unable to connect to the server"],
        ],
    ),
    (
        Class::ServerError,
        &[
            &["(InternalError)"],
            &["(ServiceUnavailable)"],
            &["etcdserver: leader changed"],
            &["Internal error occurred"],
            &["the server is currently unable to handle the request"],
            &["Error from server (BadGateway)"],
        ],
    ),
    (
        Class::Unauthorized,
        &[
            &["(Unauthorized)"],
            &["You must be logged in to the server"],
        ],
    ),
    (
        Class::Forbidden,
        &[&["(Forbidden)"], &[" is forbidden: User "]],
    ),
];

/// The class of one stderr line, or `None` for lines that carry no verdict
/// (warnings, progress, klog chatter, continuation hints).
pub fn classify_line(line: &str) -> Option<Class> {
    let line = line.trim();
    if line.is_empty() || is_klog(line) {
        return None;
    }
    let has = |needle: &str| line.contains(needle);
    // Failures first: a line that names both (a NotFound wrapped in a
    // transport error, say) is the failure.
    if let Some((class, _)) = FAILURES.iter().find(|(_, texts)| {
        texts
            .iter()
            .any(|all_of| all_of.iter().all(|needle| has(needle)))
    }) {
        return Some(*class);
    }
    if !reads_like_error(line) {
        return None;
    }
    // Answers. The generic 404 without a name ("the server could not find
    // the requested resource") is not one: it also means a failed OpenAPI
    // download under `apply`, when nothing was applied.
    if has("the server could not find the requested resource") {
        return Some(Class::Unknown);
    }
    if has("the server doesn't have a resource type") || has("no matches for kind") {
        return Some(Class::NotServed);
    }
    if has("Error from server (AlreadyExists)")
        || has("cannot re-use a name that is still in use")
        || (line.ends_with(" already exists") && has("\""))
    {
        return Some(Class::AlreadyExists);
    }
    if has("Error from server (Conflict)") || has("Operation cannot be fulfilled on ") {
        return Some(Class::Conflict);
    }
    if has("Error from server (NotFound)")
        || has("release: not found")
        || (line.ends_with("\" not found") && !has("(Invalid)"))
    {
        return Some(Class::NotFound);
    }
    Some(Class::Unknown)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(text: &str) -> Vec<Class> {
        classify(text).classes.into_iter().collect()
    }

    #[test]
    fn klog_chatter_and_hints_carry_no_verdict() {
        assert_eq!(
            classify_line(
                r#"E1201 09:11:32.660248   29722 memcache.go:265] "Unhandled Error" err="couldn't get resource list for metrics.k8s.io/v1beta1: the server is currently unable to handle the request""#
            ),
            None
        );
        assert_eq!(classify_line("ensure CRDs are installed first"), None);
        assert_eq!(
            classify_line("Warning: v1 ComponentStatus is deprecated"),
            None
        );
    }

    #[test]
    fn an_empty_stderr_is_unknown_never_an_answer() {
        assert_eq!(one(""), [Class::Unknown]);
    }

    #[test]
    fn a_failure_next_to_an_answer_is_not_accepted() {
        let v = classify(
            "Error from server (NotFound): pods \"a\" not found\nError from server (Forbidden): pods \"b\" is forbidden: User \"x\" cannot get resource \"pods\"",
        );
        assert!(!v.accepted_by(&[Class::NotFound].into()));
        assert!(!v.is_transient());
    }

    #[test]
    fn helm_answers_are_recognised() {
        assert_eq!(one("Error: release: not found"), [Class::NotFound]);
        assert_eq!(
            one("Error: uninstall: Release not loaded: x: release: not found"),
            [Class::NotFound]
        );
        assert_eq!(
            one("Error: INSTALLATION FAILED: cannot re-use a name that is still in use"),
            [Class::AlreadyExists]
        );
    }
}
