//! shellcheck, the field's own linter, run when it is installed.
//!
//! `migrate lint` looks for `shellcheck` on `PATH` and runs it once per
//! dialect over the tree's scripts and `lib/` helpers: `-s sh` or `-s bash`
//! from the shebang, `-x` with `--source-path` at the tree root (scripts run
//! there, so `. ./lib/x.sh` resolves), `-f json1`. Its findings become rule
//! `shellcheck:SCnnnn`. When it is absent, lint says so once and goes on.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock, PoisonError};

use serde::{Deserialize, Serialize};

use super::rules::Dialect;
use crate::finding::{Finding, Level};

/// shellcheck's severities, most severe first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Errors.
    Error,
    /// Warnings.
    Warning,
    /// Information.
    Info,
    /// Style suggestions.
    Style,
}

impl Severity {
    fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Info => "info",
            Severity::Style => "style",
        }
    }
}

/// What lint makes of shellcheck's findings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settings {
    /// The level its findings get; `None` does not run it.
    pub level: Option<Level>,
    /// The least severe finding reported (`-S`).
    pub severity: Severity,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            level: Some(Level::Warning),
            severity: Severity::Style,
        }
    }
}

/// Whether shellcheck ran, for lint's report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Status {
    /// It was asked for (`--shellcheck-level` is not `off`).
    pub enabled: bool,
    /// It ran over every file.
    pub ran: bool,
    /// The program, when found.
    pub path: Option<String>,
    /// Files checked.
    pub files: usize,
    /// Why it did not run, or what went wrong.
    pub note: Option<String>,
}

/// The first `shellcheck` on `PATH`.
pub fn find() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("shellcheck"))
        .find(|p| is_executable(p))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[derive(Debug, Deserialize)]
struct Report {
    comments: Vec<Comment>,
}

#[derive(Debug, Deserialize)]
struct Comment {
    file: String,
    line: usize,
    level: String,
    code: u32,
    message: String,
}

/// Rule ids are `&'static str`; shellcheck's codes are a fixed, small set,
/// so each distinct id is allocated once for the life of the process.
fn intern(id: String) -> &'static str {
    static IDS: OnceLock<Mutex<HashSet<&'static str>>> = OnceLock::new();
    let mut ids = IDS
        .get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    if let Some(found) = ids.get(id.as_str()) {
        return found;
    }
    let leaked: &'static str = Box::leak(id.into_boxed_str());
    ids.insert(leaked);
    leaked
}

/// Runs shellcheck over `files` (tree-relative path and dialect) of the
/// tree at `root`.
pub fn run(root: &Path, files: &[(String, Dialect)], settings: Settings) -> (Vec<Finding>, Status) {
    let mut status = Status {
        enabled: settings.level.is_some(),
        ran: false,
        path: None,
        files: 0,
        note: None,
    };
    let Some(level) = settings.level else {
        status.note = Some("shellcheck is off (--shellcheck-level off)".into());
        return (Vec::new(), status);
    };
    let Some(program) = find() else {
        status.note = Some(
            "shellcheck is not installed (not on PATH), so its checks were skipped; install it (Debian: apt-get install shellcheck) to run them".into(),
        );
        return (Vec::new(), status);
    };
    status.path = Some(program.display().to_string());
    let mut by_dialect: BTreeMap<&'static str, Vec<&str>> = BTreeMap::new();
    for (file, dialect) in files {
        let shell = match dialect {
            Dialect::Posix => "sh",
            Dialect::Bash => "bash",
        };
        by_dialect.entry(shell).or_default().push(file);
    }
    let root_abs = std::fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf());
    let mut findings = Vec::new();
    let mut problems = Vec::new();
    for (shell, list) in &by_dialect {
        let output = Command::new(&program)
            .current_dir(&root_abs)
            .arg("-f")
            .arg("json1")
            .arg("-s")
            .arg(shell)
            .arg("-x")
            .arg(format!("--source-path={}:SCRIPTDIR", root_abs.display()))
            .arg("-S")
            .arg(settings.severity.as_str())
            .arg("--")
            .args(list)
            .output();
        let output = match output {
            Ok(o) => o,
            Err(e) => {
                problems.push(format!("cannot run {}: {e}", program.display()));
                continue;
            }
        };
        // 0: clean, 1: findings; anything else is shellcheck failing.
        if !matches!(output.status.code(), Some(0 | 1)) {
            problems.push(format!(
                "shellcheck -s {shell} failed ({}): {}",
                output.status,
                String::from_utf8_lossy(&output.stderr).trim()
            ));
            continue;
        }
        let report: Report = match serde_json::from_slice(&output.stdout) {
            Ok(r) => r,
            Err(e) => {
                problems.push(format!(
                    "shellcheck -s {shell} printed no json1 report: {e}"
                ));
                continue;
            }
        };
        status.files += list.len();
        for c in report.comments {
            findings.push(Finding {
                file: relative(&c.file, &root_abs),
                line: Some(c.line),
                rule: intern(format!("shellcheck:SC{}", c.code)),
                level,
                message: format!("{} ({} in shellcheck)", c.message, c.level),
            });
        }
    }
    status.ran = problems.is_empty();
    if !problems.is_empty() {
        status.note = Some(problems.join("; "));
    }
    findings.sort_by(|a, b| (&a.file, a.line, a.rule).cmp(&(&b.file, b.line, b.rule)));
    findings.dedup();
    (findings, status)
}

/// shellcheck names a sourced file as it resolved it: make it tree-relative.
fn relative(file: &str, root: &Path) -> String {
    let p = Path::new(file);
    let p = p.strip_prefix(root).unwrap_or(p);
    let s = p.to_string_lossy();
    s.strip_prefix("./").unwrap_or(&s).to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interned_ids_are_shared() {
        let a = intern("shellcheck:SC2086".into());
        let b = intern("shellcheck:SC2086".into());
        assert!(std::ptr::eq(a, b));
    }

    #[test]
    fn sourced_paths_become_tree_relative() {
        assert_eq!(relative("/t/lib/x.sh", Path::new("/t")), "lib/x.sh");
        assert_eq!(relative("./lib/x.sh", Path::new("/t")), "lib/x.sh");
    }
}
