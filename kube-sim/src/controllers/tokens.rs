//! The legacy service-account token controller.

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use serde_json::{Value, json};

use super::{Queue, SA_NAME_ANNOTATION, SA_TOKEN_TYPE, secret_kind, service_account_kind};
use crate::delete;
use crate::error::Error;
use crate::kinds;
use crate::object::Obj;
use crate::store::Txn;

const SA_UID_ANNOTATION: &str = "kubernetes.io/service-account.uid";

/// The legacy token controller: a service-account token Secret gets `token`, `ca.crt` and `namespace`.
pub(super) fn fill(txn: &Txn<'_>, obj: &mut Value) {
    if obj["type"] != SA_TOKEN_TYPE || !obj["data"]["token"].is_null() {
        return;
    }
    let meta = &obj["metadata"];
    let ns = meta["namespace"].as_str().unwrap_or_default().to_string();
    let Some(sa_name) = meta["annotations"][SA_NAME_ANNOTATION]
        .as_str()
        .map(str::to_string)
    else {
        return;
    };
    let Some(sa) = txn.get(service_account_kind(), &(ns.clone(), sa_name.clone())) else {
        return;
    };
    let secret = (
        meta["name"].as_str().unwrap_or_default().to_string(),
        meta["uid"].as_str().unwrap_or_default().to_string(),
    );
    let authority = &txn.store().authority;
    let token = authority.sign_service_account_token(&ns, &sa_name, &sa.uid, Some(secret), None, &[]);
    obj["metadata"]["annotations"][SA_UID_ANNOTATION] = json!(sa.uid);
    obj["data"]["token"] = json!(B64.encode(token));
    obj["data"]["ca.crt"] = json!(B64.encode(authority.ca_pem()));
    obj["data"]["namespace"] = json!(B64.encode(&ns));
}

/// A deleted ServiceAccount's token Secrets are deleted with it.
pub(super) fn revoke(txn: &mut Txn<'_>, sa: &Obj, queue: &mut Queue) -> Result<(), Error> {
    let secrets = kinds::by_id(secret_kind());
    for key in txn.keys(secrets.id(), &sa.key.0) {
        let Some(secret) = txn.get(secrets.id(), &key).cloned() else {
            continue;
        };
        let v = secret.value();
        let bound = v["type"] == SA_TOKEN_TYPE
            && v["metadata"]["annotations"][SA_NAME_ANNOTATION] == sa.key.1.as_str()
            && v["metadata"]["deletionTimestamp"].is_null();
        if bound {
            delete::request(txn, secrets, &secret, None, false, queue)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::controllers::test_store as store;

    #[test]
    fn deleting_a_service_account_deletes_its_token_secrets() {
        let store = store();
        store
            .apply(serde_json::json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "bot", "namespace": "default"}}))
            .unwrap();
        store
            .apply(serde_json::json!({"apiVersion": "v1", "kind": "Secret", "type": super::SA_TOKEN_TYPE,
                "metadata": {"name": "bot-token", "namespace": "default", "annotations": {super::SA_NAME_ANNOTATION: "bot"}}}))
            .unwrap();
        store
            .delete("v1", "ServiceAccount", Some("default"), "bot")
            .unwrap();
        assert!(store.get("v1", "Secret", Some("default"), "bot-token").is_none());
    }
}
