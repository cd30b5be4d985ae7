//! Where a status goes: lists, and-or lists, pipelines, compound commands, redirections,
//! words and substitutions.

use std::rc::Rc;

use brush_parser::ast;

use crate::shell::rules::{
    ClusterCall, Ctx, Ending, Kind, Sink, Site, Walker, Why, andor_line, extended_words, is_break,
    is_break_command, items_of, last_command, last_command_of_compound, pipeline_line, pipelines,
    simple_line, simple_words, waited_for,
};
use crate::shell::{Dialect, handled, parse};

impl<'a> Walker<'a> {
    pub(super) fn walk_items(&mut self, items: &[&ast::CompoundListItem], ctx: &Ctx, last: &Sink) {
        for (i, item) in items.iter().enumerate() {
            if !self.spend() {
                return;
            }
            // `set +e` only around a call whose status is captured then
            // tested: errexit is back on before the test, and the failure
            // is followed into the test's branch (below).
            if handled::plain_simple(item).is_some_and(|s| handled::sets_errexit(s, false))
                && handled::captured_at(items, i + 1).is_some_and(|c| c.after_set_plus_e)
            {
                continue;
            }
            if let Some(c) = handled::captured_at(items, i) {
                self.walk_captured(items, &c, ctx, last);
                continue;
            }
            let sink = self.item_sink(items, i, ctx, last);
            self.walk_andor(&item.0, ctx, &sink);
        }
    }

    /// The sink of item `i` of a list whose last item's status goes to
    /// `last`.
    fn item_sink(
        &mut self,
        items: &[&ast::CompoundListItem],
        i: usize,
        ctx: &Ctx,
        last: &Sink,
    ) -> Sink {
        let item = items[i];
        {
            let is_last = i + 1 == items.len();
            if matches!(item.1, ast::SeparatorOperator::Async) {
                if waited_for(&items[i + 1..]) {
                    Sink::observed()
                } else {
                    let line = andor_line(&item.0).unwrap_or(1);
                    Sink::new(Kind::Ignored(Why::Background), Some(ctx.site(line)))
                }
            } else if is_last {
                last.clone()
            } else {
                match self.errexit_off(ctx) {
                    None => Sink::new(Kind::Errexit, None),
                    Some(why) => Sink::new(Kind::Ignored(why), None),
                }
            }
        }
    }

    /// A call whose status is captured then tested
    /// ([`handled::captured_at`]): its failure goes where the test's
    /// failure branch ends, as the tripwire sees it at run time (fail-closed
    /// when it ends non-zero on every path; a masked failure when some path
    /// ends in success).
    fn walk_captured(
        &mut self,
        items: &[&ast::CompoundListItem],
        c: &handled::Captured<'_>,
        ctx: &Ctx,
        last: &Sink,
    ) {
        let item = items[c.call];
        let line = andor_line(&item.0).unwrap_or(1);
        let site = Some(ctx.site(line));
        let test_sink = self.item_sink(items, c.test_item, ctx, last);
        let failure = match c.test.failure_branch() {
            Some(branch) => match last_command(branch)
                .map(|l| self.ending(l, ctx, &test_sink.as_command_status(), false, 0))
            {
                Some(Ending::Fails(s)) => match early_success(branch, true) {
                    Some((l, text)) => Sink::new(
                        Kind::Condition(std::borrow::Cow::Owned(format!(
                            "a captured status whose failure branch can also end in success ({}: {text}); accept the failures it recognises with migrate-tolerate (--not-found, --not-served, ...) and let every other one fail",
                            ctx.site(l)
                        ))),
                        site,
                    ),
                    None => s,
                },
                _ => Sink::new(
                    Kind::Condition(
                        "a captured status whose failure branch does not end non-zero".into(),
                    ),
                    site,
                ),
            },
            None => Sink::new(Kind::Condition("a captured status".into()), site),
        };
        // errexit is off for the call (`set +e`, or the left side of `||`).
        let off = ctx.with_errexit_off(Why::Condition);
        self.walk_pipeline(&item.0.first, &off, &failure);
        for next in &item.0.additional {
            let (ast::AndOr::Or(p) | ast::AndOr::And(p)) = next;
            self.walk_pipeline(p, ctx, &Sink::new(Kind::Errexit, None));
        }
    }

