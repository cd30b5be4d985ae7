//! The syntax tree: brush-parser's AST plus what the rules need from words
//! (their literal text, the command substitutions inside them, the lines
//! those start on).

use brush_parser::ast;
use brush_parser::word::{self, Parameter, ParameterExpr, WordPiece, WordPieceWithSource};
use brush_parser::{ParseError, Parser, ParserOptions};

/// Parser options: the bash superset, so one grammar reads both dialects.
fn options() -> ParserOptions {
    ParserOptions::default()
}

/// Why a text is not a shell program.
#[derive(Debug, Clone)]
pub struct ParseFailure {
    /// One-based line, relative to the parsed text, where known.
    pub line: Option<usize>,
    /// The parser's message.
    pub message: String,
}

/// Parses a whole program.
pub fn program(text: &str) -> Result<ast::Program, ParseFailure> {
    let mut parser = Parser::new(std::io::BufReader::new(text.as_bytes()), &options());
    parser.parse_program().map_err(|e| {
        let line = match &e {
            ParseError::ParsingNear(p) => Some(p.line),
            ParseError::Tokenizing { position, .. } => position.as_ref().map(|p| p.line),
            ParseError::ParsingAtEndOfInput => None,
        };
        ParseFailure {
            line,
            message: e.to_string(),
        }
    })
}

/// The start line of a word, when the parser recorded one. Counted back
/// from the word's end: a token's recorded start includes the line
/// continuation (`\` newline) before it, its end does not.
pub fn word_line(w: &ast::Word) -> Option<usize> {
    w.loc.as_ref().map(|l| {
        let newlines = w.value.bytes().filter(|b| *b == b'\n').count();
        l.end.line.saturating_sub(newlines).max(1)
    })
}

/// A word as written in `src` (the text it was parsed from), with the line
/// continuations (`\\` newline) the tokenizer leaves out of
/// [`ast::Word::value`], and the line it starts on. A token's recorded
/// start is at the continuation before it, if any, so the blanks and
/// continuations it begins with are skipped. `None` when the parser recorded
/// no position, or the source text does not agree with the value (then the
/// value is all there is, and [`word_line`] its line).
pub fn raw_word<'s>(src: &'s str, w: &ast::Word) -> Option<(&'s str, usize)> {
    let loc = w.loc.as_ref()?;
    let (start, end) = (loc.start.index, loc.end.index);
    let mut raw = if src.is_ascii() {
        src.get(start..end)?
    } else {
        // Positions count characters, not bytes.
        let byte = |i: usize| src.char_indices().map(|(b, _)| b).chain([src.len()]).nth(i);
        src.get(byte(start)?..byte(end)?)?
    };
    let mut line = loc.start.line;
    while let Some(after) = raw.trim_start_matches([' ', '\t']).strip_prefix("\\\n") {
        line += 1;
        raw = after;
    }
    let raw = raw.trim_start_matches([' ', '\t']);
    // The value is the text without its continuations, and without the
    // comments inside a `$(...)`: each of its lines begins its line of the
    // text.
    let text = raw.replace("\\\n", "");
    let agrees = text == w.value
        || (text.split('\n').count() == w.value.split('\n').count()
            && text
                .split('\n')
                .zip(w.value.split('\n'))
                .all(|(t, v)| t.starts_with(v.trim_end())));
    agrees.then_some((raw, line))
}

/// The pieces of a word; a word the expansion grammar rejects is one
/// literal piece (it is then at worst not checked, never misread as code).
fn pieces(text: &str) -> Vec<WordPieceWithSource> {
    word::parse(text, &options()).unwrap_or_else(|_| {
        vec![WordPieceWithSource {
            piece: WordPiece::Text(text.to_owned()),
            start_index: 0,
            end_index: text.len(),
        }]
    })
}

/// The pieces of a heredoc body that is subject to expansion.
fn heredoc_pieces(text: &str) -> Vec<WordPieceWithSource> {
    word::parse_heredoc(text, &options()).unwrap_or_default()
}

/// The text of a word after quote removal, if it has no expansion at all.
pub fn literal(text: &str) -> Option<String> {
    let mut out = String::new();
    literal_pieces(&pieces(text), &mut out).then_some(out)
}

