//! A diverged legacy slot (CONTRACT.md §6.2): the integer says one of its
//! contents ran, not which; the plan uses a record of one, and refuses
//! when there is none.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use migration_core::ledger::LedgerSnapshot;
use migration_core::plan::SeedKind;
use migration_core::testing::fixtures::{NOW, TreeBuilder};
use migration_core::{
    EntryState, LedgerEntry, MigrationsTree, Plan, PlanContext, PlanError, PlanRequest, Refusal,
    Tier, plan,
};

fn tree() -> MigrationsTree {
    TreeBuilder::new()
        .pre_scripts(&["1", "2-main", "3"])
        .legacy_map("1 1\n2 2-main others=2-backport\n3 3\n")
        .manifest(&[("00000-legacy", "1\n2-main\n3\n")])
        .build()
}

fn upgrade(data: &[(&str, &str)]) -> Result<Plan, PlanError> {
    let snapshot = LedgerSnapshot::from_raw_data(data.iter().copied(), Some("1".into()));
    let request = PlanRequest::tier(Tier::PreApply);
    plan(&tree(), Some(&snapshot), &request, &PlanContext::at(NOW))
}

fn legacy() -> String {
    LedgerEntry::new(EntryState::Legacy, NOW).encode()
}

fn pending(p: &Plan) -> Vec<&str> {
    p.pending.iter().map(|x| x.slug.as_str()).collect()
}

#[test]
fn a_version_above_a_diverged_slot_with_no_record_of_any_content_is_refused() {
    let err = upgrade(&[("version", "4")]).unwrap_err();
    assert_eq!(err.problems.len(), 1, "{:?}", err.problems);
    let Refusal::DivergedLegacySlot {
        number,
        version,
        slug,
        others,
    } = &err.problems[0]
    else {
        panic!("{:?}", err.problems);
    };
    assert_eq!((*number, *version, slug.as_str()), (2, 4, "2-main"));
    assert_eq!(
        others.iter().map(|o| o.as_str()).collect::<Vec<_>>(),
        ["2-backport"]
    );
}

#[test]
fn a_record_of_the_other_content_makes_this_trees_content_run_once() {
    let p = upgrade(&[("version", "4"), ("m.2-backport", &legacy())]).unwrap();
    let seeded: Vec<(&str, SeedKind)> = p.seed.iter().map(|e| (e.slug.as_str(), e.kind)).collect();
    assert_eq!(seeded, [("1", SeedKind::Legacy), ("3", SeedKind::Legacy)]);
    assert_eq!(pending(&p), ["2-main"]);
}

#[test]
fn a_record_of_this_trees_content_or_a_version_at_or_below_the_slot_needs_nothing_more() {
    let p = upgrade(&[("version", "4"), ("m.2-main", &legacy())]).unwrap();
    assert!(pending(&p).is_empty(), "{:?}", pending(&p));
    let p = upgrade(&[("version", "2")]).unwrap();
    assert_eq!(pending(&p), ["2-main", "3"]);
}