    pub(super) fn walk_list(&mut self, list: &ast::CompoundList, ctx: &Ctx, last: &Sink) {
        let items: Vec<&ast::CompoundListItem> = list.0.iter().collect();
        self.walk_items(&items, ctx, last);
    }

    pub(super) fn walk_andor(&mut self, ao: &ast::AndOrList, ctx: &Ctx, sink: &Sink) {
        // (pipeline, is the operator before it `||`)
        let mut parts: Vec<(&ast::Pipeline, bool)> = vec![(&ao.first, false)];
        for next in &ao.additional {
            match next {
                ast::AndOr::And(p) => parts.push((p, false)),
                ast::AndOr::Or(p) => parts.push((p, true)),
            }
        }
        let n = parts.len();
        for k in 0..n {
            let (pipeline, _) = parts[k];
            if k + 1 == n {
                self.walk_pipeline(pipeline, ctx, sink);
                continue;
            }
            let line = pipeline_line(pipeline).unwrap_or(1);
            let site = ctx.site(line);
            let retry = ctx.in_loop && !parts[k + 1].1 && is_break(parts[k + 1].0);
            let failure = if retry {
                Sink::new(Kind::Retry, Some(site.clone()))
            } else if let Some(j) = (k + 1..n).find(|j| parts[*j].1) {
                self.handler(parts[j].0, ctx, sink, &site)
            } else {
                match &sink.kind {
                    Kind::Errexit => Sink::new(
                        Kind::Condition("the left side of && (errexit ignores it there)".into()),
                        Some(site.clone()),
                    ),
                    _ => sink.clone(),
                }
            };
            // errexit is off for the whole left side (and inside functions
            // called there).
            let left = ctx.with_errexit_off(Why::Condition);
            self.walk_pipeline(pipeline, &left, &failure);
        }
    }

    /// Where the failure of the left side of `|| handler` ends up.
    pub(super) fn handler(
        &mut self,
        h: &ast::Pipeline,
        ctx: &Ctx,
        list: &Sink,
        site: &Site,
    ) -> Sink {
        let at = Some(site.clone());
        if h.bang || h.seq.len() != 1 {
            return Sink::new(
                Kind::Condition("a test whose || branch runs other commands".into()),
                at,
            );
        }
        match self.ending(&h.seq[0], ctx, list, true, 0) {
            // `|| return`, `|| exit`: the status passed on is the failure.
            Ending::Fails(s) if is_bare_exit(&h.seq[0]) => s,
            Ending::Fails(s) => match early_success_in(&h.seq[0]) {
                Some(l) => Sink::new(
                    Kind::Condition(std::borrow::Cow::Owned(format!(
                        "a test whose || branch can also end in success ({}: {})",
                        ctx.site(l.0),
                        l.1
                    ))),
                    at,
                ),
                None => s,
            },
            Ending::Neutral(text) => Sink::new(Kind::Neutralized(format!("|| {text}")), at),
            Ending::Other => Sink::new(
                Kind::Condition("a test: its || branch runs when it fails for any reason".into()),
                at,
            ),
        }
    }

