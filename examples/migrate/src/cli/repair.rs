//! `migrate repair`: marks one slug to run again, or as done by hand, with
//! who and why, keeping what the ledger said before (core's
//! [`migration_core::repair`]); the command that replaces editing the
//! ConfigMap or `MigrationLedger` by hand.

use std::time::Duration;

use migration_core::repair::{Mark, Previous, Repair, repaired_entry};
use migration_core::{MigrationsTree, Timestamp};

use super::args::RepairArgs;
use super::{Failure, Out, open};

/// The run lock is held this long at most: a read and one write.
const LOCK_TTL: Duration = Duration::from_secs(60);

/// Reads the slug's record under the run lock, writes the repaired entry,
/// and prints it; refuses (writing nothing) a slug the tree does not have,
/// a repair without who and why, and what would lose data.
pub async fn repair(args: RepairArgs, out: &Out) -> Result<(), Failure> {
    let mark = if args.done { Mark::Done } else { Mark::Rerun };
    let tree = MigrationsTree::load(&args.tree)?;
    let Some(script) = tree.script(&args.slug) else {
        let hint = super::suggest::did_you_mean(
            args.slug.as_str(),
            tree.scripts().keys().map(|s| s.as_str()),
        );
        return Err(Failure::bad_input(vec![format!(
            "{}: no migration '{}' in the tree{hint}",
            tree.root().display(),
            args.slug
        )]));
    };
    let by = match args.by.or_else(|| std::env::var("USER").ok()) {
        Some(by) => by,
        None => {
            return Err(Failure::bad_input(vec![format!(
                "{}: say who repairs it with --by (USER is not set)",
                args.slug
            )]));
        }
    };
    let repair = Repair {
        mark,
        by,
        why: args.reason,
        at: Timestamp::now(),
        sha256: Some(script.sha256),
    };
    let ledger = open(&args.ledger, &args.cluster).await?;
    // Decided once before the lock (a refusal takes no lock and leaves no
    // lock record behind) and again under it, on what is written over.
    let decide = |snapshot: Option<migration_core::LedgerSnapshot>| {
        let snapshot = snapshot.ok_or_else(|| {
            Failure::bad_input(vec![format!(
                "{}: no ledger: nothing to repair on a cluster without one",
                ledger.describe()
            )])
        })?;
        let previous = match snapshot.record(&args.slug) {
            None => Previous::Absent,
            Some(migration_core::ledger::Record::Entry(e)) => Previous::Entry(e),
            Some(migration_core::ledger::Record::Corrupt(c)) => Previous::Corrupt(c),
        };
        repaired_entry(&args.slug, previous, &repair)
            .map_err(|e| Failure::bad_input(vec![e.to_string()]))
    };
    decide(ledger.read().await?)?;
    let holder = migration_core::lock::run_holder(&format!("migrate-repair/{}", repair.by));
    let lease = ledger.acquire(&holder, LOCK_TTL).await?;
    let written = async {
        let entry = decide(ledger.read().await?)?;
        ledger
            .write(
                &[(args.slug.clone(), entry.clone())],
                migration_core::WriteMode::Replace,
            )
            .await?;
        Ok::<_, Failure>(entry)
    }
    .await;
    // Released whatever happened.
    let released = ledger.release(&lease).await;
    let entry = written?;
    released?;
    let doc = serde_json::json!({
        "ledger": ledger.describe(),
        "slug": args.slug.as_str(),
        "mark": mark.as_str(),
        "entry": serde_json::from_str::<serde_json::Value>(&entry.encode()).unwrap_or_default(),
    });
    let ledger_name = ledger.describe();
    out.emit(&doc, |_| {
        format!(
            "{}: {} (the entry it replaced is kept in its repairs; migrate status --ledger {} {})\n",
            args.slug,
            entry.message.as_deref().unwrap_or_default(),
            args.ledger,
            args.slug,
        ) + &format!("ledger: {ledger_name}\n")
    });
    Ok(())
}
