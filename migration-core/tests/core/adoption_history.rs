//! Adoption from what the cluster can tell (CONTRACT.md §6.2): a Helm
//! release history and the tree's `legacy-releases` answer which content of
//! a diverged slot ran; what they cannot answer falls back to the rerun,
//! saying why, and never refuses.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use migration_core::ledger::{LedgerSnapshot, Record};
use migration_core::plan::DIVERGED_RERUN;
use migration_core::seeding::{
    AdoptError, AdoptKnowledge, Adoption, HELM_HISTORY, HelmHistory, HistoryError, LegacyReleases,
    adoption_with,
};
use migration_core::testing::fixtures::{NOW, TreeBuilder};
use migration_core::{EntryState, MigrationsTree, PlanContext, PlanRequest, Slug, Tier, plan};

/// Slot 2 diverged: this line holds `2-v1-2-0`, releases before v1.2.0
/// held `2-v1-0-0`, and the candidate v1.2.0-rc.1 held a third content
/// (only a pre-release held it, so the map does not list it).
fn tree() -> MigrationsTree {
    TreeBuilder::new()
        .pre_scripts(&["1", "2-v1-2-0", "3"])
        .legacy_map("1 1\n2 2-v1-2-0 others=2-v1-0-0\n3 3\n")
        .manifest(&[("00000-legacy", "1\n2-v1-2-0\n3\n")])
        .build()
}

const RELEASES: &str = "\
# a comment
v0.9.0
v1.0.0 2=2-v1-0-0
v1.1.0 2=2-v1-0-0
v1.2.0-rc.1 2=2-v1-2-0-rc-1
v1.2.0 2=2-v1-2-0
v1.3.0 2=2-v1-2-0
";

fn releases() -> LegacyReleases {
    LegacyReleases::parse(Path::new("tree/legacy-releases"), RELEASES.as_bytes()).unwrap()
}

/// A `helm history -o json` document of revisions written
/// `"<revision> <status> <chart version>, ..."`.
fn helm(revisions: &str) -> HelmHistory {
    let doc: Vec<serde_json::Value> = revisions
        .split(", ")
        .map(|r| {
            let [revision, status, v] = r.split(' ').collect::<Vec<_>>()[..] else {
                panic!("{r}: not <revision> <status> <version>")
            };
            serde_json::json!({
                "revision": revision.parse::<u64>().unwrap(),
                "updated": "2026-01-02T03:04:05.678901+00:00",
                "status": status,
                "chart": format!("cozy-installer-{v}"),
                "app_version": "",
                "description": "Upgrade complete",
            })
        })
        .collect();
    HelmHistory::parse_helm_json("history.json", &serde_json::to_vec(&doc).unwrap()).unwrap()
}

fn adopt(history: HelmHistory, count_prereleases: bool) -> Adoption {
    let knowledge = AdoptKnowledge::default()
        .with_releases(Some(releases()))
        .with_history(history)
        .counting_prereleases(count_prereleases);
    adopt_knowing(&knowledge).unwrap()
}

/// Checks that the message on slot 2's content `2-v1-2-0` contains each of
/// `parts`.
fn assert_slot_2_says(a: &Adoption, parts: &[&str]) {
    let why = message(a, "2-v1-2-0");
    for part in parts {
        assert!(why.contains(part), "{part:?} not in {why}");
    }
}

/// Adopts `tree()` at version 4 knowing `knowledge`.
fn adopt_knowing(knowledge: &AdoptKnowledge) -> Result<Adoption, AdoptError> {
    adoption_with(&tree(), 4, knowledge, &PlanContext::at(NOW))
}

/// Why `t/legacy-releases` holding `text` is refused.
fn releases_refusal(text: &str) -> String {
    LegacyReleases::parse(Path::new("t/legacy-releases"), text.as_bytes())
        .unwrap_err()
        .to_string()
}

