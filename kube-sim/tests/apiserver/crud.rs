//! kube-rs against the simulator: CRUD, errors as Status, auth (tokens, client certs), pagination, selectors.

use std::collections::{BTreeMap, BTreeSet};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::authentication::v1::{
    SelfSubjectReview, TokenRequest, TokenRequestSpec, TokenReview, TokenReviewSpec,
};
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret, Service, ServiceAccount};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use kube::{Api, Client};
use kube_sim::testing::{client_for, kubeconfig_with_user, raw, start, status_of};
use serde_json::{Value, json};

fn cm(name: &str, labels: &[(&str, &str)]) -> ConfigMap {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": labels.iter().map(|(k, v)| (k.to_string(), json!(v))).collect::<serde_json::Map<_, _>>()},
        "data": {"k": "v"},
    }))
    .expect("configmap")
}

#[tokio::test]
async fn crud_round_trip() {
    let sim = start().await;
    let api: Api<ConfigMap> = Api::namespaced(sim.client.clone(), "default");
    let created = api
        .create(&PostParams::default(), &cm("one", &[("app", "web")]))
        .await
        .unwrap();
    let meta = &created.metadata;
    assert!(meta.uid.is_some() && meta.creation_timestamp.is_some());
    let rv1: u64 = meta.resource_version.clone().unwrap().parse().unwrap();

    let mut fetched = api.get("one").await.unwrap();
    assert_eq!(fetched.data.as_ref().unwrap()["k"], "v");
    fetched.data = Some(BTreeMap::from([("k".into(), "w".into())]));
    let replaced = api
        .replace("one", &PostParams::default(), &fetched)
        .await
        .unwrap();
    let rv2: u64 = replaced
        .metadata
        .resource_version
        .clone()
        .unwrap()
        .parse()
        .unwrap();
    assert!(rv2 > rv1);

    let patched = api
        .patch(
            "one",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"x": "y"}})),
        )
        .await
        .unwrap();
    assert_eq!(
        patched.data.unwrap(),
        BTreeMap::from([("k".into(), "w".into()), ("x".into(), "y".into())])
    );

    let listed = api.list(&ListParams::default()).await.unwrap();
    assert_eq!(
        listed
            .items
            .iter()
            .filter(|c| c.metadata.name.as_deref() == Some("one"))
            .count(),
        1
    );

    api.delete("one", &DeleteParams::default()).await.unwrap();
    assert_eq!(status_of(api.get("one").await).code, 404);
    assert!(
        sim.server
            .store()
            .get("v1", "ConfigMap", Some("default"), "one")
            .is_none()
    );
}

#[tokio::test]
async fn errors_are_status_objects() {
    let sim = start().await;
    let c = &sim.client;
    let cms = "/api/v1/namespaces/default/configmaps";
    let json_ct = "application/json";
    let body = |v: Value| serde_json::to_vec(&v).unwrap();
    raw(
        c,
        "POST",
        cms,
        json_ct,
        body(json!({"metadata": {"name": "dup"}})),
    )
    .await;
    // (method, path, content-type, body, code, reason, substring of message or field)
    let (cm_dup, bad_labels, bad_fields) = (
        format!("{cms}/dup"),
        format!("{cms}?labelSelector=a%20in%20b"),
        format!("{cms}?fieldSelector=spec.bogus%3Dx"),
    );
    type Case<'a> = (&'a str, &'a str, &'a str, Vec<u8>, u16, &'a str, &'a str);
    let cases: Vec<Case> = vec![
        (
            "POST",
            cms,
            json_ct,
            b"{not json".to_vec(),
            400,
            "BadRequest",
            "not valid JSON",
        ),
        (
            "GET",
            "/apis/widgets.example.com/v1/widgets",
            json_ct,
            vec![],
            404,
            "NotFound",
            "",
        ),
        (
            "GET",
            "/api/v1/namespaces/default/gizmos",
            json_ct,
            vec![],
            404,
            "NotFound",
            "",
        ),
        (
            "POST",
            cms,
            json_ct,
            body(json!({"data": {}})),
            422,
            "Invalid",
            "metadata.name",
        ),
        (
            "POST",
            cms,
            json_ct,
            body(json!({"metadata": {"name": "Bad_Name"}})),
            422,
            "Invalid",
            "metadata.name",
        ),
        (
            "POST",
            cms,
            json_ct,
            body(json!({"kind": "Secret", "metadata": {"name": "x"}})),
            422,
            "Invalid",
            "kind",
        ),
        (
            "POST",
            cms,
            json_ct,
            body(json!({"metadata": {"name": "x", "namespace": "other"}})),
            422,
            "Invalid",
            "metadata.namespace",
        ),
        (
            "POST",
            cms,
            json_ct,
            body(json!({"metadata": {"name": "dup"}})),
            409,
            "AlreadyExists",
            "already exists",
        ),
        (
            "POST",
            "/api/v1/namespaces/nope/configmaps",
            json_ct,
            body(json!({"metadata": {"name": "x"}})),
            404,
            "NotFound",
            "nope",
        ),
        (
            "PATCH",
            &cm_dup,
            "application/xml",
            b"<x/>".to_vec(),
            415,
            "UnsupportedMediaType",
            "",
        ),
        ("PUT", cms, json_ct, body(json!({})), 405, "MethodNotAllowed", ""),
        (
            "GET",
            &bad_labels,
            json_ct,
            vec![],
            400,
            "BadRequest",
            "label selector",
        ),
        (
            "GET",
            &bad_fields,
            json_ct,
            vec![],
            400,
            "BadRequest",
            "spec.bogus",
        ),
        (
            "POST",
            cms,
            json_ct,
            vec![b' '; 4 * 1024 * 1024],
            413,
            "RequestEntityTooLarge",
            "",
        ),
    ];
    for (method, path, ct, payload, code, reason, needle) in cases {
        let (got, status) = raw(c, method, path, ct, payload).await;
        assert_eq!(got, code, "{method} {path}: {status}");
        assert_eq!(status["kind"], "Status", "{method} {path}");
        assert_eq!(status["reason"], reason, "{method} {path}: {status}");
        assert_eq!(status["code"], code, "{method} {path}");
        assert!(
            status.to_string().contains(needle),
            "{method} {path}: {status} lacks {needle:?}"
        );
    }
}

