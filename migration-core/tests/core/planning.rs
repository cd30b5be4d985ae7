//! The planner (CONTRACT.md §6), scenario by scenario, through the pure function.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use migration_core::header::Tier;
use migration_core::ledger::{LedgerSnapshot, Record};
use migration_core::plan::{SeedKind, SeedMode, SkipReason, Unmet};
use migration_core::testing::fixtures::{NOW, TreeBuilder, pending, s};
use migration_core::{
    EntryState, LedgerEntry, MigrationsTree, Plan, PlanContext, PlanError, PlanRequest, Refusal,
    TierSelection, plan,
};

fn ledger(data: &[(&str, &str)]) -> LedgerSnapshot {
    LedgerSnapshot::from_raw_data(data.iter().copied(), Some("1".into()))
}

fn entry(state: EntryState) -> String {
    let mut e = LedgerEntry::new(state, NOW);
    if state == EntryState::Failed {
        e.reason = Some("exit-status".into());
        e.message = Some("boom".into());
    }
    e.encode()
}

fn run(
    tree: &MigrationsTree,
    snapshot: Option<&LedgerSnapshot>,
    request: PlanRequest,
) -> Result<Plan, PlanError> {
    plan(tree, snapshot, &request, &PlanContext::at(NOW))
}

/// Plans a pre-apply run of `tree` on an existing, empty ledger.
fn upgrade(tree: &MigrationsTree) -> Result<Plan, PlanError> {
    run(tree, Some(&ledger(&[])), pre())
}

fn pre() -> PlanRequest {
    PlanRequest::tier(Tier::PreApply)
}

fn refusals(err: PlanError) -> Vec<Refusal> {
    err.problems
}

/// What a pre-apply run of `tree` on an existing, empty ledger is refused for (it must be).
fn upgrade_refusals(tree: &MigrationsTree) -> Vec<Refusal> {
    refusals(upgrade(tree).unwrap_err())
}

/// pre-apply a, b (b requires a); background c; manifest in one batch.
fn basic() -> MigrationsTree {
    TreeBuilder::new()
        .pre("a")
        .script(Tier::PreApply, "b", &["a"])
        .bg("c")
        .manifest(&[("00001-v1.0.0", "a\nb\nc\n")])
        .build()
}

#[test]
fn fresh_install_seeds_every_slug_including_retired_in_one_create_and_runs_nothing() {
    let tree = TreeBuilder::new()
        .pre("a")
        .bg("c")
        .manifest(&[("00001-v1", "gone retired\na\n"), ("00002-v2", "c\n")])
        .build();
    let p = run(&tree, None, pre()).unwrap();
    assert!(p.fresh_install);
    assert_eq!(p.seed_mode, SeedMode::Create);
    assert!(p.pending.is_empty(), "a fresh install runs nothing");
    let seeded: Vec<(&str, EntryState, Option<&str>)> = p
        .seed
        .iter()
        .map(|e| (e.slug.as_str(), e.entry.state, e.entry.batch.as_deref()))
        .collect();
    assert_eq!(
        seeded,
        [
            ("gone", EntryState::SkippedFreshInstall, Some("00001-v1")),
            ("a", EntryState::SkippedFreshInstall, Some("00001-v1")),
            ("c", EntryState::SkippedFreshInstall, Some("00002-v2")),
        ]
    );
    assert_eq!(
        p.seed[1].entry.sha256,
        Some(tree.script(&s("a")).unwrap().sha256)
    );
    assert_eq!(
        p.seed[0].entry.sha256, None,
        "a retired slug has no script to checksum"
    );
}

#[test]
fn an_existing_but_empty_ledger_is_not_a_fresh_install() {
    let p = upgrade(&basic()).unwrap();
    assert!(!p.fresh_install);
    assert!(p.seed.is_empty());
    assert_eq!(pending(&p), ["a", "b"]);
}