/// `(slug, state, reason)` of each entry.
fn entries(a: &Adoption) -> Vec<(String, EntryState, Option<String>)> {
    a.entries
        .iter()
        .map(|(s, e)| (s.to_string(), e.state, e.reason.clone()))
        .collect()
}

/// Checks that every slot is recorded legacy and slot 2 as `slot`, the
/// content the Helm history says ran.
fn assert_slot_2_answered_by_the_history(a: &Adoption, slot: &str) {
    assert_eq!(
        entries(a),
        [
            ("1".into(), EntryState::Legacy, None),
            (slot.into(), EntryState::Legacy, Some(HELM_HISTORY.into())),
            ("3".into(), EntryState::Legacy, None),
        ]
    );
}

fn message<'a>(a: &'a Adoption, slug: &str) -> &'a str {
    a.entries
        .iter()
        .find(|(s, _)| s.as_str() == slug)
        .and_then(|(_, e)| e.message.as_deref())
        .unwrap_or_else(|| panic!("no message on {slug}: {:?}", a.entries))
}

/// What the first run after this adoption runs (the adopted ledger has no
/// `version`).
fn first_run(a: &Adoption) -> Vec<String> {
    let snapshot = LedgerSnapshot {
        records: a
            .entries
            .iter()
            .map(|(s, e)| (s.clone(), Record::Entry(Box::new(e.clone()))))
            .collect(),
        ..LedgerSnapshot::default()
    };
    let p = plan(
        &tree(),
        Some(&snapshot),
        &PlanRequest::tier(Tier::PreApply),
        &PlanContext::at(NOW),
    )
    .unwrap();
    p.pending.iter().map(|x| x.slug.to_string()).collect()
}

fn is_rerun(a: &Adoption) -> bool {
    entries(a).contains(&(
        "2-v1-2-0".into(),
        EntryState::NotYet,
        Some(DIVERGED_RERUN.into()),
    )) && a.reruns.len() == 1
}

#[test]
fn a_history_through_this_lines_release_records_this_trees_content_and_nothing_reruns() {
    let a = adopt(helm("1 superseded 0.9.0, 2 deployed 1.3.0"), false);
    assert_slot_2_answered_by_the_history(&a, "2-v1-2-0");
    assert!(a.reruns.is_empty());
    let why = message(&a, "2-v1-2-0");
    assert!(
        why.starts_with("helm-history: history.json: revision 2 (cozy-installer-1.3.0, deployed")
            && why.contains("v1.3.0")
            && why.contains("ran 2-v1-2-0"),
        "{why}"
    );
    assert_eq!(a.answered.len(), 1);
    assert!(first_run(&a).is_empty());
}

#[test]
fn a_history_through_an_older_release_records_the_other_content_and_this_trees_runs_once() {
    // Installed before slot 2 existed, upgraded through v1.1.0 (which ran
    // 2-v1-0-0), then v1.3.0 (which did not run slot 2 again).
    let a = adopt(
        helm("1 superseded 0.9.0, 2 superseded 1.1.0, 3 deployed 1.3.0"),
        false,
    );
    assert_slot_2_answered_by_the_history(&a, "2-v1-0-0");
    assert!(message(&a, "2-v1-0-0").contains("revision 2"));
    assert_eq!(first_run(&a), ["2-v1-2-0"], "this tree's content runs once");
}

#[test]
fn a_release_the_map_does_not_know_falls_back_to_the_rerun_saying_why() {
    let a = adopt(helm("1 superseded 0.8.0, 2 deployed 1.3.0"), false);
    assert!(is_rerun(&a), "{:?}", a.entries);
    let why = message(&a, "2-v1-2-0");
    assert!(why.starts_with("diverged-legacy-rerun:"), "{why}");
    assert_slot_2_says(
        &a,
        &[
            "the release history did not answer",
            "revision 1 (cozy-installer-0.8.0",
            "tree/legacy-releases",
        ],
    );
    assert_eq!(first_run(&a), ["2-v1-2-0"]);
}

