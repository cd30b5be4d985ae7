//! `migrate`: manifest generation, lint, planning, running and inspecting
//! slug-identified cluster migrations. See the README for every subcommand,
//! the JSON documents and the exit codes.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use examples::exit;
use examples::git::{GitError, Repo};
use examples::report::{ErrorView, Format, ManifestView, PlanView, StatusView};
use examples::spec::LedgerSpec;
use migration_core::generate::{ReleaseHistory, generate};
use migration_core::{
    LoadOptions, MigrateError, MigrationsTree, Migrator, PlanRequest, Slug, SystemClock, Tier,
    TierSelection, TreeError,
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
            let ledger = ledger.open();
            let migrator = Migrator::new(&tree, ledger.as_ref(), &clock);
            let request = PlanRequest {
                tiers: tier.into(),
                only,
            };
            let plan = migrator.plan(&request).await?;
            let view = PlanView::new(&plan, &ledger.describe());
            out.emit(&view, |c| view.text(c));
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
        Command::Status { ledger } => {
            let ledger = ledger.open();
            let snapshot = ledger.read().await?;
            let view = StatusView::new(snapshot.as_ref(), &ledger.describe());
            out.emit(&view, |c| view.text(c));
        }
    }
    Ok(())
}

fn main() -> ExitCode {
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
