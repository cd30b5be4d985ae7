//! Words quoted for a POSIX shell, written once: the command a script is
//! sourced by, the commands messages tell a reader to run, and the calls a
//! report shows all quote alike (dash, busybox ash and bash read them back
//! the same).

/// `word` single-quoted, whatever it holds: each `'` closed, escaped and
/// reopened (`'\''`), nothing else changed.
pub fn quoted(word: &str) -> String {
    format!("'{}'", word.replace('\'', r"'\''"))
}

/// [`quoted`] for bytes that need not be UTF-8 (a path).
pub fn quoted_bytes(word: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(word.len() + 2);
    out.push(b'\'');
    for &b in word {
        if b == b'\'' {
            out.extend_from_slice(b"'\\''");
        } else {
            out.push(b);
        }
    }
    out.push(b'\'');
    out
}

/// `word` as it is when every character is plain (letters, digits and
/// `/:._-@%+=,…`, none of which a shell treats specially), else
/// [`quoted`]: what a reader copies into a shell, kept readable.
pub fn word(word: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "/:._-@%+=,…".contains(c);
    if !word.is_empty() && word.chars().all(plain) {
        word.to_owned()
    } else {
        quoted(word)
    }
}

/// `words` each as [`word`] gives it, joined by spaces: a command line.
pub fn line<S: AsRef<str>>(words: &[S]) -> String {
    words
        .iter()
        .map(|w| word(w.as_ref()))
        .collect::<Vec<_>>()
        .join(" ")
}
