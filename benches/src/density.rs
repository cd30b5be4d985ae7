//! How many records a ledger holds, built the way the engine writes them:
//! the runner's migrations (an attempt mark, then the entry), and a fresh
//! install's seeding (one create). Used by `tests/density.rs`, which
//! asserts the goals of issue 17, and by the `entry` bench target, which
//! prints the figures for `benches/README.md`.

use std::collections::BTreeMap;

use migration_core::entry::ContextIndex;
use migration_core::keys;
use migration_core::{EntryState, Ledger, LedgerEntry, LedgerError, Sha256Digest, Slug, WriteMode};

use crate::inputs::epoch;

/// The `i`th realistic slug, 26 bytes like `redis-failover-group-label`:
/// `redis-failover-label-00042`.
pub fn slug(i: usize) -> Slug {
    Slug::parse(&format!("redis-failover-label-{i:05}")).unwrap()
}

/// The digest-pinned image of run `run`:
/// `ghcr.io/cozystack/cozystack/migrations:v1.7.3@sha256:<64 hex>`.
pub fn image(run: usize) -> String {
    format!(
        "ghcr.io/cozystack/cozystack/migrations:v1.{}.{}@sha256:{}",
        7 + run / 20,
        run % 20,
        Sha256Digest::of(format!("image {run}").as_bytes())
    )
}

/// The label of batch `b`, 13 bytes like `00042-v1.7.12`.
pub fn batch(b: usize) -> String {
    format!("{b:05}-v1.{}.{:02}", 7 + b / 100, b % 100)
}

/// The token the runner notes an attempt with: holder (the pod name), slug,
/// wall-clock nanoseconds and a process-wide counter.
pub fn runner_token(slug: &Slug, i: usize) -> String {
    format!(
        "cozystack-migrate-7f9c4d-x2v8q/{slug}/{}{:09}/{i}",
        epoch().unix_seconds(),
        i
    )
}

/// The entry the runner records for migration `i` run in run `run` from
/// batch `batch_no`, `state` with `attempts` executions.
pub fn runner_entry(i: usize, run: usize, batch_no: usize, state: EntryState) -> LedgerEntry {
    LedgerEntry {
        sha256: Some(Sha256Digest::of(format!("script {i}").as_bytes())),
        lib_sha256: Some(Sha256Digest::of(format!("lib {run}").as_bytes())),
        batch: Some(batch(batch_no)),
        image: Some(image(run)),
        attempts: u32::from(state != EntryState::SkippedFreshInstall),
        ..LedgerEntry::new(state, epoch())
    }
}

/// Records runner-written migrations into `ledger` (which exists) until it
/// is full, `per_run` migrations per run (one image, one `lib/` digest and
/// one batch per run: an upgrade applying one release's migrations):
/// an attempt mark, then the `ok` entry, each migration. Returns how many
/// were recorded whole; the first refusal must be "ledger full".
pub async fn fill_with_runner_writes(ledger: &dyn Ledger, per_run: usize, limit: usize) -> usize {
    for i in 0..limit {
        let run = i / per_run;
        let slug = slug(i);
        let count = match ledger.note_attempt(&slug, &runner_token(&slug, i), 0).await {
            Ok(count) => count,
            Err(LedgerError::Full { .. }) => return i,
            Err(e) => panic!("note attempt {i}: {e}"),
        };
        let entry = LedgerEntry {
            attempts: count,
            ..runner_entry(i, run, run, EntryState::Ok)
        };
        match ledger.write(&[(slug, entry)], WriteMode::Replace).await {
            Ok(_) => {}
            Err(LedgerError::Full { .. }) => return i,
            Err(e) => panic!("write {i}: {e}"),
        }
    }
    limit
}

/// A fresh install's seeding of `n` slugs, `per_batch` per batch, one run.
pub fn fresh_install(n: usize, per_batch: usize) -> Vec<(Slug, LedgerEntry)> {
    (0..n)
        .map(|i| {
            (
                slug(i),
                runner_entry(i, 0, i / per_batch, EntryState::SkippedFreshInstall),
            )
        })
        .collect()
}

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
