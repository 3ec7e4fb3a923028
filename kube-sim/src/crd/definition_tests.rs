use serde_json::{Value, json};

use super::{CLEANUP_FINALIZER, admit_definition, definition_status, kinds_of};

fn crd(name: &str, kind: &str, short: &[&str]) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": name},
        "spec": {
            "group": "example.com", "scope": "Namespaced",
            "names": {"plural": name.split('.').next().unwrap(), "kind": kind, "shortNames": short},
            "versions": [
                {"name": "v1", "served": true, "storage": false, "schema": {"openAPIV3Schema": {"type": "object"}}},
                {"name": "v1beta1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {"type": "object"}}},
            ],
        },
    })
}

fn message(err: crate::error::Error) -> String {
    err.to_string()
}

#[test]
fn invalid_definitions_are_refused_with_kube_apiserver_causes() {
    let good = crd("widgets.example.com", "Widget", &[]);
    type Mutate = fn(&mut Value);
    let cases: Vec<(Mutate, &str)> = vec![
        (
            |c| c["metadata"]["name"] = json!("widget.example.com"),
            "metadata.name: Invalid value: \"widget.example.com\": must be spec.names.plural+\".\"+spec.group",
        ),
        (
            |c| {
                c["spec"]["group"] = json!("example");
                c["metadata"]["name"] = json!("widgets.example");
            },
            "spec.group: Invalid value: \"example\": should be a domain with at least one dot",
        ),
        (
            |c| c["spec"]["scope"] = json!("Global"),
            "spec.scope: Unsupported value: \"Global\": supported values: \"Cluster\", \"Namespaced\"",
        ),
        (
            |c| c["spec"]["versions"][0]["storage"] = json!(true),
            "must have exactly one version marked as storage version",
        ),
        (
            |c| c["spec"]["versions"] = json!([]),
            "spec.versions: Required value",
        ),
        (
            |c| c["spec"]["versions"][1]["schema"] = json!({}),
            "spec.versions[1].schema.openAPIV3Schema: Required value: schemas are required",
        ),
        (
            |c| c["spec"]["names"]["kind"] = json!(""),
            "spec.names.kind: Required value",
        ),
    ];
    for (mutate, want) in cases {
        let mut c = good.clone();
        mutate(&mut c);
        let err = message(admit_definition(&mut c, None).expect_err(want));
        assert!(err.contains(want), "{err}\nwant: {want}");
    }
}

#[test]
fn defaults_names_conversion_and_the_cleanup_finalizer() {
    let mut c = crd("widgets.example.com", "Widget", &["wd"]);
    admit_definition(&mut c, None).unwrap();
    assert_eq!(c["spec"]["names"]["singular"], "widget");
    assert_eq!(c["spec"]["names"]["listKind"], "WidgetList");
    assert_eq!(c["spec"]["conversion"], json!({"strategy": "None"}));
    assert_eq!(c["metadata"]["finalizers"], json!([CLEANUP_FINALIZER]));
    let mut changed = c.clone();
    changed["spec"]["scope"] = json!("Cluster");
    let err = message(admit_definition(&mut changed, Some(&c)).unwrap_err());
    assert!(
        err.contains("spec.scope: Invalid value: \"Cluster\": field is immutable"),
        "{err}"
    );
}

#[test]
fn names_in_use_are_not_accepted_and_not_served() {
    let mut first = crd("widgets.example.com", "Widget", &["wd"]);
    admit_definition(&mut first, None).unwrap();
    definition_status(&mut first, &[]);
    assert_eq!(first["status"]["conditions"][1]["type"], "Established");
    assert_eq!(first["status"]["storedVersions"], json!(["v1beta1"]));
    assert_eq!(kinds_of(&first).len(), 2);

    let cases = [
        (
            crd("gizmos.example.com", "Widget", &[]),
            "KindConflict",
            "\"Widget\" is already in use",
        ),
        (
            crd("gadgets.example.com", "Gadget", &["wd"]),
            "ShortNamesConflict",
            "\"wd\" is already in use",
        ),
    ];
    for (mut other, reason, message) in cases {
        admit_definition(&mut other, None).unwrap();
        definition_status(&mut other, &[&first]);
        let conditions = &other["status"]["conditions"];
        assert_eq!(conditions[0]["status"], "False", "{conditions}");
        assert_eq!(conditions[0]["reason"], reason);
        assert_eq!(conditions[0]["message"], message);
        assert_eq!(
            conditions[1],
            json!({"type": "Established", "status": "False", "reason": "NotAccepted",
            "message": "not all names are accepted", "lastTransitionTime": conditions[1]["lastTransitionTime"]})
        );
        assert!(kinds_of(&other).is_empty());
    }
}
