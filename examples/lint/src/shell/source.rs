//! Following `.` and `source` into the tree's `lib/`.
//!
//! The runner runs a script with the tree root as working directory and
//! `MIGRATION_TREE` set to it, so `. ./lib/x.sh`, `. lib/x.sh`,
//! `. "$MIGRATION_TREE/lib/x.sh"`, `. "$(dirname "$0")/../lib/x.sh"` and
//! `. "${0%/*}/../lib/x.sh"` all name `lib/x.sh`. Variables assigned a path
//! of that kind earlier in the script resolve too (`LIB="$(dirname "$0")/../lib"`).

use std::collections::HashMap;
use std::path::{Component, Path, PathBuf};
use std::rc::Rc;

use brush_parser::ast;

use super::parse::{self, PathPiece};
use super::waiver::{self, Waiver};

/// One file of the tree, read and parsed once.
#[derive(Debug)]
pub struct SourceFile {
    /// Path relative to the tree root, `/`-separated.
    pub rel: String,
    /// The text (lossy UTF-8).
    pub text: String,
    /// The syntax tree, or why there is none.
    pub program: Result<ast::Program, parse::ParseFailure>,
    /// Waiver comments.
    pub waivers: Vec<Waiver>,
}

impl SourceFile {
    /// Parses `bytes` as the file `rel`.
    pub fn new(rel: &str, bytes: &[u8]) -> Self {
        let text = String::from_utf8_lossy(bytes).into_owned();
        let program = parse::program(&text);
        let heredocs = program
            .as_ref()
            .map(parse::heredoc_lines)
            .unwrap_or_default();
        let waivers = waiver::parse(&text, &heredocs);
        SourceFile {
            rel: rel.to_owned(),
            text,
            program,
            waivers,
        }
    }
}

/// Files read so far, by tree-relative path.
#[derive(Debug, Default)]
pub struct SourceCache {
    root: Option<PathBuf>,
    files: HashMap<String, Rc<SourceFile>>,
}

/// Where a `.` argument leads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resolution {
    /// A file inside the tree (relative path).
    InTree(String),
    /// A path outside the tree (`/etc/os-release`): not ours to check.
    Outside,
    /// A path inside the tree that does not exist.
    Missing(String),
    /// Not determinable statically.
    Unresolved,
}

impl SourceCache {
    /// A cache for the tree at `root` (`None`: a script on its own, nothing
    /// to follow).
    pub fn new(root: Option<&Path>) -> Self {
        SourceCache {
            root: root.map(Path::to_path_buf),
            files: HashMap::new(),
        }
    }

    /// Registers a file whose bytes the caller already holds (the script
    /// being checked: the bytes the plan checksummed, not a re-read).
    pub fn insert(&mut self, rel: &str, bytes: &[u8]) -> Rc<SourceFile> {
        let file = Rc::new(SourceFile::new(rel, bytes));
        self.files.insert(rel.to_owned(), file.clone());
        file
    }

    /// The file `rel`, read from the tree on first use.
    pub fn get(&mut self, rel: &str) -> Option<Rc<SourceFile>> {
        if let Some(f) = self.files.get(rel) {
            return Some(f.clone());
        }
        let root = self.root.as_ref()?;
        // Through the one reader: a FIFO or a device in lib/ is not read.
        let bytes = crate::supplied::tree_file(root, rel).ok().flatten()?;
        Some(self.insert(rel, &bytes))
    }

    /// Every file read, by path.
    pub fn files(&self) -> impl Iterator<Item = &Rc<SourceFile>> {
        self.files.values()
    }

    /// Resolves the argument of `.`/`source` in `current` (the file the
    /// command is in) while running `script` (the tier script, `$0`).
    pub fn resolve(
        &self,
        word: &str,
        current: &str,
        script: &str,
        vars: &HashMap<String, String>,
    ) -> Resolution {
        let Some(root) = &self.root else {
            return Resolution::Unresolved;
        };
        let Some(path) = path_value(word, current, script, vars) else {
            return Resolution::Unresolved;
        };
        // Relative paths are relative to the working directory: the root.
        let joined = if let Some(stripped) = path.strip_prefix("@ROOT@") {
            stripped.trim_start_matches('/').to_owned()
        } else if path.starts_with('/') {
            return Resolution::Outside;
        } else {
            path
        };
        let Some(rel) = normalize(&joined) else {
            return Resolution::Outside;
        };
        let full = root.join(&rel);
        let inside = std::fs::canonicalize(&full)
            .ok()
            .zip(std::fs::canonicalize(root).ok())
            .is_some_and(|(f, r)| f.starts_with(r) && f.is_file());
        if inside {
            Resolution::InTree(rel)
        } else if full.exists() {
            Resolution::Outside
        } else {
            Resolution::Missing(rel)
        }
    }
}

/// What a path word is expanded in: the file the command is in, the tier
/// script running (`$0`) and the variables known at that point.
struct Scope<'a> {
    current: &'a str,
    script: &'a str,
    vars: &'a HashMap<String, String>,
}

