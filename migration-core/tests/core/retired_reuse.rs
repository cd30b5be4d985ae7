//! A retired slug re-added (issue 13): once a line tag shipped the deletion
//! of a script, the release manifests written since carry `<slug>
//! retired`; bringing the script back, even byte for byte, would flip that
//! shipped line back. Generation refuses, naming the tag that retired it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use std::collections::BTreeMap;

use migration_core::generate::GenerateProblem;
use migration_core::header::Tier;
use migration_core::testing::fixtures::s;
use migration_core::{ReleaseHistory, ScriptInfo, Sha256Digest, Slug, TagTree, generate};

fn scripts(slugs: &[&str]) -> BTreeMap<Slug, ScriptInfo> {
    slugs
        .iter()
        .map(|slug| {
            let info = ScriptInfo {
                tier: Tier::PreApply,
                sha256: Sha256Digest::of(slug.as_bytes()),
                requires: Vec::new(),
            };
            (s(slug), info)
        })
        .collect()
}

fn tag(name: &str, slugs: &[&str]) -> TagTree {
    TagTree {
        tag: name.into(),
        scripts: scripts(slugs),
    }
}

#[test]
fn a_retired_slug_back_on_disk_with_the_same_content_is_refused_naming_the_retiring_tag() {
    let history = ReleaseHistory {
        line: vec![tag("v1.0.0", &["old", "keep"]), tag("v1.1.0", &["keep"])],
        disk: scripts(&["old", "keep"]),
        ..ReleaseHistory::default()
    };
    let text = common::generation_refusal(
        &history,
        GenerateProblem::RetiredReadded {
            slug: s("old"),
            retired_in: "v1.1.0".into(),
        },
    );
    assert!(
        text.contains("'old' was retired in tag v1.1.0") && text.contains("new slug"),
        "{text}"
    );
}

#[test]
fn a_retired_slug_back_in_a_later_tag_is_refused_too() {
    let history = ReleaseHistory {
        line: vec![
            tag("v1.0.0", &["old"]),
            tag("v1.1.0", &[]),
            tag("v1.2.0", &["old"]),
        ],
        disk: scripts(&["old"]),
        ..ReleaseHistory::default()
    };
    let problems = generate(&history).unwrap_err().problems;
    assert!(
        problems.contains(&GenerateProblem::RetiredReadded {
            slug: s("old"),
            retired_in: "v1.1.0".into(),
        }),
        "{problems:?}"
    );
}

#[test]
fn a_retired_slug_that_stays_retired_keeps_its_line() {
    let history = ReleaseHistory {
        line: vec![tag("v1.0.0", &["old", "keep"]), tag("v1.1.0", &["keep"])],
        disk: scripts(&["keep"]),
        ..ReleaseHistory::default()
    };
    let manifest = generate(&history).unwrap();
    assert_eq!(
        manifest.render(),
        [("00001-v1.0.0".to_owned(), "keep\nold retired\n".to_owned())]
    );
}
