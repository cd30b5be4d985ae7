//! Why a plan refuses: every fatal condition, each naming what to fix.

use crate::header::Tier;
use crate::slug::Slug;

/// A fatal condition: the plan refuses and nothing runs.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Refusal {
    /// `order.d/` has not been generated.
    #[error("no manifest: {root}/order.d does not exist (generate it with 'migrate manifest')")]
    NoManifest {
        /// The tree root.
        root: String,
    },
    /// A script on disk that no batch lists (the manifest is stale).
    #[error("{path}: slug '{slug}' is on disk but in no manifest batch (regenerate order.d)")]
    NotInManifest {
        /// The slug.
        slug: Slug,
        /// Its path.
        path: String,
    },
    /// A manifest slug, not retired, whose script is absent.
    #[error(
        "manifest {batch} lists '{slug}' but its script is absent (and the line is not 'retired')"
    )]
    ScriptMissing {
        /// The slug.
        slug: Slug,
        /// Its batch.
        batch: String,
    },
    /// A manifest line flagged retired whose script is present.
    #[error(
        "manifest {batch} flags '{slug}' retired but its script is on disk (regenerate order.d)"
    )]
    RetiredButPresent {
        /// The slug.
        slug: Slug,
        /// Its batch.
        batch: String,
    },
    /// A legacy-map slug the manifest does not list.
    #[error("legacy-map line {line} maps {number} to '{slug}', which is in no manifest batch")]
    LegacyNotInManifest {
        /// The slug.
        slug: Slug,
        /// The integer.
        number: u64,
        /// Line in legacy-map.
        line: usize,
    },
    /// A diverged legacy slot below `version`, marked `unsafe-to-repeat`,
    /// with no record of any of its contents: the integer alone cannot say
    /// which one ran here, and this tree's content must not run twice.
    #[error(
        "ledger 'version' {version} says integer {number} ran, but the numbered runner held different contents there ('{slug}', {}) and legacy-map marks them unsafe-to-repeat; no entry records which one ran on this cluster, so none is assumed and none runs again: record the one that ran ('migrate adopt --legacy-version {version} --ran SLUG' on a new ledger, or an entry 'legacy' for its slug) and run again",
        others.iter().map(|o| format!("'{o}'")).collect::<Vec<_>>().join(", ")
    )]
    DivergedLegacySlot {
        /// The integer.
        number: u64,
        /// The ledger's `version`.
        version: u64,
        /// This tree's content at the integer.
        slug: Slug,
        /// The other contents.
        others: Vec<Slug>,
    },
    /// A revoked slug the manifest does not list: probably a typo.
    #[error("revoked line {line}: '{slug}' is in no manifest batch")]
    RevokedNotInManifest {
        /// The slug.
        slug: Slug,
        /// Line in `revoked`.
        line: usize,
    },
    /// An unreadable record on the path of this run.
    #[error(
        "ledger key '{key}' is corrupt ({reason}); refusing to act on '{slug}'; next step: `migrate repair TREE {slug} --rerun --reason WHY --ledger SPEC` replaces it (or `--done` if it ran), keeping the value in the entry's history"
    )]
    CorruptEntry {
        /// The slug.
        slug: Slug,
        /// The ledger key.
        key: String,
        /// Why it is corrupt.
        reason: String,
    },
    /// The `version` key is not an integer, so legacy seeding cannot be decided.
    #[error(
        "ledger 'version' value {raw:?} is not an integer; cannot decide which legacy migrations ran"
    )]
    CorruptVersion {
        /// The stored value.
        raw: String,
    },
    /// A retired slug this cluster never recorded: the cluster skipped the
    /// release window in which the script existed. `release` names the
    /// release to upgrade through (for a legacy script, the manifest's
    /// first release).
    #[error(
        "'{slug}' was retired but this cluster has no entry for it; {}",
        retention_advice(slug, release)
    )]
    RetentionFloor {
        /// The slug.
        slug: Slug,
        /// The release (batch label) that first shipped it.
        release: String,
    },
    /// A script whose shebang is not an allowed shell.
    #[error("{path}: shebang '#!{shebang}' is not an allowed interpreter (allowed: {allowed})")]
    InterpreterNotAllowed {
        /// The slug.
        slug: Slug,
        /// Its path.
        path: String,
        /// Its shebang.
        shebang: String,
        /// The allowed list.
        allowed: String,
    },
    /// A `requires` target placed after its dependent.
    #[error("'{slug}' requires '{target}', which the manifest places after it (in {target_batch})")]
    RequiresLater {
        /// The dependent.
        slug: Slug,
        /// The target.
        target: Slug,
        /// The target's batch.
        target_batch: String,
    },
    /// A `requires` target not in the manifest.
    #[error("'{slug}' requires '{target}', which is in no manifest batch")]
    RequiresUnknown {
        /// The dependent.
        slug: Slug,
        /// The target.
        target: Slug,
    },
    /// `ONLY` on a cluster with no ledger.
    #[error(
        "ONLY={slug}: the ledger does not exist yet; run without ONLY first (a fresh install seeds it)"
    )]
    OnlyWithoutLedger {
        /// The slug.
        slug: Slug,
    },
    /// `ONLY` naming a slug with no script on disk.
    #[error("ONLY={slug}: no script with that slug is in the tree{}", if *retired { " (it is retired)" } else { "" })]
    OnlyNotInTree {
        /// The slug.
        slug: Slug,
        /// It is a retired manifest slug.
        retired: bool,
    },
    /// `ONLY` naming a revoked slug.
    #[error("ONLY={slug}: the slug is revoked and must never run")]
    OnlyRevoked {
        /// The slug.
        slug: Slug,
    },
    /// `ONLY` naming a slug of the other tier.
    #[error("ONLY={slug}: the slug is in the {actual} tier, not {requested}")]
    OnlyWrongTier {
        /// The slug.
        slug: Slug,
        /// Its tier.
        actual: Tier,
        /// The tier requested.
        requested: Tier,
    },
}

/// The plan refused: every fatal problem found, nothing ran or was written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("refusing to run: {} problem(s):\n{}", problems.len(), problems.iter().map(|p| format!("  {p}")).collect::<Vec<_>>().join("\n"))]
pub struct PlanError {
    /// Every fatal problem.
    pub problems: Vec<Refusal>,
}

/// What a cluster below the retention floor can do: upgrade through the
/// release that shipped the script, or, when it first shipped in a
/// pre-release (which may be all it ever shipped in, and which a
/// production cluster does not install), revoke it.
fn retention_advice(slug: &Slug, release: &str) -> String {
    let pre_release = crate::version::Version::parse(release).is_some_and(|v| v.is_prerelease());
    if pre_release {
        format!(
            "it first shipped in the pre-release {release}. If a release after it still shipped the script, upgrade through that release first; if it only ever shipped in pre-releases, no production cluster can run it: revoke it: add '{slug}' to the tree's revoked file, and clusters record it 'revoked'"
        )
    } else {
        format!("upgrade through {release} (which still ships the script) first")
    }
}
