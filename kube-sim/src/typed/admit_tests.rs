use serde_json::{Value, json};

use super::*;
use crate::kinds;

fn kind(api_version: &str, name: &str) -> &'static Kind {
    kinds::by_type(api_version, name).unwrap()
}

/// Admits `obj` (on top of `prev` for an update) and returns it, or the error's message.
fn admit_as(
    api_version: &str,
    k: &str,
    mut obj: Value,
    prev: Option<&Value>,
    mode: FieldValidation,
) -> Result<Value, String> {
    let fields = FieldCheck::new(mode);
    admit(kind(api_version, k), &mut obj, prev, &fields).map_err(|e| e.to_string())?;
    Ok(obj)
}

fn admitted(api_version: &str, k: &str, obj: Value) -> Value {
    admit_as(api_version, k, obj, None, FieldValidation::Strict).unwrap()
}

fn pod(image: &str) -> Value {
    json!({"metadata": {"name": "p", "namespace": "d"}, "spec": {"containers": [{"name": "c", "image": image}]}})
}

#[test]
fn required_fields_of_the_typed_schema_appear() {
    let mut p = pod("nginx");
    p["status"] = json!({"containerStatuses": [{"name": "c", "ready": true}]});
    let p = admitted("v1", "Pod", p);
    let status = &p["status"]["containerStatuses"][0];
    assert_eq!(
        (
            status["imageID"].as_str(),
            status["image"].as_str(),
            status["restartCount"].as_i64()
        ),
        (Some(""), Some(""), Some(0))
    );
    let node = admitted(
        "v1",
        "Node",
        json!({"metadata": {"name": "n"}, "status": {"nodeInfo": {"kubeletVersion": "v1.33.0"}, "capacity": {"cpu": "4"}}}),
    );
    let info = &node["status"]["nodeInfo"];
    for field in ["bootID", "machineID", "systemUUID", "kubeletVersion"] {
        assert!(info[field].is_string(), "{field}: {info}");
    }
    assert_eq!(node["status"]["allocatable"], json!({"cpu": "4"}));
}

#[test]
fn field_validation_modes() {
    let body = json!({"metadata": {"name": "c", "namespace": "d"}, "data": {"a": "1"}, "spec": {"x": 1}});
    let err = admit_as("v1", "ConfigMap", body.clone(), None, FieldValidation::Strict).unwrap_err();
    assert_eq!(
        err,
        "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: strict decoding error: unknown field \"spec\""
    );
    let fields = FieldCheck::new(FieldValidation::Warn);
    let mut obj = body.clone();
    admit(kind("v1", "ConfigMap"), &mut obj, None, &fields).unwrap();
    assert_eq!(*fields.warnings.lock(), ["unknown field \"spec\""]);
    assert!(obj.get("spec").is_none());
    let obj = admit_as("v1", "ConfigMap", body, None, FieldValidation::Ignore).unwrap();
    assert_eq!(obj["data"], json!({"a": "1"}));
}

