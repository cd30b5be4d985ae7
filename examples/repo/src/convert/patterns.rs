//! The numbered runner's conventions that must change under the engine,
//! found on the shell syntax tree (brush-parser, as lint does): version
//! stamping, `$(dirname "$0")/lib` paths, "retry later" exits and dry-run
//! switches. Each is either a line edit that is safe to apply (offered as a
//! diff, applied with `--rewrite`) or a finding to review, with its line.

use std::collections::{BTreeMap, BTreeSet};

use migrate_lint::shell::ast;
use serde::Serialize;

use migrate_lint::shell::parse;

/// The exit status a rewritten "retry later" exit uses: the engine's "not
/// yet" outcome, defined once in core.
pub const NOT_YET_STATUS: i32 = migration_core::run::NOT_YET_EXIT_STATUS;

/// What the patterns are matched against.
#[derive(Debug, Clone, Default)]
pub struct PatternConfig {
    /// The ledger ConfigMap's name (`cozystack-version`).
    pub ledger_name: String,
    /// `lib/` paths of the helpers that stamp the version (define a stamp
    /// or a render function).
    pub stamp_helpers: BTreeSet<String>,
    /// Functions that stamp and do nothing else: calling one is the stamp.
    pub stamp_functions: BTreeSet<String>,
    /// Functions that print a ledger ConfigMap manifest without calling the
    /// cluster: applying their output writes the ledger.
    pub render_functions: BTreeSet<String>,
    /// Every function each `lib/` helper defines (by `lib/`-relative path):
    /// a script calling one that is not a stamp still needs the helper.
    pub helper_functions: BTreeMap<String, BTreeSet<String>>,
    /// Per render function, what its manifest sets besides `version`,
    /// when that is only labels and annotations ([`LedgerNotes`]).
    pub render_notes: BTreeMap<String, LedgerNotes>,
}

/// The labels and annotations a render function's ledger manifest sets,
/// its one data key being `version`: applying it is the stamp plus these
/// notes, which `kubectl label`/`annotate` can set without the stamp.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LedgerNotes {
    /// `metadata.namespace` as written (it may expand a variable).
    pub namespace: String,
    /// `metadata.labels`, in order.
    pub labels: Vec<(String, String)>,
    /// `metadata.annotations`, in order.
    pub annotations: Vec<(String, String)>,
}

impl LedgerNotes {
    /// Reads a manifest of the shape `apiVersion`, `kind: ConfigMap`,
    /// `metadata` (`name` the ledger, `namespace`, `labels`,
    /// `annotations`) and `data` holding `version` alone, two spaces an
    /// indent; `None` for anything else, or a key under the engine's own
    /// prefix, or a label or annotation whose key or value expands a
    /// variable.
    pub fn read(manifest: &str, ledger_name: &str) -> Option<LedgerNotes> {
        let mut notes = LedgerNotes::default();
        let (mut section, mut sub) = ("", "");
        let mut named = false;
        for line in manifest.lines() {
            if line.trim().is_empty() || line.trim_start().starts_with('#') {
                continue;
            }
            let indent = line.len() - line.trim_start().len();
            let (key, value) = line.trim().split_once(':')?;
            let value = value.trim().trim_matches('"').trim_matches('\'');
            match indent {
                0 => {
                    section = key;
                    sub = "";
                    match key {
                        "apiVersion" if value == "v1" => {}
                        "kind" if value == "ConfigMap" => {}
                        "metadata" | "data" if value.is_empty() => {}
                        _ => return None,
                    }
                }
                2 => {
                    sub = key;
                    match (section, key) {
                        ("metadata", "name") if value == ledger_name => named = true,
                        ("metadata", "namespace") => notes.namespace = value.to_owned(),
                        ("metadata", "labels" | "annotations") if value.is_empty() => {}
                        ("data", "version") => {}
                        _ => return None,
                    }
                }
                4 => {
                    let spelled = |t: &str| {
                        !t.is_empty()
                            && t.chars().all(|c| {
                                c.is_ascii_alphanumeric() || matches!(c, '.' | '/' | '_' | '-')
                            })
                    };
                    if !spelled(key)
                        || key.starts_with(migration_core::keys::ENGINE_KEY_PREFIX)
                        || !value
                            .chars()
                            .all(|c| c.is_ascii_alphanumeric() || "._-/:".contains(c))
                    {
                        return None;
                    }
                    let pair = (key.to_owned(), value.to_owned());
                    match (section, sub) {
                        ("metadata", "labels") => notes.labels.push(pair),
                        ("metadata", "annotations") => notes.annotations.push(pair),
                        _ => return None,
                    }
                }
                _ => return None,
            }
        }
        (named && !notes.namespace.is_empty()).then_some(notes)
    }

    /// The calls setting the notes on the ledger, one a line.
    fn commands(&self, ledger_name: &str, indent: &str) -> Vec<String> {
        let mut out = Vec::new();
        for (verb, pairs) in [("label", &self.labels), ("annotate", &self.annotations)] {
            if pairs.is_empty() {
                continue;
            }
            let set: Vec<String> = pairs.iter().map(|(k, v)| format!("{k}={v}")).collect();
            out.push(format!(
                "{indent}kubectl {verb} configmap --namespace \"{}\" {ledger_name} {} --overwrite",
                self.namespace,
                set.join(" ")
            ));
        }
        out
    }
}