fn literal_pieces(pieces: &[WordPieceWithSource], out: &mut String) -> bool {
    for p in pieces {
        match &p.piece {
            WordPiece::Text(t) | WordPiece::SingleQuotedText(t) | WordPiece::AnsiCQuotedText(t) => {
                out.push_str(t)
            }
            WordPiece::EscapeSequence(e) => out.push_str(e.strip_prefix('\\').unwrap_or(e)),
            WordPiece::DoubleQuotedSequence(inner)
            | WordPiece::GettextDoubleQuotedSequence(inner) => {
                if !literal_pieces(inner, out) {
                    return false;
                }
            }
            _ => return false,
        }
    }
    true
}

/// A command substitution found in a word: its text and the line (relative
/// to the word's own first line, zero-based) on which it starts.
#[derive(Debug, Clone)]
pub struct Substitution {
    /// The command text between `$(` and `)` (or the backquotes).
    pub text: String,
    /// Lines between the word's start and the substitution's start.
    pub line_offset: usize,
}

/// Every command substitution in a word, outermost only (inner ones are
/// found when the substitution's own text is parsed).
pub fn substitutions(text: &str) -> Vec<Substitution> {
    let mut out = Vec::new();
    collect_substitutions(text, &pieces(text), 0, &mut out);
    out
}

/// Every command substitution in an expanding heredoc body.
pub fn heredoc_substitutions(text: &str) -> Vec<Substitution> {
    let mut out = Vec::new();
    collect_substitutions(text, &heredoc_pieces(text), 0, &mut out);
    out
}

fn lines_before(text: &str, index: usize) -> usize {
    text.get(..index)
        .map_or(0, |t| t.bytes().filter(|b| *b == b'\n').count())
}

fn collect_substitutions(
    text: &str,
    pieces: &[WordPieceWithSource],
    base: usize,
    out: &mut Vec<Substitution>,
) {
    for p in pieces {
        let offset = base + lines_before(text, p.start_index);
        match &p.piece {
            WordPiece::CommandSubstitution(inner) => out.push(Substitution {
                text: inner.clone(),
                line_offset: offset,
            }),
            WordPiece::BackquotedCommandSubstitution(inner) => out.push(Substitution {
                text: unescape_backquoted(inner),
                line_offset: offset,
            }),
            WordPiece::DoubleQuotedSequence(inner)
            | WordPiece::GettextDoubleQuotedSequence(inner) => {
                // Inner indices are relative to the same word.
                collect_substitutions(text, inner, base, out);
            }
            WordPiece::ParameterExpansion(expr) => {
                if let Some(value) = parameter_word(expr) {
                    for mut s in substitutions(value) {
                        s.line_offset += offset;
                        out.push(s);
                    }
                }
            }
            _ => {}
        }
    }
}

/// Inside backquotes, `\$`, `` \` `` and `\\` stand for the character.
fn unescape_backquoted(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\'
            && let Some(&next) = chars.peek()
            && matches!(next, '$' | '`' | '\\')
        {
            out.push(next);
            chars.next();
            continue;
        }
        out.push(c);
    }
    out
}

/// The word inside `${x:-word}`, `${x:=word}`, `${x:+word}`, `${x:?word}`.
fn parameter_word(expr: &ParameterExpr) -> Option<&str> {
    match expr {
        ParameterExpr::UseDefaultValues { default_value, .. }
        | ParameterExpr::AssignDefaultValues { default_value, .. } => default_value.as_deref(),
        ParameterExpr::UseAlternativeValue {
            alternative_value, ..
        } => alternative_value.as_deref(),
        ParameterExpr::IndicateErrorIfNullOrUnset { error_message, .. } => error_message.as_deref(),
        _ => None,
    }
}

/// What a word that names a command stands for, when it is one parameter
/// expansion: `$NAME`, `${NAME}`, `"${NAME:-default}"`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParameterWord {
    /// The variable.
    pub name: String,
    /// The literal default (`${NAME:-default}`), if any.
    pub default: Option<String>,
}

