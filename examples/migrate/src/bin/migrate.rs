//! `migrate`: manifest generation, lint, planning, running and inspecting
//! slug-identified cluster migrations. See the README for every subcommand,
//! the JSON documents and the exit codes.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use migrate::exit;
use migrate::git::{GitError, Repo};
use migrate::lint::{Level, LintConfig, lint_tree};
use migrate::render::{configmap_json, configmap_yaml};
use migrate::report::{ErrorView, Format, ManifestView, PlanView, StatusView};
use migrate::runner::{self, RunConfig, RunError, StdConsole};
use migrate::scaffold::{ScaffoldError, scaffold};
use migrate::shell::shellcheck;
use migrate::spec::LedgerSpec;
use migration_core::generate::{ReleaseHistory, generate};
use migration_core::header::OnError;
use migration_core::verify::verify;
use migration_core::version::Version;
use migration_core::{
    Clock, LedgerEntry, LoadOptions, MigrateError, MigrationsTree, Migrator, PlanContext,
    PlanRequest, Slug, SystemClock, Tier, TierSelection, TreeError,
};
use serde::Serialize;

#[derive(Debug, Parser)]
#[command(
    name = "migrate",
    version,
    about = "Slug-identified cluster migrations with an applied-set ledger"
)]
struct Cli {
    /// Output format: aligned text for people, or one stable JSON document.
    #[arg(long, global = true, value_enum, default_value = "text")]
    output: Format,
    #[command(subcommand)]
    command: Command,
}

/// Which tier(s) to cover.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum TierArg {
    /// The blocking tier.
    PreApply,
    /// The background tier.
    Background,
    /// Both tiers.
    All,
}

impl From<TierArg> for TierSelection {
    fn from(t: TierArg) -> Self {
        match t {
            TierArg::PreApply => TierSelection::One(Tier::PreApply),
            TierArg::Background => TierSelection::One(Tier::Background),
            TierArg::All => TierSelection::All,
        }
    }
}

/// What `seed-fresh --render` produces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum RenderKind {
    /// A ConfigMap manifest (YAML in text mode, an object in JSON mode).
    Configmap,
}

/// Exactly one tier.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum OneTier {
    /// The blocking tier.
    PreApply,
    /// The background tier.
    Background,
}

impl From<OneTier> for Tier {
    fn from(t: OneTier) -> Self {
        match t {
            OneTier::PreApply => Tier::PreApply,
            OneTier::Background => Tier::Background,
        }
    }
}

/// The level of shellcheck's findings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum ShellcheckLevel {
    /// Its findings fail lint.
    Error,
    /// Reported, not failing.
    Warning,
    /// Do not run shellcheck.
    Off,
}

