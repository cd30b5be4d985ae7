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

pub use migrate_lint::answers::Answer;

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

    /// The classes a `migrate-tolerate` flag can accept: one per
    /// [`Answer`], the list lint and convert read too.
    pub const ACCEPTABLE: [Class; 4] = [
        Class::of_answer(Answer::ALL[0]),
        Class::of_answer(Answer::ALL[1]),
        Class::of_answer(Answer::ALL[2]),
        Class::of_answer(Answer::ALL[3]),
    ];

    /// The class of an answer a flag accepts.
    pub const fn of_answer(answer: Answer) -> Class {
        match answer {
            Answer::NotFound => Class::NotFound,
            Answer::NotServed => Class::NotServed,
            Answer::AlreadyExists => Class::AlreadyExists,
            Answer::Conflict => Class::Conflict,
            // A new answer is unknown here until this classifier learns
            // its texts (the test below fails first).
            #[allow(unreachable_patterns)]
            _ => Class::Unknown,
        }
    }

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
pub struct Classified {
    /// The classes of the error lines (never empty: no error line at all is
    /// `Unknown`).
    pub classes: BTreeSet<Class>,
}

impl Classified {
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

/// Classifies the stderr of a call that exited non-zero: every line that
/// carries a verdict (not klog chatter, a `Warning:` or kubectl's CRD hint)
/// is classified, and a line of no known shape is [`Class::Unknown`], so an
/// accepted answer next to anything else is not accepted.
pub fn classify(stderr: &str) -> Classified {
    let mut classes: BTreeSet<Class> = stderr
        .lines()
        .map(str::trim)
        .filter(|l| carries_verdict(l))
        .map(classify_line)
        .collect();
    if classes.is_empty() {
        classes.insert(Class::Unknown);
    }
    Classified { classes }
}

/// Lines that are not a request's answer: empty, klog chatter, warnings
/// (kubectl's `Warning:`, helm's `WARNING:`) and kubectl's hint after a
/// kind it could not map.
fn carries_verdict(line: &str) -> bool {
    !(line.is_empty()
        || is_klog(line)
        || line.starts_with("Warning: ")
        || line.starts_with("WARNING: ")
        || line == "ensure CRDs are installed first")
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

/// The reason token kubectl prints for an API status it got back:
/// `Error from server (NotFound): ...`.
fn reason_token(line: &str) -> Option<(&str, &str)> {
    let rest = line.strip_prefix("Error from server (")?;
    let (reason, message) = rest.split_once("): ")?;
    Some((reason, message))
}

/// `<resource> "<name>" <tail>`, the whole of an API server's own message
/// for a missing or existing object (`configmaps "x" not found`,
/// `deployments.apps "y" already exists`); `error when creating
/// "FILE": ` may come first. An admission denial that merely ends the same
/// way has more words before the quoted name.
fn is_object_message(message: &str, tail: &str) -> bool {
    let message = match message.strip_prefix("error when ") {
        Some(rest) => {
            let Some((verb, after)) = rest.split_once(" \"") else {
                return false;
            };
            if !verb.chars().all(|c| c.is_ascii_lowercase()) {
                return false;
            }
            match after.split_once("\": ") {
                Some((_, m)) => m,
                None => return false,
            }
        }
        None => message,
    };
    let Some(body) = message.strip_suffix(tail) else {
        return false;
    };
    let Some((resource, name)) = body.split_once(' ') else {
        return false;
    };
    !resource.is_empty()
        && resource
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '-'))
        && name.len() >= 2
        && name.starts_with('"')
        && name.ends_with('"')
        && !name[1..name.len() - 1].contains('"')
}

/// An admission controller's answer (a webhook, a ValidatingAdmissionPolicy):
/// whatever its words or its status's reason, it is a denial, never one of
/// the answers a flag accepts.
fn is_admission_denial(line: &str) -> bool {
    line.contains("admission webhook \"")
        || line.contains("denied request:")
        || line.contains("denied the request")
        || line.contains("ValidatingAdmissionPolicy")
}

/// kubectl's line for a resource type discovery does not know, in each
/// form its source prints (`cmd/util` `checkErr` and cli-runtime's
/// builder, kubectl 1.2x to 1.3x): `the server doesn't have a resource type
/// "R"`, then nothing, ` in group "G"`, ` in version "V"` or ` in group "G"
/// and version "V"`; with kubectl's `error: ` prefix, or without it as
/// `kubectl explain` prints it. Nothing else may follow the last quote.
fn is_not_served_type(line: &str) -> bool {
    let line = line.strip_prefix("error: ").unwrap_or(line);
    let Some(rest) = line.strip_prefix("the server doesn't have a resource type ") else {
        return false;
    };
    /// One `"word"` at the start of `s`, and what follows it.
    fn quoted(s: &str) -> Option<&str> {
        let inner = s.strip_prefix('"')?;
        let end = inner.find('"')?;
        (end > 0).then(|| &inner[end + 1..])
    }
    let Some(rest) = quoted(rest) else {
        return false;
    };
    let rest = match rest.strip_prefix(" in group ") {
        Some(group) => match quoted(group) {
            Some(after) => after
                .strip_prefix(" and version ")
                .map_or(Some(after), quoted),
            None => None,
        },
        None => rest.strip_prefix(" in version ").map_or(Some(rest), quoted),
    };
    rest == Some("")
}