#[tokio::test]
async fn stale_update_conflicts_and_dry_run_writes_nothing() {
    let sim = start().await;
    let api: Api<ConfigMap> = Api::namespaced(sim.client.clone(), "default");
    let first = api.create(&PostParams::default(), &cm("c", &[])).await.unwrap();
    api.patch(
        "c",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"n": "1"}})),
    )
    .await
    .unwrap();
    let status = status_of(api.replace("c", &PostParams::default(), &first).await);
    assert_eq!((status.code, status.reason.as_str()), (409, "Conflict"));

    let dry = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    api.create(&dry, &cm("ghost", &[])).await.unwrap();
    assert_eq!(status_of(api.get("ghost").await).code, 404);
}

#[tokio::test]
async fn status_subresource_and_strategic_merge() {
    let sim = start().await;
    let pods: Api<Pod> = Api::namespaced(sim.client.clone(), "default");
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "app", "image": "a:1"}, {"name": "side", "image": "s:1"}]},
        "status": {"phase": "Running"},
    }))
    .unwrap();
    let created = pods.create(&PostParams::default(), &pod).await.unwrap();
    assert_eq!(
        created.status.unwrap().phase.as_deref(),
        Some("Pending"),
        "create ignores status"
    );
    let patch = json!({"spec": {"containers": [{"name": "app", "image": "a:2"}]}});
    let p = pods
        .patch("p", &PatchParams::default(), &Patch::Strategic(patch))
        .await
        .unwrap();
    let images: Vec<_> = p
        .spec
        .unwrap()
        .containers
        .into_iter()
        .map(|c| c.image.unwrap())
        .collect();
    assert_eq!(images, ["a:2", "s:1"], "containers merge by name");
    assert_eq!(p.metadata.generation, Some(2));

    let st = pods
        .patch_status(
            "p",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Running"}})),
        )
        .await
        .unwrap();
    assert_eq!(st.status.unwrap().phase.as_deref(), Some("Running"));
    let main = pods
        .patch(
            "p",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Failed"}})),
        )
        .await
        .unwrap();
    assert_eq!(
        main.status.unwrap().phase.as_deref(),
        Some("Running"),
        "main resource ignores status"
    );

    let svcs: Api<Service> = Api::namespaced(sim.client.clone(), "default");
    let svc = serde_json::from_value(json!({"metadata": {"name": "s"}, "spec": {"ports": [{"port": 80, "name": "http"}, {"port": 443, "name": "https"}]}})).unwrap();
    svcs.create(&PostParams::default(), &svc).await.unwrap();
    let patched = svcs
        .patch(
            "s",
            &PatchParams::default(),
            &Patch::Strategic(json!({"spec": {"ports": [{"port": 443, "targetPort": 8443}]}})),
        )
        .await
        .unwrap();
    let ports = patched.spec.unwrap().ports.unwrap();
    assert_eq!(ports.len(), 2);
    assert_eq!(ports[1].name.as_deref(), Some("https"));
}

