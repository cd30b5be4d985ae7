//! Syntax-tree helpers the walk shares: lines of nodes, last commands, word lists.

use brush_parser::ast;

use crate::shell::parse;
use crate::shell::rules::Sink;

pub(super) enum Ending {
    /// Passes a failure on, to this sink.
    Fails(Sink),
    /// Succeeds whatever happened (`true`, `echo`, `exit 0`), as written.
    Neutral(String),
    /// Anything else.
    Other,
}

/// A cluster call as the ledger rule sees it.
#[derive(Debug, Clone)]
pub(super) struct ClusterCall {
    pub(super) line: usize,
    pub(super) writes: bool,
    pub(super) stdin: bool,
    pub(super) mentions_ledger: bool,
    /// An `annotate` or `label` naming only keys outside the engine's own
    /// ([`migration_core::keys::ENGINE_KEY_PREFIX`]), each spelled out:
    /// on the ledger it is `ledger-annotate`, not `ledger-write`.
    pub(super) annotates_only: bool,
}

/// Where the kubectl verb is in `args`: read by
/// [`crate::command_line`], the reader the tripwire uses too.
#[cfg(test)]
pub(super) fn verb_at(args: &[String]) -> Option<usize> {
    crate::command_line::verb_at("kubectl", args)
}

/// `name` as a whole word of `text` (`cozystack-version`, not
/// `cozystack-version-old`).
pub(super) fn mentions(text: &str, name: &str) -> bool {
    text.match_indices(name).any(|(i, _)| {
        let before = text[..i].chars().next_back();
        let after = text[i + name.len()..].chars().next();
        let part = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric() || c == '-');
        !part(before) && !part(after)
    })
}

/// Whether a YAML stream has a ConfigMap whose metadata name is `name`.
pub(super) fn yaml_names_configmap(yaml: &str, name: &str) -> bool {
    yaml.split("\n---").any(|doc| {
        let mut kind_cm = false;
        let mut named = false;
        for line in doc.lines() {
            let t = line.trim();
            if t == "kind: ConfigMap" || t == "kind: \"ConfigMap\"" {
                kind_cm = true;
            }
            if let Some(v) = t.strip_prefix("name:") {
                let v = v.trim().trim_matches(['"', '\'']);
                // The object's own name sits two spaces in, under metadata.
                if v == name && line.starts_with("  ") && !line.starts_with("   ") {
                    named = true;
                }
            }
        }
        kind_cm && named
    })
}

pub(super) fn pipelines(ao: &ast::AndOrList) -> Vec<&ast::Pipeline> {
    let mut v = vec![&ao.first];
    for next in &ao.additional {
        match next {
            ast::AndOr::And(p) | ast::AndOr::Or(p) => v.push(p),
        }
    }
    v
}

pub(super) fn items_of(program: &ast::Program) -> Vec<&ast::CompoundListItem> {
    program
        .complete_commands
        .iter()
        .flat_map(|l| l.0.iter())
        .collect()
}

/// The words of a simple command: name then suffix words (assignment words
/// of `local x=...` included, as written).
pub(super) fn simple_words(s: &ast::SimpleCommand) -> Vec<&ast::Word> {
    let mut v = Vec::new();
    if let Some(w) = &s.word_or_name {
        v.push(w);
    }
    for item in s.suffix.iter().flat_map(|p| p.0.iter()) {
        match item {
            ast::CommandPrefixOrSuffixItem::Word(w)
            | ast::CommandPrefixOrSuffixItem::AssignmentWord(_, w) => v.push(w),
            _ => {}
        }
    }
    v
}

pub(super) fn simple_line(s: &ast::SimpleCommand) -> Option<usize> {
    if let Some(l) = s.word_or_name.as_ref().and_then(parse::word_line) {
        return Some(l);
    }
    parse::items(s).find_map(|item| match item {
        ast::CommandPrefixOrSuffixItem::Word(w)
        | ast::CommandPrefixOrSuffixItem::AssignmentWord(_, w) => parse::word_line(w),
        ast::CommandPrefixOrSuffixItem::ProcessSubstitution(_, s) => Some(s.loc.start.line),
        ast::CommandPrefixOrSuffixItem::IoRedirect(_) => None,
    })
}

pub(super) fn command_line(c: &ast::Command) -> Option<usize> {
    match c {
        ast::Command::Simple(s) => simple_line(s),
        ast::Command::Compound(cc, _) => compound_line(cc),
        ast::Command::Function(f) => parse::word_line(&f.fname),
        ast::Command::ExtendedTest(t, _) => Some(t.loc.start.line),
    }
}

