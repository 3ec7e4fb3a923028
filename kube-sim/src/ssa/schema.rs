//! How server-side apply treats each list and object: the `x-kubernetes-list-type` /
//! `x-kubernetes-list-map-keys` / `x-kubernetes-map-type` of the built-in kinds' OpenAPI, behind a trait so
//! custom resources can answer from their own schema. Lists without a declared type are atomic.

use serde_json::Value;

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ListType {
    /// Replaced whole; one ownership path.
    Atomic,
    /// Scalars merged as a set (`v:` paths).
    Set,
    /// Objects merged by these key fields (`k:` paths).
    Map(Vec<&'static str>),
}

/// Merge semantics of a type tree; `path` is the field names from the object root, list items skipped.
pub(crate) trait Schema {
    fn list_type(&self, path: &[String]) -> ListType;
    /// An object replaced whole (`x-kubernetes-map-type: atomic` / `structType=atomic`).
    fn atomic_object(&self, path: &[String]) -> bool;
    /// The default of a list-map key field an item may omit (`protocol` of ports).
    fn key_default(&self, path: &[String], key: &str) -> Option<Value>;
    /// A field that always exists in the typed zero value (a non-pointer struct), so creating it is not
    /// an ownership of the object itself.
    fn zero_struct(&self, path: &[String]) -> bool;
}

/// Custom resources: every list atomic and every object granular, as for a CRD schema without
/// `x-kubernetes-list-type` annotations.
pub(crate) struct Untyped;

impl Schema for Untyped {
    fn list_type(&self, _path: &[String]) -> ListType {
        ListType::Atomic
    }
    fn atomic_object(&self, _path: &[String]) -> bool {
        false
    }
    fn key_default(&self, _path: &[String], _key: &str) -> Option<Value> {
        None
    }
    fn zero_struct(&self, _path: &[String]) -> bool {
        false
    }
}

/// The built-in kinds, from the real OpenAPI's list types and patch merge keys.
pub(crate) struct BuiltIn;

fn strs(path: &[String]) -> Vec<&str> {
    path.iter().map(String::as_str).collect()
}

const CONTAINER_LISTS: &[&str] = &["containers", "initContainers", "ephemeralContainers"];

impl Schema for BuiltIn {
    fn list_type(&self, path: &[String]) -> ListType {
        let path = strs(path);
        let path = path.as_slice();
        let (field, parent) = match path {
            [.., parent, field] => (*field, *parent),
            [field] => (*field, ""),
            [] => return ListType::Atomic,
        };
        let map = |keys: &[&'static str]| ListType::Map(keys.to_vec());
        match field {
            "containers"
            | "initContainers"
            | "ephemeralContainers"
            | "volumes"
            | "env"
            | "resourceClaims"
            | "schedulingGates"
            | "claims" => map(&["name"]),
            "imagePullSecrets" if parent == "spec" => map(&["name"]),
            "secrets" if path.len() == 1 => map(&["name"]),
            "ports" if CONTAINER_LISTS.contains(&parent) => map(&["containerPort", "protocol"]),
            "ports" if path == ["spec", "ports"] => map(&["port", "protocol"]),
            "volumeMounts" => map(&["mountPath"]),
            "volumeDevices" => map(&["devicePath"]),
            "conditions" => map(&["type"]),
            "ownerReferences" => map(&["uid"]),
            "hostAliases" | "podIPs" | "hostIPs" => map(&["ip"]),
            "topologySpreadConstraints" => map(&["topologyKey", "whenUnsatisfiable"]),
            "finalizers" if parent == "metadata" => ListType::Set,
            "podCIDRs" => ListType::Set,
            _ => ListType::Atomic,
        }
    }

    fn atomic_object(&self, path: &[String]) -> bool {
        matches!(
            path.last().map(String::as_str),
            Some(
                "selector"
                    | "nodeSelector"
                    | "namespaceSelector"
                    | "labelSelector"
                    | "secretKeyRef"
                    | "configMapKeyRef"
                    | "fieldRef"
                    | "resourceFieldRef"
                    | "roleRef"
            )
        )
    }

    fn key_default(&self, path: &[String], key: &str) -> Option<Value> {
        (key == "protocol" && path.last().is_some_and(|f| f == "ports")).then(|| Value::String("TCP".into()))
    }

    fn zero_struct(&self, path: &[String]) -> bool {
        matches!(
            strs(path).as_slice(),
            ["metadata" | "spec" | "status"]
                | [.., "template"]
                | [.., "template", "metadata" | "spec"]
                | ["spec", "strategy"]
        )
    }
}
