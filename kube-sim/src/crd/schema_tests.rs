use serde_json::{Value, json};

use super::schema::{Outcome, check};

fn schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "required": ["host"],
                "properties": {
                    "host": {"type": "string"},
                    "weight": {"type": "integer", "minimum": 0, "maximum": 100},
                    "ratio": {"type": "number"},
                    "enabled": {"type": "boolean"},
                    "mode": {"type": "string", "enum": ["STRICT", "PERMISSIVE"]},
                    "port": {"x-kubernetes-int-or-string": true},
                    "hosts": {"type": "array", "items": {"type": "string"}},
                    "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                    "subsets": {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string"}}}},
                    "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                    "maybe": {"type": "string", "nullable": true},
                },
            },
            "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
        },
    })
}

fn run(obj: Value) -> (Value, Outcome) {
    let mut obj = obj;
    let out = check(&schema(), &mut obj);
    (obj, out)
}

fn errors(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(f, d)| (f.to_string(), d.to_string()))
        .collect()
}

#[test]
fn type_errors_name_the_field_in_kube_apiserver_wording() {
    let cases: Vec<(Value, Vec<(String, String)>)> = vec![
        (
            json!({"spec": {"host": 5}}),
            errors(&[(
                "spec.host",
                "Invalid value: \"integer\": spec.host in body must be of type string: \"integer\"",
            )]),
        ),
        (
            json!({"spec": {"host": "h", "weight": "x"}}),
            errors(&[(
                "spec.weight",
                "Invalid value: \"string\": spec.weight in body must be of type integer: \"string\"",
            )]),
        ),
        (
            json!({"spec": {"host": "h", "weight": 1.5}}),
            errors(&[(
                "spec.weight",
                "Invalid value: \"number\": spec.weight in body must be of type integer: \"number\"",
            )]),
        ),
        (json!({"spec": {"host": "h", "ratio": 1}}), vec![]),
        (
            json!({"spec": {"host": "h", "enabled": "yes"}}),
            errors(&[(
                "spec.enabled",
                "Invalid value: \"string\": spec.enabled in body must be of type boolean: \"string\"",
            )]),
        ),
        (
            json!({"spec": {"host": "h", "hosts": ["a", 1]}}),
            errors(&[(
                "spec.hosts[1]",
                "Invalid value: \"integer\": spec.hosts[1] in body must be of type string: \"integer\"",
            )]),
        ),
        (
            json!({"spec": {"host": "h", "subsets": [{"name": true}]}}),
            errors(&[(
                "spec.subsets[0].name",
                "Invalid value: \"boolean\": spec.subsets[0].name in body must be of type string: \"boolean\"",
            )]),
        ),
        (
            json!({"spec": {"host": "h", "labels": {"app": 1}}}),
            errors(&[(
                "spec.labels.app",
                "Invalid value: \"integer\": spec.labels.app in body must be of type string: \"integer\"",
            )]),
        ),
        (
            json!({"spec": "nope"}),
            errors(&[(
                "spec",
                "Invalid value: \"string\": spec in body must be of type object: \"string\"",
            )]),
        ),
        (
            json!({"spec": {"host": "h", "mode": "OFF"}}),
            errors(&[(
                "spec.mode",
                "Unsupported value: \"OFF\": supported values: \"STRICT\", \"PERMISSIVE\"",
            )]),
        ),
        (
            json!({"spec": {"host": "h", "weight": 101}}),
            errors(&[(
                "spec.weight",
                "Invalid value: 101: spec.weight in body should be less than or equal to 100",
            )]),
        ),
        (
            json!({"spec": {"host": "h", "weight": -1}}),
            errors(&[(
                "spec.weight",
                "Invalid value: -1: spec.weight in body should be greater than or equal to 0",
            )]),
        ),
        (json!({"spec": {"host": "h", "port": "http"}}), vec![]),
        (json!({"spec": {"host": "h", "port": 80}}), vec![]),
        (
            json!({"spec": {"host": "h", "port": true}}),
            errors(&[(
                "spec.port",
                "Invalid value: \"boolean\": spec.port in body must be of type integer,string: \"boolean\"",
            )]),
        ),
        (json!({"spec": {}}), errors(&[("spec.host", "Required value")])),
    ];
    for (obj, want) in cases {
        let (_, out) = run(obj.clone());
        assert_eq!(out.errors, want, "{obj}");
    }
}

#[test]
fn unknown_fields_are_pruned_unless_preserved() {
    let cases = vec![
        (
            json!({"spec": {"host": "h", "extra": 1}, "top": 2}),
            json!({"spec": {"host": "h"}}),
            vec!["spec.extra", "top"],
        ),
        (
            json!({"spec": {"host": "h", "subsets": [{"name": "a", "x": 1}]}}),
            json!({"spec": {"host": "h", "subsets": [{"name": "a"}]}}),
            vec!["spec.subsets[0].x"],
        ),
        (
            json!({"spec": {"host": "h", "free": {"any": {"thing": [1]}}}, "status": {"x": 1}}),
            json!({"spec": {"host": "h", "free": {"any": {"thing": [1]}}}, "status": {"x": 1}}),
            vec![],
        ),
        // Nulls of fields that are not nullable are dropped; nullable ones are kept.
        (
            json!({"spec": {"host": "h", "weight": null, "maybe": null}}),
            json!({"spec": {"host": "h", "maybe": null}}),
            vec![],
        ),
        // apiVersion, kind and metadata belong to the server and are never pruned here.
        (
            json!({"apiVersion": "a/v1", "kind": "K", "metadata": {"name": "n", "x": 1}, "spec": {"host": "h"}}),
            json!({"apiVersion": "a/v1", "kind": "K", "metadata": {"name": "n", "x": 1}, "spec": {"host": "h"}}),
            vec![],
        ),
    ];
    for (obj, want, unknown) in cases {
        let (pruned, out) = run(obj.clone());
        assert_eq!(pruned, want, "{obj}");
        assert_eq!(out.unknown, unknown, "{obj}");
        assert!(out.errors.is_empty(), "{obj}: {:?}", out.errors);
    }
}

#[test]
fn a_preserving_root_keeps_everything() {
    let schema = json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true});
    let mut obj = json!({"spec": {"a": 1}, "other": [1]});
    let out = check(&schema, &mut obj);
    assert_eq!(obj, json!({"spec": {"a": 1}, "other": [1]}));
    assert_eq!(out, Outcome::default());
}
