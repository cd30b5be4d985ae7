//! What a cluster can tell about the releases it went through, and what that
//! says about which content of a diverged legacy slot it ran (CONTRACT.md
//! §6.2, "Adoption from the cluster's history").
//!
//! Two inputs meet here. The tree's `legacy-releases` file (written by
//! `migrate convert`) says, for every release tag convert read, which
//! content of each diverged slot that tag held: slugs alone cannot say it
//! (a slug names the first tag of its content only), and the numbered
//! runner's target at the tag when the maintainer recorded it (a release
//! may ship a script its target does not reach yet, as the reference
//! platform's backports do). The platform's Helm release history (`helm
//! history RELEASE -o json`) says which releases the cluster was upgraded
//! through, in order. A numbered runner ran slot N once, on the first
//! upgrade to a release whose target is above N (or the release the cluster
//! was installed at carried N's effects): the content that release held is
//! the one that ran.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::slug::Slug;
use crate::tree::LegacyPair;
use crate::version::Version;

/// The tree file naming which content of each diverged slot every release
/// tag held, with the numbered runner's target there when known: `TAG
/// [target=N] [SLOT=SLUG]...` a line, `#` comments.
pub const RELEASES_FILE: &str = "legacy-releases";

/// The reason of an entry adoption recorded from a Helm release history.
pub const HELM_HISTORY: &str = "helm-history";

/// Upper bound on the `legacy-releases` file and a history document read:
/// far above hundreds of tags, well below what would hurt to hold.
pub const MAX_INPUT_BYTES: u64 = 16 * 1024 * 1024;

/// Why a release map or a release history cannot be read. Each names the
/// file (or the source) and the line or revision.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HistoryError {
    /// `legacy-releases` has bad lines.
    #[error("{}", problems.join("; "))]
    ReleaseMap {
        /// Each bad line, as `FILE:LINE: why`.
        problems: Vec<String>,
    },
    /// A file could not be read.
    #[error("{}: {why}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        why: String,
    },
    /// A history document that is not `helm history -o json`'s.
    #[error("{origin}: {why}")]
    History {
        /// Where it came from (a file, `-`, or `helm history NS/NAME`).
        origin: String,
        /// What is wrong, naming the revision where there is one.
        why: String,
    },
}

/// One release tag of `legacy-releases`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReleaseTag {
    /// The tag as convert read it (`v1.5.4`).
    pub tag: String,
    /// Its version.
    pub version: Version,
    /// The numbered runner's target at this release (`target=N`): an
    /// upgrade to it ran every slot below N. `None`: not recorded, and the
    /// release is taken to run every slot it holds (a target above its
    /// highest script, as a runner counting its files has).
    pub target: Option<u64>,
    /// The content of each diverged slot the tag held, by slot.
    pub contents: BTreeMap<u64, Slug>,
    /// Its line in the file, for messages.
    pub line: usize,
}

/// The tree's `legacy-releases`: which content of each diverged slot each
/// release tag held.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LegacyReleases {
    file: PathBuf,
    tags: Vec<ReleaseTag>,
}

