//! The ledger's key layout: how a backend that stores the ledger as flat
//! `key → string` data (a ConfigMap's `data`, the file and memory ledgers)
//! names what it holds, and how a stored key is read back (CONTRACT.md §2, §5).
//!
//! | key            | holds                                                   |
//! |----------------|---------------------------------------------------------|
//! | `version`      | the legacy integer (read, never written, by the engine) |
//! | `m.<slug>`     | the entry of `<slug>`, as compact JSON                  |
//! | `a.<slug>`     | the attempt mark of `<slug>` (started executions)       |
//! | `c.<id>`       | a shared record compact entries name by `<id>`          |
//! | `f.<slug>`     | the last `on-error=abort` failure of `<slug>`           |
//!
//! Any other key belongs to another owner and is left alone. Backends that
//! store entries and marks in maps of their own (the custom-resource
//! ledger's `status.entries` and `status.attempts`) still name them by these
//! keys in errors and corrupt records, so a message reads the same whatever
//! the backend.

use crate::slug::{Slug, SlugError};

/// The domain of the annotations and labels the engine keeps on a ledger
/// object (the ConfigMap's run lock, the custom resource's creator mark).
/// A script may annotate a ledger object only outside it: lint reads a
/// script's annotation of the ledger under this domain as a write of the
/// ledger (`ledger-write`), any other as `ledger-annotate`.
pub const ENGINE_KEY_PREFIX: &str = "migrations.cozystack.io/";

/// The key that holds the legacy integer.
pub const VERSION: &str = "version";

/// The prefix that turns a slug into the key of its entry (`m.<slug>`).
pub const ENTRY_PREFIX: &str = "m.";

/// The prefix that turns a slug into the key of its attempt mark
/// (`a.<slug>`).
pub const ATTEMPT_PREFIX: &str = "a.";

/// The prefix that turns a slug into the key of its last failure
/// (`f.<slug>`, [`crate::last_failure`]).
pub const FAILURE_PREFIX: &str = "f.";

/// What a flat-key backend stores under a slug's `f.` key to remove its
/// last failure, when it cannot express a removal (the file ledger's
/// journal appends puts only): a key holding this is no record, and a
/// backend that can remove the key does so instead.
pub const CLEARED: &str = "";

/// The prefix that turns an id into the key of a shared record (`c.<id>`).
pub const CONTEXT_PREFIX: &str = "c.";

/// The key of the entry of `name`: `m.<name>`. `name` is a slug, or the raw
/// name a backend found stored where a slug belongs (to name it in a corrupt
/// record).
pub fn entry_key(name: impl AsRef<str>) -> String {
    format!("{ENTRY_PREFIX}{}", name.as_ref())
}

/// The key of the attempt mark of `name`: `a.<name>`; `name` as for
/// [`entry_key`].
pub fn attempt_key(name: impl AsRef<str>) -> String {
    format!("{ATTEMPT_PREFIX}{}", name.as_ref())
}

/// The key of the last failure of `name`: `f.<name>`; `name` as for
/// [`entry_key`].
pub fn failure_key(name: impl AsRef<str>) -> String {
    format!("{FAILURE_PREFIX}{}", name.as_ref())
}

/// The key of the shared record `id`: `c.<id>`.
pub fn context_key(id: impl AsRef<str>) -> String {
    format!("{CONTEXT_PREFIX}{}", id.as_ref())
}

/// What a stored key names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Key {
    /// `version`: the legacy integer.
    Version,
    /// `m.<rest>`: an entry; `Err` when `<rest>` is not a slug, which makes
    /// the key a corrupt record, never something to ignore silently.
    Entry(Result<Slug, SlugError>),
    /// `a.<rest>`: an attempt mark; `Err` as for [`Key::Entry`].
    Attempt(Result<Slug, SlugError>),
    /// `f.<rest>`: a last failure; `Err` as for [`Key::Entry`] (a warning:
    /// the record is informational).
    Failure(Result<Slug, SlugError>),
    /// `c.<id>`: a shared record; `Err` (the raw id) when the id is not
    /// one ([`valid_id`]).
    Context(Result<String, String>),
    /// Anything else: another owner's data.
    Foreign,
}

