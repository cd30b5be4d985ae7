//! The answers a failed cluster command may give that a migration can
//! accept: the one list `migrate-tolerate`'s flags, the tripwire's
//! classifier, lint's messages and `migrate convert` all read.
//!
//! A script written for the numbered runner recognises an answer by
//! grepping kubectl's error text itself (`grep -q "doesn't have a resource
//! type" "$err"`); under the engine the same acceptance is
//! `migrate-tolerate --not-served -- kubectl ...`. [`named_by`] tells which
//! answers such a text names, by matching it against kubectl's own lines for
//! each answer ([`Answer::texts`], the texts the tripwire's classifier
//! accepts; a test in the runner checks that it accepts each of them as
//! this answer and nothing else).

/// An answer `migrate-tolerate` can be told to accept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Answer {
    /// The object is not there.
    NotFound,
    /// The resource type is not served (a CRD not installed).
    NotServed,
    /// The object is already there.
    AlreadyExists,
    /// A write lost a race.
    Conflict,
}

/// What `migrate-tolerate` prints on its stderr, before the class and the
/// call, when it accepted a failure: a script that redirected the helper's
/// stderr to a file can tell a tolerated answer from a success by it.
pub const TOLERATED_PREFIX: &str = "migrate-tolerate: tolerated ";

impl Answer {
    /// Every answer, in flag order.
    pub const ALL: [Answer; 4] = [
        Answer::NotFound,
        Answer::NotServed,
        Answer::AlreadyExists,
        Answer::Conflict,
    ];

    /// The stable name (`not-found`): the flag without its dashes, and the
    /// class name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Answer::NotFound => "not-found",
            Answer::NotServed => "not-served",
            Answer::AlreadyExists => "already-exists",
            Answer::Conflict => "conflict",
        }
    }

    /// The `migrate-tolerate` flag accepting it (`--not-found`).
    pub fn flag(self) -> String {
        format!("--{}", self.name())
    }

    /// The answer a `migrate-tolerate` flag names.
    pub fn from_flag(flag: &str) -> Option<Answer> {
        let name = flag.strip_prefix("--")?;
        Answer::ALL.into_iter().find(|a| a.name() == name)
    }

    /// The lines kubectl (and helm) print for this answer, as recorded from
    /// the real commands (`tests/fixtures/kubectl-errors/`): what a script
    /// that greps for it was looking for.
    pub fn texts(self) -> &'static [&'static str] {
        match self {
            Answer::NotFound => &[
                "Error from server (NotFound): configmaps \"x\" not found",
                "Error from server (NotFound): error when deleting \"STDIN\": configmaps \"x\" not found",
                "Error: release: not found",
            ],
            Answer::NotServed => &[
                "error: the server doesn't have a resource type \"clusters\"",
                // kubectl's checkErr for a type asked by group, version or
                // both (`clusters.postgresql.cnpg.io`); `kubectl explain`
                // prints the line without the `error: ` prefix.
                "error: the server doesn't have a resource type \"cluster\" in group \"postgresql.cnpg.io\"",
                "error: the server doesn't have a resource type \"clusters\" in version \"v1\"",
                "error: the server doesn't have a resource type \"clusters\" in group \"postgresql.cnpg.io\" and version \"v1\"",
                "the server doesn't have a resource type \"clusters\"",
                "error: resource mapping not found for name: \"w\" namespace: \"\" from \"STDIN\": no matches for kind \"Widget\" in version \"example.com/v1\"",
            ],
            Answer::AlreadyExists => &[
                "Error from server (AlreadyExists): configmaps \"x\" already exists",
                "Error from server (AlreadyExists): error when creating \"STDIN\": configmaps \"x\" already exists",
                "error: failed to create configmap: configmaps \"x\" already exists",
                "Error: INSTALLATION FAILED: cannot re-use a name that is still in use",
            ],
            Answer::Conflict => &[
                "Error from server (Conflict): Operation cannot be fulfilled on configmaps \"x\": the object has been modified; please apply your changes to the latest version and try again",
            ],
        }
    }
}

