//! The entries a ledger is seeded with, pure functions of the tree (they
//! read no ledger): a fresh install's (every manifest slug
//! `skipped-fresh-install`, CONTRACT.md §6.1) and an adopted numbered
//! cluster's (`legacy`, §6.2). [`crate::Migrator`] writes them; `migrate
//! seed-fresh --render` and `migrate adopt` print them.

mod history;

pub use history::{
    HELM_HISTORY, HelmHistory, HistoryError, LegacyReleases, MAX_INPUT_BYTES, RELEASES_FILE,
    ReleaseTag, Revision, RevisionStatus,
};

use std::collections::BTreeMap;

use crate::entry::{EntryState, LedgerEntry};
use crate::ledger::{LedgerSnapshot, LegacyVersion, Record};
use crate::plan::{PlanContext, PlanError, PlanRequest, plan};
use crate::slug::Slug;
use crate::tree::MigrationsTree;

/// The entries a fresh install of `tree` seeds, stamped from `context`:
/// every manifest line of either tier (retired and revoked ones included)
/// `skipped-fresh-install` (CONTRACT.md §6.1). Pure: reads no ledger. It is
/// the one definition of a fresh install's ledger: [`Migrator::seed_fresh`](crate::Migrator::seed_fresh)
/// writes it, `migrate seed-fresh --render` prints it for a chart to create
/// at install, so both hold the same entries.
pub fn fresh_install_entries(
    tree: &MigrationsTree,
    context: &PlanContext,
) -> Result<Vec<(Slug, LedgerEntry)>, PlanError> {
    let plan = plan(
        tree,
        None,
        &PlanRequest::tier(crate::header::Tier::PreApply),
        context,
    )?;
    Ok(plan.seed.into_iter().map(|s| (s.slug, s.entry)).collect())
}

/// The entries that adopt an existing cluster of a numbered runner whose
/// ledger said `version` = `legacy_version` (CONTRACT.md §6.2): each
/// `legacy-map` pair `N slug` with N below it, `legacy`. They are exactly
/// what the legacy rule seeds on such a cluster's first run, computed by the
/// same plan (so a tree the first run would refuse refuses here too).
/// Revoked slugs are left to that first run, which seeds them.
///
/// `ran` names, for diverged slots below the version (`others=` lines), the
/// content the cluster ran: each is recorded `legacy`, and this tree's
/// content of a slot whose other content ran is then an ordinary migration
/// that the first run executes. A diverged slot `ran` does not settle is
/// not guessed either way: this tree's content runs on the first run and
/// its entry says why ([`Adoption::reruns`]), unless `legacy-map` marks the
/// slot `unsafe-to-repeat`, which the plan refuses as it does on a first
/// run. No answer nobody has is asked for.
///
/// Bad input: a tree without `legacy-map` (a cluster without that history
/// is a fresh install), or a version above the map's highest integer plus
/// one (integers the map does not name were scripts nobody can identify).
pub fn adoption(
    tree: &MigrationsTree,
    legacy_version: u64,
    ran: &[Slug],
    context: &PlanContext,
) -> Result<Adoption, AdoptError> {
    let knowledge = AdoptKnowledge {
        ran: ran.to_vec(),
        ..AdoptKnowledge::default()
    };
    adoption_with(tree, legacy_version, &knowledge, context)
}

/// What is known about an adopted cluster beyond its integer: the answers
/// a person gave (`--ran`) and what the cluster's release history tells.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct AdoptKnowledge {
    /// Contents of diverged slots the person adopting says ran (`--ran`).
    pub ran: Vec<Slug>,
    /// The tree's `legacy-releases` (which content each release tag held);
    /// without it no history can answer.
    pub releases: Option<LegacyReleases>,
    /// The cluster's release histories (Helm's), each answering alone.
    pub histories: Vec<HelmHistory>,
    /// Whether a completed revision of a pre-release counts as run: only
    /// when the maintainer says clusters ran pre-releases.
    pub count_prereleases: bool,
}

impl AdoptKnowledge {
    /// `ran` as the person's answers.
    pub fn with_ran(mut self, ran: Vec<Slug>) -> Self {
        self.ran = ran;
        self
    }

    /// The tree's release map.
    pub fn with_releases(mut self, releases: Option<LegacyReleases>) -> Self {
        self.releases = releases;
        self
    }

    /// One more release history.
    pub fn with_history(mut self, history: HelmHistory) -> Self {
        self.histories.push(history);
        self
    }

