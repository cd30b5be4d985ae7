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

use migration_core::seeding::{
    AdoptError, AdoptKnowledge, AdoptWrite, LegacyReleases, adopt_into, adoption_with,
};
use migration_core::{
    Clock, EntryState, MigrateError, MigrationsTree, PlanContext, SystemClock, WriteMode,
};

use super::args::AdoptArgs;
use super::{Failure, Out, open};
use migrate_shared::exit;

/// Creates (or completes) the ledger of an adopted cluster; the policy
/// (what is recorded, what runs again, which ledger is accepted) is
/// migration-core's (`seeding::adoption`, `seeding::adopt_into`).
pub async fn adopt(args: AdoptArgs, out: &Out) -> Result<(), Failure> {
    let tree = MigrationsTree::load(&args.tree)?;
    super::manifest_of(&tree)?;
    let version = args.legacy_version;
    // Adoption plans as the first run will: a tree whose scripts name the image's shell is
    // adopted with the interpreters that run is given, not refused for the defaults.
    let allowed_interpreters = args.interpreters.clone().allowed();
    let context = PlanContext {
        now: SystemClock.now().truncated(),
        image: None,
        allowed_interpreters,
    };
    // What the cluster can tell: its Helm release history, read with the
    // tree's map of which content each release tag held.
    let releases =
        LegacyReleases::read(tree.root()).map_err(|e| Failure::bad_input(vec![e.to_string()]))?;
    let mut knowledge = AdoptKnowledge::default()
        .with_ran(args.ran.clone())
        .with_releases(releases)
        .counting_prereleases(args.count_prereleases);
    let mut read_notes = Vec::new();
    if let Some(file) = &args.helm_history {
        knowledge = knowledge.with_history(super::adopt_history::from_file(file)?);
    }
    if let Some(release) = &args.helm_release {
        let (history, note) =
            super::adopt_history::from_helm(&args.helm, release, &args.cluster).await?;
        if let Some(history) = history {
            knowledge = knowledge.with_history(history);
        }
        read_notes.extend(note);
    }
    let adoption = adoption_with(&tree, version, &knowledge, &context).map_err(|e| match e {
        AdoptError::Plan(e) => Failure::from(MigrateError::from(e)),
        other => Failure::bad_input(vec![other.to_string()]),
    })?;
    let notes: Vec<String> = read_notes
        .into_iter()
        .chain(adoption.notes.iter().cloned())
        .collect();
    let ledger = open(&args.ledger, &args.cluster).await?;
    let describe = ledger.describe();
    let snapshot = ledger.read().await?;
    let write = adopt_into(snapshot.as_ref(), &adoption, version).map_err(|why| {
        Failure::new(exit::REFUSED, "refused", vec![format!("{describe}: {why}")])
    })?;
    let outcome = match write {
        AdoptWrite::Create => {
            ledger.create(&adoption.entries).await?;
            "created"
        }
        AdoptWrite::Complete => {
            ledger
                .write(&adoption.entries, WriteMode::OnlyIfAbsent)
                .await?;
            "seeded"
        }
        _ => "already-adopted",
    };
    let legacy: Vec<String> = adoption
        .entries
        .iter()
        .filter(|(_, e)| e.state == EntryState::Legacy)
        .map(|(s, _)| s.to_string())
        .collect();
    let reruns: Vec<serde_json::Value> = adoption
        .reruns
        .iter()
        .map(|(slug, why)| serde_json::json!({"slug": slug.as_str(), "reason": why}))
        .collect();
    let answered: Vec<serde_json::Value> = adoption
        .answered
        .iter()
        .map(|a| {
            serde_json::json!({
                "slot": a.number,
                "ran": a.ran.as_str(),
                "recorded": a.recorded.as_str(),
                "state": a.state.as_str(),
                "reason": migration_core::seeding::HELM_HISTORY,
                "message": a.why,
            })
        })
        .collect();
    let view = serde_json::json!({
        "ledger": describe,
        "legacy_version": version,
        "outcome": outcome,
        "legacy": legacy,
        "reruns": reruns,
        "history_answered": answered,
        "history_notes": notes,
    });
    out.emit(&view, |_| {
        let what = match outcome {
            "created" => "created",
            "seeded" => "completed (it held only the legacy version)",
            _ => "already adopted; nothing written",
        };
        let mut text = format!(
            "{describe}: {what}: {} legacy entries for legacy-map integers below {version}{}\n",
            legacy.len(),
            if legacy.is_empty() {
                String::new()
            } else {
                format!(" ({})", legacy.join(", "))
            }
        );
        for a in &adoption.answered {
            text.push_str(&format!(
                "slot {}: '{}' recorded {} from the release history: {}\n",
                a.number,
                a.recorded,
                a.state.as_str(),
                a.why
            ));
        }
        for note in &notes {
            text.push_str(&format!("note: {note}\n"));
        }
        for (slug, why) in &adoption.reruns {
            text.push_str(&format!(
                "'{slug}' recorded not-yet; the first run executes it: {why}\n"
            ));
        }
        text
    });
    Ok(())
}
