//! The "not yet" outcome (CONTRACT.md §5.2, §7.4): a migration whose
//! preconditions are not met is recorded `not-yet`, never `ok`, is pending
//! again on the next run with its attempts carried on, makes its `requires`
//! dependents wait with it, lets the rest of the tier go on, and fails
//! verification while it remains.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use ledger_memory::MemoryLedger;
use migration_core::header::Tier;
use migration_core::plan::SkipReason;
use migration_core::run::{NOT_YET, REQUIREMENT_NOT_YET};
use migration_core::testing::fixtures::{TreeBuilder, clock, pending, s};
use migration_core::verify::{VerifyProblem, verify};
use migration_core::{
    EntryState, Ledger, LedgerEntry, ManualClock, MigrationsTree, Migrator, OnError, Outcome,
    PlanRequest, Refusal, Step, Timestamp, Verdict,
};

/// `waits` (abort) not yet; `after` requires it; `other` is independent,
/// later in the same batch; `dependent-of-dependent` requires `after`.
fn tree() -> MigrationsTree {
    TreeBuilder::new()
        .script_with(Tier::PreApply, "waits", OnError::Abort, &[], "exit 75")
        .script_with(Tier::PreApply, "after", OnError::Abort, &["waits"], ":")
        .script_with(
            Tier::PreApply,
            "dependent-of-dependent",
            OnError::Warn,
            &["after"],
            ":",
        )
        .pre("other")
        .manifest(&[("00001-v1", "waits\nafter\ndependent-of-dependent\nother\n")])
        .build()
}

async fn existing_ledger() -> MemoryLedger {
    let memory = MemoryLedger::new();
    memory.create(&[]).await.unwrap();
    memory
}

/// Records `slug` as `not-yet` (after one attempt, message "later") in `ledger`.
async fn record_not_yet(ledger: &MemoryLedger, slug: &str) {
    let not_yet = LedgerEntry {
        reason: Some(NOT_YET.into()),
        message: Some("later".into()),
        attempts: 1,
        ..LedgerEntry::new(EntryState::NotYet, Timestamp::from_unix(0))
    };
    ledger
        .write(&[(s(slug), not_yet)], migration_core::WriteMode::Replace)
        .await
        .unwrap();
}

/// One pre-apply run: `not_yet` slugs end `NotYet`, every other executed
/// one succeeds. Returns (slug, step kind, verdict) in order.
async fn run_once(
    tree: &MigrationsTree,
    ledger: &MemoryLedger,
    clock: &ManualClock,
    not_yet: &[&str],
) -> Vec<(String, &'static str, Verdict)> {
    run_tier(Tier::PreApply, tree, ledger, clock, not_yet).await
}

/// [`run_once`] of `tier`.
async fn run_tier(
    tier: Tier,
    tree: &MigrationsTree,
    ledger: &MemoryLedger,
    clock: &ManualClock,
    not_yet: &[&str],
) -> Vec<(String, &'static str, Verdict)> {
    let migrator = Migrator::new(tree, ledger, clock);
    let prepared = migrator.prepare(&PlanRequest::tier(tier)).await.unwrap();
    let mut run = migrator.begin(prepared);
    // The memory ledger's lock lives beside it: this keeper holds nothing
    // and the run's writes carry no lock.
    let mut keeper =
        migration_core::LockKeeper::new(ledger, "test", std::time::Duration::from_secs(60));
    let mut seen = Vec::new();
    // Tokens must differ between executions, across runs too.
    static TOKENS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    while let Some(step) = run.next_step().unwrap() {
        let pending = step.pending().clone();
        let (kind, attempts, outcome) = match step {
            Step::Execute(_) => {
                let n = TOKENS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let attempts = run
                    .note_attempt(&pending, &format!("t{n}"), &mut keeper)
                    .await
                    .unwrap();
                let outcome = if not_yet.contains(&pending.slug.as_str()) {
                    Outcome::NotYet {
                        message: "crd x is not served yet".into(),
                    }
                } else {
                    Outcome::Succeeded
                };
                ("execute", attempts, outcome)
            }
            Step::Deferred { waiting_for, .. } => (
                "deferred",
                migration_core::run::previous_attempts(&pending),
                Outcome::Deferred { waiting_for },
            ),
            Step::Blocked { unmet, .. } => ("blocked", 0, Outcome::Blocked { unmet }),
        };
        let verdict = run.finish(&pending, attempts, outcome).await.unwrap();
        seen.push((pending.slug.to_string(), kind, verdict));
    }
    run.close(&mut keeper).await.unwrap();
    seen
}