    /// How a command that runs after a failure ends: passing a failure on
    /// (to which sink), turning it into success, or something else.
    /// `bare_exit_fails`: `exit` without a number exits with `$?`, which is
    /// the failure after `||` but 0 in a `then` branch after `if !`.
    pub(super) fn ending(
        &self,
        c: &ast::Command,
        ctx: &Ctx,
        list: &Sink,
        bare_exit_fails: bool,
        depth: usize,
    ) -> Ending {
        if depth > 8 {
            return Ending::Other;
        }
        match c {
            ast::Command::Simple(s) => {
                let words = simple_words(s);
                let Some(first) = words.first() else {
                    return Ending::Other;
                };
                let name = parse::literal(&first.value).unwrap_or_default();
                let arg = words.get(1).and_then(|w| parse::literal(&w.value));
                match name.as_str() {
                    "true" | ":" | "echo" | "printf" | "continue" | "break" => {
                        Ending::Neutral(first.value.clone())
                    }
                    "exit" | "return" => {
                        let sink = if name == "exit" {
                            &ctx.exit_sink
                        } else {
                            &ctx.return_sink
                        };
                        match arg.as_deref() {
                            Some("0") => Ending::Neutral(format!("{name} 0")),
                            None if words.len() == 1 && !bare_exit_fails => {
                                Ending::Neutral(name.clone())
                            }
                            _ => Ending::Fails(sink.as_command_status()),
                        }
                    }
                    "false" => Ending::Fails(list.as_command_status()),
                    f if self.functions.contains_key(f) => {
                        let func = &self.functions[f];
                        // `return N` in the handler function is its status,
                        // which is the handler's.
                        let inner = Ctx {
                            return_sink: list.as_command_status(),
                            ..ctx.clone()
                        };
                        match last_command_of_compound(&func.def.body.0) {
                            Some(last) => match self.ending(last, &inner, list, false, depth + 1) {
                                Ending::Neutral(_) => Ending::Neutral(name.clone()),
                                other => other,
                            },
                            None => Ending::Other,
                        }
                    }
                    _ => Ending::Other,
                }
            }
            ast::Command::Compound(ast::CompoundCommand::BraceGroup(b), _) => {
                match last_command(&b.list) {
                    Some(last) => match self.ending(last, ctx, list, bare_exit_fails, depth + 1) {
                        Ending::Neutral(t) => Ending::Neutral(format!("{{ {t}; }}")),
                        other => other,
                    },
                    None => Ending::Other,
                }
            }
            ast::Command::Compound(ast::CompoundCommand::Subshell(s), _) => {
                let inner = Ctx {
                    exit_sink: list.as_command_status(),
                    ..ctx.clone()
                };
                match last_command(&s.list) {
                    Some(last) => match self.ending(last, &inner, list, bare_exit_fails, depth + 1)
                    {
                        Ending::Neutral(t) => Ending::Neutral(format!("( {t} )")),
                        other => other,
                    },
                    None => Ending::Other,
                }
            }
            _ => Ending::Other,
        }
    }

    pub(super) fn walk_pipeline(&mut self, p: &ast::Pipeline, ctx: &Ctx, sink: &Sink) {
        let line = pipeline_line(p).unwrap_or(1);
        let site = ctx.site(line);
        let (ctx, sink) = if p.bang {
            let sink = match &sink.kind {
                Kind::Test(_, negated) => (**negated).clone(),
                Kind::Retry => sink.clone(),
                _ => Sink::new(Kind::Negated, Some(site.clone())),
            };
            (ctx.with_errexit_off(Why::Condition), sink)
        } else {
            let sink = match &sink.kind {
                Kind::Test(plain, _) => (**plain).clone(),
                _ => sink.clone(),
            };
            (ctx.clone(), sink)
        };
        let n = p.seq.len();
        let mut calls: Vec<Option<ClusterCall>> = Vec::new();
        for (i, c) in p.seq.iter().enumerate() {
            let s = if i + 1 == n || self.pipefail {
                sink.clone()
            } else {
                Sink::new(Kind::Ignored(Why::PipelineNotLast), Some(site.clone()))
            };
            calls.push(self.walk_command(c, &ctx, &s));
        }
        // `kubectl get cm LEDGER -o yaml | sed ... | kubectl replace -f -`
        let mut read_ledger = false;
        for call in calls.iter().flatten() {
            if read_ledger && call.writes && call.stdin {
                let at = ctx.site(call.line);
                self.ledger_write(&at);
            }
            read_ledger |= call.mentions_ledger;
        }
    }

    /// `ledger-annotate` for a call that only notes something on the
    /// ledger object outside the engine's keys, else `ledger-write`.
    pub(super) fn ledger_write_or_annotate(&mut self, at: &Site, annotates_only: bool) {
        if !annotates_only {
            return self.ledger_write(at);
        }
        let message = format!(
            "the script annotates or labels the ledger ConfigMap '{}' outside the engine's keys; it cannot touch the entries or the run lock, but the ledger is the engine's: keep such notes elsewhere (a failure's message is kept in the ledger's last failure). A frozen legacy script may keep it through a reviewed lint-baseline entry",
            self.config.ledger_name
        );
        self.push(at, "ledger-annotate", message);
    }

