//! The tree's settings file, `<tree>/migrate.toml` (CONTRACT.md §3.1):
//! what every call would otherwise repeat, so a platform other than the
//! reference one writes it once.
//!
//! ```toml
//! old-paths = ["platform/migrations"]   # manifest: the tree's earlier paths
//! tree-since = "v1.4.0"                 # manifest: tags before it predate the tree
//! tag-pattern = "release-*"             # manifest: the release tags' glob
//! ledger-name = "acme-version"          # lint and the pre-run scan: the ledger ConfigMap
//! cluster-commands = ["oc"]             # lint, the pre-run scan, the tripwire: more cluster commands
//! header-marker = "acme-migration"      # every tree read: '# acme-migration: tier=...'
//! ```
//!
//! Every key is optional; an absent file, and an empty one, mean the
//! defaults. A command-line flag beats the file, and the file beats the
//! default: the commands apply that, this module only reads. The file is
//! refused whole, before anything runs, for a TOML syntax error, an
//! unknown key (with the known key it is nearest to), a value of the wrong
//! type or a value a key cannot take, each naming the file, the line and
//! the key.

use std::path::{Path, PathBuf};

use toml::Spanned;
use toml::de::{DeTable, DeValue};

use crate::header::HeaderMarker;
use crate::header::near_miss::nearest;

/// The settings file's name, at the tree root beside `order.d/`.
pub const SETTINGS_FILE: &str = "migrate.toml";

/// The keys the file may set, as the flags spell them.
pub const KEYS: [&str; 6] = [
    "old-paths",
    "tree-since",
    "tag-pattern",
    "ledger-name",
    "cluster-commands",
    "header-marker",
];

/// What a tree's `migrate.toml` sets; `None` is "not set" (the flag or the
/// default applies).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Settings {
    /// `old-paths`: the tree's earlier paths inside the repository, newest
    /// first (`migrate manifest --path CURRENT --path OLD...`).
    pub old_paths: Option<Vec<String>>,
    /// `tree-since`: release tags before this one predate the tree
    /// (`migrate manifest --tree-since`).
    pub tree_since: Option<String>,
    /// `tag-pattern`: the release tags' glob (`--tag-pattern`).
    pub tag_pattern: Option<String>,
    /// `ledger-name`: the ledger ConfigMap scripts must never write
    /// (`migrate lint --ledger-name`; the pre-run scan too).
    pub ledger_name: Option<String>,
    /// `cluster-commands`: commands lint and the pre-run scan treat as
    /// cluster commands besides `kubectl`, `kube`, `helm`, `flux` (a
    /// setting never takes one off; `migrate lint --kubectl-command`
    /// replaces the whole list); the run's tripwire shims them besides its
    /// own.
    pub cluster_commands: Option<Vec<String>>,
    /// `header-marker`: the word header directives start with, instead of
    /// `cozystack-migration`.
    pub header_marker: Option<HeaderMarker>,
}

