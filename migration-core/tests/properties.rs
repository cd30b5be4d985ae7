//! Property tests of the engine through the in-memory backend.
//!
//! Case counts are modest by default so CI stays fast; set `PROPTEST_CASES`
//! to raise them for a soak.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::{BTreeSet, HashMap};

use ledger_memory::MemoryLedger;
use migration_core::digest::Sha256Digest;
use migration_core::generate::{ReleaseHistory, ScriptInfo, TagTree, generate};
use migration_core::header::{OnError, Tier};
use migration_core::ledger::{LedgerSnapshot, Record};
use migration_core::manifest::{Batch, BatchName, Manifest, ManifestEntry};
use migration_core::order::{Edge, stable_topo_sort};
use migration_core::plan::Refusal;
use migration_core::testing::fixtures::{NOW, TreeBuilder, block_on, clock, s, script_text};
use migration_core::{
    EntryState, Ledger, LedgerEntry, MigrateError, MigrationsTree, Migrator, PlanContext,
    PlanRequest, Slug, Timestamp, plan,
};
use proptest::prelude::*;
use proptest::sample::Index;

fn cases(default: u32) -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default);
    ProptestConfig {
        cases,
        ..ProptestConfig::default()
    }
}

// ---------------------------------------------------------------------------
// A simulated release line: tags that add, retire and revoke migrations.

#[derive(Debug, Clone)]
struct SlugSpec {
    name: Slug,
    tier: Tier,
    created: usize,
    retired_at: Option<usize>,
    revoked_at: Option<usize>,
    requires: Vec<Slug>,
}

#[derive(Debug, Clone)]
struct Line {
    tags: usize,
    slugs: Vec<SlugSpec>,
}

type RawSlug = (usize, bool, Option<usize>, Option<usize>, Vec<Index>);

fn build_line(tags: usize, mut raw: Vec<RawSlug>) -> Line {
    raw.sort_by_key(|r| r.0);
    let mut slugs: Vec<SlugSpec> = Vec::new();
    for (i, (created, background, retire, revoke, picks)) in raw.into_iter().enumerate() {
        let tier = if background {
            Tier::Background
        } else {
            Tier::PreApply
        };
        let retired_at = retire.map(|r| r.max(created + 1)).filter(|r| *r < tags);
        let revoked_at = revoke.map(|r| r.max(created));
        // Requirements: earlier slugs of the same tier that are never retired
        // or revoked, so every requirement can be met.
        let candidates: Vec<&SlugSpec> = slugs
            .iter()
            .filter(|t| t.tier == tier && t.retired_at.is_none() && t.revoked_at.is_none())
            .collect();
        let mut requires: Vec<Slug> = Vec::new();
        if !candidates.is_empty() {
            for pick in picks {
                let target = pick.get(&candidates).name.clone();
                if !requires.contains(&target) {
                    requires.push(target);
                }
            }
        }
        slugs.push(SlugSpec {
            name: Slug::parse(&format!("m{i}")).unwrap(),
            tier,
            created,
            retired_at,
            revoked_at,
            requires,
        });
    }
    // A required slug must never be revoked or retired later either.
    let required: BTreeSet<Slug> = slugs.iter().flat_map(|s| s.requires.clone()).collect();
    for spec in &mut slugs {
        if required.contains(&spec.name) {
            spec.retired_at = None;
            spec.revoked_at = None;
        }
    }
    Line { tags, slugs }
}

fn line_strategy() -> impl Strategy<Value = Line> {
    (1usize..=6, 0usize..=12).prop_flat_map(|(tags, n)| {
        let slug = (
            0..tags,
            any::<bool>(),
            proptest::option::weighted(0.25, 0..tags),
            proptest::option::weighted(0.2, 0..tags),
            proptest::collection::vec(any::<Index>(), 0..3),
        );
        proptest::collection::vec(slug, n).prop_map(move |raw| build_line(tags, raw))
    })
}

fn tag_name(k: usize) -> String {
    format!("v1.{k}.0")
}

impl Line {
    fn text(&self, spec: &SlugSpec) -> String {
        let requires: Vec<&str> = spec.requires.iter().map(Slug::as_str).collect();
        script_text(
            spec.tier,
            OnError::Abort,
            &requires,
            &format!("echo {}", spec.name),
        )
    }