impl LegacyReleases {
    /// Parses the file's bytes; `file` names it in errors. Every bad line is
    /// reported with its line: a first word that is no version, a word that
    /// is not `SLOT=SLUG`, a slot given twice on a line, a tag (or version)
    /// listed twice.
    pub fn parse(file: &Path, bytes: &[u8]) -> Result<Self, HistoryError> {
        let text = std::str::from_utf8(bytes).map_err(|_| HistoryError::Read {
            path: file.to_path_buf(),
            why: "not UTF-8".into(),
        })?;
        let mut problems = Vec::new();
        let mut tags: Vec<ReleaseTag> = Vec::new();
        // The line format of the tree's other list files; the text is
        // checked as UTF-8 as a whole above.
        for (line, words) in crate::line_file::records(text.as_bytes()) {
            let mut words = words.unwrap_or_default().into_iter();
            let Some(tag) = words.next() else { continue };
            let mut bad = |why: String| problems.push(format!("{}:{line}: {why}", file.display()));
            let Some(version) = Version::parse(tag) else {
                bad(format!("{tag:?} is not a release version"));
                continue;
            };
            if let Some(first) = tags.iter().find(|t| t.version == version) {
                bad(format!(
                    "{tag} is version {version}, listed already on line {} ({})",
                    first.line, first.tag
                ));
                continue;
            }
            let mut contents = BTreeMap::new();
            let mut target = None;
            let mut ok = true;
            for word in words {
                if let Some(n) = word.strip_prefix("target=") {
                    match crate::line_file::decimal(n) {
                        _ if target.is_some() => {
                            bad("target= is given twice".to_owned());
                            ok = false;
                        }
                        Some(v) => target = Some(v),
                        None => {
                            bad(format!("target={n:?} is not a decimal integer"));
                            ok = false;
                        }
                    }
                    continue;
                }
                let parsed = word.split_once('=').and_then(|(n, s)| {
                    let number = crate::line_file::decimal(n)?;
                    Some((number, Slug::parse(s).ok()?))
                });
                match parsed {
                    Some((number, slug)) => {
                        if contents.insert(number, slug).is_some() {
                            bad(format!("slot {number} is given twice"));
                            ok = false;
                        }
                    }
                    None => {
                        bad(format!("expected SLOT=SLUG, found {word:?}"));
                        ok = false;
                    }
                }
            }
            if ok {
                tags.push(ReleaseTag {
                    tag: tag.to_owned(),
                    version,
                    target,
                    contents,
                    line,
                });
            }
        }
        if problems.is_empty() {
            Ok(LegacyReleases {
                file: file.to_path_buf(),
                tags,
            })
        } else {
            Err(HistoryError::ReleaseMap { problems })
        }
    }

