//! The ledger's density goals (issue 17), asserted on records built the way
//! the engine writes them: at least 4,000 runner-written migrations (each an
//! attempt mark and an `ok` entry) and at least 6,000 fresh-install entries
//! fit one 1 MiB ConfigMap, counted as its backend's budget counts them
//! (every key plus every value of `data`). The file ledger is not held to
//! this: its budget is its own setting, 64 MiB by default
//! (`MIGRATE_FILE_LEDGER_BUDGET`, CONTRACT.md §5.5).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use benches::density::{flat_bytes, fresh_install_capacity};
use ledger_configmap::{CONFIGMAP_BUDGET_BYTES, ConfigMapLedger};
use ledger_memory::{DEFAULT_BUDGET_BYTES, MemoryLedger};
use migration_core::entry::flat_data;
use migration_core::testing::realistic::{fill_with_runner_writes, fresh_install};
use migration_core::{Ledger, LedgerError};
use test_apiserver::TestApiServer;

#[tokio::test]
async fn at_least_4000_runner_written_migrations_fit_a_1_mib_configmap() {
    assert_eq!(
        DEFAULT_BUDGET_BYTES, CONFIGMAP_BUDGET_BYTES,
        "the memory ledger counts the ConfigMap's budget"
    );
    // Ten migrations per upgrade (one image, `lib/` digest and batch each),
    // and fifty.
    for per_run in [10, 50] {
        let ledger = MemoryLedger::new();
        ledger.create(&[]).await.unwrap();
        let n = fill_with_runner_writes(&ledger, per_run, 0, 20_000).await;
        let data = ledger.raw_data().unwrap();
        let snapshot = ledger.read().await.unwrap().unwrap();
        assert_eq!(snapshot.usage.unwrap().used_bytes, flat_bytes(&data));
        assert!(flat_bytes(&data) <= CONFIGMAP_BUDGET_BYTES);
        assert_eq!(snapshot.records.len(), n);
        // The mark of the migration whose entry no longer fitted is there.
        assert!((n..=n + 1).contains(&snapshot.attempts_started.len()));
        assert_eq!(snapshot.corrupt().count(), 0);
        assert!(snapshot.unreadable_keys.is_empty());
        println!(
            "{per_run} per run: {n} runner-written migrations fit, {:.1} bytes each",
            flat_bytes(&data) as f64 / n as f64
        );
        assert!(n >= 4000, "{per_run} per run: only {n} fit");
    }
}

#[test]
fn at_least_6000_fresh_install_entries_fit_a_1_mib_configmap() {
    for per_batch in [10, 50] {
        let n = fresh_install_capacity(per_batch, CONFIGMAP_BUDGET_BYTES);
        println!("{per_batch} per batch: {n} fresh-install entries fit");
        assert!(n >= 6000, "{per_batch} per batch: only {n} fit");
    }
}

#[tokio::test]
async fn the_configmap_backend_creates_6000_fresh_install_entries_and_refuses_more_than_fit() {
    let server = TestApiServer::start().await;
    let ledger = ConfigMapLedger::new(server.client(), "cozy-system", "cozystack-version");
    let entries = fresh_install(6000, 10);
    ledger.create(&entries).await.unwrap();
    let snapshot = ledger.read().await.unwrap().unwrap();
    assert_eq!(snapshot.records.len(), 6000);
    for (slug, entry) in &entries {
        assert_eq!(snapshot.entry(slug), Some(entry));
    }
    let used = snapshot.usage.unwrap().used_bytes;
    assert_eq!(
        used,
        flat_bytes(&flat_data(entries.iter().map(|(s, e)| (s, e))))
    );
    assert!(used <= CONFIGMAP_BUDGET_BYTES);

    let too_many = fresh_install(fresh_install_capacity(10, CONFIGMAP_BUDGET_BYTES) + 1, 10);
    let other = ConfigMapLedger::new(server.client(), "cozy-system", "other");
    let err = other.create(&too_many).await.unwrap_err();
    assert!(matches!(err, LedgerError::Full { .. }), "{err}");
}
