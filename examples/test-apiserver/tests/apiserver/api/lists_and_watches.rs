//! Lists (selectors, pagination) and watches (history, compaction, bookmarks,
//! the runtime watcher).

use super::*;

#[tokio::test]
async fn label_and_field_selectors_filter_lists() {
    let (_server, api) = served().await;
    for (name, labels) in [
        ("a", vec![("app", "ledger"), ("tier", "x")]),
        ("b", vec![("app", "ledger")]),
        ("c", vec![("app", "other"), ("tier", "y")]),
    ] {
        let mut obj = cm(name, &[]);
        obj.metadata.labels = Some(
            labels
                .into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
        );
        create(&api, &obj).await;
    }
    assert_eq!(
        listed(&api, ListParams::default().labels("app=ledger,tier")).await,
        ["a"]
    );
    assert_eq!(
        listed(&api, ListParams::default().labels("app=ledger")).await,
        ["a", "b"]
    );
    assert_eq!(
        listed(&api, ListParams::default().labels("app!=ledger")).await,
        ["c"]
    );
    assert_eq!(
        listed(&api, ListParams::default().fields("metadata.name=b")).await,
        ["b"]
    );
}

#[tokio::test]
async fn paginated_list_is_a_consistent_snapshot() {
    let (server, api) = served().await;
    for name in ["a", "b", "c"] {
        create(&api, &cm(name, &[])).await;
    }
    let first = api.list(&ListParams::default().limit(1)).await.unwrap();
    assert_eq!(first.items.len(), 1);
    assert_eq!(first.metadata.remaining_item_count, Some(2));
    api.delete("b", &DeleteParams::default()).await.unwrap();
    let token = first.metadata.continue_.clone().unwrap();
    let rest = api
        .list(&ListParams::default().continue_token(&token))
        .await
        .unwrap();
    let names: Vec<_> = rest
        .items
        .iter()
        .map(|c| c.metadata.name.clone().unwrap())
        .collect();
    assert_eq!(
        names,
        ["b", "c"],
        "pages come from the first page's snapshot"
    );
    assert_eq!(
        rest.metadata.resource_version,
        first.metadata.resource_version
    );
    server.compact_history();
    let st = status(
        api.list(&ListParams::default().continue_token(&token))
            .await,
    );
    assert_eq!(st.code, 410);
}

// ---------------------------------------------------------------- watch

#[tokio::test]
async fn watch_from_an_older_resource_version_replays_history() {
    let (_server, api) = served().await;
    let a = create(&api, &cm("a", &[("k", "1")])).await;
    merge(&api, "a", json!({"data": {"k": "2"}})).await;
    create(&api, &cm("b", &[])).await;
    api.delete("b", &DeleteParams::default()).await.unwrap();
    let mut stream = watch_from(&api, &rv(&a)).await;
    match next_event(&mut stream).await.unwrap() {
        WatchEvent::Modified(cm) => assert_eq!(cm.data.unwrap()["k"], "2"),
        other => panic!("expected MODIFIED, got {other:?}"),
    }
    assert!(
        matches!(next_event(&mut stream).await.unwrap(), WatchEvent::Added(cm) if cm.metadata.name.as_deref() == Some("b"))
    );
    assert!(matches!(
        next_event(&mut stream).await.unwrap(),
        WatchEvent::Deleted(_)
    ));
    // And it goes on live.
    create(&api, &cm("c", &[])).await;
    assert!(
        matches!(next_event(&mut stream).await.unwrap(), WatchEvent::Added(cm) if cm.metadata.name.as_deref() == Some("c"))
    );
}

#[tokio::test]
async fn watch_from_a_compacted_resource_version_is_gone() {
    let (server, api) = served().await;
    let a = create(&api, &cm("a", &[])).await;
    merge(&api, "a", json!({"data": {"k": "2"}})).await;
    server.compact_history();
    let mut stream = watch_from(&api, &rv(&a)).await;
    match next_event(&mut stream).await.unwrap() {
        WatchEvent::Error(st) => assert_eq!((st.code, st.reason.as_str()), (410, "Expired")),
        other => panic!("expected a 410 ERROR event, got {other:?}"),
    }
}