#[test]
fn validation_messages() {
    let cases = [
        (
            "v1",
            "Pod",
            json!({"metadata": {"name": "p"}, "spec": {}}),
            "Pod \"p\" is invalid: spec.containers: Required value",
        ),
        (
            "v1",
            "Pod",
            pod(""),
            "Pod \"p\" is invalid: spec.containers[0].image: Required value",
        ),
        (
            "v1",
            "Service",
            json!({"metadata": {"name": "s"}, "spec": {"ports": [{"port": 0}]}}),
            // targetPort defaults to the port, so both are out of range, as on a real server.
            "Service \"s\" is invalid: [spec.ports[0].port: Invalid value: 0: must be between 1 and 65535, inclusive, \
             spec.ports[0].targetPort: Invalid value: 0: must be between 1 and 65535, inclusive]",
        ),
        (
            "v1",
            "Service",
            json!({"metadata": {"name": "9s"}, "spec": {"ports": [{"port": 80}]}}),
            "metadata.name: Invalid value: \"9s\": a DNS-1035 label must consist of lower case alphanumeric",
        ),
        (
            "apps/v1",
            "Deployment",
            json!({"metadata": {"name": "d"}, "spec": {"selector": {"matchLabels": {"app": "a"}},
                "template": {"metadata": {"labels": {"app": "b"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}}),
            "Deployment.apps \"d\" is invalid: spec.template.metadata.labels: Invalid value: map[string]string{\"app\":\"b\"}: `selector` does not match template `labels`",
        ),
        (
            "rbac.authorization.k8s.io/v1",
            "ClusterRoleBinding",
            json!({"metadata": {"name": "b"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "r"},
                "subjects": [{"kind": "ServiceAccount", "name": "sa"}]}),
            "[roleRef.kind: Unsupported value: \"Role\": supported values: \"ClusterRole\", subjects[0].namespace: Required value]",
        ),
        (
            "v1",
            "ConfigMap",
            json!({"metadata": {"name": "c"}, "data": {"a b": "1"}}),
            "data[a b]: Invalid value: \"a b\": a valid config key must consist of alphanumeric characters",
        ),
    ];
    for (api_version, k, body, want) in cases {
        let err = admit_as(api_version, k, body, None, FieldValidation::Strict).unwrap_err();
        assert!(err.contains(want), "{err}\nwant {want}");
    }
}

#[test]
fn update_rules() {
    let old = admitted("v1", "Pod", pod("nginx"));
    let mut new = old.clone();
    new["spec"]["containers"][0]["image"] = json!("nginx:1.27");
    assert!(admit_as("v1", "Pod", new.clone(), Some(&old), FieldValidation::Strict).is_ok());
    // Clients may not bind a pod by update (only the scheduler's binding writes nodeName).
    new["spec"]["nodeName"] = json!("n1");
    let err = admit_as("v1", "Pod", new, Some(&old), FieldValidation::Strict).unwrap_err();
    assert!(
        err.contains("spec: Forbidden: pod updates may not change fields other than"),
        "{err}"
    );

    let cm = json!({"metadata": {"name": "c"}, "immutable": true, "data": {"a": "1"}});
    let mut changed = cm.clone();
    changed["data"]["a"] = json!("2");
    changed["immutable"] = json!(false);
    let err = admit_as("v1", "ConfigMap", changed, Some(&cm), FieldValidation::Strict).unwrap_err();
    assert_eq!(
        err,
        "ConfigMap \"c\" is invalid: [immutable: Forbidden: field is immutable when `immutable` is set, \
         data: Forbidden: field is immutable when `immutable` is set]"
    );

    let secret = admitted("v1", "Secret", json!({"metadata": {"name": "s"}, "type": ""}));
    assert_eq!(secret["type"], "Opaque");
    let mut retyped = secret.clone();
    retyped["type"] = json!("kubernetes.io/basic-auth");
    let err = admit_as("v1", "Secret", retyped, Some(&secret), FieldValidation::Strict).unwrap_err();
    assert!(
        err.ends_with("type: Invalid value: \"kubernetes.io/basic-auth\": field is immutable"),
        "{err}"
    );

    let rb = json!({"metadata": {"name": "b"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"}});
    let mut other = rb.clone();
    other["roleRef"]["name"] = json!("edit");
    let err = admit_as(
        "rbac.authorization.k8s.io/v1",
        "RoleBinding",
        other,
        Some(&rb),
        FieldValidation::Strict,
    )
    .unwrap_err();
    assert!(
        err.ends_with("roleRef: Invalid value: rbac.RoleRef{APIGroup:\"rbac.authorization.k8s.io\", Kind:\"ClusterRole\", Name:\"edit\"}: cannot change roleRef"),
        "{err}"
    );
}

#[test]
fn kinds_without_typed_rules_pass_through() {
    let review = kind("authentication.k8s.io/v1", "TokenReview");
    let mut body = json!({"spec": {"token": "t"}, "anything": 1});
    admit(review, &mut body, None, &FieldCheck::new(FieldValidation::Strict)).unwrap();
    assert_eq!(body["anything"], 1);
}