    /// Reads `legacy-releases` at the root of the tree at `root`: `None`
    /// when there is none (a tree converted before the file existed, or
    /// without a diverged slot). Read through the one reader
    /// ([`crate::tree::supplied`]): a regular file of at most
    /// [`MAX_INPUT_BYTES`], a symlink followed only inside the tree, a
    /// dangling one an error.
    pub fn read(root: &Path) -> Result<Option<Self>, HistoryError> {
        use crate::tree::supplied::{self, Within};
        let path = root.join(RELEASES_FILE);
        let canonical = std::fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf());
        let read = supplied::read_file(&path, Within::Tree(&canonical), MAX_INPUT_BYTES);
        let bytes = match read {
            Ok(None) => return Ok(None),
            Ok(Some(bytes)) => bytes,
            Err(e) => {
                return Err(HistoryError::Read {
                    path,
                    why: e.to_string(),
                });
            }
        };
        Self::parse(&path, &bytes).map(Some)
    }

    /// The file's text for `tags` (each tag with the numbered runner's
    /// target there when known, and the content of every diverged slot it
    /// held), in the order given: the one definition of the format, which
    /// `migrate convert` writes.
    pub fn render<'a>(
        tags: impl IntoIterator<Item = (&'a str, Option<u64>, &'a BTreeMap<u64, Slug>)>,
    ) -> String {
        let mut out = String::from(
            "# Written by 'migrate convert': for every release tag it read, the numbered\n\
             # runner's target there when known (target=N: an upgrade to it ran every slot\n\
             # below N) and the content of each diverged legacy-map slot the tag held\n\
             # (SLOT=SLUG). 'migrate adopt' reads it with a cluster's release history\n\
             # (CONTRACT.md section 6.2).\n",
        );
        for (tag, target, contents) in tags {
            out.push_str(tag);
            if let Some(target) = target {
                out.push_str(&format!(" target={target}"));
            }
            for (number, slug) in contents {
                out.push_str(&format!(" {number}={slug}"));
            }
            out.push('\n');
        }
        out
    }

    /// The file, for messages.
    pub fn file(&self) -> &Path {
        &self.file
    }

    /// Every tag, in file order.
    pub fn tags(&self) -> &[ReleaseTag] {
        &self.tags
    }

    /// The tag of `version`, if convert read one.
    pub fn tag_of(&self, version: &Version) -> Option<&ReleaseTag> {
        self.tags.iter().find(|t| &t.version == version)
    }

    /// Every release no newer than `version` that runs slot `number`
    /// (pre-releases only when they count), with the content it held
    /// there (`None`: its target is above the slot, which it does not
    /// hold): what a cluster that reached `version` may have run at it.
    pub fn candidates(
        &self,
        number: u64,
        version: &Version,
        count_prereleases: bool,
    ) -> Vec<(&str, Option<&Slug>)> {
        self.tags
            .iter()
            .filter(|t| &t.version <= version)
            .filter(|t| count_prereleases || !t.version.is_prerelease())
            .filter(|t| match t.target {
                Some(target) => number < target,
                None => t.contents.contains_key(&number),
            })
            .map(|t| (t.tag.as_str(), t.contents.get(&number)))
            .collect()
    }

    /// Lines that contradict the tree's `legacy-map`: a slot it does not
    /// have, or a slug the map gives to another slot.
    pub fn check_against(&self, map: &[LegacyPair]) -> Result<(), HistoryError> {
        let mut problems = BTreeSet::new();
        for tag in &self.tags {
            for (number, slug) in &tag.contents {
                let at = |p: &&LegacyPair| p.number == *number;
                if !map.iter().any(|p| at(&p)) {
                    problems.insert(format!(
                        "{}:{}: slot {number} is not in legacy-map",
                        self.file.display(),
                        tag.line
                    ));
                    continue;
                }
                if let Some(other) = map
                    .iter()
                    .find(|p| p.number != *number && (&p.slug == slug || p.others.contains(slug)))
                {
                    problems.insert(format!(
                        "{}:{}: {slug} is a content of slot {} in legacy-map, not of slot {number}",
                        self.file.display(),
                        tag.line,
                        other.number
                    ));
                }
            }
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(HistoryError::ReleaseMap {
                problems: problems.into_iter().collect(),
            })
        }
    }
}

/// A revision's status, as Helm spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RevisionStatus {
    /// The release's current revision.
    Deployed,
    /// Deployed, then replaced by a later revision.
    Superseded,
    /// The install or upgrade failed.
    Failed,
    /// Uninstalled (kept with `--keep-history`).
    Uninstalled,
    /// Being uninstalled.
    Uninstalling,
    /// An install that never finished.
    PendingInstall,
    /// An upgrade that never finished.
    PendingUpgrade,
    /// A rollback that never finished.
    PendingRollback,
    /// Helm's `unknown`.
    Unknown,
}

impl RevisionStatus {
    fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "deployed" => Self::Deployed,
            "superseded" => Self::Superseded,
            "failed" => Self::Failed,
            "uninstalled" => Self::Uninstalled,
            "uninstalling" => Self::Uninstalling,
            "pending-install" => Self::PendingInstall,
            "pending-upgrade" => Self::PendingUpgrade,
            "pending-rollback" => Self::PendingRollback,
            "unknown" => Self::Unknown,
            _ => return None,
        })
    }

    /// Helm's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Deployed => "deployed",
            Self::Superseded => "superseded",
            Self::Failed => "failed",
            Self::Uninstalled => "uninstalled",
            Self::Uninstalling => "uninstalling",
            Self::PendingInstall => "pending-install",
            Self::PendingUpgrade => "pending-upgrade",
            Self::PendingRollback => "pending-rollback",
            Self::Unknown => "unknown",
        }
    }

    /// True when the revision finished: its hooks ran to the end. Only
    /// these say a release's migrations ran; a failed or pending one may
    /// have run some, or none.
    pub fn completed(self) -> bool {
        matches!(self, Self::Deployed | Self::Superseded)
    }
}

