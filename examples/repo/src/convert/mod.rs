//! `migrate convert`: turns a numbered migrations directory (`<N>` scripts,
//! `lib/`, run by a "version integer" runner) into the slug layout
//! (ADOPTING.md, "Converting a numbered tree").
//!
//! - [`history`] reads the working tree's directory and every release tag's.
//! - [`slots`] finds slots that held different contents and names them.
//! - [`patterns`] finds the runner's conventions on the syntax tree and
//!   proposes line edits; [`diff`] shows them.
//! - [`layout`] renders and writes the tree; [`report`] says what was done.
//!
//! The output is a pure function of the inputs (no clock, no host names), so
//! converting twice gives the same bytes.

pub mod behaviour;
pub mod carried;
pub mod diff;
pub mod handled;
pub mod history;
pub mod layout;
pub mod patterns;
pub mod report;
pub mod slots;

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::git::GitError;
use patterns::PatternConfig;
use report::{Report, ScriptReport, Status};

/// What to convert, and how.
#[derive(Debug, Clone)]
pub struct Options {
    /// The repository (a full clone with its tags).
    pub repo: PathBuf,
    /// The numbered directory inside it.
    pub path: String,
    /// Where older tags kept it (it moved): each tag is read at `path` or
    /// at the one of these it has.
    pub old_paths: Vec<String>,
    /// Release tags to read (glob).
    pub tag_pattern: String,
    /// Where to write the slug layout.
    pub out: PathBuf,
    /// Apply the safe rewrites (default: only report them as diffs).
    pub rewrite: bool,
    /// The ledger ConfigMap's name, whose `version` key the scripts stamp.
    pub ledger_name: String,
    /// Read no pre-release tag: the maintainer states that no cluster ever
    /// ran one, so contents only a pre-release held are not candidates.
    pub skip_prereleases: bool,
    /// Clusters ran pre-releases: a content only a pre-release held is one
    /// of a diverged slot's `others` (by default it names a slug but is no
    /// candidate: production clusters install final releases).
    pub count_prereleases: bool,
    /// The marker the converted scripts' headers are written with.
    pub header_marker: migration_core::header::HeaderMarker,
    /// What the new tree's `migrate.toml` holds: the settings the
    /// conversion was given, so later calls need not repeat them. Nothing
    /// set writes no file.
    pub settings: migration_core::Settings,
    /// New slugs for numbered slots (`--slug-map`); empty: the integers.
    pub slug_map: slots::SlugMap,
    /// Each converted script requires the one before it (the default: a
    /// script answering not-yet then holds back every later one); off with
    /// `--no-chain`.
    pub chain: bool,
    /// The numbered runner's target at each release tag
    /// (`--release-targets`), written into `legacy-releases` as
    /// `target=N`; a tag it does not name gets none.
    pub release_targets: slots::ReleaseTargets,
    /// Run each script and its conversion under recording fakes and
    /// compare them ([`behaviour`]); `None` (`--no-behaviour-check`):
    /// every script is reported `skipped`.
    pub behaviour: Option<behaviour::Settings>,
}

/// Why a conversion did not happen. Nothing is written in any case.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConvertError {
    /// The history could not be read.
    #[error(transparent)]
    Git(#[from] GitError),
    /// A file could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// A symlink in the numbered directory.
    #[error("{}: a symlink; the converted tree must not depend on its target", path.display())]
    Symlink {
        /// The link.
        path: PathBuf,
    },
    /// A numbered name with a leading zero.
    #[error("{place}: a numbered name with a leading zero; the runner would call it without")]
    BadName {
        /// Where.
        place: String,
    },
    /// No numbered script on disk.
    #[error("no numbered script (a file named by a decimal integer) in the directory")]
    NoSlots,
    /// A slot missing on disk that the legacy map must cover.
    #[error(
        "slot {number} is not on disk, but the numbered range covers it (tags holding it: {}): a cluster past it ran it, and the legacy map would have a gap; restore the script, or retire it by hand",
        if tags.is_empty() { "none".to_owned() } else { tags.join(", ") }
    )]
    Gap {
        /// The integer.
        number: u64,
        /// Tags holding it.
        tags: Vec<String>,
    },
    /// A proposed slug is not a slug (a tag too long, say).
    #[error("slot {number}: proposed slug {name:?} is not a slug: {reason}")]
    BadSlug {
        /// The integer.
        number: u64,
        /// The name.
        name: String,
        /// Why.
        reason: String,
    },
    /// A script that is not UTF-8 text.
    #[error("{path}: not UTF-8 text; it cannot be given a header")]
    NotText {
        /// The numbered script.
        path: String,
    },
    /// A `--release-targets` refused: every problem, each naming the file
    /// and line.
    #[error("{}", problems.join("; "))]
    ReleaseTargets {
        /// The problems.
        problems: Vec<String>,
    },
    /// A `--slug-map` refused: every problem, each naming the file and line.
    #[error("{}", problems.join("; "))]
    SlugMap {
        /// The problems.
        problems: Vec<String>,
    },
    /// `--out` holds something other than this conversion.
    #[error(
        "{}: not empty and not an identical earlier conversion ({detail}); choose an empty directory or remove it",
        out.display()
    )]
    OutNotEmpty {
        /// The directory.
        out: PathBuf,
        /// The first difference.
        detail: String,
    },
}

