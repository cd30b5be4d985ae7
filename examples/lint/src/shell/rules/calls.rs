//! Calls the walk follows: functions, builtins, `eval`, `set`, `trap` and sourced files.

use std::rc::Rc;

use brush_parser::ast;

use crate::shell::parse;
use crate::shell::rules::{
    Ctx, Sink, Site, Walker, Why, items_of, simple_words, visit_simple, visit_simple_list,
};
use crate::shell::source::Resolution;

impl<'a> Walker<'a> {
    pub(super) fn walk_call_at(&mut self, f: &str, ctx: &Ctx, sink: &Sink, site: &Site) {
        // errexit inside: off when the call is in a condition.
        let errexit = match self.errexit_off(ctx) {
            None | Some(Why::SetPlusE) => None,
            Some(Why::Substitution(s)) => Some(Why::Substitution(s)),
            Some(Why::InFunction(s)) => Some(Why::InFunction(s)),
            Some(_) => Some(Why::InFunction(site.clone())),
        };
        let ctx = Ctx {
            errexit_off: errexit,
            ..ctx.clone()
        };
        self.walk_call(f, &ctx, sink);
    }

    pub(super) fn walk_call(&mut self, f: &str, ctx: &Ctx, sink: &Sink) {
        if self.stack.iter().any(|s| s == f) || !self.spend() {
            return;
        }
        let Some(func) = self.functions.get(f).cloned() else {
            return;
        };
        self.called.insert(f.to_owned());
        let body_sink = sink.as_command_status();
        let key = (
            f.to_owned(),
            body_sink.clone(),
            ctx.errexit_off.clone(),
            self.set_e_off,
            self.pipefail,
        );
        if !self.walked.insert(key) {
            return;
        }
        let inner = Ctx {
            file: func.file.clone(),
            src: func.src.clone(),
            base: func.base,
            errexit_off: ctx.errexit_off.clone(),
            exit_sink: ctx.exit_sink.clone(),
            return_sink: body_sink.clone(),
            in_loop: false,
        };
        self.stack.push(f.to_owned());
        if let Some(r) = &func.def.body.1 {
            self.walk_redirects(&r.0.iter().collect::<Vec<_>>(), &inner, Why::Argument);
        }
        self.walk_compound(&func.def.body.0, &inner, &body_sink);
        self.stack.pop();
    }

    /// Builtins with rules of their own.
    pub(super) fn builtin(
        &mut self,
        name: &str,
        args: &[String],
        words: &[&ast::Word],
        ctx: &Ctx,
        sink: &Sink,
        site: &Site,
    ) {
        match name {
            "set" => self.set(args, site),
            "shopt"
                if args.first().is_some_and(|a| a == "-s")
                    && args.iter().any(|a| a == "inherit_errexit") =>
            {
                self.inherit_errexit = true;
            }
            "trap" => self.trap(args, site),
            "alias" => {
                for a in args.iter().filter_map(|a| parse::literal(a)) {
                    if let Some((alias, value)) = a.split_once('=')
                        && self.is_cluster_name(value.split_whitespace().next().unwrap_or(""))
                    {
                        self.cluster_aliases.insert(alias.to_owned());
                    }
                }
            }
            "eval" => {
                let parts: Option<Vec<String>> = args.iter().map(|a| parse::literal(a)).collect();
                if let Some(parts) = parts {
                    let text = parts.join(" ");
                    let line = words
                        .get(1)
                        .and_then(|w| parse::word_line(w))
                        .unwrap_or(site.line - ctx.base);
                    let sub = parse::Substitution {
                        text,
                        line_offset: 0,
                    };
                    // eval's status is the string's last command's.
                    self.walk_eval(&sub, line, ctx, &sink.as_command_status());
                }
            }
            "." | "source" => {
                let Some(word) = words.get(1) else {
                    return;
                };
                let resolution =
                    self.cache
                        .resolve(&word.value, &ctx.file.rel, &self.script, &self.vars);
                match resolution {
                    Resolution::InTree(rel) => self.walk_sourced(&rel, ctx, sink, site),
                    Resolution::Outside => {}
                    Resolution::Missing(rel) => self.push(
                        site,
                        "source-unresolved",
                        format!(
                            "'{name} {}' reads {rel}, which is not in the tree (scripts run from the tree root), so its helpers are not checked and run refuses the script; name the file from the root: . \"$MIGRATION_TREE/lib/NAME.sh\" (or waive it with a reason: # migrate: allow source-unresolved: WHY)",
                            word.value
                        ),
                    ),
                    Resolution::Unresolved => self.push(
                        site,
                        "source-unresolved",
                        format!(
                            "cannot tell which file '{} {}' reads, so its helpers are not checked and run refuses the script; name the file from the tree root: . \"$MIGRATION_TREE/lib/NAME.sh\" (or waive it with a reason: # migrate: allow source-unresolved: WHY)",
                            name, word.value
                        ),
                    ),
                }
            }
            _ => {}
        }
    }

