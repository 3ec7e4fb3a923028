//! The legacy service-account token controller.

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use serde_json::{Value, json};

use super::{SA_NAME_ANNOTATION, SA_TOKEN_TYPE, service_account_kind};
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
