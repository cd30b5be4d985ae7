//! The walk's writes: ConfigMap errors and preconditions, patches, size limits
//! and Leases.

use super::*;

pub(super) async fn configmap_errors(p: &mut Probe<'_>) {
    let a = p.name("A");
    let missing = p.name("MISSING");
    let created = p.post(&p.cms_path(), cm(&a, json!({"k": "v"}))).await;
    p.record_object("configmap/create", created.clone(), &["/kind", "/data"]);
    let first = created.1;
    p.record_status(
        "configmap/create of an existing name",
        p.post(&p.cms_path(), cm(&a, json!({}))).await,
    );
    p.record_status("configmap/get missing", p.get(&p.cm_path(&missing)).await);
    p.record_status(
        "configmap/replace missing",
        p.put(&p.cm_path(&missing), cm(&missing, json!({}))).await,
    );
    p.record_status(
        "configmap/merge patch missing",
        p.merge(&p.cm_path(&missing), json!({"data": {"x": "y"}}))
            .await,
    );
    p.record_status(
        "configmap/delete missing",
        p.delete(&p.cm_path(&missing), None).await,
    );
    // Move the object on, so that the first resourceVersion is stale.
    let (_, moved) = p.merge(&p.cm_path(&a), json!({"data": {"k": "v2"}})).await;
    assert_ne!(rv(&moved), rv(&first));
    p.record_status(
        "configmap/merge patch carrying a stale resourceVersion",
        p.merge(
            &p.cm_path(&a),
            json!({"metadata": {"resourceVersion": rv(&first)}, "data": {"k": "v3"}}),
        )
        .await,
    );
    let mut stale = first.clone();
    stale["data"] = json!({"k": "v4"});
    p.record_status(
        "configmap/replace carrying a stale resourceVersion",
        p.put(&p.cm_path(&a), stale).await,
    );
    let mut wrong_uid = moved.clone();
    wrong_uid["metadata"]["uid"] = json!("00000000-0000-0000-0000-000000000000");
    p.record_status(
        "configmap/merge patch carrying another uid",
        p.merge(
            &p.cm_path(&a),
            json!({"metadata": {"uid": "00000000-0000-0000-0000-000000000000"}}),
        )
        .await,
    );
    p.record_status(
        "configmap/replace carrying another uid",
        p.put(&p.cm_path(&a), wrong_uid.clone()).await,
    );
    p.record_status(
        "configmap/unknown subresource",
        p.get(&format!("{}/nosuch", p.cm_path(&a))).await,
    );
    let unconditional = p.put(&p.cm_path(&a), cm(&a, json!({"k": "v5"}))).await;
    p.record_object(
        "configmap/replace without a resourceVersion",
        unconditional,
        &["/data"],
    );
    p.record_status(
        "configmap/delete with a stale resourceVersion precondition",
        p.delete(
            &p.cm_path(&a),
            Some(json!({"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": {"resourceVersion": rv(&first)}})),
        )
        .await,
    );
    p.record_status(
        "configmap/delete with another uid precondition",
        p.delete(
            &p.cm_path(&a),
            Some(json!({"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": {"uid": "00000000-0000-0000-0000-000000000000"}})),
        )
        .await,
    );
    p.record_status(
        "configmap/malformed JSON body",
        p.send(
            "POST",
            &p.cms_path(),
            "application/json",
            Body::Raw(b"{\"metadata\": ".to_vec()),
        )
        .await,
    );
    let bad = p.name("BAD_KEY");
    p.record_status(
        "configmap/invalid key",
        p.post(&p.cms_path(), cm(&bad, json!({"not a key": "v"})))
            .await,
    );
    p.record_status(
        "configmap/invalid name",
        p.post(&p.cms_path(), cm("Not_A_Name", json!({}))).await,
    );
    p.record_status("configmap/delete", p.delete(&p.cm_path(&a), None).await);
    p.record_status(
        "path/unknown resource",
        p.get(&format!(
            "/api/v1/namespaces/{}/nosuchthings",
            p.t.namespace
        ))
        .await,
    );
}

