//! Records of realistic size, built the way the engine writes them: the
//! runner's migrations (an attempt mark, then the entry, each run with its
//! own digest-pinned image, `lib/` digest and batch) and a fresh install's
//! seeding. The density tests of every backend and the `entry` bench share
//! them, so each backend's capacity is measured on the same records.

use crate::Sha256Digest;
use crate::entry::{EntryState, LedgerEntry};
use crate::ledger::{Ledger, LedgerError, WriteMode};
use crate::slug::Slug;
use crate::testing::fixtures::NOW;

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
        NOW.unix_seconds(),
        i
    )
}

/// The entry the runner records for migration `i` run in run `run` from
/// batch `batch_no`, `state` with one execution (none for a fresh install).
pub fn runner_entry(i: usize, run: usize, batch_no: usize, state: EntryState) -> LedgerEntry {
    LedgerEntry {
        sha256: Some(Sha256Digest::of(format!("script {i}").as_bytes())),
        lib_sha256: Some(Sha256Digest::of(format!("lib {run}").as_bytes())),
        batch: Some(batch(batch_no)),
        image: Some(image(run)),
        attempts: u32::from(state != EntryState::SkippedFreshInstall),
        ..LedgerEntry::new(state, NOW)
    }
}

/// Records runner-written migrations `from..limit` into `ledger` (which
/// exists), `per_run` migrations per run (one image, one `lib/` digest and
/// one batch per run: an upgrade applying one release's migrations): an
/// attempt mark, then the `ok` entry, each migration. Returns the index
/// after the last one recorded whole (`limit` when all were); a refusal
/// other than "ledger full" panics.
pub async fn fill_with_runner_writes(
    ledger: &dyn Ledger,
    per_run: usize,
    from: usize,
    limit: usize,
) -> usize {
    for i in from..limit {
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
