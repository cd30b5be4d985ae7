//! Reliability suite 5, upgrade paths: random release histories with a main
//! line, release branches with patch releases, backports (branch-only, and
//! cherry-picked to main with the same content), retirements and
//! revocations. Clusters install fresh at a random tag and upgrade along
//! random legal paths, across lines, to the newest release. Every cluster
//! must end with every shipped migration terminal, none run twice, nothing
//! shipped at install time run at all, and clusters that stay on the main
//! line agree on the relative order of what they ran.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use std::collections::{BTreeSet, HashMap};

use ledger_memory::MemoryLedger;
use migration_core::digest::Sha256Digest;
use migration_core::generate::{ReleaseHistory, ScriptInfo, TagTree, generate};
use migration_core::header::{OnError, Tier};
use migration_core::plan::Refusal;
use migration_core::testing::fixtures::{NOW, TreeBuilder, block_on, clock, script_text};
use migration_core::{
    EntryState, Ledger, LedgerEntry, MigrateError, MigrationsTree, Migrator, PlanContext,
    PlanRequest, Record, Slug, plan,
};
use proptest::prelude::*;
use proptest::sample::Index;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Tag {
    Main(usize),
    Patch(usize, usize),
}

impl Tag {
    fn name(self) -> String {
        match self {
            Tag::Main(i) => format!("v1.{i}.0"),
            Tag::Patch(i, p) => format!("v1.{i}.{p}"),
        }
    }

    fn minor(self) -> usize {
        match self {
            Tag::Main(i) | Tag::Patch(i, _) => i,
        }
    }
}

#[derive(Debug, Clone)]
enum Origin {
    Main(usize),
    Backport {
        branch: usize,
        patch: usize,
        to_main: Option<usize>,
    },
}

#[derive(Debug, Clone)]
struct Spec {
    name: Slug,
    tier: Tier,
    origin: Origin,
    retired_at: Option<usize>,
    revoked_at: Option<usize>,
}

#[derive(Debug, Clone)]
struct History {
    minors: usize,
    patches: Vec<usize>,
    slugs: Vec<Spec>,
}

impl History {
    fn tags(&self) -> Vec<Tag> {
        let mut tags = Vec::new();
        for i in 0..self.minors {
            tags.push(Tag::Main(i));
            for p in 1..=self.patches[i] {
                tags.push(Tag::Patch(i, p));
            }
        }
        tags
    }

    fn present(&self, spec: &Spec, tag: Tag) -> bool {
        // A branch freezes main as of its minor; retirements happen on main.
        let main_cut = tag.minor();
        let retired = spec.retired_at.is_some_and(|r| r <= main_cut);
        let shipped = match (&spec.origin, tag) {
            (Origin::Main(i), _) => *i <= main_cut,
            (Origin::Backport { to_main, .. }, Tag::Main(j)) => to_main.is_some_and(|m| m <= j),
            (
                Origin::Backport {
                    branch,
                    patch,
                    to_main,
                },
                Tag::Patch(i, p),
            ) => (*branch == i && *patch <= p) || to_main.is_some_and(|m| m <= i),
        };
        shipped && !retired
    }

    fn revoked(&self, spec: &Spec, tag: Tag) -> bool {
        spec.revoked_at.is_some_and(|r| r <= tag.minor())
    }

    fn text(spec: &Spec) -> String {
        script_text(
            spec.tier,
            OnError::Abort,
            &[],
            &format!("echo {}", spec.name),
        )
    }

    fn tag_tree(&self, tag: Tag) -> TagTree {
        let scripts = self
            .slugs
            .iter()
            .filter(|s| self.present(s, tag))
            .map(|s| {
                let info = ScriptInfo {
                    tier: s.tier,
                    sha256: Sha256Digest::of(Self::text(s).as_bytes()),
                    requires: Vec::new(),
                };
                (s.name.clone(), info)
            })
            .collect();
        TagTree {
            tag: tag.name(),
            scripts,
        }
    }

    /// Tags reachable from `tag`, in semantic-version order.
    fn line(&self, tag: Tag) -> Vec<Tag> {
        let mut line: Vec<Tag> = (0..=tag.minor()).map(Tag::Main).collect();
        if let Tag::Patch(i, p) = tag {
            line.extend((1..=p).map(|q| Tag::Patch(i, q)));
        }
        line
    }

