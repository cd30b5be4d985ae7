//! The size budget and the run lock on a real server.

use super::*;

#[tokio::test]
#[ignore = "needs MIGRATE_TEST_KUBECONFIG (examples/kube-testenv)"]
async fn the_budget_stays_below_what_the_real_server_accepts() {
    let f = or_skip!(Fixture::new("the CRD size budget", "budget").await);
    use migration_core::testing::{sample_entry, slug};
    use migration_core::{EntryState, LedgerError, WriteMode};
    // `ok`: its message stays in the entry (a failure's output tail goes to the Secret).
    let message_entry = |bytes: usize| {
        let mut entry = sample_entry(EntryState::Ok, 1);
        entry.message = Some("x".repeat(bytes));
        entry
    };
    let l = f.ledger();
    l.create(&entries(0..3, EntryState::Ok)).await.unwrap();
    let room = DEFAULT_BUDGET_BYTES - f.stored_bytes().await;
    // Grow to just under the budget: the real server accepts it.
    l.write(
        &[(slug(10), message_entry((room - 2_000) as usize))],
        WriteMode::Replace,
    )
    .await
    .unwrap();
    let after = f.stored_bytes().await;
    assert!(after <= DEFAULT_BUDGET_BYTES, "{after}");
    // The budget's own measure of the object agrees with what the real server returns.
    let refused = l
        .write(&[(slug(11), message_entry(3_000))], WriteMode::Replace)
        .await
        .unwrap_err();
    let LedgerError::Full { current_bytes, .. } = refused else {
        panic!("{refused:?}")
    };
    let drift = current_bytes.abs_diff(after);
    assert!(
        drift < 1_000,
        "the budget measured {current_bytes} bytes, the real server returns {after}"
    );
    // Misconfigured above etcd's limit, the real server's refusal fails closed, in both of its
    // forms: etcd's own limit (1.5 MiB), and the API server's etcd client limit (2 MiB).
    let careless = f.ledger_with(Options {
        budget: 4 * ETCD_REQUEST_LIMIT,
        retry: ledger_crd::RetryPolicy::immediate(2),
        ..f.options()
    });
    let before = f.stored().await["metadata"]["resourceVersion"].clone();
    for (bytes, answer) in [
        ((room + 60_000) as usize, "etcdserver: request is too large"),
        (2_300_000, "trying to send message larger than max"),
    ] {
        let err = careless
            .write(&[(slug(10), message_entry(bytes))], WriteMode::Replace)
            .await
            .unwrap_err();
        assert_permanent(&err, "write", bytes);
        assert!(err.to_string().contains(answer), "{err}");
    }
    assert_eq!(f.stored().await["metadata"]["resourceVersion"], before);
    f.cleanup().await;
}

const ETCD_REQUEST_LIMIT: u64 = ledger_crd::ETCD_REQUEST_LIMIT_BYTES;

#[tokio::test]
#[ignore = "needs MIGRATE_TEST_KUBECONFIG (examples/kube-testenv)"]
async fn the_lock_lives_in_the_status_of_the_ledger_object_on_a_real_server() {
    let f = or_skip!(Fixture::new("CRD ledger lock", "lock").await);
    let l = f.created_ledger().await;
    let lease = l
        .acquire("runner-a/pid-1", Duration::from_secs(30))
        .await
        .unwrap();
    // The real schema keeps every field of the lock (none is pruned).
    let lock = f.stored().await["status"]["lock"].clone();
    assert_eq!(lock["holder"], "runner-a/pid-1");
    assert_eq!(lock["token"], lease.token.as_str());
    assert_eq!(lock["ttl_seconds"], 30);
    assert!(
        lock["acquired"].is_string() && lock["renewed"].is_string(),
        "{lock}"
    );
    assert!(
        f.cluster.lock_lease(&f.name).await.is_none(),
        "no Lease is written"
    );
    let renewed = l.renew(&lease, Duration::from_secs(30)).await.unwrap();
    assert_eq!(renewed.token, lease.token);
    l.release(&renewed).await.unwrap();
    assert!(f.stored().await["status"].get("lock").is_none());
    f.cleanup().await;
}