    pub(super) fn ledger_write(&mut self, at: &Site) {
        let message = format!(
            "the script writes the ledger ConfigMap '{}'; scripts never write the ledger or stamp a version, the runner records outcomes",
            self.config.ledger_name
        );
        self.push(at, "ledger-write", message);
    }

    pub(super) fn walk_command(
        &mut self,
        c: &ast::Command,
        ctx: &Ctx,
        sink: &Sink,
    ) -> Option<ClusterCall> {
        match c {
            ast::Command::Simple(s) => self.walk_simple(s, ctx, sink),
            ast::Command::Compound(cc, redirects) => {
                if let Some(r) = redirects {
                    self.walk_redirects(&r.0.iter().collect::<Vec<_>>(), ctx, Why::Argument);
                }
                self.walk_compound(cc, ctx, sink);
                None
            }
            ast::Command::Function(_) => None,
            ast::Command::ExtendedTest(t, redirects) => {
                if let Some(r) = redirects {
                    self.walk_redirects(&r.0.iter().collect::<Vec<_>>(), ctx, Why::Argument);
                }
                let line = t.loc.start.line;
                let mut words = Vec::new();
                extended_words(&t.expr, &mut words);
                for w in words {
                    self.walk_word(w, line, ctx, Why::Test("a [[ ]] test"));
                }
                None
            }
        }
    }

    pub(super) fn walk_compound(&mut self, cc: &ast::CompoundCommand, ctx: &Ctx, sink: &Sink) {
        match cc {
            ast::CompoundCommand::BraceGroup(b) => self.walk_list(&b.list, ctx, sink),
            ast::CompoundCommand::Subshell(s) => {
                let status = sink.as_command_status();
                let inner = Ctx {
                    exit_sink: status.clone(),
                    ..ctx.clone()
                };
                self.walk_list(&s.list, &inner, &status);
            }
            ast::CompoundCommand::ForClause(f) => {
                let line = f.loc.start.line;
                for w in f.values.iter().flatten() {
                    self.walk_word(w, line, ctx, Why::ForList);
                }
                let body = Ctx {
                    in_loop: true,
                    ..ctx.clone()
                };
                self.walk_list(&f.body.list, &body, sink);
            }
            ast::CompoundCommand::ArithmeticForClause(f) => {
                let body = Ctx {
                    in_loop: true,
                    ..ctx.clone()
                };
                self.walk_list(&f.body.list, &body, sink);
            }
            ast::CompoundCommand::CaseClause(c) => {
                let line = c.loc.start.line;
                self.walk_word(&c.value, line, ctx, Why::Test("a case subject"));
                for item in &c.cases {
                    for p in &item.patterns {
                        self.walk_word(p, line, ctx, Why::Test("a case pattern"));
                    }
                    if let Some(cmd) = &item.cmd {
                        self.walk_list(cmd, ctx, sink);
                    }
                }
            }
            ast::CompoundCommand::IfClause(i) => {
                let line = i.loc.start.line;
                let cond = ctx.with_errexit_off(Why::Condition);
                let test = self.if_test(ctx, sink, &i.then, i.elses.as_deref(), line);
                self.walk_list(&i.condition, &cond, &test);
                self.walk_list(&i.then, ctx, sink);
                let elses = i.elses.as_deref().unwrap_or_default();
                for (k, e) in elses.iter().enumerate() {
                    if let Some(c) = &e.condition {
                        let test = self.if_test(ctx, sink, &e.body, Some(&elses[k + 1..]), line);
                        self.walk_list(c, &cond, &test);
                    }
                    self.walk_list(&e.body, ctx, sink);
                }
            }
            ast::CompoundCommand::WhileClause(w) | ast::CompoundCommand::UntilClause(w) => {
                let cond = ctx.with_errexit_off(Why::Condition);
                let line = w.2.start.line;
                self.walk_list(&w.0, &cond, &Sink::new(Kind::Retry, Some(ctx.site(line))));
                let body = Ctx {
                    in_loop: true,
                    ..ctx.clone()
                };
                self.walk_list(&w.1.list, &body, sink);
            }
            ast::CompoundCommand::Arithmetic(_) => {}
            ast::CompoundCommand::Coprocess(c) => {
                let line = c.loc.start.line;
                let s = Sink::new(Kind::Ignored(Why::Background), Some(ctx.site(line)));
                self.walk_command(&c.body, ctx, &s);
            }
        }
    }

