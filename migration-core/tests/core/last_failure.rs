//! The last failure of an `on-error=abort` migration (CONTRACT.md §5.3),
//! through the run loop on the memory ledger: stored by the run's closing
//! write with nothing terminal recorded, replaced by the next failure,
//! removed by the next outcome, never read by planning; and a ledger
//! holding one still plans and runs under an older engine's rules.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use ledger_memory::MemoryLedger;
use migration_core::header::Tier;
use migration_core::last_failure::LastFailure;
use migration_core::ledger::LedgerSnapshot;
use migration_core::testing::fixtures::{TreeBuilder, clock, s};
use migration_core::testing::previous_engine;
use migration_core::{
    Clock, EntryState, Ledger, ManualClock, MigrationsTree, Migrator, OnError, Outcome,
    PlanRequest, Step, Verdict,
};

const IMAGE: &str = "registry.example/migrations:2";

/// `first` succeeds; `breaks` (abort) fails until fixed; `later` after it.
fn tree() -> MigrationsTree {
    TreeBuilder::new()
        .pre("first")
        .script_with(Tier::PreApply, "breaks", OnError::Abort, &[], "exit 3")
        .pre("later")
        .manifest(&[("00001-v1", "first\nbreaks\nlater\n")])
        .build()
}

/// One pre-apply run where `breaks` ends with `outcome` and the rest
/// succeed; the verdicts in order.
async fn run_once(
    tree: &MigrationsTree,
    ledger: &MemoryLedger,
    clock: &ManualClock,
    breaks: Outcome,
) -> Vec<(String, Verdict)> {
    let migrator = Migrator::new(tree, ledger, clock).with_image(Some(IMAGE.into()));
    let prepared = migrator
        .prepare(&PlanRequest::tier(Tier::PreApply))
        .await
        .unwrap();
    let mut run = migrator.begin(prepared).with_message_limit(256);
    let mut keeper =
        migration_core::LockKeeper::new(ledger, "test", std::time::Duration::from_secs(60));
    static TOKENS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let mut seen = Vec::new();
    while let Some(step) = run.next_step().unwrap() {
        let Step::Execute(pending) = step else {
            panic!("nothing is blocked here: {step:?}")
        };
        let n = TOKENS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let attempts = run
            .note_attempt(&pending, &format!("t{n}"), &mut keeper)
            .await
            .unwrap();
        let outcome = if pending.slug.as_str() == "breaks" {
            breaks.clone()
        } else {
            Outcome::Succeeded
        };
        let verdict = run.finish(&pending, attempts, outcome).await.unwrap();
        let stop = matches!(verdict, Verdict::Abort { .. });
        seen.push((pending.slug.to_string(), verdict));
        if stop {
            break;
        }
    }
    run.close(&mut keeper).await.unwrap();
    seen
}

fn failed(output: &str) -> Outcome {
    Outcome::Failed {
        reason: "exit-status-3".into(),
        message: output.into(),
    }
}

async fn snapshot(ledger: &MemoryLedger) -> LedgerSnapshot {
    ledger.read().await.unwrap().unwrap()
}

#[tokio::test]
async fn an_abort_failure_keeps_its_last_failure_and_the_next_outcome_removes_it() {
    let (tree, ledger, clock) = (tree(), MemoryLedger::new(), clock());
    ledger.create(&[]).await.unwrap();
    let output = format!("{}\nDB_PASSWORD=hunter2\nboom", "x".repeat(400));
    let seen = run_once(&tree, &ledger, &clock, failed(&output)).await;
    assert!(matches!(seen.last(), Some((slug, Verdict::Abort { .. })) if slug == "breaks"));

    let snap = snapshot(&ledger).await;
    assert!(snap.record(&s("breaks")).is_none(), "nothing terminal");
    assert_eq!(snap.attempts_started.get(&s("breaks")), Some(&1));
    let failure = snap.failures.get(&s("breaks")).expect("kept").clone();
    assert_eq!(failure.reason, "exit-status-3");
    assert_eq!(failure.attempts, 1);
    assert_eq!(failure.image.as_deref(), Some(IMAGE));
    assert_eq!(failure.at, clock.now().truncated());
    assert!(failure.message.len() <= 256, "cut to the run's limit");
    assert!(failure.message.contains("boom"), "{}", failure.message);
    assert!(!failure.message.contains("hunter2"), "{}", failure.message);
    assert!(
        !ledger.raw("f.breaks").unwrap().contains("hunter2"),
        "never stored"
    );

    // Planning never reads it: `breaks` is pending again, as before.
    let migrator = Migrator::new(&tree, &ledger, &clock);
    let plan = migrator
        .plan_snapshot(Some(&snap), &PlanRequest::tier(Tier::PreApply))
        .unwrap();
    let pending: Vec<&str> = plan.pending.iter().map(|p| p.slug.as_str()).collect();
    assert_eq!(pending, ["breaks", "later"]);
    assert!(plan.warnings.is_empty(), "{:?}", plan.warnings);

    // The next failure replaces it.
    clock.advance(std::time::Duration::from_secs(60));
    run_once(&tree, &ledger, &clock, failed("still broken")).await;
    let second = snapshot(&ledger).await.failures[&s("breaks")].clone();
    assert_eq!(
        (second.attempts, second.message.as_str()),
        (2, "still broken")
    );
    assert!(second.at > failure.at);

    // Fixed: recorded ok, and the same write removed the record.
    run_once(&tree, &ledger, &clock, Outcome::Succeeded).await;
    let snap = snapshot(&ledger).await;
    assert_eq!(snap.entry(&s("breaks")).unwrap().state, EntryState::Ok);
    assert_eq!(snap.entry(&s("breaks")).unwrap().attempts, 3);
    assert!(snap.failures.is_empty());
    assert_eq!(ledger.raw("f.breaks"), None);
}