/// Reads a word that is exactly one parameter expansion (quoted or not).
pub fn parameter(text: &str) -> Option<ParameterWord> {
    let ps = pieces(text);
    let one = match ps.as_slice() {
        [only] => only,
        _ => return None,
    };
    let expr = match &one.piece {
        WordPiece::ParameterExpansion(e) => e,
        WordPiece::DoubleQuotedSequence(inner) => match inner.as_slice() {
            [
                WordPieceWithSource {
                    piece: WordPiece::ParameterExpansion(e),
                    ..
                },
            ] => e,
            _ => return None,
        },
        _ => return None,
    };
    let (param, default) = match expr {
        ParameterExpr::Parameter { parameter, .. } => (parameter, None),
        ParameterExpr::UseDefaultValues {
            parameter,
            default_value,
            ..
        }
        | ParameterExpr::AssignDefaultValues {
            parameter,
            default_value,
            ..
        } => (parameter, default_value.as_deref().and_then(literal)),
        _ => return None,
    };
    match param {
        Parameter::Named(name) => Some(ParameterWord {
            name: name.clone(),
            default,
        }),
        _ => None,
    }
}

/// The pieces of a word, as a resolver for `.` paths sees them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathPiece {
    /// Literal text.
    Text(String),
    /// A parameter expansion: name and the operator text after it
    /// (`%/*` for `${0%/*}`), if any.
    Parameter(String, Option<String>),
    /// A command substitution's text.
    Command(String),
    /// Anything else.
    Other,
}

/// Splits a word into [`PathPiece`]s, quotes removed.
pub fn path_pieces(text: &str) -> Vec<PathPiece> {
    let mut out = Vec::new();
    flatten_path(&pieces(text), &mut out);
    out
}

fn flatten_path(pieces: &[WordPieceWithSource], out: &mut Vec<PathPiece>) {
    for p in pieces {
        match &p.piece {
            WordPiece::Text(t) | WordPiece::SingleQuotedText(t) | WordPiece::AnsiCQuotedText(t) => {
                out.push(PathPiece::Text(t.clone()))
            }
            WordPiece::EscapeSequence(e) => out.push(PathPiece::Text(
                e.strip_prefix('\\').unwrap_or(e).to_owned(),
            )),
            WordPiece::DoubleQuotedSequence(inner)
            | WordPiece::GettextDoubleQuotedSequence(inner) => flatten_path(inner, out),
            WordPiece::CommandSubstitution(c) | WordPiece::BackquotedCommandSubstitution(c) => {
                out.push(PathPiece::Command(c.clone()))
            }
            WordPiece::ParameterExpansion(expr) => out.push(match expr {
                ParameterExpr::Parameter { parameter, .. } => {
                    PathPiece::Parameter(parameter_name(parameter), None)
                }
                ParameterExpr::RemoveSmallestSuffixPattern {
                    parameter, pattern, ..
                } => PathPiece::Parameter(
                    parameter_name(parameter),
                    Some(format!("%{}", pattern.as_deref().unwrap_or(""))),
                ),
                ParameterExpr::UseDefaultValues { parameter, .. }
                | ParameterExpr::AssignDefaultValues { parameter, .. } => {
                    PathPiece::Parameter(parameter_name(parameter), None)
                }
                _ => PathPiece::Other,
            }),
            _ => out.push(PathPiece::Other),
        }
    }
}

fn parameter_name(p: &Parameter) -> String {
    match p {
        Parameter::Positional(n) => n.to_string(),
        Parameter::Named(n) => n.clone(),
        Parameter::NamedWithIndex { name, .. } | Parameter::NamedWithAllIndices { name, .. } => {
            name.clone()
        }
        Parameter::Special(word::SpecialParameter::ShellName) => "0".into(),
        Parameter::Special(_) => "?".into(),
    }
}

/// Every prefix then suffix item of a simple command (assignments,
/// words, redirects, process substitutions), in source order.
pub fn items(s: &ast::SimpleCommand) -> impl Iterator<Item = &ast::CommandPrefixOrSuffixItem> {
    s.prefix
        .iter()
        .flat_map(|p| p.0.iter())
        .chain(s.suffix.iter().flat_map(|p| p.0.iter()))
}

/// Line ranges (one-based, inclusive) of heredoc bodies in a program, so
/// that waiver comments inside them are not read as waivers.
pub fn heredoc_lines(program: &ast::Program) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    for cc in &program.complete_commands {
        heredocs_in_list(cc, &mut out);
    }
    out
}