    fn present_at(&self, k: usize) -> impl Iterator<Item = &SlugSpec> {
        self.slugs
            .iter()
            .filter(move |s| s.created <= k && s.retired_at.is_none_or(|r| r > k))
    }

    fn info(&self, spec: &SlugSpec) -> ScriptInfo {
        ScriptInfo {
            tier: spec.tier,
            sha256: Sha256Digest::of(self.text(spec).as_bytes()),
            requires: spec.requires.clone(),
        }
    }

    fn tag_tree(&self, k: usize) -> TagTree {
        TagTree {
            tag: tag_name(k),
            scripts: self
                .present_at(k)
                .map(|s| (s.name.clone(), self.info(s)))
                .collect(),
        }
    }

    fn manifest_at(&self, k: usize) -> Manifest {
        let history = ReleaseHistory {
            line: (0..=k).map(|t| self.tag_tree(t)).collect(),
            other_tags: Vec::new(),
            disk: self.tag_tree(k).scripts,
            legacy: Vec::new(),
        };
        generate(&history).unwrap()
    }

    fn tree_at(&self, k: usize) -> MigrationsTree {
        let mut tree = TreeBuilder::new();
        for spec in self.present_at(k) {
            tree = tree.raw_script(spec.tier, spec.name.as_str(), self.text(spec).as_bytes());
        }
        let revoked: String = self
            .slugs
            .iter()
            .filter(|s| s.revoked_at.is_some_and(|r| r <= k))
            .map(|s| format!("{}\n", s.name))
            .collect();
        tree.revoked(&revoked)
            .rendered_manifest(&self.manifest_at(k))
            .build_at(format!("/line/{}", tag_name(k)))
    }
}

/// One cluster's history: what ran, at which tag, in which order.
#[derive(Debug, Default)]
struct Cluster {
    executions: Vec<(usize, Tier, Slug)>,
    install: usize,
    visited: Vec<usize>,
}

fn upgrade_to(
    line: &Line,
    trees: &[MigrationsTree],
    ledger: &MemoryLedger,
    cluster: &mut Cluster,
    k: usize,
) {
    let clock = clock();
    for tier in Tier::ALL {
        let migrator = Migrator::new(&trees[k], ledger, &clock);
        let prepared = match block_on(migrator.prepare(&PlanRequest::tier(tier))) {
            Ok(p) => p,
            Err(MigrateError::Refused(err)) => {
                // The retention floor names the release to pass through first.
                let detour = err.problems.iter().find_map(|p| match p {
                    Refusal::RetentionFloor { release, .. } => {
                        (0..line.tags).find(|t| tag_name(*t) == *release)
                    }
                    _ => None,
                });
                let detour = detour
                    .unwrap_or_else(|| panic!("unexpected refusal at {}: {err}", tag_name(k)));
                assert!(detour < k, "a detour must go back in the line");
                upgrade_to(line, trees, ledger, cluster, detour);
                return upgrade_to(line, trees, ledger, cluster, k);
            }
            Err(e) => panic!("{e}"),
        };
        for pending in &prepared.plan.pending {
            assert!(
                pending.unmet.is_empty(),
                "{} has unmet requirements {:?}",
                pending.slug,
                pending.unmet
            );
            cluster.executions.push((k, tier, pending.slug.clone()));
            let entry = LedgerEntry {
                sha256: Some(pending.sha256),
                batch: Some(pending.batch.clone()),
                attempts: 1,
                ..LedgerEntry::new(EntryState::Ok, NOW)
            };
            block_on(migrator.record(&pending.slug, &entry)).unwrap();
        }
    }
    cluster.visited.push(k);
}

fn run_cluster(line: &Line, trees: &[MigrationsTree], path: &[usize]) -> (Cluster, LedgerSnapshot) {
    let ledger = MemoryLedger::new();
    let mut cluster = Cluster {
        install: path[0],
        ..Cluster::default()
    };
    for &k in path {
        upgrade_to(line, trees, &ledger, &mut cluster, k);
    }
    let snapshot = block_on(ledger.read()).unwrap().unwrap();
    (cluster, snapshot)
}