    /// The sink of an `if`/`elif` condition: a failure runs the else part
    /// (plain) or the then part (negated); a part that ends by failing
    /// passes the failure on.
    pub(super) fn if_test(
        &self,
        ctx: &Ctx,
        sink: &Sink,
        then: &ast::CompoundList,
        elses: Option<&[ast::ElseClause]>,
        line: usize,
    ) -> Sink {
        let site = Some(ctx.site(line));
        // A branch that ends by failing, unless some path through it ends in
        // success first: then the test accepts the failures that path
        // recognises, which only migrate-tolerate may do (the tripwire
        // refuses it at run time as a masked failure).
        let fails = |list: &ast::CompoundList| match last_command(list) {
            Some(c) => match self.ending(c, ctx, &sink.as_command_status(), false, 0) {
                Ending::Fails(s) => Some(match early_success(list, true) {
                    Some((l, text)) => Sink::new(
                        Kind::Condition(std::borrow::Cow::Owned(format!(
                            "a test whose failure branch can also end in success ({}: {text}); accept the failures it recognises with migrate-tolerate (--not-found, --not-served, ...) and let every other one fail",
                            ctx.site(l)
                        ))),
                        site.clone(),
                    ),
                    None => s,
                }),
                _ => None,
            },
            None => None,
        };
        let plain = match elses.and_then(|e| e.first()) {
            Some(e) if e.condition.is_none() => fails(&e.body),
            _ => None,
        };
        let then_breaks = ctx.in_loop && last_command(then).is_some_and(is_break_command);
        let plain = if then_breaks {
            Sink::new(Kind::Retry, site.clone())
        } else {
            plain.unwrap_or_else(|| {
                Sink::new(Kind::Condition("an if condition".into()), site.clone())
            })
        };
        let negated = fails(then).unwrap_or_else(|| Sink::new(Kind::Negated, site.clone()));
        Sink::new(Kind::Test(Box::new(plain), Box::new(negated)), site)
    }

    pub(super) fn walk_redirects(&mut self, redirects: &[&ast::IoRedirect], ctx: &Ctx, why: Why) {
        for r in redirects {
            match r {
                ast::IoRedirect::File(_, _, target) => match target {
                    ast::IoFileRedirectTarget::Filename(w)
                    | ast::IoFileRedirectTarget::Duplicate(w) => {
                        self.walk_word(w, 1, ctx, why.clone())
                    }
                    ast::IoFileRedirectTarget::ProcessSubstitution(_, sub) => {
                        self.process_substitution(sub, ctx, why == Why::Mapfile)
                    }
                    ast::IoFileRedirectTarget::Fd(_) => {}
                },
                ast::IoRedirect::HereDocument(_, doc) => {
                    if doc.requires_expansion {
                        // A body starts on its own line: no continuation
                        // before it, so its recorded start is right.
                        let line = doc.doc.loc.as_ref().map_or(1, |l| l.start.line);
                        for sub in parse::heredoc_substitutions(&doc.doc.value) {
                            self.walk_substitution(&sub, line, ctx, why.clone());
                        }
                    }
                }
                ast::IoRedirect::HereString(_, w) | ast::IoRedirect::OutputAndError(w, _) => {
                    self.walk_word(w, 1, ctx, why.clone())
                }
            }
        }
    }

    /// The command substitutions in a word, whose status is dropped for
    /// `why`. `fallback` is the line when the word has no position.
    pub(super) fn walk_word(&mut self, w: &ast::Word, fallback: usize, ctx: &Ctx, why: Why) {
        let (text, line) = word_text(w, ctx, fallback);
        for sub in parse::substitutions(text) {
            self.walk_substitution(&sub, line, ctx, why.clone());
        }
    }

