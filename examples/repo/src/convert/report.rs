//! What a conversion did: per script its slug, status, every change found
//! (with its line in the numbered script) and the diff of the safe
//! rewrites; the diverged slots; the `lib/` helpers. Text for people,
//! `--output json` for tools; both are stable for equal inputs.

use serde::Serialize;

use super::Options;
use super::behaviour::Behaviour;
use super::history::History;
use super::layout::Written;
use super::patterns::Change;
use super::slots::SlotPlan;

/// One script's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    /// Nothing to change but the header.
    Clean,
    /// Every change has a safe rewrite, shown as a diff, not applied.
    Rewritable,
    /// Every change had a safe rewrite, and `--rewrite` applied it.
    Rewritten,
    /// Some change must be made by hand (see its line).
    Review,
}

impl Status {
    /// The status of a script with these changes.
    pub fn of(changes: &[Change], rewrite: bool) -> Status {
        if changes.is_empty() {
            Status::Clean
        } else if changes.iter().any(|c| !c.rewritable) {
            Status::Review
        } else if rewrite {
            Status::Rewritten
        } else {
            Status::Rewritable
        }
    }

    /// The status as the text report prints it.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Clean => "clean",
            Status::Rewritable => "rewritable",
            Status::Rewritten => "rewritten",
            Status::Review => "review",
        }
    }
}

/// One converted script.
#[derive(Debug, Clone, Serialize)]
pub struct ScriptReport {
    /// Its integer.
    pub number: u64,
    /// Its slug.
    pub slug: String,
    /// The numbered script, relative to the repository.
    pub source: String,
    /// The converted script, relative to `--out`.
    pub target: String,
    /// Whether `#!/bin/sh` was added (the script had no shebang).
    pub shebang_added: bool,
    /// Its status.
    pub status: Status,
    /// Every change found, by line of `source`.
    pub changes: Vec<Change>,
    /// The unified diff of the safe rewrites on `target` (empty: none).
    pub diff: String,
    /// The behaviour check of what `--rewrite` writes.
    pub behaviour: Behaviour,
}

/// The behaviour check's counts.
#[derive(Debug, Clone, Default, Serialize)]
pub struct BehaviourTotals {
    /// Scripts whose every path agreed up to the stamp.
    pub passed: usize,
    /// Scripts with a path that differs (each is `review`).
    pub differed: usize,
    /// Scripts the check could not run (not passed).
    pub could_not_run: usize,
    /// Scripts not checked (`--no-behaviour-check`; not passed).
    pub skipped: usize,
    /// Failure paths compared in the passing scripts, by class
    /// ([`super::behaviour::FailureClass::name`]).
    pub classes: std::collections::BTreeMap<String, usize>,
    /// Of them, the paths where the conversion fails closed.
    pub fail_closed: usize,
}

/// Counts over the scripts.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Summary {
    /// Scripts converted.
    pub scripts: usize,
    /// Of which clean.
    pub clean: usize,
    /// Of which with safe rewrites only (applied or not).
    pub rewritable: usize,
    /// Of which needing review.
    pub review: usize,
    /// Slots that held more than one content.
    pub diverged_slots: usize,
    /// Changes by kind: `[kind, rewritable, to review]`.
    pub changes: Vec<(String, usize, usize)>,
    /// The behaviour check, by result.
    pub behaviour: BehaviourTotals,
}

/// The whole report.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// `--path`.
    pub path: String,
    /// `--tag-pattern`.
    pub tag_pattern: String,
    /// `--skip-prereleases`.
    pub skip_prereleases: bool,
    /// Tags read (all lines).
    pub tags_read: usize,
    /// The newest tag merged into HEAD, if any.
    pub newest_line_tag: Option<String>,
    /// `--out`.
    pub out: String,
    /// Whether it was written or already held this conversion.
    pub written: Written,
    /// Whether `--rewrite` was given.
    pub rewrite: bool,
    /// Whether each script requires the one before it (without
    /// `--no-chain`).
    pub chain: bool,
    /// Counts.
    pub summary: Summary,
    /// Every script, in integer order.
    pub scripts: Vec<ScriptReport>,
    /// Slots with more than one content, with each content's slug and tags.
    pub diverged: Vec<SlotPlan>,
    /// The stamp helpers found under `lib/`.
    pub stamp_helpers: Vec<String>,
    /// Helpers left out of `lib/` (stamp helpers no script sources after
    /// the rewrite).
    pub dropped_lib: Vec<String>,
    /// Files of the numbered directory that are neither scripts nor `lib/`.
    pub ignored: Vec<String>,
    /// Entries of the `lint-baseline` written: blocking lint findings left
    /// in the frozen scripts, each to be reviewed before it is committed.
    pub baseline_entries: usize,
    /// `lib/` helpers whose handled failures were carried to
    /// `migrate-tolerate` (or are left for review).
    pub helpers: Vec<HelperReport>,
}