fn path_strategy(tags: usize) -> impl Strategy<Value = Vec<usize>> {
    proptest::collection::vec(any::<bool>(), tags).prop_map(move |picks| {
        let mut path: Vec<usize> = picks
            .iter()
            .enumerate()
            .filter(|(_, p)| **p)
            .map(|(i, _)| i)
            .collect();
        if path.last() != Some(&(tags - 1)) {
            path.push(tags - 1);
        }
        path
    })
}

fn line_and_two_paths() -> impl Strategy<Value = (Line, Vec<usize>, Vec<usize>)> {
    line_strategy().prop_flat_map(|line| {
        let tags = line.tags;
        (Just(line), path_strategy(tags), path_strategy(tags))
    })
}

fn check_cluster(
    line: &Line,
    cluster: &Cluster,
    snapshot: &LedgerSnapshot,
    final_manifest: &Manifest,
) {
    let mut runs: HashMap<&Slug, usize> = HashMap::new();
    for (_, _, slug) in &cluster.executions {
        *runs.entry(slug).or_default() += 1;
    }
    for (slug, n) in &runs {
        assert_eq!(*n, 1, "{slug} ran {n} times");
    }
    for spec in &line.slugs {
        let record = snapshot.record(&spec.name);
        let state = match record {
            Some(Record::Entry(e)) => e.state,
            Some(Record::Corrupt(c)) => panic!("corrupt record {c}"),
            None => {
                assert!(
                    final_manifest.position(&spec.name).is_none(),
                    "{} shipped but has no entry",
                    spec.name
                );
                continue;
            }
        };
        let ran = runs.contains_key(&spec.name);
        if spec.created <= cluster.install {
            assert_eq!(
                state,
                EntryState::SkippedFreshInstall,
                "{} predates the install",
                spec.name
            );
            assert!(!ran, "a fresh install ran {}", spec.name);
        } else {
            match state {
                EntryState::Ok => assert!(ran, "{} is ok but never ran", spec.name),
                EntryState::Revoked => assert!(!ran, "{} is revoked but ran", spec.name),
                other => panic!("{} ended {other}", spec.name),
            }
        }
        if let (true, Some(revoked)) = (ran, spec.revoked_at) {
            let at = cluster
                .executions
                .iter()
                .find(|e| e.2 == spec.name)
                .unwrap()
                .0;
            assert!(
                at < revoked,
                "{} ran at {} after being revoked at {}",
                spec.name,
                tag_name(at),
                tag_name(revoked)
            );
        }
    }
}

proptest! {
    #![proptest_config(cases(48))]

    /// Property 1 and 2: clusters on different upgrade paths run each
    /// migration at most once, agree on relative order within each tier, and
    /// end with every shipped migration terminal; a fresh install runs
    /// nothing, and later upgrades run exactly what was added since.
    #[test]
    fn clusters_on_different_paths_agree((line, first, second) in line_and_two_paths()) {
        let trees: Vec<MigrationsTree> = (0..line.tags).map(|k| line.tree_at(k)).collect();
        let final_manifest = line.manifest_at(line.tags - 1);
        let (a, snap_a) = run_cluster(&line, &trees, &first);
        let (b, snap_b) = run_cluster(&line, &trees, &second);
        check_cluster(&line, &a, &snap_a, &final_manifest);
        check_cluster(&line, &b, &snap_b, &final_manifest);
        for tier in Tier::ALL {
            let order = |c: &Cluster| -> Vec<Slug> {
                c.executions.iter().filter(|e| e.1 == tier).map(|e| e.2.clone()).collect()
            };
            let (oa, ob) = (order(&a), order(&b));
            let common: BTreeSet<&Slug> = oa.iter().filter(|s| ob.contains(s)).collect();
            let ra: Vec<&Slug> = oa.iter().filter(|s| common.contains(s)).collect();
            let rb: Vec<&Slug> = ob.iter().filter(|s| common.contains(s)).collect();
            prop_assert_eq!(ra, rb, "tier {} order differs", tier);
        }
        // After the last tag nothing is left for either cluster.
        for snapshot in [&snap_a, &snap_b] {
            for tier in Tier::ALL {
                let p = plan(&trees[line.tags - 1], Some(snapshot), &PlanRequest::tier(tier), &PlanContext::at(NOW)).unwrap();
                prop_assert!(p.pending.is_empty() && p.seed.is_empty());
            }
        }
    }

    /// The manifest at a tag is an order-prefix of the manifest at every
    /// later tag, byte-exact when nothing was retired in between; every slug
    /// is in exactly one batch; retired lines never disappear.
    #[test]
    fn manifests_only_ever_append(line in line_strategy()) {
        let manifests: Vec<Manifest> = (0..line.tags).map(|k| line.manifest_at(k)).collect();
        for i in 0..line.tags {
            for j in i..line.tags {
                prop_assert!(manifests[i].is_order_prefix_of(&manifests[j]), "{} vs {}", i, j);
                let retired_between = line.slugs.iter().any(|s| s.retired_at.is_some_and(|r| r > i && r <= j));
                if !retired_between {
                    let (early, late) = (manifests[i].render(), manifests[j].render());
                    prop_assert_eq!(&late[..early.len()], &early[..]);
                }
            }
            let listed: Vec<&Slug> = manifests[i].iter().map(|(_, e)| &e.slug).collect();
            let unique: BTreeSet<&Slug> = listed.iter().copied().collect();
            prop_assert_eq!(listed.len(), unique.len());
            let shipped: BTreeSet<&Slug> = line.slugs.iter().filter(|s| s.created <= i).map(|s| &s.name).collect();
            prop_assert_eq!(unique, shipped);
        }
    }
}

