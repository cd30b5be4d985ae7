//! How many records a ConfigMap's budget holds, counted on the records of
//! [`migration_core::testing::realistic`] (built the way the engine writes
//! them). Used by `tests/density.rs`, which
//! asserts the goals of issue 17, and by the `entry` bench target, which
//! prints the figures for `benches/README.md`.

use std::collections::BTreeMap;

use migration_core::EntryState;
use migration_core::entry::ContextIndex;
use migration_core::keys;
use migration_core::testing::realistic::{runner_entry, slug};

/// Bytes a ConfigMap's budget counts for `data`: every key plus every value.
pub fn flat_bytes(data: &BTreeMap<String, String>) -> u64 {
    data.iter().map(|(k, v)| (k.len() + v.len()) as u64).sum()
}

/// The most fresh-install entries, `per_batch` per batch, whose stored data
/// (entries and the shared records they name) fits `budget` bytes. Stored
/// sizes add up entry by entry, so one pass finds it.
pub fn fresh_install_capacity(per_batch: usize, budget: u64) -> usize {
    let mut index = ContextIndex::default();
    let mut bytes = 0;
    for i in 0.. {
        let slug = slug(i);
        let stored =
            runner_entry(i, 0, i / per_batch, EntryState::SkippedFreshInstall).stored(&mut index);
        bytes += (keys::entry_key(&slug).len() + stored.value.len()) as u64;
        for (id, text) in &stored.contexts {
            bytes += (keys::context_key(id).len() + text.len()) as u64;
        }
        if bytes > budget {
            return i;
        }
    }
    unreachable!("the loop returns once the budget is exceeded")
}
