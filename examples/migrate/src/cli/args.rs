//! The command line: every subcommand and its arguments, as clap parses
//! them. The help texts are the doc comments, so they are written for the
//! person typing `migrate --help`.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use migration_core::header::OnError;
use migration_core::{Slug, Tier, TierSelection};
use migration_kube::defaults;

use crate::report::Format;
use migrate_lint::Level;
use migrate_lint::shell::shellcheck;
use migrate_shared::LedgerSpec;

/// Parses the process's command line as [`Cli::try_parse`] does, except that
/// environment variables set to the empty string count as unset where a
/// templated Job produces them empty: `ONLY=` means no `ONLY` (an empty
/// `--only ""` flag stays a usage error).
pub fn try_parse() -> Result<Cli, clap::Error> {
    use clap::{CommandFactory, FromArgMatches};
    let mut command = Cli::command();
    for (variable, arg, subcommands) in EMPTY_MEANS_UNSET {
        if std::env::var_os(variable).is_some_and(|v| v.is_empty()) {
            for sub in subcommands {
                command = command.mut_subcommand(sub, |c| c.mut_arg(arg, |a| a.env(None)));
            }
        }
    }
    let matches = command.try_get_matches()?;
    Cli::from_arg_matches(&matches)
}

/// Environment variables a templated Job may set empty, each with the
/// argument it feeds and the subcommands that read it: empty means unset
/// (the default applies), while the same empty value given as a flag is
/// refused by the flag's own check.
const EMPTY_MEANS_UNSET: [(&str, &str, &[&str]); 3] = [
    ("ONLY", "only", &["run", "plan"]),
    ("MIGRATION_NAMESPACE", "namespace", &["run"]),
    ("MIGRATION_IMAGE", "image", &["run"]),
];

/// `--namespace` of `run`: a namespace name, as `migrate index` takes it
/// (the scripts receive it as `MIGRATION_NAMESPACE`).
fn namespace_name(value: &str) -> Result<String, String> {
    if migrate_shared::is_dns_label(value) {
        Ok(value.to_owned())
    } else {
        Err(format!(
            "{value:?} is not a namespace name (1 to 63 of a-z, 0-9 and '-', alphanumeric at both ends)"
        ))
    }
}

/// `--image` of `run`: what every entry records as the image its script
/// ran from, so not empty and without blanks or control characters (its
/// form is not checked here: `migrate index` is where a digest-pinned
/// reference is required).
fn image_reference(value: &str) -> Result<String, String> {
    if value.is_empty() || value.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!(
            "{value:?} is not an image reference (not empty, no blanks or control characters)"
        ));
    }
    Ok(value.to_owned())
}

/// `--allow-interpreter`: a shebang line without `#!`, an absolute path
/// (with its arguments, `/usr/bin/busybox ash`).
fn interpreter(value: &str) -> Result<String, String> {
    if !value.starts_with('/') || value.chars().any(char::is_control) || value.trim() != value {
        return Err(format!(
            "{value:?} is not an interpreter (an absolute path, as a shebang names it after '#!')"
        ));
    }
    Ok(value.to_owned())
}

/// The shebangs a tree's scripts may name, as `run`, `plan` and `adopt`
/// are given them: the three must agree, or a tree `run` accepts would be
/// refused by the others.
#[derive(Debug, Clone, Args)]
pub struct Interpreters {
    /// Allowed shebang (repeatable; default /bin/sh and /bin/bash), e.g.
    /// the image's shell, /usr/bin/busybox ash.
    #[arg(long = "allow-interpreter", value_parser = interpreter)]
    pub allow_interpreters: Vec<String>,
}

impl Interpreters {
    /// The interpreters given, or core's defaults when none was.
    pub fn allowed(self) -> Vec<String> {
        if self.allow_interpreters.is_empty() {
            migration_core::PlanContext::default_interpreters()
        } else {
            self.allow_interpreters
        }
    }
}

/// The whole command line.
#[derive(Debug, Parser)]
#[command(
    name = "migrate",
    version = crate::VERSION,
    about = "Slug-identified cluster migrations with an applied-set ledger"
)]
pub struct Cli {
    /// Output format: aligned text for people, or one stable JSON document.
    #[arg(long, short = 'o', global = true, value_enum, default_value = "text")]
    pub output: Format,
    /// Log verbosity, as kubectl's -v: 0 warnings (the default), 1-3
    /// info, 4-5 debug, 6 and above trace (MIGRATE_LOG overrides it).
    #[arg(short = 'v', long = "v", global = true, value_name = "LEVEL")]
    pub verbosity: Option<u8>,
    /// The subcommand.
    #[command(subcommand)]
    pub command: Command,
}

