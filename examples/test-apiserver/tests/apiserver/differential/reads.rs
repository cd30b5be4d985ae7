//! The walk's custom resources, lists and watches.

use super::*;

pub(super) async fn custom_resources(p: &mut Probe<'_>) {
    let w = p.name("WIDGET");
    let missing = p.name("MISSING_WIDGET");
    let path = format!("/apis/{GROUP}/v1/namespaces/{}/widgets", p.t.namespace);
    let created = p
        .post(
            &path,
            json!({"apiVersion": format!("{GROUP}/v1"), "kind": "Widget", "metadata": {"name": w},
                   "spec": {"size": 1}, "status": {"phase": "set on create"}}),
        )
        .await;
    p.record_object(
        "cr/create drops status",
        created.clone(),
        &["/spec", "/status", "/metadata/generation"],
    );
    let first = created.1;
    p.record_status("cr/get missing", p.get(&p.widget_path(&missing)).await);
    let status = p.merge(&format!("{}/status", p.widget_path(&w)), json!({"spec": {"size": 99}, "metadata": {"labels": {"via": "status"}}, "status": {"phase": "Ready"}}))
        .await;
    p.record_object(
        "cr/a status write changes only status",
        status,
        &[
            "/spec",
            "/status",
            "/metadata/labels",
            "/metadata/generation",
        ],
    );
    let spec = p
        .merge(
            &p.widget_path(&w),
            json!({"spec": {"size": 2}, "status": {"phase": "from the main resource"}}),
        )
        .await;
    p.record_object(
        "cr/a main write keeps status and moves the generation",
        spec,
        &["/spec", "/status", "/metadata/generation"],
    );
    let labels = p
        .merge(
            &p.widget_path(&w),
            json!({"metadata": {"labels": {"a": "b"}}}),
        )
        .await;
    p.record_object(
        "cr/a metadata write keeps the generation",
        labels,
        &["/metadata/generation"],
    );
    p.record_status(
        "cr/replace without a resourceVersion",
        p.put(
            &p.widget_path(&w),
            json!({"apiVersion": format!("{GROUP}/v1"), "kind": "Widget", "metadata": {"name": w}, "spec": {"size": 3}}),
        )
        .await,
    );
    p.record_status(
        "cr/strategic merge patch",
        p.patch(
            &p.widget_path(&w),
            "application/strategic-merge-patch+json",
            json!({"spec": {"size": 4}}),
        )
        .await,
    );
    for op in ["replace", "test"] {
        let answer = p
            .json_patch(
                &format!("{}/status", p.widget_path(&w)),
                json!([{"op": op, "path": "/metadata/resourceVersion", "value": rv(&first)},
                       {"op": "add", "path": "/status/phase", "value": "stale"}]),
            )
            .await;
        p.record_status(
            &format!("cr/status JSON patch with a stale resourceVersion {op} op"),
            answer,
        );
    }
    p.record_status(
        "cr/unknown subresource",
        p.get(&format!("{}/nosuch", p.widget_path(&w))).await,
    );
    // Finalizers hold deletion until the last one goes.
    let held = p
        .merge(
            &p.widget_path(&w),
            json!({"metadata": {"finalizers": ["difftest.example.com/hold"]}}),
        )
        .await;
    assert_eq!(held.0, 200, "{held:?}");
    let deleting = p.delete(&p.widget_path(&w), None).await;
    p.record(
        "cr/delete with a finalizer marks the object",
        json!({"code": deleting.0, "kind": deleting.1["kind"],
               "deletionTimestamp set": deleting.1["metadata"]["deletionTimestamp"].is_string()}),
    );
    p.record_status(
        "cr/a new finalizer on an object being deleted",
        p.merge(&p.widget_path(&w), json!({"metadata": {"finalizers": ["difftest.example.com/hold", "difftest.example.com/more"]}}))
        .await,
    );
    let released = p
        .merge(
            &p.widget_path(&w),
            json!({"metadata": {"finalizers": null}}),
        )
        .await;
    p.record(
        "cr/removing the last finalizer deletes",
        json!({"code": released.0, "then get": p.get(&p.widget_path(&w)).await.0}),
    );
}

