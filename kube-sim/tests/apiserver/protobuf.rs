//! Protobuf request bodies over HTTP, as client-go's typed clients send them: stored as the JSON a real
//! API server would hold, size-capped, malformed ones refused with 400.

use k8s_pb::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_pb::api::core::v1::{ConfigMap, Container, PodSpec, PodTemplateSpec};
use k8s_pb::apimachinery::pkg::apis::meta::v1::{DeleteOptions, LabelSelector, ObjectMeta, Preconditions};
use k8s_pb::apimachinery::pkg::runtime::{TypeMeta, Unknown};
use kube_sim::ApiServerConfig;
use kube_sim::testing::{raw, start, start_with};
use prost::Message;
use serde_json::json;

const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";

fn s(v: &str) -> Option<String> {
    Some(v.to_string())
}

fn envelope(api_version: &str, kind: &str, msg: &impl Message) -> Vec<u8> {
    let unknown = Unknown {
        type_meta: Some(TypeMeta {
            api_version: s(api_version),
            kind: s(kind),
        }),
        raw: Some(msg.encode_to_vec()),
        content_encoding: s(""),
        content_type: s(""),
    };
    [b"k8s\0".as_slice(), &unknown.encode_to_vec()].concat()
}

fn meta(name: &str) -> Option<ObjectMeta> {
    Some(ObjectMeta {
        name: s(name),
        generate_name: s(""),
        namespace: s(""),
        ..Default::default()
    })
}

#[tokio::test]
async fn a_protobuf_deployment_is_stored_as_kubernetes_json() {
    let sim = start().await;
    let labels = [("app".to_string(), "web".to_string())].into();
    let deployment = Deployment {
        metadata: meta("web"),
        spec: Some(DeploymentSpec {
            replicas: Some(0),
            min_ready_seconds: Some(0),
            selector: Some(LabelSelector {
                match_labels: labels,
                ..Default::default()
            }),
            template: Some(PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: [("app".to_string(), "web".to_string())].into(),
                    ..Default::default()
                }),
                spec: Some(PodSpec {
                    containers: vec![Container {
                        name: s("nginx"),
                        image: s("nginx:1.27"),
                        ..Default::default()
                    }],
                    ..Default::default()
                }),
            }),
            ..Default::default()
        }),
        status: None,
    };
    let path = "/apis/apps/v1/namespaces/default/deployments";
    let (code, created) = raw(
        &sim.client,
        "POST",
        path,
        PROTOBUF,
        envelope("apps/v1", "Deployment", &deployment),
    )
    .await;
    assert_eq!(code, 201, "{created}");
    let (code, got) = raw(&sim.client, "GET", &format!("{path}/web"), "", vec![]).await;
    assert_eq!(code, 200);
    assert_eq!(got["spec"]["replicas"], 0, "a pointer's zero is a value");
    assert!(got["spec"].get("minReadySeconds").is_none(), "{got}");
    assert!(got["metadata"].get("generateName").is_none(), "{got}");
    assert_eq!(
        got["spec"]["template"]["spec"]["containers"][0]["image"],
        "nginx:1.27"
    );
}

#[tokio::test]
async fn protobuf_delete_options_are_honoured() {
    let sim = start().await;
    let path = "/api/v1/namespaces/default/configmaps";
    let cm = ConfigMap {
        metadata: meta("cfg"),
        ..Default::default()
    };
    let (code, _) = raw(
        &sim.client,
        "POST",
        path,
        PROTOBUF,
        envelope("v1", "ConfigMap", &cm),
    )
    .await;
    assert_eq!(code, 201);
    let stale = DeleteOptions {
        preconditions: Some(Preconditions {
            uid: s("not-the-uid"),
            resource_version: None,
        }),
        ..Default::default()
    };
    let body = envelope("meta.k8s.io/v1", "DeleteOptions", &stale);
    let (code, status) = raw(&sim.client, "DELETE", &format!("{path}/cfg"), PROTOBUF, body).await;
    assert_eq!((code, &status["reason"]), (409, &json!("Conflict")), "{status}");
    let body = envelope("meta.k8s.io/v1", "DeleteOptions", &DeleteOptions::default());
    let (code, _) = raw(&sim.client, "DELETE", &format!("{path}/cfg"), PROTOBUF, body).await;
    assert_eq!(code, 200);
}

#[tokio::test]
async fn malformed_and_oversized_protobuf_bodies_are_refused() {
    let sim = start_with(ApiServerConfig {
        max_body_bytes: 1024,
        ..ApiServerConfig::new("test")
    })
    .await;
    let path = "/api/v1/namespaces/default/configmaps";
    let (code, status) = raw(&sim.client, "POST", path, PROTOBUF, b"k8s\0\x0a\x05ab".to_vec()).await;
    assert_eq!((code, &status["reason"]), (400, &json!("BadRequest")), "{status}");
    assert!(
        status["message"]
            .as_str()
            .unwrap_or_default()
            .contains("malformed"),
        "{status}"
    );
    let big = ConfigMap {
        metadata: meta("big"),
        data: [("k".to_string(), "x".repeat(2048))].into(),
        ..Default::default()
    };
    let (code, status) = raw(
        &sim.client,
        "POST",
        path,
        PROTOBUF,
        envelope("v1", "ConfigMap", &big),
    )
    .await;
    assert_eq!(
        (code, &status["reason"]),
        (413, &json!("RequestEntityTooLarge")),
        "{status}"
    );
}
