//! Tree-versus-manifest consistency: the checks that hold for every kind of
//! run, fresh install or upgrade, before the ledger is looked at.

use super::lines::Lines;
use super::refusal::Refusal;
use crate::manifest::Manifest;
use crate::tree::MigrationsTree;

/// Tree-versus-manifest checks that hold for every kind of run.
pub(super) fn consistency_problems(
    tree: &MigrationsTree,
    manifest: &Manifest,
    lines: &Lines<'_>,
) -> Vec<Refusal> {
    let mut problems = Vec::new();
    for script in &lines.unlisted {
        problems.push(Refusal::NotInManifest {
            slug: script.slug.clone(),
            path: script.relative_path().display().to_string(),
        });
    }
    for (i, (batch, line)) in manifest.iter().enumerate() {
        match (line.retired, lines.scripts[i].is_some()) {
            (false, false) => problems.push(Refusal::ScriptMissing {
                slug: line.slug.clone(),
                batch: batch.name.to_string(),
            }),
            (true, true) => problems.push(Refusal::RetiredButPresent {
                slug: line.slug.clone(),
                batch: batch.name.to_string(),
            }),
            _ => {}
        }
    }
    for pair in tree.legacy_map() {
        if manifest.position(&pair.slug).is_none() {
            problems.push(Refusal::LegacyNotInManifest {
                slug: pair.slug.clone(),
                number: pair.number,
                line: pair.line,
            });
        }
    }
    for revoked in tree.revoked_outside(manifest) {
        problems.push(Refusal::RevokedNotInManifest {
            slug: revoked.slug.clone(),
            line: revoked.line,
        });
    }
    problems
}
