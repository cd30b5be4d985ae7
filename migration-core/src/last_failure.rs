//! The last failure of a migration that stopped its run (`on-error=abort`):
//! kept beside the attempt mark, non-terminal, so that the report survives
//! the hook Job that printed it (CONTRACT.md §5.3).
//!
//! Why a record of its own: an `on-error=abort` failure records nothing
//! terminal (the migration runs again next time), so its reason and output
//! lived only in the Job's pod log, and the chart's `before-hook-creation`
//! policy deletes that Job when the upgrade is retried. The record is
//! informational: it never decides what runs, a corrupt one is a warning,
//! and the write that records the slug's next outcome (or its next failure)
//! replaces it. It is a key of its own (`f.<slug>`), not a field of the
//! attempt mark, because engines up to the one that introduced it decode
//! the mark with unknown fields refused.

use serde::{Deserialize, Serialize};

use crate::entry::CorruptEntry;
use crate::time::Timestamp;

/// `{"reason":"exit-status-1","message":"…","at":"…","image":"…","attempts":2}`:
/// why the migration failed, the end of its output (redacted and cut as an
/// entry's message is, [`crate::redact`]), when, the image it ran from and
/// the executions counted so far, this one included.
///
/// Unknown fields are accepted and dropped on read: a newer engine may add
/// some, and this record is never rewritten by an engine that read it (the
/// next outcome replaces it whole).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LastFailure {
    /// A short machine-readable reason (`exit-status-1`, `timeout`,
    /// `requirement-unmet`, …), as a `failed` entry's.
    pub reason: String,
    /// The end of the script's output, redacted, as a `failed` entry's
    /// message.
    pub message: String,
    /// When the run decided the failure.
    pub at: Timestamp,
    /// The image the script ran from, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// Executions of the slug counted when it failed, this one included.
    pub attempts: u32,
}

impl LastFailure {
    /// Compact JSON, as stored.
    pub fn encode(&self) -> String {
        // Strings, a timestamp and a number always serialize.
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Parses a stored value; a value that does not parse is corrupt (a
    /// warning, never anything else: the record is informational).
    pub fn decode(key: &str, raw: &str) -> Result<Self, CorruptEntry> {
        serde_json::from_str(raw).map_err(|e| CorruptEntry::new(key, raw, e.to_string()))
    }

    /// Parses a value as a backend that stores JSON objects holds it.
    pub fn from_value(key: &str, value: &serde_json::Value) -> Result<Self, CorruptEntry> {
        serde_json::from_value(value.clone()).map_err(|e| {
            let raw = match value {
                serde_json::Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            CorruptEntry::new(key, &raw, e.to_string())
        })
    }

    /// The record as a JSON value (for backends that store objects).
    pub fn to_value(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or(serde_json::Value::Null)
    }

    /// The encoded length of the largest record with a message of at most
    /// `message_bytes` (before escaping) and a reason of at most
    /// `reason_bytes`, and an image `image` (as the run knows it): what a
    /// run reserves in a size budget before a script runs, so that the
    /// record of its failure always fits. Each message and reason byte is
    /// counted as the six a JSON `\u0001` escape takes.
    pub fn largest_bytes(message_bytes: usize, reason_bytes: usize, image: Option<&str>) -> u64 {
        let empty = LastFailure {
            reason: String::new(),
            message: String::new(),
            at: Timestamp::from_unix_parts(253_402_300_799, 999_999_999)
                .unwrap_or(Timestamp::from_unix(0)),
            image: image.map(str::to_owned),
            attempts: u32::MAX,
        };
        empty.encode().len() as u64 + 6 * (message_bytes as u64 + reason_bytes as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record() -> LastFailure {
        LastFailure {
            reason: "exit-status-1".into(),
            message: "boom\n".into(),
            at: Timestamp::from_unix(1_790_000_000),
            image: Some("registry/x:1".into()),
            attempts: 2,
        }
    }

    #[test]
    fn a_record_reads_back_as_written_in_compact_json() {
        let raw = record().encode();
        assert_eq!(
            raw,
            r#"{"reason":"exit-status-1","message":"boom\n","at":"2026-09-21T14:13:20Z","image":"registry/x:1","attempts":2}"#
        );
        assert_eq!(LastFailure::decode("f.x", &raw).unwrap(), record());
        assert_eq!(
            LastFailure::from_value("f.x", &record().to_value()).unwrap(),
            record()
        );
    }

    #[test]
    fn unknown_fields_are_read_and_a_value_that_does_not_parse_is_corrupt() {
        let newer =
            r#"{"reason":"r","message":"m","at":"2026-01-01T00:00:00Z","attempts":1,"node":"n1"}"#;
        assert_eq!(LastFailure::decode("f.x", newer).unwrap().reason, "r");
        let corrupt = LastFailure::decode("f.x", "{not json").unwrap_err();
        assert_eq!(corrupt.key, "f.x");
    }

    #[test]
    fn the_largest_record_bounds_every_record_of_its_limits() {
        let limit = 64;
        let worst = LastFailure {
            reason: "\u{1}".repeat(8),
            message: "\u{1}".repeat(limit),
            at: Timestamp::from_unix_parts(253_402_300_799, 999_999_999).unwrap(),
            image: Some("img".into()),
            attempts: u32::MAX,
        };
        assert!(worst.encode().len() as u64 <= LastFailure::largest_bytes(limit, 8, Some("img")));
    }
}
