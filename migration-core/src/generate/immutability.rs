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
