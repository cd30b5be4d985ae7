//! Manifest generation from a release history (CONTRACT.md §4), as a pure function.
//!
//! The git adapter (in the command-line tool) reads tags and trees; this
//! module decides. Input: the tags of one release line in semantic-version
//! order, every other release tag of the repository (for the immutability
//! guard), the tree on disk now, and the legacy map.

use std::collections::{BTreeMap, HashMap};
use std::fmt;

use crate::digest::Sha256Digest;
use crate::header::Tier;
use crate::manifest::{Batch, BatchName, Manifest, ManifestEntry};
use crate::order::{Cycle, Edge, stable_topo_sort};
use crate::slug::Slug;
use crate::tree::{LegacyPair, MigrationsTree};

/// What generation needs to know about one script at one place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScriptInfo {
    /// Its tier.
    pub tier: Tier,
    /// SHA-256 of its bytes.
    pub sha256: Sha256Digest,
    /// Its `requires` targets.
    pub requires: Vec<Slug>,
}

/// The migration scripts of one release tag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TagTree {
    /// The tag name, which becomes the batch label.
    pub tag: String,
    /// Its scripts under `pre-apply/` and `background/`.
    pub scripts: BTreeMap<Slug, ScriptInfo>,
}

/// Everything generation reads.
#[derive(Debug, Clone, Default)]
pub struct ReleaseHistory {
    /// Tags of this release line (reachable from the commit being built), in
    /// semantic-version order.
    pub line: Vec<TagTree>,
    /// Every other release tag of the repository, any order: only the
    /// immutability guard reads them.
    pub other_tags: Vec<TagTree>,
    /// The scripts on disk now.
    pub disk: BTreeMap<Slug, ScriptInfo>,
    /// The legacy map, in integer order.
    pub legacy: Vec<Slug>,
}

impl ReleaseHistory {
    /// The on-disk part of a history, taken from a loaded tree.
    pub fn disk_from_tree(tree: &MigrationsTree) -> BTreeMap<Slug, ScriptInfo> {
        tree.scripts()
            .iter()
            .map(|(slug, s)| {
                let info = ScriptInfo {
                    tier: s.tier,
                    sha256: s.sha256,
                    requires: s.header.requires.iter().map(|r| r.target.clone()).collect(),
                };
                (slug.clone(), info)
            })
            .collect()
    }

    /// The legacy slugs of a tree, in integer order.
    pub fn legacy_from_pairs(pairs: &[LegacyPair]) -> Vec<Slug> {
        let mut sorted: Vec<&LegacyPair> = pairs.iter().collect();
        sorted.sort_by_key(|p| p.number);
        sorted.into_iter().map(|p| p.slug.clone()).collect()
    }
}

/// Where a script's content was seen.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Place {
    /// In a release tag.
    Tag(String),
    /// In the working tree being built.
    Disk,
}

impl fmt::Display for Place {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Place::Tag(t) => write!(f, "tag {t}"),
            Place::Disk => f.write_str("the working tree"),
        }
    }
}

/// A reason generation fails. Every problem is reported.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum GenerateProblem {
    /// The immutability guard: one identity, two contents.
    #[error(
        "'{slug}' has different content in {first} ({first_sha}) and {second} ({second_sha}); a shipped slug is immutable, so ship the change under a new slug"
    )]
    ContentChanged {
        /// The slug.
        slug: Slug,
        /// One place.
        first: Place,
        /// Its checksum there.
        first_sha: Sha256Digest,
        /// Another place.
        second: Place,
        /// Its checksum there.
        second_sha: Sha256Digest,
    },
    /// A `requires` target that no batch holds.
    #[error("'{slug}' requires '{target}', which is in no batch")]
    RequiresUnknown {
        /// The dependent.
        slug: Slug,
        /// The target.
        target: Slug,
    },
    /// A `requires` target placed in a later batch.
    #[error(
        "'{slug}' (batch {batch}) requires '{target}', which is only in later batch {target_batch}"
    )]
    RequiresLater {
        /// The dependent.
        slug: Slug,
        /// The dependent's batch.
        batch: String,
        /// The target.
        target: Slug,
        /// The target's batch.
        target_batch: String,
    },
    /// A cycle of `requires` within one batch.
    #[error("batch {batch}: requires cycle: {cycle}")]
    Cycle {
        /// The batch.
        batch: String,
        /// The cycle.
        cycle: Cycle,
    },
    /// A tag name that cannot be a batch label.
    #[error("tag {tag:?} cannot name a batch: {reason}")]
    BadTag {
        /// The tag.
        tag: String,
        /// Why.
        reason: String,
    },
    /// Too many tags for five-digit batch numbers.
    #[error("{count} release tags do not fit five-digit batch numbers")]
    TooManyTags {
        /// How many.
        count: usize,
    },
}

