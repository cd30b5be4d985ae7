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
use super::source::{SourceCache, SourceFile};
use crate::finding::Level;

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
    rule(TRIPWIRE_INTERNALS, Level::Error, true),
    rule(FROM_ENVIRONMENT, Level::Error, true),
    rule("ledger-write", Level::Error, true),
    rule("ledger-annotate", Level::Error, true),
    rule("analysis-limit", Level::Error, true),
    // What the scan cannot read it cannot vouch for: a helper it cannot
    // resolve may reset PATH (the cluster commands in it would bypass the
    // tripwire's shim), so run refuses it unless a waiver with a reason
    // names it.
    rule("source-unresolved", Level::Error, true),
    rule("kubectl-in-pipeline", Level::Warning, false),
];

/// A script that names the tripwire's own variables (the report, the
/// commands, what used to carry the real commands' paths).
pub const TRIPWIRE_INTERNALS: &str = "tripwire-internals";
/// A cluster command whose path comes from a variable the runner does not
/// set (`${KUBECTL_BIN:-kubectl}`).
pub const FROM_ENVIRONMENT: &str = "cluster-command-from-environment";

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
    Condition(std::borrow::Cow<'static, str>),
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
    /// The text the definition was parsed from (the file, or a `$(...)`).
    src: Rc<str>,
    base: usize,
    line: usize,
}

#[derive(Clone)]
struct Ctx {
    file: Rc<SourceFile>,
    /// The text being walked was parsed from this: the file, or the inside
    /// of a `$(...)` as written (for the positions of words in it).
    src: Rc<str>,
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

/// `line` up to a comment: a `#` at its start or after white space (a
/// `#` inside quotes is taken for a comment too, which can only hide text,
/// never invent it).
fn strip_comment(line: &str) -> &str {
    let mut prev = ' ';
    for (i, c) in line.char_indices() {
        if c == '#' && prev.is_whitespace() {
            return &line[..i];
        }
        prev = c;
    }
    line
}

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
    /// Files whose text was scanned for the tripwire's variables.
    texts_scanned: HashSet<String>,
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
            texts_scanned: HashSet::new(),
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
        self.scan_text(&file);
        let program = match &file.program {
            Ok(p) => p,
            Err(e) => {
                self.parse_failure(&file, 0, e);
                return self.findings;
            }
        };
        let src: Rc<str> = Rc::from(file.text.as_str());
        self.register(program, &file, &src, 0);
        let ctx = Ctx {
            file: file.clone(),
            src: src.clone(),
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

    /// Finds the tripwire's own variables in a file's text (outside
    /// comments), once per file: whatever a script does with them (use the
    /// old real-command path, write the report) is not a careless author's
    /// business, and the text shows it wherever it appears (a redirection,
    /// a here-document, an `eval` string).
    fn scan_text(&mut self, file: &SourceFile) {
        if !self.texts_scanned.insert(file.rel.clone()) {
            return;
        }
        for (i, line) in file.text.lines().enumerate() {
            let code = strip_comment(line);
            let Some(at) = code.find("MIGRATE_TRIPWIRE_") else {
                continue;
            };
            let name: String = code[at..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            let site = Site {
                file: file.rel.clone(),
                line: i + 1,
            };
            self.push(
                &site,
                TRIPWIRE_INTERNALS,
                format!(
                    "{name} is the runner's tripwire's own variable; a script must not read or write it (it no longer names the real command, and the report is the runner's): call cluster commands by name"
                ),
            );
        }
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

    fn register(
        &mut self,
        program: &ast::Program,
        file: &Rc<SourceFile>,
        src: &Rc<str>,
        base: usize,
    ) {
        for list in &program.complete_commands {
            self.register_list(list, file, src, base);
        }
    }

    fn register_list(
        &mut self,
        list: &ast::CompoundList,
        file: &Rc<SourceFile>,
        src: &Rc<str>,
        base: usize,
    ) {
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
                                    src: src.clone(),
                                    base,
                                    line,
                                },
                            );
                            for inner in parse::compound_lists(&f.body.0) {
                                self.register_list(inner, file, src, base);
                            }
                        }
                        ast::Command::Compound(cc, _) => {
                            for inner in parse::compound_lists(cc) {
                                self.register_list(inner, file, src, base);
                            }
                        }
                        _ => {}
                    }
                }
            }
        }
    }

    // ---- lists ---------------------------------------------------------
}

mod calls;
mod commands;
mod flow;

pub use commands::notes_only;
mod syntax;

use syntax::*;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_verb_skips_global_options() {
        let verb = |s: &str| {
            let args: Vec<String> = s.split(' ').map(str::to_owned).collect();
            verb_at(&args).map(|i| args[i].clone())
        };
        assert_eq!(verb("-n cozy-system patch cm x").as_deref(), Some("patch"));
        assert_eq!(verb("--context=x get cm").as_deref(), Some("get"));
        // The tripwire's list: a value flag lint once did not know hid the verb.
        assert_eq!(
            verb("--as-group admins apply -f ledger.yaml").as_deref(),
            Some("apply")
        );
        // kubectl's own table, complete: these were read as the verb.
        assert_eq!(verb("--password pw apply -f x").as_deref(), Some("apply"));
        assert_eq!(verb("--username u patch cm x").as_deref(), Some("patch"));
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
