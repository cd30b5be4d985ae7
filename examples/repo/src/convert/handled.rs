//! Failures a numbered script handles itself, carried to `migrate-tolerate`.
//!
//! A script written for the numbered runner accepts an expected answer by
//! reading kubectl's error text: it redirects the call's stderr to a file,
//! and on failure greps the file and ends in success for the texts it
//! recognises ("doesn't have a resource type": nothing to do), failing for
//! every other. Under the engine that failed call is still a failed call, so
//! the tripwire records the script `masked-failure` (and lint refuses it);
//! the engine's one way to accept an answer is `migrate-tolerate`.
//!
//! Three shapes are found on the syntax tree, the call redirecting its
//! stderr to a file (`2>"$err"`), its failure branch beginning with the
//! test of that file that ends in success:
//!
//! - `if ! x=$(kubectl ... 2>"$err"); then <test>; ...; fi` (or `if !
//!   kubectl ...`),
//! - `kubectl ... 2>"$err" || { <test>; ...; }`,
//! - the status captured then tested: `kubectl ... 2>"$err"; rc=$?` (under
//!   `set +e`) or `kubectl ... 2>"$err" || rc=$?`, then `if [ "$rc" -ne 0 ];
//!   then <test> ...; fi` or `case $rc in 0) ;; *) <test> ...;; esac`.
//!
//! The rewrite wraps the call in `migrate-tolerate` with the answers the
//! test's own pattern names ([`migrate_lint::answers::named_by`], the list
//! the tripwire classifies with), and moves the test's success branch after
//! the construct, reading `migrate-tolerate`'s "tolerated" line from the same
//! file: a recognised answer takes the path it took before, every other
//! failure the failure branch, which now fails on all of them. When the
//! pattern names no answer, or the layout is one this module does not
//! rewrite, the change is left for review with the rewrite it proposes.

use std::collections::BTreeMap;

use migrate_lint::answers::{self, Answer, Syntax, TOLERATED_PREFIX};
use migrate_lint::cluster_commands::{DEFAULT_COMMANDS, TOLERATE};
use migrate_lint::shell::handled::{self as shell_handled, var_of, words};
use migrate_lint::shell::{ast, parse};

use super::patterns::Analysis;
use super::report::{HelperReport, Status};

/// The kind of change this module reports.
pub const KIND: &str = "handled-failure";

/// Finds the handled failures in one file (a script or a `lib/` helper):
/// line edits and changes, as [`super::patterns::analyse`] gives them.
pub fn analyse(text: &str) -> Analysis {
    let Ok(program) = parse::program(text) else {
        // The parse failure is reported by the patterns' own analysis.
        return Analysis::default();
    };
    let mut finder = Finder {
        src: text,
        lines: text.split('\n').collect(),
        classifiers: classifier_functions(&program),
        out: Analysis::default(),
    };
    for list in &program.complete_commands {
        finder.list(list);
    }
    finder.out.changes.sort_by_key(|c| c.line);
    finder.out
}

/// Adds `found` to `analysis`, unless an edit of both touches one line:
/// then the handled failures are left for review (the other edits win).
pub fn merge(analysis: &mut Analysis, found: Analysis) {
    let clash = found
        .edits
        .keys()
        .any(|line| analysis.edits.contains_key(line));
    for mut change in found.changes {
        if clash && change.rewritable {
            change.rewritable = false;
            change.message.push_str(
                " (not applied: another rewrite edits the same lines; apply this one by hand)",
            );
        }
        analysis.changes.push(change);
    }
    if !clash {
        analysis.edits.extend(found.edits);
    }
    analysis.changes.sort_by_key(|c| c.line);
}

/// A function whose body is one `grep` of its first argument
/// (`is_absent() { grep -qi "not found" "$1"; }`): a classifier of an error
/// file, by name.
fn classifier_functions(program: &ast::Program) -> BTreeMap<String, Grep> {
    let mut out = BTreeMap::new();
    for list in &program.complete_commands {
        for item in &list.0 {
            for c in pipelines(&item.0).flat_map(|p| p.seq.iter()) {
                let ast::Command::Function(f) = c else {
                    continue;
                };
                let lists = parse::compound_lists(&f.body.0);
                let [body] = lists.as_slice() else { continue };
                let Some(s) = only_pipeline(body).and_then(only_simple) else {
                    continue;
                };
                if let Some(g) = grep(s).filter(|g| var_of(&g.file).as_deref() == Some("1")) {
                    out.insert(f.fname.value.clone(), g);
                }
            }
        }
    }
    out
}

/// A `grep` of a file: its pattern as written, how to read it, and the file.
#[derive(Debug, Clone)]
struct Grep {
    pattern: String,
    syntax: Syntax,
    ignore_case: bool,
    file: String,
}

/// Reads `grep [-qsiEF...] [-e] PATTERN FILE`.
fn grep(s: &ast::SimpleCommand) -> Option<Grep> {
    let words = words(s);
    let name = parse::literal(&words.first()?.value)?;
    let (mut syntax, default_syntax) = match name.as_str() {
        "grep" => (None, Syntax::Basic),
        "egrep" => (Some(Syntax::Extended), Syntax::Extended),
        "fgrep" => (Some(Syntax::Fixed), Syntax::Fixed),
        _ => return None,
    };
    let mut ignore_case = false;
    let mut rest = Vec::new();
    let mut i = 1;
    while i < words.len() {
        let w = parse::literal(&words[i].value);
        match w.as_deref() {
            Some("-e") => {
                rest.push(parse::literal(&words.get(i + 1)?.value)?);
                i += 2;
                continue;
            }
            Some(flag) if flag.starts_with('-') && flag.len() > 1 && rest.is_empty() => {
                for c in flag[1..].chars() {
                    match c {
                        'q' | 's' => {}
                        'i' => ignore_case = true,
                        'E' => syntax = Some(Syntax::Extended),
                        'F' => syntax = Some(Syntax::Fixed),
                        // -v, -x, -w, -c...: another test than "contains".
                        _ => return None,
                    }
                }
            }
            Some(p) if rest.is_empty() => rest.push(p.to_owned()),
            _ => break,
        }
        i += 1;
    }
    // One file after the pattern(s), nothing else.
    let [file] = &words[i..] else { return None };
    let [pattern] = rest.as_slice() else {
        return None;
    };
    Some(Grep {
        pattern: pattern.clone(),
        syntax: syntax.unwrap_or(default_syntax),
        ignore_case,
        file: file.value.clone(),
    })
}

