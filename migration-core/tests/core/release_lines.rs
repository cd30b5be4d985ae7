//! Property tests on simulated release lines: tags that add, retire and
//! revoke migrations, and clusters that install at one tag and upgrade
//! along random paths, through the in-memory backend.
//!
//! Case counts are modest by default so CI stays fast; set `PROPTEST_CASES`
//! to raise them for a soak.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use std::collections::{BTreeSet, HashMap};

use common::cases;
use ledger_memory::MemoryLedger;
use migration_core::digest::Sha256Digest;
use migration_core::generate::{ReleaseHistory, ScriptInfo, TagTree, generate};
use migration_core::header::{OnError, Tier};
use migration_core::ledger::{LedgerSnapshot, Record};
use migration_core::manifest::Manifest;
use migration_core::plan::Refusal;
use migration_core::testing::fixtures::{NOW, TreeBuilder, block_on, clock, s, script_text};
use migration_core::{
    EntryState, Ledger, LedgerEntry, MigrateError, MigrationsTree, Migrator, PlanContext,
    PlanRequest, Slug, plan,
};
use proptest::prelude::*;
use proptest::sample::Index;

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
            legacy_maps: Vec::new(),
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