    fn tree(&self, tag: Tag) -> MigrationsTree {
        let line = self.line(tag);
        let history = ReleaseHistory {
            line: line.iter().map(|t| self.tag_tree(*t)).collect(),
            other_tags: self
                .tags()
                .into_iter()
                .filter(|t| !line.contains(t))
                .map(|t| self.tag_tree(t))
                .collect(),
            disk: self.tag_tree(tag).scripts,
            legacy: Vec::new(),
            legacy_maps: Vec::new(),
        };
        let manifest = generate(&history).unwrap_or_else(|e| panic!("{}: {e}", tag.name()));
        let mut tree = TreeBuilder::new();
        for spec in self.slugs.iter().filter(|s| self.present(s, tag)) {
            tree = tree.raw_script(spec.tier, spec.name.as_str(), Self::text(spec).as_bytes());
        }
        let revoked: String = self
            .slugs
            .iter()
            .filter(|s| self.revoked(s, tag))
            .map(|s| format!("{}\n", s.name))
            .collect();
        tree.revoked(&revoked)
            .rendered_manifest(&manifest)
            .build_at(format!("/h/{}", tag.name()))
    }
}

type RawSpec = (usize, bool, u8, Option<usize>, Option<usize>, Index, Index);

fn history_strategy() -> impl Strategy<Value = History> {
    (
        2usize..=5,
        proptest::collection::vec(0usize..=2, 5),
        proptest::collection::vec(any::<RawSpec>(), 0..14),
    )
        .prop_map(|(minors, patch_counts, raw)| {
            let patches: Vec<usize> = patch_counts[..minors].to_vec();
            let mut slugs = Vec::new();
            for (n, (minor, background, kind, retire, revoke, pick_patch, pick_main)) in
                raw.into_iter().enumerate()
            {
                let minor = minor % minors;
                let origin = if kind % 3 == 0 && patches[minor] > 0 {
                    let patch = pick_patch.index(patches[minor]) + 1;
                    let later: Vec<usize> = (minor + 1..minors).collect();
                    let to_main = if kind % 2 == 0 && !later.is_empty() {
                        Some(*pick_main.get(&later))
                    } else {
                        None
                    };
                    Origin::Backport {
                        branch: minor,
                        patch,
                        to_main,
                    }
                } else {
                    Origin::Main(minor)
                };
                let first_main = match origin {
                    Origin::Main(i) => Some(i),
                    Origin::Backport { to_main, .. } => to_main,
                };
                // Retire on main only, after the slug reached main.
                let retired_at = match (first_main, retire) {
                    (Some(m), Some(r)) if r % minors > m => Some(r % minors),
                    _ => None,
                };
                let revoked_at = revoke
                    .map(|r| r % minors)
                    .filter(|r| first_main.is_some_and(|m| *r >= m));
                slugs.push(Spec {
                    name: Slug::parse(&format!("s{n}")).unwrap(),
                    tier: if background {
                        Tier::Background
                    } else {
                        Tier::PreApply
                    },
                    origin,
                    retired_at,
                    revoked_at,
                });
            }
            History {
                minors,
                patches,
                slugs,
            }
        })
}

/// A legal upgrade path from a random install tag to the newest main tag.
fn path(history: &History, picks: &[Index]) -> Vec<Tag> {
    let tags = history.tags();
    let last = Tag::Main(history.minors - 1);
    let mut path = vec![*picks[0].get(&tags)];
    for pick in &picks[1..] {
        let here = *path.last().unwrap();
        let next: Vec<Tag> = tags
            .iter()
            .copied()
            .filter(|t| match (here, *t) {
                (_, Tag::Main(j)) => j > here.minor(),
                (Tag::Main(i), Tag::Patch(k, _)) => k == i,
                (Tag::Patch(i, p), Tag::Patch(k, q)) => k == i && q > p,
            })
            .collect();
        if next.is_empty() {
            break;
        }
        path.push(*pick.get(&next));
    }
    if *path.last().unwrap() != last {
        path.push(last);
    }
    path
}

#[derive(Default)]
struct Cluster {
    ran: Vec<(Tag, Tier, Slug)>,
    upgrades: usize,
}

fn upgrade(
    history: &History,
    trees: &HashMap<Tag, MigrationsTree>,
    ledger: &MemoryLedger,
    cluster: &mut Cluster,
    to: Tag,
) {
    let clock = clock();
    cluster.upgrades += 1;
    for tier in Tier::ALL {
        let migrator = Migrator::new(&trees[&to], ledger, &clock);
        let prepared = match block_on(migrator.prepare(&PlanRequest::tier(tier))) {
            Ok(p) => p,
            Err(MigrateError::Refused(err)) => {
                let detour = err.problems.iter().find_map(|p| match p {
                    Refusal::RetentionFloor { release, .. } => {
                        history.tags().into_iter().find(|t| t.name() == *release)
                    }
                    _ => None,
                });
                let detour = detour.unwrap_or_else(|| panic!("refused at {}: {err}", to.name()));
                upgrade(history, trees, ledger, cluster, detour);
                return upgrade(history, trees, ledger, cluster, to);
            }
            Err(e) => panic!("{e}"),
        };
        for pending in &prepared.plan.pending {
            cluster.ran.push((to, tier, pending.slug.clone()));
            let entry = LedgerEntry {
                attempts: 1,
                sha256: Some(pending.sha256),
                ..LedgerEntry::new(EntryState::Ok, NOW)
            };
            block_on(migrator.record(&pending.slug, &entry)).unwrap();
        }
    }
}