pub(super) fn compound_line(cc: &ast::CompoundCommand) -> Option<usize> {
    Some(match cc {
        ast::CompoundCommand::Arithmetic(a) => a.loc.start.line,
        ast::CompoundCommand::ArithmeticForClause(a) => a.loc.start.line,
        ast::CompoundCommand::BraceGroup(b) => b.loc.start.line,
        ast::CompoundCommand::Subshell(s) => s.loc.start.line,
        ast::CompoundCommand::ForClause(f) => f.loc.start.line,
        ast::CompoundCommand::CaseClause(c) => c.loc.start.line,
        ast::CompoundCommand::IfClause(i) => i.loc.start.line,
        ast::CompoundCommand::WhileClause(w) | ast::CompoundCommand::UntilClause(w) => {
            w.2.start.line
        }
        ast::CompoundCommand::Coprocess(c) => c.loc.start.line,
    })
}

pub(super) fn pipeline_line(p: &ast::Pipeline) -> Option<usize> {
    p.seq.iter().find_map(command_line)
}

pub(super) fn andor_line(ao: &ast::AndOrList) -> Option<usize> {
    pipeline_line(&ao.first)
}

/// The last command of a list, when its last item is a single command.
pub(super) fn last_command(list: &ast::CompoundList) -> Option<&ast::Command> {
    let item = list.0.last()?;
    if !item.0.additional.is_empty() || item.0.first.bang || item.0.first.seq.len() != 1 {
        return None;
    }
    item.0.first.seq.first()
}

pub(super) fn last_command_of_compound(cc: &ast::CompoundCommand) -> Option<&ast::Command> {
    match cc {
        ast::CompoundCommand::BraceGroup(b) => last_command(&b.list),
        ast::CompoundCommand::Subshell(s) => last_command(&s.list),
        _ => None,
    }
}

pub(super) fn is_break_command(c: &ast::Command) -> bool {
    match c {
        ast::Command::Simple(s) => simple_words(s)
            .first()
            .and_then(|w| parse::literal(&w.value))
            .is_some_and(|n| n == "break"),
        _ => false,
    }
}

pub(super) fn is_break(p: &ast::Pipeline) -> bool {
    !p.bang && p.seq.len() == 1 && is_break_command(&p.seq[0])
}

/// Whether a later item waits for a background job by pid or job id.
pub(super) fn waited_for(rest: &[&ast::CompoundListItem]) -> bool {
    rest.iter().any(|item| {
        pipelines(&item.0).iter().any(|p| {
            p.seq.iter().any(|c| match c {
                ast::Command::Simple(s) => {
                    let w = simple_words(s);
                    w.first()
                        .and_then(|w| parse::literal(&w.value))
                        .is_some_and(|n| n == "wait")
                        && w.len() > 1
                }
                _ => false,
            })
        })
    })
}

pub(super) fn extended_words<'t>(e: &'t ast::ExtendedTestExpr, out: &mut Vec<&'t ast::Word>) {
    match e {
        ast::ExtendedTestExpr::And(a, b) | ast::ExtendedTestExpr::Or(a, b) => {
            extended_words(a, out);
            extended_words(b, out);
        }
        ast::ExtendedTestExpr::Not(a) | ast::ExtendedTestExpr::Parenthesized(a) => {
            extended_words(a, out)
        }
        ast::ExtendedTestExpr::UnaryTest(_, w) => out.push(w),
        ast::ExtendedTestExpr::BinaryTest(_, a, b) => {
            out.push(a);
            out.push(b);
        }
    }
}

/// Calls `f` for every simple command inside a compound command (function
/// definitions inside are skipped).
pub(super) fn visit_simple(cc: &ast::CompoundCommand, f: &mut dyn FnMut(&ast::SimpleCommand)) {
    for list in parse::compound_lists(cc) {
        visit_simple_list(list, f);
    }
}

pub(super) fn visit_simple_list(list: &ast::CompoundList, f: &mut dyn FnMut(&ast::SimpleCommand)) {
    for item in &list.0 {
        for p in pipelines(&item.0) {
            for c in &p.seq {
                match c {
                    ast::Command::Simple(s) => f(s),
                    ast::Command::Compound(cc, _) => visit_simple(cc, f),
                    _ => {}
                }
            }
        }
    }
}
