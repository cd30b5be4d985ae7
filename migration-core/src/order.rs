//! The stable topological sort used inside a batch (CONTRACT.md §4.3).
//!
//! Slugs are ordered alphabetically, then reordered just enough that every
//! `requires` target precedes its dependent. Concretely the result is the
//! lexicographically smallest topological order: at each step the
//! alphabetically first slug whose targets are all placed goes next. That is
//! deterministic, respects every edge, and keeps alphabetical order wherever
//! the edges say nothing. Cost: O((N + E) log N).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::fmt;

use crate::slug::Slug;

/// A `requires` edge: `dependent` must run after `target`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Edge {
    /// The slug that declares `requires`.
    pub dependent: Slug,
    /// The slug it requires.
    pub target: Slug,
}

/// One strongly connected group of slugs that require each other.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cycle {
    /// Every slug in the group, alphabetically.
    pub members: Vec<Slug>,
    /// One concrete cycle through the alphabetically first member, as the
    /// chain of `requires`: `[a, b, a]` means a requires b requires a.
    pub path: Vec<Slug>,
}

impl fmt::Display for Cycle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let path: Vec<&str> = self.path.iter().map(Slug::as_str).collect();
        write!(f, "{}", path.join(" requires "))?;
        if self.members.len() + 1 > self.path.len() {
            let all: Vec<&str> = self.members.iter().map(Slug::as_str).collect();
            write!(f, " (cycle group: {})", all.join(", "))?;
        }
        Ok(())
    }
}

/// Why a batch cannot be ordered. Every problem is listed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Default)]
pub struct OrderError {
    /// Edges whose target is not among the slugs being sorted.
    pub unknown_targets: Vec<Edge>,
    /// Every cycle group, ordered by its first member.
    pub cycles: Vec<Cycle>,
}

impl fmt::Display for OrderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        for e in &self.unknown_targets {
            parts.push(format!(
                "{} requires unknown slug {}",
                e.dependent, e.target
            ));
        }
        for c in &self.cycles {
            parts.push(format!("requires cycle: {c}"));
        }
        f.write_str(&parts.join("; "))
    }
}

/// Sorts `slugs` so that every edge's target comes before its dependent,
/// alphabetical wherever the edges allow. Duplicate slugs and duplicate
/// edges are harmless. Every edge must connect two of `slugs`.
pub fn stable_topo_sort(slugs: &[Slug], edges: &[Edge]) -> Result<Vec<Slug>, OrderError> {
    let mut nodes: Vec<&Slug> = slugs.iter().collect();
    nodes.sort();
    nodes.dedup();
    let rank: HashMap<&Slug, usize> = nodes.iter().enumerate().map(|(i, s)| (*s, i)).collect();

    let mut error = OrderError::default();
    // dependents[t] lists nodes that require t; pending[d] counts d's unplaced targets.
    let mut dependents: Vec<Vec<usize>> = vec![Vec::new(); nodes.len()];
    let mut targets: Vec<Vec<usize>> = vec![Vec::new(); nodes.len()];
    for edge in edges {
        match (rank.get(&edge.dependent), rank.get(&edge.target)) {
            (Some(&d), Some(&t)) => {
                dependents[t].push(d);
                targets[d].push(t);
            }
            _ => error.unknown_targets.push(edge.clone()),
        }
    }
    for list in dependents.iter_mut().chain(targets.iter_mut()) {
        list.sort_unstable();
        list.dedup();
    }
    let mut pending: Vec<usize> = targets.iter().map(Vec::len).collect();

    let mut ready: BinaryHeap<Reverse<usize>> = (0..nodes.len())
        .filter(|&i| pending[i] == 0)
        .map(Reverse)
        .collect();
    let mut order = Vec::with_capacity(nodes.len());
    let mut placed = vec![false; nodes.len()];
    while let Some(Reverse(next)) = ready.pop() {
        placed[next] = true;
        order.push(nodes[next].clone());
        for &d in &dependents[next] {
            pending[d] -= 1;
            if pending[d] == 0 {
                ready.push(Reverse(d));
            }
        }
    }

    if order.len() < nodes.len() {
        error.cycles = find_cycles(&nodes, &targets, &placed);
    }
    if error.unknown_targets.is_empty() && error.cycles.is_empty() {
        Ok(order)
    } else {
        error
            .unknown_targets
            .sort_by(|a, b| (&a.dependent, &a.target).cmp(&(&b.dependent, &b.target)));
        error.unknown_targets.dedup();
        Err(error)
    }
}