/// Which cluster the `configmap:` and `crd:` ledgers are on, spelt as
/// kubectl spells it. Only the commands that read or write a ledger take
/// them: on any other command they would be silently ignored.
#[derive(Debug, Clone, Default, Args)]
pub struct ClusterArgs {
    /// The kubeconfig file for the configmap: and crd: ledgers and, on
    /// `run`, the scripts' kubectl, helm and flux (as kubectl spells it;
    /// default $KUBECONFIG, ~/.kube/config, then in-cluster).
    #[arg(long, value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context for the configmap: and crd: ledgers and, on
    /// `run`, the scripts' kubectl, helm and flux (default: its current
    /// context; a context the kubeconfig lacks is refused).
    #[arg(long, value_name = "NAME")]
    pub context: Option<String>,
}

/// Which tier(s) to cover.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum TierArg {
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
pub enum RenderKind {
    /// A ConfigMap manifest (YAML in text mode, an object in JSON mode).
    Configmap,
}

/// Exactly one tier.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OneTier {
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
pub enum ShellcheckLevel {
    /// Its findings fail lint.
    Error,
    /// Reported, not failing.
    Warning,
    /// Do not run shellcheck.
    Off,
}

impl From<ShellcheckLevel> for Option<Level> {
    fn from(level: ShellcheckLevel) -> Self {
        match level {
            ShellcheckLevel::Error => Some(Level::Error),
            ShellcheckLevel::Warning => Some(Level::Warning),
            ShellcheckLevel::Off => None,
        }
    }
}

/// `--shellcheck-severity`: shellcheck's severities, most severe first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ShellcheckSeverity {
    /// Errors.
    Error,
    /// Warnings.
    Warning,
    /// Information.
    Info,
    /// Style suggestions.
    Style,
}

impl From<ShellcheckSeverity> for shellcheck::Severity {
    fn from(s: ShellcheckSeverity) -> Self {
        match s {
            ShellcheckSeverity::Error => shellcheck::Severity::Error,
            ShellcheckSeverity::Warning => shellcheck::Severity::Warning,
            ShellcheckSeverity::Info => shellcheck::Severity::Info,
            ShellcheckSeverity::Style => shellcheck::Severity::Style,
        }
    }
}

/// A failure policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OnErrorArg {
    /// Stop the upgrade.
    Abort,
    /// Record failed and continue.
    Warn,
}

impl From<OnErrorArg> for OnError {
    fn from(o: OnErrorArg) -> Self {
        match o {
            OnErrorArg::Abort => OnError::Abort,
            OnErrorArg::Warn => OnError::Warn,
        }
    }
}