/// One revision of a Helm release history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Revision {
    /// Helm's revision number (1 is the install).
    pub revision: u64,
    /// When it was written, as Helm printed it.
    pub updated: String,
    /// Its status.
    pub status: RevisionStatus,
    /// `NAME-VERSION` of the chart.
    pub chart: String,
    /// The chart's `appVersion` (may be empty).
    pub app_version: String,
    /// Helm's description ("Upgrade complete", "Rollback to 3", ...).
    pub description: String,
}

impl Revision {
    /// The version in the chart field (`cozy-installer-1.6.0-rc.1` gives
    /// `1.6.0-rc.1`): the suffix after the first `-` that parses as one.
    pub fn chart_version(&self) -> Option<Version> {
        self.chart
            .match_indices('-')
            .find_map(|(i, _)| Version::parse(&self.chart[i + 1..]))
    }

    /// `app_version` as a version, when it is one.
    pub fn app_version(&self) -> Option<Version> {
        Version::parse(self.app_version.trim())
    }
}

/// A Helm release history: the revisions of one release, by revision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HelmHistory {
    /// Where it came from, for messages (a file, `-`, `helm history NS/NAME`).
    pub source: String,
    /// Its revisions, ascending.
    pub revisions: Vec<Revision>,
}

/// A revision as `helm history -o json` prints it.
#[derive(Deserialize)]
struct RawRevision {
    revision: Option<serde_json::Value>,
    updated: Option<serde_json::Value>,
    status: Option<serde_json::Value>,
    chart: Option<serde_json::Value>,
    app_version: Option<serde_json::Value>,
    description: Option<serde_json::Value>,
}

impl HelmHistory {
    /// Parses `helm history RELEASE -o json`'s document. Fail closed: a
    /// document that is not an array of revisions, a revision without a
    /// number, chart or known status, or a number given twice is refused,
    /// naming `source` and the revision (or its position).
    pub fn parse_helm_json(source: &str, bytes: &[u8]) -> Result<Self, HistoryError> {
        let err = |why: String| HistoryError::History {
            origin: source.to_owned(),
            why,
        };
        let raw: Vec<serde_json::Value> = serde_json::from_slice(bytes)
            .map_err(|e| err(format!("not the JSON array of `helm history -o json`: {e}")))?;
        let mut revisions: Vec<Revision> = Vec::with_capacity(raw.len());
        for (i, value) in raw.into_iter().enumerate() {
            let at = format!("entry {}", i + 1);
            let r: RawRevision = serde_json::from_value(value)
                .map_err(|e| err(format!("{at}: not a revision object: {e}")))?;
            let revision = r
                .revision
                .as_ref()
                .and_then(serde_json::Value::as_u64)
                .ok_or_else(|| err(format!("{at}: no revision number")))?;
            let at = format!("revision {revision}");
            let text = |v: &Option<serde_json::Value>, field: &str, required: bool| match v {
                Some(serde_json::Value::String(s)) => Ok(s.clone()),
                None | Some(serde_json::Value::Null) if !required => Ok(String::new()),
                None | Some(serde_json::Value::Null) => Err(err(format!("{at}: no {field}"))),
                Some(other) => Err(err(format!("{at}: {field} is {other}, not a string"))),
            };
            let status_text = text(&r.status, "status", true)?;
            let status = RevisionStatus::parse(&status_text)
                .ok_or_else(|| err(format!("{at}: unknown status {status_text:?}")))?;
            let chart = text(&r.chart, "chart", true)?;
            let rev = Revision {
                revision,
                updated: text(&r.updated, "updated", false)?,
                status,
                chart,
                app_version: text(&r.app_version, "app_version", false)?,
                description: text(&r.description, "description", false)?,
            };
            if revisions.iter().any(|x| x.revision == revision) {
                return Err(err(format!("{at} is listed twice")));
            }
            revisions.push(rev);
        }
        revisions.sort_by_key(|r| r.revision);
        Ok(HelmHistory {
            source: source.to_owned(),
            revisions,
        })
    }
}

