//! Deterministic inputs: trees, manifests, ledgers, release histories and
//! `requires` graphs of a given size. Same arguments, same bytes, every run.

use migration_core::ledger::AttemptMark;
use migration_core::testing::fixtures::NOW;
use migration_core::{EntryState, LedgerEntry, Sha256Digest, Slug, Tier, Timestamp};

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

mod history;
mod plan_input;

pub use history::{graph, history};
pub use plan_input::PlanInput;