/// The Examples sections of the subcommands' help.
mod examples {
    pub const PLAN: &str = "Settings: the tree's migrate.toml (ledger-name and cluster-commands for the pre-run scan, header-marker).\n\nExamples:\n  migrate plan migrations --ledger configmap:cozy-system/cozystack-version\n  migrate plan migrations --ledger file:/tmp/ledger.json --tier all --wide\n  migrate -o json plan migrations --ledger memory: --only my-slug\n";
    pub const MANIFEST: &str = "Settings: the tree's migrate.toml (old-paths, tree-since, tag-pattern, header-marker); a flag beats the file, the file beats the default.\n\nExamples:\n  migrate manifest --repo . --path migrations --out migrations/order.d\n  migrate manifest --repo . --path platform/migrations --path migrations --tree-since v1.4.0\n";
    pub const LINT: &str = "Settings: the tree's migrate.toml (ledger-name, cluster-commands, header-marker); a flag beats the file, the file beats the default.\n\nExamples:\n  migrate lint migrations\n  migrate lint migrations --kubectl-command oc --shellcheck-level warning\n";
    pub const SEED_FRESH: &str = "Examples:\n  migrate seed-fresh migrations --ledger configmap:cozy-system/cozystack-version\n  migrate seed-fresh migrations --render configmap --namespace cozy-system --name cozystack-version\n";
    pub const VERIFY: &str = "Examples:\n  migrate verify migrations --ledger configmap:cozy-system/cozystack-version --since v1.7.0\n";
    pub const NEW: &str = "Settings: the header is written with the tree's migrate.toml header-marker (default cozystack-migration).\n\nExamples:\n  migrate new migrations tenant-pvc-backup-label\n  migrate new migrations reindex-dashboards --tier background --on-error warn\n";
    pub const RUN: &str = "Settings: the tree's migrate.toml (ledger-name and cluster-commands for the pre-run scan, header-marker); a flag beats the file, the file beats the default.\n\nExamples:\n  migrate run /migrations --tier pre-apply --ledger configmap:cozy-system/cozystack-version --require-existing-ledger\n  migrate run migrations --ledger file:/tmp/ledger.json --dry-run\n  migrate run migrations --ledger file:/tmp/new-ledger.json --fresh-install\n  ONLY=my-slug migrate run migrations --ledger file:/tmp/ledger.json\n";
    pub const INDEX: &str =
        "Examples:\n  migrate index migrations --image ghcr.io/you/migrations@sha256:<digest>\n";
    pub const CRD: &str = "Examples:\n  migrate crd | kubectl apply -f -\n";
    pub const REPAIR: &str = "Examples:\n  migrate repair migrations redis-fix --rerun --reason 'fixed the quota; INC-42' --ledger configmap:cozy-system/cozystack-version\n  migrate repair migrations redis-fix --done --by alice --reason 'applied by hand during INC-42' --ledger file:/tmp/ledger.json\n";
    pub const STATUS: &str = "Examples:\n  migrate status --ledger configmap:cozy-system/cozystack-version\n  migrate status --ledger file:/tmp/ledger.json my-slug\n";
    pub const INIT: &str = "Examples:\n  migrate init migrations\n";
    pub const TEST: &str = "Examples:\n  migrate test migrations\n  migrate test migrations --real-cluster ./test-cluster.kubeconfig\n";
    pub const COMPLETIONS: &str =
        "Examples:\n  migrate completions bash > /etc/bash_completion.d/migrate\n";
    pub const ADOPT: &str = "Examples:\n  migrate adopt migrations --legacy-version 54 --ledger configmap:cozy-system/cozystack-version\n  migrate adopt migrations --legacy-version 54 --ledger configmap:cozy-system/cozystack-version --helm-release cozy-system/cozystack\n  helm history cozystack -n cozy-system -o json | migrate adopt migrations --legacy-version 54 --ledger file:ledger.json --helm-history -\n";
    pub const CONVERT: &str =
        "Examples:\n  migrate convert --repo . --path migrations --out converted/migrations\n";
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print the plan the engine would carry out, writing nothing.
    #[command(after_help = examples::PLAN)]
    Plan(PlanArgs),
    /// Generate the manifest (order.d/) from the release tags of HEAD's line.
    #[command(after_help = examples::MANIFEST)]
    Manifest(ManifestArgs),
    /// Check a migrations tree: headers, slugs, dialect, fail-open patterns, tests.
    #[command(after_help = examples::LINT)]
    Lint(LintArgs),
    /// Seed a fresh install explicitly, or render the seeded ledger as a ConfigMap.
    #[command(after_help = examples::SEED_FRESH)]
    SeedFresh(SeedFreshArgs),
    /// Assert that nothing was skipped: every manifest slug has a terminal entry.
    #[command(after_help = examples::VERIFY)]
    Verify(VerifyArgs),
    /// Scaffold a new migration script and its test stub.
    #[command(after_help = examples::NEW)]
    New(NewArgs),
    /// Run the pending migrations of one tier (the hook runner).
    #[command(after_help = examples::RUN)]
    Run(RunArgs),
    /// Render the index ConfigMap the background operator reads.
    #[command(after_help = examples::INDEX)]
    Index(IndexArgs),
    /// Print the MigrationLedger CRD manifest (for `kubectl apply -f -`).
    #[command(after_help = examples::CRD)]
    Crd,
    /// Print the ledger: failures first, then every entry; or one entry whole.
    #[command(after_help = examples::STATUS)]
    Status(StatusArgs),
    /// Mark one slug to run again, or as done by hand, with who and why
    /// (the entry it replaces is kept in the new one's history).
    #[command(after_help = examples::REPAIR)]
    Repair(RepairArgs),
    /// Create an empty migrations tree that new, lint and manifest accept.
    #[command(after_help = examples::INIT)]
    Init(InitArgs),
    /// Run each script's test from the tree's tests directory.
    #[command(after_help = examples::TEST)]
    Test(TestArgs),
    /// Print the shell completion script for SHELL.
    #[command(after_help = examples::COMPLETIONS)]
    Completions(CompletionsArgs),
    /// Create the ledger of an existing cluster from its numbered runner's version.
    #[command(after_help = examples::ADOPT)]
    Adopt(AdoptArgs),
    /// Convert a numbered migrations directory into the slug layout.
    #[command(after_help = examples::CONVERT)]
    Convert(super::ConvertArgs),
}