// ---------------------------------------------------------------------------
// Seeding never overwrites; revocation never rewrites history; corrupt is
// neither absent nor present.

const STATES: [EntryState; 5] = EntryState::ALL;

fn entry_for(state: EntryState, n: u32) -> LedgerEntry {
    let mut e = LedgerEntry {
        attempts: n,
        ..LedgerEntry::new(state, Timestamp::from_unix(1_000 + i64::from(n)))
    };
    if state == EntryState::Failed {
        e.reason = Some("r".into());
        e.message = Some("m".into());
    }
    e
}

/// A tree of `n` pre-apply slugs `l0..`, all in the legacy map at their index,
/// some revoked.
fn legacy_tree(n: usize, revoked: &BTreeSet<usize>) -> MigrationsTree {
    let mut tree = TreeBuilder::new();
    let mut legacy = String::new();
    let mut order = String::new();
    for i in 0..n {
        tree = tree.pre(&format!("l{i}"));
        legacy.push_str(&format!("{i} l{i}\n"));
        order.push_str(&format!("l{i}\n"));
    }
    let revoked: String = revoked.iter().map(|i| format!("l{i}\n")).collect();
    tree.legacy_map(&legacy)
        .revoked(&revoked)
        .manifest(&[("00000-legacy", &order)])
        .build()
}

/// What a ledger pre-state holds for slug i: nothing, a state, or garbage.
#[derive(Debug, Clone)]
enum Pre {
    Absent,
    State(usize),
    Corrupt(String),
}

fn pre_strategy() -> impl Strategy<Value = Pre> {
    prop_oneof![
        3 => Just(Pre::Absent),
        3 => (0..5usize).prop_map(Pre::State),
        1 => "[^{}]{0,12}".prop_map(Pre::Corrupt),
    ]
}

fn plant(ledger: &MemoryLedger, pre: &[Pre]) {
    ledger.put_raw("version", "0");
    for (i, p) in pre.iter().enumerate() {
        match p {
            Pre::Absent => {}
            Pre::State(s) => ledger.put_raw(
                &format!("m.l{i}"),
                &entry_for(STATES[*s], i as u32).encode(),
            ),
            Pre::Corrupt(raw) => ledger.put_raw(&format!("m.l{i}"), raw),
        }
    }
}

