//! Classifying API errors.

use migration_core::LedgerError;

/// What an API error means to a ledger.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// 404: the object is not there.
    NotFound,
    /// 409 AlreadyExists on create.
    AlreadyExists,
    /// 409 Conflict: a resourceVersion precondition failed; re-read and retry.
    Conflict,
    /// Worth retrying with backoff: 429, 500, 502, 503, 504, timeouts,
    /// connection failures.
    Transient,
    /// The object would be too large (422 "Too long", 413, etcd's limit).
    TooLarge,
    /// Anything else: permissions, validation, configuration. Fail closed.
    Permanent,
}

/// Classifies a client error.
pub fn classify(error: &kube::Error) -> Class {
    match error {
        kube::Error::Api(status) => {
            let message = status.message.to_ascii_lowercase();
            match status.code {
                404 => Class::NotFound,
                409 if status.reason == "AlreadyExists" => Class::AlreadyExists,
                409 => Class::Conflict,
                413 => Class::TooLarge,
                422 if message.contains("too long") => Class::TooLarge,
                // etcd refuses oversized writes with a 500 the client cannot fix by retrying:
                // above its --max-request-bytes "etcdserver: request is too large", above the
                // API server's etcd client limit (2 MiB) a gRPC "trying to send message larger
                // than max" (both seen from a real kube-apiserver 1.34).
                500 if message.contains("request is too large")
                    || message.contains("message larger than max") =>
                {
                    Class::TooLarge
                }
                429 | 500 | 502 | 503 | 504 => Class::Transient,
                _ => Class::Permanent,
            }
        }
        kube::Error::HyperError(_) | kube::Error::Service(_) | kube::Error::ReadEvents(_) => {
            Class::Transient
        }
        _ => Class::Permanent,
    }
}

/// Maps a client error onto a core error naming the ledger, the operation
/// and the object or key it concerns.
pub fn ledger_error(
    ledger: &str,
    operation: &'static str,
    what: &str,
    error: &kube::Error,
) -> LedgerError {
    let message = format!("{what}: {}", describe(error));
    match classify(error) {
        Class::NotFound => LedgerError::NotFound {
            ledger: ledger.to_owned(),
            operation,
        },
        Class::AlreadyExists => LedgerError::AlreadyExists {
            ledger: ledger.to_owned(),
        },
        Class::Conflict => LedgerError::Conflict {
            ledger: ledger.to_owned(),
            operation,
            attempts: 1,
        },
        Class::Transient => LedgerError::Transient {
            ledger: ledger.to_owned(),
            operation,
            message,
        },
        Class::TooLarge | Class::Permanent => LedgerError::Permanent {
            ledger: ledger.to_owned(),
            operation,
            message,
        },
    }
}

fn describe(error: &kube::Error) -> String {
    match error {
        kube::Error::Api(status) => {
            format!("{} {} ({})", status.code, status.reason, status.message)
        }
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(code: u16, reason: &str, message: &str) -> kube::Error {
        let mut status = kube::core::Status::failure(message, reason);
        status.code = code;
        kube::Error::Api(status.boxed())
    }

    #[test]
    fn classifies_the_codes_a_ledger_meets() {
        assert_eq!(classify(&api(404, "NotFound", "")), Class::NotFound);
        assert_eq!(
            classify(&api(409, "AlreadyExists", "")),
            Class::AlreadyExists
        );
        assert_eq!(
            classify(&api(409, "Conflict", "the object has been modified")),
            Class::Conflict
        );
        for code in [429, 500, 502, 503, 504] {
            assert_eq!(classify(&api(code, "", "x")), Class::Transient, "{code}");
        }
        assert_eq!(
            classify(&api(500, "", "etcdserver: request is too large")),
            Class::TooLarge
        );
        assert_eq!(
            classify(&api(
                500,
                "",
                "rpc error: code = ResourceExhausted desc = trying to send message larger than max (3110714 vs. 2097152)"
            )),
            Class::TooLarge
        );
        assert_eq!(
            classify(&api(
                422,
                "Invalid",
                "[]: Too long: must have at most 1048576 bytes"
            )),
            Class::TooLarge
        );
        assert_eq!(
            classify(&api(422, "Invalid", "metadata.name: Invalid value")),
            Class::Permanent
        );
        assert_eq!(classify(&api(403, "Forbidden", "")), Class::Permanent);
        assert_eq!(classify(&api(401, "Unauthorized", "")), Class::Permanent);
    }

    #[test]
    fn mapped_errors_name_the_ledger_operation_and_object() {
        let e = ledger_error(
            "configmap ns/x",
            "write",
            "key m.a",
            &api(403, "Forbidden", "no"),
        );
        let text = e.to_string();
        assert!(
            text.contains("configmap ns/x") && text.contains("write") && text.contains("key m.a"),
            "{text}"
        );
        assert!(!e.is_transient());
        assert!(ledger_error("l", "read", "o", &api(503, "", "")).is_transient());
    }
}