pub(super) async fn lists(p: &mut Probe<'_>) {
    let mut names = Vec::new();
    for (n, labels) in [
        json!({"tier": "a", "team": "x"}),
        json!({"tier": "b", "team": "x"}),
        json!({"tier": "c"}),
        json!({}),
        json!({"tier": "a"}),
    ]
    .into_iter()
    .enumerate()
    {
        let name = p.name(&format!("LISTED_{n}"));
        let mut object = cm(&name, json!({}));
        object["metadata"]["labels"] = labels;
        let (code, body) = p.post(&p.cms_path(), object).await;
        assert_eq!(code, 201, "{body}");
        names.push(name);
    }
    for selector in [
        "labelSelector=tier%3Da",
        "labelSelector=tier%3D%3Da",
        "labelSelector=tier%21%3Da",
        "labelSelector=team",
        "labelSelector=%21team",
        "labelSelector=tier+in+%28a%2Cb%29",
        "labelSelector=tier+notin+%28a%29",
        "fieldSelector=metadata.name%3D",
    ] {
        let query = if selector.ends_with("%3D") {
            format!("{selector}{}", names[2])
        } else {
            selector.to_owned()
        };
        let (code, body) = p.get(&format!("{}?{query}", p.cms_path())).await;
        let mut listed: Vec<_> = body["items"]
            .as_array()
            .map(|items| {
                items
                    .iter()
                    .map(|i| i["metadata"]["name"].as_str().unwrap().to_owned())
                    .collect()
            })
            .unwrap_or_default();
        // The real namespace also holds kube-root-ca.crt (published by a controller-manager,
        // which a test environment does not run; it may hold it on a full cluster).
        listed.retain(|n| n != "kube-root-ca.crt");
        listed.sort();
        p.record(
            &format!("list/{}", selector.replace('%', "_")),
            json!({"code": code, "kind": body["kind"], "names": listed}),
        );
    }
    p.record_status(
        "list/unsupported field selector",
        p.get(&format!("{}?fieldSelector=data.x%3Dy", p.cms_path()))
            .await,
    );
    // Pages: a label selector keeps other objects out (remainingItemCount is then omitted).
    let (code, page) = p
        .get(&format!("{}?labelSelector=tier&limit=2", p.cms_path()))
        .await;
    let token = page["metadata"]["continue"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let (_, rest) = p
        .get(&format!(
            "{}?labelSelector=tier&limit=2&continue={token}",
            p.cms_path()
        ))
        .await;
    let (_, last) = p
        .get(&format!(
            "{}?labelSelector=tier&limit=2&continue={}",
            p.cms_path(),
            rest["metadata"]["continue"].as_str().unwrap_or_default()
        ))
        .await;
    p.record(
        "list/pages with a selector",
        json!({
            "code": code,
            "sizes": [page["items"].as_array().map(Vec::len), rest["items"].as_array().map(Vec::len), last["items"].as_array().map(Vec::len)],
            "continue on the last page": last["metadata"].get("continue").is_some(),
            "remainingItemCount": [page["metadata"].get("remainingItemCount"), rest["metadata"].get("remainingItemCount")],
        }),
    );
    p.record_status(
        "list/a malformed continue token",
        p.get(&format!("{}?limit=2&continue=garbage", p.cms_path()))
            .await,
    );
    for name in names {
        p.delete(&p.cm_path(&name), None).await;
    }
}

pub(super) async fn watches(p: &mut Probe<'_>) {
    let api: Api<ConfigMap> = Api::namespaced(p.t.client.clone(), &p.t.namespace);
    let (_, list) = p.get(&p.cms_path()).await;
    let from = list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_owned();
    let w = p.name("WATCHED");
    let mut stream = api
        .watch(
            &WatchParams::default()
                .labels("difftest=watched")
                .timeout(30),
            &from,
        )
        .await
        .unwrap()
        .boxed();
    let mut object = cm(&w, json!({"n": "1"}));
    object["metadata"]["labels"] = json!({"difftest": "watched"});
    p.post(&p.cms_path(), object).await;
    p.merge(&p.cm_path(&w), json!({"data": {"n": "2"}})).await;
    p.merge(
        &p.cm_path(&w),
        json!({"metadata": {"labels": {"difftest": "left"}}}),
    )
    .await;
    p.merge(
        &p.cm_path(&w),
        json!({"metadata": {"labels": {"difftest": "watched"}}}),
    )
    .await;
    api.delete(&w, &DeleteParams::default()).await.unwrap();
    let mut events = Vec::new();
    while events.len() < 5 {
        let event = tokio::time::timeout(Duration::from_secs(10), stream.next())
            .await
            .expect("no watch event within 10 s")
            .expect("the watch ended")
            .unwrap();
        let seen = match event {
            WatchEvent::Added(cm) => json!(["ADDED", cm.data]),
            WatchEvent::Modified(cm) => json!(["MODIFIED", cm.data]),
            WatchEvent::Deleted(cm) => json!(["DELETED", cm.data]),
            WatchEvent::Bookmark(_) => continue,
            WatchEvent::Error(e) => json!(["ERROR", e.code, e.reason]),
        };
        events.push(seen);
    }
    p.record(
        "watch/from a list's resourceVersion with a label selector",
        json!(events),
    );
    // A resourceVersion older than the server keeps: on the real server rv 1 is long gone from
    // the watch cache; the double forgets its history as etcd compaction would.
    if let Some(double) = &p.t.double {
        double.compact_history();
    }
    let (code, body) = p
        .get(&format!(
            "{}?watch=true&resourceVersion=1&timeoutSeconds=5",
            p.cms_path()
        ))
        .await;
    let first_event = match &body {
        Value::String(lines) => {
            serde_json::from_str(lines.lines().next().unwrap_or("null")).unwrap_or(Value::Null)
        }
        other => other.clone(),
    };
    let object = &first_event["object"];
    p.record(
        OLD_RV_WATCH,
        json!({"code": code, "type": first_event["type"], "object": {
            "kind": object["kind"], "code": object["code"], "reason": object["reason"],
            "message": mask(object["message"].as_str().unwrap_or_default()),
        }}),
    );
}