/// Reads a stored key.
pub fn parse(key: &str) -> Key {
    if key == VERSION {
        Key::Version
    } else if let Some(rest) = key.strip_prefix(ENTRY_PREFIX) {
        Key::Entry(Slug::parse(rest))
    } else if let Some(rest) = key.strip_prefix(ATTEMPT_PREFIX) {
        Key::Attempt(Slug::parse(rest))
    } else if let Some(rest) = key.strip_prefix(FAILURE_PREFIX) {
        Key::Failure(Slug::parse(rest))
    } else if let Some(id) = key.strip_prefix(CONTEXT_PREFIX) {
        if valid_id(id) {
            Key::Context(Ok(id.to_owned()))
        } else {
            Key::Context(Err(id.to_owned()))
        }
    } else {
        Key::Foreign
    }
}

/// Whether `key` is an entry key (`m.` prefix, slug or not): what a
/// backend counts as the ledger's entries in a [`LedgerError::Full`].
///
/// [`LedgerError::Full`]: crate::LedgerError::Full
pub fn is_entry_key(key: &str) -> bool {
    key.starts_with(ENTRY_PREFIX)
}

/// Whether the engine writes `key`: an entry, an attempt mark, a last
/// failure or a shared record (never `version`, never another owner's key).
pub fn is_engine_key(key: &str) -> bool {
    key.starts_with(ENTRY_PREFIX)
        || key.starts_with(ATTEMPT_PREFIX)
        || key.starts_with(FAILURE_PREFIX)
        || key.starts_with(CONTEXT_PREFIX)
}

/// Whether storing `value` under `key` removes a last failure rather than
/// storing one ([`CLEARED`] under an `f.` key).
pub fn is_clearing(key: &str, value: &str) -> bool {
    value == CLEARED && key.starts_with(FAILURE_PREFIX)
}

/// Whether `id` may name a shared record: 1 to 32 lowercase ASCII letters
/// and digits (the engine allocates decimal numbers).
pub fn valid_id(id: &str) -> bool {
    (1..=32).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_digit() || b.is_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_key_reads_back_as_its_slug() {
        let slug = Slug::parse("etcd-crds-precreate").unwrap();
        assert_eq!(entry_key(&slug), "m.etcd-crds-precreate");
        assert_eq!(parse(&entry_key(&slug)), Key::Entry(Ok(slug.clone())));
        assert_eq!(attempt_key(&slug), "a.etcd-crds-precreate");
        assert_eq!(parse(&attempt_key(&slug)), Key::Attempt(Ok(slug)));
    }

    #[test]
    fn a_failure_key_reads_back_as_its_slug_and_an_empty_value_clears_it() {
        let slug = Slug::parse("etcd-crds-precreate").unwrap();
        assert_eq!(failure_key(&slug), "f.etcd-crds-precreate");
        assert_eq!(parse(&failure_key(&slug)), Key::Failure(Ok(slug)));
        assert!(matches!(parse("f.Bad"), Key::Failure(Err(_))));
        assert!(is_engine_key("f.x") && !is_entry_key("f.x"));
        assert!(is_clearing("f.x", CLEARED) && !is_clearing("m.x", CLEARED));
        assert!(!is_clearing("f.x", "{}"));
    }

    #[test]
    fn version_and_foreign_keys_are_not_migration_keys() {
        assert_eq!(parse("version"), Key::Version);
        assert_eq!(parse("owner-note"), Key::Foreign);
        assert!(!is_engine_key("version") && !is_entry_key("version"));
        assert!(is_engine_key("a.x") && !is_entry_key("a.x"));
        assert!(is_engine_key("c.1") && !is_entry_key("c.1"));
    }

    #[test]
    fn a_shared_record_key_reads_back_as_its_id() {
        assert_eq!(context_key("12"), "c.12");
        assert_eq!(parse("c.12"), Key::Context(Ok("12".into())));
        assert_eq!(parse("c.Bad"), Key::Context(Err("Bad".into())));
        assert_eq!(parse("c."), Key::Context(Err(String::new())));
    }

    #[test]
    fn a_prefixed_key_that_is_not_a_slug_is_corrupt_not_foreign() {
        assert!(matches!(parse("m.Bad"), Key::Entry(Err(_))));
        assert!(matches!(parse("a."), Key::Attempt(Err(_))));
        assert!(is_entry_key("m.Bad"));
    }
}