#[test]
fn a_failed_revision_does_not_count_as_run_and_is_said() {
    // The failed upgrade to v1.1.0 may have run 2-v1-0-0 before failing:
    // the later v1.3.0 cannot say which content ran.
    let a = adopt(
        helm("1 superseded 0.9.0, 2 failed 1.1.0, 3 deployed 1.3.0"),
        false,
    );
    assert!(is_rerun(&a), "{:?}", a.entries);
    assert_slot_2_says(
        &a,
        &[
            "revision 2 (cozy-installer-1.1.0, failed",
            "did not complete",
        ],
    );
    assert!(
        a.notes
            .iter()
            .any(|n| n.contains("revision 2") && n.contains("does not count as run")),
        "{:?}",
        a.notes
    );

    // A failed revision of the same content as the one that completed
    // changes nothing: that content ran either way.
    let a = adopt(
        helm("1 superseded 0.9.0, 2 failed 1.2.0, 3 deployed 1.3.0"),
        false,
    );
    assert_eq!(a.answered.len(), 1, "{:?}", a.entries);
    assert_eq!(a.answered[0].ran.as_str(), "2-v1-2-0");
    assert!(message(&a, "2-v1-2-0").contains("revision 3"));
    assert_eq!(a.notes.len(), 1, "{:?}", a.notes);

    // A history whose only release holding the slot failed says nothing.
    let a = adopt(helm("1 superseded 0.9.0, 2 failed 1.2.0"), false);
    assert!(is_rerun(&a), "{:?}", a.entries);
    assert!(message(&a, "2-v1-2-0").contains("no completed revision"));
}

#[test]
fn a_pre_release_counts_only_when_the_maintainer_says_clusters_ran_them() {
    let history = || helm("1 superseded 0.9.0, 2 superseded 1.2.0-rc.1, 3 deployed 1.3.0");
    let a = adopt(history(), false);
    assert!(is_rerun(&a), "{:?}", a.entries);
    assert_slot_2_says(&a, &["--count-prereleases"]);
    assert!(
        a.notes.iter().any(|n| n.contains("pre-release")),
        "{:?}",
        a.notes
    );

    // Counted, the candidate's content ran: legacy-map does not list it
    // (only a pre-release held it), so this tree's content runs once, its
    // entry saying so, and no rerun.
    let a = adopt(history(), true);
    assert!(a.reruns.is_empty(), "{:?}", a.reruns);
    assert_eq!(
        entries(&a)[1],
        (
            "2-v1-2-0".into(),
            EntryState::NotYet,
            Some(HELM_HISTORY.into())
        )
    );
    assert_eq!(a.answered[0].ran.as_str(), "2-v1-2-0-rc-1");
    assert!(message(&a, "2-v1-2-0").contains("runs once"));
    assert_eq!(first_run(&a), ["2-v1-2-0"]);
    assert!(a.notes.is_empty(), "{:?}", a.notes);
}

#[test]
fn a_pruned_history_answers_only_when_every_older_release_running_the_slot_held_one_content() {
    // Begins (revisions 1-6 pruned) at v1.2.0, which runs slot 2: it ran
    // there, or at v1.0.0 or v1.1.0 with the other content.
    let a = adopt(helm("7 superseded 1.2.0, 8 deployed 1.3.0"), false);
    assert!(is_rerun(&a), "{:?}", a.entries);
    assert_slot_2_says(&a, &["pruned", "v1.0.0: 2-v1-0-0"]);

    // Pruned, but beginning before the slot: the slot ran within it.
    let a = adopt(helm("7 superseded 0.9.0, 8 deployed 1.3.0"), false);
    assert_eq!(a.answered.len(), 1, "{:?}", a.entries);

    // Begins at v1.1.0, the first release whose target reaches slot 2:
    // every release no newer that runs it held one content.
    let a = adopt_targeted(helm("5 superseded 1.1.0, 6 deployed 1.4.0"));
    assert_eq!(a.answered.len(), 1, "{:?}", a.entries);
    assert_eq!(a.answered[0].ran.as_str(), "2-v1-2-0");
    assert_slot_2_says(
        &a,
        &["every release no newer than it that runs the slot ran 2-v1-2-0"],
    );
}

