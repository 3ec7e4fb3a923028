//! The root-ca-cert-publisher: every active namespace has the `kube-root-ca.crt` ConfigMap holding the
//! cluster CA, recreated when deleted.

use serde_json::json;

use super::{core_kind, namespace_kind};
use crate::error::Error;
use crate::kinds::{self, Kind};
use crate::object::Obj;
use crate::store::Txn;
use crate::write::{self, StatusMode, WriteOpts};

pub(crate) const NAME: &str = "kube-root-ca.crt";
const DESCRIPTION: &str = "Contains a CA bundle that can be used to verify the kube-apiserver when using internal \
    endpoints such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across \
    distributions of Kubernetes clusters.";

/// Creates the ConfigMap in `ns` unless it exists.
pub(super) fn publish(txn: &mut Txn<'_>, ns: &str) -> Result<(), Error> {
    let kind = kinds::by_id(core_kind("ConfigMap"));
    if txn.get(kind.id(), &(ns.to_string(), NAME.to_string())).is_some() {
        return Ok(());
    }
    let body = json!({
        "metadata": {"name": NAME, "annotations": {"kubernetes.io/description": DESCRIPTION}},
        "data": {"ca.crt": txn.store().authority.ca_pem()},
    });
    let opts = WriteOpts {
        dry_run: false,
        status: StatusMode::Ignore,
        track: crate::write::Track::None,
        fields: crate::typed::FieldCheck::new(crate::typed::FieldValidation::Ignore),
    };
    write::create_in(txn, kind, ns, body, &opts).map(|_| ())
}

pub(super) fn is_root_ca(kind: &Kind, obj: &Obj) -> bool {
    kind.group.is_empty() && kind.kind == "ConfigMap" && obj.key.1 == NAME
}

/// A deleted `kube-root-ca.crt` comes back while its namespace is active.
pub(super) fn republish(txn: &mut Txn<'_>, ns: &str) -> Result<(), Error> {
    let active = txn
        .get(namespace_kind(), &(String::new(), ns.to_string()))
        .is_some_and(|n| n.value()["status"]["phase"] != "Terminating");
    if active { publish(txn, ns) } else { Ok(()) }
}

#[cfg(test)]
mod tests {
    use crate::controllers::test_store;

    #[test]
    fn every_namespace_has_the_root_ca_and_gets_it_back() {
        let store = test_store();
        store
            .apply(serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "apps"}}))
            .unwrap();
        let cm = store
            .get("v1", "ConfigMap", Some("apps"), super::NAME)
            .expect("published");
        assert_eq!(cm["data"]["ca.crt"], store.authority.ca_pem());
        assert!(
            store
                .get("v1", "ConfigMap", Some("kube-system"), super::NAME)
                .is_some()
        );
        let uid = cm["metadata"]["uid"].clone();
        store
            .delete("v1", "ConfigMap", Some("apps"), super::NAME)
            .unwrap();
        let again = store
            .get("v1", "ConfigMap", Some("apps"), super::NAME)
            .expect("republished");
        assert_ne!(again["metadata"]["uid"], uid);
    }
}