impl std::fmt::Display for Answer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// How a script's test reads an error text: `grep`'s pattern syntax and
/// case, or a `case` glob.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Syntax {
    /// `grep -F`: the pattern is a string.
    Fixed,
    /// `grep` (basic): `\|` separates alternatives (GNU and busybox).
    Basic,
    /// `grep -E`: `|` separates alternatives.
    Extended,
    /// A `case` pattern (`*NotFound*`): a glob, `|` between patterns.
    Glob,
}

/// Which answers a script's text test names.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Named {
    /// The answers some alternative of the pattern matches.
    pub answers: Vec<Answer>,
    /// Alternatives that match no answer's text, or that this reading cannot
    /// follow (character classes, repetition): as `migrate-tolerate`
    /// classes, the failures they recognised are no longer accepted.
    pub unrecognised: Vec<String>,
}

/// The answers `pattern` names, read in `syntax` (`ignore_case`: `grep -i`):
/// an alternative names an answer when it matches one of the answer's
/// [`Answer::texts`]. `.` (any character), `^`, `$` and backslash escapes
/// are understood; an alternative with other regular-expression syntax is
/// unrecognised, never guessed at.
pub fn named_by(pattern: &str, syntax: Syntax, ignore_case: bool) -> Named {
    let mut named = Named::default();
    for alternative in alternatives(pattern, syntax) {
        let Some(matcher) = Matcher::new(&alternative, syntax, ignore_case) else {
            named.unrecognised.push(alternative);
            continue;
        };
        let mut any = false;
        for answer in Answer::ALL {
            if answer.texts().iter().any(|t| matcher.matches(t)) {
                any = true;
                if !named.answers.contains(&answer) {
                    named.answers.push(answer);
                }
            }
        }
        if !any {
            named.unrecognised.push(alternative);
        }
    }
    named.answers.sort();
    named
}

fn alternatives(pattern: &str, syntax: Syntax) -> Vec<String> {
    let parts: Vec<String> = match syntax {
        Syntax::Fixed => pattern.split('\n').map(str::to_owned).collect(),
        Syntax::Basic => pattern.split("\\|").map(str::to_owned).collect(),
        Syntax::Extended | Syntax::Glob => pattern.split('|').map(str::to_owned).collect(),
    };
    parts.into_iter().filter(|p| !p.is_empty()).collect()
}

/// One alternative as a sequence of literal characters and wildcards.
struct Matcher {
    /// `None`: any one character (`.`, `?`); `Some(c)`: `c`.
    atoms: Vec<Atom>,
    anchored_start: bool,
    anchored_end: bool,
    ignore_case: bool,
}

#[derive(Clone, Copy)]
enum Atom {
    Char(char),
    AnyOne,
    /// A glob's `*`.
    AnyRun,
}

impl Matcher {
    fn new(text: &str, syntax: Syntax, ignore_case: bool) -> Option<Matcher> {
        let mut atoms = Vec::new();
        let mut chars = text.chars().peekable();
        let (mut anchored_start, mut anchored_end) = (false, false);
        if syntax == Syntax::Glob {
            // A case pattern matches the whole subject.
            anchored_start = true;
            anchored_end = true;
        }
        let mut first = true;
        while let Some(c) = chars.next() {
            let regex = matches!(syntax, Syntax::Basic | Syntax::Extended);
            match c {
                '\\' => atoms.push(Atom::Char(chars.next()?)),
                '^' if regex && first => anchored_start = true,
                '$' if regex && chars.peek().is_none() => anchored_end = true,
                '.' if regex => atoms.push(Atom::AnyOne),
                '*' if syntax == Syntax::Glob => atoms.push(Atom::AnyRun),
                '?' if syntax == Syntax::Glob => atoms.push(Atom::AnyOne),
                '[' | '*' if syntax != Syntax::Fixed => return None,
                '+' | '?' | '(' | ')' | '{' | '}' if syntax == Syntax::Extended => return None,
                c => atoms.push(Atom::Char(c)),
            }
            first = false;
        }
        Some(Matcher {
            atoms,
            anchored_start,
            anchored_end,
            ignore_case,
        })
    }