/// The header lines of a converted script. Each one after the first
/// requires the script before it: the numbered runner never ran N+1 before
/// N had stamped, and a script that answers "not yet" (exit 75) must hold
/// back the ones numbered after it rather than let them run out of order
/// (CONTRACT.md §7.4: dependents wait with it).
fn header(previous: Option<&str>, marker: &migration_core::header::HeaderMarker) -> String {
    migration_core::header::render_header(
        marker,
        migration_core::Tier::PreApply,
        migration_core::OnError::Abort,
        previous.as_slice(),
    )
}

/// Converts, writes `--out` (unless it already holds this conversion) and
/// returns the report.
pub fn convert(options: &Options) -> Result<Report, ConvertError> {
    let history = history::read(
        &options.repo,
        &options.path,
        &options.old_paths,
        &options.tag_pattern,
        options.skip_prereleases,
        options.count_prereleases,
    )?;
    let plans = slots::analyse(&history, &options.slug_map)?;
    let config = patterns::stamp_config(&history.disk.lib, &options.ledger_name);
    let mut files: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    let mut scripts = Vec::new();
    // What `--rewrite` writes (or would), for the behaviour check.
    let mut proposed = Vec::new();
    for (i, plan) in plans.iter().enumerate() {
        let previous = if options.chain {
            slots::chain_target(&plans, i).map(ToString::to_string)
        } else {
            None
        };
        let source = format!("{}/{}", options.path.trim_matches('/'), plan.number);
        let bytes = &history.disk.slots[&plan.number];
        let text = std::str::from_utf8(bytes).map_err(|_| ConvertError::NotText {
            path: source.clone(),
        })?;
        let (headered, offset, shebang_added) =
            with_header(text, &header(previous.as_deref(), &options.header_marker));
        let mut analysis = patterns::analyse(text, &config);
        handled::merge(&mut analysis, handled::analyse(text));
        handled::merge(&mut analysis, carried::analyse(text));
        // The rewrite removes stamps only; if nothing else is left to run,
        // the stamp was not all the script did, or the slot only stamped:
        // either way a person decides, it is not "rewritten".
        if !analysis.edits.is_empty()
            && !patterns::runs_a_command(&diff::apply(text, &analysis.edits))
        {
            analysis.changes.insert(
                0,
                patterns::Change {
                    kind: "no-command-left",
                    line: 1,
                    message: "the rewrite leaves this script without a command: check that the stamp was all it did (then it can stay a script that runs ':'), or restore what the rewrite removed".into(),
                    rewritable: false,
                },
            );
        }
        let shifted: BTreeMap<usize, Option<String>> = analysis
            .edits
            .iter()
            .map(|(l, e)| (l + offset, e.clone()))
            .collect();
        let target = format!("pre-apply/{}", plan.slug());
        let diff = diff::unified(&target, &headered, &shifted);
        let rewritten = diff::apply(&headered, &shifted);
        let output = if options.rewrite {
            rewritten.clone()
        } else {
            headered.clone()
        };
        proposed.push(rewritten);
        let status = Status::of(&analysis.changes, options.rewrite);
        files.insert(target.clone(), output.into_bytes());
        // Lint wants a test per migration; like `migrate new`, the stub fails
        // until someone writes it, so CI cannot pass on a test that is not there.
        files.insert(
            format!("tests/{}.sh", plan.slug()),
            format!(
                "#!/bin/sh\n# The test of pre-apply/{slug}, converted from {source}.\nset -eu\necho \"TODO: write the test for {slug}\" >&2\nexit 1\n",
                slug = plan.slug()
            )
            .into_bytes(),
        );
        scripts.push(ScriptReport {
            number: plan.number,
            slug: plan.slug().to_string(),
            source,
            target,
            shebang_added,
            status,
            changes: analysis.changes,
            diff,
            behaviour: behaviour::Behaviour::Skipped,
        });
    }
    // lib/: copied; with --rewrite a stamp helper no script sources any more
    // is dropped (it writes the ledger, which the engine refuses). Whether
    // it goes is read on the rewritten scripts with or without --rewrite:
    // the behaviour check runs what --rewrite writes.
    let mut dropped = Vec::new();
    let mut helpers = Vec::new();
    let mut converted_lib = BTreeMap::new();
    for (rel, bytes) in &history.disk.lib {
        // Still used: a script sources it in a way the rewrite left alone.
        let needle = format!("sources the stamp helper lib/{rel}");
        let still_used = scripts.iter().any(|s| {
            s.changes
                .iter()
                .any(|c| !c.rewritable && c.message.starts_with(&needle))
        }) || proposed
            .iter()
            .any(|text| sources_textually(text.as_bytes(), rel))
            || called_from_other_helpers(rel, &config, &history.disk.lib);
        if config.stamp_helpers.contains(rel) && !still_used {
            if options.rewrite {
                dropped.push(format!("lib/{rel}"));
                continue;
            }
        } else {
            // What --rewrite writes for it (its handled failures carried to
            // migrate-tolerate), which the behaviour check runs.
            let (_, rewritten) = handled::helper(rel, bytes, true);
            converted_lib.insert(rel.clone(), rewritten);
        }
        let (found, bytes) = handled::helper(rel, bytes, options.rewrite);
        helpers.extend(found);
        files.insert(format!("lib/{rel}"), bytes);
    }
    files.insert("legacy-map".into(), legacy_map(&plans).into_bytes());
    if let Some(text) = slots::legacy_releases(&history, &plans, &options.release_targets)? {
        files.insert(
            migration_core::seeding::RELEASES_FILE.into(),
            text.into_bytes(),
        );
    }
    files.insert(
        "revoked".into(),
        b"# Slugs that must not run (CONTRACT.md section 8.1), one a line.\n".to_vec(),
    );
    // The settings it was given, for the calls on the new tree (and for
    // the lint below, which reads the tree's header marker from it).
    if options.settings != migration_core::Settings::default() {
        files.insert(
            migration_core::SETTINGS_FILE.into(),
            options.settings.to_toml().into_bytes(),
        );
    }
    check_behaviour(
        options,
        &history.disk,
        &converted_lib,
        &proposed,
        &mut scripts,
    )?;
    let (baseline_text, baseline_entries) = frozen_baseline(&files, &scripts, options)?;
    files.insert(
        migrate_lint::shell::baseline::FILE.into(),
        baseline_text.into_bytes(),
    );
    let written = layout::write(&options.out, &files)?;
    let mut report = Report::new(
        options,
        &history,
        &plans,
        scripts,
        config
            .stamp_helpers
            .iter()
            .map(|h| format!("lib/{h}"))
            .collect(),
        dropped,
        written,
    );
    report.baseline_entries = baseline_entries;
    report.helpers = helpers;
    Ok(report)
}