#[tokio::test]
async fn unauthenticated_requests_get_401() {
    let sim = start().await;
    for user in [json!({"token": "not-a-token"}), json!({})] {
        let client = client_for(&kubeconfig_with_user(&sim, user.clone())).await;
        let api: Api<ConfigMap> = Api::namespaced(client, "default");
        let status = status_of(api.list(&ListParams::default()).await);
        assert_eq!(
            (status.code, status.reason.as_str()),
            (401, "Unauthorized"),
            "{user}"
        );
    }
}

async fn whoami(client: Client) -> (String, Vec<String>) {
    let api: Api<SelfSubjectReview> = Api::all(client);
    let review = api
        .create(&PostParams::default(), &SelfSubjectReview::default())
        .await
        .unwrap();
    let info = review.status.unwrap().user_info.unwrap();
    (info.username.unwrap(), info.groups.unwrap_or_default())
}

#[tokio::test]
async fn client_certificates_authenticate() {
    let sim = start().await;
    let (cert, key) = sim.server.issue_client_cert("alice", &["devs", "ops"]).unwrap();
    use base64::Engine;
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let user = json!({"client-certificate-data": b64(&cert), "client-key-data": b64(&key)});
    let client = client_for(&kubeconfig_with_user(&sim, user)).await;
    let (name, groups) = whoami(client.clone()).await;
    assert_eq!(name, "alice");
    assert_eq!(groups, ["devs", "ops", "system:authenticated"]);
    Api::<ConfigMap>::namespaced(client, "default")
        .list(&ListParams::default())
        .await
        .unwrap();
}

async fn can_list(sim: &kube_sim::testing::Sim, token: &str) -> bool {
    let client = client_for(&kubeconfig_with_user(sim, json!({"token": token}))).await;
    Api::<ConfigMap>::namespaced(client, "default")
        .list(&ListParams::default())
        .await
        .is_ok()
}

async fn review(client: &Client, token: &str, audiences: Option<Vec<String>>) -> Value {
    let api: Api<TokenReview> = Api::all(client.clone());
    let tr = TokenReview {
        spec: TokenReviewSpec {
            token: Some(token.into()),
            audiences,
        },
        ..TokenReview::default()
    };
    serde_json::to_value(api.create(&PostParams::default(), &tr).await.unwrap().status).unwrap()
}

#[tokio::test]
async fn service_account_tokens() {
    let sim = start().await;
    let sas: Api<ServiceAccount> = Api::namespaced(sim.client.clone(), "default");
    sas.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "bot"}})).unwrap(),
    )
    .await
    .unwrap();
    let req = TokenRequest {
        spec: TokenRequestSpec {
            expiration_seconds: Some(1200),
            ..Default::default()
        },
        ..Default::default()
    };
    let issued = sas
        .create_token_request("bot", &PostParams::default(), &req)
        .await
        .unwrap()
        .status
        .unwrap();
    assert!(
        can_list(&sim, &issued.token).await,
        "TokenRequest token works as bearer"
    );
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let expiry = issued.expiration_timestamp.0.as_second() - now;
    assert!(
        (1190..=1200).contains(&expiry),
        "expiration honours spec.expirationSeconds: {expiry}"
    );

    let ok = review(&sim.client, &issued.token, None).await;
    assert_eq!(ok["authenticated"], true);
    assert_eq!(ok["user"]["username"], "system:serviceaccount:default:bot");
    assert_eq!(
        ok["user"]["groups"],
        json!([
            "system:serviceaccounts",
            "system:serviceaccounts:default",
            "system:authenticated"
        ])
    );
    assert_ne!(
        review(&sim.client, &issued.token, Some(vec!["istio-ca".into()])).await["authenticated"],
        true
    );
    assert_ne!(review(&sim.client, "garbage", None).await["authenticated"], true);

    // Legacy token Secret: filled by the token controller, dies with the Secret.
    let secrets: Api<Secret> = Api::namespaced(sim.client.clone(), "default");
    let secret = json!({"metadata": {"name": "bot-token", "annotations": {"kubernetes.io/service-account.name": "bot"}},
        "type": "kubernetes.io/service-account-token"});
    secrets
        .create(&PostParams::default(), &serde_json::from_value(secret).unwrap())
        .await
        .unwrap();
    let data = secrets.get("bot-token").await.unwrap().data.unwrap();
    assert_eq!(data["namespace"].0, b"default");
    assert_eq!(data["ca.crt"].0, sim.server.ca_pem().as_bytes());
    let legacy = String::from_utf8(data["token"].0.clone()).unwrap();
    assert!(can_list(&sim, &legacy).await);
    secrets
        .delete("bot-token", &DeleteParams::default())
        .await
        .unwrap();
    assert!(!can_list(&sim, &legacy).await, "token dies with its Secret");

    sas.delete("bot", &DeleteParams::default()).await.unwrap();
    assert!(
        !can_list(&sim, &issued.token).await,
        "token dies with its ServiceAccount"
    );
    assert_ne!(
        review(&sim.client, &issued.token, None).await["authenticated"],
        true
    );
}

