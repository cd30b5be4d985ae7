//! `migrate run`: the hook runner's entry point. Loads the tree while it opens
//! and reads the ledger, forwards SIGTERM and SIGINT, and hands over to
//! core's run ([`Driver`]) executing through [`migrate_runner`]'s processes.

use std::time::Duration;

use migration_core::{Slug, SystemClock, Tier};

use super::args::{ClusterArgs, RunArgs};
use super::{Failure, Out};
use migrate_runner::{PreRunScan, Processes, ScriptSettings};
use migrate_shared::{LedgerSpec, exit};
use migration_core::drive::{Driver, RunError, RunSettings};

use crate::report::StdConsole;

/// Runs the pending migrations of one tier and prints the run report.
pub async fn run(args: RunArgs, out: &Out) -> Result<(), Failure> {
    let clock = SystemClock;
    let RunArgs {
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
        interpreters,
        cluster_commands,
        require_existing_ledger,
        fresh_install,
        dry_run,
        cluster,
    } = args;
    super::plan::check_ledger_flags(require_existing_ledger, fresh_install)?;
    refuse_missing_ledger_dir(&ledger, fresh_install)?;
    let status_of = |slug: &Slug| status_command(&ledger, &cluster, slug);
    // The scripts' cluster is the ledger's: refused before anything opens.
    let script_cluster = super::kube_context::for_scripts(&cluster)?;
    // The tree's migrate.toml, refused before the ledger is opened.
    let settings = super::settings::read(&tree)?;
    // The ledger is read while the tree loads, without the lock: a run
    // that has nothing to do ends on that read, and any other run takes
    // the lock and plans on what it reads then (`Driver::run_after_read`).
    let (tree, opened) = super::plan::load_and_read(&tree, &ledger, &cluster).await?;
    // Refused before the ledger's own failures, and before anything is
    // written: taking the run lock would leave a lock file (or a ledger
    // object) behind for a run that never started.
    super::manifest_of(&tree)?;
    super::suggest::check_only(&tree, only.as_ref())?;
    let (ledger, read) = opened?;
    let mut config = RunSettings::new(tier.into(), holder.unwrap_or_else(default_holder));
    config.only = only;
    config.image = image;
    config.lock_wait = Duration::from_secs(lock_wait);
    config.lock_ttl = Duration::from_secs(lock_ttl.max(1));
    // A missing ledger refuses unless this is said to be a new cluster
    // (CONTRACT.md §6.1): a mistyped spec looks exactly like one.
    config.require_existing_ledger = !fresh_install;
    config.allowed_interpreters = interpreters.allowed();
    let mut scripts = ScriptSettings {
        namespace,
        timeout: Duration::from_secs(timeout),
        grace: Duration::from_secs(grace),
        // The pre-run scan with the tree's settings (ledger name, cluster
        // commands), as lint reads them.
        lint: super::settings::lint_config(&settings, None, Vec::new()),
        ..ScriptSettings::default()
    };
    let cluster_commands = super::plan::run_cluster_commands(&settings, &cluster_commands);
    let cluster_commands = super::cluster_commands::settings(Some(tree.root()), &cluster_commands)?;
    for name in &cluster_commands {
        if !scripts.lint.kubectl_commands.contains(name) {
            scripts.lint.kubectl_commands.push(name.clone());
        }
    }
    scripts.tripwire.commands = cluster_commands;
    if let Some(chosen) = &script_cluster {
        scripts.tripwire.env = chosen.env();
    }
    let console = StdConsole {
        stderr_only: out.format.is_document(),
    };
    let scan = PreRunScan::new(&scripts.lint);
    let driver = Driver {
        tree: &tree,
        ledger: ledger.as_ref(),
        clock: &clock,
        settings: &config,
        console: &console,
        scan: &scan,
    };
    if dry_run {
        // A dry run never executes a script: one that ignored a dry-run
        // switch would change the cluster with nothing recorded, and one
        // that honoured it would exit 0 without having done its work
        // (CONTRACT.md §7.8). It is the run without the lock and the
        // executor (core's dry run): the plan `run` would carry out, and
        // what its pre-run scan would refuse.
        let dry = driver
            .dry_run(&read)
            .await
            .map_err(|e| run_failure(e, out, &status_of))?;
        let shown = super::plan::Shown {
            tree: &tree,
            ledger: ledger.as_ref(),
            snapshot: read.as_ref().ok().and_then(Option::as_ref),
            lint: &scripts.lint,
            fresh_install,
            wide: false,
        };
        let result = super::plan::show(&shown, &dry.plan, dry.findings, out);
        super::plan::leave_to_exit((tree, read, ledger));
        return result;
    }
    let (tx, rx) = tokio::sync::watch::channel(false);
    spawn_signal_forwarder(tx)?;
    let mut processes = Processes::new(&tree, &scripts, &console, rx);
    let result = driver.run_after_read(&read, &mut processes).await;
    match result {
        Ok(report) => {
            if report.fresh_install {
                eprintln!(
                    "migrate: {}",
                    crate::report::fresh_install_notice(&ledger.describe(), false)
                );
            }
            out.emit(&report, |_| String::new());
            if !report.fresh_install && config.only.is_none() && config.tier == Tier::PreApply {
                let snapshot = read.as_ref().ok().and_then(Option::as_ref);
                if let Some(line) = background_waiting(&tree, ledger.as_ref(), snapshot, &clock) {
                    eprintln!("migrate: {line}");
                }
            }
        }
        Err(e) => return Err(run_failure(e, out, &status_of)),
    }
    super::plan::leave_to_exit((tree, read, ledger));
    Ok(())
}