/// Why a settings file was refused: each names the file and, where there
/// is one, the line and the key.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SettingsError {
    /// The file exists but cannot be read.
    #[error("{}: cannot be read: {source}", file.display())]
    Io {
        /// The file.
        file: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// The file is refused by the one reader: not a regular file, too
    /// large, a dangling symlink or one out of the tree.
    #[error(transparent)]
    File(crate::tree::supplied::FileError),
    /// The file is not UTF-8 (TOML is).
    #[error("{}: not UTF-8 text", file.display())]
    NotUtf8 {
        /// The file.
        file: PathBuf,
    },
    /// Not TOML.
    #[error("{}:{line}: not valid TOML: {message}", file.display())]
    Syntax {
        /// The file.
        file: PathBuf,
        /// One-based line.
        line: usize,
        /// The parser's message.
        message: String,
    },
    /// A key the engine does not know.
    #[error("{}:{line}: unknown key '{key}' (known: {}){}", file.display(), KEYS.join(", "), suggestion.map(|s| format!("; did you mean '{s}'?")).unwrap_or_default())]
    UnknownKey {
        /// The file.
        file: PathBuf,
        /// One-based line.
        line: usize,
        /// The unknown key.
        key: String,
        /// The known key it is nearest to, if any.
        suggestion: Option<&'static str>,
    },
    /// A value of the wrong type.
    #[error("{}:{line}: key '{key}' must be {expected}, not {found}", file.display())]
    WrongType {
        /// The file.
        file: PathBuf,
        /// One-based line.
        line: usize,
        /// The key.
        key: &'static str,
        /// What it takes.
        expected: &'static str,
        /// What it was given (a TOML type name).
        found: &'static str,
    },
    /// A value the key cannot take.
    #[error("{}:{line}: key '{key}': {reason}", file.display())]
    InvalidValue {
        /// The file.
        file: PathBuf,
        /// One-based line.
        line: usize,
        /// The key.
        key: &'static str,
        /// Why.
        reason: String,
    },
}

impl SettingsError {
    /// The file this error is about.
    pub fn file(&self) -> &Path {
        match self {
            SettingsError::File(e) => e.path(),
            SettingsError::Io { file, .. }
            | SettingsError::NotUtf8 { file }
            | SettingsError::Syntax { file, .. }
            | SettingsError::UnknownKey { file, .. }
            | SettingsError::WrongType { file, .. }
            | SettingsError::InvalidValue { file, .. } => file,
        }
    }

    /// The one-based line, where the error is about one.
    pub fn line(&self) -> Option<usize> {
        match self {
            SettingsError::Io { .. } | SettingsError::NotUtf8 { .. } | SettingsError::File(_) => {
                None
            }
            SettingsError::Syntax { line, .. }
            | SettingsError::UnknownKey { line, .. }
            | SettingsError::WrongType { line, .. }
            | SettingsError::InvalidValue { line, .. } => Some(*line),
        }
    }
}

impl Settings {
    /// The settings of the tree at `root`: its `migrate.toml`, or the
    /// defaults when there is none. Every problem in the file is returned.
    pub fn read(root: &Path) -> Result<Settings, Vec<SettingsError>> {
        use crate::tree::supplied::{self, Within};
        let file = root.join(SETTINGS_FILE);
        // Through the one reader (a FIFO or a device is refused, not read;
        // a dangling symlink is an error), symlinks only within the tree.
        let canonical = std::fs::canonicalize(root).ok();
        let within = canonical.as_deref().map_or(Within::Anywhere, Within::Tree);
        match supplied::read_file(&file, within, supplied::MAX_FILE_BYTES) {
            Ok(None) => Ok(Settings::default()),
            Ok(Some(bytes)) => Settings::parse(&file, &bytes),
            Err(e) => Err(vec![SettingsError::File(e)]),
        }
    }

