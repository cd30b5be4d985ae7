//! Conditions other controllers set on a ledger, and the Kubernetes rules
//! their type and reason follow.

use migration_core::LedgerError;
use migration_kube::Step;
use serde_json::json;

use crate::CrdLedger;
use crate::state::{READY, StatusWrite};

/// The longest condition message the Kubernetes API accepts.
const MAX_CONDITION_MESSAGE: usize = 32_768;

/// The status of a condition, as Kubernetes spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConditionStatus {
    /// `True`.
    True,
    /// `False`.
    False,
    /// `Unknown`.
    Unknown,
}

impl ConditionStatus {
    /// The wire spelling.
    pub const fn as_str(self) -> &'static str {
        match self {
            ConditionStatus::True => "True",
            ConditionStatus::False => "False",
            ConditionStatus::Unknown => "Unknown",
        }
    }
}

/// A condition another controller reports on a ledger, through
/// [`CrdLedger::set_condition`] (for example the background operator's
/// per-failure-kind reasons).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LedgerCondition {
    /// The condition type: CamelCase, optionally `domain/` prefixed; not
    /// `Ready`, which the ledger maintains itself.
    pub type_: String,
    /// Its status.
    pub status: ConditionStatus,
    /// A CamelCase machine-readable reason.
    pub reason: String,
    /// Human-readable detail; cut to the 32768 bytes the API allows.
    pub message: String,
}

impl CrdLedger {
    /// Sets a condition on the ledger's status, by type, for controllers
    /// that report on it (the background operator's per-failure-kind
    /// reasons). Entries, attempt marks and other conditions are left as they
    /// are; `summary` and `Ready` are recomputed as on every status write.
    /// The transition time moves only when the status changes;
    /// `observedGeneration` is the object's generation.
    ///
    /// `Ready` is refused: every ledger write recomputes it, so a value set
    /// here would not last. A malformed type or reason is refused before
    /// anything is sent. The ledger must exist ([`LedgerError::NotFound`]
    /// otherwise).
    pub async fn set_condition(&self, condition: &LedgerCondition) -> Result<(), LedgerError> {
        const OP: &str = "set condition";
        validate_condition(condition).map_err(|why| {
            self.permanent(
                OP,
                format!(
                    "{}: condition {:?}: {why}",
                    self.status_object(),
                    condition.type_
                ),
            )
        })?;
        let value = json!({
            "type": condition.type_,
            "status": condition.status.as_str(),
            "reason": condition.reason,
            "message": cut(&condition.message, MAX_CONDITION_MESSAGE),
        });
        self.update_status(OP, |_| {
            Ok(Step::Write(
                StatusWrite {
                    condition: Some(value.clone()),
                    ..StatusWrite::default()
                },
                (),
            ))
        })
        .await
    }
}

/// metav1.Condition's reason: `^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$`.
fn is_condition_reason(s: &str) -> bool {
    let bytes = s.as_bytes();
    s.len() <= 1024
        && bytes.first().is_some_and(u8::is_ascii_alphabetic)
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b',' | b':'))
        && bytes
            .last()
            .is_some_and(|b| b.is_ascii_alphanumeric() || *b == b'_')
}

/// metav1.Condition's type: an optional DNS-subdomain prefix and `/`, then a
/// qualified name; at most 316 characters in all.
fn is_condition_type(s: &str) -> bool {
    let name = match s.rsplit_once('/') {
        Some((prefix, name)) => {
            let prefix_ok = prefix.split('.').all(|label| {
                !label.is_empty()
                    && label
                        .bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                    && !label.starts_with('-')
                    && !label.ends_with('-')
            });
            if !prefix_ok {
                return false;
            }
            name
        }
        None => s,
    };
    s.len() <= 316
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && name
            .as_bytes()
            .first()
            .is_some_and(u8::is_ascii_alphanumeric)
        && name
            .as_bytes()
            .last()
            .is_some_and(u8::is_ascii_alphanumeric)
}

fn validate_condition(condition: &LedgerCondition) -> Result<(), String> {
    if condition.type_ == READY {
        return Err(
            "'Ready' is maintained by the ledger itself (every write recomputes it)".into(),
        );
    }
    if !is_condition_type(&condition.type_) {
        return Err("the type must be CamelCase, optionally prefixed 'domain/'".into());
    }
    if !is_condition_reason(&condition.reason) {
        return Err(format!(
            "reason {:?} must be a CamelCase identifier of at most 1024 characters",
            condition.reason
        ));
    }
    Ok(())
}

/// `s` cut to at most `max` bytes at a character boundary.
fn cut(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn condition(type_: &str, reason: &str) -> LedgerCondition {
        LedgerCondition {
            type_: type_.into(),
            status: ConditionStatus::False,
            reason: reason.into(),
            message: String::new(),
        }
    }

    #[test]
    fn condition_types_and_reasons_follow_the_kubernetes_rules() {
        for ok in [
            ("BackgroundMigrations", "Timeout"),
            ("migrations.cozystack.io/Background", "Exit_Status:1"),
            ("A", "B"),
        ] {
            assert_eq!(validate_condition(&condition(ok.0, ok.1)), Ok(()), "{ok:?}");
        }
        for bad in [
            ("Ready", "Fine"),
            ("", "Fine"),
            ("has space", "Fine"),
            ("Bad.Prefix/Type", "Fine"),
            ("/Type", "Fine"),
            ("Type-", "Fine"),
            ("Type", ""),
            ("Type", "1Leading"),
            ("Type", "trailing,"),
            ("Type", "with space"),
            ("Type", "dash-ed"),
        ] {
            assert!(
                validate_condition(&condition(bad.0, bad.1)).is_err(),
                "{bad:?}"
            );
        }
        assert!(validate_condition(&condition(&"T".repeat(317), "R")).is_err());
        assert!(validate_condition(&condition("T", &"R".repeat(1025))).is_err());
    }

    #[test]
    fn messages_are_cut_at_a_character_boundary() {
        assert_eq!(cut("abc", 5), "abc");
        assert_eq!(cut("abcdef", 3), "abc");
        assert_eq!(cut("ééé", 3), "é", "never inside a character");
    }
}
