//! How many realistic records one `MigrationLedger` holds under the budget, measured on the
//! real server's stored object (its JSON with the ownership records the server keeps), on the
//! records the ConfigMap's density test counts (`migration_core::testing::realistic`).

use super::*;

use migration_core::testing::realistic::{fill_with_runner_writes, fresh_install};

#[tokio::test]
#[ignore = "needs MIGRATE_TEST_KUBECONFIG (examples/kube-testenv)"]
async fn at_least_6000_fresh_install_entries_fit_one_custom_resource_on_a_real_server() {
    let f = or_skip!(Fixture::new("CRD density, fresh install", "density-fresh").await);
    let l = f.ledger();
    let entries = fresh_install(6000, 10);
    l.create(&entries).await.unwrap();
    let bytes = f.stored_bytes().await;
    assert!(
        bytes <= DEFAULT_BUDGET_BYTES,
        "6,000 entries take {bytes} bytes, over the budget of {DEFAULT_BUDGET_BYTES}"
    );
    let snapshot = l.read().await.unwrap().unwrap();
    assert_eq!(snapshot.records.len(), 6000);
    for (slug, entry) in entries.iter().step_by(997) {
        assert_eq!(snapshot.entry(slug), Some(entry), "{slug}");
    }
    println!(
        "6,000 fresh-install entries (10 per batch): {bytes} bytes stored, {:.1} each",
        bytes as f64 / 6000.0
    );
    f.cleanup().await;
}

#[tokio::test]
#[ignore = "needs MIGRATE_TEST_KUBECONFIG (examples/kube-testenv)"]
async fn at_least_4000_runner_written_migrations_fit_one_custom_resource_on_a_real_server() {
    let f = or_skip!(Fixture::new("CRD density, runner-written", "density-runner").await);
    let l = f.created_ledger().await;
    // Writing 4,000 migrations a request at a time would store some 3 GB of object revisions in
    // etcd, beyond its default quota. Every migration of a run adds the same bytes, so ten runs
    // are written the way the runner writes them (a mark, then the entry) after a first run that
    // makes the containers, and the capacity is the room left divided by their growth.
    const PER_RUN: usize = 10;
    assert_eq!(
        fill_with_runner_writes(&l, PER_RUN, 0, PER_RUN).await,
        PER_RUN
    );
    let base = f.stored_bytes().await;
    let measured = 10 * PER_RUN;
    let end = PER_RUN + measured;
    assert_eq!(
        fill_with_runner_writes(&l, PER_RUN, PER_RUN, end).await,
        end
    );
    let grown = f.stored_bytes().await;
    let per_migration = (grown - base) as f64 / measured as f64;
    let capacity = PER_RUN + ((DEFAULT_BUDGET_BYTES - base) as f64 / per_migration) as usize;
    let snapshot = l.read().await.unwrap().unwrap();
    assert_eq!(snapshot.records.len(), end);
    assert_eq!(snapshot.attempts_started.len(), end);
    let used = snapshot.usage.unwrap().used_bytes;
    assert!(
        used.abs_diff(grown) < 1_000,
        "the budget measures {used} bytes, the server returns {grown}"
    );
    println!(
        "runner-written, {PER_RUN} per run: {per_migration:.1} bytes per migration (entry, mark, \
         ownership records, a tenth of the run's shared records); {capacity} fit the budget of \
         {DEFAULT_BUDGET_BYTES} bytes"
    );
    assert!(capacity >= 4000, "only {capacity} fit");
    f.cleanup().await;
}
