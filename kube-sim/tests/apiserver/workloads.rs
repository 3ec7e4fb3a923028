//! The workload controllers through kube-rs: Deployments own ReplicaSets own Pods, pods are scheduled
//! and started, Services get EndpointSlices, `/scale` works, NodePorts are allocated, and every cluster
//! has `default/kubernetes`.

use std::collections::BTreeSet;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{Node, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use kube_sim::testing::{raw, start, status_of};
use serde_json::{Value, json};

async fn create<K>(api: &Api<K>, body: Value) -> K
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    api.create(&PostParams::default(), &serde_json::from_value(body).unwrap())
        .await
        .unwrap()
}

async fn node(client: &Client, name: &str, zone: &str) {
    let nodes: Api<Node> = Api::all(client.clone());
    let node = create(
        &nodes,
        json!({"metadata": {"name": name, "labels": {"topology.kubernetes.io/zone": zone}}}),
    )
    .await;
    // Status is the kubelet's: a new node reports Ready; the status subresource adds its address.
    let ip = format!("172.18.0.{}", name.trim_start_matches("n"));
    let mut status = serde_json::to_value(node.status.unwrap()).unwrap();
    status["addresses"] = json!([{"type": "InternalIP", "address": ip}]);
    nodes
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": status})),
        )
        .await
        .unwrap();
}

fn deployment(name: &str, replicas: i32, image: &str) -> Value {
    json!({"metadata": {"name": name},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}},
                              "spec": {"containers": [{"name": "c", "image": image, "ports": [{"name": "http", "containerPort": 8080}]}]}}}})
}

async fn slice_ips(client: &Client, service: &str) -> BTreeSet<String> {
    let slices: Api<EndpointSlice> = Api::namespaced(client.clone(), "default");
    let list = slices
        .list(&ListParams::default().labels(&format!("kubernetes.io/service-name={service}")))
        .await
        .unwrap();
    list.items
        .iter()
        .flat_map(|s| s.endpoints.iter().flat_map(|e| e.addresses.clone()))
        .collect()
}