/// Generation failed; every problem found is listed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("manifest generation failed with {} problem(s):\n{}", problems.len(), problems.iter().map(|p| format!("  {p}")).collect::<Vec<_>>().join("\n"))]
pub struct GenerateError {
    /// Every problem.
    pub problems: Vec<GenerateProblem>,
}

/// Generates the manifest (CONTRACT.md §4 steps 1 to 5).
///
/// - `00000-legacy`: the legacy-map slugs in integer order;
/// - `NNNNN-<tag>` for the Nth tag of the line (1-based) that first ships
///   any slug, holding those slugs sorted alphabetically and then stably by
///   `requires`; tags that ship nothing new produce no file;
/// - `99999-untagged`: slugs on disk that no tag of the line ships, omitted
///   when empty (a build exactly at a tag has none);
/// - a slug shipped by a tag but absent on disk is flagged `retired`.
pub fn generate(history: &ReleaseHistory) -> Result<Manifest, GenerateError> {
    let _span = tracing::debug_span!("generate_manifest", tags = history.line.len()).entered();
    let mut problems = immutability_problems(history);
    if history.line.len() >= crate::manifest::UNTAGGED_SEQUENCE as usize {
        problems.push(GenerateProblem::TooManyTags {
            count: history.line.len(),
        });
        return Err(GenerateError { problems });
    }

    // Requires of each slug, from the first place that has it (the first
    // line tag, else the disk). Filled as slugs first appear below, so that
    // slugs unchanged from one tag to the next cost no lookup.
    let mut requires: HashMap<&Slug, &[Slug]> = HashMap::new();
    for slug in &history.legacy {
        let first = history
            .line
            .iter()
            .find_map(|t| t.scripts.get(slug))
            .or_else(|| history.disk.get(slug));
        if let Some(info) = first {
            requires.insert(slug, &info.requires);
        }
    }

    let mut batches: Vec<Batch> = Vec::new();
    let mut assigned: HashMap<Slug, usize> = HashMap::new();
    let on_disk = |s: &Slug| history.disk.contains_key(s);

    if !history.legacy.is_empty() {
        let entries = history
            .legacy
            .iter()
            .map(|s| ManifestEntry {
                slug: s.clone(),
                retired: !on_disk(s),
            })
            .collect();
        for s in &history.legacy {
            assigned.insert(s.clone(), 0);
        }
        batches.push(Batch {
            name: BatchName::legacy(),
            entries,
        });
    }

    let mut pending_batches: Vec<(BatchName, Vec<Slug>)> = Vec::new();
    // Every slug of the previous line tag is assigned, so a slug the
    // previous tag also has needs no lookup (false after a bad tag name).
    let mut previous_assigned = false;
    for (i, tag) in history.line.iter().enumerate() {
        let previous = i
            .checked_sub(1)
            .map(|p| &history.line[p])
            .filter(|_| previous_assigned);
        let mut fresh: Vec<Slug> = Vec::new();
        for (slug, info, since) in since_previous(previous, tag) {
            if since == SincePrevious::New && !assigned.contains_key(slug) {
                requires.entry(slug).or_insert(&info.requires);
                fresh.push(slug.clone());
            }
        }
        previous_assigned = true;
        if fresh.is_empty() {
            continue;
        }
        let sequence = u32::try_from(i + 1).unwrap_or(u32::MAX);
        let name = match BatchName::new(sequence, &tag.tag) {
            Ok(name) => name,
            Err(e) => {
                problems.push(GenerateProblem::BadTag {
                    tag: tag.tag.clone(),
                    reason: e.reason.to_owned(),
                });
                previous_assigned = false;
                continue;
            }
        };
        let index = batches.len() + pending_batches.len();
        for s in &fresh {
            assigned.insert(s.clone(), index);
        }
        pending_batches.push((name, fresh));
    }
    let untagged: Vec<Slug> = history
        .disk
        .iter()
        .filter(|(s, _)| !assigned.contains_key(*s))
        .map(|(s, info)| {
            requires.entry(s).or_insert(&info.requires);
            s.clone()
        })
        .collect();
    if !untagged.is_empty() {
        let index = batches.len() + pending_batches.len();
        for s in &untagged {
            assigned.insert(s.clone(), index);
        }
        pending_batches.push((BatchName::untagged(), untagged));
    }

    // Every batch's name by index, fixed before `batches` starts growing
    // below (indexing into a growing list named the wrong batch).
    let names: Vec<String> = batches
        .iter()
        .map(|b| b.name.to_string())
        .chain(pending_batches.iter().map(|(n, _)| n.to_string()))
        .collect();
    let batch_name = |index: usize| names.get(index).cloned().unwrap_or_default();

    // The legacy batch keeps integer order; its requires may only point back.
    if let Some(legacy) = batches.first().filter(|b| b.name.is_legacy()) {
        for (pos, line) in legacy.entries.iter().enumerate() {
            for target in requires.get(&line.slug).copied().unwrap_or_default() {
                let earlier = legacy.entries[..pos].iter().any(|e| &e.slug == target);
                match assigned.get(target) {
                    None => problems.push(GenerateProblem::RequiresUnknown {
                        slug: line.slug.clone(),
                        target: target.clone(),
                    }),
                    Some(0) if earlier => {}
                    Some(&t) => problems.push(GenerateProblem::RequiresLater {
                        slug: line.slug.clone(),
                        batch: legacy.name.to_string(),
                        target: target.clone(),
                        target_batch: batch_name(t),
                    }),
                }
            }
        }
    }

    let base = batches.len();
    for (offset, (name, slugs)) in pending_batches.iter().enumerate() {
        let index = base + offset;
        let mut edges = Vec::new();
        for slug in slugs {
            for target in requires.get(slug).copied().unwrap_or_default() {
                match assigned.get(target) {
                    None => problems.push(GenerateProblem::RequiresUnknown {
                        slug: slug.clone(),
                        target: target.clone(),
                    }),
                    Some(&t) if t == index => edges.push(Edge {
                        dependent: slug.clone(),
                        target: target.clone(),
                    }),
                    Some(&t) if t > index => problems.push(GenerateProblem::RequiresLater {
                        slug: slug.clone(),
                        batch: name.to_string(),
                        target: target.clone(),
                        target_batch: batch_name(t),
                    }),
                    Some(_) => {}
                }
            }
        }
        match stable_topo_sort(slugs, &edges) {
            Ok(order) => batches.push(Batch {
                name: name.clone(),
                entries: order
                    .into_iter()
                    .map(|s| ManifestEntry {
                        retired: !on_disk(&s),
                        slug: s,
                    })
                    .collect(),
            }),
            Err(e) => {
                problems.extend(e.cycles.into_iter().map(|cycle| GenerateProblem::Cycle {
                    batch: name.to_string(),
                    cycle,
                }));
                // Keep indices aligned for later messages.
                batches.push(Batch {
                    name: name.clone(),
                    entries: Vec::new(),
                });
            }
        }
    }

    if !problems.is_empty() {
        return Err(GenerateError { problems });
    }
    Manifest::from_batches(batches).map_err(|errors| GenerateError {
        problems: errors
            .into_iter()
            .map(|e| GenerateProblem::BadTag {
                tag: String::new(),
                reason: e.to_string(),
            })
            .collect(),
    })
}