    /// Whether pre-release revisions count.
    pub fn counting_prereleases(mut self, count: bool) -> Self {
        self.count_prereleases = count;
        self
    }
}

/// [`adoption`] with everything known about the cluster. A diverged slot
/// below the version that no `--ran` settles is asked of each history
/// (CONTRACT.md §6.2): the content of the first completed revision whose
/// release held the slot is recorded, its entry's reason
/// [`HELM_HISTORY`] and its message naming the revision; when no history
/// can say (none given, no `legacy-releases`, a failed or pending revision
/// that may have run another content first, a pruned history, a
/// pre-release not counted, histories that disagree), the slot falls back
/// to the rerun, its message saying why the history did not answer. A
/// history never refuses an adoption; a `--ran` the history contradicts
/// does ([`AdoptError::RanContradictsHistory`]).
pub fn adoption_with(
    tree: &MigrationsTree,
    legacy_version: u64,
    knowledge: &AdoptKnowledge,
    context: &PlanContext,
) -> Result<Adoption, AdoptError> {
    let Some(highest) = tree.legacy_map().iter().map(|p| p.number).max() else {
        return Err(AdoptError::NoLegacyMap {
            root: tree.root().to_path_buf(),
        });
    };
    if legacy_version > highest + 1 {
        return Err(AdoptError::VersionBeyondMap {
            root: tree.root().to_path_buf(),
            version: legacy_version,
            highest,
        });
    }
    if let Some(releases) = &knowledge.releases {
        releases.check_against(tree.legacy_map())?;
    }
    // Which content of each diverged slot the cluster ran: the integer
    // cannot say (CONTRACT.md §6.2), so the person adopting it does.
    let mut chosen: BTreeMap<u64, &Slug> = BTreeMap::new();
    let mut ran_entries = Vec::new();
    for slug in &knowledge.ran {
        // The only content of a slot below the version ran: the tree says
        // so already, and the slot's legacy entry records it.
        if tree
            .legacy_map()
            .iter()
            .any(|p| p.number < legacy_version && p.others.is_empty() && &p.slug == slug)
        {
            continue;
        }
        let pair = tree
            .legacy_map()
            .iter()
            .filter(|p| p.number < legacy_version && !p.others.is_empty())
            .find(|p| &p.slug == slug || p.others.contains(slug))
            .ok_or_else(|| AdoptError::NotDiverged {
                slug: slug.clone(),
                version: legacy_version,
                hint: not_ran_hint(tree, slug, legacy_version),
            })?;
        if let Some(first) = chosen.insert(pair.number, slug) {
            return Err(AdoptError::TwoForOneSlot {
                number: pair.number,
                first: first.clone(),
                second: slug.clone(),
            });
        }
        // This tree's content goes into its legacy batch; another line's
        // content is no manifest line and has no batch here.
        let batch = (&pair.slug == slug).then(|| crate::BatchName::legacy().to_string());
        let entry = LedgerEntry {
            batch,
            ..LedgerEntry::new(EntryState::Legacy, context.now)
        };
        ran_entries.push((slug.clone(), entry));
    }
    // Then what the cluster's history tells, for the slots left.
    let mut answered = Vec::new();
    let mut unanswered: BTreeMap<u64, String> = BTreeMap::new();
    let diverged = tree
        .legacy_map()
        .iter()
        .filter(|p| p.number < legacy_version && !p.others.is_empty());
    for pair in diverged {
        let told = tell(pair, knowledge);
        if let Some(given) = chosen.get(&pair.number) {
            if let Told::Ran { slug, why } = &told
                && slug != *given
            {
                return Err(AdoptError::RanContradictsHistory {
                    given: (*given).clone(),
                    number: pair.number,
                    history: why.clone(),
                });
            }
            continue;
        }
        match told {
            Told::Ran { slug, why } => {
                let message = format!("{HELM_HISTORY}: {why}");
                // A content this line does not list (one only pre-releases
                // held, counted here but not by convert): this tree's
                // content did not run and runs once; its entry says so.
                let (recorded, entry) = if slug == pair.slug || pair.others.contains(&slug) {
                    let batch = (slug == pair.slug).then(|| crate::BatchName::legacy().to_string());
                    let entry = LedgerEntry {
                        batch,
                        reason: Some(HELM_HISTORY.to_owned()),
                        message: Some(message.clone()),
                        ..LedgerEntry::new(EntryState::Legacy, context.now)
                    };
                    (slug.clone(), entry)
                } else {
                    let entry = LedgerEntry {
                        batch: Some(crate::BatchName::legacy().to_string()),
                        reason: Some(HELM_HISTORY.to_owned()),
                        message: Some(format!(
                            "{message}; legacy-map does not list {slug} among slot {}'s others, and this tree's content '{}' is another content: it runs once",
                            pair.number, pair.slug
                        )),
                        ..LedgerEntry::new(EntryState::NotYet, context.now)
                    };
                    (pair.slug.clone(), entry)
                };
                answered.push(Answered {
                    number: pair.number,
                    ran: slug,
                    recorded: recorded.clone(),
                    state: entry.state,
                    why: message,
                });
                ran_entries.push((recorded, entry));
            }
            Told::Unknown(why) => {
                if let Some(why) = why {
                    unanswered.insert(pair.number, why);
                }
            }
        }
    }
    let snapshot = LedgerSnapshot {
        version: crate::ledger::LegacyVersion::Known(legacy_version),
        records: ran_entries
            .iter()
            .map(|(s, e)| (s.clone(), Record::Entry(Box::new(e.clone()))))
            .collect(),
        ..LedgerSnapshot::default()
    };
    let plan = plan(
        tree,
        Some(&snapshot),
        &PlanRequest::tier(crate::header::Tier::PreApply),
        context,
    )?;
    let number = |slug: &Slug| {
        tree.legacy_map()
            .iter()
            .find(|p| &p.slug == slug || p.others.contains(slug))
            .map(|p| p.number)
    };
    let reruns: Vec<(Slug, String)> = plan
        .pending
        .iter()
        .filter_map(|p| {
            let why = p.rerun.clone()?;
            // Why the history, when there was one, did not answer.
            let why = match number(&p.slug).and_then(|n| unanswered.get(&n)) {
                Some(history) => format!("{why}; the release history did not answer: {history}"),
                None => why,
            };
            Some((p.slug.clone(), why))
        })
        .collect();
    let mut entries = ran_entries;
    // The adopted ledger has no `version` (the engine never writes it), so
    // the first run could not tell a rerun from a first run: each is
    // recorded `not-yet` with the reason, which that run carries into the
    // entry it writes.
    entries.extend(reruns.iter().map(|(slug, why)| {
        let entry = LedgerEntry {
            batch: Some(crate::BatchName::legacy().to_string()),
            reason: Some(crate::plan::DIVERGED_RERUN.to_owned()),
            message: Some(why.clone()),
            ..LedgerEntry::new(EntryState::NotYet, context.now)
        };
        (slug.clone(), entry)
    }));
    entries.extend(
        plan.seed
            .into_iter()
            .filter(|s| s.kind == crate::plan::SeedKind::Legacy)
            .map(|s| (s.slug, s.entry)),
    );
    // In legacy-map order, as the numbered runner ran them.
    entries.sort_by_key(|(slug, _)| number(slug));
    let notes = knowledge
        .histories
        .iter()
        .flat_map(|h| history::uncounted(h, knowledge.count_prereleases))
        .collect();
    Ok(Adoption {
        entries,
        reruns,
        answered,
        notes,
    })
}

