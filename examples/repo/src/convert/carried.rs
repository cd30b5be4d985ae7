//! Failures a numbered script without errexit carried on past, made what
//! they meant under the engine's errexit.
//!
//! The engine runs every script with `-e`; a numbered script written
//! without it went on past any failed call. The calls whose failure the
//! errexit would now end the script on are found on the syntax tree
//! (a simple command whose status is the list's: not in a condition, not
//! before `&&`/`||`, not under `!`, the last of its pipeline unless the
//! shell is bash, where the engine adds pipefail) and rewritten into what
//! the original meant:
//!
//! - a cluster call that can answer NotFound (kubectl naming an object,
//!   helm) or AlreadyExists (`create`, `helm install`), alone or the one
//!   command of an assignment's `$(...)`: wrapped in `migrate-tolerate
//!   --not-found [--already-exists] --`, so the absent (or present) object
//!   takes the original's path and every other failure ends the script;
//! - `x=$(CALL | grep PATTERN)`, a `grep` finding nothing on one line:
//!   `x=$(CALL); x=$(printf '%s' "$x" | grep PATTERN || [ $? = 1 ])`, so
//!   nothing found is an empty answer, grep's own error (2) and the call's
//!   failure still end the script.
//!
//! A failure of any other kind (Forbidden, an unreachable server, a
//! timeout, a lost race) the original carried past now ends the script:
//! the behaviour check accepts that stop as failing closed
//! ([`super::behaviour::FailureClass::may_fail_closed`]). A script that sets
//! errexit itself is left alone, as is a call whose place on its line
//! cannot be told (the words written twice there).

use std::collections::BTreeMap;

use migrate_lint::cluster_commands::TOLERATE;
use migrate_lint::shell::handled::words;
use migrate_lint::shell::{ast, parse};

use super::behaviour::FailureClass;
use super::handled::only_pipeline;
use super::patterns::Analysis;

/// The kind of change this module reports.
pub const KIND: &str = "carried-on";

/// Finds the calls a script without errexit carried on past, with the
/// edits that make each what it meant.
pub fn analyse(text: &str) -> Analysis {
    let Ok(program) = parse::program(text) else {
        return Analysis::default();
    };
    let shebang = text.lines().next().filter(|l| l.starts_with("#!"));
    if sets_errexit(text, shebang) {
        return Analysis::default();
    }
    let mut walk = Walk {
        lines: text.split('\n').collect(),
        pipefail: shebang.is_some_and(|l| l.contains("bash")),
        inserts: BTreeMap::new(),
        replaced: BTreeMap::new(),
        and_lines: Vec::new(),
        out: Analysis::default(),
    };
    for list in &program.complete_commands {
        walk.list(list, false);
    }
    walk.and_lists(&program);
    walk.finish()
}

/// The one line of a plain `A && B` item of two simple commands.
fn and_list_line(item: &ast::CompoundListItem) -> Option<usize> {
    let ao = &item.0;
    if matches!(item.1, ast::SeparatorOperator::Async) || ao.first.bang {
        return None;
    }
    let [ast::AndOr::And(second)] = ao.additional.as_slice() else {
        return None;
    };
    if second.bang {
        return None;
    }
    let ([ast::Command::Simple(a)], [ast::Command::Simple(b)]) =
        (ao.first.seq.as_slice(), second.seq.as_slice())
    else {
        return None;
    };
    let lines: Vec<usize> = words(a)
        .into_iter()
        .chain(words(b))
        .flat_map(|w| {
            let start = parse::word_line(w);
            let end = w.loc.as_ref().map(|l| l.end.line);
            [start, end]
        })
        .collect::<Option<_>>()?;
    let first = *lines.iter().min()?;
    (lines.iter().all(|l| *l == first)).then_some(first)
}

/// Whether the script turns errexit on itself (its shebang's `-e`, or a
/// `set -e`/`set -o errexit` line anywhere): then its calls already stopped
/// it, and nothing here applies.
fn sets_errexit(text: &str, shebang: Option<&str>) -> bool {
    let flag_e = |w: &str| w.starts_with('-') && !w.starts_with("--") && w.contains('e');
    if shebang.is_some_and(|l| l.split_whitespace().skip(1).any(flag_e)) {
        return true;
    }
    text.lines().any(|l| {
        let mut words = l.split(|c: char| c.is_whitespace() || c == ';');
        let mut found = false;
        while let Some(w) = words.next() {
            if w == "set" {
                let rest: Vec<&str> = words.clone().take_while(|w| !w.starts_with('#')).collect();
                found |= rest.iter().any(|w| flag_e(w))
                    || rest.windows(2).any(|p| p[0] == "-o" && p[1] == "errexit");
            }
        }
        found
    })
}