#[tokio::test]
async fn pagination_is_a_consistent_snapshot() {
    let sim = start().await;
    for i in 0..50 {
        sim.server.store().apply(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": format!("cm-{i:02}"), "namespace": "pages"}})).unwrap();
    }
    let api: Api<ConfigMap> = Api::namespaced(sim.client.clone(), "pages");
    let mut seen = Vec::new();
    let mut lp = ListParams::default().limit(7);
    let mut pages = 0;
    loop {
        let page = api.list(&lp).await.unwrap();
        pages += 1;
        seen.extend(page.items.into_iter().map(|c| c.metadata.name.unwrap()));
        if pages == 2 {
            // Changes between pages do not show up in the snapshot.
            sim.server
                .store()
                .delete("v1", "ConfigMap", Some("pages"), "cm-40")
                .unwrap();
            sim.server.store().apply(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm-99", "namespace": "pages"}})).unwrap();
        }
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(token) => lp = lp.continue_token(&token),
            None => break,
        }
    }
    // Every namespace also holds the root CA ConfigMap the publisher puts there.
    let mut want: Vec<String> = (0..50).map(|i| format!("cm-{i:02}")).collect();
    want.push("kube-root-ca.crt".into());
    assert_eq!(seen, want);
    assert_eq!(pages, 8);

    // A continue token older than the kept history: 410 with a fresh token.
    let first = api.list(&ListParams::default().limit(7)).await.unwrap();
    sim.server.store().apply(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "late", "namespace": "pages"}})).unwrap();
    sim.server.store().compact();
    let status = status_of(
        api.list(
            &ListParams::default()
                .limit(7)
                .continue_token(&first.metadata.continue_.unwrap()),
        )
        .await,
    );
    assert_eq!((status.code, status.reason.as_str()), (410, "Expired"));
    assert!(
        status
            .metadata
            .and_then(|m| m.continue_)
            .is_some_and(|c| !c.is_empty())
    );
}

#[tokio::test]
async fn selectors_filter_lists_and_watches() {
    let sim = start().await;
    let api: Api<ConfigMap> = Api::namespaced(sim.client.clone(), "default");
    for (name, labels) in [
        ("a", vec![("app", "web"), ("tier", "front")]),
        ("b", vec![("app", "api")]),
        ("c", vec![]),
    ] {
        api.create(&PostParams::default(), &cm(name, &labels))
            .await
            .unwrap();
    }
    let names = |items: Vec<ConfigMap>| {
        items
            .into_iter()
            .map(|c| c.metadata.name.unwrap())
            .collect::<BTreeSet<_>>()
    };
    let cases = [
        ("app=web", "", vec!["a"]),
        ("app in (web,api)", "", vec!["a", "b"]),
        // kube-root-ca.crt, which every namespace has, carries no labels.
        ("app notin (web)", "", vec!["b", "c", "kube-root-ca.crt"]),
        ("!app", "", vec!["c", "kube-root-ca.crt"]),
        ("app,tier!=back", "", vec!["a", "b"]),
        ("app,tier=front", "", vec!["a"]),
        ("", "metadata.name=b", vec!["b"]),
        (
            "",
            "metadata.name!=b,metadata.namespace=default",
            vec!["a", "c", "kube-root-ca.crt"],
        ),
    ];
    for (labels, fields, want) in cases {
        let lp = ListParams::default().labels(labels).fields(fields);
        let got = names(api.list(&lp).await.unwrap().items);
        assert_eq!(
            got,
            want.into_iter().map(String::from).collect(),
            "labels {labels:?} fields {fields:?}"
        );
    }

    let stream = api
        .watch(&WatchParams::default().labels("app=web"), "0")
        .await
        .unwrap();
    let mut stream = stream.boxed();
    let first = stream.try_next().await.unwrap().unwrap();
    assert!(matches!(first, WatchEvent::Added(ref c) if c.metadata.name.as_deref() == Some("a")));
    api.patch(
        "a",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"app": "gone"}}})),
    )
    .await
    .unwrap();
    api.patch(
        "b",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"app": "web"}}})),
    )
    .await
    .unwrap();
    let left = stream.try_next().await.unwrap().unwrap();
    assert!(
        matches!(left, WatchEvent::Deleted(ref c) if c.metadata.name.as_deref() == Some("a")),
        "{left:?}"
    );
    let entered = stream.try_next().await.unwrap().unwrap();
    assert!(
        matches!(entered, WatchEvent::Added(ref c) if c.metadata.name.as_deref() == Some("b")),
        "{entered:?}"
    );

    let pods: Api<Pod> = Api::namespaced(sim.client.clone(), "default");
    for (name, phase, node) in [("p1", "Running", "n1"), ("p2", "Pending", "n2")] {
        sim.server
            .store()
            .apply(
                json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "busybox"}]}, "status": {"phase": phase}}),
            )
            .unwrap();
    }
    let running = pods
        .list(&ListParams::default().fields("status.phase=Running"))
        .await
        .unwrap();
    assert_eq!(running.items.len(), 1);
    let on_n2 = pods
        .list(&ListParams::default().fields("spec.nodeName==n2"))
        .await
        .unwrap();
    assert_eq!(on_n2.items[0].metadata.name.as_deref(), Some("p2"));

    api.delete_collection(&DeleteParams::default(), &ListParams::default().labels("app"))
        .await
        .unwrap();
    assert_eq!(
        names(api.list(&ListParams::default()).await.unwrap().items),
        ["c".to_string(), "kube-root-ca.crt".to_string()].into()
    );
}