/// What the histories tell about one diverged slot.
enum Told {
    /// Every history that answered says this content ran.
    Ran {
        /// The content.
        slug: Slug,
        /// Why (the revision that ran it), from the first history.
        why: String,
    },
    /// Nobody can say; why, when a history was asked.
    Unknown(Option<String>),
}

/// Asks every history about `pair`: an answer only when those that answer
/// agree.
fn tell(pair: &crate::tree::LegacyPair, knowledge: &AdoptKnowledge) -> Told {
    if knowledge.histories.is_empty() {
        return Told::Unknown(None);
    }
    let Some(releases) = &knowledge.releases else {
        return Told::Unknown(Some(format!(
            "the tree has no {RELEASES_FILE} file saying which content each release tag held (written by `migrate convert`)"
        )));
    };
    let mut ran: Option<(Slug, String)> = None;
    let mut unknown = Vec::new();
    for h in &knowledge.histories {
        match history::answer(pair, releases, h, knowledge.count_prereleases) {
            history::SlotAnswer::Ran { slug, why } => match &ran {
                Some((first, first_why)) if *first != slug => {
                    return Told::Unknown(Some(format!(
                        "the histories disagree: {first_why}; but {why}"
                    )));
                }
                Some(_) => {}
                None => ran = Some((slug, why)),
            },
            history::SlotAnswer::Unknown(why) => unknown.push(why),
        }
    }
    match ran {
        Some((slug, why)) => Told::Ran { slug, why },
        None => Told::Unknown(Some(unknown.join("; "))),
    }
}

