//! Linting a tree, a script, or the pending scripts of a run.
//!
//! Structural rules come from the tree loader (the same checks the engine
//! applies before running). Shell rules come from [`crate::shell`]: a real
//! parser and a walk that follows every cluster command's exit status, into
//! the `lib/` helpers a script sources. shellcheck runs too when installed.
//! Every finding names the file, the line, a stable rule id and what to do;
//! inline waivers (`# migrate: allow RULE: reason`) accept one finding each.

use std::path::{Path, PathBuf};

use migration_core::header::Tier;
use migration_core::{MigrationsTree, TreeError};
use serde::Serialize;

use crate::finding::{Finding, Level};
use crate::shell::{self, Dialect, SourceCache, baseline, shellcheck, waiver};

/// The ledger ConfigMap's name in the platform's deployment
/// (`migration_kube::defaults::LEDGER_NAME`, which a test of the `migrate`
/// command keeps this in step with; lint links no Kubernetes client).
pub const DEFAULT_LEDGER_NAME: &str = "cozystack-version";

/// Lint settings.
#[derive(Debug, Clone)]
pub struct LintConfig {
    /// The one shebang every script must use (without `#!`).
    pub shebang: String,
    /// Where script tests live, relative to the tree root.
    pub tests_dir: PathBuf,
    /// Commands that talk to the cluster (`kubectl`, `helm`, `flux` and
    /// wrappers of them). `$NAME` in upper case (`$KUBECTL`) counts too.
    pub kubectl_commands: Vec<String>,
    /// Name of the ledger ConfigMap scripts must never write.
    pub ledger_name: String,
    /// What to do with shellcheck.
    pub shellcheck: shellcheck::Settings,
}

impl Default for LintConfig {
    fn default() -> Self {
        LintConfig {
            shebang: "/bin/sh".into(),
            tests_dir: PathBuf::from("tests"),
            kubectl_commands: vec![
                "kubectl".into(),
                "kube".into(),
                "helm".into(),
                "flux".into(),
            ],
            ledger_name: DEFAULT_LEDGER_NAME.into(),
            shellcheck: shellcheck::Settings::default(),
        }
    }
}

impl LintConfig {
    fn shell(&self) -> shell::Config {
        shell::Config {
            cluster_commands: self.kubectl_commands.clone(),
            ledger_name: self.ledger_name.clone(),
        }
    }
}

/// The rule ids of the tree loader and of lint itself; the shell rules are
/// in [`shell::rules::RULES`], shellcheck's are `shellcheck:SCnnnn`.
pub const RULES: [&str; 22] = [
    "layout",
    "slug",
    "header",
    "tier",
    "duplicate-slug",
    "requires",
    "symlink",
    "size",
    "list-file",
    "settings",
    "manifest",
    "stale-manifest",
    "revoked-unknown",
    "shell-dialect",
    "missing-test",
    "orphan-test",
    "waiver-rule",
    "waiver-reason",
    "waiver-unused",
    "baseline-entry",
    "baseline-stale",
    "baseline-unused",
];

/// Rules whose findings make `run` refuse a pending script.
pub const BLOCKING_RULES: &[&str] = shell::BLOCKING;