proptest! {
    #![proptest_config(cases(128))]

    /// Property 3 and 4: legacy and revocation seeding write only absent keys,
    /// never change an existing value (valid or corrupt), and a second
    /// prepare writes nothing. Revoked slugs never become pending.
    #[test]
    fn seeding_is_idempotent_and_never_overwrites(
        pre in proptest::collection::vec(pre_strategy(), 1..10),
        version in 0u64..12,
        revoked in proptest::collection::btree_set(0usize..10, 0..4),
    ) {
        let n = pre.len();
        let revoked: BTreeSet<usize> = revoked.into_iter().filter(|r| *r < n).collect();
        let tree = legacy_tree(n, &revoked);
        let ledger = MemoryLedger::new();
        plant(&ledger, &pre);
        ledger.put_raw("version", &version.to_string());
        let before = ledger.raw_data().unwrap();
        let clock = clock();
        let migrator = Migrator::new(&tree, &ledger, &clock);
        let first = block_on(migrator.prepare(&PlanRequest::tier(Tier::PreApply)));
        let after = ledger.raw_data().unwrap();
        for (key, value) in &before {
            prop_assert_eq!(after.get(key), Some(value), "{} was overwritten", key);
        }
        let any_corrupt = pre.iter().any(|p| matches!(p, Pre::Corrupt(_)));
        match first {
            Ok(prepared) => {
                prop_assert!(!any_corrupt, "a corrupt entry on the path must refuse");
                for p in &prepared.plan.pending {
                    let i: usize = p.slug.as_str()[1..].parse().unwrap();
                    prop_assert!(!revoked.contains(&i), "revoked {} is pending", p.slug);
                    prop_assert!(i as u64 >= version, "{} is below the legacy version but pending", p.slug);
                }
                for i in 0..n {
                    let key = format!("m.l{i}");
                    if before.contains_key(&key) { continue; }
                    let written = after.get(&key).map(|v| LedgerEntry::decode(&key, v).unwrap().state);
                    let expected = if (i as u64) < version { Some(EntryState::Legacy) }
                        else if revoked.contains(&i) { Some(EntryState::Revoked) }
                        else { None };
                    prop_assert_eq!(written, expected, "key {}", key);
                }
                let second = block_on(migrator.prepare(&PlanRequest::tier(Tier::PreApply))).unwrap();
                prop_assert!(second.written.is_empty());
                prop_assert_eq!(ledger.raw_data().unwrap(), after);
            }
            Err(MigrateError::Refused(err)) => {
                prop_assert!(any_corrupt, "refused without a corrupt entry: {}", err);
                prop_assert_eq!(&after, &before, "a refusal wrote something");
            }
            Err(e) => prop_assert!(false, "{}", e),
        }
    }

    /// Property 5: a corrupt entry is never treated as absent (pending) nor
    /// present (skipped): the plan refuses and names its key.
    #[test]
    fn a_corrupt_entry_refuses_naming_its_key(
        pre in proptest::collection::vec(pre_strategy(), 1..10),
        garbage in "[^{}]{0,20}",
        victim in any::<Index>(),
    ) {
        let n = pre.len();
        let tree = legacy_tree(n, &BTreeSet::new());
        let ledger = MemoryLedger::new();
        plant(&ledger, &pre);
        let victim = victim.index(n);
        ledger.put_raw(&format!("m.l{victim}"), &garbage);
        let snapshot = block_on(ledger.read()).unwrap().unwrap();
        let err = plan(&tree, Some(&snapshot), &PlanRequest::tier(Tier::PreApply), &PlanContext::at(NOW)).unwrap_err();
        let named: BTreeSet<String> = err.problems.iter().filter_map(|p| match p {
            Refusal::CorruptEntry { key, .. } => Some(key.clone()),
            _ => None,
        }).collect();
        prop_assert!(named.contains(&format!("m.l{victim}")), "{:?}", named);
        prop_assert_eq!(named.len(), err.problems.len(), "only corrupt entries should refuse: {}", err);
    }

    /// Fresh-install seeding is one create; repeating the prepare writes nothing.
    #[test]
    fn fresh_install_seeding_is_idempotent(n in 0usize..30) {
        let tree = legacy_tree(n, &BTreeSet::new());
        let ledger = MemoryLedger::new();
        let clock = clock();
        let migrator = Migrator::new(&tree, &ledger, &clock);
        let first = block_on(migrator.prepare(&PlanRequest::tier(Tier::PreApply))).unwrap();
        prop_assert!(first.plan.fresh_install && first.plan.pending.is_empty());
        let data = ledger.raw_data().unwrap();
        prop_assert_eq!(data.len(), n);
        prop_assert!(data.values().all(|v| v.contains("skipped-fresh-install")));
        let second = block_on(migrator.prepare(&PlanRequest::tier(Tier::PreApply))).unwrap();
        prop_assert!(second.written.is_empty() && second.plan.pending.is_empty());
        prop_assert_eq!(ledger.raw_data().unwrap(), data);
    }
}

// ---------------------------------------------------------------------------
// Property 6: the stable topological sort.