/// A diverged slot a release history answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answered {
    /// The slot's integer.
    pub number: u64,
    /// The content the history says ran.
    pub ran: Slug,
    /// The slug whose entry records it: `ran` (`legacy`), or this tree's
    /// content (`not-yet`, to run once) when `ran` is no content this
    /// line's `legacy-map` lists.
    pub recorded: Slug,
    /// The recorded entry's state.
    pub state: EntryState,
    /// The entry's message: which revision of which history, and why.
    pub why: String,
}

/// What adopting a numbered cluster writes, and what its first run does
/// that it may have done before.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Adoption {
    /// The entries to write, in legacy-map order: `legacy` for what ran,
    /// `not-yet` (reason [`crate::plan::DIVERGED_RERUN`]) for each rerun.
    pub entries: Vec<(Slug, LedgerEntry)>,
    /// This tree's contents of diverged slots nobody said which content of
    /// ran: the first run executes them, and each entry says why.
    pub reruns: Vec<(Slug, String)>,
    /// The diverged slots a release history answered.
    pub answered: Vec<Answered>,
    /// Revisions that did not count as run (failed, pending, uncounted
    /// pre-releases), each with why: said, never dropped silently.
    pub notes: Vec<String>,
}

/// What adoption does with the ledger it finds ([`adopt_into`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdoptWrite {
    /// No ledger: create it with the entries.
    Create,
    /// A ledger holding nothing but `version` (a platform chart's
    /// install-time shape): write the entries where absent.
    Complete,
    /// Exactly these entries are there already: nothing to write.
    AlreadyAdopted,
}

/// Decides what adopting writes into the ledger read as `snapshot` (`None`:
/// there is none): it never overwrites (CONTRACT.md §6.2). Accepted: no
/// ledger; one holding nothing but `version` = `legacy_version`; one
/// holding exactly `adoption`'s legacy entries. Anything else belongs to a
/// cluster the engine runs already, or needs repair first.
pub fn adopt_into(
    snapshot: Option<&LedgerSnapshot>,
    adoption: &Adoption,
    legacy_version: u64,
) -> Result<AdoptWrite, AdoptRefusal> {
    let Some(snapshot) = snapshot else {
        return Ok(AdoptWrite::Create);
    };
    match &snapshot.version {
        LegacyVersion::Known(v) if *v != legacy_version => {
            return Err(AdoptRefusal::OtherVersion {
                found: *v,
                wanted: legacy_version,
            });
        }
        LegacyVersion::Corrupt { raw } => {
            return Err(AdoptRefusal::CorruptVersion { raw: raw.clone() });
        }
        _ => {}
    }
    // A last failure that does not read is informational only (CONTRACT.md
    // §5.3): never a reason to refuse.
    let unreadable: Vec<String> = snapshot
        .unreadable_keys
        .iter()
        .filter(|c| !c.key.starts_with(crate::keys::FAILURE_PREFIX))
        .map(|c| c.key.clone())
        .collect();
    if !unreadable.is_empty() {
        return Err(AdoptRefusal::UnreadableKeys { keys: unreadable });
    }
    if snapshot.records.is_empty() {
        return Ok(AdoptWrite::Complete);
    }
    let wanted: BTreeMap<&Slug, EntryState> =
        adoption.entries.iter().map(|(s, e)| (s, e.state)).collect();
    let same = snapshot.records.len() == wanted.len()
        && snapshot.records.iter().all(|(slug, record)| {
            matches!(record, Record::Entry(e) if wanted.get(slug) == Some(&e.state))
        });
    if same {
        Ok(AdoptWrite::AlreadyAdopted)
    } else {
        Err(AdoptRefusal::OtherEntries {
            held: snapshot.records.len(),
            wanted: adoption.entries.len(),
        })
    }
}

