//! A failure handled by its status: the shapes lint's rules and `migrate
//! convert` both read, so the two agree on what is handled.
//!
//! The status of a call captured then tested (`kubectl ... || rc=$?`, or
//! `set +e`, `kubectl ...`, `rc=$?`, `set -e`) is handled when the test of
//! it (`if [ "$rc" -ne 0 ]; then ...; fi`, `case $rc in 0) ;; *) ...;;
//! esac`) has a failure branch: the rules then follow the failure into that
//! branch (fail-closed when it ends non-zero on every path, refused when it
//! can end in success, as the tripwire does at run time), and convert
//! carries the answers that branch accepts to `migrate-tolerate`.

use brush_parser::ast;

use super::parse;

/// A simple command's words in source order (assignments included).
pub fn words(s: &ast::SimpleCommand) -> Vec<&ast::Word> {
    let mut out = Vec::new();
    if let Some(w) = &s.word_or_name {
        out.push(w);
    }
    for item in parse::items(s) {
        match item {
            ast::CommandPrefixOrSuffixItem::Word(w) => out.push(w),
            ast::CommandPrefixOrSuffixItem::AssignmentWord(_, w) => out.push(w),
            _ => {}
        }
    }
    out.sort_by_key(|w| w.loc.as_ref().map(|l| (l.start.line, l.start.column)));
    out
}

/// The only simple command of a plain list item (no `&&`/`||`, no `!`, no
/// pipe, not in the background).
pub fn plain_simple(item: &ast::CompoundListItem) -> Option<&ast::SimpleCommand> {
    if matches!(item.1, ast::SeparatorOperator::Async)
        || !item.0.additional.is_empty()
        || item.0.first.bang
    {
        return None;
    }
    match item.0.first.seq.as_slice() {
        [ast::Command::Simple(s)] => Some(s),
        _ => None,
    }
}

/// `rc=$?` (alone): the variable the status is captured in.
pub fn status_capture(s: &ast::SimpleCommand) -> Option<String> {
    if s.word_or_name.is_some() {
        return None;
    }
    let ws = words(s);
    let [w] = ws.as_slice() else { return None };
    let (name, value) = w.value.split_once('=')?;
    (matches!(value, "$?" | "\"$?\"")
        && !name.is_empty()
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
    .then(|| name.to_owned())
}

/// `set +e` (`on`: false) or `set -e` (`on`: true), with other single-letter
/// flags beside it (`set -eu`).
pub fn sets_errexit(s: &ast::SimpleCommand, on: bool) -> bool {
    let ws = words(s);
    let lit: Vec<Option<String>> = ws.iter().map(|w| parse::literal(&w.value)).collect();
    let sign = if on { '-' } else { '+' };
    match lit.as_slice() {
        [Some(set), Some(flags)] => {
            set == "set"
                && flags.starts_with(sign)
                && flags.len() > 1
                && flags[1..].contains('e')
                && flags[1..]
                    .chars()
                    .all(|c| c.is_ascii_alphabetic() && c != 'o')
        }
        _ => false,
    }
}

/// The variable a word reads, when it is nothing but that (`"$rc"`,
/// `${rc}`).
pub fn var_of(word: &str) -> Option<String> {
    let w = word.trim_matches('"');
    let name = w.strip_prefix("${").and_then(|r| r.strip_suffix('}'));
    let name = name.or_else(|| w.strip_prefix('$'))?;
    (!name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
        .then(|| name.to_owned())
}

/// `[ "$rc" -ne 0 ]`, `[ $rc != 0 ]`, `test "$rc" -gt 0`.
fn tests_non_zero(cond: &ast::CompoundList, var: &str) -> bool {
    let [item] = cond.0.as_slice() else {
        return false;
    };
    let Some(s) = plain_simple(item) else {
        return false;
    };
    let ws: Vec<String> = words(s).iter().map(|w| w.value.clone()).collect();
    let ws: Vec<&str> = ws.iter().map(String::as_str).collect();
    let (v, op, zero) = match ws.as_slice() {
        ["[", v, op, z, "]"] | ["test", v, op, z] => (*v, *op, *z),
        _ => return false,
    };
    var_of(v).as_deref() == Some(var)
        && matches!(op, "-ne" | "!=" | "-gt")
        && parse::literal(zero).as_deref() == Some("0")
}

/// Nothing but `:`/`true` (or nothing).
fn inert(list: &ast::CompoundList) -> bool {
    list.0.iter().all(|i| {
        plain_simple(i).is_some_and(|s| {
            let ws = words(s);
            ws.len() == 1 && matches!(parse::literal(&ws[0].value).as_deref(), Some(":" | "true"))
        })
    })
}

/// The test of a captured status: which construct, and the branch a
/// non-zero status runs.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub enum StatusTest<'p> {
    /// `if [ "$rc" -ne 0 ]; then BRANCH fi` (no `else`).
    If(&'p ast::IfClauseCommand),
    /// `case $rc in 0) ;; *) BRANCH ;; esac`.
    Case(&'p ast::CaseClauseCommand),
}

impl<'p> StatusTest<'p> {
    /// The branch a non-zero status runs.
    pub fn failure_branch(&self) -> Option<&'p ast::CompoundList> {
        match self {
            StatusTest::If(c) => Some(&c.then),
            StatusTest::Case(c) => c
                .cases
                .iter()
                .find(|i| i.patterns.len() == 1 && i.patterns[0].value == "*")
                .and_then(|i| i.cmd.as_ref()),
        }
    }
}

/// The test of `var` that `item` is, when it is one whose non-zero branch
/// is the only thing a failure runs.
pub fn status_test<'p>(item: &'p ast::CompoundListItem, var: &str) -> Option<StatusTest<'p>> {
    if matches!(item.1, ast::SeparatorOperator::Async)
        || !item.0.additional.is_empty()
        || item.0.first.bang
    {
        return None;
    }
    match item.0.first.seq.as_slice() {
        [ast::Command::Compound(ast::CompoundCommand::IfClause(c), None)]
            if c.elses.is_none() && tests_non_zero(&c.condition, var) =>
        {
            Some(StatusTest::If(c))
        }
        [ast::Command::Compound(ast::CompoundCommand::CaseClause(c), None)]
            if var_of(&c.value.value).as_deref() == Some(var) =>
        {
            let mut branch = false;
            for i in &c.cases {
                let [p] = i.patterns.as_slice() else {
                    return None;
                };
                match (parse::literal(&p.value).as_deref(), p.value.as_str()) {
                    (Some("0"), _) if i.cmd.as_ref().is_none_or(inert) => {}
                    (_, "*") => branch = true,
                    _ => return None,
                }
            }
            branch.then_some(StatusTest::Case(c))
        }
        _ => None,
    }
}