/// The same file: the same variable, or the same literal path.
fn same_file(a: &str, b: &str) -> bool {
    match (var_of(a), var_of(b)) {
        (Some(x), Some(y)) => x == y,
        (None, None) => parse::literal(a).is_some() && parse::literal(a) == parse::literal(b),
        _ => false,
    }
}

fn pipelines(ao: &ast::AndOrList) -> impl Iterator<Item = &ast::Pipeline> {
    std::iter::once(&ao.first).chain(ao.additional.iter().map(|a| match a {
        ast::AndOr::And(p) | ast::AndOr::Or(p) => p,
    }))
}

/// The file a simple command's stderr is redirected to (`2>FILE`).
fn stderr_file(s: &ast::SimpleCommand) -> Option<String> {
    parse::items(s).find_map(|item| match item {
        ast::CommandPrefixOrSuffixItem::IoRedirect(ast::IoRedirect::File(
            Some(2),
            ast::IoFileRedirectKind::Write | ast::IoFileRedirectKind::Clobber,
            ast::IoFileRedirectTarget::Filename(w),
        )) => Some(w.value.clone()),
        _ => None,
    })
}

/// Whether a simple command's stderr goes where its stdout goes (`2>&1`).
fn stderr_merged(s: &ast::SimpleCommand) -> bool {
    parse::items(s).any(|item| match item {
        ast::CommandPrefixOrSuffixItem::IoRedirect(ast::IoRedirect::File(
            Some(2),
            ast::IoFileRedirectKind::DuplicateOutput,
            target,
        )) => match target {
            ast::IoFileRedirectTarget::Fd(1) => true,
            ast::IoFileRedirectTarget::Duplicate(w) => w.value == "1",
            _ => false,
        },
        _ => false,
    })
}

/// The only simple command of an and-or list's pipeline, if it is one.
fn only_simple(p: &ast::Pipeline) -> Option<&ast::SimpleCommand> {
    match p.seq.as_slice() {
        [ast::Command::Simple(s)] => Some(s),
        _ => None,
    }
}

/// The pipeline `list` is, when it is one item without `&&`/`||` and not
/// negated by `!`: a list whose exit status is that pipeline's, as written.
pub(super) fn only_pipeline(list: &ast::CompoundList) -> Option<&ast::Pipeline> {
    let [item] = list.0.as_slice() else {
        return None;
    };
    (item.0.additional.is_empty() && !item.0.first.bang).then_some(&item.0.first)
}

/// A cluster command call whose failure a script may handle: directly
/// (`kubectl ...`) or as the one command of an assignment's `$(...)`.
struct Call {
    /// The cluster command's name (`kubectl`).
    name: String,
    /// Its words as written, for messages.
    shown: String,
    /// The file its stderr goes to (`None`: the terminal, or `2>&1`).
    err: Option<String>,
    /// The line its name is written on (one-based, in the file).
    line: usize,
    /// Inside `$(...)`: the name follows `$(` on that line.
    in_substitution: bool,
    /// `x=$(kubectl ... 2>&1)`: the variable its stderr is captured in,
    /// with its output.
    merged_into: Option<String>,
}

fn call_of(src: &str, s: &ast::SimpleCommand) -> Option<Call> {
    let ws = words(s);
    let first = ws.first()?;
    if let Some(name) = parse::literal(&first.value)
        && DEFAULT_COMMANDS.contains(&name.as_str())
    {
        return Some(Call {
            shown: shown(&ws.iter().map(|w| w.value.as_str()).collect::<Vec<_>>()),
            name,
            err: stderr_file(s),
            line: parse::word_line(first)?,
            in_substitution: false,
            merged_into: None,
        });
    }
    // `x=$(kubectl ... 2>"$err")`: one assignment, nothing else.
    if ws.len() != 1 || s.word_or_name.is_some() {
        return None;
    }
    // As written (continuations counted), so the lines inside are right.
    let (raw, start) = parse::raw_word(src, first)
        .map(|(raw, line)| (raw.to_owned(), line))
        .or_else(|| Some((first.value.clone(), parse::word_line(first)?)))?;
    let (name, value) = raw.split_once('=')?;
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return None;
    }
    let [sub] = parse::substitutions(value).try_into().ok()?;
    if !value.starts_with("$(") {
        return None;
    }
    let inner = parse::program(&sub.text).ok()?;
    let [list] = inner.complete_commands.as_slice() else {
        return None;
    };
    let s = only_simple(only_pipeline(list)?)?;
    let ws = words(s);
    let cmd = parse::literal(&ws.first()?.value)?;
    if !DEFAULT_COMMANDS.contains(&cmd.as_str()) {
        return None;
    }
    Some(Call {
        shown: shown(&ws.iter().map(|w| w.value.as_str()).collect::<Vec<_>>()),
        name: cmd,
        err: stderr_file(s),
        line: start + sub.line_offset,
        in_substitution: true,
        merged_into: stderr_merged(s).then(|| name.to_owned()),
    })
}

/// A call's first words, for messages.
fn shown(words: &[&str]) -> String {
    let mut text = words.iter().take(5).copied().collect::<Vec<_>>().join(" ");
    if words.len() > 5 {
        text.push_str(" ...");
    }
    text
}

/// The test at the head of a failure branch: how it reads the error file,
/// and its lines and layout.
struct Test {
    grep: Grep,
    /// First and last line of the branch it heads (its own `if ... fi`, or
    /// its one line `test && ...`).
    first: usize,
    last: usize,
    /// How it is laid out.
    layout: Layout,
}

