//! `--ledger SPEC`: which ledger backend to open.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;

use ledger_memory::{FileLedger, MemoryLedger};
use migration_core::Ledger;

/// A parsed `--ledger` value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LedgerSpec {
    /// `file:PATH`: the embedded default, a JSON file.
    File(PathBuf),
    /// `memory:`: an empty in-memory ledger, for dry runs.
    Memory,
}

/// Why a `--ledger` value was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid ledger spec {input:?}: {reason} (expected file:PATH or memory:)")]
pub struct SpecError {
    /// The rejected value, cut to a printable length.
    pub input: String,
    /// What is wrong.
    pub reason: String,
}

impl FromStr for LedgerSpec {
    type Err = SpecError;

    fn from_str(input: &str) -> Result<Self, Self::Err> {
        let bad = |reason: &str| SpecError {
            input: input.chars().take(120).collect(),
            reason: reason.to_owned(),
        };
        let Some((kind, rest)) = input.split_once(':') else {
            return Err(bad("no ':' after the backend name"));
        };
        match kind {
            "file" if rest.is_empty() => Err(bad("file: needs a path")),
            "file" if rest.contains('\0') => Err(bad("the path contains a NUL byte")),
            "file" => Ok(LedgerSpec::File(PathBuf::from(rest))),
            "memory" if rest.is_empty() => Ok(LedgerSpec::Memory),
            "memory" => Err(bad("memory: takes nothing after the colon")),
            _ => Err(bad("unknown backend")),
        }
    }
}

impl fmt::Display for LedgerSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LedgerSpec::File(p) => write!(f, "file:{}", p.display()),
            LedgerSpec::Memory => f.write_str("memory:"),
        }
    }
}

impl LedgerSpec {
    /// Opens the ledger the spec names.
    pub fn open(&self) -> Arc<dyn Ledger> {
        match self {
            LedgerSpec::File(path) => Arc::new(FileLedger::new(path)),
            LedgerSpec::Memory => Arc::new(MemoryLedger::new()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_file_and_memory() {
        assert_eq!(
            "file:/var/lib/ledger.json".parse(),
            Ok(LedgerSpec::File("/var/lib/ledger.json".into()))
        );
        assert_eq!(
            "file:rel/x.json".parse(),
            Ok(LedgerSpec::File("rel/x.json".into()))
        );
        assert_eq!("memory:".parse(), Ok(LedgerSpec::Memory));
    }

    #[test]
    fn rejects_what_it_does_not_know_with_a_reason() {
        for (input, reason) in [
            ("", "no ':'"),
            ("file", "no ':'"),
            ("file:", "needs a path"),
            ("memory:x", "takes nothing"),
            ("s3:bucket", "unknown backend"),
            ("file:a\0b", "NUL"),
        ] {
            let err = input.parse::<LedgerSpec>().unwrap_err();
            assert!(err.reason.contains(reason), "{input:?}: {err}");
        }
    }

    #[test]
    fn display_round_trips() {
        for s in ["file:/x/y.json", "memory:"] {
            assert_eq!(s.parse::<LedgerSpec>().unwrap().to_string(), s);
        }
    }
}
