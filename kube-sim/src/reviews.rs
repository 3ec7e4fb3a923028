//! Computed, never-stored requests: TokenReview, SelfSubjectReview, the authorization.k8s.io reviews
//! (in `access_reviews`), and TokenRequest (`serviceaccounts/token`).

use axum::body::Body;
use http::{Response, StatusCode};
use serde_json::{Value, json};

use super::Ctx;
use super::access_reviews;
use super::auth::{API_AUDIENCE, Identity};
use super::controllers::service_account_kind;
use super::error::Error;
use super::http::respond_json;
use super::kinds::{Handling, Kind};
use super::object::{Key, now_secs, rfc3339};
use super::write::normalize;

const DEFAULT_TOKEN_SECONDS: i64 = 3600;
/// The real server refuses shorter TokenRequests.
const MIN_TOKEN_SECONDS: i64 = 600;

fn audiences(spec: &Value) -> Vec<String> {
    spec["audiences"]
        .as_array()
        .map(|a| a.iter().filter_map(|v| v.as_str().map(str::to_string)).collect())
        .unwrap_or_default()
}

/// Answers a TokenReview (validates a token this server issued), a SelfSubjectReview (who am I) or an
/// authorization review; `namespace` is the URL's (LocalSubjectAccessReview).
pub(crate) fn review(
    ctx: &Ctx,
    kind: &'static Kind,
    namespace: &str,
    identity: &Identity,
    body: Value,
) -> Result<Response<Body>, Error> {
    let mut obj = normalize(kind, if kind.namespaced { namespace } else { "" }, body)?;
    let status = match kind.handling {
        Handling::TokenReview => {
            let token = obj["spec"]["token"].as_str().unwrap_or_default();
            if token.is_empty() {
                return Err(Error::invalid(kind.kind, "", "spec.token", "Required value"));
            }
            let wanted = audiences(&obj["spec"]);
            match ctx.authority.authenticate_token(&ctx.store, token, &wanted) {
                Ok(user) => {
                    let auds = if wanted.is_empty() {
                        vec![API_AUDIENCE.to_string()]
                    } else {
                        wanted
                    };
                    json!({"authenticated": true, "user": user, "audiences": auds})
                }
                Err(reason) => json!({"user": {}, "error": reason}),
            }
        }
        Handling::AccessReview => access_reviews::access_review(&ctx.store, kind, namespace, identity, &obj)?,
        Handling::SelfSubjectRulesReview => {
            let status = access_reviews::rules_review(&ctx.store, identity, &obj)?;
            // The real server answers with a fresh object: the spec is not echoed.
            obj["spec"] = json!({});
            status
        }
        Handling::SelfSubjectReview | Handling::Stored => json!({"userInfo": identity}),
    };
    obj["status"] = status;
    obj["metadata"]["creationTimestamp"] = Value::Null;
    Ok(respond_json(StatusCode::CREATED, &obj))
}

/// TokenRequest: a bound token for an existing ServiceAccount, honouring `spec.expirationSeconds`.
pub(crate) fn token_request(
    ctx: &Ctx,
    key: &Key,
    body: Value,
    dry_run: bool,
) -> Result<Response<Body>, Error> {
    let (ns, name) = key;
    let sa = ctx
        .store
        .get_obj(service_account_kind(), key)
        .ok_or_else(|| Error::NotFound {
            resource: "serviceaccounts".into(),
            name: name.clone(),
        })?;
    let spec = &body["spec"];
    let seconds = spec["expirationSeconds"]
        .as_i64()
        .unwrap_or(DEFAULT_TOKEN_SECONDS);
    if seconds < MIN_TOKEN_SECONDS {
        return Err(Error::invalid(
            "TokenRequest",
            name,
            "spec.expirationSeconds",
            "Invalid value: may not specify a duration less than 10 minutes",
        ));
    }
    let auds = audiences(spec);
    let expires = now_secs() + seconds;
    let token = if dry_run {
        String::new()
    } else {
        ctx.authority
            .sign_service_account_token(ns, name, &sa.uid, None, Some(expires), &auds)
    };
    let response = json!({
        "kind": "TokenRequest", "apiVersion": "authentication.k8s.io/v1",
        "metadata": {"name": name, "namespace": ns, "creationTimestamp": rfc3339(now_secs())},
        "spec": {
            "audiences": if auds.is_empty() { vec![API_AUDIENCE.to_string()] } else { auds },
            "expirationSeconds": seconds, "boundObjectRef": spec["boundObjectRef"],
        },
        "status": {"token": token, "expirationTimestamp": rfc3339(expires)},
    });
    Ok(respond_json(StatusCode::CREATED, &response))
}
