//! Value validations and CEL rules against what a real kube-apiserver (v1.34) answered for the same
//! schema and objects (recorded with `kubectl create --dry-run=server`): the same fields, the same words.

use serde_json::{Value, json};

use super::{has_rules, run};
use crate::crd::schema::check;

fn schema() -> Value {
    let rule = |r: Value| json!([r]);
    json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "s": {"type": "string", "maxLength": 3}, "p": {"type": "string", "pattern": "^a+$"},
        "l": {"type": "array", "maxItems": 1, "items": {"type": "string"}},
        "l2": {"type": "array", "minItems": 2, "items": {"type": "string"}},
        "m": {"type": "object", "maxProperties": 1, "additionalProperties": {"type": "string"}},
        "m2": {"type": "object", "minProperties": 2, "additionalProperties": {"type": "string"}},
        "n": {"type": "number", "minimum": 0, "exclusiveMinimum": true},
        "x": {"type": "integer", "maximum": 5, "exclusiveMaximum": true},
        "d": {"type": "string", "format": "date-time"}, "b": {"type": "string", "format": "byte"},
        "i": {"type": "integer", "format": "int32"},
        "o": {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
              "oneOf": [{"required": ["a"]}, {"required": ["b"]}]},
        "an": {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
               "anyOf": [{"required": ["a"]}, {"required": ["b"]}]},
        "nt": {"type": "object", "properties": {"a": {"type": "string"}}, "not": {"required": ["a"]}},
        "lm": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
               "items": {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}, "v": {"type": "string"}}}},
        "ls": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
        "mo": {"type": "integer", "multipleOf": 3},
        "e": {"type": "string", "x-kubernetes-validations": rule(json!({"rule": "self.size() < 3", "messageExpression": "'too big: ' + self"}))},
        "e2": {"type": "object", "properties": {"x": {"type": "string"}}, "x-kubernetes-validations":
               rule(json!({"rule": "self.x.size() < 3", "message": "short", "reason": "FieldValueForbidden", "fieldPath": ".x"}))},
        "e3": {"type": "string", "x-kubernetes-validations": rule(json!({"rule": "self.size() < 3"}))},
        "e4": {"type": "integer", "x-kubernetes-validations": rule(json!({"rule": "self / 0 == 1"}))},
        "ip": {"type": "string", "x-kubernetes-validations": [{"rule": "isIP(self) && ip(self).family() == 4"}, {"rule": "isCIDR(self)"}]},
    }}}})
}

/// What admission reports for `spec`, as kube-apiserver lists it.
fn verdict(spec: Value) -> Vec<String> {
    let schema = schema();
    let mut obj = json!({"apiVersion": "probe.example.com/v1", "kind": "Probe", "metadata": {"name": "x"}, "spec": spec});
    let out = check(&schema, &mut obj);
    let mut errors = out.errors;
    assert!(has_rules(&schema));
    if out.blocked {
        errors.push(("<nil>".into(), "Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation".into()));
    } else {
        run(&schema, &obj, &mut errors);
    }
    errors.into_iter().map(|(f, d)| format!("{f}: {d}")).collect()
}

const SKIPPED: &str = "<nil>: Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation";

