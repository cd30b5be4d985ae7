//! `requires` graphs and release histories of a given size, for `order`
//! and `generate`.

use std::collections::{BTreeMap, HashSet};

use migration_core::generate::{ReleaseHistory, ScriptInfo, TagTree};
use migration_core::{Edge, Sha256Digest, Slug, Tier};

use super::{LEGACY, Rng, slug};

/// `n` slugs (sorted, as `generate` passes a batch) and `e` distinct
/// acyclic `requires` edges between random pairs of them.
pub fn graph(n: usize, e: usize, seed: u64) -> (Vec<Slug>, Vec<Edge>) {
    let mut slugs: Vec<Slug> = (0..n).map(slug).collect();
    // A random topological order: edges only point from later to earlier in it.
    let mut topo: Vec<usize> = (0..n).collect();
    let mut rng = Rng::new(seed);
    for i in (1..n).rev() {
        topo.swap(i, rng.below(i + 1));
    }
    let max_edges = n * n.saturating_sub(1) / 2;
    let e = e.min(max_edges);
    let mut seen = HashSet::with_capacity(e);
    let mut edges = Vec::with_capacity(e);
    while edges.len() < e {
        let a = rng.below(n);
        let b = rng.below(n);
        if a == b {
            continue;
        }
        let (early, late) = (a.min(b), a.max(b));
        if seen.insert((early, late)) {
            edges.push(Edge {
                dependent: slugs[topo[late]].clone(),
                target: slugs[topo[early]].clone(),
            });
        }
    }
    slugs.sort();
    (slugs, edges)
}

/// A release history: `tags` tags on the line shipping `slugs` migrations
/// between them (plus the [`LEGACY`] legacy slugs in every tag), 3 tags of
/// another line, and 10 untagged scripts on disk.
///
/// Every 10th slug requires an earlier one (same or earlier tag); every 50th
/// is retired: deleted from disk, and from the tags after a quarter of the
/// line further on.
pub fn history(tags: usize, slugs: usize) -> ReleaseHistory {
    let untagged = 10;
    let all: Vec<Slug> = (0..LEGACY + slugs + untagged).map(slug).collect();
    let mut rng = Rng::new(0x6E4E);
    let infos: Vec<ScriptInfo> = (0..all.len())
        .map(|i| {
            let requires = if i > LEGACY && (i - LEGACY) % 10 == 3 {
                let back = rng.below((i - LEGACY).min(100)) + 1;
                let mut t = i - back;
                // A pre-apply script cannot require a background one.
                if i % 5 != 4 && t % 5 == 4 {
                    t -= 1;
                }
                vec![all[t].clone()]
            } else {
                Vec::new()
            };
            ScriptInfo {
                tier: if i % 5 == 4 {
                    Tier::Background
                } else {
                    Tier::PreApply
                },
                sha256: Sha256Digest::of(format!("script {i}").as_bytes()),
                requires,
            }
        })
        .collect();
    let first_tag = |k: usize| k * tags / slugs.max(1);
    let retired = |k: usize| k % 50 == 13;
    let gone_from = |k: usize| first_tag(k) + tags / 4;
    let mut line = Vec::with_capacity(tags);
    let mut current: BTreeMap<Slug, ScriptInfo> = (0..LEGACY)
        .map(|i| (all[i].clone(), infos[i].clone()))
        .collect();
    let mut next = 0;
    for t in 0..tags {
        while next < slugs && first_tag(next) <= t {
            let i = LEGACY + next;
            current.insert(all[i].clone(), infos[i].clone());
            next += 1;
        }
        for k in (0..next).filter(|&k| retired(k) && gone_from(k) == t) {
            current.remove(&all[LEGACY + k]);
        }
        line.push(TagTree {
            tag: format!("v1.{}.{}", t / 100, t % 100),
            scripts: current.clone(),
        });
    }
    let other_tags = (0..3)
        .map(|t| TagTree {
            tag: format!("v0.9.{t}"),
            scripts: (0..LEGACY + slugs / 10)
                .map(|i| (all[i].clone(), infos[i].clone()))
                .collect(),
        })
        .collect();
    let disk = (0..all.len())
        .filter(|&i| i < LEGACY || i >= LEGACY + slugs || !retired(i - LEGACY))
        .map(|i| (all[i].clone(), infos[i].clone()))
        .collect();
    ReleaseHistory {
        line,
        other_tags,
        disk,
        legacy: all[..LEGACY].to_vec(),
        legacy_maps: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generation_of_the_history_succeeds() {
        let m = migration_core::generate(&history(12, 400)).unwrap();
        assert_eq!(m.len(), LEGACY + 400 + 10);
    }

    #[test]
    fn graphs_sort() {
        let (slugs, edges) = graph(200, 800, 1);
        assert_eq!(edges.len(), 800);
        assert_eq!(
            migration_core::stable_topo_sort(&slugs, &edges)
                .unwrap()
                .len(),
            200
        );
    }
}
