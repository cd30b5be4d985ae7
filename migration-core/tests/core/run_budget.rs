//! The run's room check: a migration executes only when the ledger can hold
//! the largest record it can produce, counting what the run itself wrote.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use ledger_memory::MemoryLedger;
use migration_core::header::Tier;
use migration_core::testing::fixtures::{TreeBuilder, clock, shared_clock};
use migration_core::{
    Ledger, LockKeeper, MigrateError, MigrationsTree, Migrator, Outcome, PlanRequest, Prepared,
    Step,
};

/// A keeper for a memory ledger, whose lock lives beside it: it holds
/// nothing, and the run's writes carry no lock.
fn no_lock(memory: &MemoryLedger) -> LockKeeper<'_> {
    LockKeeper::new(memory, "test", std::time::Duration::from_secs(60))
}

/// A memory ledger with `budget` bytes, existing and empty.
async fn ledger(budget: u64) -> MemoryLedger {
    let memory = MemoryLedger::with_clock_and_budget(shared_clock(), Some(budget));
    memory.create(&[]).await.unwrap();
    memory
}

/// The pre-apply tier of `migrator`, prepared.
async fn prepare_pre_apply(migrator: &Migrator<'_>) -> Prepared {
    migrator
        .prepare(&PlanRequest::tier(Tier::PreApply))
        .await
        .unwrap()
}

/// Pre-apply `a1` then `a2`, in one batch.
fn two_migrations() -> MigrationsTree {
    TreeBuilder::new()
        .pre_scripts(&["a1", "a2"])
        .manifest(&[("00001-v1", "a1\na2\n")])
        .build()
}

#[tokio::test]
async fn the_room_reserved_for_one_migration_is_used_up_by_what_it_records() {
    let tree = two_migrations();
    let clock = clock();
    // The smallest budget at which the first migration may execute, by
    // bisection (the check is monotone in the budget).
    let first_may_execute = |budget: u64| {
        let tree = &tree;
        let clock = &clock;
        async move {
            let memory = ledger(budget).await;
            let migrator = Migrator::new(tree, &memory, clock);
            let prepared = prepare_pre_apply(&migrator).await;
            match migrator.begin(prepared).next_step() {
                Ok(Some(Step::Execute(_))) => true,
                Err(MigrateError::NoRoom { slug, .. }) if slug.as_str() == "a1" => false,
                other => panic!("unexpected step {other:?}"),
            }
        }
    };
    let (mut low, mut high) = (0u64, 1024 * 1024);
    assert!(first_may_execute(high).await && !first_may_execute(low).await);
    while high - low > 1 {
        let mid = (low + high) / 2;
        if first_may_execute(mid).await {
            high = mid;
        } else {
            low = mid;
        }
    }
    let budget = high;
    assert!(
        budget < 64 * 1024,
        "the reservation must be bounded: {budget}"
    );
    let memory = ledger(budget).await;
    let migrator = Migrator::new(&tree, &memory, &clock);
    let prepared = prepare_pre_apply(&migrator).await;
    let mut run = migrator.begin(prepared);
    let Ok(Some(Step::Execute(first))) = run.next_step() else {
        panic!("a1 fits the budget found")
    };
    let mut keeper = no_lock(&memory);
    let attempts = run
        .note_attempt(&first, "token-1", &mut keeper)
        .await
        .unwrap();
    run.finish(&first, attempts, Outcome::Succeeded)
        .await
        .unwrap();
    // a2 needs as much room as a1 did, and a1's records took some of it:
    // a2 must not execute, and nothing of it is written.
    match run.next_step() {
        Err(MigrateError::NoRoom {
            slug, budget_bytes, ..
        }) => {
            assert_eq!(slug.as_str(), "a2");
            assert_eq!(budget_bytes, budget);
        }
        other => panic!("a2 must be refused for room, got {other:?}"),
    }
    assert!(memory.raw("m.a2").is_none() && memory.raw("a.a2").is_none());
}

#[tokio::test]
async fn a_ledger_with_room_runs_every_migration() {
    let tree = two_migrations();
    let clock = clock();
    let memory = ledger(1024 * 1024).await;
    let migrator = Migrator::new(&tree, &memory, &clock);
    let prepared = prepare_pre_apply(&migrator).await;
    let mut run = migrator.begin(prepared);
    let mut keeper = no_lock(&memory);
    let mut ran = Vec::new();
    while let Some(step) = run.next_step().unwrap() {
        let Step::Execute(p) = step else {
            panic!("nothing is blocked here")
        };
        let attempts = run
            .note_attempt(&p, &format!("t-{}", p.slug), &mut keeper)
            .await
            .unwrap();
        run.finish(&p, attempts, Outcome::Succeeded).await.unwrap();
        ran.push(p.slug.to_string());
    }
    run.close(&mut keeper).await.unwrap();
    assert_eq!(ran, ["a1", "a2"]);
}

#[tokio::test]
async fn the_room_reserved_before_an_abort_migration_holds_its_largest_last_failure() {
    use migration_core::{OnError, Verdict};
    let tree = TreeBuilder::new()
        .script_with(Tier::PreApply, "breaks", OnError::Abort, &[], "exit 3")
        .manifest(&[("00001-v1", "breaks\n")])
        .build();
    let clock = clock();
    let image = Some(format!("registry.example/{}", "i".repeat(300)));
    let limit = 512;
    let may_execute = |budget: u64| {
        let (tree, clock, image) = (&tree, &clock, image.clone());
        async move {
            let memory = ledger(budget).await;
            let migrator = Migrator::new(tree, &memory, clock).with_image(image);
            let prepared = prepare_pre_apply(&migrator).await;
            match migrator
                .begin(prepared)
                .with_message_limit(limit)
                .next_step()
            {
                Ok(Some(Step::Execute(_))) => true,
                Err(MigrateError::NoRoom { .. }) => false,
                other => panic!("unexpected step {other:?}"),
            }
        }
    };
    let (mut low, mut high) = (0u64, 1 << 20);
    while low + 1 < high {
        let mid = (low + high) / 2;
        if may_execute(mid).await {
            high = mid;
        } else {
            low = mid;
        }
    }
    // At exactly that budget, the worst failure (every byte escaped six
    // times) is kept whole.
    let memory = ledger(high).await;
    let migrator = Migrator::new(&tree, &memory, &clock).with_image(image.clone());
    let prepared = prepare_pre_apply(&migrator).await;
    let mut run = migrator.begin(prepared).with_message_limit(limit);
    let mut keeper = no_lock(&memory);
    let Some(Step::Execute(pending)) = run.next_step().unwrap() else {
        panic!("breaks executes at the smallest budget that allows it")
    };
    let attempts = run.note_attempt(&pending, "t", &mut keeper).await.unwrap();
    let outcome = Outcome::Failed {
        reason: "\u{1}".repeat(64),
        message: "\u{1}".repeat(limit),
    };
    let verdict = run.finish(&pending, attempts, outcome).await.unwrap();
    assert!(matches!(verdict, Verdict::Abort { .. }));
    run.close(&mut keeper).await.unwrap();
    let snapshot = memory.read().await.unwrap().unwrap();
    let kept = &snapshot.failures[&pending.slug];
    assert_eq!((kept.message.len(), kept.reason.len()), (limit, 64));
    assert_eq!(kept.image, image);
}
