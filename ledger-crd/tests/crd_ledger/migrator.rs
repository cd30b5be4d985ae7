//! The engine's own planning and seeding over this backend: a fresh install,
//! one interrupted between its two requests, and an old cluster whose ledger
//! a chart declared with the legacy version.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use std::path::PathBuf;

use common::RESOURCE;
use ledger_crd::{CrdLedger, Options, RetryPolicy};
use migration_core::header::Tier;
use migration_core::testing::fixtures::{clock, pending, s};
use migration_core::{EntryState, MigrationsTree, Migrator, PlanRequest, TreeFiles};
use serde_json::json;
use test_apiserver::{FaultRule, TestApiServer, Verb};

const NAME: &str = "cozystack";

fn script(slug: &str) -> (Tier, String, Vec<u8>) {
    let text = format!(
        "#!/bin/sh\n# cozystack-migration: tier=pre-apply\n# cozystack-migration: on-error=abort\nset -eu\necho {slug}\n"
    );
    (Tier::PreApply, slug.to_owned(), text.into_bytes())
}

/// Three migrations: one from the legacy integer era (number 1), two new.
fn tree() -> MigrationsTree {
    let files = TreeFiles {
        scripts: vec![script("a"), script("b"), script("legacy-one")],
        legacy_map: Some(b"1 legacy-one\n".to_vec()),
        order: Some(vec![
            ("00000-legacy".into(), b"legacy-one\n".to_vec()),
            ("00001-v1".into(), b"a\nb\n".to_vec()),
        ]),
        ..TreeFiles::default()
    };
    MigrationsTree::from_files(PathBuf::from("/virtual/migrations"), files).unwrap()
}

async fn served() -> TestApiServer {
    let server = TestApiServer::start().await;
    common::register(&server);
    server
}

fn ledger(server: &TestApiServer) -> CrdLedger {
    CrdLedger::with_options(
        server.client(),
        NAME,
        Options {
            retry: RetryPolicy::immediate(4),
            ..Options::default()
        },
    )
}

#[tokio::test]
async fn a_fresh_install_records_every_slug_skipped_and_runs_nothing() {
    let (server, tree, clock) = (served().await, tree(), clock());
    let l = ledger(&server);
    let migrator = Migrator::new(&tree, &l, &clock);
    server.requests().reset();
    let first = migrator
        .prepare(&PlanRequest::tier(Tier::PreApply))
        .await
        .unwrap();
    assert!(first.plan.fresh_install);
    assert!(first.plan.pending.is_empty());
    assert_eq!(first.written.len(), 3);
    assert_eq!(server.requests().count(Verb::Create, "migrationledgers"), 1);
    assert_eq!(
        server
            .requests()
            .count(Verb::Patch, "migrationledgers/status"),
        1,
        "one status write seeds every entry"
    );
    let second = migrator
        .prepare(&PlanRequest::tier(Tier::PreApply))
        .await
        .unwrap();
    assert!(!second.plan.fresh_install);
    assert!(second.plan.pending.is_empty());
}

#[tokio::test]
async fn a_fresh_install_interrupted_between_its_requests_stays_a_fresh_install() {
    let (server, tree, clock) = (served().await, tree(), clock());
    let l = ledger(&server);
    let migrator = Migrator::new(&tree, &l, &clock);
    server.faults().inject(
        FaultRule::on(Verb::Patch, "migrationledgers/status")
            .once()
            .respond(403, "Forbidden"),
    );
    migrator
        .prepare(&PlanRequest::tier(Tier::PreApply))
        .await
        .unwrap_err();
    assert!(
        server.object(RESOURCE, "", NAME).is_some(),
        "the object was created"
    );

    let retried = migrator
        .prepare(&PlanRequest::tier(Tier::PreApply))
        .await
        .unwrap();
    assert!(
        retried.plan.fresh_install,
        "an existing empty ledger would run every migration on a fresh cluster"
    );
    assert!(retried.plan.pending.is_empty());
    let snapshot = migration_core::Ledger::read(&l).await.unwrap().unwrap();
    assert_eq!(snapshot.records.len(), 3);
    assert!(
        snapshot
            .records
            .values()
            .all(|r| r.entry().unwrap().state == EntryState::SkippedFreshInstall)
    );
}

#[tokio::test]
async fn an_old_cluster_whose_ledger_a_chart_declared_is_seeded_legacy_not_fresh() {
    let server = served().await;
    common::declare(&server, NAME, json!({"bundle": NAME, "version": 2}));
    let (tree, clock) = (tree(), clock());
    let l = ledger(&server);
    let prepared = Migrator::new(&tree, &l, &clock)
        .prepare(&PlanRequest::tier(Tier::PreApply))
        .await
        .unwrap();
    assert!(!prepared.plan.fresh_install);
    assert_eq!(prepared.written, [s("legacy-one")]);
    assert_eq!(pending(&prepared.plan), ["a", "b"]);
    let object = server.object(RESOURCE, "", NAME).unwrap();
    assert_eq!(object["status"]["entries"]["legacy-one"]["s"], "legacy");
    assert_eq!(
        object["spec"]["version"], 2,
        "the declared version is never written"
    );
}
