//! Slot divergence: where one integer held different contents on different
//! lines or tags, each content gets its own slug, and the legacy map says
//! which of them this line's clusters may have run (ADOPTING.md,
//! "Diverged slots"; CONTRACT.md §6.2).

use std::collections::BTreeMap;

use migration_core::line_file::decimal;
use migration_core::{Sha256Digest, Slug};
use serde::Serialize;

use super::ConvertError;
use super::history::History;

/// One content a slot held.
#[derive(Debug, Clone, Serialize)]
pub struct Variant {
    /// Its slug: the bare integer when the slot never diverged, else
    /// `<N>-<first tag>` (`42-v1-5-0`), or `<N>-untagged-<8 hex>` for
    /// content no tag holds.
    pub slug: Slug,
    /// SHA-256 of the numbered script's bytes (before conversion).
    pub sha256: String,
    /// The tags holding this content, in version order.
    pub tags: Vec<String>,
    /// Whether the working tree holds it (it is the converted script).
    pub on_disk: bool,
}

/// What conversion makes of one integer.
#[derive(Debug, Clone, Serialize)]
pub struct SlotPlan {
    /// The integer.
    pub number: u64,
    /// Every content it held, in order of first appearance.
    pub variants: Vec<Variant>,
    /// Index in `variants` of the working tree's content.
    #[serde(skip)]
    pub disk: usize,
    /// Slugs of the other contents a cluster upgraded by this tree may have
    /// run at this integer (held by a tag no newer than the line's newest,
    /// and by a final release unless pre-releases count): the `others=` of
    /// its legacy-map line.
    pub others: Vec<Slug>,
}

impl SlotPlan {
    /// The slug the converted script gets.
    pub fn slug(&self) -> &Slug {
        &self.variants[self.disk].slug
    }

    /// The slot's `legacy-map` line.
    pub fn legacy_line(&self) -> String {
        let mut line = format!("{} {}", self.number, self.slug());
        if !self.others.is_empty() {
            let others: Vec<&str> = self.others.iter().map(Slug::as_str).collect();
            line.push_str(&format!(" others={}", others.join(",")));
        }
        line
    }
}

/// Each line of `text` with its number (from 1), as it is, and its words
/// with a `#` comment cut off: the two files below are read alike.
fn numbered_words(text: &str) -> impl Iterator<Item = (usize, &str, Vec<&str>)> {
    text.lines().enumerate().map(|(i, raw)| {
        let uncommented = raw.split('#').next().unwrap_or("");
        (i + 1, raw, uncommented.split_whitespace().collect())
    })
}

/// `--release-targets FILE`: `TAG TARGET` lines (`#` comments, blank
/// lines), the numbered runner's target at each release tag. Convert
/// cannot read it from the tags itself: where a platform keeps it (a chart
/// value, a computed count) is its own, and a release may ship a script its
/// target does not reach yet (a backport waiting for its counter), so
/// "the release holds slot N" does not say "an upgrade to it ran N".
#[derive(Debug, Clone, Default)]
pub struct ReleaseTargets {
    /// The file as given, for messages.
    file: String,
    /// Target and line, by tag.
    entries: BTreeMap<String, (u64, usize)>,
}

impl ReleaseTargets {
    /// Parses the file; `file` names it in errors. Every bad line is
    /// reported with its line: not `TAG TARGET`, a target that is no
    /// decimal integer, a tag given twice.
    pub fn parse(file: &str, text: &str) -> Result<Self, ConvertError> {
        let mut entries: BTreeMap<String, (u64, usize)> = BTreeMap::new();
        let mut problems = Vec::new();
        for (line, raw, words) in numbered_words(text) {
            match words.as_slice() {
                [] => {}
                [tag, n] => match decimal(n) {
                    Some(target) => {
                        if let Some((_, first)) = entries.get(*tag) {
                            problems.push(format!(
                                "{file}:{line}: {tag} is given already on line {first}"
                            ));
                        } else {
                            entries.insert((*tag).to_owned(), (target, line));
                        }
                    }
                    None => problems.push(format!(
                        "{file}:{line}: target {n:?} is not a decimal integer"
                    )),
                },
                _ => problems.push(format!(
                    "{file}:{line}: expected 'TAG TARGET' (a release tag, then the numbered runner's target there), found {:?}",
                    raw.trim()
                )),
            }
        }
        if problems.is_empty() {
            Ok(ReleaseTargets {
                file: file.to_owned(),
                entries,
            })
        } else {
            Err(ConvertError::ReleaseTargets { problems })
        }
    }
}