/// The layouts of a test the rewrite moves.
enum Layout {
    /// `if <test>; then` (its success branch on its own lines) ... `fi`.
    If,
    /// `<test> && <success>` on one line.
    AndAnd,
    /// `case "$out" in` / `PATTERNS) <success> ;;` / `esac` (or the one
    /// success command and its `;;` on lines of their own), on the output
    /// the call's stderr is merged into: the subject as written, and the
    /// success commands with their `;;`.
    Case { subject: String, commands: String },
}

/// The constructs whose failure branch is found.
struct Handled<'p> {
    call: Call,
    /// The failure branch.
    branch: &'p ast::CompoundList,
    /// The line the failure branch's construct ends on (`fi`, `}`, `esac`).
    end: usize,
    /// The construct's first line (its indentation is the moved test's).
    start: usize,
}

struct Finder<'a> {
    src: &'a str,
    lines: Vec<&'a str>,
    classifiers: BTreeMap<String, Grep>,
    out: Analysis,
}

impl<'a> Finder<'a> {
    fn list(&mut self, list: &ast::CompoundList) {
        for (i, item) in list.0.iter().enumerate() {
            if let Some(h) = self.handled_at(&list.0, i) {
                self.handle(h);
            } else {
                self.probe_at(&list.0[i]);
            }
            for c in pipelines(&item.0).flat_map(|p| p.seq.iter()) {
                match c {
                    ast::Command::Compound(cc, _) => {
                        for l in parse::compound_lists(cc) {
                            self.list(l);
                        }
                    }
                    ast::Command::Function(f) => {
                        for l in parse::compound_lists(&f.body.0) {
                            self.list(l);
                        }
                    }
                    _ => {}
                }
            }
        }
    }