/// Strongly connected components of the unplaced nodes (iterative Tarjan, so
/// a long chain cannot overflow the stack), keeping those that are cycles.
fn find_cycles(nodes: &[&Slug], targets: &[Vec<usize>], placed: &[bool]) -> Vec<Cycle> {
    const UNVISITED: usize = usize::MAX;
    let n = nodes.len();
    let mut index = vec![UNVISITED; n];
    let mut low = vec![0usize; n];
    let mut on_stack = vec![false; n];
    let mut stack: Vec<usize> = Vec::new();
    let mut next_index = 0usize;
    let mut components: Vec<Vec<usize>> = Vec::new();

    for root in 0..n {
        if placed[root] || index[root] != UNVISITED {
            continue;
        }
        // Each frame: (node, position in its target list).
        let mut frames: Vec<(usize, usize)> = vec![(root, 0)];
        index[root] = next_index;
        low[root] = next_index;
        next_index += 1;
        stack.push(root);
        on_stack[root] = true;
        while let Some(&mut (v, ref mut pos)) = frames.last_mut() {
            if let Some(&w) = targets[v].get(*pos) {
                *pos += 1;
                if placed[w] {
                    continue;
                }
                if index[w] == UNVISITED {
                    index[w] = next_index;
                    low[w] = next_index;
                    next_index += 1;
                    stack.push(w);
                    on_stack[w] = true;
                    frames.push((w, 0));
                } else if on_stack[w] {
                    low[v] = low[v].min(index[w]);
                }
                continue;
            }
            frames.pop();
            if let Some(&(parent, _)) = frames.last() {
                low[parent] = low[parent].min(low[v]);
            }
            if low[v] == index[v] {
                let mut component = Vec::new();
                while let Some(w) = stack.pop() {
                    on_stack[w] = false;
                    component.push(w);
                    if w == v {
                        break;
                    }
                }
                let is_cycle = component.len() > 1 || targets[v].contains(&v);
                if is_cycle {
                    component.sort_unstable();
                    components.push(component);
                }
            }
        }
    }

    components.sort();
    components
        .into_iter()
        .map(|members| {
            let path = shortest_cycle_through(members[0], &members, targets);
            Cycle {
                members: members.iter().map(|&i| nodes[i].clone()).collect(),
                path: path.into_iter().map(|i| nodes[i].clone()).collect(),
            }
        })
        .collect()
}