/// Reads the `lib/` helpers (by `lib/`-relative path) for stamps: a
/// function is a stamp when every command in it is the stamp (a cluster
/// command naming the ledger and its `version`, or applying a render
/// function's output, or calling another stamp) or inert (`:`, `echo`,
/// plain assignments). A function that also does other work is not a
/// stamp: removing its calls would remove that work too.
pub fn stamp_config(lib: &BTreeMap<String, Vec<u8>>, ledger_name: &str) -> PatternConfig {
    let mut config = PatternConfig {
        ledger_name: ledger_name.to_owned(),
        ..PatternConfig::default()
    };
    // (helper, function, its command lists' simples)
    let mut functions: Vec<(String, String, Vec<Vec<Simple<'_>>>)> = Vec::new();
    let programs: Vec<(String, ast::Program)> = lib
        .iter()
        .filter_map(|(rel, bytes)| {
            let text = String::from_utf8_lossy(bytes);
            parse::program(&text).ok().map(|p| (rel.clone(), p))
        })
        .collect();
    for (rel, program) in &programs {
        let mut names = BTreeSet::new();
        for list in &program.complete_commands {
            for item in &list.0 {
                for p in pipelines_of(&item.0) {
                    for c in &p.seq {
                        if let ast::Command::Function(f) = c {
                            let mut items = Vec::new();
                            for l in parse::compound_lists(&f.body.0) {
                                item_simples(l, &mut items);
                            }
                            names.insert(f.fname.value.clone());
                            functions.push((rel.clone(), f.fname.value.clone(), items));
                        }
                    }
                }
            }
        }
        config.helper_functions.insert(rel.clone(), names);
    }
    let words = |simples: &[Simple<'_>]| -> Vec<String> {
        simples
            .iter()
            .flat_map(|s| s.words.iter().chain(&s.heredocs))
            .map(|w| w.value.clone())
            .collect()
    };
    for (rel, name, items) in &functions {
        let all: Vec<String> = items.iter().flat_map(|i| words(i)).collect();
        let cluster = items.iter().flatten().any(is_kubectl);
        if !cluster && names_ledger_version(&all, ledger_name) {
            config.render_functions.insert(name.clone());
            config.stamp_helpers.insert(rel.clone());
            let docs: Vec<&str> = items
                .iter()
                .flatten()
                .flat_map(|s| s.heredocs.iter().map(|d| d.value.as_str()))
                .collect();
            if let [doc] = docs.as_slice()
                && let Some(notes) = LedgerNotes::read(doc, ledger_name)
            {
                config.render_notes.insert(name.clone(), notes);
            }
        }
    }
    // A stamp may call another stamp: repeat until nothing changes.
    loop {
        let mut changed = false;
        for (rel, name, items) in &functions {
            if config.stamp_functions.contains(name) {
                continue;
            }
            let stamp_item = |simples: &Vec<Simple<'_>>| {
                let called = |set: &BTreeSet<String>| {
                    simples
                        .iter()
                        .filter_map(|s| s.words.first().and_then(|w| parse::literal(&w.value)))
                        .any(|n| set.contains(&n))
                };
                called(&config.stamp_functions)
                    || (simples.iter().any(is_kubectl)
                        && (names_ledger_version(&words(simples), ledger_name)
                            || called(&config.render_functions)))
            };
            let stamps = items.iter().filter(|i| stamp_item(i)).count();
            let inert = items.iter().filter(|i| i.iter().all(is_inert)).count();
            if stamps > 0 && stamps + inert == items.len() {
                config.stamp_functions.insert(name.clone());
                config.stamp_helpers.insert(rel.clone());
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    config
}

/// Whether these words name the ledger ConfigMap and its `version` key.
fn names_ledger_version(words: &[String], ledger_name: &str) -> bool {
    words.iter().any(|w| w.contains(ledger_name))
        && words.iter().any(|w| {
            w.contains("version=")
                || w.contains("\"version\"")
                || w.contains("version:")
                || w.contains("/data/version")
        })
}

/// Commands that change nothing outside the script.
const INERT: &[&str] = &[":", "true", "echo", "printf", "local", "set", "return"];

/// A command that changes nothing outside the script: an inert builtin, or
/// assignments without a substitution.
fn is_inert(s: &Simple<'_>) -> bool {
    match s.words.first() {
        None => true,
        Some(first) => match parse::literal(&first.value) {
            Some(name) if INERT.contains(&name.as_str()) => true,
            _ => s.words.iter().all(|w| {
                w.value.split_once('=').is_some_and(|(n, v)| {
                    !n.is_empty()
                        && n.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
                        && !v.contains("$(")
                        && !v.contains('`')
                })
            }),
        },
    }
}

/// Whether a script runs any command beyond inert ones (see `is_inert`;
/// `.`/`source` and `exit` count as inert here): what a rewrite must never
/// leave a script without. Definitions of functions nobody calls run
/// nothing. A script that does not parse counts as running something
/// (its parse failure is reported on its own).
pub fn runs_a_command(text: &str) -> bool {
    let Ok(program) = parse::program(text) else {
        return true;
    };
    let mut items = Vec::new();
    for list in &program.complete_commands {
        item_simples(list, &mut items);
    }
    items.iter().flatten().any(|s| {
        let name = s.words.first().and_then(|w| parse::literal(&w.value));
        !(is_inert(s) || matches!(name.as_deref(), Some(".") | Some("source") | Some("exit")))
    })
}

fn pipelines_of(ao: &ast::AndOrList) -> impl Iterator<Item = &ast::Pipeline> {
    std::iter::once(&ao.first).chain(ao.additional.iter().map(|a| match a {
        ast::AndOr::And(p) | ast::AndOr::Or(p) => p,
    }))
}

/// The simple commands of each and-or list in `list`, compound commands'
/// lists as lists of their own; function definitions are skipped (they run
/// when called).
fn item_simples<'p>(list: &'p ast::CompoundList, out: &mut Vec<Vec<Simple<'p>>>) {
    for item in &list.0 {
        let mut simples = Vec::new();
        for p in pipelines_of(&item.0) {
            for c in &p.seq {
                match c {
                    ast::Command::Simple(s) => simples.push(simple(s)),
                    ast::Command::Compound(cc, _) => {
                        for l in parse::compound_lists(cc) {
                            item_simples(l, out);
                        }
                    }
                    ast::Command::Function(_) | ast::Command::ExtendedTest(..) => {}
                }
            }
        }
        if !simples.is_empty() {
            out.push(simples);
        }
    }
}

/// One change found in a script.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Change {
    /// `version-stamp`, `lib-path`, `retry-later-exit`, `dry-run-switch`,
    /// `ledger-write`, `ledger-annotate`, `shell-parse`, `no-command-left`;
    /// [`super::handled::KIND`], [`super::carried::KIND`] and `behaviour`
    /// from the other analyses.
    pub kind: &'static str,
    /// One-based line in the numbered script.
    pub line: usize,
    /// What was found and what is done about it.
    pub message: String,
    /// True when a safe edit exists (shown in the diff, applied by
    /// `--rewrite`); false when it must be reviewed by hand.
    pub rewritable: bool,
}

/// The result for one script: line edits (one-based line to its new text,
/// `None` to delete) and every change found.
#[derive(Debug, Clone, Default)]
pub struct Analysis {
    /// Edits by line.
    pub edits: BTreeMap<usize, Option<String>>,
    /// Everything found, by line.
    pub changes: Vec<Change>,
}

impl Analysis {
    /// Notes a finding of `kind` on `line`: `rewritable` when an edit this
    /// analysis makes answers it, otherwise it is left for review.
    pub fn change(&mut self, kind: &'static str, line: usize, message: String, rewritable: bool) {
        self.changes.push(Change {
            kind,
            line,
            message,
            rewritable,
        });
    }
}

/// Spellings of "the directory of this script" that point at `lib/` next
/// to the numbered scripts; under the slug layout the script is one level
/// down (`pre-apply/<slug>`), so they become `$MIGRATION_TREE/lib/`.
const SCRIPT_DIR_LIB: &[&str] = &[
    "$(dirname \"$0\")/lib/",
    "$(dirname $0)/lib/",
    "$(dirname -- \"$0\")/lib/",
    "${0%/*}/lib/",
    "`dirname $0`/lib/",
    "`dirname \"$0\"`/lib/",
];

/// Finds the patterns in one script's text.
pub fn analyse(text: &str, config: &PatternConfig) -> Analysis {
    let mut walk = Walk {
        config,
        lines: text.split('\n').collect(),
        out: Analysis::default(),
        dry_vars: BTreeSet::from(["MIGRATION_DRY_RUN".to_owned()]),
        stamped: Vec::new(),
        stamps: 0,
        exits: Vec::new(),
        dry_lines: BTreeSet::new(),
        dry_assigned: BTreeMap::new(),
        dry_read: BTreeMap::new(),
        dry_unplaced: false,
        tokens: text
            .lines()
            .filter(|l| !l.trim_start().starts_with('#'))
            .flat_map(|l| l.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')))
            .filter(|t| !t.is_empty())
            .collect(),
        render_vars: BTreeMap::new(),
    };
    match parse::program(text) {
        Ok(program) => {
            // The program is one list: each newline-separated command is a
            // "complete command" of its own, but a stamp on one line still
            // comes before an `exit` on the next.
            walk.stamped.push(false);
            for list in &program.complete_commands {
                for item in &list.0 {
                    walk.item(item, Ctx::default(), false);
                }
            }
            walk.stamped.pop();
        }
        Err(e) => {
            walk.out.change(
                "shell-parse",
                e.line.unwrap_or(1),
                format!("does not parse ({}); nothing is rewritten", e.message),
                false,
            );
            return walk.out;
        }
    }
    walk.finish()
}

#[derive(Debug, Clone, Copy, Default)]
struct Ctx {
    in_function: bool,
    dry_branch: bool,
}

struct Walk<'a> {
    config: &'a PatternConfig,
    lines: Vec<&'a str>,
    out: Analysis,
    /// Variables holding the dry-run switch.
    dry_vars: BTreeSet<String>,
    /// One flag per enclosing list: has a stamp been passed in it yet.
    stamped: Vec<bool>,
    /// Stamps found (removed or not).
    stamps: usize,
    /// `exit 0` candidates: line, in a function, stamped before.
    exits: Vec<(usize, bool, bool)>,
    dry_lines: BTreeSet<usize>,
    /// Per variable derived from the dry-run switch: the line of its first
    /// assignment, and whether every assignment read nothing but the
    /// switch's own variables (no command, no other variable).
    dry_assigned: BTreeMap<String, (usize, bool)>,
    /// Per variable: the first line reading it, its assignments aside.
    dry_read: BTreeMap<String, usize>,
    /// A read the walk cannot place (`[[ ... ]]`): the switch is unproven.
    dry_unplaced: bool,
    /// Names written outside full-line comments: a function named here may
    /// be called (conservatively: a helper kept for nothing is harmless).
    tokens: BTreeSet<&'a str>,
    /// Variables assigned a render function's output, to that function.
    render_vars: BTreeMap<String, String>,
}

/// A simple command's words and the lines it spans.
struct Simple<'p> {
    words: Vec<&'p ast::Word>,
    heredocs: Vec<&'p ast::Word>,
    first: usize,
    last: usize,
    /// Inside a branch the dry-run switch guards.
    dry: bool,
}

