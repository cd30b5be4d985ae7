//! Which batch ships each slug: the legacy batch for legacy-map slugs, the
//! first tag of the line that ships a slug, else the untagged batch.

use std::collections::HashMap;

use super::history::{SincePrevious, since_previous};
use super::{GenerateProblem, ReleaseHistory};
use crate::manifest::{Batch, BatchName, ManifestEntry};
use crate::slug::Slug;

/// Every slug's batch, before the batches are ordered by `requires`.
#[derive(Debug, Default)]
pub(super) struct Assignment<'a> {
    /// Requires of each slug, from the first place that has it (the first
    /// line tag, else the disk).
    pub(super) requires: HashMap<&'a Slug, &'a [Slug]>,
    /// The index of each slug's batch, the legacy batch first.
    pub(super) assigned: HashMap<Slug, usize>,
    /// The legacy batch, complete: it keeps integer order.
    pub(super) legacy: Option<Batch>,
    /// The other batches, named, with their slugs in slug order.
    pub(super) unordered: Vec<(BatchName, Vec<Slug>)>,
}

impl<'a> Assignment<'a> {
    /// The index the next batch gets.
    fn next_index(&self) -> usize {
        usize::from(self.legacy.is_some()) + self.unordered.len()
    }

    /// Adds a batch of `slugs`, which are not in any batch yet.
    fn push(&mut self, name: BatchName, slugs: Vec<Slug>) {
        let index = self.next_index();
        for s in &slugs {
            self.assigned.insert(s.clone(), index);
        }
        self.unordered.push((name, slugs));
    }

    /// Every batch's name by index.
    pub(super) fn names(&self) -> Vec<String> {
        self.legacy
            .iter()
            .map(|b| b.name.to_string())
            .chain(self.unordered.iter().map(|(n, _)| n.to_string()))
            .collect()
    }
}

/// Assigns every slug of `history` to its batch; a tag that cannot name a
/// batch is a problem, and its slugs go to the next tag that ships them.
pub(super) fn assign<'a>(
    history: &'a ReleaseHistory,
    problems: &mut Vec<GenerateProblem>,
) -> Assignment<'a> {
    let mut assignment = Assignment::default();
    // Requires are filled as slugs first appear below, so that slugs
    // unchanged from one tag to the next cost no lookup.
    for slug in &history.legacy {
        let first = history
            .line
            .iter()
            .find_map(|t| t.scripts.get(slug))
            .or_else(|| history.disk.get(slug));
        if let Some(info) = first {
            assignment.requires.insert(slug, &info.requires);
        }
    }
    if !history.legacy.is_empty() {
        let entries = history
            .legacy
            .iter()
            .map(|s| ManifestEntry {
                slug: s.clone(),
                retired: !history.disk.contains_key(s),
            })
            .collect();
        for s in &history.legacy {
            assignment.assigned.insert(s.clone(), 0);
        }
        assignment.legacy = Some(Batch {
            name: BatchName::legacy(),
            entries,
        });
    }
    assign_line(history, &mut assignment, problems);
    let untagged: Vec<Slug> = history
        .disk
        .iter()
        .filter(|(s, _)| !assignment.assigned.contains_key(*s))
        .map(|(s, info)| {
            assignment.requires.entry(s).or_insert(&info.requires);
            s.clone()
        })
        .collect();
    if !untagged.is_empty() {
        assignment.push(BatchName::untagged(), untagged);
    }
    assignment
}

/// The tags of the line, in order: each slug to the first that ships it.
fn assign_line<'a>(
    history: &'a ReleaseHistory,
    assignment: &mut Assignment<'a>,
    problems: &mut Vec<GenerateProblem>,
) {
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
            if since == SincePrevious::New && !assignment.assigned.contains_key(slug) {
                assignment.requires.entry(slug).or_insert(&info.requires);
                fresh.push(slug.clone());
            }
        }
        previous_assigned = true;
        if fresh.is_empty() {
            continue;
        }
        let sequence = u32::try_from(i + 1).unwrap_or(u32::MAX);
        match BatchName::new(sequence, &tag.tag) {
            Ok(name) => assignment.push(name, fresh),
            Err(e) => {
                problems.push(GenerateProblem::BadTag {
                    tag: tag.tag.clone(),
                    reason: e.reason.to_owned(),
                });
                previous_assigned = false;
            }
        }
    }
}