#[test]
fn recorded_slugs_are_skipped_and_the_other_tier_is_left_alone() {
    let snapshot = ledger(&[("m.a", &entry(EntryState::Ok))]);
    let p = run(&basic(), Some(&snapshot), pre()).unwrap();
    assert_eq!(pending(&p), ["b"]);
    assert!(
        p.skipped
            .iter()
            .any(|k| k.slug == s("a") && k.reason == SkipReason::Recorded(EntryState::Ok))
    );
    assert!(
        p.skipped
            .iter()
            .any(|k| k.slug == s("c") && k.reason == SkipReason::OtherTier(Tier::Background))
    );
    let bg = run(
        &basic(),
        Some(&snapshot),
        PlanRequest::tier(Tier::Background),
    )
    .unwrap();
    assert_eq!(pending(&bg), ["c"]);
}

#[test]
fn every_terminal_state_counts_as_recorded() {
    for state in EntryState::ALL.into_iter().filter(|s| s.is_terminal()) {
        let snapshot = ledger(&[("m.a", &entry(state)), ("m.b", &entry(EntryState::Ok))]);
        let p = run(&basic(), Some(&snapshot), pre()).unwrap();
        assert!(pending(&p).is_empty(), "{state}: {:?}", pending(&p));
    }
}

#[test]
fn legacy_seeding_records_only_integers_below_version_and_only_where_absent() {
    let tree = TreeBuilder::new()
        .pre_scripts(&["one", "two", "three", "new"])
        .legacy_map("1 one\n2 two\n3 three\n")
        .manifest(&[("00000-legacy", "one\ntwo\nthree\n"), ("00001-v1", "new\n")])
        .build();
    let snapshot = ledger(&[("version", "3"), ("m.two", &entry(EntryState::Ok))]);
    let p = run(&tree, Some(&snapshot), pre()).unwrap();
    let seeded: Vec<(&str, SeedKind)> = p.seed.iter().map(|e| (e.slug.as_str(), e.kind)).collect();
    assert_eq!(
        seeded,
        [("one", SeedKind::Legacy)],
        "two is recorded already, three is not below 3"
    );
    assert_eq!(p.seed[0].entry.state, EntryState::Legacy);
    assert_eq!(p.seed[0].entry.batch.as_deref(), Some("00000-legacy"));
    assert_eq!(
        pending(&p),
        ["three", "new"],
        "legacy slugs at or above version run, in order"
    );
}

#[test]
fn a_corrupt_version_with_a_legacy_map_is_fatal() {
    let tree = TreeBuilder::new()
        .pre("one")
        .legacy_map("1 one\n")
        .manifest(&[("00000-legacy", "one\n")])
        .build();
    let err = run(&tree, Some(&ledger(&[("version", "v45")])), pre()).unwrap_err();
    assert_eq!(
        refusals(err),
        [Refusal::CorruptVersion { raw: "v45".into() }]
    );
    // Without a legacy map the integer is irrelevant: warn, do not refuse.
    let p = run(&basic(), Some(&ledger(&[("version", "v45")])), pre()).unwrap();
    assert_eq!(p.warnings.len(), 1);
}

#[test]
fn revoked_slugs_are_recorded_revoked_only_where_absent_and_never_run() {
    let tree = TreeBuilder::new()
        .pre_scripts(&["a", "bad", "old-bad"])
        .revoked("bad\nold-bad\n")
        .manifest(&[("00001-v1", "a\nbad\nold-bad\n")])
        .build();
    let snapshot = ledger(&[("m.old-bad", &entry(EntryState::Ok))]);
    let p = run(&tree, Some(&snapshot), pre()).unwrap();
    assert_eq!(pending(&p), ["a"]);
    let seeded: Vec<(&str, SeedKind, EntryState)> = p
        .seed
        .iter()
        .map(|e| (e.slug.as_str(), e.kind, e.entry.state))
        .collect();
    assert_eq!(
        seeded,
        [("bad", SeedKind::Revoked, EntryState::Revoked)],
        "revocation never rewrites the ok entry"
    );
}

#[test]
fn retired_slugs_are_skipped_when_recorded() {
    let tree = TreeBuilder::new()
        .pre("b")
        .manifest(&[("00001-v1", "a retired\nb\n")])
        .build();
    let p = run(
        &tree,
        Some(&ledger(&[("m.a", &entry(EntryState::Ok))])),
        pre(),
    )
    .unwrap();
    assert_eq!(pending(&p), ["b"]);
}