/// Whether `id` names a rule (for waivers).
pub fn is_rule(id: &str) -> bool {
    RULES.contains(&id)
        || shell::rules::find(id).is_some()
        || id
            .strip_prefix("shellcheck:SC")
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// Everything `migrate lint` reports.
#[derive(Debug, Clone, Serialize)]
pub struct LintReport {
    /// Findings standing after waivers.
    pub findings: Vec<Finding>,
    /// Findings accepted by a waiver, with its reason.
    pub waived: Vec<waiver::Waived>,
    /// Findings accepted by the tree's reviewed baseline (frozen scripts),
    /// with the entry's reason.
    pub baselined: Vec<baseline::Baselined>,
    /// Whether shellcheck ran.
    pub shellcheck: shellcheck::Status,
}

/// Lints the tree at `root`: the findings standing after waivers. I/O
/// failures (the tree cannot be read at all) are returned as the error;
/// everything else is a finding.
pub fn lint(root: &Path, config: &LintConfig) -> Result<Vec<Finding>, TreeError> {
    Ok(lint_tree(root, config)?.findings)
}

/// Lints the tree at `root`: tier scripts (following what they source),
/// every shell file under `lib/`, tests present, shellcheck, waivers.
pub fn lint_tree(root: &Path, config: &LintConfig) -> Result<LintReport, TreeError> {
    let mut findings = Vec::new();
    match MigrationsTree::load(root) {
        Ok(tree) => findings.extend(stale_manifest(&tree)),
        Err(TreeError::Invalid { problems, .. }) => {
            for p in &problems {
                let (file, line) = p.location();
                let file = file.map(|f| f.display().to_string()).unwrap_or_default();
                let mut message = without_location(&p.to_string(), &file, line);
                if p.rule() == "slug"
                    && let Some(name) = Path::new(&file).file_name().and_then(|n| n.to_str())
                    && let Some(slug) = suggested_slug(name)
                {
                    message.push_str(&format!("; rename it to '{slug}'"));
                }
                findings.push(Finding {
                    file,
                    line,
                    rule: p.rule(),
                    level: Level::Error,
                    message,
                });
            }
        }
        Err(other) => return Err(other),
    }
    // The tree's cluster-commands file (the tripwire's, see
    // crate::cluster_commands): its names are cluster commands here too.
    let (tree_commands, list_findings) = crate::cluster_commands::tree_file(root);
    findings.extend(list_findings);
    let mut config = config.clone();
    for name in tree_commands {
        if !config.kubectl_commands.contains(&name) {
            config.kubectl_commands.push(name);
        }
    }
    let config = &config;
    let shell_config = config.shell();
    let tree_dialect = Dialect::of_shebang(&config.shebang);
    let mut cache = SourceCache::new(Some(root));
    let mut raw = Vec::new();
    let mut shell_files: Vec<(String, Dialect)> = Vec::new();
    let mut script_names: Vec<String> = Vec::new();
    for tier in Tier::ALL {
        for (name, _) in files_in(&root.join(tier.as_str())) {
            script_names.push(name.clone());
            let relative = format!("{}/{name}", tier.as_str());
            // Oversized files are already reported by the loader.
            let Some(bytes) = read(root, &relative) else {
                continue;
            };
            findings.extend(dialect_finding(&relative, &bytes, config));
            if let Some(dialect) = script_dialect(&bytes, tree_dialect) {
                cache.insert(&relative, &bytes);
                raw.extend(shell::check(&mut cache, &relative, &shell_config, dialect));
                shell_files.push((relative.clone(), dialect));
            }
            // A name that is no slug has its own finding (with the name
            // to use); a test named after the wrong name would only mislead.
            if migration_core::Slug::parse(&name).is_err() {
                continue;
            }
            let tests = root.join(&config.tests_dir);
            let has_test = ["", ".sh", ".bats"]
                .iter()
                .any(|ext| tests.join(format!("{name}{ext}")).is_file());
            if !has_test {
                findings.push(Finding {
                    file: relative,
                    line: None,
                    rule: "missing-test",
                    level: Level::Error,
                    message: format!(
                        "no test for this script in {}/ (expected {name}.sh); every migration ships with a test",
                        config.tests_dir.display()
                    ),
                });
            }
        }
    }
    findings.extend(orphan_tests(root, &config.tests_dir, &script_names));
    for rel in lib_shell_files(root) {
        let Some(bytes) = read(root, &rel) else {
            continue;
        };
        let dialect = script_dialect(&bytes, tree_dialect).unwrap_or(tree_dialect);
        if cache.get(&rel).is_some() {
            raw.extend(shell::check(&mut cache, &rel, &shell_config, dialect));
        }
        shell_files.push((rel, dialect));
    }
    findings.extend(shell::findings(raw));
    let (checked, status) = shellcheck::run(root, &shell_files, config.shellcheck);
    findings.extend(checked);
    let applied = waiver::apply(findings, &shell::waivers(&cache), is_rule, true);
    let (entries, mut problems) = baseline::read(root);
    let accepted = baseline::apply(applied.findings, &entries, |f| {
        read(root, f).map(|b| baseline::digest(&b))
    });
    problems.extend(accepted.problems);
    let mut findings = accepted.findings;
    findings.extend(problems.into_iter().map(|p| Finding {
        file: baseline::FILE.into(),
        line: Some(p.line),
        rule: p.rule,
        level: if p.rule == "baseline-unused" {
            Level::Warning
        } else {
            Level::Error
        },
        message: p.message,
    }));
    sort(&mut findings);
    Ok(LintReport {
        findings,
        waived: applied.waived,
        baselined: accepted.baselined,
        shellcheck: status,
    })
}

/// `message` without the `file:line: ` (or `file: `) it starts with: a
/// finding names its location once, in its own fields.
fn without_location(message: &str, file: &str, line: Option<usize>) -> String {
    let with_line = line.map(|l| format!("{file}:{l}: "));
    with_line
        .as_deref()
        .and_then(|prefix| message.strip_prefix(prefix))
        .or_else(|| message.strip_prefix(&format!("{file}: ")))
        .unwrap_or(message)
        .to_owned()
}

/// The slug a file name was probably meant to be (`Rotate_Certs.sh` ->
/// `rotate-certs`), if that is a valid slug: lower case, `_`, `.` and
/// spaces as `-`, without a shell extension.
fn suggested_slug(name: &str) -> Option<String> {
    let stem = [".sh", ".bash"]
        .iter()
        .find_map(|ext| name.strip_suffix(ext))
        .unwrap_or(name);
    let mut slug = String::new();
    for c in stem.chars().flat_map(char::to_lowercase) {
        let c = if matches!(c, '_' | '.' | ' ') { '-' } else { c };
        if !(c == '-' && (slug.is_empty() || slug.ends_with('-'))) {
            slug.push(c);
        }
    }
    let slug = slug.trim_end_matches('-').to_owned();
    (slug != name && migration_core::Slug::parse(&slug).is_ok()).then_some(slug)
}

/// A committed or stale `order.d/` that no longer matches the tree: a
/// script in no batch, a live line without its script, a retired line
/// whose script is back. `plan` would refuse each; lint finds them first.
fn stale_manifest(tree: &MigrationsTree) -> Vec<Finding> {
    let Some(manifest) = tree.manifest() else {
        return Vec::new();
    };
    let stale = |file: String, message: String| Finding {
        file,
        line: None,
        rule: "stale-manifest",
        level: Level::Error,
        message: format!("{message}; regenerate order.d/ with 'migrate manifest'"),
    };
    let mut findings = Vec::new();
    for (slug, script) in tree.scripts() {
        let file = script.relative_path().display().to_string();
        match manifest.lookup(slug) {
            None => findings.push(stale(file, format!("'{slug}' is in no batch of order.d/"))),
            Some((batch, line)) if line.retired => findings.push(stale(
                file,
                format!(
                    "order.d/{} marks '{slug}' retired but the script is on disk",
                    batch.name
                ),
            )),
            Some(_) => {}
        }
    }
    for (batch, line) in manifest.iter() {
        if !line.retired && tree.script(&line.slug).is_none() && !tree.is_revoked(&line.slug) {
            findings.push(stale(
                format!("order.d/{}", batch.name),
                format!("'{}' is listed but its script is not on disk", line.slug),
            ));
        }
    }
    // A `revoked` line naming a slug no batch lists revokes nothing (`plan`
    // refuses it): most often a typo, so the slug meant is named.
    for revoked in tree.revoked_outside(manifest) {
        let meant = migration_core::repair::nearest(
            revoked.slug.as_str(),
            manifest.iter().map(|(_, line)| line.slug.as_str()),
        )
        .map(|m| format!("; did you mean '{m}'?"))
        .unwrap_or_default();
        findings.push(Finding {
            file: "revoked".into(),
            line: Some(revoked.line),
            rule: "revoked-unknown",
            level: Level::Error,
            message: format!("'{}' is in no manifest batch{meant}", revoked.slug),
        });
    }
    findings
}

fn sort(findings: &mut Vec<Finding>) {
    findings.sort_by(|a, b| (&a.file, a.line, a.rule).cmp(&(&b.file, b.line, b.rule)));
    findings.dedup();
}

/// The tree's file `rel` through the one reader (`None`: absent or
/// refused; the loader reports a refused tree file).
fn read(root: &Path, rel: &str) -> Option<Vec<u8>> {
    crate::supplied::tree_file(root, rel).ok().flatten()
}

/// Regular files of a directory (not hidden), sorted by name.
fn files_in(dir: &Path) -> Vec<(String, PathBuf)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<(String, PathBuf)> = entries
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .filter_map(|e| e.file_name().to_str().map(|n| (n.to_owned(), e.path())))
        .filter(|(n, _)| !n.starts_with('.'))
        .collect();
    files.sort();
    files
}