/// The `legacy-releases` file (`migration_core::seeding::RELEASES_FILE`):
/// for every tag read, the runner's target there (when `targets` names
/// it) and the content of each diverged slot it held. A slug names only
/// the first tag of its content, so without it nothing could map a release
/// a cluster went through (its Helm history) to the content it ran
/// (`migrate adopt --helm-history`). `None` when no slot diverged: there is
/// nothing to answer. Refused: a `targets` line naming a tag that was not
/// read (a typo would silently leave that tag without its target).
pub fn legacy_releases(
    history: &History,
    plans: &[SlotPlan],
    targets: &ReleaseTargets,
) -> Result<Option<String>, ConvertError> {
    let read: Vec<&str> = history
        .tags
        .iter()
        .filter_map(|t| t.tag.as_deref())
        .collect();
    let unknown: Vec<String> = targets
        .entries
        .iter()
        .filter(|(tag, _)| !read.contains(&tag.as_str()))
        .map(|(tag, (_, line))| {
            format!(
                "{}:{line}: {tag} is no release tag convert read (--tag-pattern)",
                targets.file
            )
        })
        .collect();
    if !unknown.is_empty() {
        return Err(ConvertError::ReleaseTargets { problems: unknown });
    }
    let diverged: Vec<&SlotPlan> = plans.iter().filter(|p| p.variants.len() > 1).collect();
    if diverged.is_empty() {
        return Ok(None);
    }
    let lines: Vec<(&str, Option<u64>, BTreeMap<u64, Slug>)> = read
        .iter()
        .map(|tag| {
            let contents = diverged
                .iter()
                .filter_map(|p| {
                    p.variants
                        .iter()
                        .find(|v| v.tags.iter().any(|t| t == tag))
                        .map(|v| (p.number, v.slug.clone()))
                })
                .collect();
            (*tag, targets.entries.get(*tag).map(|(t, _)| *t), contents)
        })
        .collect();
    Ok(Some(migration_core::seeding::LegacyReleases::render(
        lines.iter().map(|(t, target, c)| (*t, *target, c)),
    )))
}

/// The slug the converted script of `plans[i]` requires: the nearest
/// slot before it that never diverged. A diverged slot's slug is its own
/// line's content, so requiring it would make one script's bytes differ
/// between release lines converted apart (and the immutability guard fail
/// on both for good); a slot that held one content is named alike on
/// every line. The cost: a diverged slot answering "not yet" does not hold
/// back the slot after it.
pub fn chain_target(plans: &[SlotPlan], i: usize) -> Option<&Slug> {
    plans[..i]
        .iter()
        .rev()
        .find(|p| p.variants.len() == 1)
        .map(SlotPlan::slug)
}

/// A `--slug-map` file: `N SLUG` lines (`#` comments, blank lines), each
/// naming the converted script of slot `N` by what it does instead of by
/// its integer (`1 mariadb-operator-secrets`). A diverged slot's contents
/// are then `SLUG-<first tag>`, so every line converted apart with the same
/// map still gives each content the same slug.
#[derive(Debug, Clone, Default)]
pub struct SlugMap {
    /// The file as given, for messages.
    file: String,
    /// Slug and line, by slot.
    entries: BTreeMap<u64, (Slug, usize)>,
}