async fn entry(ledger: &MemoryLedger, slug: &str) -> LedgerEntry {
    ledger
        .read()
        .await
        .unwrap()
        .unwrap()
        .entry(&s(slug))
        .cloned()
        .unwrap_or_else(|| panic!("{slug} has no entry"))
}

#[tokio::test]
async fn a_not_yet_migration_under_abort_is_recorded_not_yet_and_the_independent_rest_of_the_tier_runs()
 {
    let (tree, ledger, clock) = (tree(), existing_ledger().await, clock());
    let seen = run_once(&tree, &ledger, &clock, &["waits"]).await;
    let recorded = Verdict::Recorded(EntryState::NotYet);
    assert_eq!(
        seen,
        [
            ("waits".into(), "execute", recorded.clone()),
            ("after".into(), "deferred", recorded.clone()),
            ("dependent-of-dependent".into(), "deferred", recorded),
            ("other".into(), "execute", Verdict::Recorded(EntryState::Ok)),
        ]
    );
    let waits = entry(&ledger, "waits").await;
    assert_eq!(
        (waits.state, waits.attempts, waits.reason.as_deref()),
        (EntryState::NotYet, 1, Some(NOT_YET))
    );
    assert!(waits.message.unwrap().contains("not served yet"));
    let after = entry(&ledger, "after").await;
    assert_eq!(
        (after.state, after.attempts, after.reason.as_deref()),
        (EntryState::NotYet, 0, Some(REQUIREMENT_NOT_YET)),
        "a dependent that never executed counts no attempt"
    );
    assert_eq!(
        after.message.as_deref(),
        Some("not run: waits is recorded 'not-yet' in this run")
    );
    // The dependent's dependent waits on a *recorded* not-yet too.
    let next = entry(&ledger, "dependent-of-dependent").await;
    assert_eq!(next.reason.as_deref(), Some(REQUIREMENT_NOT_YET));
}

#[tokio::test]
async fn the_next_run_plans_not_yet_slugs_again_and_counts_attempts_on() {
    let (tree, ledger, clock) = (tree(), existing_ledger().await, clock());
    run_once(&tree, &ledger, &clock, &["waits"]).await;

    let plan = Migrator::new(&tree, &ledger, &clock)
        .plan(&PlanRequest::tier(Tier::PreApply))
        .await
        .unwrap();
    assert_eq!(pending(&plan), ["waits", "after", "dependent-of-dependent"]);
    assert!(
        plan.skipped
            .iter()
            .any(|k| k.slug.as_str() == "other"
                && k.reason == SkipReason::Recorded(EntryState::Ok))
    );

    // Still not yet: counted again, and the dependents wait again.
    run_once(&tree, &ledger, &clock, &["waits"]).await;
    assert_eq!(entry(&ledger, "waits").await.attempts, 2);
    assert_eq!(entry(&ledger, "after").await.state, EntryState::NotYet);

    // Preconditions met: everything that waited runs, in order.
    let seen = run_once(&tree, &ledger, &clock, &[]).await;
    let ran: Vec<(&str, &str)> = seen.iter().map(|(s, k, _)| (s.as_str(), *k)).collect();
    assert_eq!(
        ran,
        [
            ("waits", "execute"),
            ("after", "execute"),
            ("dependent-of-dependent", "execute")
        ]
    );
    let waits = entry(&ledger, "waits").await;
    assert_eq!((waits.state, waits.attempts), (EntryState::Ok, 3));
    assert_eq!(waits.reason, None, "an ok entry carries no not-yet reason");
    assert_eq!(entry(&ledger, "after").await.attempts, 1);
}