/// A fresh install into a `file:` ledger whose directory does not exist:
/// refused before anything opens, so no directory is made for a mistyped
/// path (the ledger's directory is the operator's to make; the ledger file
/// is the run's).
fn refuse_missing_ledger_dir(
    ledger: &migrate_shared::LedgerSpec,
    fresh_install: bool,
) -> Result<(), Failure> {
    let migrate_shared::LedgerSpec::File(path) = ledger else {
        return Ok(());
    };
    match path.parent().filter(|p| !p.as_os_str().is_empty()) {
        Some(dir) if fresh_install && !dir.is_dir() => Err(Failure::bad_input(vec![format!(
            "--ledger {ledger}: the directory {} does not exist; create it first (a fresh install creates the ledger file, not its directory)",
            dir.display()
        )])),
        _ => Ok(()),
    }
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
        // A second signal means "now": the script being stopped gets
        // SIGKILL without waiting out its grace period.
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
        crate::report::sink::stderr_line(
            "migrate: second interrupt: killing the running migration now",
        );
        migrate_runner::escalate();
    });
    Ok(())
}

/// What a pre-apply run leaves to the background tier, said after the run
/// so that its "0 pending in tier pre-apply" is not read as "nothing left to
/// do": the count, the first slugs, and what runs them.
fn background_waiting(
    tree: &migration_core::MigrationsTree,
    ledger: &dyn migration_core::Ledger,
    snapshot: Option<&migration_core::LedgerSnapshot>,
    clock: &dyn migration_core::Clock,
) -> Option<String> {
    let plan = migration_core::Migrator::new(tree, ledger, clock)
        .plan_snapshot(
            snapshot,
            &migration_core::PlanRequest::tier(Tier::Background),
        )
        .ok()?;
    let n = plan.pending.len();
    if n == 0 || plan.fresh_install {
        return None;
    }
    let first: Vec<&str> = plan
        .pending
        .iter()
        .take(3)
        .map(|p| p.slug.as_str())
        .collect();
    Some(format!(
        "{n} background migration(s) pending ({}{}): the background tier runs them, through the operator or `migrate run --tier background`",
        first.join(", "),
        if n > first.len() { ", ..." } else { "" }
    ))
}

/// The `migrate status` command that shows `slug`'s entry, runnable as
/// printed: the run's own ledger and cluster flags, each word quoted for a
/// POSIX shell where it needs it.
fn status_command(ledger: &LedgerSpec, cluster: &ClusterArgs, slug: &Slug) -> String {
    let mut words = vec![
        "migrate".to_owned(),
        "status".to_owned(),
        "--ledger".to_owned(),
        ledger.to_string(),
    ];
    if let Some(kubeconfig) = &cluster.kubeconfig {
        words.extend(["--kubeconfig".to_owned(), kubeconfig.display().to_string()]);
    }
    if let Some(context) = &cluster.context {
        words.extend(["--context".to_owned(), context.clone()]);
    }
    words.push(slug.to_string());
    migration_core::shell::line(&words)
}

/// Maps a run error to its exit code, printing the partial report in JSON
/// mode; a failed migration's problems end with the command that shows its
/// entry (`status_of`).
fn run_failure(e: RunError, out: &Out, status_of: &dyn Fn(&Slug) -> String) -> Failure {
    let (code, kind) = exit::of_run(&e);
    let problems = match &e {
        RunError::Refused(plan) => plan.problems.iter().map(ToString::to_string).collect(),
        RunError::MigrationFailed { slug, .. } => vec![
            e.to_string(),
            format!("its entry and output: {}", status_of(slug)),
        ],
        other => vec![other.to_string()],
    };
    if let RunError::MigrationFailed { report, .. } | RunError::Interrupted { report, .. } = &e
        && out.format.is_document()
    {
        let doc = serde_json::json!({"error": kind, "exit_code": code, "problems": problems, "report": report});
        out.emit(&doc, |_| String::new());
        return Failure::quiet(code);
    }
    Failure::new(code, kind, problems)
}