impl<'a> Walk<'a> {
    fn list(&mut self, list: &ast::CompoundList, ctx: Ctx) {
        self.stamped.push(false);
        let alone = list.0.len() == 1;
        for item in &list.0 {
            self.item(item, ctx, alone);
        }
        self.stamped.pop();
    }

    fn item(&mut self, item: &ast::CompoundListItem, ctx: Ctx, alone: bool) {
        let ao = &item.0;
        let pipelines: Vec<&ast::Pipeline> = std::iter::once(&ao.first)
            .chain(ao.additional.iter().map(|a| match a {
                ast::AndOr::And(p) | ast::AndOr::Or(p) => p,
            }))
            .collect();
        let plain = ao.additional.is_empty()
            && !ao.first.bang
            && !matches!(item.1, ast::SeparatorOperator::Async);
        // `[ "$DRY_RUN" = 1 ] && { ...; exit 0; }` guards what follows as
        // an `if` would.
        let guard = ao.first.seq.iter().any(|c| match c {
            ast::Command::Simple(s) => simple(s).words.iter().any(|w| self.reads_dry(&w.value)),
            ast::Command::ExtendedTest(t, _) => {
                let reads = self.reads_dry(&format!("{t:?}"));
                self.dry_unplaced |= reads;
                reads
            }
            _ => false,
        });
        let mut simples = Vec::new();
        for (i, p) in pipelines.iter().enumerate() {
            let ctx = Ctx {
                dry_branch: ctx.dry_branch || (guard && i > 0),
                ..ctx
            };
            for c in &p.seq {
                match c {
                    ast::Command::Simple(s) => {
                        let mut s = simple(s);
                        s.dry = ctx.dry_branch;
                        simples.push(s)
                    }
                    ast::Command::Compound(cc, _) => self.compound(cc, ctx),
                    ast::Command::Function(f) => {
                        let inner = Ctx {
                            in_function: true,
                            ..ctx
                        };
                        for l in parse::compound_lists(&f.body.0) {
                            self.list(l, inner);
                        }
                    }
                    ast::Command::ExtendedTest(..) => {}
                }
            }
        }
        let all_simple = pipelines
            .iter()
            .all(|p| p.seq.iter().all(|c| matches!(c, ast::Command::Simple(_))));
        let (Some(first), Some(last)) = (
            simples.iter().map(|s| s.first).min(),
            simples.iter().map(|s| s.last).max(),
        ) else {
            return;
        };
        for s in &simples {
            self.dry_run_words(s);
            self.lib_paths(s);
        }
        // A stamp: the whole item goes, when it is nothing but the stamp.
        if let Some(kind) = self.stamp_kind(&simples) {
            self.stamps += 1;
            if let Some(top) = self.stamped.last_mut() {
                *top = true;
            }
            if plain && all_simple && self.owns_lines(first, last, &simples[0]) {
                for line in first..=last {
                    self.out.edits.insert(line, None);
                }
                if alone {
                    // The list must not become empty (`then fi` does not parse).
                    let indent: String = self.lines[first - 1]
                        .chars()
                        .take_while(|c| c.is_whitespace())
                        .collect();
                    self.out.edits.insert(first, Some(format!("{indent}:")));
                }
                self.out.change(
                    "version-stamp",
                    first,
                    format!("{kind}: removed (the runner records the outcome itself)"),
                    true,
                );
            } else {
                self.out.change(
                    "version-stamp",
                    first,
                    format!("{kind} inside a compound command list: remove it by hand"),
                    false,
                );
            }
            return;
        }
        if let Some((what, function)) = self.rendered_ledger_write(&simples) {
            let notes = self.config.render_notes.get(&function);
            if let (Some(notes), true) = (
                notes,
                plain && all_simple && self.owns_lines(first, last, &simples[0]),
            ) {
                self.stamps += 1;
                if let Some(top) = self.stamped.last_mut() {
                    *top = true;
                }
                let indent: String = self.lines[first - 1]
                    .chars()
                    .take_while(|c| c.is_whitespace())
                    .collect();
                let mut commands = notes.commands(&self.config.ledger_name, &indent);
                if commands.is_empty() {
                    commands.push(format!("{indent}:"));
                }
                for line in first..=last {
                    self.out.edits.insert(line, None);
                }
                self.out.edits.insert(first, Some(commands.join("\n")));
                self.out.change(
                    "version-stamp",
                    first,
                    format!("{what}: the 'version' it sets is the stamp, removed (the runner records the outcome itself); the labels and annotations it sets besides are kept as 'kubectl label'/'annotate' of the ledger object under those keys, outside the engine's (ledger-annotate, in the lint-baseline)"),
                    true,
                );
                return;
            }
            self.out.change(
                "ledger-write",
                first,
                format!("{what}: this is the version stamp, and the manifest may set more than 'version' (labels, annotations); remove it by hand and move what else it sets to the chart"),
                false,
            );
            return;
        }
        self.note_render_vars(&simples);
        if let Some(what) = self.ledger_note(&simples) {
            self.out.change(
                "ledger-annotate",
                first,
                format!("{what}: a note on the ledger object under keys of the script's own, each spelled out, outside the engine's; it cannot touch the entries or the run lock, the runner's ledger guard lets it through, and lint's ledger-annotate for it is accepted in the lint-baseline: kept as it is"),
                true,
            );
        } else if let Some(what) = self.ledger_write(&simples) {
            self.out.change(
                "ledger-write",
                first,
                format!("{what}: the engine refuses scripts that write the ledger; move it to the chart or drop it"),
                false,
            );
        }
        for s in &simples {
            let name = s.words.first().and_then(|w| parse::literal(&w.value));
            let arg = s.words.get(1).and_then(|w| parse::literal(&w.value));
            if name.as_deref() == Some("exit") && arg.as_deref() == Some("0") {
                if s.dry {
                    self.dry_lines.insert(s.first);
                } else {
                    let stamped = self.stamped.iter().any(|b| *b);
                    self.exits.push((s.first, ctx.in_function, stamped));
                }
            }
        }
    }