/// How a script of a line tag relates to the previous tag of the line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SincePrevious {
    /// The previous tag does not have the slug (or there is none).
    New,
    /// The previous tag has the slug with other content.
    Changed,
    /// The previous tag has the slug with the same content.
    Same,
}

/// The scripts of `current`, each with how it relates to `previous`: one
/// merge walk over the two sorted maps, no lookups. Consecutive tags share
/// almost all their scripts, so this replaces a hash lookup per (tag, slug)
/// pair with a sequential comparison.
fn since_previous<'a>(
    previous: Option<&'a TagTree>,
    current: &'a TagTree,
) -> impl Iterator<Item = (&'a Slug, &'a ScriptInfo, SincePrevious)> + 'a {
    let mut previous = previous.map(|p| p.scripts.iter().peekable());
    current.scripts.iter().map(move |(slug, info)| {
        let since = match previous.as_mut() {
            None => SincePrevious::New,
            Some(prev) => {
                while prev.next_if(|(p, _)| *p < slug).is_some() {}
                match prev.next_if(|(p, _)| *p == slug) {
                    Some((_, p)) if p.sha256 == info.sha256 => SincePrevious::Same,
                    Some(_) => SincePrevious::Changed,
                    None => SincePrevious::New,
                }
            }
        };
        (slug, info, since)
    })
}