fn heredocs_in_list(list: &ast::CompoundList, out: &mut Vec<(usize, usize)>) {
    for item in &list.0 {
        let ao = &item.0;
        heredocs_in_pipeline(&ao.first, out);
        for next in &ao.additional {
            match next {
                ast::AndOr::And(p) | ast::AndOr::Or(p) => heredocs_in_pipeline(p, out),
            }
        }
    }
}

fn heredocs_in_pipeline(p: &ast::Pipeline, out: &mut Vec<(usize, usize)>) {
    for c in &p.seq {
        heredocs_in_command(c, out);
    }
}

fn heredocs_in_redirect(r: &ast::IoRedirect, out: &mut Vec<(usize, usize)>) {
    if let ast::IoRedirect::HereDocument(_, doc) = r
        && let Some(loc) = &doc.doc.loc
    {
        out.push((loc.start.line, loc.end.line));
    }
}

fn heredocs_in_command(c: &ast::Command, out: &mut Vec<(usize, usize)>) {
    match c {
        ast::Command::Simple(s) => {
            for item in items(s) {
                if let ast::CommandPrefixOrSuffixItem::IoRedirect(r) = item {
                    heredocs_in_redirect(r, out);
                }
            }
        }
        ast::Command::Compound(cc, redirects) => {
            for r in redirects.iter().flat_map(|r| r.0.iter()) {
                heredocs_in_redirect(r, out);
            }
            for list in compound_lists(cc) {
                heredocs_in_list(list, out);
            }
        }
        ast::Command::Function(f) => {
            for list in compound_lists(&f.body.0) {
                heredocs_in_list(list, out);
            }
            for r in f.body.1.iter().flat_map(|r| r.0.iter()) {
                heredocs_in_redirect(r, out);
            }
        }
        ast::Command::ExtendedTest(..) => {}
    }
}

/// The lists directly inside a compound command.
pub fn compound_lists(cc: &ast::CompoundCommand) -> Vec<&ast::CompoundList> {
    match cc {
        ast::CompoundCommand::BraceGroup(b) => vec![&b.list],
        ast::CompoundCommand::Subshell(s) => vec![&s.list],
        ast::CompoundCommand::ForClause(f) => vec![&f.body.list],
        ast::CompoundCommand::ArithmeticForClause(f) => vec![&f.body.list],
        ast::CompoundCommand::CaseClause(c) => {
            c.cases.iter().filter_map(|i| i.cmd.as_ref()).collect()
        }
        ast::CompoundCommand::IfClause(i) => {
            let mut v = vec![&i.condition, &i.then];
            for e in i.elses.iter().flatten() {
                if let Some(c) = &e.condition {
                    v.push(c);
                }
                v.push(&e.body);
            }
            v
        }
        ast::CompoundCommand::WhileClause(w) | ast::CompoundCommand::UntilClause(w) => {
            vec![&w.0, &w.1.list]
        }
        ast::CompoundCommand::Arithmetic(_) | ast::CompoundCommand::Coprocess(_) => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literal_words_lose_their_quotes_and_expansions_are_not_literal() {
        assert_eq!(literal("'true'").as_deref(), Some("true"));
        assert_eq!(literal("\"true\"").as_deref(), Some("true"));
        assert_eq!(literal("\\true").as_deref(), Some("true"));
        assert_eq!(literal("$x"), None);
        assert_eq!(literal("\"a $(b)\""), None);
    }

    #[test]
    fn substitutions_are_found_inside_quotes_and_defaults_with_their_line() {
        let subs = substitutions("\"a\n$(kubectl get x)\"");
        assert_eq!(subs.len(), 1);
        assert_eq!(subs[0].text, "kubectl get x");
        assert_eq!(subs[0].line_offset, 1);
        assert_eq!(
            substitutions("${x:-$(kubectl get y)}")[0].text,
            "kubectl get y"
        );
        assert_eq!(
            substitutions("`kubectl get \\$x`")[0].text,
            "kubectl get $x"
        );
        assert!(substitutions("'$(kubectl get x)'").is_empty());
    }

    #[test]
    fn a_parameter_word_names_its_variable_and_default() {
        assert_eq!(
            parameter("\"${KUBECTL:-kubectl}\""),
            Some(ParameterWord {
                name: "KUBECTL".into(),
                default: Some("kubectl".into())
            })
        );
        assert_eq!(parameter("$K").map(|p| p.name), Some("K".into()));
        assert_eq!(parameter("x$K"), None);
    }
}