    fn compound(&mut self, cc: &ast::CompoundCommand, ctx: Ctx) {
        if let ast::CompoundCommand::IfClause(i) = cc {
            let dry = self.mentions_dry(&i.condition);
            self.list(&i.condition, ctx);
            let branch = Ctx {
                dry_branch: ctx.dry_branch || dry,
                ..ctx
            };
            self.list(&i.then, branch);
            for e in i.elses.iter().flatten() {
                if let Some(c) = &e.condition {
                    self.list(c, ctx);
                }
                // An else of a dry-run test is the real run.
                self.list(&e.body, ctx);
            }
            return;
        }
        for l in parse::compound_lists(cc) {
            self.list(l, ctx);
        }
    }

    /// Whether an `if` condition reads the dry-run switch.
    fn mentions_dry(&self, list: &ast::CompoundList) -> bool {
        let mut words = Vec::new();
        collect_words(list, &mut words);
        words.iter().any(|w| self.reads_dry(w))
    }

    fn reads_dry(&self, word: &str) -> bool {
        self.dry_vars
            .iter()
            .any(|v| word.contains(&format!("${v}")) || word.contains(&format!("${{{v}")))
    }

    fn dry_run_words(&mut self, s: &Simple) {
        for w in &s.words {
            // Every variable's first read, before it is known to be a
            // dry-run variable too (`[ "${DRY_RUN:-0}" = 1 ]` above the
            // assignment from MIGRATION_DRY_RUN).
            let value = w.value.split_once('=').map_or(w.value.as_str(), |(n, v)| {
                if !n.is_empty() && n.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
                    v
                } else {
                    w.value.as_str()
                }
            });
            let line = parse::word_line(w).unwrap_or(s.first);
            for v in expansions(value) {
                self.dry_read.entry(v.to_owned()).or_insert(line);
            }
            if self.reads_dry(&w.value) {
                let assigned = w.value.split_once('=').filter(|(name, _)| {
                    !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
                });
                if let Some((name, value)) = assigned {
                    // Only the switch's variables assigned so far: what the
                    // variable becomes is then fixed by MIGRATION_DRY_RUN.
                    let pure = !value.contains("$(")
                        && !value.contains('`')
                        && expansions(value).iter().all(|v| self.dry_vars.contains(*v));
                    let entry = self
                        .dry_assigned
                        .entry(name.to_owned())
                        .or_insert((line, true));
                    entry.1 &= pure;
                    self.dry_vars.insert(name.to_owned());
                }
                self.dry_lines.insert(line);
            }
        }
    }

    /// Whether the dry-run switch can only ever be off under the engine:
    /// its root is `MIGRATION_DRY_RUN`, which the runner never passes to a
    /// script (set in the runner's own environment, the run is the engine's
    /// dry run and executes nothing), and every variable derived from it is
    /// assigned from nothing else before anything reads it. The script then
    /// sees what it saw on every real run of the numbered runner.
    fn dry_switch_proven(&self) -> bool {
        !self.dry_unplaced
            && self.dry_vars.iter().all(|v| {
                v == "MIGRATION_DRY_RUN"
                    || self.dry_assigned.get(v).is_some_and(|(first, pure)| {
                        *pure && self.dry_read.get(v).is_none_or(|read| read > first)
                    })
            })
    }

    /// `$(dirname "$0")/lib/` in any word of the command.
    fn lib_paths(&mut self, s: &Simple) {
        let name = s.words.first().and_then(|w| parse::literal(&w.value));
        let sources = matches!(name.as_deref(), Some(".") | Some("source"));
        for w in &s.words {
            let Some(spelling) = SCRIPT_DIR_LIB.iter().find(|p| w.value.contains(**p)) else {
                continue;
            };
            let line = parse::word_line(w).unwrap_or(s.first);
            let helper = w
                .value
                .split_once(spelling)
                .map(|(_, rest)| rest.trim_end_matches(['"', '\'']).to_owned());
            if sources
                && let Some(h) = &helper
                && self.config.stamp_helpers.contains(h)
                && !self.calls_into(h)
            {
                // Sourcing the stamp helper: it goes with the stamps.
                let text = self.lines[line - 1].trim_start();
                if s.first == s.last && (text.starts_with(". ") || text.starts_with("source ")) {
                    self.out.edits.insert(line, None);
                    // Its `# shellcheck source=` directive would name a
                    // helper that is no longer shipped.
                    if line >= 2
                        && self.lines[line - 2].trim() == format!("# shellcheck source=lib/{h}")
                    {
                        self.out.edits.insert(line - 1, None);
                    }
                    self.out.change(
                        "version-stamp",
                        line,
                        format!("sources the stamp helper lib/{h}: removed"),
                        true,
                    );
                } else {
                    self.out.change(
                        "version-stamp",
                        line,
                        format!(
                            "sources the stamp helper lib/{h} in a compound line: remove it by hand"
                        ),
                        false,
                    );
                }
                continue;
            }
            let current = match self.out.edits.get(&line) {
                Some(Some(t)) => t.clone(),
                Some(None) => continue,
                None => self.lines[line - 1].to_owned(),
            };
            let replaced = current.replace(spelling, "$MIGRATION_TREE/lib/");
            if replaced != current {
                self.out.edits.insert(line, Some(replaced));
                self.out.change(
                    "lib-path",
                    line,
                    format!("{spelling} resolves to pre-apply/lib under the slug layout: now $MIGRATION_TREE/lib/"),
                    true,
                );
            }
        }
    }

    /// Whether the script may call a function of helper `h` other than a
    /// stamp (then sourcing `h` stays).
    fn calls_into(&self, h: &str) -> bool {
        self.config.helper_functions.get(h).is_some_and(|fs| {
            fs.iter().any(|f| {
                !self.config.stamp_functions.contains(f) && self.tokens.contains(f.as_str())
            })
        })
    }

    /// Whether the command list is a version stamp, and which kind.
    fn stamp_kind(&self, simples: &[Simple]) -> Option<String> {
        for s in simples {
            let name = s.words.first().and_then(|w| parse::literal(&w.value))?;
            if self.config.stamp_functions.contains(&name) {
                return Some(format!("calls the stamp helper {name}"));
            }
        }
        let text = self.text_of(simples);
        let names_ledger = text.iter().any(|w| w.contains(&self.config.ledger_name));
        let cluster = simples.iter().any(|s| is_kubectl(s));
        let version = text.iter().any(|w| {
            w.contains("version=")
                || w.contains("\"version\"")
                || w.contains("version:")
                || w.contains("/data/version")
        });
        (names_ledger && cluster && version)
            .then(|| format!("writes the 'version' key of {}", self.config.ledger_name))
    }

    /// `VAR=$(render ...)`: `VAR` holds the ledger manifest.
    fn note_render_vars(&mut self, simples: &[Simple]) {
        for s in simples {
            for w in &s.words {
                let Some((name, value)) = w.value.split_once('=') else {
                    continue;
                };
                if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
                {
                    continue;
                }
                if let Some(f) =
                    self.config.render_functions.iter().find(|f| {
                        value.contains(&format!("$({f}")) || value.contains(&format!("`{f}"))
                    })
                {
                    self.render_vars.insert(name.to_owned(), f.clone());
                }
            }
        }
    }

    /// A cluster command writing from stdin or a file in a list that calls
    /// a render function or reads a variable holding its output.
    fn rendered_ledger_write(&self, simples: &[Simple]) -> Option<(String, String)> {
        const WRITES: &[&str] = &["apply", "create", "replace"];
        let verb = simples.iter().filter(|s| is_kubectl(s)).find_map(|s| {
            s.words
                .iter()
                .skip(1)
                .filter_map(|w| parse::literal(&w.value))
                .find(|w| WRITES.contains(&w.as_str()))
        })?;
        let words = self.text_of(simples);
        let (function, via) = self
            .config
            .render_functions
            .iter()
            .find(|f| {
                words
                    .iter()
                    .any(|w| w == *f || w.contains(&format!("$({f}")))
            })
            .map(|f| (f.clone(), f.clone()))
            .or_else(|| {
                self.render_vars.iter().find_map(|(v, f)| {
                    words
                        .iter()
                        .any(|w| w.contains(&format!("${v}")) || w.contains(&format!("${{{v}")))
                        .then(|| (f.clone(), format!("{f} (through ${v})")))
                })
            })?;
        Some((
            format!(
                "kubectl {verb} of the ledger ConfigMap {} rendered by {via}",
                self.config.ledger_name
            ),
            function,
        ))
    }

    /// A cluster command naming the ledger with a writing verb.
    fn ledger_write(&self, simples: &[Simple]) -> Option<String> {
        const WRITES: &[&str] = &[
            "apply", "create", "patch", "replace", "edit", "delete", "label", "annotate", "set",
        ];
        for s in simples.iter().filter(|s| is_kubectl(s)) {
            let words: Vec<String> = s.words.iter().map(|w| w.value.clone()).collect();
            let verb = words.iter().skip(1).find(|w| WRITES.contains(&w.as_str()));
            let names = words
                .iter()
                .chain(s.heredocs.iter().map(|w| &w.value))
                .any(|w| w.contains(&self.config.ledger_name));
            if let (Some(verb), true) = (verb, names) {
                return Some(format!("kubectl {verb} on {}", self.config.ledger_name));
            }
        }
        None
    }

    /// Every kubectl call of the item naming the ledger is an `annotate`
    /// or `label` of keys outside the engine's ([`migrate_lint::shell::rules::notes_only`]).
    fn ledger_note(&self, simples: &[Simple]) -> Option<String> {
        let mut found = None;
        for s in simples.iter().filter(|s| is_kubectl(s)) {
            let words: Vec<String> = s.words.iter().map(|w| w.value.clone()).collect();
            let names = words
                .iter()
                .chain(s.heredocs.iter().map(|w| &w.value))
                .any(|w| w.contains(&self.config.ledger_name));
            if !names {
                continue;
            }
            if !migrate_lint::shell::rules::notes_only(&words) {
                return None;
            }
            let verb = words
                .iter()
                .skip(1)
                .find(|w| *w == "annotate" || *w == "label");
            found = verb.map(|v| format!("kubectl {v} on {}", self.config.ledger_name));
        }
        found
    }

    fn text_of(&self, simples: &[Simple]) -> Vec<String> {
        simples
            .iter()
            .flat_map(|s| s.words.iter().chain(&s.heredocs))
            .map(|w| w.value.clone())
            .collect()
    }

    /// True when lines `first..=last` hold this command and nothing else:
    /// the first line starts with its first word.
    fn owns_lines(&self, first: usize, _last: usize, s: &Simple) -> bool {
        let Some(w) = s.words.first() else {
            return false;
        };
        self.lines
            .get(first - 1)
            .is_some_and(|l| l.trim_start().starts_with(w.value.as_str()))
    }

    /// Classifies the `exit 0`s once the whole script is seen, and the
    /// dry-run lines.
    fn finish(mut self) -> Analysis {
        let exits = std::mem::take(&mut self.exits);
        if self.stamps > 0 {
            for (line, in_function, stamped) in exits {
                if stamped {
                    continue; // "done": exits after stamping
                }
                let text = self.lines[line - 1];
                if !in_function && text.matches("exit 0").count() == 1 {
                    let new = text.replace("exit 0", &format!("exit {NOT_YET_STATUS}"));
                    self.out.edits.insert(line, Some(new));
                    self.out.change(
                        "retry-later-exit",
                        line,
                        format!("exit 0 before the version stamp meant 'run me again next upgrade': now exit {NOT_YET_STATUS} (the engine would record exit 0 as ok for ever)"),
                        true,
                    );
                } else {
                    self.out.change(
                        "retry-later-exit",
                        line,
                        "exit 0 before the version stamp (in a function or a compound line): decide by hand whether it means 'run me again'".into(),
                        false,
                    );
                }
            }
        }
        let proven = self.dry_switch_proven();
        for line in std::mem::take(&mut self.dry_lines) {
            let message = if proven {
                "the script's own dry-run switch, read from MIGRATION_DRY_RUN alone: the runner never passes that variable to a script (set in the runner's environment, the whole run is the engine's dry run and executes nothing), so under the engine the switch is always off and the script takes its real path; left as it is".into()
            } else {
                "the script's own dry-run switch, which the environment can set past the runner (a variable read before it is assigned, or assigned from something other than MIGRATION_DRY_RUN): under the engine its exit 0 would record ok; use 'migrate plan' (or the engine's dry run) instead and drop the switch".into()
            };
            self.out.change("dry-run-switch", line, message, proven);
        }
        self.out.changes.sort_by_key(|c| c.line);
        self.out
    }
}

