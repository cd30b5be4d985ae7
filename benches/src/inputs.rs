//! Deterministic inputs: trees, manifests, ledgers, release histories and
//! `requires` graphs of a given size. Same arguments, same bytes, every run.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};

use migration_core::generate::{ReleaseHistory, ScriptInfo, TagTree};
use migration_core::ledger::AttemptMark;
use migration_core::testing::fixtures::NOW;
use migration_core::{
    Edge, EntryState, LedgerEntry, LedgerSnapshot, Manifest, MigrationsTree, PlanContext,
    PlanRequest, Sha256Digest, Slug, Tier, Timestamp, TreeFiles,
};

/// Legacy-map size used everywhere: the 56 integers of the platform this
/// engine replaces.
pub const LEGACY: usize = 56;

/// Migrations per release batch in generated manifests.
pub const BATCH_SIZE: usize = 50;

/// A small, fast, deterministic generator (splitmix64).
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator from a seed.
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
}

const WORDS: [&str; 32] = [
    "redis",
    "etcd",
    "kafka",
    "seaweedfs",
    "postgres",
    "cilium",
    "kubeovn",
    "linstor",
    "flux",
    "tenant",
    "ingress",
    "monitoring",
    "vm",
    "bucket",
    "clickhouse",
    "rabbitmq",
    "nats",
    "mariadb",
    "keycloak",
    "dashboard",
    "cert",
    "dns",
    "metallb",
    "velero",
    "grafana",
    "victoria",
    "harbor",
    "opensearch",
    "ferretdb",
    "kamaji",
    "capi",
    "snapshot",
];

const VERBS: [&str; 16] = [
    "relabel", "adopt", "suspend", "migrate", "rename", "move", "split", "merge", "drop", "pin",
    "backfill", "annotate", "patch", "reown", "resize", "rekey",
];

/// The `i`th slug: realistic words plus the index, e.g.
/// `redis-relabel-000042`. Index order and alphabetical order differ.
pub fn slug(i: usize) -> Slug {
    let mut rng = Rng::new(i as u64 ^ 0x5EED);
    let noun = WORDS[rng.below(WORDS.len())];
    let verb = VERBS[rng.below(VERBS.len())];
    Slug::parse(&format!("{noun}-{verb}-{i:06}")).expect("generated slugs are valid")
}

/// A realistic digest-pinned image reference.
pub fn image() -> String {
    format!(
        "ghcr.io/cozystack/cozystack/migrations:v1.7.3@sha256:{}",
        Sha256Digest::of(b"bench image")
    )
}

/// A fixed instant for generated entries: the tests' [`NOW`],
/// 2026-08-12T10:04:00Z.
pub fn epoch() -> Timestamp {
    NOW
}

/// The label of release batch `b` (1-based): `v1.MINOR.PATCH`.
pub fn release_label(b: usize) -> String {
    format!("v1.{}.{}", b / 20, b % 20)
}

/// A realistic migration script with a valid header. The body only echoes:
/// the runner scenarios really execute pending scripts.
pub fn script_bytes(slug: &Slug, tier: Tier, on_error: &str, requires: &[Slug]) -> Vec<u8> {
    let mut s = format!(
        "#!/bin/sh\n# cozystack-migration: tier={tier}\n# cozystack-migration: on-error={on_error}\n"
    );
    for r in requires {
        s.push_str(&format!("# cozystack-migration: requires={r}\n"));
    }
    s.push_str(&format!(
        "set -eu\n# Synthetic benchmark migration {slug}: a real one would talk to the cluster here.\n\
         . \"$MIGRATION_TREE/lib/helpers.sh\"\necho \"{slug}: nothing to do\"\n"
    ));
    s.into_bytes()
}

/// The realistic entry of a migration that ran (`ok`), as the runner writes it.
pub fn ok_entry(
    sha256: Sha256Digest,
    lib: Sha256Digest,
    batch: &str,
    at: Timestamp,
) -> LedgerEntry {
    LedgerEntry {
        sha256: Some(sha256),
        lib_sha256: Some(lib),
        batch: Some(batch.to_owned()),
        image: Some(image()),
        attempts: 1,
        ..LedgerEntry::new(EntryState::Ok, at)
    }
}