    /// The handled failure whose call is item `i` of a list, if any.
    fn handled_at<'p>(&self, items: &'p [ast::CompoundListItem], i: usize) -> Option<Handled<'p>> {
        let ao = &items[i].0;
        if matches!(items[i].1, ast::SeparatorOperator::Async) {
            return None;
        }
        // `if ! CALL; then BRANCH fi`
        if ao.additional.is_empty()
            && !ao.first.bang
            && let [ast::Command::Compound(ast::CompoundCommand::IfClause(c), None)] =
                ao.first.seq.as_slice()
            && c.elses.is_none()
            && let [cond] = c.condition.0.as_slice()
            && cond.0.additional.is_empty()
            && cond.0.first.bang
            && let Some(call) = only_simple(&cond.0.first).and_then(|s| call_of(self.src, s))
        {
            return Some(Handled {
                // The `if` line: the call's name is on it (a word's own line
                // is its last after line continuations).
                start: call.line,
                end: self.closed_by(last_line(&c.then)?, "fi")?,
                call,
                branch: &c.then,
            });
        }
        let call = only_simple(&ao.first)
            .filter(|_| !ao.first.bang)
            .and_then(|s| call_of(self.src, s))?;
        // `CALL || { BRANCH }`
        if let [ast::AndOr::Or(p)] = ao.additional.as_slice()
            && !p.bang
            && let [ast::Command::Compound(ast::CompoundCommand::BraceGroup(b), None)] =
                p.seq.as_slice()
        {
            return Some(Handled {
                start: call.line,
                end: self.closed_by(last_line(&b.list)?, "}")?,
                call,
                branch: &b.list,
            });
        }
        // The status captured then tested: the shape lint reads
        // (migrate_lint::shell::handled), so the two agree on it.
        let refs: Vec<&'p ast::CompoundListItem> = items.iter().collect();
        let captured = shell_handled::captured_at(&refs, i)?;
        let branch = captured.test.failure_branch()?;
        match captured.test {
            shell_handled::StatusTest::If(c) => Some(Handled {
                start: first_line(&c.condition)?,
                end: self.closed_by(last_line(&c.then)?, "fi")?,
                call,
                branch,
            }),
            shell_handled::StatusTest::Case(c) => {
                let last = c
                    .cases
                    .iter()
                    .filter_map(|i| i.cmd.as_ref().and_then(last_line))
                    .max()?;
                Some(Handled {
                    start: parse::word_line(&c.value)?,
                    end: self.closed_by(last, "esac")?,
                    call,
                    branch,
                })
            }
            _ => None,
        }
    }

    /// Rewrites one handled failure, or reports it for review.
    fn handle(&mut self, h: Handled<'_>) {
        let Some(test) = self.head_test(h.branch, h.start) else {
            // No test of the error file at the head of the branch: if the
            // branch can end in success anyway, lint and the tripwire refuse
            // it; say what would do instead.
            if let Some((_, text)) = early_success(h.branch) {
                if let Some((edits, flags)) = self.probe_edits(&h) {
                    let message = format!(
                        "{} took any failure as 'absent' ({text}): now {TOLERATE} {flags} -- {}, the absent branch runs when migrate-tolerate tolerated that answer, and every other failure (unreachable, Forbidden) fails",
                        h.call.shown, h.call.shown
                    );
                    self.rewrite(h.call.line, edits, message);
                    return;
                }
                let message = format!(
                    "{} fails into a branch that can end in success ({text}) whatever the failure (unreachable and Forbidden too): accept the one answer meant with migrate-tolerate --<answer> -- {} (--not-found for an object that may be absent, --not-served for a type that may not be served) and let every other failure fail",
                    h.call.shown, h.call.shown
                );
                self.review(h.call.line, message);
            }
            return;
        };
        let named = answers::named_by(&test.grep.pattern, test.grep.syntax, test.grep.ignore_case);
        let flags: Vec<String> = named.answers.iter().map(|a| a.flag()).collect();
        let proposed = format!(
            "{TOLERATE} {} -- {}",
            if flags.is_empty() {
                "--<answer>".to_owned()
            } else {
                flags.join(" ")
            },
            h.call.shown
        );
        let dropped = if named.unrecognised.is_empty() {
            String::new()
        } else {
            format!(
                "; the texts {} name no answer kubectl gives, so what they matched now fails",
                quoted(&named.unrecognised)
            )
        };
        if named.answers.is_empty() {
            let message = format!(
                "{} is accepted on failure when its error text matches {:?}, which names no answer migrate-tolerate knows ({}): decide what that failure is and rewrite it as {proposed}, moving the test's success path after the branch",
                h.call.shown,
                test.grep.pattern,
                Answer::ALL.map(|a| a.flag()).join(", ")
            );
            self.review(h.call.line, message);
            return;
        }
        let reads = match &test.layout {
            // The output the error is merged into.
            Layout::Case { subject, .. } => h
                .call
                .merged_into
                .clone()
                .filter(|v| var_of(subject).as_deref() == Some(v.as_str()))
                .map(|_| subject.clone()),
            _ => h
                .call
                .err
                .clone()
                .filter(|err| same_file(&test.grep.file, err)),
        };
        let Some(err) = reads else {
            let message = format!(
                "{}: the test reads {} but the call's stderr goes to {}: rewrite it by hand as {proposed}",
                h.call.shown,
                test.grep.file,
                h.call.err.as_deref().unwrap_or("the log")
            );
            self.review(h.call.line, message);
            return;
        };
        match self.edits(&h, &test, &flags, &err) {
            Some(edits) => {
                let message = format!(
                    "{} accepted the failures its error text matched ({:?}): now {proposed}, and the branch for them runs when migrate-tolerate says it tolerated one{dropped}",
                    h.call.shown, test.grep.pattern
                );
                self.rewrite(h.call.line, edits, message);
            }
            None => {
                let message = format!(
                    "{}: accepts {} by its error text in a layout this rewrite does not edit (a test sharing its lines with other commands): rewrite it by hand as {proposed}, moving the test's success path after the branch{dropped}",
                    h.call.shown,
                    named
                        .answers
                        .iter()
                        .map(|a| a.name())
                        .collect::<Vec<_>>()
                        .join(", ")
                );
                self.review(h.call.line, message);
            }
        }
    }

    /// An existence probe, `if ! CALL >/dev/null 2>&1; then ABSENT; fi`
    /// with the call alone on the `if` line: the call goes through
    /// migrate-tolerate ([`probe_lines`]), and the absent branch becomes a
    /// `case` on the tolerated line. `None`: another layout, left for
    /// review.
    fn probe_edits(&self, h: &Handled<'_>) -> Option<(BTreeMap<usize, Option<String>>, String)> {
        if h.start != h.call.line || h.call.in_substitution {
            return None;
        }
        let (indent, rest) = split_indent(self.lines.get(h.start - 1)?);
        let call = rest
            .strip_prefix("if ! ")?
            .strip_suffix("; then")?
            .strip_suffix(" >/dev/null 2>&1")?;
        let (mut edits, flags) = probe_case(h.start, indent, call, &h.call.name, "")?;
        edits.insert(h.end, Some(format!("{indent};; esac")));
        Some((edits, flags))
    }

    /// The other two probe layouts, where any failure meant "absent":
    /// `if CALL >/dev/null 2>&1; then PRESENT; fi` (no `else`), whose
    /// branch now runs unless migrate-tolerate tolerated the answer, and
    /// `CALL >/dev/null 2>&1 || continue` (or `break`, `return 0`, `exit
    /// 0`) on one line, which now goes on only on the tolerated answer.
    fn probe_at(&mut self, item: &ast::CompoundListItem) {
        let ao = &item.0;
        if matches!(item.1, ast::SeparatorOperator::Async) || ao.first.bang {
            return;
        }
        let (call, edits, taken) = match (ao.first.seq.as_slice(), ao.additional.as_slice()) {
            ([ast::Command::Compound(ast::CompoundCommand::IfClause(c), None)], [])
                if c.elses.is_none() =>
            {
                let Some(call) = only_pipeline(&c.condition)
                    .and_then(only_simple)
                    .and_then(|s| call_of(self.src, s))
                else {
                    return;
                };
                let Some(end) = last_line(&c.then).and_then(|l| self.closed_by(l, "fi")) else {
                    return;
                };
                let Some((indent, rest)) = self.lines.get(call.line - 1).map(|l| split_indent(l))
                else {
                    return;
                };
                let Some(text) = rest
                    .strip_prefix("if ")
                    .and_then(|r| r.strip_suffix("; then"))
                    .and_then(|r| r.strip_suffix(" >/dev/null 2>&1"))
                else {
                    return;
                };
                let case = probe_case(call.line, indent, text, &call.name, " ;; *)");
                let Some((mut edits, flags)) = case else {
                    return;
                };
                edits.insert(end, Some(format!("{indent};; esac")));
                (call, edits, format!("skipped its branch ({flags})"))
            }
            ([ast::Command::Simple(first)], [ast::AndOr::Or(p)]) if !p.bang => {
                let [ast::Command::Simple(after)] = p.seq.as_slice() else {
                    return;
                };
                // A bare `return`/`exit` passes the failure's status on:
                // that call is fail-closed already, not a probe.
                let bare = matches!(
                    words(after).as_slice(),
                    [w] if matches!(parse::literal(&w.value).as_deref(), Some("return" | "exit"))
                );
                if bare || !success_command(after) {
                    return;
                }
                let Some(call) = call_of(self.src, first) else {
                    return;
                };
                let Some((indent, rest)) = self.lines.get(call.line - 1).map(|l| split_indent(l))
                else {
                    return;
                };
                let Some((text, success)) = rest.split_once(" >/dev/null 2>&1 || ") else {
                    return;
                };
                if success.contains(['#', ';', '&', '|']) {
                    return;
                }
                let arm = format!(" {success} ;; esac");
                let Some((edits, flags)) = probe_case(call.line, indent, text, &call.name, &arm)
                else {
                    return;
                };
                (call, edits, format!("went on ({success}; {flags})"))
            }
            _ => return,
        };
        if call.in_substitution || edits.keys().any(|l| self.out.edits.contains_key(l)) {
            return;
        }
        let message = format!(
            "{} took any failure as 'absent' and {taken}: now through {TOLERATE}, the same path runs when it tolerated that answer, and every other failure (unreachable, Forbidden) fails",
            call.shown
        );
        self.rewrite(call.line, edits, message);
    }

    /// The line of the `keyword` closing a construct whose last word is on
    /// line `last`: the first line after it that is not blank, a comment
    /// or `;;`, when that line is the keyword alone. `None` otherwise (the
    /// keyword shares a line with a command: a layout not rewritten).
    fn closed_by(&self, last: usize, keyword: &str) -> Option<usize> {
        for n in last + 1..=self.lines.len() {
            let t = self.lines[n - 1].trim();
            if t.is_empty() || t.starts_with('#') || t == ";;" {
                continue;
            }
            return (t == keyword).then_some(n);
        }
        None
    }

    /// Applies `edits` and notes the rewrite they make of the call on `line`.
    fn rewrite(&mut self, line: usize, edits: BTreeMap<usize, Option<String>>, message: String) {
        self.out.edits.extend(edits);
        self.out.change(KIND, line, message, true);
    }

    /// Notes a finding on `line` left for review by hand.
    fn review(&mut self, line: usize, message: String) {
        self.out.change(KIND, line, message, false);
    }

    /// The test of the error file heading `branch`, when the test's
    /// success branch ends in success and nothing after it in the branch
    /// does.
    fn head_test(&self, branch: &ast::CompoundList, opener: usize) -> Option<Test> {
        let (head, rest) = branch.0.split_first()?;
        if rest.is_empty() || rest.iter().any(|i| item_early_success(i).is_some()) {
            return None;
        }
        let ao = &head.0;
        match (ao.first.seq.as_slice(), ao.additional.as_slice()) {
            // `if TEST; then ...; fi`
            ([ast::Command::Compound(ast::CompoundCommand::IfClause(c), None)], [])
                if !ao.first.bang && c.elses.is_none() =>
            {
                let grep = self.test_grep(only_simple(only_pipeline(&c.condition)?)?)?;
                if !ends_in_success(&c.then) {
                    return None;
                }
                let first = first_line(&c.condition)?;
                let last = self.closed_by(last_line(&c.then)?, "fi")?;
                (first > opener).then_some(Test {
                    grep,
                    first,
                    last,
                    layout: Layout::If,
                })
            }
            // `TEST && SUCCESS` on one line
            ([ast::Command::Simple(s)], [ast::AndOr::And(p)]) if !ao.first.bang && !p.bang => {
                let grep = self.test_grep(s)?;
                let ends = match p.seq.as_slice() {
                    [ast::Command::Simple(s)] => success_command(s),
                    [ast::Command::Compound(ast::CompoundCommand::BraceGroup(b), None)] => {
                        ends_in_success(&b.list)
                    }
                    _ => false,
                };
                let line = words(s).first().and_then(|w| parse::word_line(w))?;
                (ends && line > opener).then_some(Test {
                    grep,
                    first: line,
                    last: line,
                    layout: Layout::AndAnd,
                })
            }
            // `case "$out" in PATTERNS) <success> ;; esac`
            ([ast::Command::Compound(ast::CompoundCommand::CaseClause(c), None)], [])
                if !ao.first.bang =>
            {
                let [item] = c.cases.as_slice() else {
                    return None;
                };
                let cmd = item.cmd.as_ref()?;
                if !ends_in_success(cmd) {
                    return None;
                }
                let patterns: Vec<String> = item
                    .patterns
                    .iter()
                    .map(|p| parse::literal(&p.value))
                    .collect::<Option<_>>()?;
                let first = parse::word_line(&c.value)?;
                let commands = first_line(cmd)?;
                let last = self.closed_by(last_line(cmd)?, "esac")?;
                if first <= opener {
                    return None;
                }
                // One line each: `case`, the pattern and its commands, `esac`;
                // or `case`, the pattern, its one command, `;;`, `esac`.
                let commands_text = if commands == first + 1 && last == first + 2 {
                    let column = match cmd.0.first()?.0.first.seq.first()? {
                        ast::Command::Simple(s) => words(s).first()?.loc.as_ref()?.start.column,
                        _ => return None,
                    };
                    let line = self.lines.get(commands - 1)?;
                    if !line.is_ascii() || column == 0 || column > line.len() {
                        return None;
                    }
                    line[column - 1..].to_owned()
                } else if commands == first + 2
                    && last_line(cmd)? == commands
                    && last == first + 4
                    && self.lines.get(first)?.trim_end().ends_with(')')
                    && self.lines.get(first + 2)?.trim() == ";;"
                {
                    format!("{} ;;", self.lines.get(commands - 1)?.trim())
                } else {
                    return None;
                };
                Some(Test {
                    grep: Grep {
                        pattern: patterns.join("|"),
                        syntax: Syntax::Glob,
                        ignore_case: false,
                        file: c.value.value.clone(),
                    },
                    first,
                    last,
                    layout: Layout::Case {
                        subject: c.value.value.clone(),
                        commands: commands_text,
                    },
                })
            }
            _ => None,
        }
    }

    /// A test of an error file: `grep ... FILE`, or a classifier function
    /// called with it.
    fn test_grep(&self, s: &ast::SimpleCommand) -> Option<Grep> {
        if let Some(g) = grep(s) {
            return Some(g);
        }
        let ws = words(s);
        let name = parse::literal(&ws.first()?.value)?;
        let [_, file] = ws.as_slice() else {
            return None;
        };
        let g = self.classifiers.get(&name)?;
        Some(Grep {
            file: file.value.clone(),
            ..g.clone()
        })
    }

    /// The line edits of one rewrite; `None` when the lines are not laid
    /// out as this rewrite edits them.
    fn edits(
        &self,
        h: &Handled<'_>,
        test: &Test,
        flags: &[String],
        err: &str,
    ) -> Option<BTreeMap<usize, Option<String>>> {
        let line = |n: usize| self.lines.get(n.checked_sub(1)?).copied();
        // The call: `migrate-tolerate FLAGS -- ` before its name.
        let call_line = line(h.call.line)?;
        let at = name_at(call_line, &h.call.name, h.call.in_substitution)?;
        let wrapped = format!(
            "{}{TOLERATE} {} -- {}",
            &call_line[..at],
            flags.join(" "),
            &call_line[at..]
        );
        // The end of the construct is its keyword alone on its line.
        let end_line = line(h.end)?;
        let keyword = end_line.trim();
        if !matches!(keyword, "fi" | "}" | "esac") {
            return None;
        }
        // The test's own lines hold nothing else.
        let first_line = line(test.first)?;
        if test.first <= h.call.line || test.last >= h.end {
            return None;
        }
        let indent = |l: &str| l.len() - l.trim_start().len();
        let outer: String = line(h.start)?
            .chars()
            .take(indent(line(h.start)?))
            .collect();
        let inner = &first_line[..indent(first_line)];
        let condition = format!("grep -q '^{TOLERATED_PREFIX}' {err}");
        let mut moved = Vec::new();
        if let Layout::Case { subject, commands } = &test.layout {
            moved.push(format!("{outer}case {subject} in"));
            moved.push(format!("{outer}  *\"{TOLERATED_PREFIX}\"*) {commands}"));
            moved.push(format!("{outer}esac"));
        } else if matches!(test.layout, Layout::If) {
            let head = first_line.trim();
            if !(head.starts_with("if ") && head.ends_with("then"))
                || line(test.last)?.trim() != "fi"
            {
                return None;
            }
            moved.push(format!("{outer}if {condition}; then"));
            for n in test.first + 1..=test.last {
                let l = line(n)?;
                moved.push(match l.strip_prefix(inner) {
                    Some(rest) => format!("{outer}{rest}"),
                    None => l.to_owned(),
                });
            }
        } else {
            let (_, success) = first_line.split_once(" && ")?;
            moved.push(format!("{outer}{condition} && {success}"));
        }
        let mut edits = BTreeMap::new();
        edits.insert(h.call.line, Some(wrapped));
        for n in test.first..=test.last {
            edits.insert(n, None);
        }
        edits.insert(h.end, Some(format!("{end_line}\n{}", moved.join("\n"))));
        Some(edits)
    }
}