/// Shell files under `lib/` (recursively): `*.sh`, `*.bash`, or a shell
/// shebang. Tree-relative, sorted.
fn lib_shell_files(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut dirs = vec![("lib".to_owned(), root.join("lib"))];
    while let Some((rel, dir)) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.filter_map(Result::ok) {
            let Some(name) = e.file_name().to_str().map(str::to_owned) else {
                continue;
            };
            let Ok(kind) = e.file_type() else {
                continue;
            };
            let child = format!("{rel}/{name}");
            if kind.is_dir() {
                dirs.push((child, e.path()));
            } else if kind.is_file() && !name.starts_with('.') {
                let by_name = name.ends_with(".sh") || name.ends_with(".bash");
                let by_shebang = read(root, &child)
                    .and_then(|b| shebang(&b))
                    .is_some_and(|s| is_shell(&s));
                if by_name || by_shebang {
                    out.push(child);
                }
            }
        }
    }
    out.sort();
    out
}

/// The shebang line without `#!`.
fn shebang(bytes: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(bytes.get(..bytes.len().min(256))?);
    text.lines()
        .next()
        .and_then(|l| l.strip_prefix("#!"))
        .map(|l| l.trim().to_owned())
}

/// Whether a shebang runs a shell (`/bin/sh`, `/usr/bin/env bash`, ...).
fn is_shell(shebang: &str) -> bool {
    let mut words = shebang.split_whitespace();
    let program = words.next().unwrap_or("");
    let program = if program.ends_with("/env") {
        words.find(|w| !w.starts_with('-')).unwrap_or("")
    } else {
        program
    };
    let base = program.rsplit('/').next().unwrap_or(program);
    // `#!/bin/busybox ash` is busybox's shell as much as `#!/bin/sh` on
    // alpine: left out, such a script was never analysed at all.
    let base = if base == "busybox" {
        words.next().unwrap_or("")
    } else {
        base
    };
    matches!(base, "sh" | "bash" | "dash" | "ash" | "ksh" | "mksh")
}