impl SlugMap {
    /// Parses a slug map; `file` names it in errors. Every bad line is
    /// reported, each with its line: not `N SLUG`, an integer with a
    /// leading zero, a slug that is not a slug, a slot mapped twice, one
    /// slug given to two slots.
    pub fn parse(file: &str, text: &str) -> Result<SlugMap, ConvertError> {
        let mut entries: BTreeMap<u64, (Slug, usize)> = BTreeMap::new();
        let mut problems = Vec::new();
        for (line, raw, words) in numbered_words(text) {
            if words.is_empty() {
                continue;
            }
            let mut bad = |why: String| problems.push(format!("{file}:{line}: {why}"));
            let number = match words.as_slice() {
                [n, _] => decimal(n),
                _ => None,
            };
            let Some(number) = number else {
                bad(format!(
                    "expected 'N SLUG' (a numbered script's integer, then its new slug), found {:?}",
                    raw.trim()
                ));
                continue;
            };
            let slug = match Slug::parse(words[1]) {
                Ok(slug) => slug,
                Err(e) => {
                    bad(format!("{:?} is not a valid slug: {e}", words[1]));
                    continue;
                }
            };
            if let Some((_, first)) = entries.get(&number) {
                bad(format!("slot {number} is mapped twice (line {first})"));
                continue;
            }
            if let Some((n, (_, first))) = entries.iter().find(|(_, (s, _))| *s == slug) {
                bad(format!(
                    "'{slug}' is already given to slot {n} (line {first})"
                ));
                continue;
            }
            entries.insert(number, (slug, line));
        }
        if problems.is_empty() {
            Ok(SlugMap {
                file: file.to_owned(),
                entries,
            })
        } else {
            Err(ConvertError::SlugMap { problems })
        }
    }

    /// The problem of an entry, naming the file and its line.
    fn problem(&self, line: usize, why: String) -> String {
        format!("{}:{line}: {why}", self.file)
    }
}

/// Analyses every slot of the working tree against the history.
///
/// Refused: a numbered slot missing on disk between the lowest and highest
/// one, or a slot a tag of this line shipped that the disk no longer holds
/// (either would leave an integer below some cluster's `version` with no
/// slug to record it).
pub fn analyse(history: &History, map: &SlugMap) -> Result<Vec<SlotPlan>, ConvertError> {
    let disk = &history.disk;
    let (Some(&low), Some(&high)) = (disk.slots.keys().next(), disk.slots.keys().next_back())
    else {
        return Err(ConvertError::NoSlots);
    };
    let unknown: Vec<String> = map
        .entries
        .iter()
        .filter(|(n, _)| !disk.slots.contains_key(n))
        .map(|(n, (_, line))| {
            map.problem(
                *line,
                format!("slot {n} is not a numbered script of the directory"),
            )
        })
        .collect();
    if !unknown.is_empty() {
        return Err(ConvertError::SlugMap { problems: unknown });
    }
    for n in low..=high {
        if !disk.slots.contains_key(&n) {
            return Err(ConvertError::Gap {
                number: n,
                tags: tags_holding(history, n),
            });
        }
    }
    for tag in history.tags.iter().filter(|t| t.on_line) {
        if let Some(&n) = tag.slots.keys().find(|n| !disk.slots.contains_key(n)) {
            return Err(ConvertError::Gap {
                number: n,
                tags: tags_holding(history, n),
            });
        }
    }
    // Tags a cluster upgraded by this tree can have run: none newer than
    // the line's newest tag (no downgrades); every tag when the line has none.
    let newest = history.newest_line_tag().and_then(|t| t.version.clone());
    let reachable = |v: &Option<migration_core::version::Version>| match (&newest, v) {
        (Some(newest), Some(v)) => v <= newest,
        _ => true,
    };
    let mut plans = Vec::new();
    for (&number, bytes) in &disk.slots {
        let mut order: Vec<Sha256Digest> = Vec::new();
        let mut seen: BTreeMap<Sha256Digest, (Vec<String>, bool, bool)> = BTreeMap::new();
        for tag in &history.tags {
            if let Some(b) = tag.slots.get(&number) {
                let d = Sha256Digest::of(b);
                let entry = seen.entry(d).or_insert_with(|| {
                    order.push(d);
                    (Vec::new(), false, false)
                });
                entry.0.push(tag.tag.clone().unwrap_or_default());
                // A content only pre-releases held is no candidate for
                // production clusters unless the maintainer says clusters
                // ran pre-releases (`--count-prereleases`).
                let counts = history.prereleases_ran
                    || !tag
                        .tag
                        .as_deref()
                        .is_some_and(super::history::is_prerelease);
                entry.2 |= reachable(&tag.version) && counts;
            }
        }
        let disk_digest = Sha256Digest::of(bytes);
        let entry = seen.entry(disk_digest).or_insert_with(|| {
            order.push(disk_digest);
            (Vec::new(), false, false)
        });
        entry.1 = true;
        let diverged = order.len() > 1;
        let mut variants = Vec::new();
        let mut disk_index = 0;
        let mut others = Vec::new();
        for d in &order {
            let (tags, on_disk, reached) = &seen[d];
            let base = map
                .entries
                .get(&number)
                .map_or_else(|| number.to_string(), |(slug, _)| slug.to_string());
            let name = if !diverged {
                base
            } else if let Some(first) = tags.first() {
                format!("{base}-{}", label(first))
            } else {
                format!("{base}-untagged-{}", &d.to_string()[..8])
            };
            let slug = Slug::parse(&name).map_err(|e| ConvertError::BadSlug {
                number,
                name: name.clone(),
                reason: e.to_string(),
            })?;
            if *on_disk {
                disk_index = variants.len();
            } else if *reached {
                others.push(slug.clone());
            }
            variants.push(Variant {
                slug,
                sha256: d.to_string(),
                tags: tags.clone(),
                on_disk: *on_disk,
            });
        }
        plans.push(SlotPlan {
            number,
            variants,
            disk: disk_index,
            others,
        });
    }
    unique_slugs(&plans, map)?;
    Ok(plans)
}