/// A failure policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum OnErrorArg {
    /// Stop the upgrade.
    Abort,
    /// Record failed and continue.
    Warn,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Print the plan the engine would carry out, writing nothing.
    Plan {
        /// The migrations tree (with a generated order.d/).
        tree: PathBuf,
        /// The ledger: file:PATH or memory:.
        #[arg(long, env = "MIGRATE_LEDGER")]
        ledger: LedgerSpec,
        /// The tier(s) to plan.
        #[arg(long, value_enum, default_value = "all")]
        tier: TierArg,
        /// Plan a manual re-run of exactly this slug.
        #[arg(long, env = "ONLY")]
        only: Option<Slug>,
    },
    /// Generate the manifest (order.d/) from the release tags of HEAD's line.
    Manifest {
        /// The git repository.
        #[arg(long, default_value = ".")]
        repo: PathBuf,
        /// The migrations tree's path inside the repository.
        #[arg(long)]
        path: String,
        /// Glob of release tags.
        #[arg(long, default_value = "v*")]
        tag_pattern: String,
        /// Write the batch files into this directory (the order.d directory
        /// itself) instead of printing them.
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Check a migrations tree: headers, slugs, dialect, fail-open patterns, tests.
    Lint {
        /// The migrations tree.
        tree: PathBuf,
        /// The one shebang every script must use (without '#!').
        #[arg(long, default_value = "/bin/sh")]
        shebang: String,
        /// Where script tests live, relative to the tree.
        #[arg(long, default_value = "tests")]
        tests_dir: PathBuf,
        /// Commands that call the cluster (repeatable; default kubectl, kube, helm, flux).
        #[arg(long = "kubectl-command")]
        kubectl_commands: Vec<String>,
        /// Name of the ledger ConfigMap scripts must not write.
        #[arg(long, default_value = "cozystack-version")]
        ledger_name: String,
        /// The level of shellcheck's findings (when shellcheck is on PATH).
        #[arg(long, value_enum, default_value = "warning")]
        shellcheck_level: ShellcheckLevel,
        /// The least severe shellcheck finding reported (shellcheck -S).
        #[arg(long, value_enum, default_value = "style")]
        shellcheck_severity: shellcheck::Severity,
    },
    /// Seed a fresh install explicitly, or render the seeded ledger as a ConfigMap.
    SeedFresh {
        /// The migrations tree (with a generated order.d/).
        tree: PathBuf,
        /// Seed this ledger (it must not exist yet).
        #[arg(long, env = "MIGRATE_LEDGER", conflicts_with = "render")]
        ledger: Option<LedgerSpec>,
        /// Print the seeded ledger as a manifest instead of writing it.
        #[arg(long, value_enum)]
        render: Option<RenderKind>,
        /// Namespace of the rendered ConfigMap.
        #[arg(long, default_value = "cozy-system")]
        namespace: String,
        /// Name of the rendered ConfigMap.
        #[arg(long, default_value = "cozystack-version")]
        name: String,
    },
    /// Assert that nothing was skipped: every manifest slug has a terminal entry.
    Verify {
        /// The migrations tree (with a generated order.d/).
        tree: PathBuf,
        /// The ledger.
        #[arg(long, env = "MIGRATE_LEDGER")]
        ledger: LedgerSpec,
        /// Additionally require 'ok' for every slug first shipped after this release tag.
        #[arg(long)]
        since: Option<String>,
    },
    /// Scaffold a new migration script and its test stub.
    New {
        /// The migrations tree.
        tree: PathBuf,
        /// The new slug.
        slug: Slug,
        /// Its tier.
        #[arg(long, value_enum, default_value = "pre-apply")]
        tier: OneTier,
        /// Its failure policy.
        #[arg(long, value_enum, default_value = "abort")]
        on_error: OnErrorArg,
        /// Where script tests live, relative to the tree.
        #[arg(long, default_value = "tests")]
        tests_dir: PathBuf,
    },
    /// Run the pending migrations of one tier (the hook runner).
    Run {
        /// The migrations tree (with a generated order.d/).
        tree: PathBuf,
        /// The ledger.
        #[arg(long, env = "MIGRATE_LEDGER")]
        ledger: LedgerSpec,
        /// The tier to run.
        #[arg(long, value_enum, default_value = "pre-apply")]
        tier: OneTier,
        /// Re-run exactly this slug, even if recorded.
        #[arg(long, env = "ONLY")]
        only: Option<Slug>,
        /// The image reference the scripts run from (recorded in entries).
        #[arg(long, env = "MIGRATION_IMAGE")]
        image: Option<String>,
        /// Namespace passed to scripts as MIGRATION_NAMESPACE.
        #[arg(long, env = "MIGRATION_NAMESPACE", default_value = "cozy-system")]
        namespace: String,
        /// Per-script timeout in seconds.
        #[arg(long, default_value_t = 900)]
        timeout: u64,
        /// Seconds between SIGTERM and SIGKILL when stopping a script.
        #[arg(long, default_value_t = 10)]
        grace: u64,
        /// Seconds to wait for another runner's lock.
        #[arg(long, default_value_t = 300)]
        lock_wait: u64,
        /// Lifetime of the run lock in seconds (renewed every third).
        #[arg(long, default_value_t = 60)]
        lock_ttl: u64,
        /// Lock holder identity (default: $POD_NAME or host name, plus the pid).
        #[arg(long)]
        holder: Option<String>,
        /// Allowed shebang (repeatable; default /bin/sh and /bin/bash).
        #[arg(long = "allow-interpreter")]
        allow_interpreters: Vec<String>,
        /// A cluster command to run through the tripwire's shim, besides
        /// kubectl, helm, flux, the tree's cluster-commands file and
        /// MIGRATE_CLUSTER_COMMANDS (repeatable).
        #[arg(long = "cluster-command")]
        cluster_commands: Vec<String>,
    },
    /// Render the index ConfigMap the background operator reads.
    Index {
        /// The migrations tree (with a generated order.d/).
        tree: PathBuf,
        /// The image reference the migrations run from (digest-pinned).
        #[arg(long)]
        image: String,
        /// The tree's path inside the image.
        #[arg(long, default_value = "/migrations")]
        tree_path: String,
        /// Namespace of the ConfigMap.
        #[arg(long, default_value = "cozy-system")]
        namespace: String,
        /// Name of the ConfigMap.
        #[arg(long, default_value = "cozystack-migrations-index")]
        name: String,
    },
    /// Print the MigrationLedger CRD manifest (for `kubectl apply -f -`).
    Crd,
    /// Print the ledger: failures first, then every entry.
    Status {
        /// The ledger: file:PATH or memory:.
        #[arg(long, env = "MIGRATE_LEDGER")]
        ledger: LedgerSpec,
    },
}