#[tokio::test]
async fn verify_fails_while_a_not_yet_entry_remains_and_passes_once_it_ran() {
    let (tree, ledger, clock) = (tree(), existing_ledger().await, clock());
    run_once(&tree, &ledger, &clock, &["waits"]).await;
    let snapshot = ledger.read().await.unwrap();
    let result = verify(&tree, tree.manifest().unwrap(), snapshot.as_ref(), None);
    let not_yet: Vec<String> = result
        .problems
        .iter()
        .filter_map(|p| match p {
            VerifyProblem::NotYet { slug, .. } => Some(slug.to_string()),
            _ => None,
        })
        .collect();
    assert_eq!(not_yet, ["waits", "after", "dependent-of-dependent"]);
    assert!(
        result.problems[0]
            .to_string()
            .contains("'waits' (00001-v1) is 'not-yet'"),
        "{}",
        result.problems[0]
    );

    run_once(&tree, &ledger, &clock, &[]).await;
    let snapshot = ledger.read().await.unwrap();
    let result = verify(&tree, tree.manifest().unwrap(), snapshot.as_ref(), None);
    assert_eq!(result.problems, []);
}

#[tokio::test]
async fn a_not_yet_requirement_in_the_other_tier_makes_the_dependent_wait_not_fail() {
    let tree = TreeBuilder::new()
        .pre("pre-waits")
        .script_with(
            Tier::Background,
            "bg-needs",
            OnError::Warn,
            &["pre-waits"],
            ":",
        )
        .manifest(&[("00001-v1", "pre-waits\n"), ("00002-v2", "bg-needs\n")])
        .build();
    let ledger = existing_ledger().await;
    record_not_yet(&ledger, "pre-waits").await;
    let clock = clock();
    let seen = run_tier(Tier::Background, &tree, &ledger, &clock, &[]).await;
    assert_eq!(
        seen,
        [(
            "bg-needs".into(),
            "deferred",
            Verdict::Recorded(EntryState::NotYet)
        )]
    );
    let e = entry(&ledger, "bg-needs").await;
    assert_eq!(
        e.message.as_deref(),
        Some("not run: pre-waits is recorded 'not-yet'")
    );
}

#[tokio::test]
async fn a_retired_slug_left_not_yet_is_refused_by_the_retention_floor() {
    let tree = TreeBuilder::new()
        .pre("b")
        .manifest(&[("00001-v1.0.0", "gone retired\n"), ("00002-v1.1.0", "b\n")])
        .build();
    let ledger = existing_ledger().await;
    record_not_yet(&ledger, "gone").await;
    let err = Migrator::new(&tree, &ledger, &clock())
        .plan(&PlanRequest::tier(Tier::PreApply))
        .await
        .unwrap_err();
    let text = format!("{err:?}");
    assert!(
        matches!(&err, migration_core::MigrateError::Refused(plan)
            if plan.problems.iter().any(|p| matches!(p, Refusal::RetentionFloor { slug, .. } if slug.as_str() == "gone"))),
        "{text}"
    );
}

#[test]
fn a_not_yet_entry_without_reason_or_message_is_corrupt_and_never_satisfies_a_requirement() {
    let err = LedgerEntry::decode("m.x", r#"{"state":"not-yet","at":"2026-08-12T10:04:00Z"}"#)
        .unwrap_err();
    assert!(
        err.reason.contains("not-yet entry must carry 'reason'"),
        "{err}"
    );
    assert!(!EntryState::NotYet.satisfies_requirement());
    assert!(!EntryState::NotYet.is_terminal());
    assert!(EntryState::ALL.iter().filter(|s| !s.is_terminal()).count() == 1);
}
