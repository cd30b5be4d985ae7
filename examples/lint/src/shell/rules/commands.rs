//! Simple commands: what a word list resolves to, assignments, and the sites of cluster
//! commands with the sink their status reaches.

use brush_parser::ast;

use crate::shell::parse;
use crate::shell::rules::{
    ClusterCall, Cmd, Ctx, FROM_ENVIRONMENT, Kind, LEDGER_WRITE_VERBS, Sink, TRANSPARENT, Walker,
    Why, mentions, simple_line, simple_words, visit_simple, yaml_names_configmap,
};

impl<'a> Walker<'a> {
    pub(super) fn walk_simple(
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
        for m in crate::shell::path_reset::command(&raw) {
            self.push(&site, crate::shell::path_reset::RULE, m);
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
                    if let ast::AssignmentValue::Scalar(v) = &a.value {
                        self.note_assignment(a, ctx, line);
                        // The whole word as written (`NAME=` and all): the
                        // substitutions' lines count its continuations.
                        let (text, wline) = match parse::raw_word(&ctx.src, w) {
                            Some((raw, wline)) => (raw, wline),
                            None => (v.value.as_str(), parse::word_line(w).unwrap_or(line)),
                        };
                        for sub in parse::substitutions(text) {
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
                if let Some(m) = self.path_from_environment(&name) {
                    self.push(&site, FROM_ENVIRONMENT, m);
                }
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
                let call = self.cluster_call(&name, &args, &redirects, line);
                if call.writes && call.mentions_ledger {
                    self.ledger_write_or_annotate(&site, call.annotates_only);
                }
                Some(call)
            }
            Cmd::Function(f, args) => {
                let wrapper = self.wraps_cluster_command(&f);
                let mut call = None;
                if wrapper {
                    // A wrapper passes its words to a cluster command,
                    // read as kubectl's (the default one).
                    let c = self.cluster_call("kubectl", &args, &redirects, line);
                    if c.writes && c.mentions_ledger {
                        self.ledger_write_or_annotate(&site, c.annotates_only);
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

    pub(super) fn process_substitution(
        &mut self,
        sub: &ast::SubshellCommand,
        ctx: &Ctx,
        mapfile: bool,
    ) {
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
    pub(super) fn note_assignment(&mut self, a: &ast::Assignment, ctx: &Ctx, line: usize) {
        let (ast::AssignmentName::VariableName(name), ast::AssignmentValue::Scalar(v)) =
            (&a.name, &a.value)
        else {
            return;
        };
        if name == "PATH"
            && let Some(m) = crate::shell::path_reset::assignment(&v.value)
        {
            self.push(&ctx.site(line), crate::shell::path_reset::RULE, m);
        }
        if parse::literal(&v.value).is_none()
            && let Some(p) = parse::parameter(&v.value)
            && p.default
                .as_deref()
                .is_some_and(|d| self.is_cluster_name(d.split_whitespace().next().unwrap_or("")))
        {
            self.cluster_vars.insert(name.clone());
            if let Some(m) = self.path_from_environment(v.value.trim_matches('"')) {
                self.push(&ctx.site(line), FROM_ENVIRONMENT, m);
            }
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
            crate::shell::source::path_value(&v.value, &ctx.file.rel, &self.script, &self.vars)
        {
            self.vars.insert(name.clone(), p);
        }
    }

    /// For a command word `${VAR:-kubectl}`: the finding when `VAR` is not
    /// the variable the runner points at its shim (`KUBECTL`), so whoever
    /// sets it (a CI variable, a Dockerfile `ENV`) can put the real
    /// command's absolute path there.
    pub(super) fn path_from_environment(&self, word: &str) -> Option<String> {
        let p = parse::parameter(word)?;
        let default = p.default?;
        let command = default.split_whitespace().next()?;
        if !self.is_cluster_name(command) {
            return None;
        }
        let base = command.rsplit('/').next().unwrap_or(command);
        let key = crate::cluster_commands::env_key(base);
        (p.name != key).then(|| {
            format!(
                "the {base} this runs comes from ${}, which the runner does not set: an absolute path there bypasses the runner's shim; call {base} by name (or use ${key}, which the runner points at its shim)",
                p.name
            )
        })
    }

    /// Resolves the command a simple command runs, through `command`,
    /// `env`, `timeout` and the like.
    pub(super) fn resolve(&self, words: &[&ast::Word]) -> Cmd {
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
    pub(super) fn wraps_cluster_command(&self, f: &str) -> bool {
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

    pub(super) fn cluster_call(
        &self,
        command: &str,
        args: &[String],
        redirects: &[&ast::IoRedirect],
        line: usize,
    ) -> ClusterCall {
        let literal: Vec<String> = args
            .iter()
            .map(|a| parse::literal(a).unwrap_or_else(|| a.clone()))
            .collect();
        let reading = crate::command_line::read(command, &literal);
        let at = reading.verb();
        let verb = at.map(|i| literal[i].as_str());
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
        let annotates_only =
            matches!(verb, Some("annotate" | "label")) && annotates_only(&literal, &reading);
        ClusterCall {
            line,
            writes,
            stdin: stdin_file,
            mentions_ledger,
            annotates_only,
        }
    }

    pub(super) fn cluster_site(&mut self, ctx: &Ctx, line: usize, name: &str, sink: &Sink) {
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
                    "'{h}' after {} {name} call turns its failure into success; let it fail, or accept only the answer you expect with migrate-tolerate (for example migrate-tolerate --not-found -- {name} ...){via}",
                    article(name)
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
}

/// Whether a kubectl call (`argv[0]` the command, words as written) is an
/// `annotate` or `label` naming only keys outside the engine's own, each
/// spelled out, on objects it names: on the ledger ConfigMap that is
/// `ledger-annotate`, not `ledger-write` (what `migrate convert` keeps).
pub fn notes_only(argv: &[String]) -> bool {
    let Some((command, args)) = argv.split_first() else {
        return false;
    };
    let literal: Vec<String> = args
        .iter()
        .map(|a| parse::literal(a).unwrap_or_else(|| a.clone()))
        .collect();
    let reading = crate::command_line::read(command, &literal);
    matches!(
        reading.verb().map(|i| literal[i].as_str()),
        Some("annotate" | "label")
    ) && annotates_only(&literal, &reading)
}

/// Whether the words after `kubectl annotate|label` (`args`) name only
/// keys outside the engine's own, each one literal (`key=value` or
/// `key-`), on objects named, not chosen by a file or a selector: the
/// script then only adds, changes or removes its own note on the object,
/// never its data, the run lock or the engine's marks.
fn annotates_only(literal: &[String], reading: &crate::command_line::Reading) -> bool {
    // A flag the reader does not know: its value may be a key or the
    // object, so the call is not known to touch only notes.
    let Some(verb) = reading.verb().filter(|_| reading.complete) else {
        return false;
    };
    let chooses_by_file_or_selector = literal[verb + 1..].iter().any(|a| {
        let short = |flag: &str| a.starts_with(flag) && !a.starts_with("--");
        short("-f")
            || short("-l")
            || a.starts_with("--filename")
            || a.starts_with("--selector")
            || a == "--all"
    });
    if chooses_by_file_or_selector {
        return false;
    }
    let mut keys = 0;
    for &i in &reading.positionals[1..] {
        let word = literal[i].trim_matches(|c| c == '"' || c == '\'');
        let key = match word.split_once('=') {
            Some((key, _)) => key,
            None => match word.strip_suffix('-') {
                Some(key) => key,
                // The resource type or name.
                None => continue,
            },
        };
        let spelled = !key.is_empty()
            && key
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '/' | '_' | '-'));
        if !spelled || key.starts_with(migration_core::keys::ENGINE_KEY_PREFIX) {
            return false;
        }
        keys += 1;
    }
    keys > 0
}

/// `an` before a command name read with a vowel first (`an oc call`), `a`
/// otherwise (`a kubectl call`).
fn article(name: &str) -> &'static str {
    match name.bytes().next().map(|b| b.to_ascii_lowercase()) {
        Some(b'a' | b'e' | b'i' | b'o' | b'u') => "an",
        _ => "a",
    }
}