#[test]
fn without_a_history_or_without_legacy_releases_nothing_is_refused_and_the_slot_reruns() {
    let knowledge = AdoptKnowledge::default();
    let a = adopt_knowing(&knowledge).unwrap();
    assert!(is_rerun(&a));
    assert!(!message(&a, "2-v1-2-0").contains("release history"));

    let knowledge = AdoptKnowledge::default().with_history(helm("1 deployed 1.3.0"));
    let a = adopt_knowing(&knowledge).unwrap();
    assert!(is_rerun(&a));
    assert_slot_2_says(&a, &["no legacy-releases file"]);
}

#[test]
fn two_histories_that_disagree_answer_nothing() {
    let knowledge = AdoptKnowledge::default()
        .with_releases(Some(releases()))
        .with_history(helm("1 deployed 1.3.0"))
        .with_history(helm("1 deployed 1.1.0"));
    let a = adopt_knowing(&knowledge).unwrap();
    assert!(is_rerun(&a));
    assert!(message(&a, "2-v1-2-0").contains("disagree"));
}

#[test]
fn a_ran_the_history_contradicts_is_refused_and_one_it_confirms_is_kept() {
    let knowledge = |ran: &str| {
        AdoptKnowledge::default()
            .with_ran(vec![Slug::parse(ran).unwrap()])
            .with_releases(Some(releases()))
            .with_history(helm("1 superseded 0.9.0, 2 deployed 1.3.0"))
    };
    let err = adopt_knowing(&knowledge("2-v1-0-0")).unwrap_err();
    assert!(
        matches!(err, AdoptError::RanContradictsHistory { .. }),
        "{err}"
    );
    let text = err.to_string();
    assert!(
        text.contains("--ran 2-v1-0-0") && text.contains("revision 2"),
        "{text}"
    );

    let a = adopt_knowing(&knowledge("2-v1-2-0")).unwrap();
    assert_eq!(
        entries(&a)[1],
        ("2-v1-2-0".into(), EntryState::Legacy, None)
    );
}