/// What a history says about one diverged slot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SlotAnswer {
    /// This content ran, and why the history says so.
    Ran {
        /// The content.
        slug: Slug,
        /// The revision and release that ran it.
        why: String,
    },
    /// The history cannot say, and why.
    Unknown(String),
}

/// The release tag a revision was, and how it was found; `Err` says why
/// none (for messages).
fn release_of<'a>(
    revision: &Revision,
    releases: &'a LegacyReleases,
) -> Result<(&'a ReleaseTag, &'static str), String> {
    let by_chart = revision.chart_version().and_then(|v| releases.tag_of(&v));
    let by_app = revision.app_version().and_then(|v| releases.tag_of(&v));
    match (by_chart, by_app) {
        (Some(c), Some(a)) if c.version != a.version => Err(format!(
            "its chart {} and app version {} name two release tags ({} and {})",
            revision.chart, revision.app_version, c.tag, a.tag
        )),
        (Some(c), _) => Ok((c, "chart version")),
        (None, Some(a)) => Ok((a, "app version")),
        (None, None) => Err(format!(
            "neither its chart {:?} nor its app version {:?} is a release tag of {}",
            revision.chart,
            revision.app_version,
            releases.file().display()
        )),
    }
}

/// A revision in messages.
fn describe(revision: &Revision) -> String {
    let mut s = format!(
        "revision {} ({}, {}",
        revision.revision,
        revision.chart,
        revision.status.as_str()
    );
    if !revision.updated.is_empty() {
        s.push_str(&format!(", {}", revision.updated));
    }
    s.push(')');
    s
}