/// `migrate adopt`.
#[derive(Debug, Args)]
pub struct AdoptArgs {
    /// The cluster of a configmap: or crd: ledger.
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// The migrations tree (with a generated order.d/ and a legacy-map).
    pub tree: PathBuf,
    /// The numbered runner's integer: every legacy script below it ran.
    #[arg(long)]
    pub legacy_version: u64,
    /// For a diverged legacy slot below the version (a legacy-map line with
    /// others=): the content this cluster ran, this tree's slug or one of
    /// its others. Repeat per slot; a slot nobody settles runs this tree's
    /// content again, its entry saying why (unsafe-to-repeat: refused).
    #[arg(long = "ran", value_name = "SLUG")]
    pub ran: Vec<Slug>,
    /// The platform's Helm release history (`helm history RELEASE -o json`)
    /// as a file, `-` for stdin: with the tree's legacy-releases it answers
    /// which content of a diverged slot ran.
    #[arg(long, value_name = "FILE")]
    pub helm_history: Option<PathBuf>,
    /// The platform's Helm release, NAMESPACE/NAME: its history is read with
    /// `helm history` (with --kubeconfig and --context), as --helm-history.
    #[arg(long, value_name = "NAMESPACE/NAME")]
    pub helm_release: Option<String>,
    /// The `helm` that --helm-release runs.
    #[arg(
        long,
        env = "MIGRATE_HELM",
        default_value = "helm",
        value_name = "PATH"
    )]
    pub helm: PathBuf,
    /// Clusters ran pre-releases: a completed revision of a pre-release
    /// counts as run (without it, it answers nothing).
    #[arg(long)]
    pub count_prereleases: bool,
    /// The shebangs the scripts may name, as `run` is given them.
    #[command(flatten)]
    pub interpreters: Interpreters,
    /// The ledger to create (or to complete, when it holds only this version).
    #[arg(long, env = "MIGRATE_LEDGER")]
    pub ledger: LedgerSpec,
}

/// The help line of every `--ledger` flag.
const LEDGER_HELP: &str = "The ledger: file:PATH, memory:, configmap:NAMESPACE/NAME or crd:NAME (see --kubeconfig, --context)";

/// `migrate plan`.
#[derive(Debug, Args)]
pub struct PlanArgs {
    /// The cluster of a configmap: or crd: ledger.
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// The migrations tree (with a generated order.d/).
    pub tree: PathBuf,
    /// The ledger (its help line names every backend kind).
    #[arg(long, env = "MIGRATE_LEDGER", help = LEDGER_HELP)]
    pub ledger: LedgerSpec,
    /// The tier(s) to plan.
    #[arg(long, value_enum, default_value = "all")]
    pub tier: TierArg,
    /// Plan a manual re-run of exactly this slug.
    #[arg(long, env = "ONLY")]
    pub only: Option<Slug>,
    /// Name every seeded and skipped slug, not only their counts (as
    /// `-o wide`).
    #[arg(long, visible_alias = "verbose")]
    pub wide: bool,
    /// Refuse (exit 3) when the ledger does not exist, instead of showing
    /// the fresh install `run --fresh-install` would do. For upgrade hooks
    /// and the operator's Jobs, where the ledger was created at install.
    #[arg(long, env = "MIGRATE_REQUIRE_EXISTING_LEDGER", value_parser = clap::builder::BoolishValueParser::new())]
    pub require_existing_ledger: bool,
    /// This is a new cluster: a missing ledger is a fresh install, and
    /// `plan` does not warn that `run` needs this flag for one.
    #[arg(long, env = "MIGRATE_FRESH_INSTALL", value_parser = clap::builder::BoolishValueParser::new())]
    pub fresh_install: bool,
    /// The shebangs the scripts may name, as `run` is given them.
    #[command(flatten)]
    pub interpreters: Interpreters,
}