struct Walk<'a> {
    lines: Vec<&'a str>,
    pipefail: bool,
    /// Per one-based line: (byte column, text to insert there).
    inserts: BTreeMap<usize, Vec<(usize, String)>>,
    /// Per one-based line: its whole new text.
    replaced: BTreeMap<usize, String>,
    /// Lines of `A && B` items written as `if A; then B; fi`.
    and_lines: Vec<usize>,
    out: Analysis,
}

impl Walk<'_> {
    /// `ignored`: errexit does not apply here (a condition, before
    /// `&&`/`||`, under `!`), nor to anything nested.
    fn list(&mut self, list: &ast::CompoundList, ignored: bool) {
        for item in &list.0 {
            let ao = &item.0;
            let pipelines: Vec<&ast::Pipeline> = std::iter::once(&ao.first)
                .chain(ao.additional.iter().map(|a| match a {
                    ast::AndOr::And(p) | ast::AndOr::Or(p) => p,
                }))
                .collect();
            let last_pipeline = pipelines.len() - 1;
            for (k, p) in pipelines.iter().enumerate() {
                let ignored = ignored || k != last_pipeline || p.bang;
                let last = p.seq.len().saturating_sub(1);
                for (c, command) in p.seq.iter().enumerate() {
                    match command {
                        ast::Command::Simple(s) if !ignored && (c == last || self.pipefail) => {
                            self.simple(s, c == last)
                        }
                        ast::Command::Simple(_) | ast::Command::ExtendedTest(..) => {}
                        ast::Command::Compound(cc, _) => self.compound(cc, ignored),
                        ast::Command::Function(f) => {
                            for l in parse::compound_lists(&f.body.0) {
                                self.list(l, false);
                            }
                        }
                    }
                }
            }
        }
    }

    fn compound(&mut self, cc: &ast::CompoundCommand, ignored: bool) {
        match cc {
            ast::CompoundCommand::IfClause(i) => {
                self.list(&i.condition, true);
                self.list(&i.then, ignored);
                for e in i.elses.iter().flatten() {
                    if let Some(c) = &e.condition {
                        self.list(c, true);
                    }
                    self.list(&e.body, ignored);
                }
            }
            ast::CompoundCommand::WhileClause(w) | ast::CompoundCommand::UntilClause(w) => {
                self.list(&w.0, true);
                self.list(&w.1.list, ignored);
            }
            other => {
                for l in parse::compound_lists(other) {
                    self.list(l, ignored);
                }
            }
        }
    }

    /// A simple command whose failure now ends the script.
    fn simple(&mut self, s: &ast::SimpleCommand, last_of_pipeline: bool) {
        let ws = words(s);
        let Some(first) = ws.iter().filter_map(|w| parse::word_line(w)).min() else {
            return;
        };
        let last = ws
            .iter()
            .filter_map(|w| w.loc.as_ref().map(|l| l.end.line))
            .max()
            .unwrap_or(first)
            .max(first);
        let values: Vec<String> = ws.iter().map(|w| w.value.clone()).collect();
        // A call itself (its environment assignments aside).
        let command_at = values.iter().position(|v| !is_assignment(v));
        if let Some(at) = command_at {
            self.call(&values[at..], first, last);
            return;
        }
        // Assignments only: the status is the last substitution's.
        let [only] = values.as_slice() else { return };
        let Some((name, inner)) = substitution(only) else {
            return;
        };
        let Some(seq) = one_pipeline(inner) else {
            return;
        };
        match seq.as_slice() {
            [call] => self.call(call, first, last),
            [call, grep]
                if last_of_pipeline
                    && !self.pipefail
                    && first == last
                    && is_cluster(call)
                    && grep.first().is_some_and(|g| g == "grep") =>
            {
                self.grep_split(first, name, inner, call)
            }
            _ => {}
        }
    }

    /// Wraps a cluster call that can answer NotFound or AlreadyExists in
    /// `migrate-tolerate`, found on lines `first..=last`.
    fn call(&mut self, argv: &[String], first: usize, last: usize) {
        let Some(flags) = tolerate_flags(argv) else {
            return;
        };
        let Some((line, column)) = self.find(argv, first, last) else {
            return;
        };
        self.inserts
            .entry(line)
            .or_default()
            .push((column, format!("{TOLERATE} {flags} -- ")));
        let message = format!(
            "{}: the original (no 'set -e') carried on when it failed, and the engine's errexit would end the script there; the answer it meant is accepted through '{TOLERATE} {flags}', every other failure (Forbidden, unreachable, a timeout) ends the script",
            shown(argv)
        );
        self.out.change(KIND, line, message, true);
    }

    /// `x=$(CALL | grep ...)` on line `line`: the grep finding nothing is
    /// an empty answer, the call its own command.
    fn grep_split(&mut self, line: usize, name: &str, inner: &str, call: &[String]) {
        let text = self.lines[line - 1];
        let trimmed = text.trim();
        let assignment = format!("{name}=$({inner})");
        if trimmed != assignment {
            return;
        }
        let Some(bar) = top_level_bar(inner) else {
            return;
        };
        let (mut call_text, grep_text) = (inner[..bar].trim().to_owned(), inner[bar + 1..].trim());
        if let Some(flags) = tolerate_flags(call) {
            call_text = format!("{TOLERATE} {flags} -- {call_text}");
        }
        let indent = &text[..text.len() - text.trim_start().len()];
        self.replaced.insert(
            line,
            format!(
                "{indent}{name}=$({call_text}); {name}=$(printf '%s' \"${name}\" | {grep_text} || [ $? = 1 ])"
            ),
        );
        let message = format!(
            "{}: the original (no 'set -e') carried on when grep found nothing, and the engine's errexit would end the script there; nothing found is now an empty answer, and the call runs on its own, its failure ending the script",
            shown(call)
        );
        self.out.change(KIND, line, message, true);
    }

    /// Where on lines `first..=last` the call's first two words are
    /// written, when they are written there once.
    fn find(&self, argv: &[String], first: usize, last: usize) -> Option<(usize, usize)> {
        let (w0, w1) = (argv.first()?, argv.get(1)?);
        let mut found = None;
        for line in first..=last.min(self.lines.len()) {
            let text = self.lines[line - 1];
            let mut from = 0;
            while let Some(at) = text[from..].find(w0.as_str()).map(|i| i + from) {
                from = at + w0.len();
                let before = text[..at].chars().last();
                let boundary = before.is_none_or(|c| c.is_whitespace() || "(;&|{!`".contains(c));
                let rest = &text[from..];
                let spaced = rest.trim_start();
                if boundary && spaced.len() < rest.len() && spaced.starts_with(w1.as_str()) {
                    if found.is_some() {
                        return None;
                    }
                    found = Some((line, at));
                }
            }
        }
        found
    }

    /// A top-level `A && B` that is not the script's last command, whose
    /// status nothing reads: when A fails the list fails, which the
    /// original carried past to its later commands (its stamp, often).
    /// Once they are gone (the stamp removed) the list's status would be
    /// the script's; `if A; then B; fi` ends as the original did.
    fn and_lists(&mut self, program: &ast::Program) {
        let items: Vec<&ast::CompoundListItem> = program
            .complete_commands
            .iter()
            .flat_map(|l| l.0.iter())
            .collect();
        for (k, item) in items.iter().enumerate() {
            let Some(line) = and_list_line(item) else {
                continue;
            };
            let Some(next) = items.get(k + 1) else {
                continue;
            };
            let next_reads_status = std::iter::once(&next.0.first)
                .chain(next.0.additional.iter().map(|a| match a {
                    ast::AndOr::And(p) | ast::AndOr::Or(p) => p,
                }))
                .flat_map(|p| p.seq.iter())
                .any(|c| format!("{c}").contains("$?"));
            let text = self.lines[line - 1];
            if next_reads_status || text.contains('#') || top_level_and(text).is_none() {
                continue;
            }
            self.and_lines.push(line);
            let message = "'A && B' failed as a list when A failed, which the original carried past to its later commands: now 'if A; then B; fi', so it ends as the original did once the stamp after it is removed";
            self.out.change(KIND, line, message.into(), true);
        }
    }

    fn finish(mut self) -> Analysis {
        let mut lines: std::collections::BTreeSet<usize> = self.inserts.keys().copied().collect();
        lines.extend(self.and_lines.iter().copied());
        for line in lines {
            if self.replaced.contains_key(&line) {
                continue;
            }
            let mut inserts = self.inserts.remove(&line).unwrap_or_default();
            inserts.sort_by_key(|b| std::cmp::Reverse(b.0));
            let mut text = self.lines[line - 1].to_owned();
            for (column, what) in inserts {
                text.insert_str(column, &what);
            }
            if self.and_lines.contains(&line)
                && let Some(at) = top_level_and(&text)
            {
                let indent = &text[..text.len() - text.trim_start().len()];
                text = format!(
                    "{indent}if {}; then {}; fi",
                    text[..at].trim(),
                    text[at + 2..].trim()
                );
            }
            self.out.edits.insert(line, Some(text));
        }
        for (line, text) in std::mem::take(&mut self.replaced) {
            self.out.edits.insert(line, Some(text));
        }
        self.out.changes.sort_by_key(|c| c.line);
        self.out
    }
}