/// What `history` says about `pair`, a diverged slot: the content of the
/// first completed revision whose release runs the slot (below its target,
/// or held when no target is recorded: the numbered runner ran it on that
/// upgrade, or the release installed carried its effects). Unknown instead (never guessed) when before that revision a
/// failed, pending, uncounted pre-release or unplaceable revision may have
/// run another content; when a completed revision names no release tag the
/// file knows; when the history was pruned and begins with a release that
/// already runs the slot while an older release ran another content there;
/// when a release's target is above a slot it does
/// not hold; or when no completed revision runs it.
pub(crate) fn answer(
    pair: &LegacyPair,
    releases: &LegacyReleases,
    history: &HelmHistory,
    count_prereleases: bool,
) -> SlotAnswer {
    let number = pair.number;
    let source = &history.source;
    // Revisions that may have run the slot without saying so: what they
    // would have run (None: cannot tell), and why they do not count.
    let mut maybe: Vec<(Option<&Slug>, String)> = Vec::new();
    for (i, revision) in history.revisions.iter().enumerate() {
        let release = release_of(revision, releases);
        let prerelease_uncounted = release
            .as_ref()
            .is_ok_and(|(t, _)| t.version.is_prerelease() && !count_prereleases);
        let counts = revision.status.completed() && !prerelease_uncounted;
        let (tag, how) = match release {
            Ok(found) => found,
            Err(why) if revision.status.completed() => {
                return SlotAnswer::Unknown(format!(
                    "{source}: {} may have run slot {number}: {why}",
                    describe(revision)
                ));
            }
            Err(why) => {
                maybe.push((None, format!("{}: {why}", describe(revision))));
                continue;
            }
        };
        // Whether an upgrade to this release ran the slot: below its target
        // when recorded (a release may ship a script its target does not
        // reach yet, as a backport does), else when it holds the slot.
        let runs = match tag.target {
            Some(target) => number < target,
            None => tag.contents.contains_key(&number),
        };
        if !runs {
            continue;
        }
        let target = tag
            .target
            .map_or_else(String::new, |t| format!(", target {t}"));
        let Some(content) = tag.contents.get(&number) else {
            // Its target is above a slot it does not ship: the runner stops
            // there, and nobody can say what ran.
            let why = format!(
                "{} is release {}{target}, above slot {number}, which it does not hold",
                describe(revision),
                tag.tag
            );
            if revision.status.completed() {
                return SlotAnswer::Unknown(format!("{source}: {why}"));
            }
            maybe.push((None, why));
            continue;
        };
        if !counts {
            let why = if revision.status.completed() {
                format!(
                    "{} is pre-release {}{target} (pre-releases count only with --count-prereleases), which ran {content}",
                    describe(revision),
                    tag.tag
                )
            } else {
                format!(
                    "{} did not complete; release {}{target} would have run {content}",
                    describe(revision),
                    tag.tag
                )
            };
            maybe.push((Some(content), why));
            continue;
        }
        if let Some((_, why)) = maybe.iter().find(|(c, _)| *c != Some(content)) {
            return SlotAnswer::Unknown(format!(
                "{source}: {} is the first completed release running slot {number}, {}{target} ({content}), but before it {why}",
                describe(revision),
                tag.tag
            ));
        }
        if i == 0 && revision.revision != 1 {
            // Pruned (helm --history-max): the slot ran at this release or
            // at one before it that the history no longer shows. Clusters
            // never downgrade, so those were releases no newer than this
            // one (final ones, unless pre-releases count): when every such
            // release that runs the slot held this content, it is the
            // answer; otherwise nobody can say.
            let before = releases.candidates(number, &tag.version, count_prereleases);
            if before.iter().any(|(_, c)| *c != Some(content)) {
                let list: Vec<String> = before
                    .iter()
                    .map(|(t, c)| match c {
                        Some(c) => format!("{t}: {c}"),
                        None => format!("{t}: a target above a slot it does not hold"),
                    })
                    .collect();
                return SlotAnswer::Unknown(format!(
                    "{source}: the history begins at {} (older revisions were pruned, helm --history-max), whose release {}{target} already runs slot {number}, and releases no newer than it ran other contents there ({})",
                    describe(revision),
                    tag.tag,
                    list.join(", ")
                ));
            }
            return SlotAnswer::Ran {
                slug: content.clone(),
                why: format!(
                    "{source}: the history begins at {} (older revisions were pruned, helm --history-max), whose release {}{target} (by its {how}) runs slot {number}: it ran there or at an older release, and every release no newer than it that runs the slot ran {content}",
                    describe(revision),
                    tag.tag
                ),
            };
        }
        return SlotAnswer::Ran {
            slug: content.clone(),
            why: format!(
                "{source}: {} is the first completed revision whose release runs slot {number}: {}{target} (by its {how}) ran {content}",
                describe(revision),
                tag.tag
            ),
        };
    }
    let mut why = format!("{source}: no completed revision of a release running slot {number}");
    if !maybe.is_empty() {
        let notes: Vec<&str> = maybe.iter().map(|(_, w)| w.as_str()).collect();
        why.push_str(&format!(" ({})", notes.join("; ")));
    }
    SlotAnswer::Unknown(why)
}

/// The revisions of `history` that do not count as having run their
/// release's migrations, each with why: said, never silently dropped.
pub(crate) fn uncounted(history: &HelmHistory, count_prereleases: bool) -> Vec<String> {
    history
        .revisions
        .iter()
        .filter_map(|r| {
            if !r.status.completed() {
                return Some(format!(
                    "{}: {} does not count as run: status {}",
                    history.source,
                    describe(r),
                    r.status.as_str()
                ));
            }
            let pre = r.chart_version().or_else(|| r.app_version());
            if !count_prereleases && pre.is_some_and(|v| v.is_prerelease()) {
                return Some(format!(
                    "{}: {} is a pre-release: it counts only with --count-prereleases",
                    history.source,
                    describe(r)
                ));
            }
            None
        })
        .collect()
}
