//! A diverged legacy slot (CONTRACT.md §6.2): the integer says one of its
//! contents ran, not which; the plan uses a record of one; when there is
//! none, this tree's content runs and its entry will say why, unless the
//! slot is marked unsafe to repeat, which is refused.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use migration_core::ledger::LedgerSnapshot;
use migration_core::plan::SeedKind;
use migration_core::plan::{DIVERGED_RERUN, Warning};
use migration_core::testing::fixtures::{NOW, TreeBuilder};
use migration_core::{
    EntryState, LedgerEntry, MigrationsTree, Plan, PlanContext, PlanError, PlanRequest, Refusal,
    Tier, plan,
};

fn tree_with(slot_two: &str) -> MigrationsTree {
    TreeBuilder::new()
        .pre_scripts(&["1", "2-main", "3"])
        .legacy_map(&format!("1 1\n{slot_two}\n3 3\n"))
        .manifest(&[("00000-legacy", "1\n2-main\n3\n")])
        .build()
}

fn tree() -> MigrationsTree {
    tree_with("2 2-main others=2-backport")
}

fn upgrade_of(tree: &MigrationsTree, data: &[(&str, &str)]) -> Result<Plan, PlanError> {
    let snapshot = LedgerSnapshot::from_raw_data(data.iter().copied(), Some("1".into()));
    let request = PlanRequest::tier(Tier::PreApply);
    plan(tree, Some(&snapshot), &request, &PlanContext::at(NOW))
}

fn upgrade(data: &[(&str, &str)]) -> Result<Plan, PlanError> {
    upgrade_of(&tree(), data)
}

fn legacy() -> String {
    LedgerEntry::new(EntryState::Legacy, NOW).encode()
}

fn pending(p: &Plan) -> Vec<&str> {
    p.pending.iter().map(|x| x.slug.as_str()).collect()
}

#[test]
fn a_version_above_a_diverged_slot_with_no_record_of_any_content_runs_this_trees_content_saying_why()
 {
    let p = upgrade(&[("version", "4")]).unwrap();
    let seeded: Vec<(&str, SeedKind)> = p.seed.iter().map(|e| (e.slug.as_str(), e.kind)).collect();
    assert_eq!(seeded, [("1", SeedKind::Legacy), ("3", SeedKind::Legacy)]);
    assert_eq!(pending(&p), ["2-main"]);
    let why = p.pending[0].rerun.as_deref().expect("the reason it runs");
    assert!(
        why.starts_with(DIVERGED_RERUN)
            && why.contains("'version' 4 says integer 2 ran")
            && why.contains("2-backport")
            && why.contains("safe to run twice"),
        "{why}"
    );
    let warned: Vec<&Warning> = p
        .warnings
        .iter()
        .filter(
            |w| matches!(w, Warning::DivergedLegacyRerun { slug, .. } if slug.as_str() == "2-main"),
        )
        .collect();
    assert_eq!(warned.len(), 1, "{:?}", p.warnings);
}

#[test]
fn a_diverged_slot_marked_unsafe_to_repeat_with_no_record_of_any_content_is_refused() {
    let tree = tree_with("2 2-main others=2-backport unsafe-to-repeat");
    let err = upgrade_of(&tree, &[("version", "4")]).unwrap_err();
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
    assert!(err.problems[0].to_string().contains("unsafe-to-repeat"));
    // A record of the content that ran settles it as before.
    let p = upgrade_of(&tree, &[("version", "4"), ("m.2-backport", &legacy())]).unwrap();
    assert_eq!(pending(&p), ["2-main"]);
    assert!(
        p.pending[0].rerun.is_none(),
        "the other content ran: no rerun"
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

#[test]
fn an_engine_run_of_the_other_content_does_not_say_which_content_the_numbered_runner_ran() {
    // The other line ran its content as a rerun: that is no record of what
    // ran at the integer, so this tree's content runs again, saying why.
    let ok = LedgerEntry::new(EntryState::Ok, NOW).encode();
    let p = upgrade(&[("version", "4"), ("m.2-backport", &ok)]).unwrap();
    assert_eq!(pending(&p), ["2-main"]);
    assert!(
        p.pending[0]
            .rerun
            .as_deref()
            .is_some_and(|why| why.starts_with(DIVERGED_RERUN)),
        "{:?}",
        p.pending[0]
    );
}