fn svc(name: &str, cluster_ip: Option<&str>) -> Service {
    let mut spec = json!({"ports": [{"port": 80}]});
    if let Some(ip) = cluster_ip {
        spec["clusterIP"] = json!(ip);
    }
    serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).expect("service")
}

#[tokio::test]
async fn cluster_ips_are_unique_in_range_and_immutable() {
    let sim = start().await;
    let api: Api<Service> = Api::namespaced(sim.client.clone(), "default");
    let pp = PostParams::default();
    let ip_of = |s: &Service| s.spec.as_ref().and_then(|s| s.cluster_ip.clone()).unwrap();

    let a = api.create(&pp, &svc("a", Some("10.96.0.10"))).await.unwrap();
    assert_eq!(ip_of(&a), "10.96.0.10");
    let refused = |e: kube::Error, want: &str| match e {
        kube::Error::Api(s) => {
            assert_eq!((s.code, s.reason.as_str()), (422, "Invalid"), "{s:?}");
            assert!(s.message.contains(want), "{}", s.message);
        }
        other => panic!("{other:?}"),
    };
    refused(
        api.create(&pp, &svc("b", Some("10.96.0.10"))).await.unwrap_err(),
        "failed to allocate IP 10.96.0.10: provided IP is already allocated",
    );
    refused(
        api.create(&pp, &svc("b", Some("172.16.0.1"))).await.unwrap_err(),
        "The range of valid IPs is 10.96.0.0/12",
    );

    // Once set it stays: a change is refused, an update that leaves it out keeps it.
    let mut changed = api.get("a").await.unwrap();
    changed.spec.as_mut().unwrap().cluster_ip = Some("10.96.0.11".into());
    changed.spec.as_mut().unwrap().cluster_ips = Some(vec!["10.96.0.11".into()]);
    refused(
        api.replace("a", &pp, &changed).await.unwrap_err(),
        "may not change once set",
    );
    let patched = api
        .patch(
            "a",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"clusterIP": null, "clusterIPs": null}})),
        )
        .await
        .unwrap();
    assert_eq!(ip_of(&patched), "10.96.0.10");

    // Allocated ones never collide, with each other or with explicit ones; a deleted one is free again.
    let mut seen = BTreeSet::from(["10.96.0.10".to_string()]);
    for i in 0..200 {
        let s = api.create(&pp, &svc(&format!("dyn-{i}"), None)).await.unwrap();
        assert!(seen.insert(ip_of(&s)), "{} handed out twice", ip_of(&s));
    }
    api.delete("a", &DeleteParams::default()).await.unwrap();
    let b = api.create(&pp, &svc("b", Some("10.96.0.10"))).await.unwrap();
    assert_eq!(ip_of(&b), "10.96.0.10");
}