/// Same slug, different content, anywhere: every offending slug once, with
/// the first two places that disagree.
fn immutability_problems(history: &ReleaseHistory) -> Vec<GenerateProblem> {
    // Places are kept as borrowed tag names until a problem is reported:
    // every (tag, slug) pair passes through here, so allocating a `Place`
    // per pair dominated generation. `seen` is hashed (one lookup per pair);
    // `reported` stays sorted, which orders the problems by slug.
    let mut seen: HashMap<&Slug, (Option<&str>, Sha256Digest)> = HashMap::new();
    let mut reported: BTreeMap<&Slug, GenerateProblem> = BTreeMap::new();
    let place = |tag: Option<&str>| tag.map_or(Place::Disk, |t| Place::Tag(t.to_owned()));
    // A line tag's entry identical to the previous line tag's was already
    // compared when that tag was walked: skipping it changes nothing.
    let line = history.line.iter().enumerate().flat_map(|(i, t)| {
        let previous = i.checked_sub(1).map(|p| &history.line[p]);
        since_previous(previous, t)
            .filter(|(_, _, since)| *since != SincePrevious::Same)
            .map(move |(s, info, _)| (Some(t.tag.as_str()), s, info.sha256))
    });
    let places = line
        .chain(history.other_tags.iter().flat_map(|t| {
            t.scripts
                .iter()
                .map(move |(s, i)| (Some(t.tag.as_str()), s, i.sha256))
        }))
        .chain(history.disk.iter().map(|(s, i)| (None, s, i.sha256)));
    for (here, slug, sha) in places {
        match seen.get(slug) {
            None => {
                seen.insert(slug, (here, sha));
            }
            Some((first, first_sha)) if *first_sha != sha && !reported.contains_key(slug) => {
                reported.insert(
                    slug,
                    GenerateProblem::ContentChanged {
                        slug: slug.clone(),
                        first: place(*first),
                        first_sha: *first_sha,
                        second: place(here),
                        second_sha: sha,
                    },
                );
            }
            Some(_) => {}
        }
    }
    reported.into_values().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::fixtures::s;

    fn info(content: &str, requires: &[&str]) -> ScriptInfo {
        ScriptInfo {
            tier: Tier::PreApply,
            sha256: Sha256Digest::of(content.as_bytes()),
            requires: requires.iter().map(|r| s(r)).collect(),
        }
    }

    fn tag(name: &str, scripts: &[(&str, &str, &[&str])]) -> TagTree {
        TagTree {
            tag: name.into(),
            scripts: scripts
                .iter()
                .map(|(slug, content, req)| (s(slug), info(content, req)))
                .collect(),
        }
    }

    fn disk(scripts: &[(&str, &str, &[&str])]) -> BTreeMap<Slug, ScriptInfo> {
        scripts
            .iter()
            .map(|(slug, content, req)| (s(slug), info(content, req)))
            .collect()
    }

    fn rendered(m: &Manifest) -> Vec<(String, String)> {
        m.render()
    }

    #[test]
    fn a_slug_that_leaves_the_line_and_returns_changed_is_caught_with_both_tags() {
        let history = ReleaseHistory {
            line: vec![
                tag("v1.0.0", &[("a", "x", &[]), ("b", "b", &[])]),
                tag("v1.1.0", &[("b", "b", &[])]),
                tag("v1.2.0", &[("a", "y", &[]), ("b", "b", &[])]),
                tag("v1.3.0", &[("a", "y", &[]), ("b", "b", &[])]),
            ],
            disk: disk(&[("a", "y", &[]), ("b", "b", &[])]),
            ..ReleaseHistory::default()
        };
        let problems = generate(&history).unwrap_err().problems;
        assert_eq!(
            problems,
            [GenerateProblem::ContentChanged {
                slug: s("a"),
                first: Place::Tag("v1.0.0".into()),
                first_sha: Sha256Digest::of(b"x"),
                second: Place::Tag("v1.2.0".into()),
                second_sha: Sha256Digest::of(b"y"),
            }]
        );
    }

    #[test]
    fn requires_come_from_the_first_tag_that_ships_the_slug() {
        // `a` requires `b` from v1.1.0 on (and on disk), but shipped first in
        // v1.0.0 without it: the first place decides, so v1.0.0 stays
        // alphabetical. Unchanged tags add nothing; `e` is untagged and its
        // requires come from the disk.
        let history = ReleaseHistory {
            line: vec![
                tag("v1.0.0", &[("a", "a", &[]), ("b", "b", &[])]),
                tag("v1.1.0", &[("a", "a", &["b"]), ("b", "b", &[])]),
                tag(
                    "v1.2.0",
                    &[("a", "a", &["b"]), ("b", "b", &[]), ("d", "d", &[])],
                ),
                tag(
                    "v1.2.1",
                    &[("a", "a", &["b"]), ("b", "b", &[]), ("d", "d", &[])],
                ),
            ],
            disk: disk(&[
                ("a", "a", &["b"]),
                ("b", "b", &[]),
                ("d", "d", &[]),
                ("e", "e", &["f"]),
                ("f", "f", &[]),
            ]),
            ..ReleaseHistory::default()
        };
        assert_eq!(
            rendered(&generate(&history).unwrap()),
            [
                ("00001-v1.0.0".to_string(), "a\nb\n".to_string()),
                ("00003-v1.2.0".to_string(), "d\n".to_string()),
                ("99999-untagged".to_string(), "f\ne\n".to_string()),
            ]
        );
    }

    #[test]
    fn each_slug_goes_to_the_first_tag_that_ships_it() {
        let history = ReleaseHistory {
            line: vec![
                tag("v1.0.0", &[("b", "b", &[]), ("a", "a", &[])]),
                tag(
                    "v1.1.0",
                    &[("a", "a", &[]), ("b", "b", &[]), ("c", "c", &[])],
                ),
                tag(
                    "v1.1.1",
                    &[("a", "a", &[]), ("b", "b", &[]), ("c", "c", &[])],
                ),
            ],
            disk: disk(&[
                ("a", "a", &[]),
                ("b", "b", &[]),
                ("c", "c", &[]),
                ("d", "d", &[]),
            ]),
            ..ReleaseHistory::default()
        };
        assert_eq!(
            rendered(&generate(&history).unwrap()),
            [
                ("00001-v1.0.0".to_string(), "a\nb\n".to_string()),
                ("00002-v1.1.0".to_string(), "c\n".to_string()),
                ("99999-untagged".to_string(), "d\n".to_string()),
            ]
        );
    }

    #[test]
    fn legacy_slugs_go_only_to_the_legacy_batch_in_integer_order() {
        let history = ReleaseHistory {
            line: vec![tag(
                "v1.0.0",
                &[("z-old", "z", &[]), ("a-old", "a", &[]), ("new", "n", &[])],
            )],
            disk: disk(&[("a-old", "a", &[]), ("new", "n", &[])]),
            legacy: vec![s("z-old"), s("a-old")],
            ..ReleaseHistory::default()
        };
        assert_eq!(
            rendered(&generate(&history).unwrap()),
            [
                (
                    "00000-legacy".to_string(),
                    "z-old retired\na-old\n".to_string()
                ),
                ("00001-v1.0.0".to_string(), "new\n".to_string()),
            ]
        );
    }

    #[test]
    fn a_build_exactly_at_a_tag_has_no_untagged_batch() {
        let history = ReleaseHistory {
            line: vec![tag("v1.0.0", &[("a", "a", &[])])],
            disk: disk(&[("a", "a", &[])]),
            ..ReleaseHistory::default()
        };
        let m = generate(&history).unwrap();
        assert!(m.batches().iter().all(|b| !b.name.is_untagged()));
    }

    #[test]
    fn a_deleted_shipped_script_is_retired_not_dropped() {
        let history = ReleaseHistory {
            line: vec![tag("v1.0.0", &[("gone", "g", &[]), ("kept", "k", &[])])],
            disk: disk(&[("kept", "k", &[])]),
            ..ReleaseHistory::default()
        };
        assert_eq!(
            rendered(&generate(&history).unwrap())[0].1,
            "gone retired\nkept\n"
        );
    }

    #[test]
    fn requires_reorders_within_a_batch_and_may_point_back() {
        let history = ReleaseHistory {
            line: vec![
                tag("v1", &[("base", "b", &[])]),
                tag(
                    "v2",
                    &[
                        ("base", "b", &[]),
                        ("a", "a", &["z", "base"]),
                        ("z", "z", &[]),
                    ],
                ),
            ],
            disk: disk(&[
                ("base", "b", &[]),
                ("a", "a", &["z", "base"]),
                ("z", "z", &[]),
            ]),
            ..ReleaseHistory::default()
        };
        assert_eq!(rendered(&generate(&history).unwrap())[1].1, "z\na\n");
    }

    #[test]
    fn requires_naming_a_later_batch_or_nothing_is_an_error() {
        let history = ReleaseHistory {
            line: vec![tag("v1", &[("early", "e", &["late"])])],
            disk: disk(&[
                ("early", "e", &["late"]),
                ("late", "l", &[]),
                ("x", "x", &["ghost"]),
            ]),
            ..ReleaseHistory::default()
        };
        let err = generate(&history).unwrap_err();
        let text: Vec<String> = err.problems.iter().map(ToString::to_string).collect();
        assert_eq!(
            text,
            [
                "'early' (batch 00001-v1) requires 'late', which is only in later batch 99999-untagged",
                "'x' requires 'ghost', which is in no batch",
            ]
        );
    }

    #[test]
    fn requires_later_names_the_target_batch_even_past_the_first_tagged_batch() {
        let history = ReleaseHistory {
            line: vec![
                tag("v1", &[("a", "a", &[])]),
                tag("v2", &[("a", "a", &[]), ("b", "b", &["c"])]),
                tag(
                    "v3",
                    &[("a", "a", &[]), ("b", "b", &["c"]), ("c", "c", &[])],
                ),
            ],
            disk: disk(&[("a", "a", &[]), ("b", "b", &["c"]), ("c", "c", &[])]),
            ..ReleaseHistory::default()
        };
        let err = generate(&history).unwrap_err();
        assert_eq!(
            err.problems
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>(),
            ["'b' (batch 00002-v2) requires 'c', which is only in later batch 00003-v3"]
        );
    }

    #[test]
    fn a_cycle_names_its_slugs() {
        let history = ReleaseHistory {
            disk: disk(&[("a", "a", &["b"]), ("b", "b", &["a"])]),
            ..ReleaseHistory::default()
        };
        let err = generate(&history).unwrap_err();
        assert_eq!(err.problems.len(), 1);
        assert_eq!(
            err.problems[0].to_string(),
            "batch 99999-untagged: requires cycle: a requires b requires a"
        );
    }

    #[test]
    fn the_immutability_guard_names_every_offending_slug_and_both_places() {
        let history = ReleaseHistory {
            line: vec![tag("v1.5.0", &[("45", "one", &[]), ("x", "x1", &[])])],
            other_tags: vec![tag("v1.6.0", &[("45", "two", &[])])],
            disk: disk(&[("45", "one", &[]), ("x", "x2", &[])]),
            ..ReleaseHistory::default()
        };
        let err = generate(&history).unwrap_err();
        let text: Vec<String> = err.problems.iter().map(ToString::to_string).collect();
        assert_eq!(text.len(), 2, "{text:?}");
        assert!(
            text[0].starts_with("'45' has different content in tag v1.5.0"),
            "{}",
            text[0]
        );
        assert!(text[0].contains("and tag v1.6.0"), "{}", text[0]);
        assert!(
            text[1].starts_with("'x' has different content in tag v1.5.0"),
            "{}",
            text[1]
        );
        assert!(text[1].contains("and the working tree"), "{}", text[1]);
    }

    #[test]
    fn tag_names_that_cannot_be_file_names_are_refused() {
        let history = ReleaseHistory {
            line: vec![tag("release/1.0", &[("a", "a", &[])])],
            ..ReleaseHistory::default()
        };
        let err = generate(&history).unwrap_err();
        assert!(
            matches!(&err.problems[..], [GenerateProblem::BadTag { tag, .. }] if tag == "release/1.0")
        );
    }
}
