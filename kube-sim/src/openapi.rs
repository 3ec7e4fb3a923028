//! Minimal OpenAPI v3 documents: enough for kubectl to see that every kind's PATCH accepts `fieldValidation`,
//! so it validates server-side (its default) instead of downloading full schemas. `/openapi/v2` is 404, which
//! makes kubectl fall back to its compiled-in types for strategic merge patches.

use serde_json::{Map, Value, json};

use super::kinds::{self, group_version};

fn path_key(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// `/openapi/v3`: one entry per served group version.
pub(crate) fn root() -> Value {
    let paths: Map<String, Value> = kinds::group_versions()
        .into_iter()
        .map(|(g, v)| {
            let key = path_key(g, v);
            let url = format!("/openapi/v3/{key}?hash={}", hash(&key));
            (key, json!({"serverRelativeURL": url}))
        })
        .collect();
    json!({"paths": paths})
}

/// A stable per-document hash (clients only use it for cache keys).
fn hash(s: &str) -> String {
    use sha2::{Digest, Sha256};
    hex::encode(&Sha256::digest(s.as_bytes())[..16])
}

/// `/openapi/v3/api/v1` or `/openapi/v3/apis/{g}/{v}`: item paths with a PATCH operation per kind.
///
/// kubectl only probes PATCH operations for `fieldValidation`, so create-only kinds (TokenReview) get one too;
/// without it kubectl would insist on client-side validation against the full v2 schema.
pub(crate) fn group_version_doc(path: &str) -> Option<Value> {
    let (g, v) = kinds::group_versions()
        .into_iter()
        .find(|(g, v)| path_key(g, v) == path)?;
    let query =
        |name: &str| json!({"name": name, "in": "query", "schema": {"type": "string", "uniqueItems": true}});
    let params: Vec<Value> = ["dryRun", "fieldManager", "fieldValidation", "force"]
        .into_iter()
        .map(query)
        .collect();
    let mut paths = Map::new();
    for k in kinds::in_group_version(g, v) {
        let scope = if k.namespaced {
            "namespaces/{namespace}/"
        } else {
            ""
        };
        let prefix = if g.is_empty() {
            "/api/v1".to_string()
        } else {
            format!("/apis/{}", group_version(g, v))
        };
        let patch = json!({
            "operationId": format!("patch{}", k.kind),
            "parameters": params,
            "responses": {"200": {"description": "OK"}},
            "x-kubernetes-action": "patch",
            "x-kubernetes-group-version-kind": {"group": g, "version": v, "kind": k.kind},
        });
        paths.insert(
            format!("{prefix}/{scope}{}/{{name}}", k.plural),
            json!({"patch": patch}),
        );
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.33.0"},
        "paths": paths,
        "components": {"schemas": {}},
    }))
}
