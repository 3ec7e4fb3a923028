//! Selectable fields per kind: the field labels a real server accepts in `fieldSelector` (its field label
//! conversions) and how to read each from an object. Values are extracted once when an object is stored, so
//! filtering 100k objects never re-parses them.

use serde_json::Value;

use super::error::Error;

/// Reads one field's value as the real server's field set renders it (booleans and numbers as text).
type Extract = fn(&Value) -> String;

#[derive(Debug)]
pub(crate) struct Fields {
    /// Whether `metadata.namespace` is accepted (core's Node, Namespace and PersistentVolume refuse it).
    namespace: bool,
    /// Kind-specific labels, in the order their values are kept on each stored object.
    extra: &'static [(&'static str, Extract)],
    /// Kinds with their own conversion refuse with `field label not supported: x`; the rest with the default
    /// conversion's message.
    own: bool,
}

/// A field label resolved against a kind.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Field {
    Name,
    Namespace,
    /// Index into the object's extracted values.
    Extra(usize),
}

fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        _ => String::new(),
    }
}

/// metadata.name and metadata.namespace only (kinds without a field label conversion of their own).
pub(crate) static META: Fields = Fields {
    namespace: true,
    extra: &[],
    own: false,
};

pub(crate) static POD: Fields = Fields {
    namespace: true,
    extra: &[
        ("spec.nodeName", |o| text(&o["spec"]["nodeName"])),
        // Old clients' name for spec.nodeName.
        ("spec.host", |o| text(&o["spec"]["nodeName"])),
        ("spec.restartPolicy", |o| text(&o["spec"]["restartPolicy"])),
        ("spec.schedulerName", |o| text(&o["spec"]["schedulerName"])),
        ("spec.serviceAccountName", |o| {
            text(&o["spec"]["serviceAccountName"])
        }),
        ("spec.hostNetwork", |o| {
            (o["spec"]["hostNetwork"] == true).to_string()
        }),
        ("status.phase", |o| text(&o["status"]["phase"])),
        ("status.podIP", |o| text(&o["status"]["podIPs"][0]["ip"])),
        // Accepted by the conversion but absent from the pod's field set: matches only the empty value.
        ("status.podIPs", |_| String::new()),
        ("status.nominatedNodeName", |o| {
            text(&o["status"]["nominatedNodeName"])
        }),
    ],
    own: true,
};

pub(crate) static NODE: Fields = Fields {
    namespace: false,
    extra: &[("spec.unschedulable", |o| {
        (o["spec"]["unschedulable"] == true).to_string()
    })],
    own: true,
};

pub(crate) static NAMESPACE: Fields = Fields {
    namespace: false,
    extra: &[("status.phase", |o| text(&o["status"]["phase"]))],
    own: true,
};

pub(crate) static PERSISTENT_VOLUME: Fields = Fields {
    namespace: false,
    extra: &[],
    own: true,
};

pub(crate) static SECRET: Fields = Fields {
    namespace: true,
    extra: &[("type", |o| text(&o["type"]))],
    own: true,
};

pub(crate) static SERVICE: Fields = Fields {
    namespace: true,
    extra: &[
        ("spec.clusterIP", |o| text(&o["spec"]["clusterIP"])),
        ("spec.type", |o| text(&o["spec"]["type"])),
    ],
    own: true,
};

pub(crate) static EVENT: Fields = Fields {
    namespace: true,
    extra: &[
        ("involvedObject.kind", |o| text(&o["involvedObject"]["kind"])),
        ("involvedObject.namespace", |o| {
            text(&o["involvedObject"]["namespace"])
        }),
        ("involvedObject.name", |o| text(&o["involvedObject"]["name"])),
        ("involvedObject.uid", |o| text(&o["involvedObject"]["uid"])),
        ("involvedObject.apiVersion", |o| {
            text(&o["involvedObject"]["apiVersion"])
        }),
        ("involvedObject.resourceVersion", |o| {
            text(&o["involvedObject"]["resourceVersion"])
        }),
        ("involvedObject.fieldPath", |o| {
            text(&o["involvedObject"]["fieldPath"])
        }),
        ("reason", |o| text(&o["reason"])),
        ("reportingComponent", |o| text(&o["reportingComponent"])),
        ("source", |o| match text(&o["source"]["component"]) {
            s if s.is_empty() => text(&o["reportingComponent"]),
            s => s,
        }),
        ("type", |o| text(&o["type"])),
    ],
    own: true,
};

/// ReplicationController and ReplicaSet.
pub(crate) static REPLICAS: Fields = Fields {
    namespace: true,
    extra: &[("status.replicas", |o| {
        o["status"]["replicas"].as_i64().unwrap_or_default().to_string()
    })],
    own: true,
};

