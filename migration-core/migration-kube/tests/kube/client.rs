//! The clients `migration_kube::client` builds carry no retry layer of
//! kube's own: a 429 or 503 reaches the caller (the ledger's retry policy)
//! after one request, where kube's default client would have tried again.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use test_apiserver::{FaultRule, TestApiServer, Verb};

/// Makes the next two reads of ConfigMap `a` answer `code`, reads it once
/// through `client` and returns the status seen and the reads the server
/// counted.
async fn read_under_two_faults(
    server: &TestApiServer,
    client: kube::Client,
    code: u16,
    reason: &str,
) -> (Option<u16>, usize) {
    server.faults().clear();
    server.faults().inject(
        FaultRule::on(Verb::Get, "configmaps")
            .times(2)
            .respond(code, reason),
    );
    server.requests().reset();
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let status = match api.get_opt("a").await {
        Err(kube::Error::Api(status)) => Some(status.code),
        _ => None,
    };
    (status, server.requests().count(Verb::Get, "configmaps"))
}

#[tokio::test]
async fn a_client_built_here_does_not_retry_429_or_503_where_kubes_default_client_would() {
    let server = TestApiServer::start().await;
    for (code, reason) in [(429, "TooManyRequests"), (503, "ServiceUnavailable")] {
        let ours = migration_kube::client::from_config(server.config()).unwrap();
        let seen = read_under_two_faults(&server, ours, code, reason).await;
        assert_eq!(seen, (Some(code), 1), "{code} is the caller's to retry");
        // The contrast that gives the line above its meaning: kube's default
        // configuration retries the same faults below the caller, and then
        // meets the 404 of an absent object.
        let kubes = kube::Client::try_from(server.config()).unwrap();
        let seen = read_under_two_faults(&server, kubes, code, reason).await;
        assert_eq!(seen, (None, 3), "{code}: kube's own retry layer");
    }
}