/// Where the cluster command's name starts on its line: after `$(` in a
/// substitution, else as the first word after blanks, `!`, `if`.
fn name_at(line: &str, name: &str, in_substitution: bool) -> Option<usize> {
    if in_substitution {
        let open = line.find(&format!("$({name} "))?;
        return Some(open + 2);
    }
    let mut from = 0;
    while let Some(found) = line[from..].find(name) {
        let at = from + found;
        let before = line[..at].trim_end();
        let after = line[at + name.len()..].chars().next();
        if (before.is_empty() || before.ends_with('!') || before.ends_with(';'))
            && after.is_some_and(char::is_whitespace)
        {
            return Some(at);
        }
        from = at + name.len();
    }
    None
}

/// The line of the first word of a list.
fn first_line(list: &ast::CompoundList) -> Option<usize> {
    let item = list.0.first()?;
    match item.0.first.seq.first()? {
        ast::Command::Simple(s) => words(s).first().and_then(|w| parse::word_line(w)),
        ast::Command::Compound(cc, _) => parse::compound_lists(cc).into_iter().find_map(first_line),
        _ => None,
    }
}

/// The last line holding a word of a list that ends with a simple command
/// (`None` for one ending with a compound command, whose own closing
/// keyword would come first, or holding a heredoc).
fn last_line(list: &ast::CompoundList) -> Option<usize> {
    let tail = list.0.last()?;
    let ends_simple = pipelines(&tail.0)
        .last()
        .and_then(|p| p.seq.last())
        .is_some_and(|c| matches!(c, ast::Command::Simple(_)));
    if !ends_simple {
        return None;
    }
    let mut last = None;
    for item in &list.0 {
        for c in pipelines(&item.0).flat_map(|p| p.seq.iter()) {
            let l = match c {
                ast::Command::Simple(s) => {
                    let mut l = words(s)
                        .iter()
                        .filter_map(|w| w.loc.as_ref().map(|l| l.end.line))
                        .max();
                    for item in parse::items(s) {
                        match item {
                            ast::CommandPrefixOrSuffixItem::IoRedirect(
                                ast::IoRedirect::HereDocument(..),
                            ) => return None,
                            ast::CommandPrefixOrSuffixItem::IoRedirect(ast::IoRedirect::File(
                                _,
                                _,
                                ast::IoFileRedirectTarget::Filename(w),
                            )) => {
                                l = l.max(w.loc.as_ref().map(|l| l.end.line));
                            }
                            _ => {}
                        }
                    }
                    l
                }
                ast::Command::Compound(cc, _) => parse::compound_lists(cc)
                    .into_iter()
                    .filter_map(last_line)
                    .max(),
                _ => None,
            };
            last = last.max(l);
        }
    }
    last
}