impl Report {
    /// Assembles the report.
    pub fn new(
        options: &Options,
        history: &History,
        plans: &[SlotPlan],
        scripts: Vec<ScriptReport>,
        stamp_helpers: Vec<String>,
        dropped_lib: Vec<String>,
        written: Written,
    ) -> Report {
        let mut summary = Summary {
            scripts: scripts.len(),
            ..Summary::default()
        };
        let mut kinds: std::collections::BTreeMap<&str, (usize, usize)> = Default::default();
        for s in &scripts {
            match s.status {
                Status::Clean => summary.clean += 1,
                Status::Rewritable | Status::Rewritten => summary.rewritable += 1,
                Status::Review => summary.review += 1,
            }
            let b = &mut summary.behaviour;
            match &s.behaviour {
                Behaviour::Passed {
                    classes,
                    fail_closed,
                    ..
                } => {
                    b.passed += 1;
                    b.fail_closed += *fail_closed;
                    for (class, n) in classes {
                        *b.classes.entry((*class).to_owned()).or_default() += n;
                    }
                }
                Behaviour::Differed { .. } => b.differed += 1,
                Behaviour::CouldNotRun { .. } => b.could_not_run += 1,
                Behaviour::Skipped => b.skipped += 1,
            }
            for c in &s.changes {
                let k = kinds.entry(c.kind).or_default();
                if c.rewritable {
                    k.0 += 1;
                } else {
                    k.1 += 1;
                }
            }
        }
        summary.changes = kinds
            .into_iter()
            .map(|(k, (a, b))| (k.to_owned(), a, b))
            .collect();
        let diverged: Vec<SlotPlan> = plans
            .iter()
            .filter(|p| p.variants.len() > 1)
            .cloned()
            .collect();
        summary.diverged_slots = diverged.len();
        Report {
            path: options.path.clone(),
            tag_pattern: options.tag_pattern.clone(),
            skip_prereleases: options.skip_prereleases,
            tags_read: history.tags.len(),
            newest_line_tag: history.newest_line_tag().and_then(|t| t.tag.clone()),
            out: options.out.display().to_string(),
            written,
            rewrite: options.rewrite,
            chain: options.chain,
            summary,
            scripts,
            diverged,
            stamp_helpers,
            dropped_lib,
            ignored: history.disk.other.clone(),
            baseline_entries: 0,
            helpers: Vec::new(),
        }
    }

