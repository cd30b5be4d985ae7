//! Fault injection and request counters.

use super::*;

/// Makes the next `verb` request to ConfigMaps (that one only) meet `fault`.
fn inject_once(server: &TestApiServer, verb: Verb, fault: impl FnOnce(FaultRule) -> FaultRule) {
    server
        .faults()
        .inject(fault(FaultRule::on(verb, "configmaps").once()));
}

#[tokio::test]
async fn fault_on_the_nth_call_only() {
    let (server, api) = served().await;
    create(&api, &cm("a", &[])).await;
    let rule = server.faults().inject(
        FaultRule::on(Verb::Patch, "configmaps")
            .name("a")
            .nth(2)
            .respond(409, "Conflict"),
    );
    let merge = |v: &str| Patch::Merge(json!({"data": {"k": v}}));
    api.patch("a", &PatchParams::default(), &merge("1"))
        .await
        .unwrap();
    let st = status(api.patch("a", &PatchParams::default(), &merge("2")).await);
    assert_eq!((st.code, st.reason.as_str()), (409, "Conflict"));
    assert_eq!(
        api.get("a").await.unwrap().data.unwrap()["k"],
        "1",
        "a Respond fault stores nothing"
    );
    api.patch("a", &PatchParams::default(), &merge("3"))
        .await
        .unwrap();
    assert_eq!(server.faults().fired(rule), 1);
}

#[tokio::test]
async fn fault_500_and_422_reach_the_client() {
    let (server, api) = served().await;
    inject_once(&server, Verb::Create, |r| r.respond(500, "InternalError"));
    inject_once(&server, Verb::Create, |r| r.respond(422, "Invalid"));
    // Rules fire in injection order; the second create meets the second rule.
    assert_eq!(
        status(api.create(&PostParams::default(), &cm("a", &[])).await).code,
        500
    );
    assert_eq!(
        status(api.create(&PostParams::default(), &cm("a", &[])).await).code,
        422
    );
    create(&api, &cm("a", &[])).await;
}

#[tokio::test]
async fn fault_429_with_retry_after_is_retried_by_kubes_default_client() {
    let (server, api) = served().await;
    let rule = server.faults().inject(
        FaultRule::on(Verb::Get, "configmaps")
            .times(2)
            .too_many_requests(0),
    );
    create(&api, &cm("a", &[])).await;
    server.requests().reset();
    api.get("a").await.unwrap();
    assert_eq!(server.faults().fired(rule), 2);
    assert_eq!(
        server.requests().count(Verb::Get, "configmaps"),
        3,
        "two 429s then success"
    );
}

#[tokio::test]
async fn fault_429_and_503_are_visible_without_client_retries() {
    let server = TestApiServer::start().await;
    let mut config = server.config();
    config.default_retry = false;
    let api = cms(&Client::try_from(config).unwrap());
    inject_once(&server, Verb::List, |r| r.too_many_requests(7));
    inject_once(&server, Verb::List, |r| {
        r.respond(503, "ServiceUnavailable")
    });
    let st = status(api.list(&ListParams::default()).await);
    assert_eq!((st.code, st.reason.as_str()), (429, "TooManyRequests"));
    assert_eq!(st.details.unwrap().retry_after_seconds, 7);
    let st = status(api.list(&ListParams::default()).await);
    assert_eq!((st.code, st.reason.as_str()), (503, "ServiceUnavailable"));
    api.list(&ListParams::default()).await.unwrap();
}

#[tokio::test]
async fn fault_delay_provokes_a_client_timeout_and_still_applies() {
    let server = TestApiServer::start().await;
    let mut config = server.config();
    config.read_timeout = Some(Duration::from_millis(200));
    let api = cms(&Client::try_from(config).unwrap());
    inject_once(&server, Verb::Create, |r| {
        r.delay(Duration::from_millis(600))
    });
    let result = api.create(&PostParams::default(), &cm("slow", &[])).await;
    assert!(
        !matches!(result, Ok(_) | Err(Error::Api(_))),
        "expected a client timeout, got {result:?}"
    );
    assert!(
        server.object("configmaps", NS, "slow").is_none(),
        "not applied before the delay ends"
    );
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert!(
        server.object("configmaps", NS, "slow").is_some(),
        "applied once the delay ends"
    );
}