/// The dialect of a script, or `None` when it is not a shell script.
fn script_dialect(bytes: &[u8], default: Dialect) -> Option<Dialect> {
    match shebang(bytes) {
        Some(s) if is_shell(&s) => Some(Dialect::of_shebang(&s)),
        Some(_) => None,
        None => Some(default),
    }
}

fn dialect_finding(file: &str, bytes: &[u8], config: &LintConfig) -> Option<Finding> {
    let first = shebang(bytes)?;
    (first != config.shebang).then(|| Finding {
        file: file.to_owned(),
        line: Some(1),
        rule: "shell-dialect",
        level: Level::Error,
        message: format!(
            "shebang '#!{first}' differs from the tree's dialect '#!{}'",
            config.shebang
        ),
    })
}

/// Lints one script on its own (nothing sourced is followed): its dialect
/// and the shell rules, waivers applied and checked.
pub fn lint_script(file: &str, bytes: &[u8], config: &LintConfig) -> Vec<Finding> {
    let mut findings: Vec<Finding> = dialect_finding(file, bytes, config).into_iter().collect();
    let mut cache = SourceCache::new(None);
    cache.insert(file, bytes);
    if let Some(dialect) = script_dialect(bytes, Dialect::of_shebang(&config.shebang)) {
        findings.extend(shell::findings(shell::check(
            &mut cache,
            file,
            &config.shell(),
            dialect,
        )));
    }
    let mut findings = waiver::apply(findings, &shell::waivers(&cache), is_rule, true).findings;
    sort(&mut findings);
    findings
}

