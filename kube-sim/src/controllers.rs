//! The built-in controllers clients rely on (namespace defaults, service-account tokens, deletion cascades),
//! run synchronously inside the write transaction so their effects are atomic and deterministic.

use std::sync::Arc;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use serde_json::{Value, json};

use super::error::Error;
use super::kinds::{self, KINDS, Kind, KindId};
use super::object::Obj;
use super::store::Txn;
use super::write::{self, StatusMode, WriteOpts};

pub(crate) const SA_TOKEN_TYPE: &str = "kubernetes.io/service-account-token";
pub(crate) const SA_NAME_ANNOTATION: &str = "kubernetes.io/service-account.name";
const SA_UID_ANNOTATION: &str = "kubernetes.io/service-account.uid";

fn core_kind(kind: &str) -> KindId {
    kinds::by_type("v1", kind).map(Kind::id).unwrap_or_default()
}

pub(crate) fn namespace_kind() -> KindId {
    core_kind("Namespace")
}

pub(crate) fn service_account_kind() -> KindId {
    core_kind("ServiceAccount")
}

pub(crate) fn secret_kind() -> KindId {
    core_kind("Secret")
}

fn is_core(kind: &Kind, name: &str) -> bool {
    kind.group.is_empty() && kind.kind == name
}

/// The status a freshly created object starts with.
pub(crate) fn initial_status(kind: &Kind, obj: &mut Value) {
    let status = match kind.kind {
        "Namespace" if kind.group.is_empty() => Some(json!({"phase": "Active"})),
        "Pod" if kind.group.is_empty() => Some(json!({"phase": "Pending"})),
        "Service" if kind.group.is_empty() => Some(json!({"loadBalancer": {}})),
        _ => None,
    };
    if let (Some(status), Some(o)) = (status, obj.as_object_mut()) {
        o.insert("status".into(), status);
    } else if let Some(o) = obj.as_object_mut() {
        o.remove("status");
    }
}

/// Defaulting the real server does on write: Service type and cluster IP.
pub(crate) fn defaults(txn: &Txn<'_>, kind: &Kind, obj: &mut Value) {
    if !is_core(kind, "Service") || !obj["spec"].is_object() && !obj["spec"].is_null() {
        return;
    }
    let spec = &mut obj["spec"];
    if spec["type"].is_null() {
        spec["type"] = json!("ClusterIP");
    }
    if spec["type"] != "ExternalName" && spec["clusterIP"].is_null() {
        // Unique per write: derived from the revision this write will get (10.96.0.0/12).
        let n = txn.next_rv();
        let ip = format!(
            "10.{}.{}.{}",
            96 + (n >> 16 & 0x0f),
            n >> 8 & 0xff,
            (n & 0xff).max(1)
        );
        spec["clusterIP"] = json!(ip);
        spec["clusterIPs"] = json!([ip]);
    }
}

/// The legacy token controller: a service-account token Secret gets `token`, `ca.crt` and `namespace`.
pub(crate) fn admit(txn: &Txn<'_>, kind: &Kind, obj: &mut Value) {
    if !is_core(kind, "Secret") || obj["type"] != SA_TOKEN_TYPE || !obj["data"]["token"].is_null() {
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

/// Every namespace gets a `default` ServiceAccount.
pub(crate) fn after_create(txn: &mut Txn<'_>, kind: &'static Kind, obj: &Arc<Obj>) -> Result<(), Error> {
    if is_core(kind, "Namespace") {
        let ns = obj.key.1.clone();
        let sa = kinds::by_id(service_account_kind());
        if txn.get(sa.id(), &(ns.clone(), "default".into())).is_none() {
            let opts = WriteOpts {
                dry_run: false,
                status: StatusMode::Ignore,
            };
            write::create_in(txn, sa, &ns, json!({"metadata": {"name": "default"}}), &opts)?;
        }
    }
    Ok(())
}

/// Deleting a namespace deletes its contents; deleting a ServiceAccount deletes its token Secrets.
pub(crate) fn after_delete(txn: &mut Txn<'_>, kind: &'static Kind, obj: &Arc<Obj>) -> Result<(), Error> {
    if is_core(kind, "Namespace") {
        for k in KINDS.iter().filter(|k| k.namespaced) {
            for key in txn.keys(k.id(), &obj.key.1) {
                write::delete_in(txn, k, &key)?;
            }
        }
    } else if is_core(kind, "ServiceAccount") {
        let secrets = kinds::by_id(secret_kind());
        for key in txn.keys(secrets.id(), &obj.key.0) {
            let bound = txn.get(secrets.id(), &key).is_some_and(|s| {
                let v = s.value();
                v["type"] == SA_TOKEN_TYPE
                    && v["metadata"]["annotations"][SA_NAME_ANNOTATION] == obj.key.1.as_str()
            });
            if bound {
                write::delete_in(txn, secrets, &key)?;
            }
        }
    }
    Ok(())
}
