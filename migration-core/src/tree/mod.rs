//! Loading a migrations tree from disk (CONTRACT.md §3).
//!
//! ```text
//! migrations/
//!   pre-apply/<slug>   background/<slug>   lib/   revoked   legacy-map   order.d/
//! ```
//!
//! Loading is all-or-nothing: every content problem in the tree is collected
//! and returned together, so a broken tree can never be half-used.
//!
//! - `load`: reading the files from disk ([`MigrationsTree::load`]);
//! - `files`: validating raw [`TreeFiles`], whatever their source
//!   ([`MigrationsTree::from_files`]);
//! - `tier`: reading and checking a tier directory's scripts, on a few
//!   threads when there are many;
//! - `lists`: the `revoked` and `legacy-map` list files;
//! - `problems`: what can be wrong ([`TreeProblem`], [`TreeError`]);
//! - [`supplied`]: the one way every file a tree or a flag supplies is read
//!   (regular files only, a size bound, one rule for symlinks).

mod files;
mod lists;
mod load;
mod problems;
mod reader;
pub mod supplied;
mod tier;

pub use files::TreeFiles;
pub use lists::{LegacyPair, RevokedSlug, parse_legacy_map, parse_revoked};
pub use problems::{TreeError, TreeProblem};
pub use reader::LoadOptions;

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};

use crate::digest::Sha256Digest;
use crate::header::{Header, Tier};
use crate::manifest::Manifest;
use crate::slug::Slug;

/// Name of the shared-helpers directory.
pub const LIB_DIR: &str = "lib";
/// Name of the revocation list.
pub const REVOKED_FILE: &str = "revoked";
/// Name of the legacy integer map.
pub const LEGACY_MAP_FILE: &str = "legacy-map";
/// Name of the generated manifest directory.
pub const ORDER_DIR: &str = "order.d";
/// File names tolerated (and ignored) inside tier directories, because git
/// cannot keep an empty directory without one.
pub const PLACEHOLDER_FILES: [&str; 2] = [".gitkeep", ".keep"];

/// One migration script on disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Script {
    /// Its identity (the file name).
    pub slug: Slug,
    /// Its tier (the directory, equal to the header's).
    pub tier: Tier,
    /// The parsed header.
    pub header: Header,
    /// SHA-256 of the script's bytes.
    pub sha256: Sha256Digest,
    /// Size in bytes.
    pub len: u64,
}

impl Script {
    /// Path relative to the tree root, e.g. `pre-apply/redis-fix` (the
    /// tier directory, then the slug, which is the file name). Built on
    /// each call rather than stored: a large tree holds many scripts.
    pub fn relative_path(&self) -> PathBuf {
        script_relative_path(self.tier, self.slug.as_str())
    }
}

/// `<tier>/<name>` in one allocation (`PathBuf::from(tier).join(name)`
/// would take two).
pub(crate) fn script_relative_path(tier: Tier, name: &str) -> PathBuf {
    let mut path = PathBuf::with_capacity(tier.as_str().len() + 1 + name.len());
    path.push(tier.as_str());
    path.push(name);
    path
}

/// A loaded, validated migrations tree.
#[derive(Debug, Clone)]
pub struct MigrationsTree {
    root: PathBuf,
    scripts: BTreeMap<Slug, Script>,
    lib_sha256: Sha256Digest,
    revoked: Vec<RevokedSlug>,
    /// The revoked slugs as a set: planning asks once per manifest line.
    revoked_set: HashSet<Slug>,
    legacy_map: Vec<LegacyPair>,
    manifest: Option<Manifest>,
}

impl MigrationsTree {
    /// The tree root (canonical).
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Every script, by slug.
    pub fn scripts(&self) -> &BTreeMap<Slug, Script> {
        &self.scripts
    }

    /// The script for `slug`, if it is on disk.
    pub fn script(&self, slug: &Slug) -> Option<&Script> {
        self.scripts.get(slug)
    }

    /// Absolute path of a script.
    pub fn script_path(&self, script: &Script) -> PathBuf {
        self.root.join(script.relative_path())
    }

    /// Digest of `lib/` (algorithm [`crate::digest::LibDigest::ALGORITHM`]).
    pub fn lib_sha256(&self) -> Sha256Digest {
        self.lib_sha256
    }

    /// The revocation list, in file order.
    pub fn revoked(&self) -> &[RevokedSlug] {
        &self.revoked
    }

    /// The `revoked` lines naming a slug no batch of `manifest` lists: they
    /// revoke nothing, most often a typo (`plan` refuses them, `lint`
    /// reports them first; both ask here).
    pub fn revoked_outside<'a>(
        &'a self,
        manifest: &'a Manifest,
    ) -> impl Iterator<Item = &'a RevokedSlug> + 'a {
        self.revoked
            .iter()
            .filter(|r| manifest.position(&r.slug).is_none())
    }

    /// True when `slug` is revoked.
    pub fn is_revoked(&self, slug: &Slug) -> bool {
        self.revoked_set.contains(slug)
    }

    /// The legacy map, in ascending integer order.
    pub fn legacy_map(&self) -> &[LegacyPair] {
        &self.legacy_map
    }

    /// The manifest from `order.d/`, if it has been generated.
    pub fn manifest(&self) -> Option<&Manifest> {
        self.manifest.as_ref()
    }
}