/// The findings of the pending scripts (tree-relative paths) that the
/// tree's reviewed `lint-baseline` accepts, for `plan` to show: a frozen
/// script runs, never silently. Nothing when the tree has no baseline.
pub fn baselined_pending<'a>(
    root: &Path,
    files: impl IntoIterator<Item = &'a Path>,
    config: &LintConfig,
) -> Vec<baseline::Baselined> {
    if !root.join(baseline::FILE).is_file() {
        return Vec::new();
    }
    let (entries, _) = baseline::read(root);
    let mut out = Vec::new();
    for path in files {
        let file = path.display().to_string();
        let Some(bytes) = read(root, &file) else {
            continue;
        };
        let mut cache = SourceCache::new(Some(root));
        cache.insert(&file, &bytes);
        let Some(dialect) = script_dialect(&bytes, Dialect::of_shebang(&config.shebang)) else {
            continue;
        };
        let findings = shell::findings(shell::check(&mut cache, &file, &config.shell(), dialect));
        let findings = waiver::apply(findings, &shell::waivers(&cache), is_rule, false).findings;
        out.extend(
            baseline::apply(findings, &entries, |f| {
                read(root, f).map(|b| baseline::digest(&b))
            })
            .baselined,
        );
    }
    out.sort_by(|a, b| {
        let (a, b) = (&a.finding, &b.finding);
        (&a.file, a.line, a.rule).cmp(&(&b.file, b.line, b.rule))
    });
    out.dedup();
    out
}

/// The pre-run scan of one pending script of the tree at `root`: the shell
/// rules over `bytes` (the bytes the plan checksummed) and the `lib/`
/// helpers it sources, waivers and the tree's reviewed baseline applied.
/// Waiver and baseline problems are lint's business, not the runner's.
pub fn lint_pending(root: &Path, file: &str, bytes: &[u8], config: &LintConfig) -> Vec<Finding> {
    let (entries, _) = baseline::read(root);
    lint_pending_with(root, file, bytes, config, &entries)
}

/// [`lint_pending`] with the tree's baseline already read
/// ([`baseline::read`]): a scan of many scripts reads it once, not once per
/// script (each read resolves the root again, a system call per path
/// component, and looks for the file).
pub fn lint_pending_with(
    root: &Path,
    file: &str,
    bytes: &[u8],
    config: &LintConfig,
    entries: &[baseline::Entry],
) -> Vec<Finding> {
    let mut cache = SourceCache::new(Some(root));
    cache.insert(file, bytes);
    let Some(dialect) = script_dialect(bytes, Dialect::of_shebang(&config.shebang)) else {
        return Vec::new();
    };
    let findings = shell::findings(shell::check(&mut cache, file, &config.shell(), dialect));
    let findings = waiver::apply(findings, &shell::waivers(&cache), is_rule, false).findings;
    // The reviewed baseline accepts findings in these exact bytes only;
    // its own problems are lint's business.
    let mut findings = baseline::apply(findings, entries, |f| {
        if f == file {
            Some(baseline::digest(bytes))
        } else {
            read(root, f).map(|b| baseline::digest(&b))
        }
    })
    .findings;
    sort(&mut findings);
    findings
}