/// Breadth-first search inside one component, from `start` back to `start`.
fn shortest_cycle_through(start: usize, members: &[usize], targets: &[Vec<usize>]) -> Vec<usize> {
    let inside: std::collections::HashSet<usize> = members.iter().copied().collect();
    let mut came_from: HashMap<usize, usize> = HashMap::new();
    let mut queue = VecDeque::from([start]);
    while let Some(v) = queue.pop_front() {
        for &w in &targets[v] {
            if !inside.contains(&w) {
                continue;
            }
            if w == start {
                let mut path = vec![v];
                let mut cur = v;
                while cur != start {
                    match came_from.get(&cur) {
                        Some(&previous) => cur = previous,
                        None => break,
                    }
                    path.push(cur);
                }
                path.reverse();
                path.push(start);
                return path;
            }
            if w != start && !came_from.contains_key(&w) {
                came_from.insert(w, v);
                queue.push_back(w);
            }
        }
    }
    // Unreachable for a real component; fall back to listing the members.
    members.to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::fixtures::s;

    fn slugs(xs: &[&str]) -> Vec<Slug> {
        xs.iter().map(|x| s(x)).collect()
    }
    fn edge(d: &str, t: &str) -> Edge {
        Edge {
            dependent: s(d),
            target: s(t),
        }
    }
    fn names(v: &[Slug]) -> Vec<&str> {
        v.iter().map(Slug::as_str).collect()
    }

    #[test]
    fn no_edges_means_alphabetical() {
        let out = stable_topo_sort(&slugs(&["c", "a", "b"]), &[]).unwrap();
        assert_eq!(names(&out), ["a", "b", "c"]);
    }

    #[test]
    fn a_target_moves_just_before_its_first_dependent() {
        // a requires d: d must come before a; b, c keep their places.
        let out = stable_topo_sort(&slugs(&["a", "b", "c", "d"]), &[edge("a", "d")]).unwrap();
        assert_eq!(names(&out), ["b", "c", "d", "a"]);
    }

    #[test]
    fn chains_are_respected() {
        let out =
            stable_topo_sort(&slugs(&["a", "b", "c"]), &[edge("a", "b"), edge("b", "c")]).unwrap();
        assert_eq!(names(&out), ["c", "b", "a"]);
    }

    #[test]
    fn a_two_cycle_is_reported_with_its_path() {
        let err = stable_topo_sort(&slugs(&["a", "b", "c"]), &[edge("a", "b"), edge("b", "a")])
            .unwrap_err();
        assert_eq!(err.cycles.len(), 1);
        assert_eq!(names(&err.cycles[0].path), ["a", "b", "a"]);
        assert_eq!(err.to_string(), "requires cycle: a requires b requires a");
    }

    #[test]
    fn every_cycle_group_is_reported_including_self_loops() {
        let err = stable_topo_sort(
            &slugs(&["a", "b", "c", "d", "e", "f"]),
            &[
                edge("a", "b"),
                edge("b", "a"),
                edge("c", "c"),
                edge("d", "e"),
                edge("e", "f"),
                edge("f", "d"),
            ],
        )
        .unwrap_err();
        let groups: Vec<Vec<&str>> = err.cycles.iter().map(|c| names(&c.members)).collect();
        assert_eq!(groups, [vec!["a", "b"], vec!["c"], vec!["d", "e", "f"]]);
        assert_eq!(names(&err.cycles[1].path), ["c", "c"]);
        assert_eq!(names(&err.cycles[2].path), ["d", "e", "f", "d"]);
    }

    #[test]
    fn nodes_downstream_of_a_cycle_are_not_reported_as_cycles() {
        // z requires a, and a/b form a cycle: only {a, b} is a cycle.
        let err = stable_topo_sort(
            &slugs(&["a", "b", "z"]),
            &[edge("a", "b"), edge("b", "a"), edge("z", "a")],
        )
        .unwrap_err();
        assert_eq!(err.cycles.len(), 1);
        assert_eq!(names(&err.cycles[0].members), ["a", "b"]);
    }

    #[test]
    fn unknown_targets_are_reported_with_cycles() {
        let err = stable_topo_sort(
            &slugs(&["a", "b"]),
            &[edge("a", "zz"), edge("a", "b"), edge("b", "a")],
        )
        .unwrap_err();
        assert_eq!(err.unknown_targets, [edge("a", "zz")]);
        assert_eq!(err.cycles.len(), 1);
        assert!(
            err.to_string()
                .starts_with("a requires unknown slug zz; requires cycle")
        );
    }

    #[test]
    fn a_long_chain_into_a_cycle_does_not_overflow_the_stack() {
        let n = 200_000;
        let all: Vec<Slug> = (0..n).map(|i| s(&format!("n{i}"))).collect();
        let mut edges: Vec<Edge> = (0..n - 1)
            .map(|i| Edge {
                dependent: all[i].clone(),
                target: all[i + 1].clone(),
            })
            .collect();
        edges.push(Edge {
            dependent: all[n - 1].clone(),
            target: all[n - 2].clone(),
        });
        let err = stable_topo_sort(&all, &edges).unwrap_err();
        assert_eq!(err.cycles.len(), 1);
        assert_eq!(err.cycles[0].members.len(), 2);
    }
}
