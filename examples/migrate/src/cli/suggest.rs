//! "did you mean" for a slug the command line names: the nearest known one,
//! by the rule the headers' and `requires=`'s suggestions use.

/// `; did you mean 'x'?`, or nothing when no known slug is close.
pub fn did_you_mean<'a>(word: &str, known: impl IntoIterator<Item = &'a str>) -> String {
    migration_core::repair::nearest(word, known)
        .map(|s| format!("; did you mean '{s}'?"))
        .unwrap_or_default()
}

/// Refuses `--only SLUG` (`ONLY`) naming no script of `tree` when a script's
/// slug is a near miss, in the plan's own words plus the suggestion, before
/// the ledger is read; any other `--only` is left to the plan.
pub fn check_only(
    tree: &migration_core::MigrationsTree,
    only: Option<&migration_core::Slug>,
) -> Result<(), super::Failure> {
    let Some(slug) = only else { return Ok(()) };
    if tree.script(slug).is_some() {
        return Ok(());
    }
    let hint = did_you_mean(slug.as_str(), tree.scripts().keys().map(|s| s.as_str()));
    if hint.is_empty() {
        return Ok(());
    }
    let refusal = migration_core::Refusal::OnlyNotInTree {
        slug: slug.clone(),
        retired: false,
    };
    Err(super::Failure::new(
        migrate_shared::exit::REFUSED,
        "refused",
        vec![format!("{refusal}{hint}")],
    ))
}