#[test]
fn the_retention_floor_refuses_and_names_a_release_that_still_ships_the_script() {
    let tree = TreeBuilder::new()
        .pre("b")
        .manifest(&[("00001-v1.7.0", "a retired\n"), ("00002-v1.8.0", "b\n")])
        .build();
    let err = upgrade(&tree).unwrap_err();
    let problems = refusals(err);
    assert_eq!(
        problems,
        [Refusal::RetentionFloor {
            slug: s("a"),
            release: "v1.7.0".into()
        }]
    );
    assert!(problems[0].to_string().contains("upgrade through v1.7.0"));
}

#[test]
fn a_retired_and_revoked_slug_needs_no_entry() {
    let tree = TreeBuilder::new()
        .pre("b")
        .revoked("a\n")
        .manifest(&[("00001-v1", "a retired\nb\n")])
        .build();
    let p = upgrade(&tree).unwrap();
    assert_eq!(pending(&p), ["b"]);
    assert_eq!(p.seed[0].kind, SeedKind::Revoked);
}

#[test]
fn legacy_seeding_satisfies_the_retention_floor() {
    let tree = TreeBuilder::new()
        .pre("b")
        .legacy_map("7 a\n")
        .manifest(&[("00000-legacy", "a retired\n"), ("00001-v1", "b\n")])
        .build();
    let p = run(&tree, Some(&ledger(&[("version", "8")])), pre()).unwrap();
    assert_eq!(p.seed[0].kind, SeedKind::Legacy);
    assert_eq!(pending(&p), ["b"]);
}

#[test]
fn every_fatal_condition_is_reported_before_anything_runs() {
    // on disk but in no batch; in a batch but not on disk; retired yet present.
    let tree = TreeBuilder::new()
        .pre_scripts(&["stray", "zombie"])
        .manifest(&[("00001-v1", "missing\nzombie retired\n")])
        .build();
    assert_eq!(
        upgrade_refusals(&tree),
        [
            Refusal::NotInManifest {
                slug: s("stray"),
                path: "pre-apply/stray".into()
            },
            Refusal::ScriptMissing {
                slug: s("missing"),
                batch: "00001-v1".into()
            },
            Refusal::RetiredButPresent {
                slug: s("zombie"),
                batch: "00001-v1".into()
            },
        ]
    );
    // The same problems refuse a fresh install too.
    assert!(run(&tree, None, pre()).is_err());
}

#[test]
fn a_missing_manifest_is_fatal() {
    let tree = TreeBuilder::new().pre("a").build();
    assert!(matches!(
        &refusals(run(&tree, None, pre()).unwrap_err())[..],
        [Refusal::NoManifest { .. }]
    ));
}

#[test]
fn a_corrupt_entry_on_the_path_refuses_and_names_the_key() {
    let snapshot = ledger(&[("m.a", "{\"state\":")]);
    let problems = refusals(run(&basic(), Some(&snapshot), pre()).unwrap_err());
    match &problems[..] {
        [Refusal::CorruptEntry { slug, key, .. }] => {
            assert_eq!(slug.as_str(), "a");
            assert_eq!(key, "m.a");
        }
        other => panic!("{other:?}"),
    }
    assert!(problems[0].to_string().contains("'m.a' is corrupt"));
}

#[test]
fn a_corrupt_entry_of_the_other_tier_is_a_warning_not_a_refusal() {
    let snapshot = ledger(&[("m.c", "garbage")]);
    let p = run(&basic(), Some(&snapshot), pre()).unwrap();
    assert_eq!(pending(&p), ["a", "b"]);
    assert_eq!(p.warnings.len(), 1);
    assert!(
        run(
            &basic(),
            Some(&snapshot),
            PlanRequest::tier(Tier::Background)
        )
        .is_err()
    );
}

#[test]
fn a_corrupt_entry_for_a_retired_slug_is_fatal() {
    let tree = TreeBuilder::new()
        .pre("b")
        .manifest(&[("00001-v1", "a retired\nb\n")])
        .build();
    let problems = refusals(run(&tree, Some(&ledger(&[("m.a", "{")])), pre()).unwrap_err());
    assert!(
        matches!(&problems[..], [Refusal::CorruptEntry { .. }]),
        "{problems:?}"
    );
}

