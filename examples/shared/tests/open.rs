//! Opening a ledger from its spec: what it is opened with is what the
//! program passes in ([`OpenOptions`]), never a global or the environment.

#![allow(clippy::unwrap_used)]

use migrate_shared::{LedgerSpec, OpenOptions};

#[tokio::test]
async fn a_file_ledger_opens_with_the_budget_its_options_give() {
    let dir = tempfile::tempdir().unwrap();
    let spec = LedgerSpec::File(dir.path().join("ledger.json"));
    let options = OpenOptions {
        file_budget: Some(123_456),
        ..OpenOptions::default()
    };
    let ledger = spec.open(&options).await.unwrap();
    ledger.create(&[]).await.unwrap();
    let usage = ledger.read().await.unwrap().unwrap().usage.unwrap();
    assert_eq!(usage.budget_bytes, 123_456);
}