/// The class of one stderr line that carries a verdict. The accepted
/// classes come from kubectl's reason token for the request (or, where
/// kubectl prints none, the exact shape of the API server's message) and
/// helm's exact texts; a line of no known shape is `Unknown`.
pub fn classify_line(line: &str) -> Class {
    let line = line.trim();
    if let Some((reason, message)) = reason_token(line) {
        if is_admission_denial(message) {
            return Class::Unknown;
        }
        return match reason {
            "NotFound" if is_object_message(message, " not found") => Class::NotFound,
            "AlreadyExists" if is_object_message(message, " already exists") => {
                Class::AlreadyExists
            }
            "Conflict" if message.starts_with("Operation cannot be fulfilled on ") => {
                Class::Conflict
            }
            "Timeout" | "ServerTimeout" => Class::Timeout,
            "TooManyRequests" => Class::Throttled,
            "InternalError" | "ServiceUnavailable" | "BadGateway" => Class::ServerError,
            "Forbidden" => Class::Forbidden,
            "Unauthorized" => Class::Unauthorized,
            _ => Class::Unknown,
        };
    }
    let has = |needle: &str| line.contains(needle);
    // Failures: never accepted, only retried when transient, so a text
    // anywhere in the line is enough.
    if let Some((class, _)) = FAILURES.iter().find(|(_, texts)| {
        texts
            .iter()
            .any(|all_of| all_of.iter().all(|needle| has(needle)))
    }) {
        return *class;
    }
    if is_admission_denial(line) {
        return Class::Unknown;
    }
    // kubectl's `create` subcommands print the API server's message
    // without a reason token.
    if let Some(rest) = line.strip_prefix("error: failed to create ")
        && let Some((kind, message)) = rest.split_once(": ")
        && !kind.contains(' ')
        && is_object_message(message, " already exists")
    {
        return Class::AlreadyExists;
    }
    if is_not_served_type(line) {
        return Class::NotServed;
    }
    if (line.starts_with("error: resource mapping not found for name: ")
        || line.starts_with("error: unable to recognize \""))
        && line.ends_with('"')
        && has(": no matches for kind \"")
    {
        return Class::NotServed;
    }
    if line == "Error: release: not found"
        || line
            .strip_prefix("Error: uninstall: Release not loaded: ")
            .and_then(|r| r.strip_suffix(": release: not found"))
            .is_some_and(|name| {
                !name.is_empty()
                    && name.chars().all(|c| {
                        c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '-')
                    })
            })
    {
        return Class::NotFound;
    }
    if line == "Error: INSTALLATION FAILED: cannot re-use a name that is still in use"
        || line == "Error: cannot re-use a name that is still in use"
    {
        return Class::AlreadyExists;
    }
    Class::Unknown
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(text: &str) -> Vec<Class> {
        classify(text).classes.into_iter().collect()
    }

    #[test]
    fn every_form_kubectl_prints_for_a_type_not_served_is_not_served() {
        // kubectl's checkErr names the group and the version the type was
        // asked in; `explain` prints without the `error: ` prefix.
        for text in [
            "error: the server doesn't have a resource type \"cluster\" in group \"postgresql.cnpg.io\"",
            "error: the server doesn't have a resource type \"clusters\" in version \"v1\"",
            "error: the server doesn't have a resource type \"clusters\" in group \"postgresql.cnpg.io\" and version \"v1\"",
            "the server doesn't have a resource type \"clusters\"",
            "the server doesn't have a resource type \"clusters\" in group \"postgresql.cnpg.io\"",
        ] {
            assert_eq!(one(text), [Class::NotServed], "{text}");
        }
        // Anything after the last quoted word is not kubectl's line.
        for text in [
            "error: the server doesn't have a resource type \"clusters\" in group \"g\" and more",
            "error: the server doesn't have a resource type \"clusters\" in group g",
            "error: the server doesn't have a resource type \"a\" \"b\"",
            "error: the server doesn't have a resource type \"clusters\" in namespace \"x\"",
        ] {
            assert_ne!(one(text), [Class::NotServed], "{text}");
        }
    }

    #[test]
    fn klog_chatter_and_hints_carry_no_verdict() {
        assert!(!carries_verdict(
            r#"E1201 09:11:32.660248   29722 memcache.go:265] "Unhandled Error" err="couldn't get resource list for metrics.k8s.io/v1beta1: the server is currently unable to handle the request""#
        ));
        assert!(!carries_verdict("ensure CRDs are installed first"));
        assert!(!carries_verdict(
            "Warning: v1 ComponentStatus is deprecated"
        ));
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

    /// Texts that only look like an answer: an admission denial whose
    /// message says `not found`, `already exists` or `Operation cannot be
    /// fulfilled on`, a helm error quoting a lookup, and a NotFound line
    /// beside a line that is no answer at all. None may be tolerated.
    const LOOKALIKES: &[(&str, &str)] = &[
        (
            "--not-found",
            "error: failed to create configmap: configmaps \"x\" is forbidden: ValidatingAdmissionPolicy 'deny-x' with binding 'deny-x' denied request: widget \"x\" not found",
        ),
        (
            "--not-found",
            "The configmaps \"x\" is invalid: : ValidatingAdmissionPolicy 'deny-x' with binding 'deny-x' denied request: widget \"x\" not found",
        ),
        (
            "--not-found",
            "Error from server (NotFound): admission webhook \"v.example.com\" denied the request: widget \"x\" not found",
        ),
        (
            "--already-exists",
            "error: failed to create configmap: configmaps \"x\" is forbidden: ValidatingAdmissionPolicy 'deny-x' with binding 'deny-x' denied request: tenant \"x\" already exists",
        ),
        (
            "--already-exists",
            "Error from server (Forbidden): error when creating \"STDIN\": configmaps \"x\" is forbidden: ValidatingAdmissionPolicy 'p' with binding 'b' denied request: object \"x\" already exists",
        ),
        (
            "--conflict",
            "Error from server: admission webhook \"v.example.com\" denied the request: Operation cannot be fulfilled on widgets \"x\": locked",
        ),
        (
            "--conflict",
            "error: failed to create configmap: configmaps \"x\" is forbidden: ValidatingAdmissionPolicy 'p' with binding 'b' denied request: Operation cannot be fulfilled on configmaps \"x\"",
        ),
        (
            "--not-found",
            "Error: UPGRADE FAILED: template: c/templates/a.yaml:3:4: executing \"c/templates/a.yaml\" at <fail \"release: not found\">: error calling fail: release: not found",
        ),
        (
            "--already-exists",
            "Error: INSTALLATION FAILED: execution error at (c/templates/x.yaml:1:4): cannot re-use a name that is still in use",
        ),
        (
            "--not-found",
            "Error from server (NotFound): deployments.apps \"x\" not found\nThe Deployment \"y\" is invalid: spec.template.metadata.labels: Invalid value: map[string]string{\"a\":\"b\"}: `selector` does not match template `labels`",
        ),
        (
            "--not-found",
            "error: failed to create configmap: namespaces \"missing\" not found\nsome remote output: pods \"x\" not found",
        ),
    ];

    #[test]
    fn answers_that_only_look_like_an_accepted_class_are_never_accepted() {
        let every: BTreeSet<Class> = Class::ACCEPTABLE.into();
        let mut wrong = Vec::new();
        for (flag, text) in LOOKALIKES {
            let v = classify(text);
            if v.accepted_by(&every) {
                wrong.push(format!("{flag}: {text} -> {}", v.names()));
            }
        }
        assert!(wrong.is_empty(), "accepted:\n{}", wrong.join("\n"));
    }

    /// The texts convert matches a script's own grep against are the
    /// texts this classifier accepts, each as its own answer only.
    #[test]
    fn every_answer_text_the_shared_list_names_is_classified_as_that_answer() {
        for answer in Answer::ALL {
            assert_ne!(Class::of_answer(answer), Class::Unknown, "{answer}");
            assert_eq!(Class::of_answer(answer).name(), answer.name());
            for text in answer.texts() {
                assert_eq!(one(text), [Class::of_answer(answer)], "{text}");
            }
        }
    }

    #[test]
    fn kubectls_own_answers_are_still_accepted_beside_warnings_and_hints() {
        for (text, class) in [
            (
                "Error from server (NotFound): configmaps \"x\" not found",
                Class::NotFound,
            ),
            (
                "Warning: policy/v1beta1 is deprecated\nError from server (NotFound): error when deleting \"STDIN\": configmaps \"x\" not found",
                Class::NotFound,
            ),
            (
                "error: failed to create configmap: configmaps \"x\" already exists",
                Class::AlreadyExists,
            ),
            (
                "Error from server (AlreadyExists): error when creating \"STDIN\": configmaps \"x\" already exists",
                Class::AlreadyExists,
            ),
            (
                "Error from server (Conflict): Operation cannot be fulfilled on configmaps \"x\": the object has been modified; please apply your changes to the latest version and try again",
                Class::Conflict,
            ),
            (
                "error: resource mapping not found for name: \"w\" namespace: \"\" from \"STDIN\": no matches for kind \"Widget\" in version \"example.com/v1\"\nensure CRDs are installed first",
                Class::NotServed,
            ),
            (
                "error: the server doesn't have a resource type \"widgets\"",
                Class::NotServed,
            ),
            (
                "Error: uninstall: Release not loaded: db: release: not found",
                Class::NotFound,
            ),
        ] {
            assert_eq!(one(text), [class], "{text}");
        }
    }
}
