//! The rules: one walk over the syntax tree that follows the exit status of
//! every cluster command to where it ends up.
//!
//! A status ends in a *sink*. Under errexit, a failing command in statement
//! position stops the script (fine); everywhere else the shell drops or
//! consumes the status: a `for` word list, the left side of `&&`, an `if`
//! condition, `|| true`, a pipeline that is not the last element, a
//! `local x=$(...)` assignment, a background job, the inside of a function
//! called from a condition (errexit is off in there), the inside of `$(...)`
//! in bash and busybox ash. Functions are followed from their call sites
//! (a wrapper around kubectl is a cluster command), `.`/`source` into the
//! tree, and `eval` and `trap` strings when they are literal.

use std::collections::{HashMap, HashSet};
use std::rc::Rc;

use brush_parser::ast;

use super::parse;
use super::source::{Resolution, SourceCache, SourceFile};
use crate::lint::Level;

/// One rule of the shell analysis.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rule {
    /// Stable id (what lint prints in brackets and waivers name).
    pub id: &'static str,
    /// Severity.
    pub level: Level,
    /// Whether a finding makes `run` (and `plan`) refuse the script.
    pub blocks_run: bool,
}

const fn rule(id: &'static str, level: Level, blocks_run: bool) -> Rule {
    Rule {
        id,
        level,
        blocks_run,
    }
}

/// Every rule of the shell analysis.
pub const RULES: &[Rule] = &[
    rule("shell-parse", Level::Error, true),
    rule("for-command-substitution", Level::Error, true),
    rule("kubectl-error-ignored", Level::Error, true),
    rule("cluster-command-in-condition", Level::Error, true),
    rule("negated-cluster-command", Level::Error, true),
    rule("errexit-off-in-function", Level::Error, true),
    rule("errexit-off-in-substitution", Level::Error, true),
    rule("errexit-disabled", Level::Error, true),
    rule("trap-exit-zero", Level::Error, true),
    rule("background-cluster-command", Level::Error, true),
    rule("substitution-in-declaration", Level::Error, true),
    rule("substitution-in-test", Level::Error, true),
    rule("substitution-in-argument", Level::Error, true),
    rule("process-substitution", Level::Error, true),
    rule("mapfile-substitution", Level::Error, true),
    rule("hand-written-retry", Level::Error, true),
    rule("cluster-command-path", Level::Error, true),
    rule(super::path_reset::RULE, Level::Error, true),
    rule("ledger-write", Level::Error, true),
    rule("analysis-limit", Level::Error, true),
    rule("kubectl-in-pipeline", Level::Warning, false),
    rule("source-unresolved", Level::Warning, false),
];

/// The rule with this id.
pub fn find(id: &str) -> Option<&'static Rule> {
    RULES.iter().find(|r| r.id == id)
}

/// Which shell a script is written for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// POSIX sh (dash, busybox ash): no pipefail unless the script sets it.
    Posix,
    /// bash: the runner adds `-o pipefail`.
    Bash,
}

impl Dialect {
    /// The dialect a shebang line (without `#!`) names.
    pub fn of_shebang(shebang: &str) -> Self {
        if shebang.split_whitespace().any(|w| w.ends_with("bash")) {
            Dialect::Bash
        } else {
            Dialect::Posix
        }
    }
}

/// What the analysis needs to know.
#[derive(Debug, Clone)]
pub struct Config {
    /// Commands that call the cluster.
    pub cluster_commands: Vec<String>,
    /// The ledger ConfigMap's name.
    pub ledger_name: String,
}

/// A finding before waivers, with where its file was sourced from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Raw {
    /// File relative to the tree root.
    pub file: String,
    /// One-based line.
    pub line: Option<usize>,
    /// The rule.
    pub rule: &'static Rule,
    /// What is wrong and what to do.
    pub message: String,
    /// `pre-apply/x:6`: the `.` line of the script that sourced the file.
    pub sourced_from: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Site {
    file: String,
    line: usize,
}

impl std::fmt::Display for Site {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.file, self.line)
    }
}