#[test]
fn an_unreadable_history_is_refused_naming_the_source_and_the_revision() {
    let parse = |text: &str| HelmHistory::parse_helm_json("h.json", text.as_bytes()).unwrap_err();
    let err = parse("{\"revision\": 1}");
    assert!(
        matches!(&err, HistoryError::History { origin, .. } if origin == "h.json"),
        "{err}"
    );
    let err = parse(r#"[{"revision": 3, "chart": "x-1.0.0"}]"#).to_string();
    assert!(err.starts_with("h.json: revision 3: no status"), "{err}");
    let err = parse(r#"[{"revision": 3, "chart": "x-1.0.0", "status": "exploded"}]"#).to_string();
    assert!(
        err.contains("revision 3: unknown status \"exploded\""),
        "{err}"
    );
    let err = parse(r#"[{"status": "deployed", "chart": "x-1.0.0"}]"#).to_string();
    assert!(err.contains("entry 1: no revision number"), "{err}");
    let err = parse(
        r#"[{"revision": 2, "chart": "x-1.0.0", "status": "deployed"},
            {"revision": 2, "chart": "x-1.0.0", "status": "deployed"}]"#,
    )
    .to_string();
    assert!(err.contains("revision 2 is listed twice"), "{err}");
    let err = parse(r#"[{"revision": 2, "chart": 7, "status": "deployed"}]"#).to_string();
    assert!(err.contains("revision 2: chart is 7"), "{err}");
    // Helm's own fields beyond these are ignored.
    let ok = HelmHistory::parse_helm_json(
        "h.json",
        br#"[{"revision": 1, "chart": "x-1.0.0", "status": "deployed", "later": true}]"#,
    )
    .unwrap();
    assert_eq!(
        ok.revisions[0].chart_version().unwrap().to_string(),
        "1.0.0"
    );
}

#[test]
fn a_bad_legacy_releases_line_is_refused_naming_the_file_and_line() {
    let parse = releases_refusal;
    assert!(parse("v1.0.0\nnot-a-version\n").contains("t/legacy-releases:2: \"not-a-version\""));
    assert!(parse("v1.0.0 2\n").contains("t/legacy-releases:1: expected SLOT=SLUG"));
    assert!(parse("v1.0.0 2=a 2=b\n").contains("slot 2 is given twice"));
    assert!(
        parse("v1.0.0\n1.0.0\n")
            .contains("t/legacy-releases:2: 1.0.0 is version 1.0.0, listed already on line 1")
    );

    // A line that contradicts legacy-map refuses the adoption.
    let bad = LegacyReleases::parse(
        Path::new("t/legacy-releases"),
        b"v1.0.0 3=2-v1-0-0\nv1.1.0 9=x\n",
    )
    .unwrap();
    let knowledge = AdoptKnowledge::default().with_releases(Some(bad));
    let err = adopt_knowing(&knowledge).unwrap_err().to_string();
    assert!(
        err.contains(
            "t/legacy-releases:1: 2-v1-0-0 is a content of slot 2 in legacy-map, not of slot 3"
        ) && err.contains("t/legacy-releases:2: slot 9 is not in legacy-map"),
        "{err}"
    );
}

/// The same releases with the numbered runner's targets: v1.0.0 shipped
/// slot 2 with a target (2) that did not reach it yet, as a backport
/// waiting for its counter; v1.1.0 raised it. v1.4.0's target is above a
/// slot 3 it does not ship.
const TARGETED: &str = "\
v0.9.0 target=2
v1.0.0 target=2 2=2-v1-0-0
v1.1.0 target=4 2=2-v1-2-0
v1.4.0 target=5
";

fn adopt_targeted(history: HelmHistory) -> Adoption {
    let releases =
        LegacyReleases::parse(Path::new("tree/legacy-releases"), TARGETED.as_bytes()).unwrap();
    let knowledge = AdoptKnowledge::default()
        .with_releases(Some(releases))
        .with_history(history);
    adopt_knowing(&knowledge).unwrap()
}

#[test]
fn a_release_whose_target_does_not_reach_a_slot_it_ships_did_not_run_it() {
    let a = adopt_targeted(helm(
        "1 superseded 0.9.0, 2 superseded 1.0.0, 3 deployed 1.1.0",
    ));
    assert_eq!(a.answered.len(), 1, "{:?}", a.entries);
    assert_eq!(a.answered[0].ran.as_str(), "2-v1-2-0");
    let why = message(&a, "2-v1-2-0");
    assert!(
        why.contains("revision 3") && why.contains("v1.1.0, target 4"),
        "{why}"
    );
    // Without the targets, the release that shipped it first is taken to
    // have run it.
    let a = adopt(
        helm("1 superseded 0.9.0, 2 superseded 1.0.0, 3 deployed 1.3.0"),
        false,
    );
    assert_eq!(a.answered[0].ran.as_str(), "2-v1-0-0");

    // A target above a slot the release does not ship: nobody can say.
    let a = adopt_targeted(helm("1 superseded 0.9.0, 2 deployed 1.4.0"));
    assert!(is_rerun(&a), "{:?}", a.entries);
    assert_slot_2_says(&a, &["target 5, above slot 2, which it does not hold"]);
}

#[test]
fn a_bad_target_in_legacy_releases_is_refused_naming_the_line() {
    let parse = releases_refusal;
    assert!(
        parse("v1.0.0 target=x\n")
            .contains("t/legacy-releases:1: target=\"x\" is not a decimal integer")
    );
    assert!(parse("v1.0.0 target=01\n").contains("is not a decimal integer"));
    assert!(parse("v1.0.0 target=3 target=4\n").contains("target= is given twice"));
}
