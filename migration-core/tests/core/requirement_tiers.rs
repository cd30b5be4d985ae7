//! A pre-apply migration cannot require a background one: the blocking
//! tier runs before the background tier starts, so no run order satisfies
//! it (issue 13). Refused at tree load and at manifest generation, naming
//! the file, line and both slugs; the other direction is fine.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use std::collections::BTreeMap;

use migration_core::generate::GenerateProblem;
use migration_core::header::Tier;
use migration_core::testing::fixtures::{TreeBuilder, s};
use migration_core::{ReleaseHistory, ScriptInfo, Sha256Digest, TagTree};

#[test]
fn a_pre_apply_script_requiring_a_background_one_is_a_tree_error_naming_file_and_line() {
    let err = TreeBuilder::new()
        .bg("warm-cache")
        .script(Tier::PreApply, "relabel", &["warm-cache"])
        .manifest(&[("00001-v1", "warm-cache\nrelabel\n")])
        .try_build()
        .unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("pre-apply/relabel:4: requires=warm-cache")
            && text.contains("background tier")
            && text.contains("no run order"),
        "{text}"
    );
}

#[test]
fn a_background_script_may_require_a_pre_apply_one() {
    TreeBuilder::new()
        .pre("relabel")
        .script(Tier::Background, "warm-cache", &["relabel"])
        .manifest(&[("00001-v1", "relabel\nwarm-cache\n")])
        .try_build()
        .unwrap();
}

fn info(tier: Tier, requires: &[&str]) -> ScriptInfo {
    ScriptInfo {
        tier,
        sha256: Sha256Digest::of(format!("{tier:?}{requires:?}").as_bytes()),
        requires: requires.iter().map(|r| s(r)).collect(),
    }
}

#[test]
fn generation_refuses_a_pre_apply_requirement_on_a_background_slug() {
    let scripts: BTreeMap<_, _> = [
        (s("warm-cache"), info(Tier::Background, &[])),
        (s("relabel"), info(Tier::PreApply, &["warm-cache"])),
    ]
    .into_iter()
    .collect();
    let history = ReleaseHistory {
        line: vec![TagTree {
            tag: "v1.0.0".into(),
            scripts: [(s("warm-cache"), info(Tier::Background, &[]))]
                .into_iter()
                .collect(),
        }],
        disk: scripts,
        ..ReleaseHistory::default()
    };
    let text = common::generation_refusal(
        &history,
        GenerateProblem::RequiresOtherTier {
            slug: s("relabel"),
            target: s("warm-cache"),
        },
    );
    assert!(
        text.contains("'relabel' (pre-apply) requires 'warm-cache' (background)"),
        "{text}"
    );
}
