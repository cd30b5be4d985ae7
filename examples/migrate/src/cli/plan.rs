//! `migrate plan`: the plan the engine would carry out, writing nothing,
//! refused (exit 3) when `run` would refuse it.

use std::path::Path;
use std::sync::Arc;

use migrate_lint::LintConfig;
use migration_core::drive::UnsafeFinding;
use migration_core::{
    LedgerError, LedgerSnapshot, LockedLedger, MigrationsTree, Migrator, Plan, PlanRequest,
    SystemClock, TreeError,
};
use tokio::task::JoinError;

use super::args::{ClusterArgs, PlanArgs};
use super::{Failure, Out, open};
use crate::report::PlanView;
use migrate_repo::git::PlacedScript;
use migrate_shared::LedgerSpec;
use migrate_shared::exit;
use migration_core::drive::RunError;

/// Plans against the ledger and prints the plan, with the pre-run scan
/// that covers the cluster commands `run` would resolve from the tree, its
/// settings and the environment. Reads the ledger, takes no lock, writes
/// nothing, executes nothing.
pub async fn plan(args: PlanArgs, out: &Out) -> Result<(), Failure> {
    check_ledger_flags(args.require_existing_ledger, args.fresh_install)?;
    // The tree's migrate.toml, refused before the ledger is opened.
    let settings = super::settings::read(&args.tree)?;
    let (tree, opened) = load_and_read(&args.tree, &args.ledger, &args.cluster).await?;
    // As `run` does: before the ledger's own failures.
    super::manifest_of(&tree)?;
    super::suggest::check_only(&tree, args.only.as_ref())?;
    let (ledger, read) = opened?;
    let snapshot = read?;
    // The interpreters `run` would be given: a tree of the image's shell
    // is planned, not refused for the defaults.
    let migrator = Migrator::new(&tree, ledger.as_ref(), &SystemClock)
        .with_require_existing_ledger(args.require_existing_ledger)
        .with_allowed_interpreters(args.interpreters.allowed());
    let request = PlanRequest {
        tiers: args.tier.into(),
        only: args.only,
    };
    let plan = migrator.plan_snapshot(snapshot.as_ref(), &request)?;
    // Refused as `run` would be: no room for the first script's largest
    // record (`run`'s failure message keeps the default limit).
    let limit = migration_core::run::DEFAULT_MESSAGE_LIMIT_BYTES;
    migrator
        .check_room_before_first(&plan, snapshot.as_ref(), limit)
        .map_err(|e| {
            let refusal = RunError::NoRoom(e);
            let (code, kind) = exit::of_run(&refusal);
            Failure::new(code, kind, vec![refusal.to_string()])
        })?;
    // What `run` would refuse: the same pre-run scan of the pending
    // scripts (and the helpers they source), with the tree's settings.
    // Plain `plan` resolves the cluster commands as a `run` without flags
    // would: the scan it shows is the one that run applies.
    let mut lint = super::settings::lint_config(&settings, None, Vec::new());
    let flags = run_cluster_commands(&settings, &[]);
    for name in super::cluster_commands::settings(Some(tree.root()), &flags)? {
        if !lint.kubectl_commands.contains(&name) {
            lint.kubectl_commands.push(name);
        }
    }
    let findings = migrate_runner::scan_all(&tree, &plan.pending, &lint)
        .iter()
        .map(migrate_runner::unsafe_finding)
        .collect();
    let shown = Shown {
        tree: &tree,
        ledger: ledger.as_ref(),
        snapshot: snapshot.as_ref(),
        lint: &lint,
        fresh_install: args.fresh_install,
        wide: args.wide || out.format == crate::report::Format::Wide,
    };
    let result = show(&shown, &plan, findings, out);
    leave_to_exit((tree, snapshot, ledger));
    result
}

/// What [`show`] presents a plan with.
pub(crate) struct Shown<'a> {
    /// The loaded tree.
    pub(crate) tree: &'a MigrationsTree,
    /// The ledger planned on.
    pub(crate) ledger: &'a dyn LockedLedger,
    /// What reading it gave.
    pub(crate) snapshot: Option<&'a LedgerSnapshot>,
    /// The scan's settings (for the findings a baseline accepts).
    pub(crate) lint: &'a LintConfig,
    /// `--fresh-install` was given.
    pub(crate) fresh_install: bool,
    /// `--wide`.
    pub(crate) wide: bool,
}

