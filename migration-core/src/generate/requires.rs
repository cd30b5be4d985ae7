//! `requires` between batches and within them: a target must sit in the
//! same batch or an earlier one; within a batch, targets move before their
//! dependents (stably, so the order is otherwise alphabetical).

use super::assign::Assignment;
use super::{GenerateProblem, ReleaseHistory};
use crate::header::Tier;
use crate::manifest::{Batch, ManifestEntry};
use crate::order::{Edge, stable_topo_sort};
use crate::slug::Slug;

/// The batches in their final order; every `requires` problem goes to
/// `problems`, and a batch with a cycle is left empty (keeping the indices
/// of later messages aligned).
/// Pre-apply scripts on disk that require a background slug (its tier from
/// the disk, else from the latest line tag holding it).
pub(super) fn tier_problems(history: &ReleaseHistory, problems: &mut Vec<GenerateProblem>) {
    let tier_of = |slug: &Slug| {
        history.disk.get(slug).map(|i| i.tier).or_else(|| {
            history
                .line
                .iter()
                .rev()
                .find_map(|t| t.scripts.get(slug).map(|i| i.tier))
        })
    };
    for (slug, info) in &history.disk {
        if info.tier != Tier::PreApply {
            continue;
        }
        for target in &info.requires {
            if tier_of(target) == Some(Tier::Background) {
                problems.push(GenerateProblem::RequiresOtherTier {
                    slug: slug.clone(),
                    target: target.clone(),
                });
            }
        }
    }
}

pub(super) fn order_batches(
    history: &ReleaseHistory,
    assignment: Assignment<'_>,
    problems: &mut Vec<GenerateProblem>,
) -> Vec<Batch> {
    // Every batch's name by index, fixed before the list of batches starts
    // growing (indexing into a growing list named the wrong batch).
    let names = assignment.names();
    let batch_name = |index: usize| names.get(index).cloned().unwrap_or_default();
    let Assignment {
        requires,
        assigned,
        legacy,
        unordered,
    } = assignment;
    let requires_of = |slug: &Slug| requires.get(slug).copied().unwrap_or_default();
    let mut batches: Vec<Batch> = Vec::new();

    // The legacy batch keeps integer order; its requires may only point back.
    if let Some(legacy) = legacy {
        for (pos, line) in legacy.entries.iter().enumerate() {
            for target in requires_of(&line.slug) {
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
        batches.push(legacy);
    }

    let base = batches.len();
    for (offset, (name, slugs)) in unordered.into_iter().enumerate() {
        let index = base + offset;
        let mut edges = Vec::new();
        for slug in &slugs {
            for target in requires_of(slug) {
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
        let entries = match stable_topo_sort(&slugs, &edges) {
            Ok(order) => order
                .into_iter()
                .map(|s| ManifestEntry {
                    retired: !history.disk.contains_key(&s),
                    slug: s,
                })
                .collect(),
            Err(e) => {
                problems.extend(e.cycles.into_iter().map(|cycle| GenerateProblem::Cycle {
                    batch: name.to_string(),
                    cycle,
                }));
                Vec::new()
            }
        };
        batches.push(Batch { name, entries });
    }
    batches
}