#[test]
fn clusters_on_random_upgrade_paths_across_release_lines_end_complete() {
    let strategy = (
        history_strategy(),
        proptest::collection::vec(proptest::collection::vec(any::<Index>(), 1..6), 4),
    );
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100);
    let config = proptest::test_runner::Config {
        cases,
        failure_persistence: None,
        ..Default::default()
    };
    let mut runner = proptest::test_runner::TestRunner::new(config);
    let stats = std::cell::RefCell::new((0u64, 0u64, 0u64, 0u64));
    let result = runner.run(&strategy, |(history, path_picks)| {
        let trees: HashMap<Tag, MigrationsTree> = history
            .tags()
            .into_iter()
            .map(|t| (t, history.tree(t)))
            .collect();
        let last = Tag::Main(history.minors - 1);
        let mut main_only_orders: Vec<Vec<(Tier, Slug)>> = Vec::new();
        let mut s = stats.borrow_mut();
        s.0 += 1;
        for picks in &path_picks {
            let path = path(&history, picks);
            let ledger = MemoryLedger::new();
            let mut cluster = Cluster::default();
            for tag in &path {
                upgrade(&history, &trees, &ledger, &mut cluster, *tag);
            }
            s.1 += 1;
            s.2 += cluster.upgrades as u64;
            s.3 += cluster.ran.len() as u64;
            let snapshot = block_on(ledger.read()).unwrap().unwrap();
            // None run twice.
            let mut seen = BTreeSet::new();
            for (_, _, slug) in &cluster.ran {
                prop_assert!(
                    seen.insert(slug.clone()),
                    "{} ran twice on path {:?}",
                    slug,
                    path
                );
            }
            // Nothing the install tag shipped ran.
            let installed = trees[&path[0]].manifest().unwrap();
            for (_, _, slug) in &cluster.ran {
                prop_assert!(
                    installed.position(slug).is_none(),
                    "{} shipped at install {:?} but ran",
                    slug,
                    path[0]
                );
            }
            // Never ran where it was revoked.
            for (tag, _, slug) in &cluster.ran {
                let spec = history.slugs.iter().find(|s| &s.name == slug).unwrap();
                prop_assert!(
                    !history.revoked(spec, *tag),
                    "{} ran at {} where it is revoked",
                    slug,
                    tag.name()
                );
            }
            // Every shipped migration terminal; nothing left to do.
            for (_, line) in trees[&last].manifest().unwrap().iter() {
                prop_assert!(
                    matches!(snapshot.record(&line.slug), Some(Record::Entry(_))),
                    "{} has no entry",
                    line.slug
                );
            }
            for tier in Tier::ALL {
                let p = plan(
                    &trees[&last],
                    Some(&snapshot),
                    &PlanRequest::tier(tier),
                    &PlanContext::at(NOW),
                )
                .unwrap();
                prop_assert!(p.pending.is_empty() && p.seed.is_empty());
            }
            if path.iter().all(|t| matches!(t, Tag::Main(_))) {
                main_only_orders.push(
                    cluster
                        .ran
                        .iter()
                        .map(|(_, tier, slug)| (*tier, slug.clone()))
                        .collect(),
                );
            }
        }
        // Clusters on the main line agree on relative order, per tier.
        for tier in Tier::ALL {
            let orders: Vec<Vec<&Slug>> = main_only_orders
                .iter()
                .map(|o| {
                    o.iter()
                        .filter(|(t, _)| *t == tier)
                        .map(|(_, s)| s)
                        .collect()
                })
                .collect();
            for a in &orders {
                for b in &orders {
                    let common: Vec<&&Slug> = a.iter().filter(|s| b.contains(s)).collect();
                    let in_b: Vec<&&Slug> = b.iter().filter(|s| a.contains(s)).collect();
                    prop_assert_eq!(common, in_b);
                }
            }
        }
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    let (histories, clusters, upgrades, migrations_run) = stats.into_inner();
    common::figure(
        "upgrade-paths",
        "random histories with branches, backports, retirements and revocations",
        &format!(
            "{histories} histories, {clusters} clusters, {upgrades} upgrades, {migrations_run} migrations run, 0 invariant violations"
        ),
    );
}