    pub(super) fn walk_substitution(
        &mut self,
        sub: &parse::Substitution,
        line: usize,
        ctx: &Ctx,
        why: Why,
    ) {
        let at = ctx.site(line + sub.line_offset);
        let sink = Sink::new(Kind::Ignored(why), Some(at));
        self.walk_substitution_to(sub, line, ctx, &sink);
    }

    /// Walks the program inside `$(...)`, whose final status goes to `sink`.
    pub(super) fn walk_substitution_to(
        &mut self,
        sub: &parse::Substitution,
        line: usize,
        ctx: &Ctx,
        sink: &Sink,
    ) {
        let start = line + sub.line_offset;
        let program = match parse::program(&sub.text) {
            Ok(p) => p,
            Err(e) => {
                let file = ctx.file.clone();
                self.parse_failure(&file, ctx.line(start) - 1, &e);
                return;
            }
        };
        let base = ctx.line(start) - 1;
        let src: Rc<str> = Rc::from(sub.text.as_str());
        self.register(&program, &ctx.file, &src, base);
        let site = ctx.site(start);
        let inherit = self.inherit_errexit && self.dialect == Dialect::Bash;
        let status = sink.as_command_status();
        let inner = Ctx {
            base,
            src,
            errexit_off: if inherit {
                ctx.errexit_off.clone()
            } else {
                Some(Why::Substitution(site))
            },
            exit_sink: status.clone(),
            ..ctx.clone()
        };
        let items = items_of(&program);
        self.walk_items(&items, &inner, &status);
    }

    // ---- simple commands -------------------------------------------------
}

/// The first command in `list` (its last item left out when `skip_last`:
/// that is the failure the branch ends with) that ends the branch, the
/// function, the script or a loop round in success: `exit 0`, `return 0`,
/// a bare `exit`/`return` (status of the command before: an `echo`),
/// `continue`, `break`. Function definitions are not followed (they run
/// only when called).
pub(super) fn early_success(list: &ast::CompoundList, skip_last: bool) -> Option<(usize, String)> {
    let n = list.0.len();
    for (i, item) in list.0.iter().enumerate() {
        if skip_last && i + 1 == n {
            continue;
        }
        for p in pipelines(&item.0) {
            for c in &p.seq {
                if let Some(found) = early_success_in(c) {
                    return Some(found);
                }
            }
        }
    }
    None
}

/// A bare `exit` or `return` (which passes on the status before it).
fn is_bare_exit(c: &ast::Command) -> bool {
    match c {
        ast::Command::Simple(s) => {
            let words = simple_words(s);
            words.len() == 1
                && matches!(
                    parse::literal(&words[0].value).as_deref(),
                    Some("exit" | "return")
                )
        }
        _ => false,
    }
}

/// [`early_success`] of one command (all of it).
pub(super) fn early_success_in(c: &ast::Command) -> Option<(usize, String)> {
    match c {
        ast::Command::Simple(s) => {
            let words = simple_words(s);
            let name = words.first().and_then(|w| parse::literal(&w.value))?;
            let arg = words.get(1).and_then(|w| parse::literal(&w.value));
            let success = match name.as_str() {
                "exit" | "return" => words.len() == 1 || arg.as_deref() == Some("0"),
                "continue" | "break" => true,
                _ => false,
            };
            success.then(|| {
                let text: Vec<&str> = words.iter().map(|w| w.value.as_str()).collect();
                (simple_line(s).unwrap_or(1), text.join(" "))
            })
        }
        ast::Command::Compound(cc, _) => parse::compound_lists(cc)
            .into_iter()
            .find_map(|l| early_success(l, false)),
        ast::Command::Function(_) | ast::Command::ExtendedTest(..) => None,
    }
}

/// A word's text for finding the substitutions in it, and its line: as
/// written when its position in the parsed text is known, so the lines
/// inside a multi-line `$(...)` count its line continuations; else its
/// value, from `fallback` when the word has no position at all.
pub(super) fn word_text<'w>(w: &'w ast::Word, ctx: &'w Ctx, fallback: usize) -> (&'w str, usize) {
    match parse::raw_word(&ctx.src, w) {
        Some((raw, line)) => (raw, line),
        None => (&w.value, parse::word_line(w).unwrap_or(fallback)),
    }
}
