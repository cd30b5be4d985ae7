//! The immutability guard for `legacy-map` (CONTRACT.md §4.5): a line a
//! release shipped is never changed or removed, and a slug that shipped as
//! a regular migration is never moved into `00000-legacy` later (a cluster
//! would then seed it `legacy` instead of running it).

use std::collections::{BTreeSet, HashMap};

use super::{GenerateProblem, Place, ReleaseHistory};
use crate::slug::Slug;

/// Every legacy-map problem of `history`, each once.
pub(super) fn legacy_map_problems(history: &ReleaseHistory) -> Vec<GenerateProblem> {
    let mut problems = Vec::new();
    let mut by_number: HashMap<u64, (&Slug, &Place)> = HashMap::new();
    let mut by_slug: HashMap<&Slug, (u64, &Place)> = HashMap::new();
    let mut reported: BTreeSet<(u64, &Slug)> = BTreeSet::new();
    for map in &history.legacy_maps {
        for pair in &map.pairs {
            let first = by_number
                .get(&pair.number)
                .map(|&(s, p)| (pair.number, s, p));
            let first = first.or_else(|| by_slug.get(&pair.slug).map(|&(n, p)| (n, &pair.slug, p)));
            match first {
                Some((number, slug, place))
                    if (number, slug) != (pair.number, &pair.slug)
                        && reported.insert((pair.number, &pair.slug)) =>
                {
                    problems.push(GenerateProblem::LegacyLineChanged {
                        first: format!("{number} {slug}"),
                        first_place: place.clone(),
                        second: format!("{} {}", pair.number, pair.slug),
                        second_place: map.place.clone(),
                    });
                }
                Some(_) => {}
                None => {
                    by_number.insert(pair.number, (&pair.slug, &map.place));
                    by_slug.insert(&pair.slug, (pair.number, &map.place));
                }
            }
        }
    }
    let Some(disk) = history.legacy_maps.iter().find(|m| m.place == Place::Disk) else {
        return problems;
    };
    let on_disk = |number: u64, slug: &Slug| {
        disk.pairs
            .iter()
            .any(|p| p.number == number && &p.slug == slug)
    };
    let line_map = |tag: &str| {
        history
            .legacy_maps
            .iter()
            .find(|m| matches!(&m.place, Place::Tag(t) if t == tag))
    };
    // Removed: a line tag's pair the working tree lacks (changed pairs are
    // reported above already).
    let mut removed = BTreeSet::new();
    for tag in &history.line {
        for pair in line_map(&tag.tag).map_or(&[][..], |m| &m.pairs) {
            let changed = disk
                .pairs
                .iter()
                .any(|p| p.number == pair.number || p.slug == pair.slug);
            if !on_disk(pair.number, &pair.slug) && !changed && removed.insert(pair.number) {
                problems.push(GenerateProblem::LegacyLineRemoved {
                    line: format!("{} {}", pair.number, pair.slug),
                    tag: tag.tag.clone(),
                });
            }
        }
    }
    // Moved into the legacy batch: the first line tag that shipped the
    // script did not list it in its legacy-map.
    for pair in &disk.pairs {
        let Some(first) = history
            .line
            .iter()
            .find(|t| t.scripts.contains_key(&pair.slug))
        else {
            continue;
        };
        let listed =
            line_map(&first.tag).is_some_and(|m| m.pairs.iter().any(|p| p.slug == pair.slug));
        if !listed {
            problems.push(GenerateProblem::LegacyAfterShipping {
                slug: pair.slug.clone(),
                tag: first.tag.clone(),
                line: format!("{} {}", pair.number, pair.slug),
            });
        }
    }
    problems
}
