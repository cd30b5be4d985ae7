//! "Did you mean": a header comment that resembles a directive but is not
//! one would otherwise be read as a plain comment, silently dropping a
//! requirement or a policy (CONTRACT.md §3.2).

use super::HeaderMarker;

/// The keys a directive may set.
pub(super) const KNOWN_KEYS: [&str; 3] = ["tier", "on-error", "requires"];

/// Levenshtein distance in bytes (the words compared are short ASCII).
fn distance(a: &str, b: &str) -> usize {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, &ca) in a.iter().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (above + 1)
                .min(row[j] + 1)
                .min(diagonal + usize::from(ca != cb));
            diagonal = above;
        }
    }
    row[b.len()]
}

/// The candidate `word` was probably meant to be: the closest one within a
/// few edits (two, or one in five characters of a longer word, so that a
/// typo in a long slug is still caught while unrelated short words are
/// not), ties going to the alphabetically first. `None` when nothing is
/// that close, or when `word` is itself a candidate. Used for a `requires=`
/// target that names no slug (CONTRACT.md §3.3).
pub(crate) fn closest<'c>(
    word: &str,
    candidates: impl IntoIterator<Item = &'c str>,
) -> Option<&'c str> {
    let word = normal(word);
    let limit = 2.max(word.len() / 5);
    candidates
        .into_iter()
        .map(|c| (distance(&word, &normal(c)), c))
        .filter(|(d, _)| *d <= limit)
        .min()
        .filter(|(d, _)| *d > 0)
        .map(|(_, c)| c)
}

/// Lower case with `_` read as `-`: the spellings people mix up.
fn normal(word: &str) -> String {
    word.to_ascii_lowercase().replace('_', "-")
}

/// The directive a comment line of the header block was probably meant to
/// be (`# cozystack-migration: requires=x`), when its first word is within
/// two edits of the marker (case, `_` for `-`, a plural, a missing `-` or a
/// typo) and what follows looks like a directive (a `:` or a `key=value`).
/// Plain prose and other tools' comments (`# migrate: allow ...`) are not.
/// `marker` is the tree's.
pub(super) fn marker_suggestion(line: &str, marker: &HeaderMarker) -> Option<String> {
    let rest = line.trim_start().strip_prefix('#')?.trim_start();
    let end = rest
        .find(|c: char| c == ':' || c == '=' || c.is_whitespace())
        .unwrap_or(rest.len());
    let (word, after) = rest.split_at(end);
    let word = normal(word);
    let marker_word = marker.word();
    let close = distance(&word, marker_word) <= 2
        || distance(&word.replace('-', ""), &marker_word.replace('-', "")) <= 1;
    if word.len() < 8 || !close {
        return None;
    }
    let after = after.trim_start();
    let body = match after.strip_prefix(':') {
        Some(body) => body.trim(),
        None if after.contains('=') => after.trim(),
        None => return None,
    };
    Some(format!("# {marker} {}", repaired(body)))
}

/// `body` with a misspelled key replaced by the one it is closest to, and
/// `key: value` written `key=value`.
fn repaired(body: &str) -> String {
    let split = body.split_once('=').or_else(|| body.split_once(':'));
    match split {
        Some((key, value)) => {
            let key = key.trim();
            let key = key_suggestion(key).unwrap_or(key);
            format!("{key}={}", value.trim())
        }
        None => body.to_owned(),
    }
}

/// The known key an unknown one was probably meant to be.
pub(super) fn key_suggestion(key: &str) -> Option<&'static str> {
    nearest(key, &KNOWN_KEYS)
}

/// The directive a `key: value` body (a colon for the `=`) was meant to be.
pub(super) fn malformed_suggestion(body: &str, marker: &HeaderMarker) -> Option<String> {
    let (key, _) = body.split_once(':')?;
    key_suggestion(key)?;
    Some(format!("# {marker} {}", repaired(body)))
}

/// The known name a word was probably meant to be: the nearest of
/// `known` within two edits (case and `_` for `-` ignored). Shared with
/// the settings file's keys ([`crate::settings`]).
pub(crate) fn nearest<'a>(word: &str, known: &[&'a str]) -> Option<&'a str> {
    let word = normal(word.trim());
    known
        .iter()
        .map(|known| (distance(&word, known), *known))
        .filter(|(d, _)| *d <= 2)
        .min()
        .map(|(_, known)| known)
}

/// `; did you mean 'x'?` for an error message, or nothing.
pub(crate) fn did_you_mean(suggestion: &Option<String>) -> String {
    suggestion
        .as_ref()
        .map(|s| format!("; did you mean '{s}'?"))
        .unwrap_or_default()
}