#[test]
fn value_validations_and_rules_answer_as_kube_apiserver() {
    let cases: Vec<(Value, Vec<&str>)> = vec![
        (
            json!({"s": "abcd"}),
            vec!["spec.s: Too long: may not be more than 3 bytes", SKIPPED],
        ),
        (
            json!({"p": "b"}),
            vec!["spec.p: Invalid value: \"b\": spec.p in body should match '^a+$'"],
        ),
        (
            json!({"l": ["a", "b"]}),
            vec!["spec.l: Too many: 2: must have at most 1 item", SKIPPED],
        ),
        (
            json!({"l2": ["a"]}),
            vec!["spec.l2: Invalid value: 1: spec.l2 in body should have at least 2 items"],
        ),
        (
            json!({"m": {"a": "1", "b": "2"}}),
            vec!["spec.m: Too many: 2: must have at most 1 item", SKIPPED],
        ),
        (
            json!({"m2": {"a": "1"}}),
            vec!["spec.m2: Invalid value: 1: spec.m2 in body should have at least 2 properties"],
        ),
        (
            json!({"n": 0}),
            vec!["spec.n: Invalid value: 0: spec.n in body should be greater than 0"],
        ),
        (
            json!({"x": 5}),
            vec!["spec.x: Invalid value: 5: spec.x in body should be less than 5"],
        ),
        (
            json!({"d": "yesterday"}),
            vec![
                "spec.d: Invalid value: \"yesterday\": spec.d in body must be of type date-time: \"yesterday\"",
                SKIPPED,
            ],
        ),
        (json!({"d": "2024-01-02T03:04:05Z"}), vec![]),
        (
            json!({"b": "!!!"}),
            vec![
                "spec.b: Invalid value: \"!!!\": spec.b in body must be of type byte: \"!!!\"",
                SKIPPED,
            ],
        ),
        (json!({"i": 99999999999u64}), vec![]),
        (
            json!({"o": {"a": "1", "b": "2"}}),
            vec![
                "<nil>: Invalid value: \"\": \"spec.o\" must validate one and only one schema (oneOf). Found 2 valid alternatives",
            ],
        ),
        (
            json!({"o": {}}),
            vec![
                "<nil>: Invalid value: \"\": \"spec.o\" must validate one and only one schema (oneOf). Found none valid",
                "spec.o.a: Required value",
                SKIPPED,
            ],
        ),
        (
            json!({"an": {}}),
            vec![
                "<nil>: Invalid value: \"\": \"spec.an\" must validate at least one schema (anyOf)",
                "spec.an.a: Required value",
                SKIPPED,
            ],
        ),
        (
            json!({"nt": {"a": "x"}}),
            vec!["<nil>: Invalid value: \"\": \"spec.nt\" must not validate the schema (not)"],
        ),
        (
            json!({"lm": [{"name": "a"}, {"name": "a", "v": "2"}]}),
            vec!["spec.lm[1]: Duplicate value: {\"name\":\"a\"}"],
        ),
        (
            json!({"ls": ["a", "a"]}),
            vec!["spec.ls[1]: Duplicate value: \"a\""],
        ),
        (
            json!({"mo": 4}),
            vec!["spec.mo: Invalid value: 4: spec.mo in body should be a multiple of 3"],
        ),
        (
            json!({"e": "abcd"}),
            vec!["spec.e: Invalid value: \"string\": too big: abcd"],
        ),
        (json!({"e2": {"x": "abcd"}}), vec!["spec.e2.x: Forbidden: short"]),
        (
            json!({"e3": "abcd"}),
            vec!["spec.e3: Invalid value: \"string\": failed rule: self.size() < 3"],
        ),
        (
            json!({"e4": 1}),
            vec!["spec.e4: Invalid value: \"integer\": division by zero evaluating rule: self / 0 == 1"],
        ),
        (
            json!({"ip": "1.2.3"}),
            vec![
                "spec.ip: Invalid value: \"string\": failed rule: isIP(self) && ip(self).family() == 4",
                "spec.ip: Invalid value: \"string\": failed rule: isCIDR(self)",
            ],
        ),
        (
            json!({"ip": "1.2.3.4"}),
            vec!["spec.ip: Invalid value: \"string\": failed rule: isCIDR(self)"],
        ),
        (
            json!({"s": "abcd", "p": "b"}),
            vec![
                "spec.s: Too long: may not be more than 3 bytes",
                "spec.p: Invalid value: \"b\": spec.p in body should match '^a+$'",
                SKIPPED,
            ],
        ),
    ];
    for (spec, want) in cases {
        // Errors of sibling fields come in no fixed order from kube-apiserver (Go map order).
        let (mut got, mut want) = (verdict(spec.clone()), want);
        got.sort();
        want.sort();
        assert_eq!(got, want, "{spec}");
    }
}

#[test]
fn a_rule_past_the_per_call_cost_limit_is_an_error() {
    let schema = json!({"type": "object", "properties": {"spec": {"type": "object",
        "properties": {"l": {"type": "array", "maxItems": 1000, "items": {"type": "string", "maxLength": 8}}},
        "x-kubernetes-validations": [{"rule": "self.l.all(x, self.l.all(y, x == y || true))", "message": "pairs"}]}}});
    let obj = |n: usize| json!({"spec": {"l": (0..n).map(|i| i.to_string()).collect::<Vec<_>>()}});
    let mut errors = Vec::new();
    run(&schema, &obj(10), &mut errors);
    assert_eq!(errors, Vec::<(String, String)>::new());
    run(&schema, &obj(1000), &mut errors);
    assert_eq!(
        errors,
        vec![(
            "spec".to_string(),
            "Invalid value: \"object\": call cost exceeds limit for rule: pairs".to_string()
        )]
    );
    // The same rule passes the CRD-time estimate (bounded list), one nesting deeper does not.
    let mut found = Vec::new();
    super::definition_errors(
        &schema["properties"]["spec"],
        "spec.validation.openAPIV3Schema.properties[spec]",
        &mut found,
    );
    assert_eq!(found, Vec::<(String, String)>::new());
    let mut costly = schema["properties"]["spec"].clone();
    costly["x-kubernetes-validations"][0]["rule"] =
        json!("self.l.all(x, self.l.all(y, self.l.all(z, x == y)))");
    super::definition_errors(
        &costly,
        "spec.validation.openAPIV3Schema.properties[spec]",
        &mut found,
    );
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0]
            .1
            .starts_with("Forbidden: estimated rule cost exceeds budget by factor of"),
        "{found:?}"
    );
}

/// Istio's own CRDs (../shared/istio-testdata, when present): every rule compiles and fits the cost
/// limits, as kube-apiserver accepts them.
#[test]
fn istios_crds_pass_the_crd_checks() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../shared/istio-testdata/manifests/charts/base/files/crd-all.gen.yaml");
    let Ok(text) = std::fs::read_to_string(&path) else {
        eprintln!("no {} here: skipped", path.display());
        return;
    };
    let mut crds = 0;
    for doc in serde_yaml::Deserializer::from_str(&text) {
        let crd: Value = serde::Deserialize::deserialize(doc).expect("Istio's CRD file is YAML");
        for v in crd["spec"]["versions"].as_array().into_iter().flatten() {
            let mut found = Vec::new();
            super::definition_errors(
                &v["schema"]["openAPIV3Schema"],
                "spec.validation.openAPIV3Schema",
                &mut found,
            );
            assert_eq!(
                found,
                Vec::<(String, String)>::new(),
                "{}",
                crd["metadata"]["name"]
            );
        }
        crds += 1;
    }
    assert!(crds >= 14, "{crds}");
}