/// `--not-found`, `--already-exists` or both for a cluster call that can
/// answer them; `None` for one that cannot (or no cluster call).
fn tolerate_flags(argv: &[String]) -> Option<String> {
    if !is_cluster(argv) {
        return None;
    }
    let literal: Vec<String> = argv
        .iter()
        .map(|w| parse::literal(w).unwrap_or_else(|| w.clone()))
        .collect();
    let classes = FailureClass::of_call(&literal);
    let flags: Vec<String> = classes
        .iter()
        .filter(|c| !c.may_fail_closed())
        .filter_map(|c| c.answer())
        .map(|a| a.flag())
        .collect();
    (!flags.is_empty()).then(|| flags.join(" "))
}

fn is_cluster(argv: &[String]) -> bool {
    argv.first()
        .and_then(|w| parse::literal(w))
        .is_some_and(|n| matches!(n.as_str(), "kubectl" | "helm" | "oc"))
}

fn is_assignment(word: &str) -> bool {
    word.split_once('=').is_some_and(|(n, _)| {
        !n.is_empty()
            && !n.starts_with(|c: char| c.is_ascii_digit())
            && n.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
    })
}

/// `NAME=$(INNER)`: the name and the inner text.
fn substitution(word: &str) -> Option<(&str, &str)> {
    let (name, value) = word.split_once('=')?;
    let inner = value.strip_prefix("$(")?.strip_suffix(')')?;
    (!inner.trim_start().starts_with('(')).then_some((name, inner))
}