/// Runs the behaviour check on every script (or marks each `skipped`); a
/// script whose conversion behaves otherwise than its original gets a
/// `behaviour` change to review.
fn check_behaviour(
    options: &Options,
    disk: &history::Snapshot,
    converted_lib: &BTreeMap<String, Vec<u8>>,
    proposed: &[String],
    scripts: &mut [ScriptReport],
) -> Result<(), ConvertError> {
    let Some(settings) = &options.behaviour else {
        return Ok(());
    };
    let libs = behaviour::Libs {
        numbered: &disk.lib,
        converted: converted_lib,
    };
    let checks: Vec<behaviour::Script<'_>> = scripts
        .iter()
        .zip(proposed)
        .map(|(script, text)| behaviour::Script {
            number: script.number,
            slug: &script.slug,
            original: &disk.slots[&script.number],
            converted: text,
            stamps: script.changes.iter().any(|c| c.kind == "version-stamp"),
        })
        .collect();
    let results =
        behaviour::check_all(settings, &checks, libs).map_err(|source| ConvertError::Io {
            path: std::env::temp_dir(),
            source,
        })?;
    for (script, result) in scripts.iter_mut().zip(results) {
        if let behaviour::Behaviour::Differed { difference, .. } = &result {
            script.changes.insert(
                0,
                patterns::Change {
                    kind: "behaviour",
                    line: 1,
                    message: difference.clone(),
                    rewritable: false,
                },
            );
            script.status = Status::of(&script.changes, options.rewrite);
        }
        script.behaviour = result;
    }
    Ok(())
}