#[tokio::test]
async fn deployment_rollout_scale_and_endpoints() {
    let sim = start().await;
    let c = &sim.client;
    node(c, "n2", "z-a").await;
    node(c, "n3", "z-b").await;
    let deploys: Api<Deployment> = Api::namespaced(c.clone(), "default");
    let rss: Api<ReplicaSet> = Api::namespaced(c.clone(), "default");
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    let services: Api<Service> = Api::namespaced(c.clone(), "default");
    create(&deploys, deployment("web", 3, "nginx:1")).await;
    create(
        &services,
        json!({"metadata": {"name": "web"},
        "spec": {"selector": {"app": "web"}, "ports": [{"name": "http", "port": 80, "targetPort": "http"}]}}),
    )
    .await;

    let d = deploys.get("web").await.unwrap();
    let status = d.status.clone().unwrap();
    assert_eq!(
        (
            status.replicas,
            status.updated_replicas,
            status.available_replicas
        ),
        (Some(3), Some(3), Some(3))
    );
    assert_eq!(status.observed_generation, d.metadata.generation);
    let reasons: Vec<_> = status
        .conditions
        .unwrap()
        .iter()
        .map(|c| (c.type_.clone(), c.reason.clone().unwrap()))
        .collect();
    assert_eq!(
        reasons,
        [
            ("Available".into(), "MinimumReplicasAvailable".into()),
            ("Progressing".into(), "NewReplicaSetAvailable".into())
        ]
    );
    assert_eq!(
        d.metadata.annotations.unwrap()["deployment.kubernetes.io/revision"],
        "1"
    );

    let rs_list = rss.list(&ListParams::default()).await.unwrap().items;
    assert_eq!(rs_list.len(), 1);
    let rs = &rs_list[0];
    let hash = rs.metadata.labels.as_ref().unwrap()["pod-template-hash"].clone();
    assert_eq!(rs.metadata.name.as_deref(), Some(format!("web-{hash}").as_str()));
    let owner = &rs.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.controller, owner.block_owner_deletion),
        ("Deployment", Some(true), Some(true))
    );
    assert_eq!(rs.status.as_ref().unwrap().ready_replicas, Some(3));

    let pod_list = pods
        .list(&ListParams::default().labels("app=web"))
        .await
        .unwrap()
        .items;
    assert_eq!(pod_list.len(), 3);
    let mut nodes = BTreeSet::new();
    for p in &pod_list {
        let name = p.metadata.name.clone().unwrap();
        assert!(
            name.starts_with(&format!("web-{hash}-")) && name.len() == format!("web-{hash}-").len() + 5,
            "{name}"
        );
        let st = p.status.clone().unwrap();
        assert_eq!(st.phase.as_deref(), Some("Running"));
        let node = p.spec.as_ref().unwrap().node_name.clone().unwrap();
        let (cidr_base, host) = if node == "n2" {
            ("10.244.0.", "172.18.0.2")
        } else {
            ("10.244.1.", "172.18.0.3")
        };
        assert!(st.pod_ip.clone().unwrap().starts_with(cidr_base), "{st:?}");
        assert_eq!(st.host_ip.as_deref(), Some(host));
        assert!(st.conditions.unwrap().iter().all(|c| c.status == "True"));
        nodes.insert(node);
    }
    assert_eq!(nodes.len(), 2, "spread over both nodes");

    let ips: BTreeSet<String> = pod_list
        .iter()
        .map(|p| p.status.clone().unwrap().pod_ip.unwrap())
        .collect();
    assert_eq!(slice_ips(c, "web").await, ips);
    let slices: Api<EndpointSlice> = Api::namespaced(c.clone(), "default");
    let slice = &slices
        .list(&ListParams::default().labels("kubernetes.io/service-name=web"))
        .await
        .unwrap()
        .items[0];
    assert_eq!(
        slice.ports.as_ref().unwrap()[0].port,
        Some(8080),
        "named targetPort resolved"
    );
    assert!(
        slice
            .endpoints
            .iter()
            .all(|e| e.zone.is_some() && e.target_ref.is_some())
    );

    // Scale through /scale as kubectl does, up then down.
    deploys
        .patch_scale(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 5}})),
        )
        .await
        .unwrap();
    assert_eq!(slice_ips(c, "web").await.len(), 5);
    let scale = deploys.get_scale("web").await.unwrap();
    assert_eq!(scale.spec.unwrap().replicas, Some(5));
    assert_eq!(scale.status.unwrap().selector.as_deref(), Some("app=web"));
    deploys
        .patch_scale(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 2}})),
        )
        .await
        .unwrap();
    assert_eq!(slice_ips(c, "web").await.len(), 2);
    assert_eq!(
        pods.list(&ListParams::default().labels("app=web"))
            .await
            .unwrap()
            .items
            .len(),
        2
    );

    // A template change rolls out a new ReplicaSet and scales the old one to zero.
    deploys
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "nginx:2"}]}}}}),
            ),
        )
        .await
        .unwrap();
    let rs_list = rss.list(&ListParams::default()).await.unwrap().items;
    assert_eq!(rs_list.len(), 2);
    let replicas: BTreeSet<_> = rs_list
        .iter()
        .map(|r| r.spec.as_ref().unwrap().replicas.unwrap())
        .collect();
    assert_eq!(replicas, BTreeSet::from([0, 2]));
    let d = deploys.get("web").await.unwrap();
    assert_eq!(
        d.metadata.annotations.unwrap()["deployment.kubernetes.io/revision"],
        "2"
    );
    let images: BTreeSet<_> = pods
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .map(|p| p.spec.as_ref().unwrap().containers[0].image.clone().unwrap())
        .collect();
    assert_eq!(images, BTreeSet::from(["nginx:2".to_string()]));

    // A deleted pod is replaced; deleting the Deployment removes its ReplicaSets and pods.
    let victim = pods.list(&ListParams::default()).await.unwrap().items[0]
        .metadata
        .name
        .clone()
        .unwrap();
    pods.delete(&victim, &DeleteParams::default()).await.unwrap();
    let names: Vec<_> = pods
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|p| p.metadata.name.unwrap())
        .collect();
    assert_eq!(names.len(), 2);
    assert!(!names.contains(&victim));
    deploys.delete("web", &DeleteParams::default()).await.unwrap();
    assert!(rss.list(&ListParams::default()).await.unwrap().items.is_empty());
    assert!(pods.list(&ListParams::default()).await.unwrap().items.is_empty());
    assert!(slice_ips(c, "web").await.is_empty());
    services.delete("web", &DeleteParams::default()).await.unwrap();
    assert!(
        slices
            .list(&ListParams::default().labels("kubernetes.io/service-name=web"))
            .await
            .unwrap()
            .items
            .is_empty()
    );
}

#[tokio::test]
async fn pods_wait_for_nodes_and_can_be_held_not_ready() {
    let sim = start().await;
    let c = &sim.client;
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    create(
        &pods,
        json!({"metadata": {"name": "p", "annotations": {"kube-sim.meshd.dev/ready": "false"}},
        "spec": {"containers": [{"name": "c", "image": "x"}]}}),
    )
    .await;
    let p = pods.get("p").await.unwrap();
    let cond = &p.status.unwrap().conditions.unwrap()[0];
    assert_eq!(
        (cond.type_.as_str(), cond.status.as_str(), cond.reason.as_deref()),
        ("PodScheduled", "False", Some("Unschedulable"))
    );
    node(c, "n2", "z").await;
    let st = pods.get("p").await.unwrap().status.unwrap();
    assert_eq!(st.phase.as_deref(), Some("Running"));
    let ready = st
        .conditions
        .unwrap()
        .into_iter()
        .find(|c| c.type_ == "Ready")
        .unwrap();
    assert_eq!(ready.status, "False");
    pods.patch(
        "p",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"annotations": {"kube-sim.meshd.dev/ready": "true"}}})),
    )
    .await
    .unwrap();
    let st = pods.get("p").await.unwrap().status.unwrap();
    assert!(st.conditions.unwrap().iter().all(|c| c.status == "True"));
}