/// The release tags' glob when none is given.
pub const DEFAULT_TAG_PATTERN: &str = "v*";

/// `migrate manifest`.
#[derive(Debug, Args)]
pub struct ManifestArgs {
    /// The git repository.
    #[arg(long, default_value = ".")]
    pub repo: PathBuf,
    /// The migrations tree's path inside the repository (the working
    /// tree's). Repeat it with the tree's earlier paths when it moved: each
    /// tag reads the one path it has; a tag with none is an error. Without
    /// earlier paths here, the tree's migrate.toml old-paths are used.
    #[arg(long, required = true)]
    pub path: Vec<String>,
    /// Release tags that sort before this one predate the migrations tree
    /// and may lack it (they contribute nothing); without it, such a tag is
    /// an error (default: the tree's migrate.toml tree-since).
    #[arg(long)]
    pub tree_since: Option<String>,
    /// Glob of release tags (default: the tree's migrate.toml tag-pattern,
    /// else v*).
    #[arg(long)]
    pub tag_pattern: Option<String>,
    /// Write the batch files into this directory (the order.d directory
    /// itself) instead of printing them.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// The tree is new since the last release: no matching tag holds the
    /// path, so every script is untagged (without it that is an error).
    #[arg(long)]
    pub allow_new_path: bool,
}

/// `migrate lint`.
#[derive(Debug, Args)]
pub struct LintArgs {
    /// The migrations tree.
    pub tree: PathBuf,
    /// The one shebang every script must use (without '#!').
    #[arg(long, default_value = "/bin/sh")]
    pub shebang: String,
    /// Where script tests live, relative to the tree.
    #[arg(long, default_value = "tests")]
    pub tests_dir: PathBuf,
    /// Commands that call the cluster (repeatable; replaces the default:
    /// kubectl, kube, helm, flux and the tree's migrate.toml
    /// cluster-commands).
    #[arg(long = "kubectl-command")]
    pub kubectl_commands: Vec<String>,
    /// Name of the ledger ConfigMap scripts must not write (default: the
    /// tree's migrate.toml ledger-name, else cozystack-version).
    #[arg(long)]
    pub ledger_name: Option<String>,
    /// The level of shellcheck's findings (when shellcheck is on PATH).
    #[arg(long, value_enum, default_value = "warning")]
    pub shellcheck_level: ShellcheckLevel,
    /// The least severe shellcheck finding reported (shellcheck -S).
    #[arg(long, value_enum, default_value = "style")]
    pub shellcheck_severity: ShellcheckSeverity,
    /// Glob of release tags the scripts are compared with, when the tree is
    /// in a git repository (a script edited after a tag shipped it is an
    /// error). Default: the tree's migrate.toml tag-pattern, else v*.
    #[arg(long)]
    pub tag_pattern: Option<String>,
}

/// `migrate seed-fresh`.
#[derive(Debug, Args)]
pub struct SeedFreshArgs {
    /// The cluster of a configmap: or crd: ledger.
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// The migrations tree (with a generated order.d/).
    pub tree: PathBuf,
    /// Seed this ledger (it must not exist yet): file:PATH, memory:,
    /// configmap:NAMESPACE/NAME or crd:NAME.
    #[arg(long, env = "MIGRATE_LEDGER", conflicts_with = "render")]
    pub ledger: Option<LedgerSpec>,
    /// Print the seeded ledger as a manifest instead of writing it.
    #[arg(long, value_enum)]
    pub render: Option<RenderKind>,
    /// Namespace of the rendered ConfigMap.
    #[arg(long, default_value = defaults::NAMESPACE)]
    pub namespace: String,
    /// Name of the rendered ConfigMap.
    #[arg(long, default_value = defaults::LEDGER_NAME)]
    pub name: String,
    /// The time stamped on the seeded entries (RFC 3339, UTC), instead of
    /// now: a chart's rendered ledger is then reproducible at a release cut.
    #[arg(long)]
    pub at: Option<String>,
}

