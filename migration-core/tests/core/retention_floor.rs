//! The retention floor's refusal names the fix that works (issue 13): a
//! retired slug first shipped in a pre-release may never have reached a
//! release, so "install the pre-release" is not advice for a production
//! cluster; revoking it is.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use ledger_memory::MemoryLedger;
use migration_core::header::Tier;
use migration_core::testing::fixtures::{TreeBuilder, clock};
use migration_core::{Ledger, MigrateError, Migrator, PlanRequest};

async fn refusal(batches: &[(&str, &str)]) -> String {
    let tree = TreeBuilder::new().pre("b").manifest(batches).build();
    let ledger = MemoryLedger::new();
    ledger.create(&[]).await.unwrap();
    match Migrator::new(&tree, &ledger, &clock())
        .plan(&PlanRequest::tier(Tier::PreApply))
        .await
    {
        Err(MigrateError::Refused(plan)) => plan.problems[0].to_string(),
        other => panic!("not refused: {other:?}"),
    }
}

#[tokio::test]
async fn a_retired_slug_first_shipped_in_a_pre_release_names_revocation_as_the_fix() {
    let text = refusal(&[
        ("00001-v1.7.0-rc.1", "rc-only retired\n"),
        ("00002-v1.7.0", "b\n"),
    ])
    .await;
    assert!(
        text.contains("'rc-only' was retired")
            && text.contains("first shipped in the pre-release v1.7.0-rc.1")
            && text.contains("revoke it: add 'rc-only' to the tree's revoked file"),
        "{text}"
    );
    assert!(
        !text.contains("upgrade through v1.7.0-rc.1 (which still ships"),
        "{text}"
    );
}

#[tokio::test]
async fn a_retired_slug_of_a_release_still_says_upgrade_through_that_release() {
    let text = refusal(&[("00001-v1.7.0", "a retired\n"), ("00002-v1.8.0", "b\n")]).await;
    assert!(text.contains("upgrade through v1.7.0"), "{text}");
    assert!(!text.contains("pre-release"), "{text}");
}