/// The attempt mark the runner writes before executing a slug.
pub fn attempt_mark(slug: &Slug, at: Timestamp) -> AttemptMark {
    AttemptMark {
        count: 1,
        // Holder (the pod name), slug, wall-clock nanoseconds and a
        // process-wide counter, as the runner builds it.
        token: format!(
            "cozystack-migrate-7f9c4d-x2v8q/{slug}/{}123456789/{}",
            at.unix_seconds(),
            at.unix_seconds() % 1000
        ),
    }
}

/// What one migration of a generated tree is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Legacy,
    Recorded,
    Revoked,
    Retired,
    Failed,
    Pending,
}

/// A tree whose ledger holds `recorded` entries, with `pending` more
/// migrations not run yet, plus the raw ledger data (as a ConfigMap holds it).
///
/// Layout, all deterministic:
/// - the first [`LEGACY`] slugs are the legacy map (`version` is 57, so all
///   are recorded `legacy`), batch `00000-legacy`;
/// - the other recorded slugs come in release batches of [`BATCH_SIZE`]:
///   every 5th is in the background tier, every 10th requires a slug of an
///   earlier batch, every 100th is revoked (recorded `revoked`), every 50th is
///   retired (script deleted, line flagged, entry kept), every 200th is
///   recorded `failed`; recorded `ok` and `failed` slugs also have their
///   attempt mark (`a.<slug>`), as the runner leaves them;
/// - the `pending` slugs are one final release batch, pre-apply tier, every
///   3rd requiring a recorded slug.
#[derive(Debug, Clone)]
pub struct PlanInput {
    /// Entries in the ledger (legacy ones included).
    pub recorded: usize,
    /// Migrations not yet run.
    pub pending: usize,
    /// The raw tree files (order.d included).
    pub files: TreeFiles,
    /// The validated tree.
    pub tree: MigrationsTree,
    /// The manifest files, `(name, bytes)`.
    pub order_files: Vec<(String, Vec<u8>)>,
    /// The ledger data, `key → value`, sorted by key as a ConfigMap returns it.
    pub ledger_data: Vec<(String, String)>,
}

