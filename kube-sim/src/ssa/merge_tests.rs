use serde_json::json;

use super::*;
use crate::ssa::schema::BuiltIn;

fn paths(set: &Set) -> Vec<String> {
    set.paths().iter().map(|p| path_string(p)).collect()
}

#[test]
fn merge_cases() {
    // (live, config, want)
    let cases = [
        (
            json!({"data": {"a": "1", "b": "2"}}),
            json!({"data": {"b": "3", "c": "4"}}),
            json!({"data": {"a": "1", "b": "3", "c": "4"}}),
        ),
        (
            json!({"spec": {"containers": [{"name": "a", "image": "x", "tty": true}, {"name": "b", "image": "y"}]}}),
            json!({"spec": {"containers": [{"name": "b", "image": "z"}, {"name": "c", "image": "w"}]}}),
            json!({"spec": {"containers": [
                {"name": "a", "image": "x", "tty": true},
                {"name": "b", "image": "z"},
                {"name": "c", "image": "w"},
            ]}}),
        ),
        (
            // Shared items take the configuration's order.
            json!({"spec": {"containers": [{"name": "a"}, {"name": "b"}]}}),
            json!({"spec": {"containers": [{"name": "b"}, {"name": "a"}]}}),
            json!({"spec": {"containers": [{"name": "b"}, {"name": "a"}]}}),
        ),
        (
            json!({"metadata": {"finalizers": ["x", "y"]}}),
            json!({"metadata": {"finalizers": ["z", "x"]}}),
            json!({"metadata": {"finalizers": ["z", "x", "y"]}}),
        ),
        (
            // Atomic lists and atomic objects are replaced.
            json!({"spec": {"tolerations": [{"key": "a"}], "selector": {"app": "x", "tier": "y"}}}),
            json!({"spec": {"tolerations": [{"key": "b"}], "selector": {"app": "z"}}}),
            json!({"spec": {"tolerations": [{"key": "b"}], "selector": {"app": "z"}}}),
        ),
        (
            // Service ports are keyed by port and protocol, TCP by default.
            json!({"spec": {"ports": [{"port": 80, "name": "http"}, {"port": 80, "protocol": "UDP", "name": "dns"}]}}),
            json!({"spec": {"ports": [{"port": 80, "protocol": "TCP", "targetPort": 8080}]}}),
            json!({"spec": {"ports": [
                {"port": 80, "name": "http", "protocol": "TCP", "targetPort": 8080},
                {"port": 80, "protocol": "UDP", "name": "dns"},
            ]}}),
        ),
        (
            json!({"data": {"a": "1"}}),
            json!({"data": {"a": null}}),
            json!({"data": {}}),
        ),
    ];
    for (live, config, want) in cases {
        assert_eq!(merge(&BuiltIn, Some(&live), &config), want, "config {config}");
    }
}

#[test]
fn config_sets() {
    let config = json!({
        "apiVersion": "apps/v1",
        "metadata": {"name": "web", "labels": {"app": "web"}},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"spec": {"containers": [{"name": "app", "image": "nginx", "ports": [{"containerPort": 80}]}]}},
            "strategy": {},
        },
    });
    let set = config_set(&BuiltIn, &config);
    assert_eq!(
        paths(&set),
        [
            ".apiVersion",
            ".metadata.labels.app",
            ".metadata.name",
            ".spec.replicas",
            ".spec.selector",
            ".spec.strategy",
            ".spec.template.spec.containers[name=\"app\"]",
            ".spec.template.spec.containers[name=\"app\"].image",
            ".spec.template.spec.containers[name=\"app\"].name",
            ".spec.template.spec.containers[name=\"app\"].ports[containerPort=80,protocol=\"TCP\"]",
            ".spec.template.spec.containers[name=\"app\"].ports[containerPort=80,protocol=\"TCP\"].containerPort",
        ]
    );
    let fields = set.to_fields();
    assert_eq!(
        fields["f:spec"]["f:template"]["f:spec"]["f:containers"]["k:{\"name\":\"app\"}"]["."],
        json!({})
    );
}

#[test]
fn bad_configs_are_reported() {
    for (config, want) in [
        (
            json!({"spec": {"containers": [{"image": "x"}]}}),
            ".spec.containers: element 0: associative list with keys has an element that omits key field \"name\"",
        ),
        (
            json!({"spec": {"containers": [{"name": "a"}, {"name": "a"}]}}),
            ".spec.containers: duplicate entries for key [name=\"a\"]",
        ),
    ] {
        let err = check_config(&BuiltIn, &config).unwrap_err();
        assert!(err.starts_with(want), "{err}");
    }
}

#[test]
fn comparisons() {
    let old = json!({"data": {"a": "1", "b": "2"}, "spec": {"containers": [{"name": "x", "image": "1"}]}});
    let new =
        json!({"data": {"a": "9", "c": {"d": "3"}}, "spec": {"containers": [{"name": "y", "image": "1"}]}});
    let c = compare(&BuiltIn, &old, &new);
    assert_eq!(paths(&c.modified), [".data.a"]);
    assert_eq!(
        paths(&c.added),
        [
            ".data.c",
            ".data.c.d",
            ".spec.containers[name=\"y\"]",
            ".spec.containers[name=\"y\"].image",
            ".spec.containers[name=\"y\"].name"
        ]
    );
    assert_eq!(
        paths(&c.removed),
        [
            ".data.b",
            ".spec.containers[name=\"x\"]",
            ".spec.containers[name=\"x\"].image",
            ".spec.containers[name=\"x\"].name"
        ]
    );
    // A created object: spec is a struct in the zero value, so only what is below it is added.
    let created = compare(&BuiltIn, &json!({}), &json!({"spec": {"replicas": 1}}));
    assert_eq!(paths(&created.added), [".spec.replicas"]);
}

#[test]
fn removing_paths() {
    let mut v = json!({
        "metadata": {"labels": {"a": "1"}},
        "spec": {"containers": [{"name": "x", "image": "1", "tty": true}, {"name": "y"}]},
    });
    let f = |n: &str| Pe::Field(n.into());
    let key = |n: &str| Pe::Key(vec![("name".into(), format!("{n:?}"))]);
    remove_path(&BuiltIn, &mut v, &[f("metadata"), f("labels"), f("a")]);
    remove_path(
        &BuiltIn,
        &mut v,
        &[f("spec"), f("containers"), key("x"), f("tty")],
    );
    remove_path(&BuiltIn, &mut v, &[f("spec"), f("containers"), key("y")]);
    assert_eq!(v, json!({"spec": {"containers": [{"name": "x", "image": "1"}]}}));
}
