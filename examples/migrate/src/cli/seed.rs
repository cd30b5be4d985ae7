//! `migrate seed-fresh`: seeds a fresh install explicitly, or renders the
//! seeded ledger as a ConfigMap a chart can ship.
//!
//! Both go through core's one definition of a fresh install's ledger
//! (`migration_core::seeding::fresh_install_entries`): writing through
//! `Migrator::seed_fresh`, rendering from the same function, so a chart that
//! creates the rendered ConfigMap at install holds what `seed-fresh --ledger`
//! would have written (CONTRACT.md §6.1).

use migration_core::{
    Clock, ManualClock, MigrateError, MigrationsTree, Migrator, PlanContext, SystemClock, Timestamp,
};

use super::args::{RenderKind, SeedFreshArgs};
use super::{Failure, Out, open};
use ledger_configmap::manifest::{seeded_manifest, seeded_object};
use migrate_shared::exit;

/// Creates the seeded ledger, or prints it as a manifest.
pub async fn seed_fresh(args: SeedFreshArgs, out: &Out) -> Result<(), Failure> {
    let at = match &args.at {
        Some(text) => Timestamp::parse(text)
            .map_err(|e| Failure::bad_input(vec![format!("--at {text:?}: {e}")]))?,
        None => SystemClock.now(),
    };
    let clock = ManualClock::new(at.truncated());
    let tree = MigrationsTree::load(&args.tree)?;
    let (namespace, name) = (args.namespace, args.name);
    match (args.ledger, args.render) {
        (Some(spec), None) => {
            let ledger = open(&spec, &args.cluster).await?;
            let migrator = Migrator::new(&tree, ledger.as_ref(), &clock);
            let seeded = migrator.seed_fresh().await.map_err(|e| match e {
                exists @ MigrateError::Exists { .. } => {
                    Failure::new(exit::REFUSED, "refused", vec![exists.to_string()])
                }
                other => Failure::from(other),
            })?;
            let view = serde_json::json!({"ledger": ledger.describe(), "seeded": seeded.len()});
            out.emit(&view, |_| {
                format!(
                    "{}: created with {} skipped-fresh-install entries\n",
                    ledger.describe(),
                    seeded.len()
                )
            });
        }
        (None, Some(RenderKind::Configmap)) => {
            let context = PlanContext {
                now: clock.now(),
                image: None,
                allowed_interpreters: PlanContext::default_interpreters(),
            };
            let entries = migration_core::seeding::fresh_install_entries(&tree, &context)
                .map_err(MigrateError::from)?;
            let json = seeded_object(&namespace, &name, &entries);
            out.emit(&json, |_| seeded_manifest(&namespace, &name, &entries));
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