    /// Parses a settings file's bytes; `file` names it in errors. Every
    /// problem is returned, in line order.
    pub fn parse(file: &Path, bytes: &[u8]) -> Result<Settings, Vec<SettingsError>> {
        let path = || file.to_path_buf();
        let text = std::str::from_utf8(bytes)
            .map_err(|_| vec![SettingsError::NotUtf8 { file: path() }])?;
        let table = DeTable::parse(text).map_err(|e| {
            vec![SettingsError::Syntax {
                file: path(),
                line: line_of(text, e.span().map_or(0, |s| s.start)),
                message: e.message().trim().to_owned(),
            }]
        })?;
        let mut settings = Settings::default();
        let mut errors = Vec::new();
        for (key, value) in table.get_ref().iter() {
            let line = line_of(text, key.span().start);
            let found = Found {
                file,
                line,
                value,
                text,
            };
            let set = match key.get_ref().as_ref() {
                "old-paths" => found
                    .strings("old-paths", check_path)
                    .map(|v| settings.old_paths = Some(v)),
                "tree-since" => found
                    .string("tree-since", check_tag)
                    .map(|v| settings.tree_since = Some(v)),
                "tag-pattern" => found
                    .string("tag-pattern", check_tag)
                    .map(|v| settings.tag_pattern = Some(v)),
                "ledger-name" => found
                    .string("ledger-name", check_ledger_name)
                    .map(|v| settings.ledger_name = Some(v)),
                "cluster-commands" => found
                    .strings("cluster-commands", check_command)
                    .map(|v| settings.cluster_commands = Some(v)),
                "header-marker" => found
                    .string("header-marker", |v| HeaderMarker::new(v).map(drop))
                    .map(|word| settings.header_marker = HeaderMarker::new(&word).ok()),
                other => Err(SettingsError::UnknownKey {
                    file: path(),
                    line,
                    key: other.to_owned(),
                    suggestion: nearest(other, &KEYS),
                }),
            };
            if let Err(e) = set {
                errors.push(e);
            }
        }
        if errors.is_empty() {
            Ok(settings)
        } else {
            errors.sort_by_key(SettingsError::line);
            Err(errors)
        }
    }

    /// The header marker: the file's, or the default.
    pub fn header_marker(&self) -> HeaderMarker {
        self.header_marker.clone().unwrap_or_default()
    }

    /// The file's text for these settings (what `migrate convert` writes
    /// into the tree it makes): one `key = value` line per key set, in
    /// [`KEYS`] order, under a comment saying what the file is. Reading it
    /// back gives these settings.
    pub fn to_toml(&self) -> String {
        let mut out = String::from(
            "# The migrations tree's settings (examples/docs/operating.md, \"Settings file\"): a flag\n\
             # given on the command line beats this file, this file beats the default.\n",
        );
        let list = |items: &[String]| {
            let items: Vec<String> = items.iter().map(|s| quoted(s)).collect();
            format!("[{}]", items.join(", "))
        };
        if let Some(v) = &self.old_paths {
            out.push_str(&format!("old-paths = {}\n", list(v)));
        }
        if let Some(v) = &self.tree_since {
            out.push_str(&format!("tree-since = {}\n", quoted(v)));
        }
        if let Some(v) = &self.tag_pattern {
            out.push_str(&format!("tag-pattern = {}\n", quoted(v)));
        }
        if let Some(v) = &self.ledger_name {
            out.push_str(&format!("ledger-name = {}\n", quoted(v)));
        }
        if let Some(v) = &self.cluster_commands {
            out.push_str(&format!("cluster-commands = {}\n", list(v)));
        }
        if let Some(v) = &self.header_marker {
            out.push_str(&format!("header-marker = {}\n", quoted(v.word())));
        }
        out
    }
}

