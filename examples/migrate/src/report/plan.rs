//! The `plan` document: what would be seeded, run and skipped.

use std::fmt::Write as _;

use migration_core::plan::{ChecksumMismatch, SeedKind, SkipReason};
use migration_core::{Plan, Slug};
use serde::Serialize;

use super::{Colour, counted, paint, paint_line, table};

/// A seeded entry in the plan document.
#[derive(Debug, Serialize)]
pub struct SeedView<'a> {
    /// The slug.
    pub slug: &'a str,
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
    /// The target is `not-yet`: the migration waits with it (recorded
    /// `not-yet`) instead of failing.
    pub waits: bool,
}

/// A pending migration in the plan document.
#[derive(Debug, Serialize)]
pub struct PendingView<'a> {
    /// The slug.
    pub slug: &'a Slug,
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
    /// It is recorded `not-yet` (this reason): it did not do its work on an
    /// earlier run and runs again now.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_yet: Option<String>,
    /// The last `on-error=abort` failure the ledger keeps for it: it stopped
    /// an earlier run, and runs again now.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_failure: Option<super::LastFailureView>,
}

/// A skipped manifest slug.
#[derive(Debug, Serialize)]
pub struct SkippedView<'a> {
    /// The slug.
    pub slug: &'a str,
    /// `recorded`, `revoked`, `retired` or `other-tier`.
    pub reason: &'static str,
    /// The recorded state, for `recorded`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<&'static str>,
}

/// The `plan` document, borrowing the plan's slugs (a plan of 10^5
/// scripts would otherwise hold every skipped name twice).
#[derive(Debug, Serialize)]
pub struct PlanView<'a> {
    /// The ledger described.
    pub ledger: String,
    /// `pre-apply`, `background` or `all`.
    pub tier: String,
    /// The ONLY slug, if any.
    pub only: Option<String>,
    /// No ledger object existed.
    pub fresh_install: bool,
    /// Why this is a fresh install (`null` when it is not).
    pub fresh_install_reason: Option<String>,
    /// Entries written before anything runs.
    pub seed: Vec<SeedView<'a>>,
    /// Migrations that run, in order.
    pub pending: Vec<PendingView<'a>>,
    /// Manifest slugs that do not run, and why.
    pub skipped: Vec<SkippedView<'a>>,
    /// Recorded slugs whose script changed since.
    pub checksum_mismatches: Vec<ChecksumMismatch>,
    /// Non-fatal observations.
    pub warnings: Vec<String>,
}