/// The words of each command of `text` when it is one plain pipeline of
/// simple commands.
fn one_pipeline(text: &str) -> Option<Vec<Vec<String>>> {
    let program = parse::program(text).ok()?;
    let [list] = program.complete_commands.as_slice() else {
        return None;
    };
    only_pipeline(list)?
        .seq
        .iter()
        .map(|c| match c {
            ast::Command::Simple(s) => Some(words(s).iter().map(|w| w.value.clone()).collect()),
            _ => None,
        })
        .collect()
}

/// The byte index of the one `&&` outside quotes on a line.
fn top_level_and(text: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    top_level_one(text, |i, c| c == '&' && bytes.get(i + 1) == Some(&b'&'))
}

/// The byte index of the one `|` outside quotes in a two-command
/// pipeline's text.
fn top_level_bar(text: &str) -> Option<usize> {
    top_level_one(text, |_, c| c == '|')
}

/// The byte index of the one place outside quotes where `is_operator`
/// holds (of the byte index and the character there).
fn top_level_one(text: &str, is_operator: impl Fn(usize, char) -> bool) -> Option<usize> {
    let (mut single, mut double, mut escaped) = (false, false, false);
    let mut found = Vec::new();
    for (i, c) in text.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' if !single => escaped = true,
            '\'' if !double => single = !single,
            '"' if !single => double = !double,
            _ if !single && !double && is_operator(i, c) => found.push(i),
            _ => {}
        }
    }
    match found.as_slice() {
        [one] => Some(*one),
        _ => None,
    }
}