/// Why a status is dropped.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Why {
    /// A non-final command of a condition list (errexit is off there).
    Condition,
    /// Inside a function called from a condition at this site.
    InFunction(Site),
    /// Inside `$(...)`: bash and busybox ash clear errexit there.
    Substitution(Site),
    /// After `set +e` (reported at the `set` itself).
    SetPlusE,
    PipelineNotLast,
    Background,
    ForList,
    Declaration(String),
    Test(&'static str),
    Argument,
    EarlierSubstitution,
    ProcessSubstitution,
    Mapfile,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Kind {
    /// The failure stops the script or is its exit status.
    Observed,
    /// Statement position under errexit: fatal for the last command of an
    /// and-or list, dropped for the left side of `&&`.
    Errexit,
    /// `|| true` and friends: the failure becomes success.
    Neutralized(String),
    /// Consumed as a yes/no answer.
    Condition(&'static str),
    /// `! cmd`.
    Negated,
    /// The condition of a hand-written retry loop.
    Retry,
    /// Dropped.
    Ignored(Why),
    /// An `if` condition: what a failure leads to, plain and negated.
    Test(Box<Sink>, Box<Sink>),
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Sink {
    kind: Kind,
    /// Where the disposition arose (reported there), if not at the command.
    at: Option<Site>,
}

impl Sink {
    fn new(kind: Kind, at: Option<Site>) -> Self {
        Sink { kind, at }
    }

    fn observed() -> Self {
        Sink::new(Kind::Observed, None)
    }

    /// The status of a simple command (function call, `eval`, subshell,
    /// assignment) as its failure is seen by the caller: errexit treats a
    /// failing simple command as fatal wherever an and-or list would be.
    fn as_command_status(&self) -> Self {
        match self.kind {
            Kind::Errexit => Sink::observed(),
            _ => self.clone(),
        }
    }
}

#[derive(Debug, Clone)]
struct Func {
    def: Rc<ast::FunctionDefinition>,
    file: Rc<SourceFile>,
    base: usize,
    line: usize,
}

#[derive(Clone)]
struct Ctx {
    file: Rc<SourceFile>,
    /// Line of the parsed text's first line in the file, minus one.
    base: usize,
    /// Lexically off: why.
    errexit_off: Option<Why>,
    exit_sink: Sink,
    return_sink: Sink,
    in_loop: bool,
}

impl Ctx {
    fn line(&self, inner: usize) -> usize {
        self.base + inner
    }

    fn site(&self, inner: usize) -> Site {
        Site {
            file: self.file.rel.clone(),
            line: self.line(inner),
        }
    }

    fn with_errexit_off(&self, why: Why) -> Ctx {
        Ctx {
            errexit_off: Some(self.errexit_off.clone().unwrap_or(why)),
            ..self.clone()
        }
    }
}

/// What a resolved command is.
enum Cmd {
    /// Assignments only.
    Nothing,
    /// A cluster command: the name as written, whether a path, its words
    /// after the name.
    Cluster {
        name: String,
        path: bool,
        args: Vec<String>,
    },
    /// A function defined in the script or a sourced file.
    Function(String, Vec<String>),
    /// Anything else: the literal name (empty when not literal) and the
    /// words after it.
    Other(String, Vec<String>),
}

const TRANSPARENT: [&str; 9] = [
    "command", "exec", "env", "timeout", "nice", "nohup", "time", "xargs", "sudo",
];

const LEDGER_WRITE_VERBS: [&str; 10] = [
    "patch", "apply", "edit", "replace", "create", "delete", "label", "annotate", "set", "scale",
];

const BUDGET: usize = 200_000;

/// The analysis of one entry file (a tier script, or a lib file on its own).
pub struct Walker<'a> {
    config: &'a Config,
    cache: &'a mut SourceCache,
    /// The entry file (`$0`).
    script: String,
    functions: HashMap<String, Func>,
    /// Functions walked at least once.
    called: HashSet<String>,
    /// Variables holding a path, for `.` resolution.
    vars: HashMap<String, String>,
    /// Variables holding a cluster command (`KUBECTL`, and assigned ones).
    cluster_vars: HashSet<String>,
    /// Aliases of a cluster command (`alias k=kubectl`).
    cluster_aliases: HashSet<String>,
    /// Function and file walks done: (name, sink, errexit, state).
    walked: HashSet<(String, Sink, Option<Why>, bool, bool)>,
    stack: Vec<String>,
    /// Where each helper file was first sourced from the entry file.
    sourced_at: HashMap<String, Site>,
    findings: Vec<Raw>,
    budget: usize,
    dialect: Dialect,
    set_e_off: bool,
    pipefail: bool,
    inherit_errexit: bool,
}

impl<'a> Walker<'a> {
    /// An analysis of `script` (tree-relative) in `dialect`.
    pub fn new(
        config: &'a Config,
        cache: &'a mut SourceCache,
        script: &str,
        dialect: Dialect,
    ) -> Self {
        let cluster_vars = config
            .cluster_commands
            .iter()
            .map(|c| c.to_uppercase().replace('-', "_"))
            .collect();
        Walker {
            config,
            cache,
            script: script.to_owned(),
            functions: HashMap::new(),
            called: HashSet::new(),
            vars: HashMap::new(),
            cluster_vars,
            cluster_aliases: HashSet::new(),
            walked: HashSet::new(),
            stack: Vec::new(),
            sourced_at: HashMap::new(),
            findings: Vec::new(),
            budget: BUDGET,
            dialect,
            set_e_off: false,
            // The runner runs bash with -o pipefail.
            pipefail: dialect == Dialect::Bash,
            inherit_errexit: false,
        }
    }

    /// Walks the entry file and returns the findings.
    pub fn run(mut self, file: Rc<SourceFile>) -> Vec<Raw> {
        let program = match &file.program {
            Ok(p) => p,
            Err(e) => {
                self.parse_failure(&file, 0, e);
                return self.findings;
            }
        };
        self.register(program, &file, 0);
        let ctx = Ctx {
            file: file.clone(),
            base: 0,
            errexit_off: None,
            exit_sink: Sink::observed(),
            return_sink: Sink::observed(),
            in_loop: false,
        };
        let items = items_of(program);
        self.walk_items(&items, &ctx, &Sink::observed());
        // Functions of the entry file nobody called here: checked as if
        // called in statement position.
        let mut uncalled: Vec<(usize, String)> = self
            .functions
            .iter()
            .filter(|(name, f)| f.file.rel == file.rel && !self.called.contains(*name))
            .map(|(name, f)| (f.line, name.clone()))
            .collect();
        uncalled.sort();
        for (_, name) in uncalled {
            self.set_e_off = false;
            self.walk_call(&name, &ctx, &Sink::new(Kind::Errexit, None));
        }
        self.findings
    }

    fn parse_failure(&mut self, file: &SourceFile, base: usize, e: &parse::ParseFailure) {
        self.push(
            &Site {
                file: file.rel.clone(),
                line: base + e.line.unwrap_or(1),
            },
            "shell-parse",
            format!(
                "cannot parse this as shell ({}); nothing in it can be checked, so run refuses it: fix the syntax",
                e.message
            ),
        );
    }

    fn push(&mut self, at: &Site, rule: &'static str, message: String) {
        let Some(rule) = find(rule) else {
            return;
        };
        let sourced_from = (at.file != self.script)
            .then(|| self.sourced_at.get(&at.file).map(ToString::to_string))
            .flatten();
        self.findings.push(Raw {
            file: at.file.clone(),
            line: Some(at.line),
            rule,
            message,
            sourced_from,
        });
    }

    fn spend(&mut self) -> bool {
        if self.budget == 0 {
            return false;
        }
        self.budget -= 1;
        if self.budget == 0 {
            let at = Site {
                file: self.script.clone(),
                line: 1,
            };
            self.push(
                &at,
                "analysis-limit",
                "the script and its helpers are too large or too recursive to check completely; split them".into(),
            );
        }
        self.budget > 0
    }

    fn is_cluster_name(&self, word: &str) -> bool {
        let base = word.rsplit('/').next().unwrap_or(word);
        self.config.cluster_commands.iter().any(|c| c == base)
    }

    fn errexit_off(&self, ctx: &Ctx) -> Option<Why> {
        ctx.errexit_off
            .clone()
            .or_else(|| self.set_e_off.then_some(Why::SetPlusE))
    }

    // ---- function registry -------------------------------------------

    fn register(&mut self, program: &ast::Program, file: &Rc<SourceFile>, base: usize) {
        for list in &program.complete_commands {
            self.register_list(list, file, base);
        }
    }

    fn register_list(&mut self, list: &ast::CompoundList, file: &Rc<SourceFile>, base: usize) {
        for item in &list.0 {
            for p in pipelines(&item.0) {
                for c in &p.seq {
                    match c {
                        ast::Command::Function(f) => {
                            let name = f.fname.value.clone();
                            let line = base + parse::word_line(&f.fname).unwrap_or(1);
                            self.functions.insert(
                                name,
                                Func {
                                    def: Rc::new(f.clone()),
                                    file: file.clone(),
                                    base,
                                    line,
                                },
                            );
                            for inner in parse::compound_lists(&f.body.0) {
                                self.register_list(inner, file, base);
                            }
                        }
                        ast::Command::Compound(cc, _) => {
                            for inner in parse::compound_lists(cc) {
                                self.register_list(inner, file, base);
                            }
                        }
                        _ => {}
                    }
                }
            }
        }
    }

    // ---- lists ---------------------------------------------------------

    fn walk_items(&mut self, items: &[&ast::CompoundListItem], ctx: &Ctx, last: &Sink) {
        for (i, item) in items.iter().enumerate() {
            if !self.spend() {
                return;
            }
            let is_last = i + 1 == items.len();
            let sink = if matches!(item.1, ast::SeparatorOperator::Async) {
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
            };
            self.walk_andor(&item.0, ctx, &sink);
        }
    }

    fn walk_list(&mut self, list: &ast::CompoundList, ctx: &Ctx, last: &Sink) {
        let items: Vec<&ast::CompoundListItem> = list.0.iter().collect();
        self.walk_items(&items, ctx, last);
    }

    fn walk_andor(&mut self, ao: &ast::AndOrList, ctx: &Ctx, sink: &Sink) {
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
                        Kind::Condition("the left side of && (errexit ignores it there)"),
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
    fn handler(&mut self, h: &ast::Pipeline, ctx: &Ctx, list: &Sink, site: &Site) -> Sink {
        let at = Some(site.clone());
        if h.bang || h.seq.len() != 1 {
            return Sink::new(
                Kind::Condition("a test whose || branch runs other commands"),
                at,
            );
        }
        match self.ending(&h.seq[0], ctx, list, true, 0) {
            Ending::Fails(s) => s,
            Ending::Neutral(text) => Sink::new(Kind::Neutralized(format!("|| {text}")), at),
            Ending::Other => Sink::new(
                Kind::Condition("a test: its || branch runs when it fails for any reason"),
                at,
            ),
        }
    }

    /// How a command that runs after a failure ends: passing a failure on
    /// (to which sink), turning it into success, or something else.
    /// `bare_exit_fails`: `exit` without a number exits with `$?`, which is
    /// the failure after `||` but 0 in a `then` branch after `if !`.
    fn ending(
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

    fn walk_pipeline(&mut self, p: &ast::Pipeline, ctx: &Ctx, sink: &Sink) {
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

    fn ledger_write(&mut self, at: &Site) {
        let message = format!(
            "the script writes the ledger ConfigMap '{}'; scripts never write the ledger or stamp a version, the runner records outcomes",
            self.config.ledger_name
        );
        self.push(at, "ledger-write", message);
    }

    fn walk_command(&mut self, c: &ast::Command, ctx: &Ctx, sink: &Sink) -> Option<ClusterCall> {
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

    fn walk_compound(&mut self, cc: &ast::CompoundCommand, ctx: &Ctx, sink: &Sink) {
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
    fn if_test(
        &self,
        ctx: &Ctx,
        sink: &Sink,
        then: &ast::CompoundList,
        elses: Option<&[ast::ElseClause]>,
        line: usize,
    ) -> Sink {
        let site = Some(ctx.site(line));
        let fails = |list: &ast::CompoundList| match last_command(list) {
            Some(c) => match self.ending(c, ctx, &sink.as_command_status(), false, 0) {
                Ending::Fails(s) => Some(s),
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
            plain.unwrap_or_else(|| Sink::new(Kind::Condition("an if condition"), site.clone()))
        };
        let negated = fails(then).unwrap_or_else(|| Sink::new(Kind::Negated, site.clone()));
        Sink::new(Kind::Test(Box::new(plain), Box::new(negated)), site)
    }

    fn walk_redirects(&mut self, redirects: &[&ast::IoRedirect], ctx: &Ctx, why: Why) {
        for r in redirects {
            match r {
                ast::IoRedirect::File(_, _, target) => match target {
                    ast::IoFileRedirectTarget::Filename(w)
                    | ast::IoFileRedirectTarget::Duplicate(w) => {
                        self.walk_word(w, 1, ctx, why.clone())
                    }
                    ast::IoFileRedirectTarget::ProcessSubstitution(_, sub) => {
                        let why = if why == Why::Mapfile {
                            Why::Mapfile
                        } else {
                            Why::ProcessSubstitution
                        };
                        let line = sub.loc.start.line;
                        let s = Sink::new(Kind::Ignored(why), Some(ctx.site(line)));
                        self.walk_list(&sub.list, ctx, &s);
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
    fn walk_word(&mut self, w: &ast::Word, fallback: usize, ctx: &Ctx, why: Why) {
        let line = parse::word_line(w).unwrap_or(fallback);
        for sub in parse::substitutions(&w.value) {
            self.walk_substitution(&sub, line, ctx, why.clone());
        }
    }

    fn walk_substitution(&mut self, sub: &parse::Substitution, line: usize, ctx: &Ctx, why: Why) {
        let at = ctx.site(line + sub.line_offset);
        let sink = Sink::new(Kind::Ignored(why), Some(at));
        self.walk_substitution_to(sub, line, ctx, &sink);
    }

    /// Walks the program inside `$(...)`, whose final status goes to `sink`.
    fn walk_substitution_to(
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
        self.register(&program, &ctx.file, base);
        let site = ctx.site(start);
        let inherit = self.inherit_errexit && self.dialect == Dialect::Bash;
        let status = sink.as_command_status();
        let inner = Ctx {
            base,
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

    fn walk_simple(
        &mut self,
        s: &ast::SimpleCommand,
        ctx: &Ctx,
        sink: &Sink,
    ) -> Option<ClusterCall> {
        let words = simple_words(s);
        let line = simple_line(s).unwrap_or(1);
        let site = ctx.site(line);
        let cmd = self.resolve(&words);
        let raw: Vec<&str> = words.iter().map(|w| w.value.as_str()).collect();
        for m in super::path_reset::command(&raw) {
            self.push(&site, super::path_reset::RULE, m);
        }
        let name = match &cmd {
            Cmd::Other(n, _) => n.clone(),
            _ => String::new(),
        };
        let declaration = matches!(
            name.as_str(),
            "local" | "export" | "readonly" | "declare" | "typeset"
        );
        let mapfile = matches!(name.as_str(), "mapfile" | "readarray");
        let test = matches!(name.as_str(), "[" | "test");

        // Prefix: assignments and redirections.
        let mut assignment_subs: Vec<(parse::Substitution, usize)> = Vec::new();
        let mut redirects: Vec<&ast::IoRedirect> = Vec::new();
        for item in s.prefix.iter().flat_map(|p| p.0.iter()) {
            match item {
                ast::CommandPrefixOrSuffixItem::AssignmentWord(a, w) => {
                    let wline = parse::word_line(w).unwrap_or(line);
                    if let ast::AssignmentValue::Scalar(v) = &a.value {
                        self.note_assignment(a, ctx, line);
                        for sub in parse::substitutions(&v.value) {
                            assignment_subs.push((sub, wline));
                        }
                    }
                }
                ast::CommandPrefixOrSuffixItem::IoRedirect(r) => redirects.push(r),
                ast::CommandPrefixOrSuffixItem::ProcessSubstitution(_, sub) => {
                    self.process_substitution(sub, ctx, mapfile)
                }
                ast::CommandPrefixOrSuffixItem::Word(w) => {
                    self.walk_word(w, line, ctx, Why::Argument)
                }
            }
        }
        let assignment_only = matches!(cmd, Cmd::Nothing);
        let count = assignment_subs.len();
        for (i, (sub, wline)) in assignment_subs.iter().enumerate() {
            if assignment_only && i + 1 == count {
                self.walk_substitution_to(sub, *wline, ctx, sink);
            } else if assignment_only {
                self.walk_substitution(sub, *wline, ctx, Why::EarlierSubstitution);
            } else {
                self.walk_substitution(sub, *wline, ctx, Why::Argument);
            }
        }
        // Name and suffix.
        let word_why = if test {
            Why::Test("a [ ] test")
        } else {
            Why::Argument
        };
        if let Some(w) = &s.word_or_name {
            self.walk_word(w, line, ctx, word_why.clone());
        }
        for item in s.suffix.iter().flat_map(|p| p.0.iter()) {
            match item {
                ast::CommandPrefixOrSuffixItem::Word(w) => {
                    self.walk_word(w, line, ctx, word_why.clone())
                }
                ast::CommandPrefixOrSuffixItem::AssignmentWord(a, w) => {
                    let why = if declaration {
                        Why::Declaration(name.clone())
                    } else {
                        Why::Argument
                    };
                    if declaration {
                        self.note_assignment(a, ctx, line);
                    }
                    self.walk_word(w, line, ctx, why);
                }
                ast::CommandPrefixOrSuffixItem::IoRedirect(r) => redirects.push(r),
                ast::CommandPrefixOrSuffixItem::ProcessSubstitution(_, sub) => {
                    self.process_substitution(sub, ctx, mapfile)
                }
            }
        }
        let redirect_why = if mapfile { Why::Mapfile } else { Why::Argument };
        self.walk_redirects(&redirects, ctx, redirect_why);

        match cmd {
            Cmd::Nothing => None,
            Cmd::Cluster { name, path, args } => {
                if path {
                    self.push(
                        &site,
                        "cluster-command-path",
                        format!(
                            "'{name}' is called by path, which bypasses the runner's shim on PATH (and KUBECTL); call it by name: {}",
                            name.rsplit('/').next().unwrap_or(&name)
                        ),
                    );
                }
                self.cluster_site(ctx, line, &name, sink);
                let call = self.cluster_call(&args, &redirects, line);
                if call.writes && call.mentions_ledger {
                    self.ledger_write(&site);
                }
                Some(call)
            }
            Cmd::Function(f, args) => {
                let wrapper = self.wraps_cluster_command(&f);
                let mut call = None;
                if wrapper {
                    let c = self.cluster_call(&args, &redirects, line);
                    if c.writes && c.mentions_ledger {
                        self.ledger_write(&site);
                    }
                    call = Some(c);
                }
                let call_sink = sink.as_command_status();
                self.walk_call_at(&f, ctx, &call_sink, &site);
                call
            }
            Cmd::Other(name, args) => {
                self.builtin(&name, &args, &words, ctx, sink, &site);
                None
            }
        }
    }

    fn process_substitution(&mut self, sub: &ast::SubshellCommand, ctx: &Ctx, mapfile: bool) {
        let why = if mapfile {
            Why::Mapfile
        } else {
            Why::ProcessSubstitution
        };
        let line = sub.loc.start.line;
        let s = Sink::new(Kind::Ignored(why), Some(ctx.site(line)));
        self.walk_list(&sub.list, ctx, &s);
    }

    /// Remembers `NAME=value` for `.` resolution and cluster-command
    /// variables (`K=kubectl`, `KUBECTL=/usr/bin/kubectl`).
    fn note_assignment(&mut self, a: &ast::Assignment, ctx: &Ctx, line: usize) {
        let (ast::AssignmentName::VariableName(name), ast::AssignmentValue::Scalar(v)) =
            (&a.name, &a.value)
        else {
            return;
        };
        if name == "PATH"
            && let Some(m) = super::path_reset::assignment(&v.value)
        {
            self.push(&ctx.site(line), super::path_reset::RULE, m);
        }
        if let Some(value) = parse::literal(&v.value) {
            let first = value.split_whitespace().next().unwrap_or("");
            if self.is_cluster_name(first) {
                self.cluster_vars.insert(name.clone());
                if first.contains('/') {
                    let site = ctx.site(line);
                    self.push(
                        &site,
                        "cluster-command-path",
                        format!(
                            "{name} is set to '{first}', a path that bypasses the runner's shim on PATH; leave {name} alone (the runner sets it) or use the bare command name"
                        ),
                    );
                }
            }
        }
        if let Some(p) =
            super::source::path_value(&v.value, &ctx.file.rel, &self.script, &self.vars)
        {
            self.vars.insert(name.clone(), p);
        }
    }

    /// Resolves the command a simple command runs, through `command`,
    /// `env`, `timeout` and the like.
    fn resolve(&self, words: &[&ast::Word]) -> Cmd {
        let mut i = 0;
        while let Some(w) = words.get(i) {
            let lit = parse::literal(&w.value);
            let rest = |from: usize| {
                words[from + 1..]
                    .iter()
                    .map(|w| w.value.clone())
                    .collect::<Vec<_>>()
            };
            match lit.as_deref() {
                Some(t) if TRANSPARENT.contains(&t) => {
                    i += 1;
                    // Options of the prefix command, and what they take.
                    while let Some(next) = words.get(i).and_then(|w| parse::literal(&w.value)) {
                        if t == "command" && (next == "-v" || next == "-V") {
                            return Cmd::Other("command -v".into(), rest(i));
                        }
                        let takes_value = match t {
                            "env" => next == "-u" || next == "-C",
                            "timeout" => next == "-s" || next == "-k" || next == "--signal",
                            "nice" => next == "-n",
                            "xargs" => matches!(
                                next.as_str(),
                                "-n" | "-I" | "-P" | "-L" | "-d" | "-a" | "-E" | "-s"
                            ),
                            "sudo" => matches!(next.as_str(), "-u" | "-g"),
                            _ => false,
                        };
                        if next.starts_with('-') {
                            i += if takes_value { 2 } else { 1 };
                        } else if t == "env" && next.contains('=') {
                            i += 1;
                        } else if t == "timeout"
                            && next.chars().next().is_some_and(|c| c.is_ascii_digit())
                        {
                            i += 1;
                            break;
                        } else {
                            break;
                        }
                    }
                }
                Some(t) => {
                    let args = rest(i);
                    if self.functions.contains_key(t) {
                        return Cmd::Function(t.to_owned(), args);
                    }
                    if self.is_cluster_name(t) || self.cluster_aliases.contains(t) {
                        return Cmd::Cluster {
                            name: t.to_owned(),
                            path: t.contains('/'),
                            args,
                        };
                    }
                    return Cmd::Other(t.to_owned(), args);
                }
                None => {
                    let args = rest(i);
                    if let Some(p) = parse::parameter(&w.value) {
                        let by_default = p.default.as_deref().is_some_and(|d| {
                            self.is_cluster_name(d.split_whitespace().next().unwrap_or(""))
                        });
                        if self.cluster_vars.contains(&p.name) || by_default {
                            return Cmd::Cluster {
                                name: w.value.trim_matches('"').to_owned(),
                                path: false,
                                args,
                            };
                        }
                    }
                    return Cmd::Other(String::new(), args);
                }
            }
        }
        Cmd::Nothing
    }

    /// Whether a function passes its arguments to a cluster command
    /// (`kube() { "${KUBECTL:-kubectl}" "$@"; }`).
    fn wraps_cluster_command(&self, f: &str) -> bool {
        let Some(func) = self.functions.get(f) else {
            return false;
        };
        let mut found = false;
        visit_simple(&func.def.body.0, &mut |s| {
            let words = simple_words(s);
            if let Cmd::Cluster { args, .. } = self.resolve(&words) {
                found |= args.iter().any(|a| a.contains("$@") || a.contains("$*"));
            }
        });
        found
    }

    fn cluster_call(
        &self,
        args: &[String],
        redirects: &[&ast::IoRedirect],
        line: usize,
    ) -> ClusterCall {
        let literal: Vec<String> = args
            .iter()
            .map(|a| parse::literal(a).unwrap_or_else(|| a.clone()))
            .collect();
        let verb = verb_of(&literal);
        let writes = verb.is_some_and(|v| LEDGER_WRITE_VERBS.contains(&v));
        let ledger = &self.config.ledger_name;
        let mut mentions_ledger = literal.iter().any(|a| mentions(a, ledger));
        // `kubectl apply -f - <<EOF` with a ConfigMap named after the ledger.
        let stdin_file = literal.windows(2).any(|w| w[0] == "-f" && w[1] == "-")
            || literal.iter().any(|a| a == "--filename=-" || a == "-f-");
        for r in redirects {
            if let ast::IoRedirect::HereDocument(_, doc) = *r
                && stdin_file
                && yaml_names_configmap(&doc.doc.value, ledger)
            {
                mentions_ledger = true;
            }
        }
        ClusterCall {
            line,
            writes,
            stdin: stdin_file,
            mentions_ledger,
        }
    }

    fn cluster_site(&mut self, ctx: &Ctx, line: usize, name: &str, sink: &Sink) {
        let here = ctx.site(line);
        let at = sink.at.clone().unwrap_or_else(|| here.clone());
        let via = if at != here {
            format!(" (the call: {name} at {here})")
        } else {
            String::new()
        };
        let (rule, message): (&'static str, String) = match &sink.kind {
            Kind::Observed | Kind::Errexit | Kind::Ignored(Why::SetPlusE) => return,
            Kind::Test(..) => return,
            Kind::Neutralized(h) => (
                "kubectl-error-ignored",
                format!(
                    "'{h}' after a {name} call turns its failure into success; let it fail, or accept only the answer you expect with migrate-tolerate (for example migrate-tolerate --not-found -- {name} ...){via}"
                ),
            ),
            Kind::Condition(what) => (
                "cluster-command-in-condition",
                format!(
                    "{name} is used as {what}: any failure (API server unreachable, Forbidden, timeout) takes the same branch as a clean 'no'; let it fail, or ask for the answer explicitly: migrate-tolerate --not-found -- {name} ...{via}"
                ),
            ),
            Kind::Negated => (
                "negated-cluster-command",
                format!(
                    "'! {name}': errexit never fires on a negated command, so its failure reads as success; test for the answer explicitly (migrate-tolerate --not-found -- {name} ...), or handle the failure and exit non-zero{via}"
                ),
            ),
            Kind::Retry => (
                "hand-written-retry",
                format!(
                    "a hand-written retry loop around {name}: after the last try its failure is dropped (or the loop never ends); use migrate-tolerate --retry -- {name} ..., which retries only transient failures, a bounded number of times{via}"
                ),
            ),
            Kind::Ignored(why) => match why {
                Why::SetPlusE => return,
                Why::Condition => (
                    "cluster-command-in-condition",
                    format!(
                        "{name} runs inside a condition list, where errexit is off and only the last command's status counts; move it out of the condition{via}"
                    ),
                ),
                Why::InFunction(call) => (
                    "errexit-off-in-function",
                    format!(
                        "{name} runs in a function called from a condition ({call}: if/while/!/&&/||), where errexit is off: its failure is ignored unless it is the function's last command; call the function in plain statement position, or add '|| return 1' after {name}{via}"
                    ),
                ),
                Why::Substitution(s) => (
                    "errexit-off-in-substitution",
                    format!(
                        "{name} runs inside $(...) ({s}) but is not its last command: bash and busybox ash clear errexit in command substitutions, so its failure is ignored; make it the only command, or add '|| exit 1' after it{via}"
                    ),
                ),
                Why::PipelineNotLast => (
                    "kubectl-in-pipeline",
                    format!(
                        "{name}'s output is piped into another command: the pipeline's status is the last command's (dash has no pipefail), so its failure is hidden; capture the output first (out=$({name} ...)), then filter it{via}"
                    ),
                ),
                Why::Background => (
                    "background-cluster-command",
                    format!(
                        "{name} runs in the background and nothing checks its status; wait for it by pid and let a failure stop the script (pid=$!; ...; wait \"$pid\"), or run it in the foreground{via}"
                    ),
                ),
                Why::ForList => (
                    "for-command-substitution",
                    format!(
                        "a command substitution running {name} is a for word list: when it fails the loop runs zero times and the script goes on, even under errexit; assign it to a variable first (list=$({name} ...)), then loop over \"$list\"{via}"
                    ),
                ),
                Why::Declaration(kw) => (
                    "substitution-in-declaration",
                    format!(
                        "'{kw} x=$({name} ...)': the status is {kw}'s, not the substitution's, so the failure is lost; declare first, then assign on its own line ({kw} x; x=$({name} ...)){via}"
                    ),
                ),
                Why::Test(what) => (
                    "substitution-in-test",
                    format!(
                        "$({name} ...) in {what}: the substitution's status is lost and an empty output just compares; assign it first (out=$({name} ...)), then test \"$out\"{via}"
                    ),
                ),
                Why::Argument => (
                    "substitution-in-argument",
                    format!(
                        "$({name} ...) is expanded into another command's words: its status is lost and the command runs with empty text; assign it first (out=$({name} ...)), then use \"$out\"{via}"
                    ),
                ),
                Why::EarlierSubstitution => (
                    "substitution-in-argument",
                    format!(
                        "this assignment has several command substitutions and only the last one's status counts; give $({name} ...) its own assignment{via}"
                    ),
                ),
                Why::ProcessSubstitution => (
                    "process-substitution",
                    format!(
                        "<({name} ...): nothing waits for a process substitution's status, so its failure is lost; capture the output in a variable first (out=$({name} ...)){via}"
                    ),
                ),
                Why::Mapfile => (
                    "mapfile-substitution",
                    format!(
                        "mapfile/readarray from {name} output: the command's status is lost; capture it first (out=$({name} ...)), then mapfile -t arr <<<\"$out\"{via}"
                    ),
                ),
            },
        };
        self.push(&at, rule, message);
    }

    fn walk_call_at(&mut self, f: &str, ctx: &Ctx, sink: &Sink, site: &Site) {
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

    fn walk_call(&mut self, f: &str, ctx: &Ctx, sink: &Sink) {
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
    fn builtin(
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
                            "'{name} {}' reads {rel}, which is not in the tree (scripts run from the tree root); name the file from the root: . \"$MIGRATION_TREE/lib/NAME.sh\"",
                            word.value
                        ),
                    ),
                    Resolution::Unresolved => self.push(
                        site,
                        "source-unresolved",
                        format!(
                            "cannot tell which file '{} {}' reads, so its helpers are not checked; name the file from the tree root: . \"$MIGRATION_TREE/lib/NAME.sh\"",
                            name, word.value
                        ),
                    ),
                }
            }
            _ => {}
        }
    }

    fn walk_eval(&mut self, sub: &parse::Substitution, line: usize, ctx: &Ctx, sink: &Sink) {
        // A string eval'd is data until it runs; one the parser cannot read
        // is left to the run-time checks rather than refused.
        let Ok(program) = parse::program(&sub.text) else {
            return;
        };
        let base = ctx.line(line) - 1;
        self.register(&program, &ctx.file, base);
        let inner = Ctx {
            base,
            ..ctx.clone()
        };
        let items = items_of(&program);
        self.walk_items(&items, &inner, sink);
    }

    fn set(&mut self, args: &[String], site: &Site) {
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

    fn trap(&mut self, args: &[String], site: &Site) {
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

    fn walk_sourced(&mut self, rel: &str, ctx: &Ctx, sink: &Sink, site: &Site) {
        if self.stack.iter().any(|s| s == rel) || !self.spend() {
            return;
        }
        let Some(file) = self.cache.get(rel) else {
            return;
        };
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
        self.register(program, &file, 0);
        if !self.walked.insert(key) {
            return;
        }
        let inner = Ctx {
            file: file.clone(),
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

enum Ending {
    /// Passes a failure on, to this sink.
    Fails(Sink),
    /// Succeeds whatever happened (`true`, `echo`, `exit 0`), as written.
    Neutral(String),
    /// Anything else.
    Other,
}

/// A cluster call as the ledger rule sees it.
#[derive(Debug, Clone)]
struct ClusterCall {
    line: usize,
    writes: bool,
    stdin: bool,
    mentions_ledger: bool,
}

/// The kubectl verb: the first word that is not an option or an option's
/// value.
fn verb_of(args: &[String]) -> Option<&str> {
    const VALUED: [&str; 12] = [
        "-n",
        "--namespace",
        "--context",
        "--kubeconfig",
        "--cluster",
        "--user",
        "-s",
        "--server",
        "--token",
        "--as",
        "--request-timeout",
        "-v",
    ];
    let mut i = 0;
    while let Some(a) = args.get(i) {
        if VALUED.contains(&a.as_str()) {
            i += 2;
        } else if a.starts_with('-') {
            i += 1;
        } else {
            return Some(a);
        }
    }
    None
}

/// `name` as a whole word of `text` (`cozystack-version`, not
/// `cozystack-version-old`).
fn mentions(text: &str, name: &str) -> bool {
    text.match_indices(name).any(|(i, _)| {
        let before = text[..i].chars().next_back();
        let after = text[i + name.len()..].chars().next();
        let part = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric() || c == '-');
        !part(before) && !part(after)
    })
}

/// Whether a YAML stream has a ConfigMap whose metadata name is `name`.
fn yaml_names_configmap(yaml: &str, name: &str) -> bool {
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

fn pipelines(ao: &ast::AndOrList) -> Vec<&ast::Pipeline> {
    let mut v = vec![&ao.first];
    for next in &ao.additional {
        match next {
            ast::AndOr::And(p) | ast::AndOr::Or(p) => v.push(p),
        }
    }
    v
}

fn items_of(program: &ast::Program) -> Vec<&ast::CompoundListItem> {
    program
        .complete_commands
        .iter()
        .flat_map(|l| l.0.iter())
        .collect()
}

/// The words of a simple command: name then suffix words (assignment words
/// of `local x=...` included, as written).
fn simple_words(s: &ast::SimpleCommand) -> Vec<&ast::Word> {
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

fn simple_line(s: &ast::SimpleCommand) -> Option<usize> {
    if let Some(l) = s.word_or_name.as_ref().and_then(parse::word_line) {
        return Some(l);
    }
    s.prefix
        .iter()
        .flat_map(|p| p.0.iter())
        .chain(s.suffix.iter().flat_map(|p| p.0.iter()))
        .find_map(|item| match item {
            ast::CommandPrefixOrSuffixItem::Word(w)
            | ast::CommandPrefixOrSuffixItem::AssignmentWord(_, w) => parse::word_line(w),
            ast::CommandPrefixOrSuffixItem::ProcessSubstitution(_, s) => Some(s.loc.start.line),
            ast::CommandPrefixOrSuffixItem::IoRedirect(_) => None,
        })
}

fn command_line(c: &ast::Command) -> Option<usize> {
    match c {
        ast::Command::Simple(s) => simple_line(s),
        ast::Command::Compound(cc, _) => compound_line(cc),
        ast::Command::Function(f) => parse::word_line(&f.fname),
        ast::Command::ExtendedTest(t, _) => Some(t.loc.start.line),
    }
}

fn compound_line(cc: &ast::CompoundCommand) -> Option<usize> {
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

fn pipeline_line(p: &ast::Pipeline) -> Option<usize> {
    p.seq.iter().find_map(command_line)
}

fn andor_line(ao: &ast::AndOrList) -> Option<usize> {
    pipeline_line(&ao.first)
}

/// The last command of a list, when its last item is a single command.
fn last_command(list: &ast::CompoundList) -> Option<&ast::Command> {
    let item = list.0.last()?;
    if !item.0.additional.is_empty() || item.0.first.bang || item.0.first.seq.len() != 1 {
        return None;
    }
    item.0.first.seq.first()
}

fn last_command_of_compound(cc: &ast::CompoundCommand) -> Option<&ast::Command> {
    match cc {
        ast::CompoundCommand::BraceGroup(b) => last_command(&b.list),
        ast::CompoundCommand::Subshell(s) => last_command(&s.list),
        _ => None,
    }
}

fn is_break_command(c: &ast::Command) -> bool {
    match c {
        ast::Command::Simple(s) => simple_words(s)
            .first()
            .and_then(|w| parse::literal(&w.value))
            .is_some_and(|n| n == "break"),
        _ => false,
    }
}

fn is_break(p: &ast::Pipeline) -> bool {
    !p.bang && p.seq.len() == 1 && is_break_command(&p.seq[0])
}

/// Whether a later item waits for a background job by pid or job id.
fn waited_for(rest: &[&ast::CompoundListItem]) -> bool {
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

fn extended_words<'t>(e: &'t ast::ExtendedTestExpr, out: &mut Vec<&'t ast::Word>) {
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
fn visit_simple(cc: &ast::CompoundCommand, f: &mut dyn FnMut(&ast::SimpleCommand)) {
    for list in parse::compound_lists(cc) {
        visit_simple_list(list, f);
    }
}

fn visit_simple_list(list: &ast::CompoundList, f: &mut dyn FnMut(&ast::SimpleCommand)) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_verb_skips_global_options() {
        let a = |s: &str| s.split(' ').map(str::to_owned).collect::<Vec<_>>();
        assert_eq!(verb_of(&a("-n cozy-system patch cm x")), Some("patch"));
        assert_eq!(verb_of(&a("--context=x get cm")), Some("get"));
    }

    #[test]
    fn the_ledger_is_named_as_a_whole_word_only() {
        assert!(mentions("cozystack-version", "cozystack-version"));
        assert!(mentions("configmap/cozystack-version", "cozystack-version"));
        assert!(!mentions("cozystack-version-old", "cozystack-version"));
    }

    #[test]
    fn a_configmap_manifest_names_the_ledger_but_a_role_does_not() {
        let cm = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cozystack-version\n";
        let role = "kind: Role\nmetadata:\n  name: reader\nrules:\n- resources: [configmaps]\n  resourceNames:\n    - cozystack-version\n";
        assert!(yaml_names_configmap(cm, "cozystack-version"));
        assert!(!yaml_names_configmap(role, "cozystack-version"));
    }
}