fn graph_strategy() -> impl Strategy<Value = (Vec<Slug>, Vec<Edge>)> {
    (1usize..40).prop_flat_map(|n| {
        let slugs: Vec<Slug> = (0..n)
            .map(|i| Slug::parse(&format!("n{i}")).unwrap())
            .collect();
        let edges = proptest::collection::vec((0..n, 0..n), 0..(3 * n));
        (Just(slugs), edges).prop_map(|(slugs, pairs)| {
            let edges = pairs
                .into_iter()
                .map(|(d, t)| Edge {
                    dependent: slugs[d].clone(),
                    target: slugs[t].clone(),
                })
                .collect();
            (slugs, edges)
        })
    })
}

/// Edges pointing only from higher to lower index: always acyclic.
fn dag_strategy() -> impl Strategy<Value = (Vec<Slug>, Vec<Edge>)> {
    graph_strategy().prop_map(|(slugs, edges)| {
        let index: HashMap<Slug, usize> = slugs
            .iter()
            .cloned()
            .enumerate()
            .map(|(i, s)| (s, i))
            .collect();
        let edges = edges
            .into_iter()
            .filter(|e| index[&e.dependent] > index[&e.target])
            .collect();
        (slugs, edges)
    })
}

proptest! {
    #![proptest_config(cases(256))]

    #[test]
    fn topo_sort_respects_edges_and_is_alphabetical_where_silent((slugs, edges) in dag_strategy(), shuffle in any::<u64>()) {
        let order = stable_topo_sort(&slugs, &edges).unwrap();
        let position: HashMap<&Slug, usize> = order.iter().enumerate().map(|(i, s)| (s, i)).collect();
        prop_assert_eq!(order.len(), slugs.len());
        for e in &edges {
            prop_assert!(position[&e.target] < position[&e.dependent], "{} before {}", e.dependent, e.target);
        }
        // Greedy characterisation of "alphabetical where edges are silent":
        // each slug is the smallest whose targets are all already placed.
        for i in 0..order.len() {
            let placed: BTreeSet<&Slug> = order[..i].iter().collect();
            let ready = slugs.iter().filter(|s| !placed.contains(s))
                .filter(|s| edges.iter().filter(|e| &e.dependent == *s).all(|e| placed.contains(&e.target)))
                .min();
            prop_assert_eq!(ready, Some(&order[i]));
        }
        // Deterministic: input order does not matter.
        let mut shuffled = slugs.clone();
        let mut edges2 = edges.clone();
        let k = (shuffle as usize) % shuffled.len().max(1);
        shuffled.rotate_left(k);
        edges2.reverse();
        prop_assert_eq!(stable_topo_sort(&shuffled, &edges2).unwrap(), order);
    }

    #[test]
    fn topo_sort_reports_every_cycle((slugs, edges) in graph_strategy()) {
        match stable_topo_sort(&slugs, &edges) {
            Ok(order) => {
                let position: HashMap<&Slug, usize> = order.iter().enumerate().map(|(i, s)| (s, i)).collect();
                for e in &edges {
                    prop_assert!(position[&e.target] < position[&e.dependent]);
                }
            }
            Err(err) => {
                prop_assert!(!err.cycles.is_empty());
                let has_edge = |a: &Slug, b: &Slug| edges.iter().any(|e| &e.dependent == a && &e.target == b);
                let in_reported: BTreeSet<&Slug> = err.cycles.iter().flat_map(|c| c.members.iter()).collect();
                for c in &err.cycles {
                    prop_assert_eq!(c.path.first(), c.path.last());
                    for w in c.path.windows(2) {
                        prop_assert!(has_edge(&w[0], &w[1]), "{} -> {} is not an edge", w[0], w[1]);
                    }
                }
                // Every slug on some cycle (reachable from itself) is reported.
                for s in &slugs {
                    let mut seen: BTreeSet<&Slug> = BTreeSet::new();
                    let mut stack: Vec<&Slug> = edges.iter().filter(|e| &e.dependent == s).map(|e| &e.target).collect();
                    let mut on_cycle = false;
                    while let Some(x) = stack.pop() {
                        if x == s { on_cycle = true; break; }
                        if seen.insert(x) {
                            stack.extend(edges.iter().filter(|e| &e.dependent == x).map(|e| &e.target));
                        }
                    }
                    prop_assert_eq!(on_cycle, in_reported.contains(s), "{}", s);
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Property 7: round trips.

fn slug_strategy() -> impl Strategy<Value = Slug> {
    "[a-z0-9]{1,8}(-[a-z0-9]{1,6}){0,3}".prop_map(|s| Slug::parse(&s).unwrap())
}

fn entry_strategy() -> impl Strategy<Value = LedgerEntry> {
    (
        0..5usize,
        0i64..4_000_000_000,
        proptest::option::of(any::<[u8; 4]>()),
        proptest::option::of("[0-9]{5}-v[0-9.]{1,8}"),
        proptest::option::of("[ -~]{0,40}"),
        any::<u32>(),
        "[ -~\u{80}-\u{10ffff}]{0,30}",
        proptest::collection::btree_map("x_[a-z]{1,5}", any::<i32>(), 0..3),
    )
        .prop_map(|(state, at, sha, batch, image, attempts, message, extra)| {
            let state = STATES[state];
            let mut entry = LedgerEntry {
                sha256: sha.map(|b| Sha256Digest::of(&b)),
                lib_sha256: sha.map(|b| Sha256Digest::of(&[b[0]])),
                batch,
                image,
                attempts,
                extra: extra
                    .into_iter()
                    .map(|(k, v)| (k, serde_json::json!(v)))
                    .collect(),
                ..LedgerEntry::new(state, Timestamp::from_unix(at))
            };
            if state == EntryState::Failed {
                entry.reason = Some("exit-status".into());
                entry.message = Some(message);
            }
            entry
        })
}

proptest! {
    #![proptest_config(cases(256))]

    #[test]
    fn ledger_entries_round_trip(entry in entry_strategy()) {
        let text = entry.encode();
        let back = LedgerEntry::decode("m.x", &text).unwrap();
        prop_assert_eq!(&back, &entry);
        prop_assert_eq!(back.encode(), text);
    }

    #[test]
    fn manifests_round_trip_byte_exactly(
        batches in proptest::collection::btree_map(1u32..99_999, proptest::collection::vec((slug_strategy(), any::<bool>()), 0..6), 0..6),
    ) {
        let mut seen = BTreeSet::new();
        let batches: Vec<Batch> = batches.into_iter().map(|(seq, lines)| Batch {
            name: BatchName::new(seq, &format!("v{seq}")).unwrap(),
            entries: lines.into_iter().filter(|(s, _)| seen.insert(s.clone()))
                .map(|(slug, retired)| ManifestEntry { slug, retired }).collect(),
        }).collect();
        let manifest = Manifest::from_batches(batches).unwrap();
        let files = manifest.render();
        let parsed = Manifest::parse_files(files.iter().map(|(n, c)| (n.clone(), c.clone().into_bytes())).collect()).unwrap();
        prop_assert_eq!(&parsed, &manifest);
        prop_assert_eq!(parsed.render(), files);
    }

    #[test]
    fn snapshot_parsing_never_panics_and_classifies_every_key(
        data in proptest::collection::btree_map("([ma]\\.)?[a-zA-Z0-9_.-]{0,10}", "\\PC{0,40}|\\{\"count\":[0-9],\"token\":\"t\"\\}", 0..12),
    ) {
        let snapshot = LedgerSnapshot::from_raw_data(data.iter().map(|(k, v)| (k.as_str(), v.as_str())), None);
        // Entry keys and attempt-mark keys: each lands in exactly one place.
        let ledger_keys = data.keys().filter(|k| k.starts_with("m.") || k.starts_with("a.")).count();
        prop_assert_eq!(
            snapshot.records.len() + snapshot.attempts_started.len() + snapshot.unreadable_keys.len(),
            ledger_keys
        );
    }
}

#[test]
fn the_simulated_upgrade_executes_a_migration_shipped_after_the_install() {
    // Guards the properties above against a vacuous simulation: they would
    // pass trivially if simulated clusters never executed anything.
    let line = build_line(2, vec![(1, false, None, None, vec![])]);
    let trees: Vec<MigrationsTree> = (0..2).map(|k| line.tree_at(k)).collect();
    let (cluster, snapshot) = run_cluster(&line, &trees, &[0, 1]);
    assert_eq!(cluster.executions.len(), 1);
    assert_eq!(snapshot.entry(&s("m0")).unwrap().state, EntryState::Ok);
}
