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
    // The first place naming each integer: on this line (its tags and the
    // working tree), and anywhere.
    let mut by_number: HashMap<u64, (&Slug, &Place)> = HashMap::new();
    let mut on_line_number: HashMap<u64, (&Slug, &Place)> = HashMap::new();
    let mut by_slug: HashMap<&Slug, (u64, &Place)> = HashMap::new();
    let mut reported: BTreeSet<(u64, &Slug)> = BTreeSet::new();
    let on_line = |place: &Place| match place {
        Place::Disk => true,
        Place::Tag(tag) => history.line.iter().any(|t| &t.tag == tag),
    };
    // A diverged slot (others=) names its own line's content first: two
    // release lines converted apart name different slugs at one integer,
    // and that is no change of a shipped line when one of them lists the
    // other's content among its others (the newer line sees the older
    // line's content; ADOPTING.md, "Every maintained line"). Within one
    // line it still is a change.
    let others: HashMap<(u64, &Place), &[Slug]> = history
        .legacy_maps
        .iter()
        .flat_map(|m| {
            m.pairs
                .iter()
                .map(move |p| ((p.number, &m.place), p.others.as_slice()))
        })
        .collect();
    let names = |number: u64, place: &Place, slug: &Slug| {
        others
            .get(&(number, place))
            .is_some_and(|o| o.contains(slug))
    };
    let acknowledged = |number: u64, a: (&Slug, &Place), b: (&Slug, &Place)| {
        names(number, a.1, b.0) || names(number, b.1, a.0)
    };
    for map in &history.legacy_maps {
        let here_on_line = on_line(&map.place);
        for pair in &map.pairs {
            let first = if here_on_line {
                on_line_number.get(&pair.number)
            } else {
                None
            }
            .or_else(|| by_number.get(&pair.number))
            .map(|&(s, p)| (pair.number, s, p))
            .filter(|&(n, s, p)| {
                s == &pair.slug
                    || (here_on_line && on_line(p))
                    || !acknowledged(n, (s, p), (&pair.slug, &map.place))
            });
            let first = first.or_else(|| by_slug.get(&pair.slug).map(|&(n, p)| (n, &pair.slug, p)));
            if here_on_line {
                on_line_number
                    .entry(pair.number)
                    .or_insert((&pair.slug, &map.place));
            }
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
