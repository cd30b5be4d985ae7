//! What generation reads: the scripts of each release tag of the line, of
//! the other tags, and of the working tree, and how consecutive tags differ.

use std::collections::BTreeMap;
use std::fmt;

use crate::digest::Sha256Digest;
use crate::header::Tier;
use crate::slug::Slug;
use crate::tree::{LegacyPair, MigrationsTree};

/// What generation needs to know about one script at one place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScriptInfo {
    /// Its tier.
    pub tier: Tier,
    /// SHA-256 of its bytes.
    pub sha256: Sha256Digest,
    /// Its `requires` targets.
    pub requires: Vec<Slug>,
}

/// The migration scripts of one release tag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TagTree {
    /// The tag name, which becomes the batch label.
    pub tag: String,
    /// Its scripts under `pre-apply/` and `background/`.
    pub scripts: BTreeMap<Slug, ScriptInfo>,
}

/// Everything generation reads.
#[derive(Debug, Clone, Default)]
pub struct ReleaseHistory {
    /// Tags of this release line (reachable from the commit being built), in
    /// semantic-version order.
    pub line: Vec<TagTree>,
    /// Every other release tag of the repository, any order: only the
    /// immutability guard reads them.
    pub other_tags: Vec<TagTree>,
    /// The scripts on disk now.
    pub disk: BTreeMap<Slug, ScriptInfo>,
    /// The legacy map, in integer order.
    pub legacy: Vec<Slug>,
    /// The `legacy-map` of each place that has one, for the guard: line
    /// tags in order, other tags, then the working tree ([`Place::Disk`];
    /// without it only tags are compared with one another).
    pub legacy_maps: Vec<LegacyMapAt>,
}

/// The `legacy-map` lines of one place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LegacyMapAt {
    /// A tag or the working tree.
    pub place: Place,
    /// Its lines.
    pub pairs: Vec<LegacyPair>,
}

impl ReleaseHistory {
    /// The on-disk part of a history, taken from a loaded tree.
    pub fn disk_from_tree(tree: &MigrationsTree) -> BTreeMap<Slug, ScriptInfo> {
        tree.scripts()
            .iter()
            .map(|(slug, s)| {
                let info = ScriptInfo {
                    tier: s.tier,
                    sha256: s.sha256,
                    requires: s.header.requires.iter().map(|r| r.target.clone()).collect(),
                };
                (slug.clone(), info)
            })
            .collect()
    }

    /// The legacy slugs of a tree, in integer order.
    pub fn legacy_from_pairs(pairs: &[LegacyPair]) -> Vec<Slug> {
        let mut sorted: Vec<&LegacyPair> = pairs.iter().collect();
        sorted.sort_by_key(|p| p.number);
        sorted.into_iter().map(|p| p.slug.clone()).collect()
    }
}

/// Where a script's content was seen.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Place {
    /// In a release tag.
    Tag(String),
    /// In the working tree being built.
    Disk,
}

impl fmt::Display for Place {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Place::Tag(t) => write!(f, "tag {t}"),
            Place::Disk => f.write_str("the working tree"),
        }
    }
}

/// How a script of a line tag relates to the previous tag of the line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum SincePrevious {
    /// The previous tag does not have the slug (or there is none).
    New,
    /// The previous tag has the slug with other content.
    Changed,
    /// The previous tag has the slug with the same content.
    Same,
}

/// The scripts of `current`, each with how it relates to `previous`: one
/// merge walk over the two sorted maps, no lookups. Consecutive tags share
/// almost all their scripts, so this replaces a hash lookup per (tag, slug)
/// pair with a sequential comparison.
pub(super) fn since_previous<'a>(
    previous: Option<&'a TagTree>,
    current: &'a TagTree,
) -> impl Iterator<Item = (&'a Slug, &'a ScriptInfo, SincePrevious)> + 'a {
    let mut previous = previous.map(|p| p.scripts.iter().peekable());
    current.scripts.iter().map(move |(slug, info)| {
        let since = match previous.as_mut() {
            None => SincePrevious::New,
            Some(prev) => {
                while prev.next_if(|(p, _)| *p < slug).is_some() {}
                match prev.next_if(|(p, _)| *p == slug) {
                    Some((_, p)) if p.sha256 == info.sha256 => SincePrevious::Same,
                    Some(_) => SincePrevious::Changed,
                    None => SincePrevious::New,
                }
            }
        };
        (slug, info, since)
    })
}
