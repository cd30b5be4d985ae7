//! Suite 3: concurrent runners, in processes on one file ledger and through the
//! test API server, and the lock of a runner that died.

use super::*;

#[test]
fn concurrent_runner_processes_on_one_file_ledger_run_each_slug_once() {
    let mut tried = 0;
    for runners in [2, 4] {
        let rounds = if soak() { 20 } else { 3 };
        for _ in 0..rounds {
            let scenario = Scenario::new(false);
            let ledger = scenario.file_ledger();
            let children: Vec<_> = (0..runners)
                .map(|i| {
                    let mut cmd = common::migrate();
                    cmd.args([
                        "run",
                        scenario.root().to_str().unwrap(),
                        "--ledger",
                        &ledger,
                        "--holder",
                        &format!("runner-{i}"),
                        "--lock-wait",
                        "30",
                    ]);
                    cmd.stdout(Stdio::null())
                        .stderr(Stdio::null())
                        .spawn()
                        .unwrap()
                })
                .collect();
            for mut child in children {
                assert!(child.wait().unwrap().success());
            }
            let executions = scenario.executions();
            assert!(
                executions.values().all(|n| *n == 1),
                "each slug exactly once: {executions:?}"
            );
            let snapshot = scenario.file_snapshot();
            check_final(&scenario, &snapshot, &UPGRADE);
            tried += 1;
        }
    }
    figure(
        "concurrency",
        "file ledger",
        &format!(
            "{tried} rounds of 2 and 4 concurrent runner processes; each slug executed exactly once, no lost update"
        ),
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_runners_through_the_test_api_server_run_each_slug_once() {
    let mut tried = 0;
    for runners in [2usize, 4] {
        let server = TestApiServer::start().await;
        let (scenario, _) = kube_setup(&server).await;
        let tree = Arc::new(scenario.tree());
        let tasks: Vec<_> = (0..runners)
            .map(|i| {
                let tree = tree.clone();
                let client = server.client();
                tokio::spawn(async move {
                    let options = Options {
                        retry: RetryPolicy::immediate(8),
                        ..Options::default()
                    };
                    let ledger = ConfigMapLedger::with_options(
                        client,
                        "cozy-system",
                        "cozystack-version",
                        options,
                    );
                    let mut cfg = config(None);
                    cfg.settings.holder = format!("runner-{i}");
                    cfg.settings.lock_wait = Duration::from_secs(30);
                    cfg.run(&tree, &ledger, &Silent)
                        .await
                        .map(|r| r.results.len())
                })
            })
            .collect();
        let mut ran = 0;
        for t in tasks {
            ran += t.await.unwrap().unwrap();
        }
        assert_eq!(ran, 3, "the runners together ran each pending slug once");
        assert!(scenario.executions().values().all(|n| *n == 1));
        let ledger = kube_setup_ledger(&server);
        check_final(&scenario, &ledger.read().await.unwrap().unwrap(), &UPGRADE);
        tried += 1;
    }
    figure(
        "concurrency",
        "ConfigMap backend through the test API server",
        &format!(
            "{tried} rounds (2 and 4 concurrent runners, separate clients); each slug executed exactly once"
        ),
    );
}

fn kube_setup_ledger(server: &TestApiServer) -> ConfigMapLedger {
    ConfigMapLedger::new(server.client(), "cozy-system", "cozystack-version")
}

// Dies at a crash point: needs the `failpoints` feature, as above.
#[cfg(feature = "failpoints")]
#[test]
fn the_lock_of_a_runner_that_died_expires_and_the_next_one_proceeds() {
    let scenario = Scenario::new(false);
    let ledger = scenario.file_ledger();
    let died = migrate_run(
        &scenario.root(),
        &ledger,
        &["--lock-ttl", "2", "--holder", "dies"],
        // After its first write took the lock (good-one's attempt mark).
        Some("before-script:fails-warn"),
    );
    assert_eq!(died.status.code(), None);
    let started = std::time::Instant::now();
    let next = migrate_run(
        &scenario.root(),
        &ledger,
        &["--lock-wait", "20", "--holder", "next"],
        None,
    );
    assert_eq!(next.status.code(), Some(0));
    assert!(
        started.elapsed() >= Duration::from_millis(500),
        "the next runner had to wait for the lease to lapse"
    );
    let snapshot = scenario.file_snapshot();
    check_final(&scenario, &snapshot, &UPGRADE);
}