impl<'a> PlanView<'a> {
    /// Builds the document from a plan.
    pub fn new(plan: &'a Plan, ledger: &str) -> Self {
        PlanView {
            ledger: ledger.to_owned(),
            tier: plan.request.tiers.to_string(),
            only: plan.request.only.as_ref().map(ToString::to_string),
            fresh_install: plan.fresh_install,
            fresh_install_reason: plan
                .fresh_install
                .then(|| super::fresh_install_reason(ledger)),
            seed: plan
                .seed
                .iter()
                .map(|s| SeedView {
                    slug: s.slug.as_str(),
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
                    slug: &p.slug,
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
                            waits: why.defers(),
                        })
                        .collect(),
                    not_yet: p
                        .previous
                        .as_ref()
                        .filter(|e| e.state == migration_core::EntryState::NotYet)
                        .map(|e| e.reason.clone().unwrap_or_default()),
                    last_failure: None,
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
                        slug: s.slug.as_str(),
                        reason,
                        state,
                    }
                })
                .collect(),
            checksum_mismatches: plan.checksum_mismatches.clone(),
            warnings: plan.warnings.iter().map(ToString::to_string).collect(),
        }
    }

    /// Counts executions started but never recorded (the ledger's attempt
    /// marks) in each pending slug's earlier attempts: an `on-error=abort`
    /// failure leaves only the mark.
    pub fn note_attempts(
        &mut self,
        started: &std::collections::BTreeMap<migration_core::Slug, u32>,
    ) {
        // A lookup per pending slug: both lists can run to the whole tree
        // (a search of every mark per pending slug was quadratic).
        for p in &mut self.pending {
            if let Some(count) = started.get(p.slug) {
                p.attempts_before = p.attempts_before.max(*count);
            }
        }
    }

    /// Attaches the last failures the ledger keeps (`f.<slug>`) to the
    /// pending slugs they belong to: what stopped an earlier run.
    pub fn note_failures(
        &mut self,
        failures: &std::collections::BTreeMap<
            migration_core::Slug,
            migration_core::last_failure::LastFailure,
        >,
    ) {
        if failures.is_empty() {
            return;
        }
        for p in &mut self.pending {
            p.last_failure = failures.get(p.slug).map(Into::into);
        }
    }

    /// Text for people: the seeded and skipped slugs by count, or (with
    /// `wide`) each by name.
    pub fn text(&self, colour: bool, wide: bool) -> String {
        let mut out = String::new();
        let only = self
            .only
            .as_ref()
            .map(|o| format!(", ONLY={o}"))
            .unwrap_or_default();
        let heading = format!("plan for tier {}{only} on {}", self.tier, self.ledger);
        paint_line(&mut out, &heading, Colour::Bold, colour);
        if self.fresh_install {
            let _ = writeln!(
                out,
                "fresh install: the ledger will be created with {} entries; nothing runs",
                self.seed.len()
            );
        } else if !self.seed.is_empty() {
            let kinds = counted(self.seed.iter().map(|s| s.kind));
            let _ = writeln!(out, "seed before running: {kinds}");
        }
        if wide && !self.seed.is_empty() {
            let rows = self.seed.iter().map(|s| {
                vec![
                    format!("  {}", s.slug),
                    s.kind.to_owned(),
                    s.state.to_owned(),
                ]
            });
            out.push_str(&table(&["  SEEDED", "KIND", "STATE"], rows));
        }
        if self.pending.is_empty() {
            paint_line(&mut out, "nothing pending", Colour::Green, colour);
        } else {
            let _ = writeln!(out, "pending ({}):", self.pending.len());
            let header = [
                "  #", "SLUG", "TIER", "ON-ERROR", "BATCH", "ATTEMPTS", "NOTE",
            ];
            let rows = self.pending.iter().enumerate().map(|(i, p)| {
                vec![
                    format!("  {}.", i + 1),
                    p.slug.to_string(),
                    p.tier.to_owned(),
                    p.on_error.to_owned(),
                    p.batch.clone(),
                    p.attempts_before.to_string(),
                    p.note(colour),
                ]
            });
            out.push_str(&table(&header, rows));
        }
        if !self.skipped.is_empty() {
            let reasons = counted(self.skipped.iter().map(|s| s.reason));
            let hint = if wide { "" } else { " (--wide names them)" };
            paint_line(
                &mut out,
                &format!("skipped: {reasons}{hint}"),
                Colour::Dim,
                colour,
            );
            if wide {
                let rows = self.skipped.iter().map(|s| {
                    vec![
                        format!("  {}", s.slug),
                        s.reason.to_owned(),
                        s.state.unwrap_or("").to_owned(),
                    ]
                });
                out.push_str(&table(&["  SKIPPED", "REASON", "STATE"], rows));
            }
        }
        for m in &self.checksum_mismatches {
            // ONLY=slug re-runs it on purpose: "not re-run" would be false.
            let what = if self.only.as_deref() == Some(m.slug.as_str()) {
                "it is re-run (ONLY)"
            } else {
                "it is not re-run"
            };
            let warning = format!(
                "warning: {} changed on disk since it was recorded (recorded {}, now {}); {what}",
                m.slug, m.recorded, m.on_disk
            );
            paint_line(&mut out, &warning, Colour::Yellow, colour);
        }
        for w in &self.warnings {
            paint_line(&mut out, &format!("warning: {w}"), Colour::Yellow, colour);
        }
        out
    }
}

impl PendingView<'_> {
    /// The last column of its row in the text plan: what it requires, or
    /// why it is blocked, and how often it ran before.
    fn note(&self, colour: bool) -> String {
        let mut note = String::new();
        if !self.requires.is_empty() {
            note = format!("requires {}", self.requires.join(", "));
        }
        if !self.unmet.is_empty() {
            let unmet: Vec<String> = self
                .unmet
                .iter()
                .map(|u| format!("{} {}", u.slug, u.reason))
                .collect();
            let (label, shade) = if self.unmet.iter().all(|u| u.waits) {
                ("WAITS (not yet)", Colour::Yellow)
            } else {
                ("BLOCKED", Colour::Red)
            };
            note = paint(&format!("{label}: {}", unmet.join("; ")), shade, colour);
        }
        if let Some(reason) = &self.not_yet {
            let again = format!("not yet before ({reason}), runs again");
            note = format!("{note} {}", paint(&again, Colour::Yellow, colour))
                .trim()
                .to_owned();
        }
        if let Some(f) = &self.last_failure {
            // The ledger's text is anybody's: escaped.
            let failed = format!("last failed {} ({})", f.at, super::printable(&f.reason));
            note = format!("{note} {}", paint(&failed, Colour::Red, colour))
                .trim()
                .to_owned();
        }
        if self.attempts_before > 0 {
            note = format!("{note} (re-run)").trim().to_owned();
        }
        note
    }
}
