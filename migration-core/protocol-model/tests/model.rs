//! The run protocol checked exhaustively: with the fence, every property
//! holds for every backend at 2 to 3 runners and 2 to 3 migrations under
//! crashes, lapsed leases, lost replies and 409s; with the fence removed (the
//! code before it), the checker finds the counterexamples the fencing tests
//! of the `migrate` package reproduce on the real binary.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Instant;

use protocol_model::{Faults, Protocol};
use stateright::{Checker, Model};

const FAULTS: Faults = Faults {
    crashes: 1,
    lapses: 2,
    lost_replies: 1,
};

/// What a run with 3 runners may suffer: a crash, a lapsed lease and a lost
/// reply (two lapses there take minutes on 2 cores; 2 runners get both).
const FAULTS_OF_THREE: Faults = Faults {
    crashes: 1,
    lapses: 1,
    lost_replies: 1,
};

/// The property that shows the model can complete an upgrade.
const COMPLETES: &str = "every migration is recorded";

/// Checks `protocol` to the end, or until every property of `expected` is
/// found broken (and the upgrade completed once); (unique states, the names
/// of the properties it found broken).
fn check(protocol: Protocol, expected: &[&'static str]) -> (usize, Vec<&'static str>) {
    let started = Instant::now();
    let description = format!("{protocol:?}");
    let mut checker = protocol.checker().threads(2);
    if !expected.is_empty() {
        let mut wanted: std::collections::BTreeSet<&'static str> =
            expected.iter().copied().collect();
        wanted.insert(COMPLETES);
        checker = checker.finish_when(stateright::HasDiscoveries::AllOf(wanted));
    }
    let checker = checker.spawn_bfs().join();
    let broken: Vec<&'static str> = checker
        .discoveries()
        .into_keys()
        .filter(|name| *name != COMPLETES)
        .collect();
    for name in &broken {
        let path = checker.discovery(name).unwrap();
        println!("{name}: {:?}", path.into_actions());
    }
    let states = checker.unique_state_count();
    assert!(
        checker.discovery(COMPLETES).is_some(),
        "the model can complete an upgrade (it is not vacuous): {description}"
    );
    println!(
        "{states} states, broken {broken:?}, in {:.1}s: {description}",
        started.elapsed().as_secs_f64()
    );
    (states, broken)
}

/// Checks `protocol` and that it breaks every property of `expected`; the
/// names of the properties it broke.
fn breaks(protocol: Protocol, expected: &[&'static str]) -> Vec<&'static str> {
    let (_, broken) = check(protocol, expected);
    for name in expected {
        assert!(broken.contains(name), "{name} held: {broken:?}");
    }
    broken
}

/// The faults of a run with `lapses` lapsed leases and nothing else.
fn only_lapses(lapses: u8) -> Faults {
    Faults {
        crashes: 0,
        lapses,
        lost_replies: 0,
    }
}

fn protocol(runners: usize, migrations: usize) -> Protocol {
    Protocol {
        runners,
        migrations,
        fenced: true,
        same_holder: true,
        shim_check: true,
        faults: FAULTS,
    }
}

#[test]
fn with_the_fence_every_property_holds_for_every_backend_and_size() {
    let mut total = 0;
    // One lock protocol on every backend (the lock in the ledger object).
    for (runners, migrations) in [(2, 2), (2, 3), (3, 2)] {
        let mut sized = protocol(runners, migrations);
        if runners == 3 {
            sized.faults = FAULTS_OF_THREE;
        }
        let (states, broken) = check(sized, &[]);
        assert!(
            broken.is_empty(),
            "{runners} runners, {migrations} migrations: {broken:?}"
        );
        total += states;
    }
    println!("{total} states in all");
}

#[test]
fn without_the_fence_a_stalled_runner_executes_what_another_recorded_and_writes_after_losing_the_lock()
 {
    const RAN_AGAIN: &str = "a migration recorded is never executed again";
    const WROTE: &str = "no write lands after its run lost the lock";
    let unfenced = Protocol {
        fenced: false,
        same_holder: false,
        ..protocol(2, 2)
    };
    breaks(unfenced, &[RAN_AGAIN, WROTE]);
}

#[test]
fn without_a_holder_unique_per_run_two_runners_given_one_holder_run_one_script_twice_at_once() {
    const TWO_COPIES: &str = "no second copy starts while the first one's lease is live";
    let unfenced = Protocol {
        fenced: false,
        same_holder: true,
        faults: only_lapses(0),
        ..protocol(2, 2)
    };
    breaks(unfenced.clone(), &[TWO_COPIES]);
    // The holder's token alone (fenced, same --holder) excludes them.
    let (_, broken) = check(
        Protocol {
            fenced: true,
            ..unfenced
        },
        &[],
    );
    assert!(broken.is_empty(), "{broken:?}");
}

#[test]
fn without_the_shims_lease_check_a_frozen_runners_script_reaches_the_cluster_between_another_copys_calls()
 {
    const AFTER_LOSS: &str = "no cluster call of a script lands once its run lost the lock";
    const INTERLEAVED: &str = "no two copies' cluster calls interleave";
    // One lock shape remains (the lock in the ledger object, every backend).
    let unchecked = Protocol {
        shim_check: false,
        faults: only_lapses(1),
        ..protocol(2, 1)
    };
    breaks(unchecked, &[AFTER_LOSS, INTERLEAVED]);
}