/// `continue`, `break`, `return 0`, `exit 0`, a bare `return`/`exit` (after
/// a command that succeeded, in a success branch).
fn success_command(s: &ast::SimpleCommand) -> bool {
    let ws = words(s);
    let lit: Vec<Option<String>> = ws.iter().map(|w| parse::literal(&w.value)).collect();
    match lit.as_slice() {
        [Some(c)] => matches!(c.as_str(), "continue" | "break" | "return" | "exit"),
        [Some(c), Some(n)] => {
            (matches!(c.as_str(), "return" | "exit") && n == "0")
                || (matches!(c.as_str(), "continue" | "break") && n.parse::<u32>().is_ok())
        }
        _ => false,
    }
}

/// A list whose last command ends in success (see [`success_command`]).
fn ends_in_success(list: &ast::CompoundList) -> bool {
    list.0.last().is_some_and(|i| {
        i.0.additional.is_empty() && only_simple(&i.0.first).is_some_and(success_command)
    })
}

/// The first command in `list` that ends in success, and its text.
/// A line's indentation and the rest, trailing blanks dropped.
fn split_indent(line: &str) -> (&str, &str) {
    let line = line.trim_end();
    let rest = line.trim_start();
    (&line[..line.len() - rest.len()], rest)
}

/// The edit that puts the probe `call` ([`probe_lines`]) on `line`,
/// followed by a `case` on its tolerated answer whose first arm is `arm`
/// (the rest of that line), and the flags.
fn probe_case(
    line: usize,
    indent: &str,
    call: &str,
    name: &str,
    arm: &str,
) -> Option<(BTreeMap<usize, Option<String>>, String)> {
    let (probe, flags) = probe_lines(indent, call, name)?;
    let case = format!("{probe}\n{indent}case $_migrate_probe in *\"{TOLERATED_PREFIX}\"*){arm}");
    Some((BTreeMap::from([(line, Some(case))]), flags))
}

