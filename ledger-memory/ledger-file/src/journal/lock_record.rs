//! The lock sidecar's format (`migration-lock/v1`): one record line,
//! framed and checksummed as the journal's records are.

use serde::{Deserialize, Serialize};

use super::{crc32c, frame, to_json};
use migration_core::object::LockState;

/// The lock sidecar's record.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct LockFile {
    format: String,
    lock: Option<migration_core::object::LockRecord>,
    generation: u64,
}

/// The lock sidecar's format tag.
const LOCK_FORMAT: &str = "migration-lock/v1";

/// The lock sidecar's contents: one record line.
pub(crate) fn encode_lock(state: &LockState) -> Vec<u8> {
    frame(&to_json(&LockFile {
        format: LOCK_FORMAT.to_owned(),
        lock: state.lock.clone(),
        generation: state.generation,
    }))
}

/// What the lock sidecar holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum LockContents {
    /// Nothing was ever written (a new file).
    Empty,
    /// A record.
    State(LockState),
    /// A record cut short or damaged: what a crash in the middle of a lock
    /// write leaves. Only the holder writes, so its lease died with it.
    Damaged(String),
}

/// Parses the lock sidecar. A record in an unknown format is an error.
pub(crate) fn parse_lock(bytes: &[u8]) -> Result<LockContents, String> {
    if bytes.is_empty() {
        return Ok(LockContents::Empty);
    }
    let Some(newline) = bytes.iter().position(|&b| b == b'\n') else {
        return Ok(LockContents::Damaged("the lock record is cut short".into()));
    };
    let line = &bytes[..newline];
    if line.len() <= 9 || line[8] != b' ' {
        return Ok(LockContents::Damaged("not a lock record".into()));
    }
    let json = &line[9..];
    let stored = std::str::from_utf8(&line[..8])
        .ok()
        .and_then(|h| u32::from_str_radix(h, 16).ok());
    if stored != Some(crc32c(json)) {
        return Ok(LockContents::Damaged("checksum mismatch".into()));
    }
    let value: serde_json::Value =
        serde_json::from_slice(json).map_err(|e| format!("the lock record does not parse: {e}"))?;
    let format = value.get("format").and_then(|f| f.as_str()).unwrap_or("");
    if format != LOCK_FORMAT {
        return Err(format!(
            "unknown lock format {format:?} (expected {LOCK_FORMAT:?}): written by a newer version?"
        ));
    }
    let file: LockFile = serde_json::from_value(value)
        .map_err(|e| format!("the lock record does not parse: {e}"))?;
    Ok(LockContents::State(LockState {
        lock: file.lock,
        generation: file.generation,
    }))
}
