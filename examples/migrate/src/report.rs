//! What the command prints: stable JSON documents (what tests and tooling
//! read) and aligned text for people.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use migration_core::ledger::{LedgerSnapshot, LegacyVersion, Record};
use migration_core::plan::{SeedKind, SkipReason};
use migration_core::{EntryState, Plan};
use serde::Serialize;

/// `--output`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Aligned text for people; coloured only on a terminal.
    Text,
    /// One stable JSON document on stdout.
    Json,
}

/// Wraps `text` in an ANSI colour when `enabled`.
pub fn paint(text: &str, colour: Colour, enabled: bool) -> String {
    if !enabled {
        return text.to_owned();
    }
    let code = match colour {
        Colour::Red => "31",
        Colour::Green => "32",
        Colour::Yellow => "33",
        Colour::Dim => "2",
        Colour::Bold => "1",
    };
    format!("\x1b[{code}m{text}\x1b[0m")
}

/// The few colours text output uses.
#[derive(Debug, Clone, Copy)]
pub enum Colour {
    /// Failures.
    Red,
    /// Success.
    Green,
    /// Warnings.
    Yellow,
    /// Secondary detail.
    Dim,
    /// Headings.
    Bold,
}

/// Renders rows as left-aligned columns separated by two spaces.
pub fn table(rows: &[Vec<String>]) -> String {
    let width = rows.iter().map(Vec::len).max().unwrap_or(0);
    let mut widths = vec![0usize; width];
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            widths[i] = widths[i].max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for row in rows {
        let mut line = String::new();
        for (i, cell) in row.iter().enumerate() {
            if i + 1 == row.len() {
                line.push_str(cell);
            } else {
                let _ = write!(line, "{cell:<w$}  ", w = widths[i]);
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// A seeded entry in the plan document.
#[derive(Debug, Serialize)]
pub struct SeedView {
    /// The slug.
    pub slug: String,
    /// `fresh-install`, `legacy` or `revoked`.
    pub kind: &'static str,
    /// The state written.
    pub state: &'static str,
}

/// An unmet requirement.
#[derive(Debug, Serialize)]
pub struct UnmetView {
    /// The required slug.
    pub slug: String,
    /// Why it is not met.
    pub reason: String,
}

/// A pending migration in the plan document.
#[derive(Debug, Serialize)]
pub struct PendingView {
    /// The slug.
    pub slug: String,
    /// Its tier.
    pub tier: &'static str,
    /// Its failure policy.
    pub on_error: &'static str,
    /// The batch that placed it.
    pub batch: String,
    /// Path relative to the tree.
    pub path: String,
    /// Checksum on disk.
    pub sha256: String,
    /// Executions recorded before this run (ONLY re-runs carry this on).
    pub attempts_before: u32,
    /// Slugs it requires.
    pub requires: Vec<String>,
    /// Requirements known to be unmet (it will not run).
    pub unmet: Vec<UnmetView>,
}

/// A skipped manifest slug.
#[derive(Debug, Serialize)]
pub struct SkippedView {
    /// The slug.
    pub slug: String,
    /// `recorded`, `revoked`, `retired` or `other-tier`.
    pub reason: &'static str,
    /// The recorded state, for `recorded`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<&'static str>,
}

/// A checksum mismatch.
#[derive(Debug, Serialize)]
pub struct MismatchView {
    /// The slug.
    pub slug: String,
    /// Checksum in the ledger.
    pub recorded: String,
    /// Checksum on disk.
    pub on_disk: String,
}

/// The `plan` document.
#[derive(Debug, Serialize)]
pub struct PlanView {
    /// The ledger described.
    pub ledger: String,
    /// `pre-apply`, `background` or `all`.
    pub tier: String,
    /// The ONLY slug, if any.
    pub only: Option<String>,
    /// No ledger object existed.
    pub fresh_install: bool,
    /// Entries written before anything runs.
    pub seed: Vec<SeedView>,
    /// Migrations that run, in order.
    pub pending: Vec<PendingView>,
    /// Manifest slugs that do not run, and why.
    pub skipped: Vec<SkippedView>,
    /// Recorded slugs whose script changed since.
    pub checksum_mismatches: Vec<MismatchView>,
    /// Non-fatal observations.
    pub warnings: Vec<String>,
}

impl PlanView {
    /// Builds the document from a plan.
    pub fn new(plan: &Plan, ledger: &str) -> Self {
        PlanView {
            ledger: ledger.to_owned(),
            tier: plan.request.tiers.to_string(),
            only: plan.request.only.as_ref().map(ToString::to_string),
            fresh_install: plan.fresh_install,
            seed: plan
                .seed
                .iter()
                .map(|s| SeedView {
                    slug: s.slug.to_string(),
                    kind: match s.kind {
                        SeedKind::FreshInstall => "fresh-install",
                        SeedKind::Legacy => "legacy",
                        SeedKind::Revoked => "revoked",
                    },
                    state: s.entry.state.as_str(),
                })
                .collect(),
            pending: plan
                .pending
                .iter()
                .map(|p| PendingView {
                    slug: p.slug.to_string(),
                    tier: p.tier.as_str(),
                    on_error: p.on_error.as_str(),
                    batch: p.batch.clone(),
                    path: p.relative_path.display().to_string(),
                    sha256: p.sha256.to_string(),
                    attempts_before: p.previous.as_ref().map_or(0, |e| e.attempts),
                    requires: p.requires.iter().map(ToString::to_string).collect(),
                    unmet: p
                        .unmet
                        .iter()
                        .map(|(slug, why)| UnmetView {
                            slug: slug.to_string(),
                            reason: why.to_string(),
                        })
                        .collect(),
                })
                .collect(),
            skipped: plan
                .skipped
                .iter()
                .map(|s| {
                    let (reason, state) = match &s.reason {
                        SkipReason::Recorded(state) => ("recorded", Some(state.as_str())),
                        SkipReason::Revoked => ("revoked", None),
                        SkipReason::Retired => ("retired", None),
                        SkipReason::OtherTier(_) => ("other-tier", None),
                    };
                    SkippedView {
                        slug: s.slug.to_string(),
                        reason,
                        state,
                    }
                })
                .collect(),
            checksum_mismatches: plan
                .checksum_mismatches
                .iter()
                .map(|m| MismatchView {
                    slug: m.slug.to_string(),
                    recorded: m.recorded.to_string(),
                    on_disk: m.on_disk.to_string(),
                })
                .collect(),
            warnings: plan.warnings.iter().map(ToString::to_string).collect(),
        }
    }

    /// Text for people.
    pub fn text(&self, colour: bool) -> String {
        let mut out = String::new();
        let only = self
            .only
            .as_ref()
            .map(|o| format!(", ONLY={o}"))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "{}",
            paint(
                &format!("plan for tier {}{only} on {}", self.tier, self.ledger),
                Colour::Bold,
                colour
            )
        );
        if self.fresh_install {
            let _ = writeln!(
                out,
                "fresh install: the ledger will be created with {} entries; nothing runs",
                self.seed.len()
            );
        } else if !self.seed.is_empty() {
            let mut kinds: BTreeMap<&str, usize> = BTreeMap::new();
            for s in &self.seed {
                *kinds.entry(s.kind).or_default() += 1;
            }
            let parts: Vec<String> = kinds.iter().map(|(k, n)| format!("{n} {k}")).collect();
            let _ = writeln!(out, "seed before running: {}", parts.join(", "));
        }
        if self.pending.is_empty() {
            let _ = writeln!(out, "{}", paint("nothing pending", Colour::Green, colour));
        } else {
            let _ = writeln!(out, "pending ({}):", self.pending.len());
            let rows: Vec<Vec<String>> = self
                .pending
                .iter()
                .enumerate()
                .map(|(i, p)| {
                    let mut note = String::new();
                    if !p.requires.is_empty() {
                        note = format!("requires {}", p.requires.join(", "));
                    }
                    if !p.unmet.is_empty() {
                        let unmet: Vec<String> = p
                            .unmet
                            .iter()
                            .map(|u| format!("{} {}", u.slug, u.reason))
                            .collect();
                        note = paint(
                            &format!("BLOCKED: {}", unmet.join("; ")),
                            Colour::Red,
                            colour,
                        );
                    }
                    if p.attempts_before > 0 {
                        note = format!("{note} (re-run; {} attempt(s) so far)", p.attempts_before)
                            .trim()
                            .to_owned();
                    }
                    vec![
                        format!("  {}.", i + 1),
                        p.slug.clone(),
                        p.tier.to_owned(),
                        p.on_error.to_owned(),
                        p.batch.clone(),
                        note,
                    ]
                })
                .collect();
            out.push_str(&table(&rows));
        }
        if !self.skipped.is_empty() {
            let mut reasons: BTreeMap<&str, usize> = BTreeMap::new();
            for s in &self.skipped {
                *reasons.entry(s.reason).or_default() += 1;
            }
            let parts: Vec<String> = reasons.iter().map(|(r, n)| format!("{n} {r}")).collect();
            let _ = writeln!(
                out,
                "{}",
                paint(
                    &format!("skipped: {}", parts.join(", ")),
                    Colour::Dim,
                    colour
                )
            );
        }
        for m in &self.checksum_mismatches {
            let _ = writeln!(
                out,
                "{}",
                paint(
                    &format!(
                        "warning: {} changed on disk since it was recorded (recorded {}, now {}); it is not re-run",
                        m.slug, m.recorded, m.on_disk
                    ),
                    Colour::Yellow,
                    colour
                )
            );
        }
        for w in &self.warnings {
            let _ = writeln!(
                out,
                "{}",
                paint(&format!("warning: {w}"), Colour::Yellow, colour)
            );
        }
        out
    }
}

/// One entry in the `status` document.
#[derive(Debug, Serialize)]
pub struct EntryView {
    /// The slug.
    pub slug: String,
    /// The state.
    pub state: &'static str,
    /// When it was recorded.
    pub at: String,
    /// Real executions.
    pub attempts: u32,
    /// The batch.
    pub batch: Option<String>,
    /// The image it ran from.
    pub image: Option<String>,
    /// The script checksum.
    pub sha256: Option<String>,
    /// Failure reason.
    pub reason: Option<String>,
    /// Failure detail.
    pub message: Option<String>,
}

/// A corrupt key in the `status` document.
#[derive(Debug, Serialize)]
pub struct CorruptView {
    /// The key.
    pub key: String,
    /// Why it does not parse.
    pub reason: String,
}

/// The `status` document.
#[derive(Debug, Serialize)]
pub struct StatusView {
    /// The ledger described.
    pub ledger: String,
    /// Whether the ledger object exists.
    pub exists: bool,
    /// The legacy integer, when present and valid.
    pub version: Option<u64>,
    /// The raw `version` value when it is not an integer.
    pub version_corrupt: Option<String>,
    /// Entry counts by state.
    pub counts: BTreeMap<&'static str, usize>,
    /// Entries: failures first, then by slug.
    pub entries: Vec<EntryView>,
    /// Keys whose values (or names) do not parse.
    pub corrupt: Vec<CorruptView>,
}

impl StatusView {
    /// Builds the document from a snapshot (`None`: no ledger object).
    pub fn new(snapshot: Option<&LedgerSnapshot>, ledger: &str) -> Self {
        let mut view = StatusView {
            ledger: ledger.to_owned(),
            exists: snapshot.is_some(),
            version: None,
            version_corrupt: None,
            counts: BTreeMap::new(),
            entries: Vec::new(),
            corrupt: Vec::new(),
        };
        let Some(snapshot) = snapshot else {
            return view;
        };
        match &snapshot.version {
            LegacyVersion::Known(v) => view.version = Some(*v),
            LegacyVersion::Corrupt { raw } => view.version_corrupt = Some(raw.clone()),
            LegacyVersion::Absent => {}
        }
        for (slug, record) in &snapshot.records {
            match record {
                Record::Entry(e) => {
                    *view.counts.entry(e.state.as_str()).or_default() += 1;
                    view.entries.push(EntryView {
                        slug: slug.to_string(),
                        state: e.state.as_str(),
                        at: e.at.to_string(),
                        attempts: e.attempts,
                        batch: e.batch.clone(),
                        image: e.image.clone(),
                        sha256: e.sha256.map(|d| d.to_string()),
                        reason: e.reason.clone(),
                        message: e.message.clone(),
                    });
                }
                Record::Corrupt(c) => view.corrupt.push(CorruptView {
                    key: c.key.clone(),
                    reason: c.reason.clone(),
                }),
            }
        }
        for c in &snapshot.unreadable_keys {
            view.corrupt.push(CorruptView {
                key: c.key.clone(),
                reason: c.reason.clone(),
            });
        }
        // Failures first: that is what a person opens the status for.
        view.entries.sort_by(|a, b| {
            (a.state != EntryState::Failed.as_str(), &a.slug)
                .cmp(&(b.state != EntryState::Failed.as_str(), &b.slug))
        });
        view
    }

    /// Text for people.
    pub fn text(&self, colour: bool) -> String {
        let mut out = String::new();
        if !self.exists {
            let _ = writeln!(
                out,
                "{}: no ledger (a fresh install will create it)",
                self.ledger
            );
            return out;
        }
        let counts: Vec<String> = self
            .counts
            .iter()
            .map(|(s, n)| format!("{n} {s}"))
            .collect();
        let version = match (&self.version, &self.version_corrupt) {
            (Some(v), _) => format!(", legacy version {v}"),
            (None, Some(raw)) => format!(", legacy version CORRUPT ({raw:?})"),
            _ => String::new(),
        };
        let summary = if counts.is_empty() {
            "empty".to_owned()
        } else {
            counts.join(", ")
        };
        let _ = writeln!(
            out,
            "{}",
            paint(
                &format!("{}: {summary}{version}", self.ledger),
                Colour::Bold,
                colour
            )
        );
        let mut rows = vec![vec![
            "SLUG".to_owned(),
            "STATE".to_owned(),
            "WHEN".to_owned(),
            "ATTEMPTS".to_owned(),
            "BATCH".to_owned(),
            "REASON".to_owned(),
        ]];
        for e in &self.entries {
            let state = match e.state {
                "failed" => paint(e.state, Colour::Red, colour),
                "ok" => paint(e.state, Colour::Green, colour),
                other => other.to_owned(),
            };
            let reason = match (&e.reason, &e.message) {
                (Some(r), Some(m)) => format!("{r}: {}", m.lines().last().unwrap_or("")),
                (Some(r), None) => r.clone(),
                _ => String::new(),
            };
            rows.push(vec![
                e.slug.clone(),
                state,
                e.at.clone(),
                e.attempts.to_string(),
                e.batch.clone().unwrap_or_default(),
                reason,
            ]);
        }
        if self.entries.is_empty() {
            let _ = writeln!(out, "no entries");
        } else {
            out.push_str(&table(&rows));
        }
        for c in &self.corrupt {
            let _ = writeln!(
                out,
                "{}",
                paint(
                    &format!("CORRUPT {}: {}", c.key, c.reason),
                    Colour::Red,
                    colour
                )
            );
        }
        out
    }
}

/// The document printed for any error in JSON mode.
#[derive(Debug, Serialize)]
pub struct ErrorView {
    /// `bad-input`, `refused`, `environment`, `migration-failed`, `verify-failed`.
    pub error: &'static str,
    /// The process exit code.
    pub exit_code: u8,
    /// One line per problem.
    pub problems: Vec<String>,
}

/// One batch in the `manifest` document.
#[derive(Debug, Serialize)]
pub struct BatchView {
    /// The file name.
    pub name: String,
    /// The lines.
    pub entries: Vec<BatchLineView>,
}

/// One manifest line.
#[derive(Debug, Serialize)]
pub struct BatchLineView {
    /// The slug.
    pub slug: String,
    /// Whether its script was deleted after shipping.
    pub retired: bool,
}

/// The `manifest` document.
#[derive(Debug, Serialize)]
pub struct ManifestView {
    /// The batches in order.
    pub batches: Vec<BatchView>,
    /// Where the files were written, if `--out` was given.
    pub written_to: Option<String>,
}

impl ManifestView {
    /// Builds the document.
    pub fn new(manifest: &migration_core::Manifest, written_to: Option<String>) -> Self {
        ManifestView {
            batches: manifest
                .batches()
                .iter()
                .map(|b| BatchView {
                    name: b.name.to_string(),
                    entries: b
                        .entries
                        .iter()
                        .map(|e| BatchLineView {
                            slug: e.slug.to_string(),
                            retired: e.retired,
                        })
                        .collect(),
                })
                .collect(),
            written_to,
        }
    }

    /// Text: the files themselves, or a summary when they were written.
    pub fn text(&self, manifest: &migration_core::Manifest) -> String {
        let mut out = String::new();
        match &self.written_to {
            Some(dir) => {
                let lines: usize = self.batches.iter().map(|b| b.entries.len()).sum();
                let _ = writeln!(
                    out,
                    "wrote {} batch file(s), {lines} line(s), to {dir}",
                    self.batches.len()
                );
            }
            None => {
                for (name, contents) in manifest.render() {
                    let _ = writeln!(out, "==> {name} <==");
                    out.push_str(&contents);
                }
            }
        }
        out
    }
}