pub(crate) static JOB: Fields = Fields {
    namespace: true,
    extra: &[("status.successful", |o| {
        o["status"]["succeeded"].as_i64().unwrap_or_default().to_string()
    })],
    own: true,
};

impl Fields {
    /// The values of the kind-specific fields, kept on the stored object.
    pub(crate) fn extract(&self, obj: &Value) -> Box<[String]> {
        self.extra.iter().map(|(_, f)| f(obj)).collect()
    }

    /// Resolves a field label, refusing unknown ones with the real server's message.
    pub(crate) fn resolve(&self, label: &str) -> Result<Field, Error> {
        match label {
            "metadata.name" => return Ok(Field::Name),
            "metadata.namespace" if self.namespace => return Ok(Field::Namespace),
            _ => {}
        }
        if let Some(i) = self.extra.iter().position(|(l, _)| *l == label) {
            return Ok(Field::Extra(i));
        }
        Err(Error::BadRequest(if self.own {
            format!("field label not supported: {label}")
        } else {
            format!("{label:?} is not a known field selector: only \"metadata.name\", \"metadata.namespace\"")
        }))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::kinds::by_resource;
    use crate::object::Obj;
    use crate::selector::{FieldSelector, Filter};

    #[test]
    fn labels_per_kind_with_the_real_refusals() {
        let not_supported = |l: &str| format!("field label not supported: {l}");
        let unknown = |l: &str| {
            format!("\"{l}\" is not a known field selector: only \"metadata.name\", \"metadata.namespace\"")
        };
        let cases: &[(&str, &str, &str, Option<String>)] = &[
            ("", "pods", "spec.restartPolicy=Always", None),
            ("", "pods", "spec.hostNetwork=false", None),
            ("", "pods", "status.podIP=10.0.0.1", None),
            (
                "",
                "pods",
                "spec.nodeNameX=a",
                Some(not_supported("spec.nodeNameX")),
            ),
            ("", "secrets", "type=Opaque", None),
            ("", "events", "involvedObject.name=web", None),
            ("", "events", "source=kubelet", None),
            ("", "namespaces", "status.phase=Active", None),
            (
                "",
                "namespaces",
                "metadata.namespace=x",
                Some(not_supported("metadata.namespace")),
            ),
            ("", "nodes", "spec.unschedulable=true", None),
            ("", "services", "spec.type=LoadBalancer", None),
            (
                "",
                "configmaps",
                "status.phase=Running",
                Some(unknown("status.phase")),
            ),
            ("", "configmaps", "metadata.namespace=default", None),
            (
                "apps",
                "deployments",
                "spec.replicas=1",
                Some(unknown("spec.replicas")),
            ),
            ("", "replicationcontrollers", "status.replicas=2", None),
            ("batch", "jobs", "status.successful=1", None),
        ];
        for (group, plural, sel, want) in cases {
            let kind = by_resource(group, "v1", plural).unwrap();
            let got = FieldSelector::parse(kind, sel).err().map(|e| e.to_string());
            assert_eq!(&got, want, "{plural} {sel}");
        }
    }

    #[test]
    fn extracted_values_select_objects() {
        let pods = by_resource("", "v1", "pods").unwrap();
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
                         "spec": {"restartPolicy": "Never", "nodeName": "n1", "hostNetwork": true},
                         "status": {"phase": "Running", "podIPs": [{"ip": "10.0.0.7"}]}});
        let obj = Obj::freeze(pods, &pod).unwrap();
        let cases = [
            ("spec.restartPolicy=Never", true),
            ("spec.restartPolicy!=Never", false),
            ("spec.host=n1,status.phase=Running", true),
            ("spec.hostNetwork=true", true),
            ("status.podIP=10.0.0.7", true),
            ("status.nominatedNodeName=", true),
            ("metadata.namespace=other", false),
        ];
        for (sel, want) in cases {
            let filter = Filter {
                fields: FieldSelector::parse(pods, sel).unwrap(),
                ..Filter::default()
            };
            assert_eq!(filter.matches(&obj), want, "{sel}");
        }
        let events = by_resource("", "v1", "events").unwrap();
        let ev =
            json!({"metadata": {"name": "e"}, "reportingComponent": "ctrl", "involvedObject": {"uid": "u1"}});
        let obj = Obj::freeze(events, &ev).unwrap();
        for (sel, want) in [
            ("source=ctrl", true),
            ("involvedObject.uid=u1", true),
            ("reason=x", false),
        ] {
            let filter = Filter {
                fields: FieldSelector::parse(events, sel).unwrap(),
                ..Filter::default()
            };
            assert_eq!(filter.matches(&obj), want, "{sel}");
        }
    }
}