    fn matches(&self, line: &str) -> bool {
        let text: Vec<char> = line.chars().collect();
        let starts: Vec<usize> = if self.anchored_start {
            vec![0]
        } else {
            (0..=text.len()).collect()
        };
        starts.into_iter().any(|s| self.at(&text, s, 0))
    }

    fn at(&self, text: &[char], t: usize, a: usize) -> bool {
        let Some(atom) = self.atoms.get(a) else {
            return !self.anchored_end || t == text.len();
        };
        match atom {
            Atom::AnyRun => (t..=text.len()).any(|u| self.at(text, u, a + 1)),
            Atom::AnyOne => t < text.len() && self.at(text, t + 1, a + 1),
            Atom::Char(c) => {
                t < text.len()
                    && (if self.ignore_case {
                        text[t].to_lowercase().eq(c.to_lowercase())
                    } else {
                        text[t] == *c
                    })
                    && self.at(text, t + 1, a + 1)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn texts_scripts_grep_for_name_the_answers_kubectl_gives() {
        let e = |p: &str| named_by(p, Syntax::Extended, false).answers;
        assert_eq!(e("doesn't have a resource type"), [Answer::NotServed]);
        assert_eq!(e("NotFound"), [Answer::NotFound]);
        assert_eq!(e("AlreadyExists|already exists"), [Answer::AlreadyExists]);
        assert_eq!(e("Operation cannot be fulfilled"), [Answer::Conflict]);
        // kubectl's "resource mapping not found" is the CRD-not-installed
        // answer: a script grepping "not found" accepted it too.
        assert_eq!(e("not found"), [Answer::NotFound, Answer::NotServed]);
        assert_eq!(
            named_by("notfound", Syntax::Fixed, true).answers,
            [Answer::NotFound]
        );
        assert_eq!(
            named_by("*NotFound*", Syntax::Glob, false).answers,
            [Answer::NotFound]
        );
        assert_eq!(
            named_by("NotFound", Syntax::Glob, false).answers,
            Vec::<Answer>::new()
        );
    }

    #[test]
    fn a_script_grepping_for_a_type_asked_by_group_or_version_names_the_not_served_answer() {
        let f = |p: &str| named_by(p, Syntax::Fixed, false).answers;
        assert_eq!(
            f("resource type \"cluster\" in group \"postgresql.cnpg.io\""),
            [Answer::NotServed]
        );
        assert_eq!(f("\" and version \"v1\""), [Answer::NotServed]);
        assert_eq!(f("\" in version \"v1\""), [Answer::NotServed]);
        // `kubectl explain` prints it without kubectl's `error: ` prefix.
        assert_eq!(
            named_by("^the server doesn't have", Syntax::Basic, false).answers,
            [Answer::NotServed]
        );
    }

    #[test]
    fn alternatives_that_name_no_answer_or_cannot_be_read_are_listed() {
        let n = named_by(
            "server doesn't have a resource type|could not find the requested resource|Forbid+en",
            Syntax::Extended,
            true,
        );
        assert_eq!(n.answers, [Answer::NotServed]);
        assert_eq!(
            n.unrecognised,
            ["could not find the requested resource", "Forbid+en"]
        );
        let b = named_by("NotFound\\|Forbidden", Syntax::Basic, false);
        assert_eq!(
            (b.answers, b.unrecognised),
            (vec![Answer::NotFound], vec!["Forbidden".to_owned()])
        );
    }

    #[test]
    fn every_flag_names_its_answer() {
        for a in Answer::ALL {
            assert_eq!(Answer::from_flag(&a.flag()), Some(a));
        }
        assert_eq!(Answer::from_flag("--forbidden"), None);
        assert!(TOLERATED_PREFIX.starts_with(crate::cluster_commands::TOLERATE));
    }
}