/// `migrate verify`.
#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// The cluster of a configmap: or crd: ledger.
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// The migrations tree (with a generated order.d/).
    pub tree: PathBuf,
    /// The ledger (its help line names every backend kind).
    #[arg(long, env = "MIGRATE_LEDGER", help = LEDGER_HELP)]
    pub ledger: LedgerSpec,
    /// Additionally require 'ok' for every slug first shipped after this
    /// release tag (a batch of the manifest or a tag of the tree's repository).
    #[arg(long)]
    pub since: Option<String>,
    /// Report a script edited after it was recorded as a warning instead
    /// of failing.
    #[arg(long)]
    pub allow_checksum_mismatch: bool,
}

/// `migrate new`.
#[derive(Debug, Args)]
pub struct NewArgs {
    /// The migrations tree.
    pub tree: PathBuf,
    /// The new slug.
    pub slug: Slug,
    /// Its tier.
    #[arg(long, value_enum, default_value = "pre-apply")]
    pub tier: OneTier,
    /// Its failure policy.
    #[arg(long, value_enum, default_value = "abort")]
    pub on_error: OnErrorArg,
    /// Where script tests live, relative to the tree.
    #[arg(long, default_value = "tests")]
    pub tests_dir: PathBuf,
}

/// The most seconds any duration flag takes: a week. Far beyond any run a
/// hook or a Job waits for, and far below what the clocks and timers the
/// engine adds a duration to can hold (a larger one overflowed them: a
/// lock expiry no later run could parse, a timeout that panicked after the
/// attempt was counted, a grace period that stopped the supervisor).
pub const MAX_DURATION_SECS: u64 = 7 * 24 * 60 * 60;

/// The parser of a duration flag in seconds: `min` to [`MAX_DURATION_SECS`].
fn seconds(min: u64) -> clap::builder::RangedU64ValueParser<u64> {
    clap::value_parser!(u64).range(min..=MAX_DURATION_SECS)
}

/// `migrate run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The cluster of a configmap: or crd: ledger.
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// The migrations tree (with a generated order.d/).
    pub tree: PathBuf,
    /// The ledger (its help line names every backend kind).
    #[arg(long, env = "MIGRATE_LEDGER", help = LEDGER_HELP)]
    pub ledger: LedgerSpec,
    /// The tier to run.
    #[arg(long, value_enum, default_value = "pre-apply")]
    pub tier: OneTier,
    /// Re-run exactly this slug, even if recorded.
    #[arg(long, env = "ONLY")]
    pub only: Option<Slug>,
    /// The image reference the scripts run from (recorded in entries; an
    /// empty MIGRATION_IMAGE is no image).
    #[arg(long, env = "MIGRATION_IMAGE", value_parser = image_reference)]
    pub image: Option<String>,
    /// Namespace passed to scripts as MIGRATION_NAMESPACE (an empty
    /// MIGRATION_NAMESPACE is the default).
    #[arg(long, env = "MIGRATION_NAMESPACE", default_value = defaults::NAMESPACE, value_parser = namespace_name)]
    pub namespace: String,
    /// Per-script timeout in seconds (1 to 604800, a week).
    #[arg(long, default_value_t = 900, value_parser = seconds(1))]
    pub timeout: u64,
    /// Seconds between SIGTERM and SIGKILL when stopping a script (at most
    /// 604800, a week).
    #[arg(long, default_value_t = 10, value_parser = seconds(0))]
    pub grace: u64,
    /// Seconds to wait for another runner's lock (at most 604800, a week).
    #[arg(long, default_value_t = 300, value_parser = seconds(0))]
    pub lock_wait: u64,
    /// Lifetime of the run lock in seconds, renewed every third (1 to
    /// 604800, a week).
    #[arg(long, default_value_t = 60, value_parser = seconds(1))]
    pub lock_ttl: u64,
    /// Lock holder identity (default: $POD_NAME or host name, plus the pid).
    #[arg(long)]
    pub holder: Option<String>,
    /// The shebangs the scripts may name.
    #[command(flatten)]
    pub interpreters: Interpreters,
    /// A cluster command to run through the tripwire's shim, besides
    /// kubectl, helm, flux, the tree's cluster-commands file and
    /// MIGRATE_CLUSTER_COMMANDS (repeatable).
    #[arg(long = "cluster-command")]
    pub cluster_commands: Vec<String>,
    /// Refuse (exit 3) when the ledger does not exist: the default, kept so
    /// that upgrade hooks and the operator's Jobs, whose ledger was created
    /// at install, can say so whatever the environment holds.
    #[arg(long, env = "MIGRATE_REQUIRE_EXISTING_LEDGER", value_parser = clap::builder::BoolishValueParser::new())]
    pub require_existing_ledger: bool,
    /// This is a new cluster: a missing ledger is a fresh install (every
    /// manifest slug recorded skipped-fresh-install, nothing run) instead
    /// of a refusal. A mistyped ledger spec looks the same, so it is never
    /// the default.
    #[arg(long, env = "MIGRATE_FRESH_INSTALL", value_parser = clap::builder::BoolishValueParser::new())]
    pub fresh_install: bool,
    /// Print what the run would do (the plan of this tier and the pre-run
    /// scan) and stop: no lock is taken, nothing is written, no script is
    /// executed. `MIGRATION_DRY_RUN` set to a true value means the same.
    #[arg(long, env = "MIGRATION_DRY_RUN", value_parser = clap::builder::FalseyValueParser::new())]
    pub dry_run: bool,
}