/// Prints `plan` and the warnings about it; refused (exit 3) with the plan
/// shown when the pre-run scan found something (`findings`): `run` would
/// refuse it. `migrate plan` and `migrate run --dry-run` (core's dry run)
/// both show their plan here.
pub(crate) fn show(
    shown: &Shown<'_>,
    plan: &Plan,
    findings: Vec<UnsafeFinding>,
    out: &Out,
) -> Result<(), Failure> {
    let Shown {
        tree,
        ledger,
        snapshot,
        lint,
        fresh_install,
        wide,
    } = *shown;
    let mut view = PlanView::new(plan, &ledger.describe());
    if plan.fresh_install {
        let run_needs_flag = !fresh_install;
        eprintln!(
            "migrate: {}",
            crate::report::fresh_install_notice(&ledger.describe(), run_needs_flag)
        );
        if run_needs_flag {
            view.warnings
                .push(crate::report::run_needs_fresh_install(&ledger.describe()));
        }
    }
    if let Some(snapshot) = snapshot {
        view.note_attempts(&snapshot.attempts_started);
        view.note_failures(&snapshot.failures);
    }
    // Findings the reviewed baseline accepts in frozen scripts are shown,
    // never silent (ADOPTING.md, "Frozen scripts").
    let pending_files = plan.pending.iter().map(|p| p.relative_path.as_path());
    for b in migrate_lint::baselined_pending(tree.root(), pending_files, lint) {
        view.warnings.push(format!(
            "{}:{} [{}] accepted by {}:{}: {}",
            b.finding.file,
            b.finding.line.unwrap_or_default(),
            b.finding.rule,
            migrate_lint::shell::baseline::FILE,
            b.baseline_line,
            b.finding.reason
        ));
    }
    view.warnings
        .extend(shipped_edit_warnings(tree, &plan.pending));
    if findings.is_empty() {
        out.emit(&view, |c| view.text(c, wide));
        return Ok(());
    }
    let refusal = RunError::Unsafe { findings };
    let problems = vec![refusal.to_string()];
    let doc = serde_json::json!({
        "error": "refused",
        "exit_code": exit::REFUSED,
        "problems": problems,
        "plan": view,
    });
    out.emit(&doc, |c| {
        format!(
            "{}run would refuse this plan: {refusal}\n",
            view.text(c, wide)
        )
    });
    Err(Failure::quiet(exit::REFUSED))
}

/// With the tree in a git repository, a warning for each pending script
/// that differs from what the release tag named by its batch shipped
/// (`NNNNN-<tag>`: the first tag of the line that shipped it, CONTRACT.md
/// §4.1): the run would execute content no release shipped under that
/// slug, and the next release's manifest will refuse it (§4.5). Only that
/// tag's copy of each pending script is read, so the check costs one git
/// process, not the release history. Legacy and untagged batches name no
/// tag, and without a repository (a tree in an image) nothing records what
/// a tag shipped: `order.d/` names slugs, not contents, and the ledger
/// holds checksums only of what ran here (`checksum_mismatches`); those are
/// not checked.
fn shipped_edit_warnings(
    tree: &MigrationsTree,
    pending: &[migration_core::plan::PendingMigration],
) -> Vec<String> {
    let placed: Vec<PlacedScript> = pending
        .iter()
        .filter_map(|p| {
            let (number, tag) = p.batch.split_once('-')?;
            let tagged = number != "00000" && number != "99999";
            tagged.then(|| PlacedScript {
                slug: p.slug.clone(),
                file: p.relative_path.clone(),
                tag: tag.to_owned(),
                on_disk: p.sha256,
            })
        })
        .collect();
    if placed.is_empty() {
        return Vec::new();
    }
    let Some((repo, path)) = migrate_repo::git::locate(tree.root()) else {
        return Vec::new();
    };
    match repo.edits_since_placed(&path, &placed) {
        Ok(edits) => edits
            .into_iter()
            .map(|edit| {
                format!(
                    "{}: {edit}; this run would execute bytes no release shipped under that slug",
                    edit.file.display()
                )
            })
            .collect(),
        Err(e) => vec![format!(
            "cannot compare the pending scripts with what their release tags shipped: {e}"
        )],
    }
}