    /// The text form.
    pub fn text(&self) -> String {
        let s = &self.summary;
        let mut out = format!(
            "converted {} scripts of {} ({} tags matching {:?} read{}; newest on this line: {}) into {} ({})\n",
            s.scripts,
            self.path,
            self.tags_read,
            self.tag_pattern,
            if self.skip_prereleases {
                ", pre-releases skipped"
            } else {
                ""
            },
            self.newest_line_tag.as_deref().unwrap_or("none"),
            self.out,
            match self.written {
                Written::Written => "written",
                Written::Unchanged => "already held this conversion; unchanged",
            }
        );
        out.push_str(&format!(
            "  {} clean, {} {}, {} to review; {} diverged slot(s)\n",
            s.clean,
            s.rewritable,
            if self.rewrite {
                "rewritten"
            } else {
                "with safe rewrites (apply with --rewrite)"
            },
            s.review,
            s.diverged_slots
        ));
        let b = &s.behaviour;
        if b.skipped > 0 {
            out.push_str(&format!(
                "  behaviour check: skipped for {} script(s) (--no-behaviour-check): nothing proves those conversions behave as the originals\n",
                b.skipped
            ));
        } else {
            out.push_str(&format!(
                "  behaviour check: {} passed, {} differed, {} could not run (each script and its conversion under the same fake cluster commands)\n",
                b.passed, b.differed, b.could_not_run
            ));
            if !b.classes.is_empty() {
                let per: Vec<String> = b.classes.iter().map(|(c, n)| format!("{c} {n}")).collect();
                out.push_str(&format!(
                    "  failure paths passed by class: {} ({} of them failing closed)\n",
                    per.join(", "),
                    b.fail_closed
                ));
            }
        }
        for (kind, safe, review) in &s.changes {
            out.push_str(&format!(
                "  {kind}: {safe} rewritable, {review} to review\n"
            ));
        }
        out.push_str(if self.chain {
            "  requires chain: each script requires the one numbered before it (the nearest that never diverged), as the numbered runner never ran N+1 before N; a script answering not-yet (exit 75) holds back every later one, related or not, until it succeeds (--no-chain drops the chain; the legacy batch still runs in integer order)\n"
        } else {
            "  no requires chain (--no-chain): the legacy batch runs in integer order, and a script answering not-yet (exit 75) holds back only the scripts that require it\n"
        });
        if !self.diverged.is_empty() {
            out.push_str("\ndiverged slots (one slug per content; see ADOPTING.md):\n");
            for d in &self.diverged {
                out.push_str(&format!(
                    "  {}: legacy-map line '{}'\n",
                    d.number,
                    d.legacy_line()
                ));
                for v in &d.variants {
                    out.push_str(&format!(
                        "    {}{} sha256 {} in {}\n",
                        v.slug,
                        if v.on_disk { " (this tree)" } else { "" },
                        &v.sha256[..12],
                        if v.tags.is_empty() {
                            "no tag".to_owned()
                        } else {
                            v.tags.join(" ")
                        }
                    ));
                }
            }
        }
        out.push('\n');
        for script in &self.scripts {
            out.push_str(&format!(
                "{} -> {}: {}; behaviour: {}\n",
                script.source,
                script.target,
                script.status.as_str(),
                script.behaviour.summary()
            ));
            changes_text(&mut out, &script.source, &script.changes);
        }
        out.push_str(&helpers_text(&self.helpers));
        if !self.stamp_helpers.is_empty() {
            out.push_str(&format!(
                "\nstamp helpers: {}\n",
                self.stamp_helpers.join(", ")
            ));
        }
        if !self.dropped_lib.is_empty() {
            out.push_str(&format!(
                "left out of lib/: {}\n",
                self.dropped_lib.join(", ")
            ));
        }
        if self.baseline_entries > 0 {
            out.push_str(&format!(
                "lint-baseline: {} finding(s) lint would block in the frozen scripts, each accepted with its reason; review every entry before committing it (ADOPTING.md, \"Frozen scripts\")\n",
                self.baseline_entries
            ));
        }
        if !self.ignored.is_empty() {
            out.push_str(&format!(
                "not converted (neither a numbered script nor lib/): {}\n",
                self.ignored.join(", ")
            ));
        }
        let diffs: Vec<&str> = self
            .scripts
            .iter()
            .map(|s| s.diff.as_str())
            .filter(|d| !d.is_empty())
            .collect();
        if !diffs.is_empty() {
            out.push_str(if self.rewrite {
                "\napplied rewrites:\n"
            } else {
                "\nproposed rewrites (--rewrite applies them):\n"
            });
            for d in diffs {
                out.push_str(d);
            }
        }
        out
    }
}

/// A `lib/` helper with handled failures: what convert found and did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct HelperReport {
    /// The helper, relative to the converted tree (`lib/x.sh`).
    pub file: String,
    /// `rewritten` (or `rewritable` without `--rewrite`), or `review`.
    pub status: Status,
    /// Every handled failure found, by line of the helper.
    pub changes: Vec<Change>,
    /// The unified diff of the safe rewrites (empty: none).
    pub diff: String,
}

/// The text report's lines for the helpers.
pub fn helpers_text(helpers: &[HelperReport]) -> String {
    let mut out = String::new();
    for h in helpers {
        out.push_str(&format!("{}: {}\n", h.file, h.status.as_str()));
        changes_text(&mut out, &h.file, &h.changes);
        out.push_str(&h.diff);
    }
    out
}

/// The text report's line of each of `changes` in `file`.
fn changes_text(out: &mut String, file: &str, changes: &[Change]) {
    for c in changes {
        let how = if c.rewritable { "rewritable" } else { "review" };
        out.push_str(&format!(
            "  {file}:{}: {} [{how}]: {}\n",
            c.line, c.kind, c.message
        ));
    }
}