/// The variable names a word expands (`$NAME`, `${NAME...}`).
fn expansions(word: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = word;
    while let Some(at) = rest.find('$') {
        let after = &rest[at + 1..];
        let name = after.strip_prefix('{').unwrap_or(after);
        let len = name
            .bytes()
            .take_while(|b| b.is_ascii_alphanumeric() || *b == b'_')
            .count();
        if len > 0 {
            out.push(&name[..len]);
        }
        rest = after;
    }
    out
}

fn is_kubectl(s: &Simple) -> bool {
    s.words
        .first()
        .and_then(|w| parse::literal(&w.value))
        .is_some_and(|n| n == "kubectl" || n.ends_with("/kubectl"))
}

fn simple(s: &ast::SimpleCommand) -> Simple<'_> {
    let words = migrate_lint::shell::handled::words(s);
    let heredocs: Vec<_> = parse::items(s)
        .filter_map(|item| match item {
            ast::CommandPrefixOrSuffixItem::IoRedirect(ast::IoRedirect::HereDocument(_, d)) => {
                Some(&d.doc)
            }
            _ => None,
        })
        .collect();
    let first = words
        .iter()
        .filter_map(|w| parse::word_line(w))
        .min()
        .unwrap_or(1);
    // A heredoc's body follows the command's line, then its delimiter line
    // (the parser's span of the body is not that precise).
    let bodies: usize = heredocs
        .iter()
        .map(|d| d.value.matches('\n').count() + 1)
        .sum();
    let last = words
        .iter()
        .filter_map(|w| w.loc.as_ref().map(|l| l.end.line))
        .max()
        .unwrap_or(first)
        .max(first)
        + bodies;
    Simple {
        words,
        heredocs,
        first,
        last,
        dry: false,
    }
}