/// A TOML basic string holding `s` (quotes, backslashes and control
/// characters escaped).
fn quoted(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The one-based line of byte `offset` of `text`.
fn line_of(text: &str, offset: usize) -> usize {
    let offset = offset.min(text.len());
    text.as_bytes()[..offset]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

/// One key's value, with what its errors name.
struct Found<'a, 'i> {
    file: &'a Path,
    line: usize,
    value: &'a Spanned<DeValue<'i>>,
    text: &'a str,
}

impl Found<'_, '_> {
    fn wrong_type(&self, key: &'static str, expected: &'static str) -> SettingsError {
        SettingsError::WrongType {
            file: self.file.to_path_buf(),
            line: self.line,
            key,
            expected,
            found: self.value.get_ref().type_str(),
        }
    }

    fn invalid(&self, key: &'static str, line: usize, reason: String) -> SettingsError {
        SettingsError::InvalidValue {
            file: self.file.to_path_buf(),
            line,
            key,
            reason,
        }
    }

    /// A string value that `check` accepts.
    fn string(
        &self,
        key: &'static str,
        check: impl Fn(&str) -> Result<(), String>,
    ) -> Result<String, SettingsError> {
        let value = self
            .value
            .get_ref()
            .as_str()
            .ok_or_else(|| self.wrong_type(key, "a string"))?;
        check(value).map_err(|reason| self.invalid(key, self.line, reason))?;
        Ok(value.to_owned())
    }

    /// An array of strings, each accepted by `check`, none twice.
    fn strings(
        &self,
        key: &'static str,
        check: impl Fn(&str) -> Result<(), String>,
    ) -> Result<Vec<String>, SettingsError> {
        let expected = "an array of strings";
        let items = self
            .value
            .get_ref()
            .as_array()
            .ok_or_else(|| self.wrong_type(key, expected))?;
        let mut out: Vec<String> = Vec::new();
        for item in items {
            let line = line_of(self.text, item.span().start);
            let Some(value) = item.get_ref().as_str() else {
                return Err(SettingsError::WrongType {
                    file: self.file.to_path_buf(),
                    line,
                    key,
                    expected,
                    found: "an array holding a non-string",
                });
            };
            check(value).map_err(|reason| self.invalid(key, line, reason))?;
            if out.iter().any(|v| v == value) {
                return Err(self.invalid(key, line, format!("{value:?} is listed twice")));
            }
            out.push(value.to_owned());
        }
        Ok(out)
    }
}

/// A path inside the repository as `--path` takes it: relative, no `..`.
fn check_path(value: &str) -> Result<(), String> {
    let path = Path::new(value);
    let ok = !value.trim().is_empty()
        && path.is_relative()
        && path.components().all(|c| {
            matches!(
                c,
                std::path::Component::Normal(_) | std::path::Component::CurDir
            )
        });
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{value:?} is not a path inside the repository (relative, no '..')"
        ))
    }
}

/// A tag or a tag glob: non-empty, no blanks or control characters.
fn check_tag(value: &str) -> Result<(), String> {
    if value.is_empty() || value.chars().any(|c| c.is_whitespace() || c.is_control()) {
        Err(format!("{value:?} is not a tag (non-empty, no blanks)"))
    } else {
        Ok(())
    }
}

/// A ConfigMap name: a DNS subdomain (lower case, digits, `-`, `.`).
fn check_ledger_name(value: &str) -> Result<(), String> {
    let ok_chars = value
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.');
    let ends_ok = value.starts_with(|c: char| c.is_ascii_alphanumeric())
        && value.ends_with(|c: char| c.is_ascii_alphanumeric());
    if ok_chars && ends_ok && value.len() <= 253 {
        Ok(())
    } else {
        Err(format!(
            "{value:?} is not a ConfigMap name (lower case, digits, '-', '.')"
        ))
    }
}

/// The engine's own programs: never a cluster command.
pub const ENGINE_PROGRAMS: [&str; 2] = ["migrate", "migrate-tolerate"];

