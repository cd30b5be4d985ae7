//! The size budget.

use super::*;

/// An `ok` entry's message (its tolerated calls) stays in the entry; a failure's output tail
/// would go to the ledger's Secret (CONTRACT.md §5.2).
fn message_entry(bytes: usize) -> LedgerEntry {
    let mut entry = sample_entry(EntryState::Ok, 1);
    entry.message = Some("x".repeat(bytes));
    entry
}

/// Replaces entry `n` with one whose message is `bytes` long; the write must fail.
async fn refused_write(l: &CrdLedger, n: usize, bytes: usize) -> LedgerError {
    l.write(&[(slug(n), message_entry(bytes))], WriteMode::Replace)
        .await
        .unwrap_err()
}

#[tokio::test]
async fn the_budget_is_enforced_before_the_api_server_sees_the_write() {
    let (server, l) = served_ledger().await;
    l.create(&entries(0..2, EntryState::Ok)).await.unwrap();
    server.requests().reset();
    let err = refused_write(&l, 5, DEFAULT_BUDGET_BYTES as usize).await;
    assert!(
        matches!(err, LedgerError::Full { entry_count: 2, .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("ledger full"), "{err}");
    assert_eq!(status_patches(&server), 0, "refused before sending");

    let fresh = served().await;
    fresh.requests().reset();
    let err = ledger(&fresh)
        .create(&[(slug(1), message_entry(DEFAULT_BUDGET_BYTES as usize))])
        .await
        .unwrap_err();
    assert!(matches!(err, LedgerError::Full { .. }), "{err:?}");
    assert_eq!(fresh.requests().total(), 0, "not even the create was sent");
}

#[tokio::test]
async fn the_budget_stays_below_what_the_api_server_accepts() {
    // The test server refuses objects above etcd's limit as a real one does.
    let (server, l) = served_ledger().await;
    l.create(&entries(0..3, EntryState::Ok)).await.unwrap();
    let size = |v: &Value| serde_json::to_vec(v).unwrap().len() as u64;
    // Grow to just under the budget: accepted.
    let room = DEFAULT_BUDGET_BYTES - size(&stored(&server));
    l.write(
        &[(slug(10), message_entry((room - 2_000) as usize))],
        WriteMode::Replace,
    )
    .await
    .unwrap();
    let after = size(&stored(&server));
    assert!(after <= DEFAULT_BUDGET_BYTES, "{after}");
    // A write the API server would still accept (below etcd's limit) but
    // that leaves the budget's headroom is refused by us, unsent.
    server.requests().reset();
    let err = refused_write(&l, 11, 3_000).await;
    assert!(matches!(err, LedgerError::Full { .. }), "{err:?}");
    assert!(after + 3_500 < ETCD_REQUEST_LIMIT_BYTES);
    assert_eq!(status_patches(&server), 0);

    // Misconfigured above etcd's limit, the server's refusal fails closed.
    let careless = CrdLedger::with_options(
        server.client(),
        NAME,
        Options {
            budget: 4 * ETCD_REQUEST_LIMIT_BYTES,
            retry: RetryPolicy::immediate(3),
            ..Options::default()
        },
    );
    let err = refused_write(&careless, 12, ETCD_REQUEST_LIMIT_BYTES as usize).await;
    assert_permanent(&err, "write", "above etcd's limit");
    // Above 2 MiB a real API server (and so the double) answers with its etcd client's gRPC
    // limit rather than etcd's own "request is too large".
    assert!(err.to_string().contains("message larger than max"), "{err}");
}

#[tokio::test]
async fn the_size_the_budget_counts_is_the_size_the_server_stores() {
    let server = served().await;
    let budget = 40_000;
    let l = CrdLedger::with_options(
        server.client(),
        NAME,
        Options {
            budget,
            ..options(&clock())
        },
    );
    l.create(&[]).await.unwrap();
    let mut n = 0;
    let refused = loop {
        match l
            .write(&entries(n..n + 1, EntryState::Ok), WriteMode::OnlyIfAbsent)
            .await
        {
            Ok(_) => n += 1,
            Err(e) => break e,
        }
        assert!(n < 1_000, "the budget never refused a write");
    };
    let LedgerError::Full {
        current_bytes,
        would_be_bytes,
        ..
    } = refused
    else {
        panic!("{refused:?}")
    };
    let stored_bytes = serde_json::to_vec(&stored(&server)).unwrap().len() as u64;
    assert!(n > 50, "only {n} entries fitted");
    assert_eq!(
        current_bytes, stored_bytes,
        "the measure is the stored JSON"
    );
    assert!(stored_bytes <= budget);
    assert!(
        stored_bytes > budget - 1_000,
        "the budget is used, not wasted: {stored_bytes} of {budget}"
    );
    assert!(would_be_bytes > budget);
}
