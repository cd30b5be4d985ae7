//! `migrate seed-fresh`: seeds a fresh install explicitly, or renders the
//! seeded ledger as a ConfigMap a chart can ship.
//!
//! Moved here from the binary as it was; it plans the fresh install itself
//! rather than through `Migrator::prepare` (issue 12 moves it onto that path).

use migration_core::{
    Clock, LedgerEntry, MigrateError, MigrationsTree, PlanContext, PlanRequest, Slug, SystemClock,
    Tier,
};

use super::args::{RenderKind, SeedFreshArgs};
use super::{Failure, Out, open};
use crate::exit;
use crate::render::{configmap_json, configmap_yaml};

/// Creates the seeded ledger, or prints it as a manifest.
pub async fn seed_fresh(args: SeedFreshArgs, out: &Out) -> Result<(), Failure> {
    let clock = SystemClock;
    let tree = MigrationsTree::load(&args.tree)?;
    let context = PlanContext::at(clock.now().truncated());
    let plan = migration_core::plan(&tree, None, &PlanRequest::tier(Tier::PreApply), &context)
        .map_err(MigrateError::from)?;
    let entries: Vec<(Slug, LedgerEntry)> = plan
        .seed
        .iter()
        .map(|e| (e.slug.clone(), e.entry.clone()))
        .collect();
    let (namespace, name) = (args.namespace, args.name);
    match (args.ledger, args.render) {
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
            let view = serde_json::json!({"ledger": ledger.describe(), "seeded": entries.len()});
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
                vec!["seed-fresh needs exactly one of --ledger SPEC or --render configmap".into()],
            ));
        }
    }
    Ok(())
}