fn collect_words(list: &ast::CompoundList, out: &mut Vec<String>) {
    for item in &list.0 {
        let ao = &item.0;
        let pipelines = std::iter::once(&ao.first).chain(ao.additional.iter().map(|a| match a {
            ast::AndOr::And(p) | ast::AndOr::Or(p) => p,
        }));
        for p in pipelines {
            for c in &p.seq {
                match c {
                    ast::Command::Simple(s) => {
                        out.extend(simple(s).words.iter().map(|w| w.value.clone()))
                    }
                    ast::Command::ExtendedTest(t, _) => out.push(format!("{t:?}")),
                    ast::Command::Compound(cc, _) => {
                        for l in parse::compound_lists(cc) {
                            collect_words(l, out);
                        }
                    }
                    ast::Command::Function(_) => {}
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(text: &str) -> Vec<(&'static str, bool)> {
        let config = PatternConfig {
            ledger_name: "cozystack-version".into(),
            ..PatternConfig::default()
        };
        analyse(text, &config)
            .changes
            .into_iter()
            .map(|c| (c.kind, c.rewritable))
            .collect()
    }

    #[test]
    fn a_note_on_the_ledger_object_under_a_key_of_its_own_is_kept_not_left_to_review() {
        let text = "#!/bin/sh\nset -eu\nkubectl annotate configmap --namespace cozy-system cozystack-version \\\n  \"cozystack.io/migration-46-failed-tenants=$FAILED\" \\\n  --overwrite >/dev/null 2>&1 || true\nkubectl annotate configmap --namespace cozy-system cozystack-version \\\n  \"cozystack.io/migration-46-failed-tenants-\" >/dev/null 2>&1 || true\n";
        assert_eq!(
            kinds(text),
            [("ledger-annotate", true), ("ledger-annotate", true)]
        );
    }

    #[test]
    fn an_annotation_under_the_engines_keys_or_a_key_not_spelled_out_is_still_a_ledger_write() {
        for text in [
            "#!/bin/sh\nkubectl annotate configmap -n cozy-system cozystack-version migrations.cozystack.io/run-lock- --overwrite\n",
            "#!/bin/sh\nkubectl annotate configmap -n cozy-system cozystack-version \"$KEY=1\"\n",
            "#!/bin/sh\nkubectl patch configmap -n cozy-system cozystack-version -p '{}'\n",
        ] {
            assert_eq!(kinds(text), [("ledger-write", false)], "{text}");
        }
    }
}

#[cfg(test)]
mod rendered {
    #![allow(clippy::unwrap_used)]
    use super::*;

    const HELPER: &str = "render_version() {\n  cat <<EOF\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cozystack-version\n  namespace: ${NAMESPACE:-cozy-system}\n  labels:\n    platform.cozystack.io/no-delete: \"true\"\ndata:\n  version: \"$1\"\nEOF\n}\n";

    const SCRIPT: &str = "#!/bin/sh\nset -eu\n. \"$(dirname \"$0\")/lib/version.sh\"\nMANIFEST=$(render_version 43)\nprintf '%s\\n' \"$MANIFEST\" | kubectl apply --filename -\necho applied\n";

    fn config(helper: &str) -> PatternConfig {
        let lib = BTreeMap::from([("version.sh".to_owned(), helper.as_bytes().to_vec())]);
        stamp_config(&lib, "cozystack-version")
    }

    #[test]
    fn a_rendered_ledger_apply_setting_a_label_becomes_the_label_alone() {
        let found = analyse(SCRIPT, &config(HELPER));
        assert!(
            found.changes.iter().all(|c| c.rewritable),
            "{:?}",
            found.changes
        );
        assert_eq!(
            found.edits.get(&5),
            Some(&Some(
                "kubectl label configmap --namespace \"${NAMESPACE:-cozy-system}\" cozystack-version platform.cozystack.io/no-delete=true --overwrite".to_owned()
            ))
        );
        // What it writes is a note lint calls ledger-annotate, never a ledger write.
        let argv: Vec<String> = "kubectl label configmap --namespace ${NAMESPACE:-cozy-system} cozystack-version platform.cozystack.io/no-delete=true --overwrite"
            .split(' ')
            .map(String::from)
            .collect();
        assert!(migrate_lint::shell::rules::notes_only(&argv));
    }

    #[test]
    fn a_rendered_manifest_setting_more_than_notes_or_an_engine_key_is_left_to_review() {
        for helper in [
            HELPER.replace("  version: \"$1\"\n", "  version: \"$1\"\n  other: x\n"),
            HELPER.replace(
                "platform.cozystack.io/no-delete",
                "migrations.cozystack.io/lock",
            ),
            HELPER.replace("\"true\"", "\"$2\""),
        ] {
            let found = analyse(SCRIPT, &config(&helper));
            assert!(
                found
                    .changes
                    .iter()
                    .any(|c| c.kind == "ledger-write" && !c.rewritable),
                "{helper}: {:?}",
                found.changes
            );
        }
    }
}