/// Expands a path word to a root-marked string (`@ROOT@/lib/x.sh`), or a
/// relative or absolute path, or `None` when a part is unknown.
fn expand(word: &str, scope: &Scope<'_>) -> Option<String> {
    let mut out = String::new();
    for piece in parse::path_pieces(word) {
        match piece {
            PathPiece::Text(t) => out.push_str(&t),
            PathPiece::Parameter(name, op) => {
                let value = match (name.as_str(), op.as_deref()) {
                    ("MIGRATION_TREE" | "PWD", None) => "@ROOT@".to_owned(),
                    ("0", Some("%/*")) => dir_of(scope.script),
                    ("BASH_SOURCE", Some("%/*")) => dir_of(scope.current),
                    ("0", None) => format!("@ROOT@/{}", scope.script),
                    (other, None) => scope.vars.get(other)?.clone(),
                    _ => return None,
                };
                out.push_str(&value);
            }
            PathPiece::Command(c) => out.push_str(&command_path(&c, scope)?),
            PathPiece::Other => return None,
        }
    }
    Some(out)
}

/// `$(dirname "$0")`, `$(cd "$(dirname "$0")" && pwd)`, `$(pwd)`, and the
/// same with `BASH_SOURCE`.
fn command_path(text: &str, scope: &Scope<'_>) -> Option<String> {
    let t = text.trim();
    if t == "pwd" || t == "pwd -P" {
        return Some("@ROOT@".into());
    }
    // cd X && pwd: X.
    let inner = t
        .strip_prefix("cd ")
        .and_then(|rest| {
            rest.strip_suffix("&& pwd")
                .or_else(|| rest.strip_suffix("&& pwd -P"))
        })
        .map(|x| x.trim().trim_start_matches("-- ").trim());
    if let Some(x) = inner {
        return expand(x, scope);
    }
    let arg = t
        .strip_prefix("dirname ")?
        .trim()
        .trim_start_matches("-- ")
        .trim();
    let file = match arg.trim_matches('"') {
        "$0" | "${0}" => scope.script,
        "${BASH_SOURCE[0]}" | "$BASH_SOURCE" | "${BASH_SOURCE}" => scope.current,
        _ => return None,
    };
    Some(dir_of(file))
}

/// The root-marked directory of a tree-relative file.
fn dir_of(file: &str) -> String {
    let parent = Path::new(file)
        .parent()
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_default();
    format!("@ROOT@/{parent}")
}

/// Normalizes a relative path; `None` when it climbs above the root.
fn normalize(path: &str) -> Option<String> {
    let mut parts: Vec<String> = Vec::new();
    for c in Path::new(path).components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                parts.pop()?;
            }
            Component::Normal(p) => parts.push(p.to_string_lossy().into_owned()),
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    Some(parts.join("/"))
}

/// A variable assignment worth remembering for path resolution: its value
/// expanded as far as a `.` argument would be.
pub fn path_value(
    value: &str,
    current: &str,
    script: &str,
    vars: &HashMap<String, String>,
) -> Option<String> {
    let scope = Scope {
        current,
        script,
        vars,
    };
    expand(value, &scope)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("lib")).unwrap();
        std::fs::create_dir_all(dir.path().join("pre-apply")).unwrap();
        std::fs::write(dir.path().join("lib/x.sh"), "f() { :; }\n").unwrap();
        dir
    }

    #[test]
    fn every_usual_spelling_of_a_lib_path_resolves_to_the_lib_file() {
        let dir = tree();
        let cache = SourceCache::new(Some(dir.path()));
        let vars: HashMap<String, String> =
            [("LIB".to_owned(), "@ROOT@/pre-apply/../lib".to_owned())].into();
        for word in [
            "./lib/x.sh",
            "lib/x.sh",
            "\"$MIGRATION_TREE/lib/x.sh\"",
            "\"${MIGRATION_TREE}\"/lib/x.sh",
            "\"$(dirname \"$0\")/../lib/x.sh\"",
            "\"$(cd \"$(dirname \"$0\")\" && pwd)/../lib/x.sh\"",
            "\"${0%/*}/../lib/x.sh\"",
            "\"$LIB/x.sh\"",
            "\"$PWD/lib/x.sh\"",
        ] {
            assert_eq!(
                cache.resolve(word, "pre-apply/a", "pre-apply/a", &vars),
                Resolution::InTree("lib/x.sh".into()),
                "{word}"
            );
        }
    }

    #[test]
    fn paths_outside_the_tree_or_unknown_are_not_followed() {
        let dir = tree();
        let cache = SourceCache::new(Some(dir.path()));
        let vars = HashMap::new();
        assert_eq!(
            cache.resolve("/etc/os-release", "pre-apply/a", "pre-apply/a", &vars),
            Resolution::Outside
        );
        assert_eq!(
            cache.resolve("../../x", "pre-apply/a", "pre-apply/a", &vars),
            Resolution::Outside
        );
        assert_eq!(
            cache.resolve("\"$HOME/x\"", "pre-apply/a", "pre-apply/a", &vars),
            Resolution::Unresolved
        );
        assert_eq!(
            cache.resolve("lib/y.sh", "pre-apply/a", "pre-apply/a", &vars),
            Resolution::Missing("lib/y.sh".into())
        );
    }
}
