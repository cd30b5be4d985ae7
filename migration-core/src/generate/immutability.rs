//! The immutability guard: a shipped slug never changes content, in any
//! tag of any line or in the working tree.

use std::collections::{BTreeMap, HashMap};

use super::history::{SincePrevious, since_previous};
use super::{GenerateProblem, Place, ReleaseHistory};
use crate::digest::Sha256Digest;
use crate::slug::Slug;

/// Same slug, different content, anywhere: every offending slug once, with
/// the first two places that disagree.
pub(super) fn immutability_problems(history: &ReleaseHistory) -> Vec<GenerateProblem> {
    // Places are kept as borrowed tag names until a problem is reported:
    // every (tag, slug) pair passes through here, so allocating a `Place`
    // per pair dominated generation. `seen` is hashed (one lookup per pair);
    // `reported` stays sorted, which orders the problems by slug.
    let mut seen: HashMap<&Slug, (Option<&str>, Sha256Digest)> = HashMap::new();
    let mut reported: BTreeMap<&Slug, GenerateProblem> = BTreeMap::new();
    let place = |tag: Option<&str>| tag.map_or(Place::Disk, |t| Place::Tag(t.to_owned()));
    // A line tag's entry identical to the previous line tag's was already
    // compared when that tag was walked: skipping it changes nothing.
    let line = history.line.iter().enumerate().flat_map(|(i, t)| {
        let previous = i.checked_sub(1).map(|p| &history.line[p]);
        since_previous(previous, t)
            .filter(|(_, _, since)| *since != SincePrevious::Same)
            .map(move |(s, info, _)| (Some(t.tag.as_str()), s, info.sha256))
    });
    let places = line
        .chain(history.other_tags.iter().flat_map(|t| {
            t.scripts
                .iter()
                .map(move |(s, i)| (Some(t.tag.as_str()), s, i.sha256))
        }))
        .chain(history.disk.iter().map(|(s, i)| (None, s, i.sha256)));
    for (here, slug, sha) in places {
        match seen.get(slug) {
            None => {
                seen.insert(slug, (here, sha));
            }
            Some((first, first_sha)) if *first_sha != sha && !reported.contains_key(slug) => {
                reported.insert(
                    slug,
                    GenerateProblem::ContentChanged {
                        slug: slug.clone(),
                        first: place(*first),
                        first_sha: *first_sha,
                        second: place(here),
                        second_sha: sha,
                    },
                );
            }
            Some(_) => {}
        }
    }
    reported.into_values().collect()
}

/// Slugs a line tag retired (the previous line tag had the script, this one
/// does not) that a later line tag or the disk has again: the release
/// manifests since carry `<slug> retired`, and a shipped line never flips
/// back. Each slug once, naming the tag that retired it.
pub(super) fn retired_readded_problems(history: &ReleaseHistory) -> Vec<GenerateProblem> {
    let mut retired_in: BTreeMap<&Slug, &str> = BTreeMap::new();
    let mut reported: BTreeMap<&Slug, GenerateProblem> = BTreeMap::new();
    let report = |slug: &'_ Slug, tag: &str| GenerateProblem::RetiredReadded {
        slug: slug.clone(),
        retired_in: tag.to_owned(),
    };
    for pair in history.line.windows(2) {
        let (before, now) = (&pair[0], &pair[1]);
        for slug in now.scripts.keys() {
            if let Some(tag) = retired_in.get(slug) {
                reported.entry(slug).or_insert_with(|| report(slug, tag));
            }
        }
        for slug in before.scripts.keys() {
            if !now.scripts.contains_key(slug) {
                retired_in.entry(slug).or_insert(now.tag.as_str());
            }
        }
    }
    for slug in history.disk.keys() {
        if let Some(tag) = retired_in.get(slug) {
            reported.entry(slug).or_insert_with(|| report(slug, tag));
        }
    }
    reported.into_values().collect()
}
