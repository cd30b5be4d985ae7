//! `migrate adopt`: creates the ledger of an existing cluster from the state
//! of the numbered runner it replaces (CONTRACT.md §6.2).
//!
//! A numbered runner keeps one integer, "every script below N ran". The
//! engine's legacy rule reads the same integer from the ledger's `version`
//! key; `adopt` writes what that rule makes of it, a `legacy` entry for each
//! `legacy-map` pair below N, so the cluster's first run starts from an
//! explicit, reviewable ledger instead of a fresh install (which would skip
//! every migration the cluster still needs). It never overwrites: an
//! existing ledger is accepted only when it holds nothing but a `version`
//! equal to N (the shape a platform chart creates at install), or exactly
//! the entries adoption would write (running it twice is a no-op).
//!
//! Creating and only-if-absent writes never replace an entry, so no run lock
//! is taken: a runner racing with it seeds the same `legacy` entries.

use std::collections::BTreeSet;

use migration_core::{
    Clock, EntryState, LegacyVersion, MigrateError, MigrationsTree, PlanContext, Record, Slug,
    SystemClock, WriteMode,
};

use migration_core::seeding::AdoptError;

use super::args::AdoptArgs;
use super::{Failure, Out, open};
use migrate_spec::exit;

/// Creates (or completes) the ledger of an adopted cluster.
pub async fn adopt(args: AdoptArgs, out: &Out) -> Result<(), Failure> {
    let tree = MigrationsTree::load(&args.tree)?;
    super::manifest_of(&tree)?;
    let version = args.legacy_version;
    check_version(&tree, version)?;
    let context = PlanContext {
        now: SystemClock.now().truncated(),
        image: None,
        allowed_interpreters: PlanContext::default_interpreters(),
    };
    let entries = migration_core::seeding::adoption_entries(&tree, version, &args.ran, &context)
        .map_err(|e| match e {
            AdoptError::Plan(e) => Failure::from(MigrateError::from(e)),
            other => Failure::bad_input(vec![other.to_string()]),
        })?;
    let wanted: BTreeSet<&Slug> = entries.iter().map(|(s, _)| s).collect();
    let ledger = open(&args.ledger).await?;
    let describe = ledger.describe();
    let refuse =
        |why: String| Failure::new(exit::REFUSED, "refused", vec![format!("{describe}: {why}")]);
    let outcome = match ledger.read().await? {
        None => {
            ledger.create(&entries).await?;
            "created"
        }
        Some(snapshot) => {
            match &snapshot.version {
                LegacyVersion::Known(v) if *v != version => {
                    return Err(refuse(format!(
                        "the ledger's version is {v}, not --legacy-version {version}: adopting with another integer would mark other legacy migrations applied; check which the cluster ran"
                    )));
                }
                LegacyVersion::Corrupt { raw } => {
                    return Err(refuse(format!(
                        "the ledger's version {raw:?} is not a non-negative integer; fix it before adopting"
                    )));
                }
                _ => {}
            }
            if !snapshot.unreadable_keys.is_empty() {
                let keys: Vec<&str> = snapshot
                    .unreadable_keys
                    .iter()
                    .map(|c| c.key.as_str())
                    .collect();
                return Err(refuse(format!(
                    "unreadable keys {}; adopt only creates a ledger, it does not repair one",
                    keys.join(", ")
                )));
            }
            let held: BTreeSet<&Slug> = snapshot.records.keys().collect();
            let only_adoption = snapshot.records.iter().all(|(slug, record)| {
                wanted.contains(slug)
                    && matches!(record, Record::Entry(e) if e.state == EntryState::Legacy)
            });
            if snapshot.records.is_empty() {
                ledger.write(&entries, WriteMode::OnlyIfAbsent).await?;
                "seeded"
            } else if only_adoption && held == wanted {
                "already-adopted"
            } else {
                return Err(refuse(format!(
                    "the ledger already holds {} entries that are not exactly this adoption's {} legacy entries: it belongs to a cluster the engine runs already (see `migrate status`); adopt never rewrites a ledger",
                    snapshot.records.len(),
                    entries.len()
                )));
            }
        }
    };
    let legacy: Vec<String> = entries.iter().map(|(s, _)| s.to_string()).collect();
    let view = serde_json::json!({
        "ledger": describe,
        "legacy_version": version,
        "outcome": outcome,
        "legacy": legacy,
    });
    out.emit(&view, |_| {
        let what = match outcome {
            "created" => "created",
            "seeded" => "completed (it held only the legacy version)",
            _ => "already adopted; nothing written",
        };
        format!(
            "{describe}: {what}: {} legacy entries for legacy-map integers below {version}{}\n",
            legacy.len(),
            if legacy.is_empty() {
                String::new()
            } else {
                format!(" ({})", legacy.join(", "))
            }
        )
    });
    Ok(())
}

/// `version` N says "every integer below N ran". Integers the map does not
/// name cannot be adopted: the engine would not know which scripts they were.
fn check_version(tree: &MigrationsTree, version: u64) -> Result<(), Failure> {
    let map = tree.legacy_map();
    let Some(highest) = map.iter().map(|p| p.number).max() else {
        return Err(Failure::bad_input(vec![format!(
            "{}: no legacy-map: adopting needs the integer -> slug pairs of the numbered runner (a cluster without that history is a fresh install: `migrate seed-fresh`)",
            tree.root().display()
        )]));
    };
    if version > highest + 1 {
        return Err(Failure::bad_input(vec![format!(
            "--legacy-version {version}: the numbered runner ran every integer below it, but {}/legacy-map ends at {highest}; add the pairs for {}..{} (or check the version)",
            tree.root().display(),
            highest + 1,
            version - 1
        )]));
    }
    Ok(())
}