/// `migrate index`.
#[derive(Debug, Args)]
pub struct IndexArgs {
    /// The migrations tree (with a generated order.d/).
    pub tree: PathBuf,
    /// The image reference the migrations run from (digest-pinned:
    /// NAME@sha256:HEX).
    #[arg(long)]
    pub image: String,
    /// Accept an image reference without a digest (a tag can move).
    #[arg(long)]
    pub allow_tag: bool,
    /// The tree's path inside the image.
    #[arg(long, default_value = "/migrations")]
    pub tree_path: String,
    /// Namespace of the ConfigMap.
    #[arg(long, default_value = defaults::NAMESPACE)]
    pub namespace: String,
    /// Name of the ConfigMap.
    #[arg(long, default_value = defaults::INDEX_NAME)]
    pub name: String,
}

/// `migrate status`.
#[derive(Debug, Args)]
pub struct StatusArgs {
    /// The cluster of a configmap: or crd: ledger.
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// The ledger (its help line names every backend kind).
    #[arg(long, env = "MIGRATE_LEDGER", help = LEDGER_HELP)]
    pub ledger: LedgerSpec,
    /// Show this slug's entry whole (its failure output too).
    pub slug: Option<Slug>,
}

/// `migrate repair`.
#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("mark").required(true).args(["rerun", "done"])))]
pub struct RepairArgs {
    /// The cluster of a configmap: or crd: ledger.
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// The migrations tree (the slug must be one of its migrations).
    pub tree: PathBuf,
    /// The slug to mark.
    pub slug: Slug,
    /// The ledger (its help line names every backend kind).
    #[arg(long, env = "MIGRATE_LEDGER", help = LEDGER_HELP)]
    pub ledger: LedgerSpec,
    /// Run it again: the entry becomes not-yet, which the next run executes
    /// (a failed or given-up entry, an ok one whose effect was lost, a
    /// corrupt value).
    #[arg(long)]
    pub rerun: bool,
    /// Record it as done by hand: the entry becomes ok.
    #[arg(long)]
    pub done: bool,
    /// Why (recorded in the entry and its history).
    #[arg(long, value_name = "TEXT")]
    pub reason: String,
    /// Who (default: $USER).
    #[arg(long, value_name = "NAME")]
    pub by: Option<String>,
}

/// `migrate init`.
#[derive(Debug, Args)]
pub struct InitArgs {
    /// The directory to create (it must not exist, or be empty).
    pub dir: PathBuf,
}

/// `migrate test`.
#[derive(Debug, Args)]
pub struct TestArgs {
    /// The migrations tree.
    pub tree: PathBuf,
    /// Where script tests live, relative to the tree.
    #[arg(long, default_value = "tests")]
    pub tests_dir: PathBuf,
    /// Seconds each test may take (1 to 604800, a week).
    #[arg(long, default_value_t = 300, value_parser = seconds(1))]
    pub timeout: u64,
    /// Also run each migration that has fixtures (TESTS_DIR/SLUG.fixtures.yaml)
    /// twice against the test cluster this kubeconfig names, seeded with
    /// them: the second run must change no object. Never a production
    /// cluster: the migrations really run.
    #[arg(long, value_name = "KUBECONFIG")]
    pub real_cluster: Option<PathBuf>,
}

/// `migrate completions`.
#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lint_names_the_deployments_ledger_by_default() {
        // migrate-lint links no Kubernetes client, so it spells the name itself.
        assert_eq!(migrate_lint::DEFAULT_LEDGER_NAME, defaults::LEDGER_NAME);
    }
}