/// The probe `call` (one simple call of the cluster command `name`, as
/// written) through migrate-tolerate, its stderr captured where
/// migrate-tolerate says what it tolerated and any failure it does not
/// tolerate ending the script; and the flags: a CRD is absent when not
/// found, anything else may also not be served. `None` for a call that is
/// not one simple command.
fn probe_lines(indent: &str, call: &str, name: &str) -> Option<(String, String)> {
    if !call.starts_with(&format!("{name} "))
        || ["$(", "`", ";", "|", "&", "<", ">"]
            .iter()
            .any(|c| call.contains(c))
    {
        return None;
    }
    let words: Vec<&str> = call.split_whitespace().collect();
    let crd = words.windows(2).any(|w| {
        w[0] == "get"
            && matches!(
                w[1],
                "crd" | "crds" | "customresourcedefinition" | "customresourcedefinitions"
            )
    });
    let flags = if crd {
        Answer::NotFound.flag()
    } else {
        format!("{} {}", Answer::NotFound.flag(), Answer::NotServed.flag())
    };
    Some((
        format!(
            "{indent}if ! _migrate_probe=$({TOLERATE} {flags} -- {call} 2>&1 >/dev/null); then printf '%s\\n' \"$_migrate_probe\" >&2; exit 1; fi"
        ),
        flags,
    ))
}

fn early_success(list: &ast::CompoundList) -> Option<(usize, String)> {
    list.0.iter().find_map(item_early_success)
}

fn item_early_success(item: &ast::CompoundListItem) -> Option<(usize, String)> {
    for c in pipelines(&item.0).flat_map(|p| p.seq.iter()) {
        match c {
            ast::Command::Simple(s) if success_command(s) => {
                let ws = words(s);
                let line = ws.first().and_then(|w| parse::word_line(w)).unwrap_or(1);
                let text: Vec<&str> = ws.iter().map(|w| w.value.as_str()).collect();
                return Some((line, text.join(" ")));
            }
            ast::Command::Compound(cc, _) => {
                // A loop's own `continue`/`break` ends its round, not the
                // branch.
                if matches!(
                    cc,
                    ast::CompoundCommand::ForClause(_)
                        | ast::CompoundCommand::WhileClause(_)
                        | ast::CompoundCommand::UntilClause(_)
                        | ast::CompoundCommand::ArithmeticForClause(_)
                ) {
                    continue;
                }
                if let Some(found) = parse::compound_lists(cc)
                    .into_iter()
                    .find_map(early_success)
                {
                    return Some(found);
                }
            }
            _ => {}
        }
    }
    None
}