/// A cluster command: a plain file name a shim can stand in for, and not
/// one of the [`ENGINE_PROGRAMS`] (the same rule as the tree's
/// `cluster-commands` file).
fn check_command(value: &str) -> Result<(), String> {
    let ok_chars = value
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "._+-".contains(c));
    if value.is_empty() || !ok_chars || value.starts_with(['.', '-']) {
        Err(format!(
            "{value:?} is not a command name (letters, digits, '.', '_', '+', '-'; no path)"
        ))
    } else if ENGINE_PROGRAMS.contains(&value) {
        // A shim in its place would stand in for the engine itself: `plan`
        // and `run` would then fail blaming a flag nobody gave.
        Err(format!(
            "{value:?} is the engine's own program, not a cluster command"
        ))
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Settings, Vec<SettingsError>> {
        Settings::parse(Path::new("migrate.toml"), text.as_bytes())
    }

    fn first_error(text: &str) -> String {
        parse(text).unwrap_err()[0].to_string()
    }

    #[test]
    fn an_empty_file_is_the_defaults() {
        assert_eq!(parse("").unwrap(), Settings::default());
        assert_eq!(parse("# nothing\n\n").unwrap(), Settings::default());
        assert!(parse("").unwrap().header_marker().is_default());
    }

    #[test]
    fn every_key_is_read() {
        let s = parse(
            "old-paths = [\"platform/migrations\", \"scripts\"]\ntree-since = \"v1.4.0\"\ntag-pattern = \"release-*\"\nledger-name = \"acme-version\"\ncluster-commands = [\"oc\"]\nheader-marker = \"acme-migration\"\n",
        )
        .unwrap();
        assert_eq!(
            s.old_paths.as_deref(),
            Some(&["platform/migrations".to_owned(), "scripts".to_owned()][..])
        );
        assert_eq!(s.tree_since.as_deref(), Some("v1.4.0"));
        assert_eq!(s.tag_pattern.as_deref(), Some("release-*"));
        assert_eq!(s.ledger_name.as_deref(), Some("acme-version"));
        assert_eq!(s.cluster_commands, Some(vec!["oc".to_owned()]));
        assert_eq!(s.header_marker().directive(), "acme-migration:");
        // What convert writes reads back the same.
        assert_eq!(parse(&s.to_toml()).unwrap(), s);
    }

    #[test]
    fn an_unknown_key_names_the_line_and_the_nearest_known_one() {
        let e = first_error("tag-pattern = \"v*\"\nledger_nmae = \"x\"\n");
        assert!(
            e.starts_with("migrate.toml:2: unknown key 'ledger_nmae'"),
            "{e}"
        );
        assert!(e.contains("did you mean 'ledger-name'?"), "{e}");
    }

    #[test]
    fn a_wrong_type_names_the_key_and_the_line() {
        let e = first_error("\n\ncluster-commands = \"oc\"\n");
        assert!(
            e.starts_with("migrate.toml:3: key 'cluster-commands' must be an array of strings"),
            "{e}"
        );
        let e = first_error("ledger-name = 42\n");
        assert!(
            e.starts_with("migrate.toml:1: key 'ledger-name' must be a string, not integer"),
            "{e}"
        );
        let e = first_error("old-paths = [\n  \"a\",\n  3,\n]\n");
        assert!(e.starts_with("migrate.toml:3: key 'old-paths'"), "{e}");
    }

    #[test]
    fn bad_values_and_bad_syntax_name_the_line() {
        let e = first_error("header-marker = \"Acme Migration\"\n");
        assert!(e.starts_with("migrate.toml:1: key 'header-marker'"), "{e}");
        let e = first_error("old-paths = [\"../x\"]\n");
        assert!(e.contains("'old-paths'"), "{e}");
        let e = first_error("cluster-commands = [\"oc\", \"/usr/bin/oc\"]\n");
        assert!(e.contains("not a command name"), "{e}");
        let e = first_error("tag-pattern = \"v*\"\nledger-name = \n");
        assert!(e.starts_with("migrate.toml:2: not valid TOML"), "{e}");
    }

    #[test]
    fn a_cluster_command_naming_the_engines_own_program_is_refused_with_the_line_and_the_key() {
        for own in ENGINE_PROGRAMS {
            let e = first_error(&format!(
                "ledger-name = \"x\"\ncluster-commands = [\n  \"oc\",\n  \"{own}\",\n]\n"
            ));
            assert!(
                e.starts_with("migrate.toml:4: key 'cluster-commands': ") && e.contains(own),
                "{e}"
            );
        }
    }

    #[test]
    fn markers_are_words() {
        for bad in [
            "",
            "ab",
            "Acme",
            "acme migration",
            "acme:",
            "-acme",
            "acme-",
            "9acme",
        ] {
            assert!(HeaderMarker::new(bad).is_err(), "{bad:?}");
        }
        assert_eq!(
            HeaderMarker::new(HeaderMarker::DEFAULT_WORD).unwrap(),
            HeaderMarker::default()
        );
    }
}