#[tokio::test]
async fn a_ledger_holding_a_last_failure_plans_and_runs_under_an_older_engines_rules() {
    let (tree, ledger, clock) = (tree(), MemoryLedger::new(), clock());
    ledger.create(&[]).await.unwrap();
    run_once(&tree, &ledger, &clock, failed("boom")).await;
    let data = ledger.raw_data().unwrap();
    assert!(data.contains_key("f.breaks"));

    // An older engine's reading of the same data: a key outside `version`,
    // `m.`, `a.` and `c.` is another owner's and skipped (its `keys::parse`
    // gives `Key::Foreign`; its CRD reader looks at `status.entries`,
    // `status.attempts` and `status.contexts` only).
    assert_eq!(
        previous_engine::parse_key("f.breaks"),
        previous_engine::Key::Foreign
    );
    let older: Vec<(&String, &String)> = data
        .iter()
        .filter(|(k, _)| previous_engine::parse_key(k) != previous_engine::Key::Foreign)
        .collect();
    let as_older = LedgerSnapshot::from_raw_data(older, None);
    let mut as_newer = LedgerSnapshot::from_raw_data(&data, None);
    assert_eq!(as_newer.failures.len(), 1);
    as_newer.failures.clear();
    assert_eq!(as_newer, as_older, "the record changes nothing else");
    let migrator = Migrator::new(&tree, &ledger, &clock);
    let request = PlanRequest::tier(Tier::PreApply);
    let plan_older = migrator.plan_snapshot(Some(&as_older), &request).unwrap();
    let plan_newer = migrator
        .plan_snapshot(Some(&snapshot(&ledger).await), &request)
        .unwrap();
    assert_eq!(plan_newer.pending, plan_older.pending);
    assert_eq!(plan_newer.warnings, plan_older.warnings);

    // A journal an older engine replayed keeps a removal as an empty value
    // (it has no rule for it): read as no record, with no warning.
    let mut replayed = data.clone();
    replayed.insert("f.breaks".into(), String::new());
    let snap = LedgerSnapshot::from_raw_data(&replayed, None);
    assert!(snap.failures.is_empty() && snap.unreadable_keys.is_empty());

    // An older engine's run over it writes `m.`/`a.`/`c.` keys only and
    // leaves the record to the next engine, which removes it with the
    // slug's next entry.
    assert!(LastFailure::decode("f.breaks", &data["f.breaks"]).is_ok());
    run_once(&tree, &ledger, &clock, Outcome::Succeeded).await;
    assert!(snapshot(&ledger).await.failures.is_empty());
}

#[test]
fn a_corrupt_last_failure_never_refuses_an_adoption_but_a_corrupt_entry_key_still_does() {
    use migration_core::seeding::{AdoptRefusal, AdoptWrite, Adoption, adopt_into};
    let adoption = Adoption {
        entries: Vec::new(),
        reruns: Vec::new(),
        answered: Vec::new(),
        notes: Vec::new(),
    };
    let data = [
        ("version", "4"),
        ("f.x", "{not json"),
        ("f.Not_A_Slug", "{}"),
    ];
    let snapshot = LedgerSnapshot::from_raw_data(data, None);
    assert_eq!(snapshot.unreadable_keys.len(), 2);
    assert_eq!(
        adopt_into(Some(&snapshot), &adoption, 4),
        Ok(AdoptWrite::Complete)
    );
    let data = [("version", "4"), ("m.Not_A_Slug", "{}")];
    let snapshot = LedgerSnapshot::from_raw_data(data, None);
    assert!(matches!(
        adopt_into(Some(&snapshot), &adoption, 4),
        Err(AdoptRefusal::UnreadableKeys { .. })
    ));
}