#[tokio::test]
async fn bounded_history_expires_old_resource_versions() {
    let (_server, api) = served_by(TestApiServer::builder().history_limit(2)).await;
    let a = create(&api, &cm("a", &[])).await;
    for i in 0..3 {
        merge(&api, "a", json!({"data": {"i": i.to_string()}})).await;
    }
    let mut stream = watch_from(&api, &rv(&a)).await;
    assert!(
        matches!(next_event(&mut stream).await.unwrap(), WatchEvent::Error(st) if st.code == 410)
    );
}

#[tokio::test]
async fn watch_with_a_selector_sees_objects_leave_it() {
    let (_server, api) = served().await;
    let mut obj = cm("a", &[]);
    obj.metadata.labels = Some(BTreeMap::from([("app".into(), "ledger".into())]));
    create(&api, &obj).await;
    let list = api.list(&ListParams::default()).await.unwrap();
    let wp = WatchParams::default().labels("app=ledger");
    let mut stream = api
        .watch(&wp, &list.metadata.resource_version.unwrap())
        .await
        .unwrap()
        .boxed();
    merge(&api, "a", json!({"metadata": {"labels": {"app": null}}})).await;
    assert!(matches!(
        next_event(&mut stream).await.unwrap(),
        WatchEvent::Deleted(_)
    ));
}

#[tokio::test]
async fn watch_times_out_with_a_bookmark() {
    let (_server, api) = served().await;
    let wp = WatchParams::default().timeout(1);
    let started = std::time::Instant::now();
    let events: Vec<_> = api
        .watch(&wp, "0")
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert!(started.elapsed() >= Duration::from_millis(900));
    assert!(
        matches!(events.last(), Some(WatchEvent::Bookmark(_))),
        "{events:?}"
    );
}

#[tokio::test]
async fn runtime_watcher_sees_a_create_and_an_update() {
    let (_server, api) = served().await;
    let mut stream = watcher(api.clone(), watcher::Config::default()).boxed();
    initial_names(&mut stream).await;
    create(&api, &cm("a", &[("k", "1")])).await;
    match next_event(&mut stream).await.unwrap() {
        watcher::Event::Apply(cm) => assert_eq!(cm.data.unwrap()["k"], "1"),
        other => panic!("expected Apply, got {other:?}"),
    }
    merge(&api, "a", json!({"data": {"k": "2"}})).await;
    match next_event(&mut stream).await.unwrap() {
        watcher::Event::Apply(cm) => assert_eq!(cm.data.unwrap()["k"], "2"),
        other => panic!("expected Apply, got {other:?}"),
    }
}

#[tokio::test]
async fn runtime_watcher_relists_after_410() {
    let (server, api) = served().await;
    let mut stream = watcher(api.clone(), watcher::Config::default()).boxed();
    initial_names(&mut stream).await;
    // The watcher has listed but not yet started its watch; move its position out of history.
    create(&api, &cm("a", &[])).await;
    server.compact_history();
    match next_event(&mut stream).await {
        Err(watcher::Error::WatchError(st)) => assert_eq!(st.code, 410),
        other => panic!("expected the 410 to surface, got {other:?}"),
    }
    // It then relists and finds what it missed.
    let relisted = initial_names(&mut stream).await;
    assert_eq!(relisted, ["a"]);
    assert_eq!(server.requests().count(Verb::List, "configmaps"), 2);
}

#[tokio::test]
async fn streaming_list_watcher_gets_initial_events() {
    let (server, api) = served().await;
    create(&api, &cm("a", &[])).await;
    let config = watcher::Config::default().streaming_lists();
    let mut stream = watcher(api, config).boxed();
    let initial = initial_names(&mut stream).await;
    assert_eq!(initial, ["a"]);
    assert_eq!(
        server.requests().count(Verb::List, "configmaps"),
        0,
        "a streaming list does not list"
    );
}