/// Refuses a mapped slug that another slot's content also has (`1 2`
/// while slot 2 keeps `2`): one slug would name two contents.
fn unique_slugs(plans: &[SlotPlan], map: &SlugMap) -> Result<(), ConvertError> {
    let mut owner: BTreeMap<&Slug, u64> = BTreeMap::new();
    let mut problems = Vec::new();
    for plan in plans {
        for v in &plan.variants {
            match owner.get(&v.slug) {
                Some(&other) if other != plan.number => {
                    // Name the map line that made the clash.
                    let (mapped, kept) = if map.entries.contains_key(&plan.number) {
                        (plan.number, other)
                    } else {
                        (other, plan.number)
                    };
                    let line = map.entries.get(&mapped).map_or(0, |(_, l)| *l);
                    problems.push(map.problem(
                        line,
                        format!(
                            "'{}' is the slug slot {kept} keeps; slot {mapped} needs another",
                            v.slug
                        ),
                    ));
                }
                _ => {
                    owner.insert(&v.slug, plan.number);
                }
            }
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(ConvertError::SlugMap { problems })
    }
}

/// The tags that hold slot `n`, for an error message.
fn tags_holding(history: &History, n: u64) -> Vec<String> {
    history
        .tags
        .iter()
        .filter(|t| t.slots.contains_key(&n))
        .filter_map(|t| t.tag.clone())
        .collect()
}

/// A tag as slug words: lower case, every run of other characters one `-`.
fn label(tag: &str) -> String {
    let mut out = String::new();
    for c in tag.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('-') && !out.is_empty() {
            out.push('-');
        }
    }
    out.trim_end_matches('-').to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tag_becomes_slug_words() {
        assert_eq!(label("v1.6.0-rc.1"), "v1-6-0-rc-1");
        assert_eq!(label("V2.0.0+build.7"), "v2-0-0-build-7");
    }
}