    pub(super) fn walk_eval(
        &mut self,
        sub: &parse::Substitution,
        line: usize,
        ctx: &Ctx,
        sink: &Sink,
    ) {
        // A string eval'd is data until it runs; one the parser cannot read
        // is left to the run-time checks rather than refused.
        let Ok(program) = parse::program(&sub.text) else {
            return;
        };
        let base = ctx.line(line) - 1;
        let src: Rc<str> = Rc::from(sub.text.as_str());
        self.register(&program, &ctx.file, &src, base);
        let inner = Ctx {
            base,
            src,
            ..ctx.clone()
        };
        let items = items_of(&program);
        self.walk_items(&items, &inner, sink);
    }

    pub(super) fn set(&mut self, args: &[String], site: &Site) {
        let mut iter = args.iter().filter_map(|a| parse::literal(a));
        while let Some(a) = iter.next() {
            let on = a.starts_with('-');
            if a == "--" || !(on || a.starts_with('+')) || a.len() < 2 {
                // Positional parameters from here on.
                break;
            }
            let flags = &a[1..];
            // `-o name`, and `-euo name` (the name follows the flags).
            let option = if flags.ends_with('o') {
                iter.next()
            } else {
                None
            };
            let e_flag = flags.contains('e');
            if e_flag || option.as_deref() == Some("errexit") {
                if on {
                    self.set_e_off = false;
                } else {
                    self.set_e_off = true;
                    self.push(
                        site,
                        "errexit-disabled",
                        format!(
                            "'set {a}{}' turns errexit off: from here on a failing command does not stop the script; keep errexit on and handle the one expected failure explicitly (cmd || exit 1, or migrate-tolerate)",
                            option.as_deref().map(|o| format!(" {o}")).unwrap_or_default()
                        ),
                    );
                }
            }
            match option.as_deref() {
                Some("pipefail") => self.pipefail = on,
                Some("posix") if on => self.inherit_errexit = true,
                _ => {}
            }
        }
    }

    pub(super) fn trap(&mut self, args: &[String], site: &Site) {
        let Some(action) = args.first().and_then(|a| parse::literal(a)) else {
            return;
        };
        if args.len() < 2 || action == "-" {
            return;
        }
        let Ok(program) = parse::program(&action) else {
            return;
        };
        let mut exits_zero = false;
        let mut check = |s: &ast::SimpleCommand| {
            let w = simple_words(s);
            let name = w.first().and_then(|w| parse::literal(&w.value));
            let arg = w.get(1).and_then(|w| parse::literal(&w.value));
            if name.as_deref() == Some("exit") && arg.as_deref() == Some("0") {
                exits_zero = true;
            }
        };
        let mut called: Vec<String> = Vec::new();
        for list in &program.complete_commands {
            visit_simple_list(list, &mut |s| {
                check(s);
                if let Some(n) = simple_words(s)
                    .first()
                    .and_then(|w| parse::literal(&w.value))
                {
                    called.push(n);
                }
            });
        }
        for f in called {
            if let Some(func) = self.functions.get(&f) {
                visit_simple(&func.def.body.0, &mut check);
            }
        }
        if exits_zero {
            self.push(
                site,
                "trap-exit-zero",
                format!(
                    "trap '{action}' ends the script with status 0 whatever failed before; never exit 0 from a trap: clean up and let the status through (trap 'rm -f \"$tmp\"' EXIT)"
                ),
            );
        }
    }

    pub(super) fn walk_sourced(&mut self, rel: &str, ctx: &Ctx, sink: &Sink, site: &Site) {
        if self.stack.iter().any(|s| s == rel) || !self.spend() {
            return;
        }
        let Some(file) = self.cache.get(rel) else {
            return;
        };
        self.scan_text(&file);
        if !self.sourced_at.contains_key(rel) {
            let origin = if site.file == self.script {
                site.clone()
            } else {
                self.sourced_at
                    .get(&site.file)
                    .cloned()
                    .unwrap_or_else(|| site.clone())
            };
            self.sourced_at.insert(rel.to_owned(), origin);
        }
        let program = match &file.program {
            Ok(p) => p,
            Err(e) => {
                self.parse_failure(&file, 0, e);
                return;
            }
        };
        let status = sink.as_command_status();
        let key = (
            format!("source:{rel}"),
            status.clone(),
            ctx.errexit_off.clone(),
            self.set_e_off,
            self.pipefail,
        );
        let src: Rc<str> = Rc::from(file.text.as_str());
        self.register(program, &file, &src, 0);
        if !self.walked.insert(key) {
            return;
        }
        let inner = Ctx {
            file: file.clone(),
            src,
            base: 0,
            return_sink: status.clone(),
            ..ctx.clone()
        };
        self.stack.push(rel.to_owned());
        let items = items_of(program);
        self.walk_items(&items, &inner, &status);
        self.stack.pop();
    }
}