/// A test file (`NAME.sh` or `NAME.bats` in the tests directory, other than
/// the helpers `lib.sh` sources) whose name is no script of any tier:
/// `migrate test` runs the test of each script, so this one never runs (a
/// misspelled or renamed migration), and it would pass unnoticed.
fn orphan_tests(root: &Path, tests_dir: &Path, script_names: &[String]) -> Vec<Finding> {
    let mut findings = Vec::new();
    for (file, _) in files_in(&root.join(tests_dir)) {
        let Some(name) = file
            .strip_suffix(".sh")
            .or_else(|| file.strip_suffix(".bats"))
        else {
            continue;
        };
        if name == "lib" || script_names.iter().any(|s| s == name) {
            continue;
        }
        let hint = migration_core::repair::nearest(name, script_names.iter().map(String::as_str))
            .map(|s| format!("; did you mean {s}.sh?"))
            .unwrap_or_default();
        findings.push(Finding {
            file: format!("{}/{file}", tests_dir.display()),
            line: None,
            rule: "orphan-test",
            level: Level::Warning,
            message: format!(
                "no migration '{name}' in any tier, so migrate test never runs this test{hint}"
            ),
        });
    }
    findings
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(text: &str) -> Vec<&'static str> {
        lint_script("pre-apply/x", text.as_bytes(), &LintConfig::default())
            .iter()
            .map(|f| f.rule)
            .collect()
    }

    const HEAD: &str = "#!/bin/sh\n# cozystack-migration: tier=pre-apply\n# cozystack-migration: on-error=abort\nset -eu\n";

    fn script(body: &str) -> String {
        format!("{HEAD}{body}\n")
    }

    #[test]
    fn a_clean_script_has_no_findings() {
        let text = script(
            "list=$(kubectl get ns -o name)\nfor ns in $list; do\n  kubectl label \"$ns\" a=b\ndone",
        );
        assert!(rules(&text).is_empty(), "{:?}", rules(&text));
    }

    #[test]
    fn shell_dialect_flags_another_shebang_only() {
        assert_eq!(
            rules(&script("").replace("#!/bin/sh", "#!/bin/bash")),
            ["shell-dialect"]
        );
        assert!(rules(&script("")).is_empty());
    }

    #[test]
    fn ledger_write_flags_patching_the_ledger_but_not_reading_or_naming_it() {
        assert_eq!(
            rules(&script(
                "kubectl -n cozy-system patch configmap cozystack-version -p '{\"data\":{\"version\":\"46\"}}'"
            )),
            ["ledger-write"]
        );
        assert!(rules(&script("v=$(kubectl -n cozy-system get configmap cozystack-version -o jsonpath='{.data.version}')")).is_empty());
        assert!(rules(&script("echo \"never patch cozystack-version by hand\"")).is_empty());
    }

    #[test]
    fn an_annotation_or_label_on_the_ledger_outside_the_engines_keys_is_ledger_annotate_not_ledger_write()
     {
        // A frozen legacy script's shape: it surfaces a partial failure as
        // an annotation of the version ConfigMap, then clears it.
        assert_eq!(
            rules(&script(
                "kubectl annotate configmap --namespace cozy-system cozystack-version \"cozystack.io/migration-46-failed-tenants=$FAILED\" --overwrite"
            )),
            ["ledger-annotate"]
        );
        assert_eq!(
            rules(&script(
                "kubectl annotate configmap -n cozy-system cozystack-version cozystack.io/migration-46-failed-tenants-"
            )),
            ["ledger-annotate"]
        );
        assert_eq!(
            rules(&script(
                "kubectl label configmap -n cozy-system cozystack-version platform.cozystack.io/no-delete=true"
            )),
            ["ledger-annotate"]
        );
        // The engine's own keys (the run lock), a key the shell computes,
        // objects chosen by a selector (whose `name=...` is no key), or no
        // key named at all stay writes of the ledger.
        assert_eq!(
            rules(&script(
                "kubectl annotate configmap -n cozy-system -l name=cozystack-version note=x"
            )),
            ["ledger-write"]
        );
        assert_eq!(
            rules(&script(
                "kubectl annotate configmap -n cozy-system cozystack-version migrations.cozystack.io/run-lock- --overwrite"
            )),
            ["ledger-write"]
        );
        assert_eq!(
            rules(&script(
                "kubectl annotate configmap -n cozy-system cozystack-version \"$KEY=x\""
            )),
            ["ledger-write"]
        );
        assert_eq!(
            rules(&script(
                "kubectl annotate -f - <<EOF\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cozystack-version\nEOF"
            )),
            ["ledger-write"]
        );
    }

    #[test]
    fn for_command_substitution_flags_both_spellings_of_a_cluster_command() {
        assert_eq!(
            rules(&script(
                "for ns in $(kubectl get ns -o name); do echo $ns; done"
            )),
            ["for-command-substitution"]
        );
        assert_eq!(
            rules(&script("for ns in `kubectl get ns`; do echo $ns; done")),
            ["for-command-substitution"]
        );
        assert!(rules(&script("for ns in a b c; do echo $ns; done")).is_empty());
        assert!(rules(&script("for i in $(seq 1 3); do echo $i; done")).is_empty());
        assert!(
            rules(&script("for ns in $list; do echo \"$(date)\"; done")).is_empty(),
            "a substitution in the body is fine"
        );
    }

    #[test]
    fn kubectl_error_ignored_flags_true_echo_and_colon() {
        for tail in ["|| true", "|| echo skipped", "|| :"] {
            assert_eq!(
                rules(&script(&format!("kubectl delete pod x {tail}"))),
                ["kubectl-error-ignored"],
                "{tail}"
            );
        }
        assert!(rules(&script("kubectl delete pod x || exit 1")).is_empty());
        assert!(
            rules(&script("grep x file || true")).is_empty(),
            "only cluster commands are flagged"
        );
        assert_eq!(
            rules(&script("\"$KUBECTL\" delete pod x || true")),
            ["kubectl-error-ignored"]
        );
    }

    #[test]
    fn kubectl_in_pipeline_is_a_warning() {
        let findings = lint_script(
            "f",
            script("kubectl get ns -o name | sed 's/x//'").as_bytes(),
            &LintConfig::default(),
        );
        assert_eq!(findings.len(), 1);
        assert_eq!(
            (findings[0].rule, findings[0].level),
            ("kubectl-in-pipeline", Level::Warning)
        );
        assert!(
            rules(&script(
                "out=$(kubectl get ns -o name)\nprintf '%s\\n' \"$out\" | sed 's/x//'"
            ))
            .is_empty()
        );
    }

    #[test]
    fn continuation_lines_are_reported_at_their_first_line() {
        let text = script("kubectl annotate x \\\n   a=b || true");
        let findings = lint_script("f", text.as_bytes(), &LintConfig::default());
        assert_eq!(findings[0].line, Some(5));
    }

    #[test]
    fn a_command_after_a_line_continuation_is_reported_at_its_own_line() {
        let text = script("kubectl get a || \\\n  kubectl get b || true");
        let findings = lint_script("f", text.as_bytes(), &LintConfig::default());
        let at: Vec<(Option<usize>, &str)> = findings.iter().map(|f| (f.line, f.rule)).collect();
        assert_eq!(
            at,
            [
                (Some(5), "cluster-command-in-condition"),
                (Some(6), "kubectl-error-ignored")
            ]
        );
    }

    #[test]
    fn comments_are_not_linted() {
        assert!(rules(&script("# for ns in $(kubectl get ns); do ... || true")).is_empty());
    }

    #[test]
    fn only_shell_shebangs_are_shell() {
        assert!(is_shell("/bin/sh") && is_shell("/usr/bin/env bash") && is_shell("/bin/bash -eu"));
        assert!(!is_shell("/usr/bin/python3") && !is_shell("/usr/bin/env python3"));
    }
}