/// The `lint-baseline` of the converted tree: one entry per finding lint
/// would block in a converted script or helper, and per shebang other than
/// the tree's dialect. The numbered scripts ran on
/// clusters as they are and must not change (a changed script is another
/// content), so what the safe rewrites leave is accepted here, in the open,
/// each with its reason, for a person to review; the run-time tripwire
/// still guards every run. A ledger write is never accepted.
fn frozen_baseline(
    files: &BTreeMap<String, Vec<u8>>,
    scripts: &[ScriptReport],
    options: &Options,
) -> Result<(String, usize), ConvertError> {
    use migrate_lint::shell::baseline;
    let io = |path: PathBuf| move |source| ConvertError::Io { path, source };
    let scratch = tempfile::tempdir().map_err(io(std::env::temp_dir()))?;
    for (rel, bytes) in files {
        let path = scratch.path().join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(io(parent.to_path_buf()))?;
        }
        std::fs::write(&path, bytes).map_err(io(path.clone()))?;
    }
    let config = migrate_lint::LintConfig {
        ledger_name: options.ledger_name.clone(),
        shellcheck: migrate_lint::shell::shellcheck::Settings {
            level: None,
            ..Default::default()
        },
        ..Default::default()
    };
    let report =
        migrate_lint::lint_tree(scratch.path(), &config).map_err(|e| ConvertError::Io {
            path: scratch.path().to_path_buf(),
            source: std::io::Error::other(e.to_string()),
        })?;
    let mut text = String::from(
        "# Written by 'migrate convert': findings lint would block in the converted\n\
         # numbered scripts, which must not change (they ran on clusters as they are).\n\
         # Review every entry: keep it, or fix the script before its first release\n\
         # under the engine. FILE:LINE RULE SHA256-OF-THE-FILE REASON\n",
    );
    let mut count = 0;
    for f in &report.findings {
        let (Some(line), Some(bytes)) = (f.line, files.get(&f.file)) else {
            continue;
        };
        // A frozen script's shebang is what it ran under: a dialect other
        // than the tree's cannot be fixed without changing the content.
        let frozen = migrate_lint::BLOCKING_RULES.contains(&f.rule) || f.rule == "shell-dialect";
        if !frozen || baseline::NEVER.contains(&f.rule) {
            continue;
        }
        let reason = match scripts.iter().find(|s| s.target == f.file) {
            Some(s) => format!(
                "frozen legacy script, converted from {}: it ran under the numbered runner as it is; the tripwire guards it at run time",
                s.source
            ),
            None => "frozen legacy helper: the numbered scripts ran with it as it is; the tripwire guards it at run time".to_owned(),
        };
        text.push_str(&baseline::line(
            &f.file,
            line,
            f.rule,
            &baseline::digest(bytes),
            &reason,
        ));
        count += 1;
    }
    Ok((text, count))
}

/// The script with `header` after its shebang (one is added when missing): the text, how far its lines moved, and whether a shebang
/// was added.
fn with_header(text: &str, header: &str) -> (String, usize, bool) {
    let lines = header.lines().count();
    match text.split_once('\n') {
        Some((first, rest)) if first.starts_with("#!") => {
            (format!("{first}\n{header}{rest}"), lines, false)
        }
        _ if text.starts_with("#!") => (format!("{text}\n{header}"), lines, false),
        _ => (format!("#!/bin/sh\n{header}{text}"), lines + 1, true),
    }
}

/// Whether a line of `script` looks like `.`/`source` of `lib/<rel>` in a
/// spelling the rewrite does not know (an absolute path, say): then the
/// helper stays.
fn sources_textually(script: &[u8], rel: &str) -> bool {
    String::from_utf8_lossy(script).lines().any(|l| {
        let l = l.trim_start();
        (l.starts_with(". ") || l.starts_with("source ")) && l.contains(&format!("lib/{rel}"))
    })
}

/// Whether another `lib/` file names helper `rel` or calls one of its
/// functions that is not a stamp: then `rel` stays with it.
fn called_from_other_helpers(
    rel: &str,
    config: &PatternConfig,
    lib: &BTreeMap<String, Vec<u8>>,
) -> bool {
    let functions = config.helper_functions.get(rel);
    lib.iter()
        .filter(|(other, _)| other.as_str() != rel)
        .any(|(_, bytes)| {
            let text = String::from_utf8_lossy(bytes);
            text.contains(&format!("lib/{rel}"))
                || functions.is_some_and(|fs| {
                    fs.iter().any(|f| {
                        !config.stamp_functions.contains(f)
                            && text
                                .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                                .any(|t| t == f)
                    })
                })
        })
}

/// The `legacy-map` file: every slot, in integer order.
fn legacy_map(plans: &[slots::SlotPlan]) -> String {
    let mut out = String::from(
        "# Written by 'migrate convert'. A cluster whose 'version' is V ran every\n\
         # integer below V; 'others=' lists contents the slot held elsewhere\n\
         # (CONTRACT.md section 6.2).\n",
    );
    for plan in plans {
        out.push_str(&plan.legacy_line());
        out.push('\n');
    }
    out
}
