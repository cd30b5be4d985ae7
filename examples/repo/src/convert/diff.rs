//! Line edits and the unified diff that shows them (`diff -u` format, three
//! lines of context), so a reviewer can read or `git apply` what
//! `--rewrite` would do.

use std::collections::BTreeMap;

/// Lines of context around a change.
const CONTEXT: usize = 3;

/// Applies `edits` (one-based line to new text, `None` deletes) to `text`.
pub fn apply(text: &str, edits: &BTreeMap<usize, Option<String>>) -> String {
    let mut out = Vec::new();
    for (i, line) in text.split('\n').enumerate() {
        match edits.get(&(i + 1)) {
            Some(None) => {}
            Some(Some(new)) => out.push(new.as_str()),
            None => out.push(line),
        }
    }
    out.join("\n")
}

/// The unified diff of `edits` on `text`, with `path` on both header lines
/// (`a/` and `b/` prefixed); empty when nothing changes.
pub fn unified(path: &str, text: &str, edits: &BTreeMap<usize, Option<String>>) -> String {
    let lines: Vec<&str> = text.split('\n').collect();
    // A trailing newline leaves one empty last element that is not a line.
    let count = if text.ends_with('\n') {
        lines.len() - 1
    } else {
        lines.len()
    };
    let changed: Vec<usize> = edits
        .iter()
        .filter(|(l, new)| **l <= count && new.as_deref() != Some(lines[**l - 1]))
        .map(|(l, _)| *l)
        .collect();
    if changed.is_empty() {
        return String::new();
    }
    // Group changed lines into hunks whose contexts touch.
    let mut hunks: Vec<(usize, usize)> = Vec::new();
    for &l in &changed {
        let start = l.saturating_sub(CONTEXT).max(1);
        let end = (l + CONTEXT).min(count);
        match hunks.last_mut() {
            Some((_, e)) if start <= *e + 1 => *e = end.max(*e),
            _ => hunks.push((start, end)),
        }
    }
    let mut out = format!("--- a/{path}\n+++ b/{path}\n");
    let mut offset: isize = 0;
    for (start, end) in hunks {
        let mut body = String::new();
        let (mut old_n, mut new_n) = (0usize, 0usize);
        for l in start..=end {
            let old = lines[l - 1];
            match edits.get(&l) {
                Some(None) => {
                    body.push_str(&format!("-{old}\n"));
                    old_n += 1;
                }
                Some(Some(new)) if new != old => {
                    // A replacement may be several lines (text inserted
                    // after the line it replaces): each is an added line.
                    body.push_str(&format!("-{old}\n"));
                    for added in new.split('\n') {
                        body.push_str(&format!("+{added}\n"));
                        new_n += 1;
                    }
                    old_n += 1;
                }
                _ => {
                    body.push_str(&format!(" {old}\n"));
                    old_n += 1;
                    new_n += 1;
                }
            }
        }
        let new_start = (start as isize + offset).max(if new_n == 0 { 0 } else { 1 });
        out.push_str(&format!(
            "@@ -{start},{old_n} +{new_start},{new_n} @@\n{body}"
        ));
        offset += new_n as isize - old_n as isize;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Asserts that `edits` make `applied` of `text`, shown as `diff`.
    fn edits_give(text: &str, edits: &[(usize, Option<&str>)], applied: &str, diff: &str) {
        let edits = edits
            .iter()
            .map(|(line, new)| (*line, new.map(str::to_owned)))
            .collect();
        assert_eq!(apply(text, &edits), applied);
        assert_eq!(unified("x", text, &edits), diff);
    }

    #[test]
    fn a_deleted_and_a_replaced_line_make_one_hunk_with_context() {
        edits_give(
            "a\nb\nc\nd\ne\nf\n",
            &[(2, None), (4, Some("D"))],
            "a\nc\nD\ne\nf\n",
            "--- a/x\n+++ b/x\n@@ -1,6 +1,5 @@\n a\n-b\n c\n-d\n+D\n e\n f\n",
        );
    }

    #[test]
    fn a_replacement_of_several_lines_adds_each_of_them() {
        edits_give(
            "a\nb\n",
            &[(1, Some("a\nA"))],
            "a\nA\nb\n",
            "--- a/x\n+++ b/x\n@@ -1,2 +1,3 @@\n-a\n+a\n+A\n b\n",
        );
    }

    #[test]
    fn an_edit_that_changes_nothing_makes_no_diff() {
        let edits = BTreeMap::from([(1, Some("a".to_owned()))]);
        assert_eq!(unified("x", "a\n", &edits), "");
    }
}