pub(super) async fn patches(p: &mut Probe<'_>) {
    let a = p.name("PATCHED");
    let (_, created) = p
        .post(
            &p.cms_path(),
            cm(&a, json!({"keep": "1", "drop": "2", "change": "3"})),
        )
        .await;
    let merged = p
        .merge(
            &p.cm_path(&a),
            json!({"data": {"drop": null, "change": "4", "new": "5"}}),
        )
        .await;
    p.record_object(
        "patch/merge: null removes, others merge",
        merged,
        &["/data"],
    );
    let (_, now) = p.get(&p.cm_path(&a)).await;
    let same = p
        .merge(&p.cm_path(&a), json!({"data": {"change": "4"}}))
        .await;
    p.record(
        "patch/merge that changes nothing keeps the resourceVersion",
        json!({"code": same.0, "same resourceVersion": rv(&same.1) == rv(&now)}),
    );
    assert_ne!(rv(&now), rv(&created));
    let json_patch = p
        .json_patch(
            &p.cm_path(&a),
            json!([
                {"op": "test", "path": "/data/keep", "value": "1"},
                {"op": "add", "path": "/data/added", "value": "6"},
                {"op": "replace", "path": "/data/change", "value": "7"},
                {"op": "remove", "path": "/data/new"},
                {"op": "copy", "from": "/data/keep", "path": "/data/copied"},
                {"op": "move", "from": "/data/copied", "path": "/data/moved"},
            ]),
        )
        .await;
    p.record_object(
        "patch/json: test, add, replace, remove, copy, move",
        json_patch,
        &["/data"],
    );
    p.record_status(
        "patch/json: a failing test op",
        p.json_patch(&p.cm_path(&a), json!([{"op": "test", "path": "/data/keep", "value": "other"}, {"op": "add", "path": "/data/x", "value": "y"}]))
        .await,
    );
    p.record_status(
        "patch/json: remove of a missing path",
        p.json_patch(
            &p.cm_path(&a),
            json!([{"op": "remove", "path": "/data/nope"}]),
        )
        .await,
    );
    p.record_status(
        "patch/json: not an array",
        p.json_patch(&p.cm_path(&a), json!({"op": "add"})).await,
    );
    p.record_status(
        "patch/json: stale resourceVersion set by a replace op",
        p.json_patch(&p.cm_path(&a), json!([{"op": "replace", "path": "/metadata/resourceVersion", "value": rv(&created)}, {"op": "add", "path": "/data/x", "value": "y"}]))
        .await,
    );
    let strategic = p
        .patch(
            &p.cm_path(&a),
            "application/strategic-merge-patch+json",
            json!({"data": {"keep": null, "s": "8"}}),
        )
        .await;
    p.record_object(
        "patch/strategic merge on a ConfigMap's data",
        strategic,
        &["/data"],
    );
    p.record_status(
        "patch/unsupported content type",
        p.patch(&p.cm_path(&a), "text/plain", json!({})).await,
    );
    let applied_name = p.name("APPLIED");
    p.record_status(
        "patch/apply without a field manager",
        p.patch(
            &p.cm_path(&applied_name),
            "application/apply-patch+yaml",
            cm(&applied_name, json!({"a": "1"})),
        )
        .await,
    );
    let applied = p
        .patch(
            &format!("{}?fieldManager=difftest", p.cm_path(&applied_name)),
            "application/apply-patch+yaml",
            cm(&applied_name, json!({"a": "1"})),
        )
        .await;
    p.record_object("patch/apply creates", applied, &["/data"]);
    p.delete(&p.cm_path(&a), None).await;
    p.delete(&p.cm_path(&applied_name), None).await;
}

pub(super) async fn sizes(p: &mut Probe<'_>) {
    const MIB: usize = 1024 * 1024;
    // Values of exactly 1 MiB, with keys beside them.
    let at = p.name("AT_LIMIT");
    let answer = p
        .post(
            &p.cms_path(),
            cm(
                &at,
                json!({"a": "x".repeat(MIB - 10), "bb": "y".repeat(10)}),
            ),
        )
        .await;
    p.record(
        "size/ConfigMap values of exactly 1 MiB, keys beside them",
        json!({"code": answer.0}),
    );
    let over = p.name("OVER_LIMIT");
    p.record_status(
        "size/ConfigMap values one byte over 1 MiB",
        p.post(&p.cms_path(), cm(&over, json!({"a": "x".repeat(MIB + 1)})))
            .await,
    );
    let binary = p.name("BINARY");
    // binaryData counts decoded: 786432 bytes of base64 decode to 589824, plus 458753 of data.
    p.record_status(
        "size/ConfigMap binaryData counts decoded",
        p.post(
            &p.cms_path(),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": binary},
                   "data": {"a": "x".repeat(458_753)}, "binaryData": {"b": "AAAA".repeat(196_608)}}),
        )
        .await,
    );
    p.delete(&p.cm_path(&at), None).await;
    // Request bodies above the API server's 3 MiB limit.
    let huge = p.name("HUGE");
    p.record_status(
        "size/request body above 3 MiB",
        p.post(
            &p.cms_path(),
            cm(&huge, json!({"a": "x".repeat(3 * MIB + 1)})),
        )
        .await,
    );
    // Objects etcd refuses: custom resources are stored as JSON.
    let big = p.name("BIG_WIDGET");
    let path = format!("/apis/{GROUP}/v1/namespaces/{}/widgets", p.t.namespace);
    let widget = |name: &str, bytes: usize| json!({"apiVersion": format!("{GROUP}/v1"), "kind": "Widget", "metadata": {"name": name}, "spec": {"blob": "x".repeat(bytes)}});
    p.record_status(
        "size/custom resource above etcd's 1.5 MiB request limit",
        p.post(&path, widget(&big, 1_600_000)).await,
    );
    p.record_status(
        "size/custom resource above the API server's 2 MiB etcd client limit",
        p.post(&path, widget(&big, 2_300_000)).await,
    );
}

pub(super) async fn leases(p: &mut Probe<'_>) {
    let l = p.name("LEASE");
    let missing = p.name("MISSING_LEASE");
    let path = format!(
        "/apis/coordination.k8s.io/v1/namespaces/{}/leases",
        p.t.namespace
    );
    let lease = |name: &str, holder: &str| {
        json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": name},
               "spec": {"holderIdentity": holder, "leaseDurationSeconds": 30}})
    };
    let (_, first) = p.post(&path, lease(&l, "a")).await;
    p.record_status(
        "lease/create of an existing name",
        p.post(&path, lease(&l, "b")).await,
    );
    p.record_status("lease/get missing", p.get(&p.lease_path(&missing)).await);
    let moved = p
        .merge(&p.lease_path(&l), json!({"spec": {"holderIdentity": "b"}}))
        .await;
    p.record_object("lease/merge patch", moved, &["/spec/holderIdentity"]);
    let mut stale = first.clone();
    stale["spec"]["holderIdentity"] = json!("c");
    p.record_status(
        "lease/replace carrying a stale resourceVersion",
        p.put(&p.lease_path(&l), stale).await,
    );
    p.record_status("lease/delete", p.delete(&p.lease_path(&l), None).await);
}
