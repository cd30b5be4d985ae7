//! Static checks of migration scripts on a real shell syntax tree.
//!
//! Scripts are parsed with brush-parser (POSIX sh and bash). The rules
//! ([`rules`]) follow the exit status of every cluster command (kubectl,
//! helm, flux and the configured others, direct, through `$KUBECTL` or
//! through wrapper functions) to where it ends up, and flag every place a
//! failure can be dropped or turned into success. `.`/`source` is followed
//! into the tree's `lib/` ([`source`]); a finding in a sourced helper is
//! reported at the helper's own file and line, with the line of the script
//! that sourced it. Findings can be waived inline, with a reason
//! ([`waiver`]). shellcheck runs alongside when installed ([`shellcheck`]).
//! Comments, strings and heredoc bodies are text to the parser, so they
//! are never mistaken for commands.

pub mod baseline;
pub mod handled;
pub mod parse;
pub mod path_reset;
pub mod rules;
pub mod shellcheck;
pub mod source;
pub mod waiver;

use std::collections::BTreeMap;

/// The parser's syntax tree, for the callers that walk scripts themselves
/// (convert), so that this crate stays the only one linking the parser.
pub use brush_parser::ast;
pub use rules::{Config, Dialect, Raw};
pub use source::SourceCache;

use crate::finding::Finding;

/// Checks the file `rel` (already in `cache`) as an entry point in
/// `dialect`: a tier script, or a helper on its own.
pub fn check(cache: &mut SourceCache, rel: &str, config: &Config, dialect: Dialect) -> Vec<Raw> {
    let Some(file) = cache.get(rel) else {
        return Vec::new();
    };
    rules::Walker::new(config, cache, rel, dialect).run(file)
}

/// Turns raw findings into lint findings: one per file, line and rule,
/// naming every script that sourced the file (`(sourced from pre-apply/a:6)`).
pub fn findings(raw: Vec<Raw>) -> Vec<Finding> {
    type Key = (String, Option<usize>, &'static str);
    let mut merged: BTreeMap<Key, (Raw, Vec<String>)> = BTreeMap::new();
    for r in raw {
        let key = (r.file.clone(), r.line, r.rule.id);
        let from = r.sourced_from.clone();
        let entry = merged.entry(key).or_insert_with(|| (r, Vec::new()));
        if let Some(f) = from
            && !entry.1.contains(&f)
        {
            entry.1.push(f);
        }
    }
    merged
        .into_values()
        .map(|(r, from)| Finding {
            file: r.file,
            line: r.line,
            rule: r.rule.id,
            level: r.rule.level,
            message: if from.is_empty() {
                r.message
            } else {
                format!("{} (sourced from {})", r.message, from.join(", "))
            },
        })
        .collect()
}

/// Every file's waivers, by tree-relative path.
pub fn waivers(cache: &SourceCache) -> BTreeMap<String, Vec<waiver::Waiver>> {
    cache
        .files()
        .filter(|f| !f.waivers.is_empty())
        .map(|f| (f.rel.clone(), f.waivers.clone()))
        .collect()
}

/// Rule ids whose findings make `run` refuse a script (and `plan` report it).
pub const BLOCKING: &[&str] = &[
    "shell-parse",
    "for-command-substitution",
    "kubectl-error-ignored",
    "cluster-command-in-condition",
    "negated-cluster-command",
    "errexit-off-in-function",
    "errexit-off-in-substitution",
    "errexit-disabled",
    "trap-exit-zero",
    "background-cluster-command",
    "substitution-in-declaration",
    "substitution-in-test",
    "substitution-in-argument",
    "process-substitution",
    "mapfile-substitution",
    "hand-written-retry",
    "cluster-command-path",
    "path-reset",
    "tripwire-internals",
    "cluster-command-from-environment",
    "ledger-write",
    "ledger-annotate",
    "analysis-limit",
    "source-unresolved",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_blocking_list_is_exactly_the_rules_that_block() {
        let blocking: Vec<&str> = rules::RULES
            .iter()
            .filter(|r| r.blocks_run)
            .map(|r| r.id)
            .collect();
        assert_eq!(blocking, BLOCKING);
    }
}