impl PlanInput {
    /// Builds the input (see the type's documentation).
    ///
    /// # Panics
    /// If `recorded < LEGACY` or the generator produced an invalid tree.
    pub fn build(recorded: usize, pending: usize) -> Self {
        assert!(
            recorded >= LEGACY,
            "the legacy map alone has {LEGACY} slugs"
        );
        let total = recorded + pending;
        let lib_files = vec![(
            "helpers.sh".to_owned(),
            b"# shared helpers\nlog() { echo \"$*\"; }\n".to_vec(),
        )];
        let lib_sha = {
            let mut d = migration_core::digest::LibDigest::new();
            for (p, b) in &lib_files {
                d.add_file(p.clone(), b.clone());
            }
            d.finish()
        };
        let mut kinds = Vec::with_capacity(total);
        let mut batch_of = Vec::with_capacity(total);
        let release_batches = (recorded - LEGACY).div_ceil(BATCH_SIZE);
        for i in 0..total {
            let (kind, batch) = if i < LEGACY {
                (Kind::Legacy, 0)
            } else if i < recorded {
                let j = i - LEGACY;
                let kind = if j % 100 == 7 {
                    Kind::Revoked
                } else if j % 50 == 13 {
                    Kind::Retired
                } else if j % 200 == 99 {
                    Kind::Failed
                } else {
                    Kind::Recorded
                };
                (kind, 1 + j / BATCH_SIZE)
            } else {
                (Kind::Pending, release_batches + 1)
            };
            kinds.push(kind);
            batch_of.push(batch);
        }
        let slugs: Vec<Slug> = (0..total).map(slug).collect();
        let batch_name = |b: usize| {
            if b == 0 {
                "00000-legacy".to_owned()
            } else {
                format!("{b:05}-{}", release_label(b))
            }
        };

        let mut files = TreeFiles {
            lib: lib_files,
            ..TreeFiles::default()
        };
        let mut rng = Rng::new(0xB3AC4);
        let mut ledger: BTreeMap<String, String> = BTreeMap::new();
        ledger.insert("version".into(), (LEGACY + 1).to_string());
        let mut revoked = String::from("# revoked before they ran anywhere\n");
        let mut legacy_map = String::new();
        let mut order: BTreeMap<usize, Vec<(Slug, bool)>> = BTreeMap::new();
        for i in 0..total {
            let s = &slugs[i];
            let kind = kinds[i];
            let batch = batch_of[i];
            let tier = if kind != Kind::Pending && i >= LEGACY && (i - LEGACY) % 5 == 4 {
                Tier::Background
            } else {
                Tier::PreApply
            };
            // requires: a slug of an earlier batch recorded `ok` (so that the
            // runner scenarios never meet an unmet requirement).
            let mut requires = Vec::new();
            let wants = match kind {
                Kind::Pending => (i - recorded).is_multiple_of(3),
                Kind::Legacy => false,
                _ => (i - LEGACY) % 10 == 3 && batch > 1,
            };
            if wants {
                let earlier_end = if kind == Kind::Pending {
                    recorded
                } else {
                    LEGACY + (batch - 1) * BATCH_SIZE
                };
                let mut t = LEGACY + rng.below(earlier_end - LEGACY);
                // A pre-apply script cannot require a background one (a
                // tree error): step back past those too.
                let background =
                    |t: usize| kinds[t] != Kind::Pending && t >= LEGACY && (t - LEGACY) % 5 == 4;
                while matches!(kinds[t], Kind::Revoked | Kind::Retired | Kind::Failed)
                    || (tier == Tier::PreApply && background(t))
                {
                    t -= 1;
                }
                requires.push(slugs[t].clone());
            }
            let on_error = if i % 4 == 0 { "warn" } else { "abort" };
            let bytes = script_bytes(s, tier, on_error, &requires);
            let sha = Sha256Digest::of(&bytes);
            order
                .entry(batch)
                .or_default()
                .push((s.clone(), kind == Kind::Retired));
            if kind != Kind::Retired {
                files.scripts.push((tier, s.to_string(), bytes));
            }
            let at = epoch().plus(std::time::Duration::from_secs(i as u64 * 7));
            let name = batch_name(batch);
            let entry = match kind {
                Kind::Pending => None,
                Kind::Legacy => {
                    legacy_map.push_str(&format!("{} {s}\n", i + 1));
                    Some(LedgerEntry {
                        batch: Some(name),
                        ..LedgerEntry::new(EntryState::Legacy, at)
                    })
                }
                Kind::Revoked => {
                    revoked.push_str(&format!("{s}\n"));
                    Some(LedgerEntry {
                        batch: Some(name),
                        ..LedgerEntry::new(EntryState::Revoked, at)
                    })
                }
                Kind::Failed => Some(LedgerEntry {
                    state: EntryState::Failed,
                    reason: Some("exit-status-1".into()),
                    message: Some(format!(
                        "{s}: error: the server doesn't have a resource type \"widgets\"\n{s}: giving up"
                    )),
                    ..ok_entry(sha, lib_sha, &name, at)
                }),
                Kind::Recorded | Kind::Retired => Some(ok_entry(sha, lib_sha, &name, at)),
            };
            if let Some(entry) = entry {
                if matches!(kind, Kind::Recorded | Kind::Retired | Kind::Failed) {
                    ledger.insert(format!("a.{s}"), attempt_mark(s, at).encode());
                }
                ledger.insert(migration_core::keys::entry_key(s), entry.encode());
            }
        }
        files.revoked = Some(revoked.into_bytes());
        files.legacy_map = Some(legacy_map.into_bytes());
        let order_files: Vec<(String, Vec<u8>)> = order
            .into_iter()
            .map(|(b, mut lines)| {
                // Within a release batch: alphabetical (requires point to
                // earlier batches, so no reordering is needed). The legacy
                // batch keeps integer order.
                if b != 0 {
                    lines.sort();
                }
                let mut text = String::new();
                for (s, retired) in lines {
                    text.push_str(s.as_str());
                    if retired {
                        text.push_str(" retired");
                    }
                    text.push('\n');
                }
                (batch_name(b), text.into_bytes())
            })
            .collect();
        files.order = Some(order_files.clone());
        let tree = MigrationsTree::from_files(PathBuf::from("/bench/migrations"), files.clone())
            .expect("the generated tree is valid");
        PlanInput {
            recorded,
            pending,
            files,
            tree,
            order_files,
            ledger_data: ledger.into_iter().collect(),
        }
    }