/// A failed command: its exit code and what to tell the user.
struct Failure {
    code: u8,
    kind: &'static str,
    problems: Vec<String>,
}

impl Failure {
    fn new(code: u8, kind: &'static str, problems: Vec<String>) -> Self {
        Failure {
            code,
            kind,
            problems,
        }
    }

    /// A failure whose details were already printed as the command's output.
    fn quiet(code: u8) -> Self {
        Failure {
            code,
            kind: "",
            problems: Vec::new(),
        }
    }
}

impl From<TreeError> for Failure {
    fn from(e: TreeError) -> Self {
        match e {
            TreeError::Invalid { root, problems } => Failure::new(
                exit::BAD_INPUT,
                "bad-input",
                problems
                    .iter()
                    .map(|p| format!("{}: {p}", root.display()))
                    .collect(),
            ),
            TreeError::Io { .. } => Failure::new(exit::BAD_INPUT, "bad-input", vec![e.to_string()]),
            other => Failure::new(exit::BAD_INPUT, "bad-input", vec![other.to_string()]),
        }
    }
}

impl From<GitError> for Failure {
    fn from(e: GitError) -> Self {
        let code = match e {
            GitError::Spawn { .. } => exit::ENVIRONMENT,
            _ => exit::BAD_INPUT,
        };
        Failure::new(
            code,
            if code == exit::ENVIRONMENT {
                "environment"
            } else {
                "bad-input"
            },
            vec![e.to_string()],
        )
    }
}

impl From<MigrateError> for Failure {
    fn from(e: MigrateError) -> Self {
        match e {
            MigrateError::Refused(plan) => Failure::new(
                exit::REFUSED,
                "refused",
                plan.problems.iter().map(ToString::to_string).collect(),
            ),
            other => Failure::new(exit::ENVIRONMENT, "environment", vec![other.to_string()]),
        }
    }
}

impl From<migration_core::LedgerError> for Failure {
    fn from(e: migration_core::LedgerError) -> Self {
        Failure::new(exit::ENVIRONMENT, "environment", vec![e.to_string()])
    }
}

async fn open(
    spec: &LedgerSpec,
) -> Result<std::sync::Arc<dyn migration_core::LockedLedger>, Failure> {
    spec.open()
        .await
        .map_err(|e| Failure::new(exit::ENVIRONMENT, "environment", vec![e]))
}