#[tokio::test]
async fn lost_reply_as_500_really_applies_the_write() {
    let (server, api) = served().await;
    inject_once(&server, Verb::Create, |r| {
        r.lost_reply(LostReply::InternalError)
    });
    let st = status(
        api.create(&PostParams::default(), &cm("a", &[("k", "v")]))
            .await,
    );
    assert_eq!(st.code, 500);
    assert_eq!(
        server.object("configmaps", NS, "a").unwrap()["data"]["k"],
        "v"
    );
    // The retry a careful client makes now meets its own earlier write.
    let st = status(
        api.create(&PostParams::default(), &cm("a", &[("k", "v")]))
            .await,
    );
    assert_eq!(st.reason, "AlreadyExists");
}

#[tokio::test]
async fn lost_reply_as_dropped_connection_really_applies_the_write() {
    let (server, api) = served().await;
    let created = create(&api, &cm("a", &[("k", "1")])).await;
    inject_once(&server, Verb::Patch, |r| {
        r.lost_reply(LostReply::DropConnection)
    });
    let patch =
        Patch::Merge(json!({"metadata": {"resourceVersion": rv(&created)}, "data": {"k": "2"}}));
    let result = api.patch("a", &PatchParams::default(), &patch).await;
    assert!(
        !matches!(result, Ok(_) | Err(Error::Api(_))),
        "expected a transport error, got {result:?}"
    );
    assert_eq!(
        server.object("configmaps", NS, "a").unwrap()["data"]["k"],
        "2"
    );
    // Retrying the same conditional patch now conflicts with its own effect.
    assert_eq!(
        status(api.patch("a", &PatchParams::default(), &patch).await).code,
        409
    );
}

#[tokio::test]
async fn request_counters_count_round_trips_and_reset() {
    let server = TestApiServer::start().await;
    let client = server.client();
    let api = cms(&client);
    create(&api, &cm("a", &[])).await;
    api.get("a").await.unwrap();
    merge(&api, "a", json!({"data": {"k": "1"}})).await;
    let _ = api.get("missing").await;
    let requests = server.requests();
    assert_eq!(requests.count(Verb::Create, "configmaps"), 1);
    assert_eq!(requests.count(Verb::Get, "configmaps"), 2);
    assert_eq!(requests.count(Verb::Patch, "configmaps"), 1);
    assert_eq!(requests.total(), 4);
    let widgets = widgets(&server, &client);
    create(&widgets, &widget("w", json!({}))).await;
    widgets
        .patch_status(
            "w",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"p": 1}})),
        )
        .await
        .unwrap();
    assert_eq!(requests.count(Verb::Patch, "widgets/status"), 1);
    assert_eq!(requests.count(Verb::Patch, "widgets.example.com/status"), 1);
    assert_eq!(requests.count(Verb::Patch, "widgets"), 0);
    requests.reset();
    assert_eq!(requests.total(), 0);
    api.list(&ListParams::default()).await.unwrap();
    assert_eq!(requests.count(Verb::List, "configmaps"), 1);
    assert_eq!(
        requests.log()[0].method_path,
        format!("GET /api/v1/namespaces/{NS}/configmaps?")
    );
}

#[tokio::test]
async fn planted_objects_are_served_and_inspectable() {
    let (server, api) = served().await;
    // Bypasses validation: a key the real server would refuse, as left by an older writer.
    server
        .put_object(
            "configmaps",
            json!({"metadata": {"name": "corrupt", "namespace": NS}, "data": {"bad/key": "{not json"}}),
        )
        .unwrap();
    let got = api.get("corrupt").await.unwrap();
    assert_eq!(got.data.unwrap()["bad/key"], "{not json");
    assert!(got.metadata.uid.is_some() && got.metadata.resource_version.is_some());
    assert_eq!(server.objects("configmaps").len(), 1);
}