    /// The ledger data as borrowed pairs.
    pub fn data(&self) -> impl Iterator<Item = (&str, &str)> {
        self.ledger_data
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// The ledger snapshot (what a backend's `read` returns).
    pub fn snapshot(&self) -> LedgerSnapshot {
        LedgerSnapshot::from_raw_data(self.data(), Some("4242".into()))
    }

    /// The floor: parsing the manifest files and the ledger values, which
    /// any planner must do. Takes the files by value as `parse_files` does.
    pub fn parse_floor(
        files: Vec<(String, Vec<u8>)>,
        data: &[(String, String)],
    ) -> (Manifest, LedgerSnapshot) {
        let manifest = Manifest::parse_files(files).expect("the generated manifest is valid");
        let snapshot = LedgerSnapshot::from_raw_data(
            data.iter().map(|(k, v)| (k.as_str(), v.as_str())),
            Some("4242".into()),
        );
        (manifest, snapshot)
    }

    /// The request the hook runner makes: the pre-apply tier.
    pub fn request() -> PlanRequest {
        PlanRequest::tier(Tier::PreApply)
    }

    /// The context the hook runner plans with.
    pub fn context() -> PlanContext {
        PlanContext {
            image: Some(image()),
            ..PlanContext::at(epoch().plus(std::time::Duration::from_secs(86_400 * 365)))
        }
    }

    /// Writes the tree (scripts, lib, lists, order.d) under `root`.
    ///
    /// # Errors
    /// On any I/O error.
    pub fn write_to(&self, root: &Path) -> std::io::Result<()> {
        for tier in Tier::ALL {
            std::fs::create_dir_all(root.join(tier.as_str()))?;
        }
        std::fs::create_dir_all(root.join("lib"))?;
        std::fs::create_dir_all(root.join("order.d"))?;
        for (tier, name, bytes) in &self.files.scripts {
            std::fs::write(root.join(tier.as_str()).join(name), bytes)?;
        }
        for (name, bytes) in &self.files.lib {
            std::fs::write(root.join("lib").join(name), bytes)?;
        }
        if let Some(b) = &self.files.revoked {
            std::fs::write(root.join("revoked"), b)?;
        }
        if let Some(b) = &self.files.legacy_map {
            std::fs::write(root.join("legacy-map"), b)?;
        }
        for (name, bytes) in &self.order_files {
            std::fs::write(root.join("order.d").join(name), bytes)?;
        }
        Ok(())
    }
}

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
    fn the_plan_input_plans_exactly_the_pending_migrations() {
        let input = PlanInput::build(300, 10);
        let snapshot = input.snapshot();
        let plan = migration_core::plan(
            &input.tree,
            Some(&snapshot),
            &PlanInput::request(),
            &PlanInput::context(),
        )
        .unwrap();
        assert_eq!(plan.pending.len(), 10);
        assert!(plan.seed.is_empty());
        assert!(plan.checksum_mismatches.is_empty());
        assert_eq!(snapshot.records.len(), 300);
        assert!(snapshot.unreadable_keys.is_empty());
    }

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