/// The cluster commands: kubectl, helm, flux, plus the tree's
/// `cluster-commands` file (when `tree` is given), `MIGRATE_CLUSTER_COMMANDS`
/// and the flags. A bad name is a usage error.
fn cluster_command_settings(
    tree: Option<&std::path::Path>,
    flags: &[String],
) -> Result<Vec<String>, Failure> {
    use migrate::tripwire::config;
    let env = std::env::var(config::ENV_COMMANDS).ok();
    config::resolve(tree, env.as_deref(), flags)
        .map_err(|problems| Failure::new(exit::BAD_INPUT, "bad-input", problems))
}

/// `$POD_NAME` (set by the Job's downward API) or the host name, plus the pid.
fn default_holder() -> String {
    let host = std::env::var("POD_NAME")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .or_else(|| {
            std::fs::read_to_string("/etc/hostname")
                .ok()
                .map(|h| h.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown-host".into());
    format!("{host}/pid-{}", std::process::id())
}

/// Turns SIGTERM and SIGINT into the runner's interrupt flag.
fn spawn_signal_forwarder(tx: tokio::sync::watch::Sender<bool>) -> Result<(), Failure> {
    use tokio::signal::unix::{SignalKind, signal};
    let fail = |e: std::io::Error| {
        Failure::new(
            exit::ENVIRONMENT,
            "environment",
            vec![format!("cannot handle signals: {e}")],
        )
    };
    let mut term = signal(SignalKind::terminate()).map_err(fail)?;
    let mut int = signal(SignalKind::interrupt()).map_err(fail)?;
    tokio::spawn(async move {
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
        let _ = tx.send(true);
    });
    Ok(())
}

/// Maps a run error to its exit code, printing the partial report in JSON mode.
fn run_failure(e: RunError, out: &Out) -> Failure {
    let (code, kind) = match &e {
        RunError::Refused(_) | RunError::Unsafe { .. } | RunError::NoRoom(_) => {
            (exit::REFUSED, "refused")
        }
        RunError::MigrationFailed { .. } | RunError::Interrupted { .. } => {
            (exit::MIGRATION_FAILED, "migration-failed")
        }
        _ => (exit::ENVIRONMENT, "environment"),
    };
    let problems = match &e {
        RunError::Refused(plan) => plan.problems.iter().map(ToString::to_string).collect(),
        other => vec![other.to_string()],
    };
    if let (
        RunError::MigrationFailed { report, .. } | RunError::Interrupted { report, .. },
        Format::Json,
    ) = (&e, out.format)
    {
        let doc = serde_json::json!({"error": kind, "exit_code": code, "problems": problems, "report": report});
        out.emit(&doc, |_| String::new());
        return Failure::quiet(code);
    }
    Failure::new(code, kind, problems)
}

struct Out {
    format: Format,
    colour: bool,
}

impl Out {
    fn emit(&self, document: &impl Serialize, text: impl FnOnce(bool) -> String) {
        match self.format {
            Format::Json => match serde_json::to_string_pretty(document) {
                Ok(json) => println!("{json}"),
                Err(e) => eprintln!("migrate: cannot encode output: {e}"),
            },
            Format::Text => print!("{}", text(self.colour)),
        }
    }

    fn fail(&self, failure: &Failure) {
        if failure.kind.is_empty() {
            return;
        }
        match self.format {
            Format::Json => {
                let view = ErrorView {
                    error: failure.kind,
                    exit_code: failure.code,
                    problems: failure.problems.clone(),
                };
                self.emit(&view, |_| String::new());
            }
            Format::Text => {
                for p in &failure.problems {
                    eprintln!("migrate: {p}");
                }
            }
        }
    }
}

async fn run(cli: Cli, out: &Out) -> Result<(), Failure> {
    let clock = SystemClock;
    match cli.command {
        Command::Plan {
            tree,
            ledger,
            tier,
            only,
        } => {
            let tree = MigrationsTree::load(&tree)?;
            let ledger = open(&ledger).await?;
            let migrator = Migrator::new(&tree, ledger.as_ref(), &clock);
            let request = PlanRequest {
                tiers: tier.into(),
                only,
            };
            let plan = migrator.plan(&request).await?;
            let view = PlanView::new(&plan, &ledger.describe());
            // What `run` would refuse: the same pre-run scan of the pending
            // scripts (and the helpers they source).
            let lint = LintConfig::default();
            let unsafe_findings: Vec<_> = plan
                .pending
                .iter()
                .flat_map(|p| runner::scan(&tree, p, &lint))
                .collect();
            if unsafe_findings.is_empty() {
                out.emit(&view, |c| view.text(c));
            } else {
                let refusal = RunError::Unsafe {
                    findings: unsafe_findings,
                };
                let problems = vec![refusal.to_string()];
                let doc = serde_json::json!({
                    "error": "refused",
                    "exit_code": exit::REFUSED,
                    "problems": problems,
                    "plan": view,
                });
                out.emit(&doc, |c| {
                    format!("{}run would refuse this plan: {refusal}\n", view.text(c))
                });
                return Err(Failure::quiet(exit::REFUSED));
            }
        }
        Command::Manifest {
            repo,
            path,
            tag_pattern,
            out: dir,
        } => {
            let options = LoadOptions {
                read_manifest: false,
                ..LoadOptions::default()
            };
            let tree = MigrationsTree::load_with(&repo.join(&path), options)?;
            let disk = ReleaseHistory::disk_from_tree(&tree);
            let legacy = ReleaseHistory::legacy_from_pairs(tree.legacy_map());
            let history = Repo::new(&repo).history(&path, &tag_pattern, disk, legacy)?;
            let manifest = generate(&history).map_err(|e| {
                Failure::new(
                    exit::BAD_INPUT,
                    "bad-input",
                    e.problems.iter().map(ToString::to_string).collect(),
                )
            })?;
            if let Some(dir) = &dir {
                manifest.write_dir(dir).map_err(|e| {
                    Failure::new(
                        exit::ENVIRONMENT,
                        "environment",
                        vec![format!("writing {}: {e}", dir.display())],
                    )
                })?;
            }
            let view = ManifestView::new(&manifest, dir.map(|d| d.display().to_string()));
            out.emit(&view, |_| view.text(&manifest));
        }
        Command::Lint {
            tree,
            shebang,
            tests_dir,
            kubectl_commands,
            ledger_name,
            shellcheck_level,
            shellcheck_severity,
        } => {
            let mut config = LintConfig {
                shebang,
                tests_dir,
                ledger_name,
                shellcheck: shellcheck::Settings {
                    level: match shellcheck_level {
                        ShellcheckLevel::Error => Some(Level::Error),
                        ShellcheckLevel::Warning => Some(Level::Warning),
                        ShellcheckLevel::Off => None,
                    },
                    severity: shellcheck_severity,
                },
                ..LintConfig::default()
            };
            if !kubectl_commands.is_empty() {
                config.kubectl_commands = kubectl_commands;
            }
            // The tripwire's cluster commands (MIGRATE_CLUSTER_COMMANDS; lint
            // reads the tree's cluster-commands file itself) are cluster
            // commands for lint too.
            for name in cluster_command_settings(None, &[])? {
                if !config.kubectl_commands.contains(&name) {
                    config.kubectl_commands.push(name);
                }
            }
            let report = lint_tree(&tree, &config)?;
            let findings = &report.findings;
            let errors = findings.iter().filter(|f| f.level == Level::Error).count();
            let view = serde_json::json!({
                "findings": findings,
                "errors": errors,
                "warnings": findings.len() - errors,
                "waived": report.waived,
                "shellcheck": report.shellcheck,
            });
            out.emit(&view, |_| {
                let mut text = String::new();
                for w in &report.waived {
                    let at = w.line.map(|l| format!(":{l}")).unwrap_or_default();
                    text.push_str(&format!(
                        "{}{at}: waived[{}] {} (waiver at line {}: {})\n",
                        w.file, w.rule, w.message, w.waiver_line, w.reason
                    ));
                }
                for f in findings {
                    let at = f.line.map(|l| format!(":{l}")).unwrap_or_default();
                    let level = match f.level {
                        Level::Error => "error",
                        Level::Warning => "warning",
                    };
                    text.push_str(&format!(
                        "{}{at}: {level}[{}] {}\n",
                        f.file, f.rule, f.message
                    ));
                }
                let sc = &report.shellcheck;
                if let (true, false, Some(note)) = (sc.enabled, sc.ran, &sc.note) {
                    text.push_str(&format!("note: {note}\n"));
                }
                text.push_str(&format!(
                    "{errors} error(s), {} warning(s), {} waived\n",
                    findings.len() - errors,
                    report.waived.len()
                ));
                text
            });
            if errors > 0 {
                return Err(Failure::quiet(exit::BAD_INPUT));
            }
        }
        Command::SeedFresh {
            tree,
            ledger,
            render,
            namespace,
            name,
        } => {
            let tree = MigrationsTree::load(&tree)?;
            let context = PlanContext::at(clock.now().truncated());
            let plan =
                migration_core::plan(&tree, None, &PlanRequest::tier(Tier::PreApply), &context)
                    .map_err(MigrateError::from)?;
            let entries: Vec<(Slug, LedgerEntry)> = plan
                .seed
                .iter()
                .map(|e| (e.slug.clone(), e.entry.clone()))
                .collect();
            match (ledger, render) {
                (Some(spec), None) => {
                    let ledger = open(&spec).await?;
                    if ledger.read().await?.is_some() {
                        return Err(Failure::new(
                            exit::REFUSED,
                            "refused",
                            vec![format!(
                                "{}: the ledger already exists; fresh-install seeding is only for a new cluster and never overwrites",
                                ledger.describe()
                            )],
                        ));
                    }
                    ledger.create(&entries).await?;
                    let view =
                        serde_json::json!({"ledger": ledger.describe(), "seeded": entries.len()});
                    out.emit(&view, |_| {
                        format!(
                            "{}: created with {} skipped-fresh-install entries\n",
                            ledger.describe(),
                            entries.len()
                        )
                    });
                }
                (None, Some(RenderKind::Configmap)) => {
                    let json = configmap_json(&namespace, &name, &entries);
                    out.emit(&json, |_| configmap_yaml(&namespace, &name, &entries));
                }
                _ => {
                    return Err(Failure::new(
                        exit::BAD_INPUT,
                        "bad-input",
                        vec![
                            "seed-fresh needs exactly one of --ledger SPEC or --render configmap"
                                .into(),
                        ],
                    ));
                }
            }
        }
        Command::Verify {
            tree,
            ledger,
            since,
        } => {
            let tree = MigrationsTree::load(&tree)?;
            let Some(manifest) = tree.manifest() else {
                return Err(Failure::new(
                    exit::BAD_INPUT,
                    "bad-input",
                    vec![format!("{}: no order.d/ manifest", tree.root().display())],
                ));
            };
            let since = match since {
                Some(tag) => Some(Version::parse(&tag).ok_or_else(|| {
                    Failure::new(
                        exit::BAD_INPUT,
                        "bad-input",
                        vec![format!("--since {tag:?} is not a release version")],
                    )
                })?),
                None => None,
            };
            let ledger = open(&ledger).await?;
            let snapshot = ledger.read().await?;
            let result = verify(&tree, manifest, snapshot.as_ref(), since.as_ref());
            let problems: Vec<String> = result.problems.iter().map(ToString::to_string).collect();
            let view = serde_json::json!({
                "ledger": ledger.describe(),
                "checked": result.checked,
                "ok": problems.is_empty(),
                "problems": problems,
            });
            out.emit(&view, |_| {
                if problems.is_empty() {
                    format!(
                        "verified {} migration(s): every one has a terminal entry\n",
                        result.checked
                    )
                } else {
                    problems
                        .iter()
                        .map(|p| format!("NOT VERIFIED: {p}\n"))
                        .collect()
                }
            });
            if !problems.is_empty() {
                return Err(Failure::quiet(exit::VERIFY_FAILED));
            }
        }
        Command::New {
            tree,
            slug,
            tier,
            on_error,
            tests_dir,
        } => {
            let on_error = match on_error {
                OnErrorArg::Abort => OnError::Abort,
                OnErrorArg::Warn => OnError::Warn,
            };
            let made = scaffold(&tree, &slug, tier.into(), on_error, &tests_dir).map_err(|e| {
                let code = if matches!(e, ScaffoldError::Io { .. }) {
                    exit::ENVIRONMENT
                } else {
                    exit::BAD_INPUT
                };
                Failure::new(code, "bad-input", vec![e.to_string()])
            })?;
            out.emit(&made, |_| {
                format!(
                    "created {}\ncreated {}\n",
                    made.script.display(),
                    made.test.display()
                )
            });
        }
        Command::Run {
            tree,
            ledger,
            tier,
            only,
            image,
            namespace,
            timeout,
            grace,
            lock_wait,
            lock_ttl,
            holder,
            allow_interpreters,
            cluster_commands,
        } => {
            let tree = MigrationsTree::load(&tree)?;
            let ledger = open(&ledger).await?;
            let mut config = RunConfig::new(tier.into(), holder.unwrap_or_else(default_holder));
            config.only = only;
            config.image = image;
            config.namespace = namespace;
            config.timeout = Duration::from_secs(timeout);
            config.grace = Duration::from_secs(grace);
            config.lock_wait = Duration::from_secs(lock_wait);
            config.lock_ttl = Duration::from_secs(lock_ttl.max(1));
            if !allow_interpreters.is_empty() {
                config.allowed_interpreters = allow_interpreters;
            }
            let cluster_commands = cluster_command_settings(Some(tree.root()), &cluster_commands)?;
            for name in &cluster_commands {
                if !config.lint.kubectl_commands.contains(name) {
                    config.lint.kubectl_commands.push(name.clone());
                }
            }
            config.tripwire.commands = cluster_commands;
            let console = StdConsole {
                stderr_only: out.format == Format::Json,
            };
            let (tx, rx) = tokio::sync::watch::channel(false);
            spawn_signal_forwarder(tx)?;
            match runner::run(&tree, ledger.as_ref(), &clock, &config, &console, rx).await {
                Ok(report) => out.emit(&report, |_| String::new()),
                Err(e) => return Err(run_failure(e, out)),
            }
        }
        Command::Index {
            tree,
            image,
            tree_path,
            namespace,
            name,
        } => {
            let tree = MigrationsTree::load(&tree)?;
            let Some(index) = migrate::index::Index::from_tree(&tree, &image, &tree_path) else {
                return Err(Failure::new(
                    exit::BAD_INPUT,
                    "bad-input",
                    vec![format!("{}: no order.d/ manifest", tree.root().display())],
                ));
            };
            let cm = migrate::index::index_configmap(&index, &namespace, &name);
            let data = index.to_data();
            out.emit(&cm, |_| {
                migrate::render::configmap_yaml_data(&namespace, &name, &data)
            });
        }
        Command::Crd => {
            let yaml = ledger_crd::crd_manifest();
            let json = serde_json::to_value(ledger_crd::crd()).unwrap_or_default();
            out.emit(&json, |_| yaml.clone());
        }
        Command::Status { ledger } => {
            let ledger = open(&ledger).await?;
            let snapshot = ledger.read().await?;
            let view = StatusView::new(snapshot.as_ref(), &ledger.describe());
            out.emit(&view, |c| view.text(c));
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    // Invoked as a cluster command or as migrate-tolerate (the runner's
    // symlinks): be that, and nothing else.
    if let Some(status) = migrate::tripwire::dispatch() {
        return ExitCode::from(u8::try_from(status).unwrap_or(1));
    }
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("MIGRATE_LOG")
                .unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
    let out = Out {
        format: cli.output,
        colour: std::io::stdout().is_terminal(),
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("migrate: cannot start the async runtime: {e}");
            return ExitCode::from(exit::ENVIRONMENT);
        }
    };
    match runtime.block_on(run(cli, &out)) {
        Ok(()) => ExitCode::from(exit::SUCCESS),
        Err(failure) => {
            out.fail(&failure);
            ExitCode::from(failure.code)
        }
    }
}