/// A call for a message, cut at 120 characters.
fn shown(argv: &[String]) -> String {
    let text = argv.join(" ");
    if text.chars().count() > 120 {
        format!("{}…", text.chars().take(120).collect::<String>())
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::super::behaviour::tests::{passes_in_every_shell, shells};
    use super::super::behaviour::{self, Behaviour, Harness, Settings};
    use super::*;

    fn rewritten(text: &str) -> String {
        super::super::diff::apply(text, &analyse(text).edits)
    }

    /// Asserts that the rewrite of `original` behaves as it does under
    /// every shell.
    fn passes_everywhere(original: &str) {
        let settings = Settings::new(
            "cozystack-version",
            "cozy-system",
            vec!["kubectl".into(), "helm".into()],
        );
        passes_in_every_shell(&settings, original, &rewritten(original), false);
    }

    #[test]
    fn a_call_carried_past_its_failure_accepts_not_found_and_stops_on_every_other_failure() {
        let original = "#!/bin/sh\nif kubectl get clusterrolebinding old; then\n  kubectl delete clusterrolebinding old\nfi\nkubectl get hr -n a b && kubectl delete hr -n a b --wait=0\nkubectl patch configmap -n a c --type merge -p '{\"data\":{}}'\nkubectl delete pods -l app=x -n a\necho done\n";
        // Without the rewrite the check names the absent object's path.
        let plain = carries(
            original,
            "#!/bin/sh\nif kubectl get clusterrolebinding old; then\n  migrate-tolerate --not-found -- kubectl delete clusterrolebinding old\nfi\nif kubectl get hr -n a b; then migrate-tolerate --not-found -- kubectl delete hr -n a b --wait=0; fi\nmigrate-tolerate --not-found -- kubectl patch configmap -n a c --type merge -p '{\"data\":{}}'\nkubectl delete pods -l app=x -n a\necho done\n",
        );
        assert!(
            matches!(&plain, Behaviour::Differed { path, .. } if path.contains("(not-found)")),
            "{plain:?}"
        );
    }

    /// Asserts that `original` rewrites to `expected`, which behaves as it
    /// does under every shell; answers the check of `original` against
    /// itself unrewritten.
    fn carries(original: &str, expected: &str) -> Behaviour {
        assert_eq!(rewritten(original), expected);
        passes_everywhere(original);
        check_pair_unrewritten(original)
    }

    fn check_pair_unrewritten(original: &str) -> Behaviour {
        let settings = Settings::new("v", "ns", vec!["kubectl".into(), "helm".into()]);
        Harness::new(settings)
            .unwrap()
            .check_alone(original.as_bytes(), original, false)
    }

    #[test]
    fn a_grep_finding_nothing_is_an_empty_answer_and_the_listing_call_stands_alone() {
        let original = "#!/bin/sh\ncrds=$(kubectl get crd -o name | grep '\\.example\\.io$')\nif [ -n \"$crds\" ]; then\n  kubectl annotate $crds a=b\nfi\nkubectl apply -f x.yaml\n";
        let plain = carries(
            original,
            "#!/bin/sh\ncrds=$(kubectl get crd -o name); crds=$(printf '%s' \"$crds\" | grep '\\.example\\.io$' || [ $? = 1 ])\nif [ -n \"$crds\" ]; then\n  migrate-tolerate --not-found -- kubectl annotate $crds a=b\nfi\nkubectl apply -f x.yaml\n",
        );
        assert!(
            matches!(&plain, Behaviour::Differed { path, .. } if path == "on the success path"),
            "{plain:?}"
        );
    }

    #[test]
    fn a_grep_that_finds_lines_still_gives_them() {
        // The fakes print nothing; a real listing's lines must still come through.
        let text = rewritten(
            "#!/bin/sh\ncrds=$(kubectl get crd -o name | grep '\\.example\\.io$')\necho \"[$crds]\"\n",
        );
        let script = text.replace(
            "kubectl get crd -o name",
            "printf 'a.example.io\\nb.other.io\\nc.example.io\\n'",
        );
        for sh in shells() {
            let mut words = sh.split_whitespace();
            let out = std::process::Command::new(words.next().unwrap())
                .args(words)
                .args(["-e", "-c", &script])
                .output()
                .unwrap();
            assert_eq!(
                String::from_utf8_lossy(&out.stdout),
                "[a.example.io\nc.example.io]\n",
                "{sh}: {script}"
            );
        }
    }

    #[test]
    fn a_substituted_get_of_one_object_accepts_its_absence() {
        let original = "#!/bin/sh\nif kubectl get hr -n a b > /dev/null; then\n  v=$(\n    kubectl get hr -n a c -o go-template='{{ .spec }}'\n  )\n  w=$(kubectl get cm -n a d -o jsonpath='{.data.x}')\n  kubectl patch cm -n a d --type merge -p=\"{\\\"data\\\":{\\\"v\\\":\\\"$v$w\\\"}}\"\nfi\nhelm uninstall old -n a\nkubectl create namespace e\necho done\n";
        let text = rewritten(original);
        assert!(
            text.contains(
                "    migrate-tolerate --not-found -- kubectl get hr -n a c -o go-template"
            ),
            "{text}"
        );
        assert!(
            text.contains("w=$(migrate-tolerate --not-found -- kubectl get cm -n a d"),
            "{text}"
        );
        assert!(
            text.contains("\nmigrate-tolerate --not-found -- helm uninstall old -n a\n"),
            "{text}"
        );
        assert!(
            text.contains("\nmigrate-tolerate --already-exists -- kubectl create namespace e\n"),
            "{text}"
        );
        passes_everywhere(original);
    }

    #[test]
    fn a_script_that_sets_errexit_itself_is_left_alone() {
        for text in [
            "#!/bin/sh\nset -eu\nkubectl delete cm a -n b\n",
            "#!/bin/sh -e\nkubectl delete cm a -n b\n",
            "#!/bin/bash\nset -o errexit\nkubectl delete cm a -n b\n",
            "#!/bin/sh\nset -euo pipefail\nkubectl delete cm a -n b\n",
        ] {
            assert!(analyse(text).edits.is_empty(), "{text}");
        }
    }

    #[test]
    fn a_call_written_twice_on_its_line_is_not_guessed() {
        let text = "#!/bin/sh\nkubectl delete cm a -n b || kubectl delete cm a -n b\n";
        assert!(analyse(text).edits.is_empty());
    }

    #[test]
    fn a_call_in_a_condition_or_before_or_is_not_touched() {
        let text = "#!/bin/sh\nif kubectl delete cm a -n b; then :; fi\nkubectl delete cm c -n b || true\n! kubectl delete cm d -n b\nwhile kubectl get cm e -n b; do :; done\n";
        assert!(analyse(text).edits.is_empty());
        let _ = behaviour::FailureClass::ALL;
    }

    #[test]
    fn a_probe_and_its_call_joined_by_and_keep_the_status_the_removed_stamp_gave() {
        // `A && B` fails the list when A fails; the original went on to its
        // stamp and ended 0. With the stamp removed the list is last, and
        // its status would be the script's: an `if` keeps the original's.
        let original = "#!/bin/sh\nkubectl get hr -n a b && kubectl delete hr -n a b --wait=0\n\nkubectl create configmap -n cozy-system cozystack-version --from-literal=version=7 --dry-run=client -o yaml | kubectl apply -f-\n";
        let config = super::super::patterns::PatternConfig {
            ledger_name: "cozystack-version".into(),
            ..Default::default()
        };
        let mut analysis = super::super::patterns::analyse(original, &config);
        super::super::handled::merge(&mut analysis, analyse(original));
        let converted = super::super::diff::apply(original, &analysis.edits);
        assert_eq!(
            converted,
            "#!/bin/sh\nif kubectl get hr -n a b; then migrate-tolerate --not-found -- kubectl delete hr -n a b --wait=0; fi\n\n"
        );
        let settings = Settings::new("cozystack-version", "cozy-system", vec!["kubectl".into()]);
        passes_in_every_shell(&settings, original, &converted, true);
    }

    #[test]
    fn an_and_list_that_ends_the_script_or_whose_status_is_read_stays_a_list() {
        for text in [
            "#!/bin/sh\nkubectl get hr -n a b && kubectl delete hr -n a b\n",
            "#!/bin/sh\nkubectl get hr -n a b && kubectl delete hr -n a b\necho $?\n",
        ] {
            let out = rewritten(text);
            assert!(!out.contains("if "), "{out}");
        }
    }
}