/// A status captured then tested, starting at item `i` of a list: the call
/// item, the items that capture its status and turn errexit back on, and
/// the test.
#[derive(Debug, Clone, Copy)]
pub struct Captured<'p> {
    /// Where the call is: item `i` (`CALL || rc=$?`, or `CALL` alone).
    pub call: usize,
    /// Whether the call is `CALL || rc=$?` (else `CALL` then `rc=$?`).
    pub or_capture: bool,
    /// Whether `set +e` comes right before the call (it is part of the
    /// shape: errexit is back on before the test).
    pub after_set_plus_e: bool,
    /// The item of the test.
    pub test_item: usize,
    /// The test.
    pub test: StatusTest<'p>,
}

/// The status-captured shape whose call is item `i` of `items`: `CALL ||
/// rc=$?` (errexit on), or `set +e` (item `i - 1`), `CALL`, `rc=$?`, `set
/// -e`; then the test of `rc`.
pub fn captured_at<'p>(items: &[&'p ast::CompoundListItem], i: usize) -> Option<Captured<'p>> {
    let item: &'p ast::CompoundListItem = items.get(i)?;
    if matches!(item.1, ast::SeparatorOperator::Async) || item.0.first.bang {
        return None;
    }
    let after_set_plus_e =
        i > 0 && plain_simple(items[i - 1]).is_some_and(|s| sets_errexit(s, false));
    let (var, or_capture, mut next) = match item.0.additional.as_slice() {
        [ast::AndOr::Or(p)] if !p.bang => match p.seq.as_slice() {
            [ast::Command::Simple(s)] => (status_capture(s)?, true, i + 1),
            _ => return None,
        },
        [] if after_set_plus_e => (
            plain_simple(items.get(i + 1)?).and_then(status_capture)?,
            false,
            i + 2,
        ),
        _ => return None,
    };
    let mut errexit_back = false;
    while let Some(s) = items.get(next).and_then(|i| plain_simple(i))
        && sets_errexit(s, true)
    {
        errexit_back = true;
        next += 1;
    }
    // Under `set +e` the shape must turn errexit back on before the test.
    if after_set_plus_e && !or_capture && !errexit_back {
        return None;
    }
    let test = status_test(items.get(next)?, &var)?;
    Some(Captured {
        call: i,
        or_capture,
        after_set_plus_e,
        test_item: next,
        test,
    })
}