fn quoted(texts: &[String]) -> String {
    texts
        .iter()
        .map(|t| format!("{t:?}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Carries the handled failures of one `lib/` helper: its report (`None`
/// when it has none) and its bytes as written to the converted tree.
pub fn helper(rel: &str, bytes: &[u8], rewrite: bool) -> (Option<HelperReport>, Vec<u8>) {
    let Ok(text) = std::str::from_utf8(bytes) else {
        return (None, bytes.to_vec());
    };
    let found = analyse(text);
    if found.changes.is_empty() {
        return (None, bytes.to_vec());
    }
    let file = format!("lib/{rel}");
    let diff = super::diff::unified(&file, text, &found.edits);
    let output = if rewrite {
        super::diff::apply(text, &found.edits).into_bytes()
    } else {
        bytes.to_vec()
    };
    let report = HelperReport {
        file,
        status: Status::of(&found.changes, rewrite),
        changes: found.changes,
        diff,
    };
    (Some(report), output)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rewritten(text: &str) -> (String, Vec<(usize, bool)>) {
        let a = analyse(text);
        (
            super::super::diff::apply(text, &a.edits),
            a.changes.iter().map(|c| (c.line, c.rewritable)).collect(),
        )
    }

    /// Asserts that `text` has exactly `changes` (line, rewritable) and
    /// rewrites to `expected`.
    fn rewrites(text: &str, changes: &[(usize, bool)], expected: &str) {
        let (out, found) = rewritten(text);
        assert_eq!(found, changes);
        assert_eq!(out, expected);
    }

    #[test]
    fn an_if_not_probe_reading_its_error_file_is_carried_to_migrate_tolerate() {
        rewrites(
            "if ! x=$(kubectl get crd w 2>\"$err\"); then\n  if grep -q NotFound \"$err\"; then\n    echo none\n    exit 0\n  fi\n  cat \"$err\" >&2\n  exit 1\nfi\necho \"$x\"\n",
            &[(1, true)],
            "if ! x=$(migrate-tolerate --not-found -- kubectl get crd w 2>\"$err\"); then\n  cat \"$err\" >&2\n  exit 1\nfi\nif grep -q '^migrate-tolerate: tolerated ' \"$err\"; then\n  echo none\n  exit 0\nfi\necho \"$x\"\n",
        );
    }

    #[test]
    fn a_one_line_test_after_or_moves_after_the_brace_group() {
        rewrites(
            "for n in a b; do\n  kubectl create ns \"$n\" 2>e || {\n    grep -qi 'already exists' e && continue\n    exit 1\n  }\ndone\n",
            &[(2, true)],
            "for n in a b; do\n  migrate-tolerate --already-exists -- kubectl create ns \"$n\" 2>e || {\n    exit 1\n  }\n  grep -q '^migrate-tolerate: tolerated ' e && continue\ndone\n",
        );
    }

    #[test]
    fn a_case_on_the_output_the_error_is_merged_into_moves_as_a_case_on_the_tolerated_line() {
        rewrites(
            "list() {\n  if ! out=$(kubectl get widgets -A -o name 2>&1); then\n    case \"$out\" in\n      *\"doesn't have a resource type\"*|*NotFound*) return 0 ;;\n    esac\n    echo \"failed: $out\" >&2\n    return 1\n  fi\n  printf '%s' \"$out\"\n}\nlist\n",
            &[(2, true)],
            "list() {\n  if ! out=$(migrate-tolerate --not-found --not-served -- kubectl get widgets -A -o name 2>&1); then\n    echo \"failed: $out\" >&2\n    return 1\n  fi\n  case \"$out\" in\n    *\"migrate-tolerate: tolerated \"*) return 0 ;;\n  esac\n  printf '%s' \"$out\"\n}\nlist\n",
        );
    }

    #[test]
    fn a_failure_branch_without_a_test_of_the_error_is_left_alone_unless_it_can_succeed() {
        let (_, changes) =
            rewritten("if ! kubectl get ns x 2>e; then\n  echo cannot >&2\n  exit 1\nfi\n");
        assert_eq!(changes, []);
        let (_, changes) = rewritten(
            "for n in a; do\n  if ! kubectl get ns x 2>e; then\n    echo skip\n    continue\n  fi\ndone\n",
        );
        assert_eq!(changes, [(2, false)]);
        // Every failure read as "absent", in a layout the probe rewrite
        // does not edit (the output kept): review.
        let (_, changes) = rewritten(
            "f() {\n  if ! kubectl get crd x 2>/dev/null; then\n    echo absent\n    return 0\n  fi\n}\nf\n",
        );
        assert_eq!(changes, [(2, false)]);
    }

    #[test]
    fn a_presence_probe_and_a_probe_or_continue_accept_only_the_answer_they_meant() {
        // `if CALL; then PRESENT; fi`: any failure skipped the branch.
        rewrites(
            "if kubectl get crd v2 >/dev/null 2>&1; then\n  echo present\nfi\necho next\n",
            &[(1, true)],
            "if ! _migrate_probe=$(migrate-tolerate --not-found -- kubectl get crd v2 2>&1 >/dev/null); then printf '%s\\n' \"$_migrate_probe\" >&2; exit 1; fi\ncase $_migrate_probe in *\"migrate-tolerate: tolerated \"*) ;; *)\n  echo present\n;; esac\necho next\n",
        );
        // `CALL || continue`: any failure went on to the next round.
        rewrites(
            "for crd in a b; do\n  kubectl get crd \"$crd\" >/dev/null 2>&1 || continue\n  echo \"$crd\"\ndone\n",
            &[(2, true)],
            "for crd in a b; do\n  if ! _migrate_probe=$(migrate-tolerate --not-found -- kubectl get crd \"$crd\" 2>&1 >/dev/null); then printf '%s\\n' \"$_migrate_probe\" >&2; exit 1; fi\n  case $_migrate_probe in *\"migrate-tolerate: tolerated \"*) continue ;; esac\n  echo \"$crd\"\ndone\n",
        );
        // A bare `|| return` or `|| exit` passes the failure's status on:
        // already fail-closed, not a probe taking failure as absent.
        for bare in ["return", "exit"] {
            let (out, _) = rewritten(&format!(
                "f() {{\n  kubectl get crd x >/dev/null 2>&1 || {bare}\n  echo there\n}}\nf\n"
            ));
            assert!(!out.contains("migrate-tolerate"), "{out}");
        }
        // With an `else`, or the call's output kept: not this rewrite.
        let (_, changes) = rewritten(
            "if kubectl get crd v2 >/dev/null 2>&1; then\n  echo present\nelse\n  echo absent\nfi\n",
        );
        assert!(changes.iter().all(|c| c.0 != 1 || !c.1), "{changes:?}");
    }

    #[test]
    fn an_existence_probe_taking_any_failure_as_absent_accepts_only_the_answer_it_meant() {
        // Every failure read as "absent", the error thrown away: the call
        // goes through migrate-tolerate, the branch runs on its tolerated
        // line, any other failure ends the script.
        rewrites(
            "f() {\n  if ! kubectl get crd x >/dev/null 2>&1; then\n    echo absent\n    return 0\n  fi\n  echo present\n}\nf\n",
            &[(2, true)],
            "f() {\n  if ! _migrate_probe=$(migrate-tolerate --not-found -- kubectl get crd x 2>&1 >/dev/null); then printf '%s\\n' \"$_migrate_probe\" >&2; exit 1; fi\n  case $_migrate_probe in *\"migrate-tolerate: tolerated \"*)\n    echo absent\n    return 0\n  ;; esac\n  echo present\n}\nf\n",
        );
        // A type that may not be served: both answers.
        let (out, _) = rewritten(
            "for c in a b; do\n  if ! kubectl -n x get certificate.cert-manager.io \"$c\" >/dev/null 2>&1; then\n    continue\n  fi\ndone\n",
        );
        assert!(
            out.contains("migrate-tolerate --not-found --not-served -- kubectl -n x get certificate.cert-manager.io \"$c\" 2>&1 >/dev/null"),
            "{out}"
        );
    }
}