/// Why adoption leaves an existing ledger alone ([`adopt_into`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AdoptRefusal {
    /// The ledger's `version` is another integer.
    #[error(
        "the ledger's version is {found}, not --legacy-version {wanted}: adopting with another integer would mark other legacy migrations applied; check which the cluster ran"
    )]
    OtherVersion {
        /// The ledger's.
        found: u64,
        /// The one given.
        wanted: u64,
    },
    /// The ledger's `version` is no integer.
    #[error("the ledger's version {raw:?} is not a non-negative integer; fix it before adopting")]
    CorruptVersion {
        /// The stored value.
        raw: String,
    },
    /// Keys adoption cannot read.
    #[error("unreadable keys {}; adopt only creates a ledger, it does not repair one", keys.join(", "))]
    UnreadableKeys {
        /// The keys.
        keys: Vec<String>,
    },
    /// Entries other than this adoption's.
    #[error(
        "the ledger already holds {held} entries that are not exactly this adoption's {wanted} legacy entries: it belongs to a cluster the engine runs already (see `migrate status`); adopt never rewrites a ledger"
    )]
    OtherEntries {
        /// How many records it holds.
        held: usize,
        /// How many this adoption writes.
        wanted: usize,
    },
}

/// What the tree says of a `--ran` slug it does not list below `version`:
/// a slot at or above the version (it did not run), or a slug named like a
/// diverged slot's content (`N-<tag>`) that `legacy-map` does not list,
/// which is what a content only pre-releases held looks like when the tree
/// was converted without `--count-prereleases`.
fn not_ran_hint(tree: &MigrationsTree, slug: &Slug, version: u64) -> String {
    let map = tree.legacy_map();
    if let Some(p) = map
        .iter()
        .find(|p| &p.slug == slug || p.others.contains(slug))
    {
        return format!(
            "; it is slot {}'s, which a cluster at version {version} has not run yet",
            p.number
        );
    }
    let number = slug
        .as_str()
        .split_once('-')
        .and_then(|(n, _)| n.parse::<u64>().ok());
    match number.and_then(|n| map.iter().find(|p| p.number == n)) {
        Some(p) => format!(
            "; if it is a content of slot {} that only a pre-release held and this cluster ran, legacy-map lists it once the tree is converted with --count-prereleases (convert again with it, then adopt)",
            p.number
        ),
        None => String::new(),
    }
}

/// Why [`adoption`] cannot say what an adopted cluster ran.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AdoptError {
    /// The engine's plan for that `version` refuses (a diverged slot no
    /// `--ran` settles, among others).
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// A `--ran` slug the tree contradicts: no content of a slot below
    /// `version` in its `legacy-map`.
    #[error(
        "--ran {slug}: the tree contradicts it: no slot below version {version} holds it in legacy-map (this tree's content or one of its others=){hint}"
    )]
    NotDiverged {
        /// The slug given.
        slug: Slug,
        /// The legacy version adopted.
        version: u64,
        /// What the tree says of that slug instead, and what would express
        /// it (`; ...`, or empty).
        hint: String,
    },
    /// The tree has no `legacy-map`.
    #[error(
        "{}: no legacy-map: adopting needs the integer -> slug pairs of the numbered runner (a cluster without that history is a fresh install: `migrate seed-fresh`)",
        root.display()
    )]
    NoLegacyMap {
        /// The tree.
        root: std::path::PathBuf,
    },
    /// A version above the map's highest integer plus one.
    #[error(
        "--legacy-version {version}: the numbered runner ran every integer below it, but {}/legacy-map ends at {highest}; add the pairs for {}..{} (or check the version)",
        root.display(), highest + 1, version - 1
    )]
    VersionBeyondMap {
        /// The tree.
        root: std::path::PathBuf,
        /// The version given.
        version: u64,
        /// The map's highest integer.
        highest: u64,
    },
    /// `legacy-releases` contradicts `legacy-map`.
    #[error(transparent)]
    Releases(#[from] HistoryError),
    /// A `--ran` that the release history contradicts.
    #[error(
        "--ran {given} contradicts the release history of slot {number}: {history}; drop the --ran or check the history"
    )]
    RanContradictsHistory {
        /// The slug given.
        given: Slug,
        /// The slot.
        number: u64,
        /// What the history says.
        history: String,
    },
    /// Two `--ran` slugs of one slot: a cluster ran exactly one of them.
    #[error(
        "--ran {first} and --ran {second} are both contents of legacy slot {number}; a cluster ran exactly one"
    )]
    TwoForOneSlot {
        /// The slot's integer.
        number: u64,
        /// The first slug given for it.
        first: Slug,
        /// The second.
        second: Slug,
    },
}
