//! API round trips are counted, not timed, so they can be asserted: every
//! scenario of the benchmark table makes exactly its documented minimum of
//! requests (see `benches/README.md` for why each minimum is the minimum).
//! A change that adds a request (a GET before each write, a request per
//! entry) fails here.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use benches::round_trips::{self, Backend, Scenario};

fn assert_minimal(s: &Scenario) {
    assert_eq!(
        s.counts.total,
        s.minimum,
        "{}: {} requests, the minimum is {}; outcome: {}; requests:\n  {}",
        s.name,
        s.counts,
        s.minimum,
        s.outcome,
        s.counts.log.join("\n  ")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_with_nothing_pending_reads_once_and_a_record_writes_once() {
    let (prepare, record) = round_trips::prepare_nothing_pending(100).await;
    assert_eq!(prepare.counts.count("GET", "configmaps"), 1);
    assert_minimal(&prepare);
    assert_eq!(record.counts.count("PATCH", "configmaps"), 1);
    assert_minimal(&record);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fresh_install_creates_every_entry_in_one_request() {
    let s = round_trips::prepare_fresh_install(1_000).await;
    assert_eq!(s.outcome, "1000 entries created");
    assert_eq!(s.counts.count("POST", "configmaps"), 1);
    assert_minimal(&s);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fresh_install_above_the_budget_is_refused_before_sending() {
    let s = round_trips::prepare_fresh_install(10_000).await;
    assert!(s.outcome.contains("ledger full"), "{}", s.outcome);
    assert_eq!(s.counts.count("POST", "configmaps"), 0);
    assert_minimal(&s);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn legacy_seeding_writes_all_56_keys_in_one_patch() {
    let s = round_trips::prepare_legacy_seeding().await;
    assert_eq!(s.outcome, "56 seeded");
    assert_eq!(s.counts.count("PATCH", "configmaps"), 1);
    assert_minimal(&s);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hook_run_costs_k_plus_three_requests_for_k_pending_migrations_and_one_for_none() {
    hook_run_costs_k_plus_three(Backend::ConfigMap).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hook_run_on_the_custom_resource_ledger_also_costs_k_plus_three_requests() {
    hook_run_costs_k_plus_three(Backend::Crd).await;
}

/// A hook run's requests on `backend`: one read of the ledger object, one
/// write before each script and one after the last, one Lease read.
async fn hook_run_costs_k_plus_three(backend: Backend) {
    let (read, write) = match backend {
        Backend::ConfigMap => ("configmaps", "configmaps"),
        Backend::Crd => ("migrationledgers", "migrationledgers/status"),
    };
    for k in [0, 1, 10] {
        let s = round_trips::runner_on(backend, 100, k).await;
        assert_eq!(s.outcome, format!("{k} pending, {k} results"));
        assert_eq!(s.counts.count("GET", read), 1, "{}: one read", s.name);
        assert_eq!(
            s.counts.count("PATCH", write),
            if k == 0 { 0 } else { k + 1 },
            "{}: one write before each script (its attempt mark, the previous record, \
             the lock) and one after the last (its record, the release)",
            s.name
        );
        assert_eq!(
            s.counts.count("GET", "leases"),
            usize::from(k > 0),
            "{}: taking the lock checks that no runner of an older release holds the Lease",
            s.name
        );
        assert!(
            s.counts.total <= if k == 0 { 1 } else { k + 3 },
            "{}: K + 3 at most",
            s.name
        );
        assert_eq!(
            s.counts.total,
            s.counts.count("GET", read)
                + s.counts.count("PATCH", write)
                + s.counts.count("GET", "leases"),
            "{}: the run lock lives in the ledger object, so no Lease is written",
            s.name
        );
        // The goal of issue 17, asserted beside the exact figure.
        assert!(s.counts.total <= k + 3, "{}: {}", s.name, s.counts);
        assert_minimal(&s);
    }
}