#[test]
fn unreadable_keys_are_reported_as_warnings() {
    let snapshot = ledger(&[("m.Redis_Fix", &entry(EntryState::Ok))]);
    let p = run(&basic(), Some(&snapshot), pre()).unwrap();
    assert!(p.warnings[0].to_string().contains("m.Redis_Fix"));
}

#[test]
fn a_checksum_change_of_a_recorded_script_is_reported_and_not_rerun() {
    let mut recorded = LedgerEntry::new(EntryState::Ok, NOW);
    recorded.sha256 = Some(migration_core::Sha256Digest::of(b"the old content"));
    let snapshot = ledger(&[("m.a", &recorded.encode())]);
    let p = run(&basic(), Some(&snapshot), pre()).unwrap();
    assert_eq!(pending(&p), ["b"]);
    assert_eq!(p.checksum_mismatches.len(), 1);
    assert_eq!(p.checksum_mismatches[0].slug, s("a"));
}

#[test]
fn a_checksum_mismatch_serialises_as_its_slug_and_both_digests_as_text() {
    let old = migration_core::Sha256Digest::of(b"the old content");
    let mut recorded = LedgerEntry::new(EntryState::Ok, NOW);
    recorded.sha256 = Some(old);
    let snapshot = ledger(&[("m.a", &recorded.encode())]);
    let p = run(&basic(), Some(&snapshot), pre()).unwrap();
    let on_disk = p.checksum_mismatches[0].on_disk;
    // The `plan` and `verify` documents carry the mismatch as it is: the
    // field names and order are part of their JSON.
    assert_eq!(
        serde_json::to_string(&p.checksum_mismatches[0]).unwrap(),
        format!(r#"{{"slug":"a","recorded":"{old}","on_disk":"{on_disk}"}}"#)
    );
}

#[test]
fn only_reruns_a_recorded_slug_and_carries_its_previous_entry() {
    let snapshot = ledger(&[
        ("m.a", &entry(EntryState::Ok)),
        ("m.b", &entry(EntryState::Failed)),
    ]);
    let request = PlanRequest {
        tiers: TierSelection::One(Tier::PreApply),
        only: Some(s("b")),
    };
    let p = run(&basic(), Some(&snapshot), request).unwrap();
    assert_eq!(pending(&p), ["b"]);
    assert_eq!(
        p.pending[0].previous.as_ref().unwrap().state,
        EntryState::Failed
    );
}

#[test]
fn only_refuses_revoked_unknown_retired_wrong_tier_and_missing_ledger() {
    let tree = TreeBuilder::new()
        .pre_scripts(&["a", "bad"])
        .bg("c")
        .revoked("bad\n")
        .manifest(&[("00001-v1", "gone retired\na\nbad\nc\n")])
        .build();
    let snap = ledger(&[("m.gone", &entry(EntryState::Ok))]);
    let only = |slug: &str| PlanRequest {
        tiers: TierSelection::One(Tier::PreApply),
        only: Some(s(slug)),
    };
    let first = |r: Result<Plan, PlanError>| refusals(r.unwrap_err()).remove(0);
    assert_eq!(
        first(run(&tree, Some(&snap), only("bad"))),
        Refusal::OnlyRevoked { slug: s("bad") }
    );
    assert_eq!(
        first(run(&tree, Some(&snap), only("nope"))),
        Refusal::OnlyNotInTree {
            slug: s("nope"),
            retired: false
        }
    );
    assert_eq!(
        first(run(&tree, Some(&snap), only("gone"))),
        Refusal::OnlyNotInTree {
            slug: s("gone"),
            retired: true
        }
    );
    assert_eq!(
        first(run(&tree, Some(&snap), only("c"))),
        Refusal::OnlyWrongTier {
            slug: s("c"),
            actual: Tier::Background,
            requested: Tier::PreApply
        }
    );
    assert_eq!(
        first(run(&tree, None, only("a"))),
        Refusal::OnlyWithoutLedger { slug: s("a") }
    );
    let any_tier = PlanRequest {
        tiers: TierSelection::All,
        only: Some(s("c")),
    };
    assert_eq!(pending(&run(&tree, Some(&snap), any_tier).unwrap()), ["c"]);
}

#[test]
fn only_refuses_a_corrupt_entry_for_its_slug() {
    let snapshot = ledger(&[("m.a", "{")]);
    let request = PlanRequest {
        tiers: TierSelection::One(Tier::PreApply),
        only: Some(s("a")),
    };
    assert!(matches!(
        &refusals(run(&basic(), Some(&snapshot), request).unwrap_err())[..],
        [Refusal::CorruptEntry { .. }]
    ));
}

#[test]
fn a_disallowed_interpreter_is_refused_by_plan() {
    let tree = TreeBuilder::new()
        .raw_script(Tier::PreApply, "py", b"#!/usr/bin/python3\n# cozystack-migration: tier=pre-apply\n# cozystack-migration: on-error=abort\n")
        .manifest(&[("00001-v1", "py\n")])
        .build();
    assert!(
        matches!(&upgrade_refusals(&tree)[..], [Refusal::InterpreterNotAllowed { shebang, .. }] if shebang == "/usr/bin/python3")
    );
}

#[test]
fn a_requirement_placed_later_in_the_manifest_is_fatal() {
    let tree = TreeBuilder::new()
        .script(Tier::PreApply, "a", &["b"])
        .pre("b")
        .manifest(&[("00001-v1", "a\n"), ("00002-v2", "b\n")])
        .build();
    assert_eq!(
        upgrade_refusals(&tree),
        [Refusal::RequiresLater {
            slug: s("a"),
            target: s("b"),
            target_batch: "00002-v2".into()
        }]
    );
}

#[test]
fn requirements_that_failed_were_revoked_or_have_not_run_are_marked_unmet() {
    // (A pre-apply script cannot require a background one: a tree error,
    // tests/requirement_tiers.rs. The other direction can be unmet.)
    let tree = TreeBuilder::new()
        .pre_scripts(&["failed-one", "revoked-one", "not-run-yet"])
        .script(
            Tier::Background,
            "dependent",
            &["failed-one", "revoked-one", "not-run-yet"],
        )
        .revoked("revoked-one\n")
        .manifest(&[
            ("00001-v1", "failed-one\nnot-run-yet\nrevoked-one\n"),
            ("00002-v2", "dependent\n"),
        ])
        .build();
    let snapshot = ledger(&[("m.failed-one", &entry(EntryState::Failed))]);
    let p = run(&tree, Some(&snapshot), PlanRequest::tier(Tier::Background)).unwrap();
    assert_eq!(pending(&p), ["dependent"]);
    assert_eq!(
        p.pending[0].unmet,
        [
            (s("failed-one"), Unmet::Recorded(EntryState::Failed)),
            (s("revoked-one"), Unmet::Revoked),
            (s("not-run-yet"), Unmet::NotRun(Tier::PreApply)),
        ]
    );
}

#[test]
fn a_requirement_pending_earlier_in_the_same_run_is_met() {
    let p = upgrade(&basic()).unwrap();
    assert_eq!(pending(&p), ["a", "b"]);
    assert!(p.pending[1].unmet.is_empty());
    assert_eq!(p.pending[1].requires, [s("a")]);
}

#[test]
fn legacy_and_revoked_slugs_missing_from_the_manifest_are_fatal() {
    let tree = TreeBuilder::new()
        .pre("a")
        .legacy_map("1 lost\n")
        .revoked("typo\n")
        .manifest(&[("00001-v1", "a\n")])
        .build();
    assert_eq!(
        upgrade_refusals(&tree),
        [
            Refusal::LegacyNotInManifest {
                slug: s("lost"),
                number: 1,
                line: 1
            },
            Refusal::RevokedNotInManifest {
                slug: s("typo"),
                line: 1
            },
        ]
    );
}

#[test]
fn pending_migrations_carry_what_the_runner_needs() {
    let p = upgrade(&basic()).unwrap();
    let b = &p.pending[1];
    assert_eq!(b.batch, "00001-v1.0.0");
    assert_eq!(b.relative_path, std::path::PathBuf::from("pre-apply/b"));
    assert_eq!(b.tier, Tier::PreApply);
    assert!(b.previous.is_none());
    assert!(matches!(
        ledger(&[("m.x", "{")]).record(&s("x")),
        Some(Record::Corrupt(_))
    ));
}