/// Refuses `--fresh-install` beside `--require-existing-ledger` (either from
/// the environment too) as bad input: one says a missing ledger is a new
/// cluster, the other that it is a mistake, and neither may silently win.
pub(super) fn check_ledger_flags(
    require_existing: bool,
    fresh_install: bool,
) -> Result<(), Failure> {
    if require_existing && fresh_install {
        return Err(Failure::bad_input(vec![
            "--fresh-install (MIGRATE_FRESH_INSTALL) and --require-existing-ledger \
             (MIGRATE_REQUIRE_EXISTING_LEDGER) contradict each other: pass --fresh-install \
             only for a new cluster, whose ledger does not exist yet"
                .to_owned(),
        ]));
    }
    Ok(())
}

/// The cluster commands `run` shims besides its defaults: the tree's
/// migrate.toml cluster-commands, then the `--cluster-command` flags (the
/// set is a union: a setting never takes the tripwire off a command).
pub(super) fn run_cluster_commands(
    settings: &migration_core::Settings,
    flags: &[String],
) -> Vec<String> {
    let mut all: Vec<String> = settings.cluster_commands.clone().unwrap_or_default();
    all.extend(flags.iter().cloned());
    all
}

/// Leaves `values` to the end of the process instead of freeing them: the
/// command ends once it has printed, and freeing a large tree and ledger
/// one allocation at a time (hundreds of thousands at 10^5 scripts) costs
/// a few percent of a plan's time and gives nothing back.
pub(super) fn leave_to_exit<T>(values: T) {
    std::mem::forget(values);
}

/// The ledger as opened (a bad spec or an unreachable backend fails here),
/// with what reading it once gave.
pub(super) type Opened = Result<
    (
        Arc<dyn LockedLedger>,
        Result<Option<LedgerSnapshot>, LedgerError>,
    ),
    Failure,
>;

/// A file ledger smaller than this (about 250 records) is read in less time
/// than starting a thread to read the tree beside it costs, so the two are
/// read one after the other.
const OVERLAP_MIN_FILE_BYTES: u64 = 64 * 1024;

/// Whether reading the ledger takes long enough to read the tree on a
/// thread of its own meanwhile: a cluster's always (a round trip), a file's
/// when it is large (or cannot be looked at: its reading then says why).
fn worth_overlapping(spec: &LedgerSpec) -> bool {
    match spec {
        LedgerSpec::File(path) => {
            std::fs::metadata(path).map_or(true, |m| m.len() >= OVERLAP_MIN_FILE_BYTES)
        }
        LedgerSpec::Memory => false,
        LedgerSpec::ConfigMap { .. } | LedgerSpec::Crd { .. } => true,
    }
}

/// The tree, and the ledger opened and read once, without the run lock.
/// When the ledger's read is long ([`worth_overlapping`]), the tree is read
/// on a blocking thread while the ledger is read here: neither needs the
/// other, and each is about half of a large plan's time. A tree error comes
/// first, as if the tree had been read first (and at once, without waiting
/// for a slow ledger); the ledger's results are left to the caller, which
/// may have its own to report first.
pub(super) async fn load_and_read(
    tree: &Path,
    spec: &LedgerSpec,
    cluster: &ClusterArgs,
) -> Result<(MigrationsTree, Opened), Failure> {
    let reading = async {
        let ledger = open(spec, cluster).await?;
        let read = ledger.read().await;
        Ok((ledger, read))
    };
    if !worth_overlapping(spec) {
        let tree = MigrationsTree::load(tree)?;
        return Ok((tree, reading.await));
    }
    let dir = tree.to_path_buf();
    let loading = tokio::task::spawn_blocking(move || MigrationsTree::load(&dir));
    tokio::pin!(loading, reading);
    let joined = |loaded: Result<Result<MigrationsTree, TreeError>, JoinError>| match loaded {
        Ok(tree) => tree.map_err(Failure::from),
        Err(e) => std::panic::resume_unwind(e.into_panic()),
    };
    let (tree, read) = tokio::select! {
        loaded = &mut loading => {
            let tree = joined(loaded)?;
            (tree, reading.await)
        }
        read = &mut reading => (joined(loading.await)?, read),
    };
    Ok((tree, read))
}