#[tokio::test]
async fn node_ports_are_allocated_and_validated() {
    let sim = start().await;
    let services: Api<Service> = Api::namespaced(sim.client.clone(), "default");
    let svc = |name: &str, node_port: Option<i32>| {
        let mut port = json!({"name": "http", "port": 80});
        if let Some(n) = node_port {
            port["nodePort"] = json!(n);
        }
        serde_json::from_value::<Service>(
            json!({"metadata": {"name": name}, "spec": {"type": "NodePort", "ports": [port]}}),
        )
        .unwrap()
    };
    let a = services
        .create(&PostParams::default(), &svc("a", None))
        .await
        .unwrap();
    let allocated = a.spec.unwrap().ports.unwrap()[0].node_port.unwrap();
    assert!((30000..=32767).contains(&allocated));
    services
        .create(&PostParams::default(), &svc("b", Some(30080)))
        .await
        .unwrap();
    let s = status_of(
        services
            .create(&PostParams::default(), &svc("c", Some(30080)))
            .await,
    );
    assert_eq!((s.code, s.reason.as_str()), (422, "Invalid"));
    assert!(
        s.message
            .contains("spec.ports[0].nodePort: Invalid value: 30080: provided port is already allocated"),
        "{}",
        s.message
    );
    let s = status_of(services.create(&PostParams::default(), &svc("d", Some(80))).await);
    assert!(
        s.message
            .contains("provided port is not in the valid range. The range of valid ports is 30000-32767"),
        "{}",
        s.message
    );
    // An update that leaves the node port out keeps it.
    let patched = services
        .patch(
            "a",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"x": "y"}}})),
        )
        .await
        .unwrap();
    assert_eq!(patched.spec.unwrap().ports.unwrap()[0].node_port, Some(allocated));
}

#[tokio::test]
async fn every_cluster_has_the_kubernetes_service_and_scale_discovery() {
    let sim = start().await;
    let services: Api<Service> = Api::namespaced(sim.client.clone(), "default");
    let svc = services.get("kubernetes").await.unwrap().spec.unwrap();
    assert_eq!(svc.cluster_ip.as_deref(), Some("10.96.0.1"));
    assert_eq!(svc.ports.unwrap()[0].port, 443);
    let slices: Api<EndpointSlice> = Api::namespaced(sim.client.clone(), "default");
    assert_eq!(
        slices.get("kubernetes").await.unwrap().ports.unwrap()[0].port,
        Some(6443)
    );
    let (code, body) = raw(
        &sim.client,
        "GET",
        "/apis/apps/v1",
        "application/json",
        Vec::new(),
    )
    .await;
    assert_eq!(code, 200);
    let names: BTreeSet<&str> = body["resources"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["name"].as_str())
        .collect();
    for want in [
        "deployments/scale",
        "replicasets",
        "replicasets/scale",
        "replicasets/status",
    ] {
        assert!(names.contains(want), "{want}: {names:?}");
    }
}

#[tokio::test]
async fn hand_written_slices_make_a_service_user_managed() {
    let sim = start().await;
    let store = sim.server.store();
    // Loaded as the embedded topology is: the Service, its running pod, then a slice imitating the
    // controller's (same labels, no owner).
    let labels = json!({"kubernetes.io/service-name": "hw", "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io"});
    for obj in [
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "hw", "namespace": "default"},
               "spec": {"selector": {"app": "hw"}, "ports": [{"name": "http", "port": 80}]}}),
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "hw-1", "namespace": "default", "labels": {"app": "hw"}},
               "spec": {"nodeName": "elsewhere", "containers": [{"name": "c", "image": "x"}]},
               "status": {"phase": "Running", "podIP": "10.1.0.7"}}),
        json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
               "metadata": {"name": "hw-abcde", "namespace": "default", "labels": labels},
               "addressType": "IPv4", "endpoints": [{"addresses": ["10.1.0.7"]}]}),
    ] {
        store.apply(obj).unwrap();
    }
    let names = |store: &kube_sim::Store| -> Vec<String> {
        store
            .list("discovery.k8s.io/v1", "EndpointSlice", Some("default"))
            .iter()
            .filter(|s| s["metadata"]["labels"]["kubernetes.io/service-name"] == "hw")
            .map(|s| s["metadata"]["name"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(names(store), ["hw-abcde"]);
    // The manifest's pod keeps its status; a new pod does not bring managed slices back.
    assert_eq!(
        store.get("v1", "Pod", Some("default"), "hw-1").unwrap()["status"]["podIP"],
        "10.1.0.7"
    );
    store
        .apply(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "hw-2", "namespace": "default", "labels": {"app": "hw"}},
                      "spec": {"containers": [{"name": "c", "image": "x"}]}}))
        .unwrap();
    assert_eq!(names(store), ["hw-abcde"]);
    // Without the hand-written slice, the controller takes over.
    store
        .delete(
            "discovery.k8s.io/v1",
            "EndpointSlice",
            Some("default"),
            "hw-abcde",
        )
        .unwrap();
    let managed = names(store);
    assert_eq!(managed.len(), 1);
    assert!(
        managed[0].starts_with("hw-") && managed[0] != "hw-abcde",
        "{managed:?}"
    );
}
