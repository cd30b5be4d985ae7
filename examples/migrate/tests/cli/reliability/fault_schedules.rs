//! Suite 1: fault schedules on the memory backend and through the test API
//! server keep every invariant.

use super::*;

#[test]
fn fault_schedules_on_the_memory_backend_keep_every_invariant() {
    let mut tried = 0;
    let mut failed_runs = 0;
    let mut overcounts = 0;
    for kind in [
        Kind::Upgrade,
        Kind::FreshInstall,
        Kind::Legacy,
        Kind::OnlyRerun,
    ] {
        let (calls, reference) = baseline(kind);
        // Every single fault at every call.
        for n in 1..=calls {
            for fault in [Fault::Transient, Fault::Permanent, Fault::LostReply] {
                let (ok, over) = schedule(
                    kind,
                    &|f: &FaultyLedger| f.fail_call(n, fault),
                    Some(&reference),
                    fault != Fault::Permanent,
                );
                overcounts += usize::from(over);
                if fault != Fault::Permanent {
                    assert!(
                        ok,
                        "{kind:?}: a single {fault:?} at call {n} must be absorbed"
                    );
                }
                tried += 1;
                failed_runs += usize::from(!ok);
            }
        }
        // Random multi-fault schedules.
        let random = if soak() { 400 } else { 25 };
        let mut seed: u64 = 0x5eed ^ calls as u64;
        for _ in 0..random {
            let plan: Vec<Option<Fault>> = (0..calls * 2)
                .map(|_| {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    match seed % 10 {
                        0 => Some(Fault::Transient),
                        1 => Some(Fault::LostReply),
                        2 if seed.is_multiple_of(7) => Some(Fault::Permanent),
                        _ => None,
                    }
                })
                .collect();
            let transient_only = !plan.contains(&Some(Fault::Permanent));
            let plan2 = plan.clone();
            let (ok, over) = schedule(
                kind,
                &move |f: &FaultyLedger| f.set_schedule(plan2.clone()),
                None,
                transient_only,
            );
            overcounts += usize::from(over);
            tried += 1;
            failed_runs += usize::from(!ok);
        }
    }
    figure(
        "fault-schedules",
        "memory backend",
        &format!(
            "{tried} schedules over 4 run kinds (upgrade, fresh install, legacy seeding, ONLY re-run); {failed_runs} runs failed closed and were completed by a re-run; attempts equal to real executions except {overcounts} run(s) that failed after an attempt mark whose reply was lost (attempts one above executions); 0 invariant violations"
        ),
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fault_schedules_through_the_test_api_server_keep_every_invariant() {
    // Count the requests of a fault-free upgrade first.
    let reference = {
        let server = TestApiServer::start().await;
        let (scenario, ledger) = kube_setup(&server).await;
        server.requests().reset();
        kube_run(&scenario, ledger.clone()).await.unwrap();
        (server.requests().total(), scenario.executions())
    };
    let mut tried = 0;
    let mut failed_runs = 0;
    for n in 1..=reference.0 {
        for action in ["500", "429", "403", "lost"] {
            let server = TestApiServer::start().await;
            let (scenario, ledger) = kube_setup(&server).await;
            server.requests().reset();
            let rule = FaultRule::on_any_verb("*").nth(n as u64);
            let rule = match action {
                "500" => rule.respond(500, "InternalError"),
                "429" => rule.too_many_requests(0),
                "403" => rule.respond(403, "Forbidden"),
                _ => rule.lost_reply(LostReply::DropConnection),
            };
            server.faults().inject(rule);
            let outcome = kube_run(&scenario, ledger.clone()).await;
            tried += 1;
            if let Err(e) = &outcome {
                assert_eq!(
                    action, "403",
                    "request {n}: a {action} must be absorbed by retries: {e}"
                );
                failed_runs += 1;
                server.faults().clear();
                kube_run(&scenario, ledger.clone())
                    .await
                    .unwrap_or_else(|e| panic!("recovery: {e}"));
            }
            let snapshot = ledger.read().await.unwrap().unwrap();
            check_final(&scenario, &snapshot, &UPGRADE);
            assert_eq!(
                snapshot.entry(&s("pre-recorded")).unwrap().state,
                EntryState::Ok
            );
        }
    }
    figure(
        "fault-schedules",
        "ConfigMap backend through the test API server",
        &format!(
            "{tried} schedules (500, 429, 403 or a dropped connection after the write, at each of the {} requests of an upgrade); {failed_runs} failed closed (403) and were completed by a re-run; 0 invariant violations",
            reference.0
        ),
    );
}
