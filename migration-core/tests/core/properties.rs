//! Property tests of the engine through the in-memory backend: seeding,
//! the stable topological sort, round trips. Release lines and upgrade
//! paths are in `release_lines.rs`.
//!
//! Case counts are modest by default so CI stays fast; set `PROPTEST_CASES`
//! to raise them for a soak.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use common::cases;

use std::collections::{BTreeSet, HashMap};

use ledger_memory::MemoryLedger;
use migration_core::digest::Sha256Digest;
use migration_core::header::Tier;
use migration_core::ledger::LedgerSnapshot;
use migration_core::manifest::{Batch, BatchName, Manifest, ManifestEntry};
use migration_core::order::{Edge, stable_topo_sort};
use migration_core::plan::Refusal;
use migration_core::testing::fixtures::{NOW, TreeBuilder, block_on, clock};
use migration_core::{
    EntryState, Ledger, LedgerEntry, MigrateError, MigrationsTree, Migrator, PlanContext,
    PlanRequest, Slug, Timestamp, plan,
};
use proptest::prelude::*;
use proptest::sample::Index;

// ---------------------------------------------------------------------------
// Seeding never overwrites; revocation never rewrites history; corrupt is
// neither absent nor present.

/// The terminal states: the planning properties are about records that
/// never run again; `not-yet` (pending again) has its own suite, not_yet.rs.
const STATES: [EntryState; 5] = [
    EntryState::Ok,
    EntryState::Failed,
    EntryState::Legacy,
    EntryState::Revoked,
    EntryState::SkippedFreshInstall,
];

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
                let snapshot = block_on(ledger.read()).unwrap().unwrap();
                for i in 0..n {
                    let key = format!("m.l{i}");
                    if before.contains_key(&key) { continue; }
                    let slug = migration_core::Slug::parse(&format!("l{i}")).unwrap();
                    let written = after.get(&key).map(|_| snapshot.entry(&slug).unwrap().state);
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
        // Each refusal names the command that repairs its slug.
        let text = err.to_string();
        prop_assert!(text.contains(&format!("migrate repair TREE l{victim} --rerun")), "{}", text);
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
        prop_assert_eq!(data.keys().filter(|k| k.starts_with("m.")).count(), n);
        prop_assert!(data.iter().filter(|(k, _)| k.starts_with("m.")).all(|(_, v)| v.contains("skipped-fresh-install")));
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
        0..EntryState::ALL.len(),
        0i64..4_000_000_000,
        proptest::option::of(any::<[u8; 4]>()),
        proptest::option::of("[0-9]{5}-v[0-9.]{1,8}"),
        proptest::option::of("[ -~]{0,40}"),
        any::<u32>(),
        "[ -~\u{80}-\u{10ffff}]{0,30}",
        proptest::collection::btree_map("x_[a-z]{1,5}", any::<i32>(), 0..3),
    )
        .prop_map(|(state, at, sha, batch, image, attempts, message, extra)| {
            let state = EntryState::ALL[state];
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
            if state.needs_reason() {
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
        data in proptest::collection::btree_map("([macf]\\.)?[a-zA-Z0-9_.-]{0,10}", "\\PC{0,40}|\\{\"count\":[0-9],\"token\":\"t\"\\}|\\{\"reason\":\"r\",\"message\":\"m\",\"at\":\"2026-08-12T10:04:00Z\",\"attempts\":[0-9]\\}|\\{\"batch\":\"b\"\\}|\\{\"s\":\"ok\",\"t\":\"2026-08-12T10:04:00Z\",\"c\":\"[0-9a]\"\\}", 0..12),
    ) {
        use migration_core::entry::{SharedRecord, context::valid_id};
        let snapshot = LedgerSnapshot::from_raw_data(data.iter().map(|(k, v)| (k.as_str(), v.as_str())), None);
        // Entry keys, attempt-mark keys, last failures (but a cleared one,
        // which is no record) and unreadable shared records: each lands in
        // exactly one place.
        let bad_contexts = data.iter().filter(|(k, v)| {
            k.strip_prefix("c.").is_some_and(|id| !valid_id(id) || SharedRecord::decode(v).is_err())
        }).count();
        let failures = data.iter().filter(|(k, v)| k.starts_with("f.") && !v.is_empty()).count();
        let ledger_keys = data.keys().filter(|k| k.starts_with("m.") || k.starts_with("a.")).count() + failures + bad_contexts;
        prop_assert_eq!(
            snapshot.records.len() + snapshot.attempts_started.len() + snapshot.failures.len() + snapshot.unreadable_keys.len(),
            ledger_keys
        );
    }
}
