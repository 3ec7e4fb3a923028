//! The ServiceAccount admission plugin: a Pod runs as a ServiceAccount (`default` unless named) that must
//! exist in its namespace.

use serde_json::{Value, json};

use super::service_account_kind;
use crate::error::Error;
use crate::kinds::Kind;
use crate::store::Txn;

const DEFAULT: &str = "default";
const MIRROR_ANNOTATION: &str = "kubernetes.io/config.mirror";

pub(super) fn admit_pod(txn: &Txn<'_>, kind: &Kind, ns: &str, pod: &mut Value) -> Result<(), Error> {
    if !pod["metadata"]["annotations"][MIRROR_ANNOTATION].is_null() || !pod["spec"].is_object() {
        return Ok(());
    }
    let sa = match pod["spec"]["serviceAccountName"].as_str() {
        Some(sa) if !sa.is_empty() => sa.to_string(),
        _ => {
            pod["spec"]["serviceAccountName"] = json!(DEFAULT);
            DEFAULT.to_string()
        }
    };
    if txn
        .get(service_account_kind(), &(ns.to_string(), sa.clone()))
        .is_some()
    {
        return Ok(());
    }
    Err(Error::Denied {
        resource: kind.qualified_plural(),
        name: pod["metadata"]["name"].as_str().unwrap_or_default().to_string(),
        detail: format!("error looking up service account {ns}/{sa}: serviceaccount \"{sa}\" not found"),
        causes: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::controllers::test_store;
    use crate::error::Error;

    fn pod(sa: Option<&str>) -> serde_json::Value {
        let mut pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
            "spec": {"containers": [{"name": "c", "image": "i"}]}});
        if let Some(sa) = sa {
            pod["spec"]["serviceAccountName"] = json!(sa);
        }
        pod
    }

    #[test]
    fn pods_need_their_service_account() {
        let store = test_store();
        let err = store.apply(pod(Some("robot"))).unwrap_err();
        assert!(matches!(err, Error::Denied { .. }));
        assert_eq!(
            err.to_string(),
            "pods \"p\" is forbidden: error looking up service account default/robot: serviceaccount \"robot\" not found"
        );
        let stored = store.apply(pod(None)).unwrap();
        assert_eq!(stored["spec"]["serviceAccountName"], "default");
    }
}
