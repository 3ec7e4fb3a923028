//! OpenAPI documents: `/openapi/v3` (index plus one document per group version) and `/openapi/v2`, with
//! component schemas generated from the k8s-openapi definitions, so `kubectl explain` works.
//!
//! PATCH operations declare `fieldValidation`, so kubectl validates server-side (its default) instead of
//! client-side. They declare no request body, as kubectl would then compute strategic merge patches from
//! these schemas, which lack the patch merge keys; kubectl falls back to its compiled-in types instead.

mod proto_v2;
mod schemas;

use std::collections::BTreeMap;
use std::sync::OnceLock;

use bytes::Bytes;
use serde_json::{Map, Value, json};

use super::crd::Registry;
use super::error::Error;
use super::kinds::{self, Kind, group_version};
use schemas::Dialect;

fn path_key(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// A generated document and the hash clients use as its cache key.
struct Doc {
    hash: String,
    body: Bytes,
}

impl Doc {
    fn new(doc: &Value) -> Doc {
        use sha2::{Digest, Sha256};
        let body = serde_json::to_vec(doc).unwrap_or_default();
        Doc {
            hash: hex::encode(&Sha256::digest(&body)[..16]).to_uppercase(),
            body: Bytes::from(body),
        }
    }
}

/// The v3 documents by path key (`api/v1`, `apis/apps/v1`), generated once on first use.
fn v3_docs() -> &'static BTreeMap<String, Doc> {
    static DOCS: OnceLock<BTreeMap<String, Doc>> = OnceLock::new();
    DOCS.get_or_init(|| {
        kinds::group_versions()
            .into_iter()
            .map(|(g, v)| (path_key(g, v), Doc::new(&v3_group_version(g, v))))
            .collect()
    })
}

/// The documents of the custom resources' group versions, generated per request (CRDs come and go).
fn custom_docs(reg: &Registry) -> BTreeMap<String, Doc> {
    let mut gvs: Vec<(&str, &str)> = Vec::new();
    for k in reg.custom() {
        if !gvs.contains(&(k.group, k.version)) {
            gvs.push((k.group, k.version));
        }
    }
    gvs.into_iter()
        .map(|(g, v)| {
            let doc = v3_document(g, v, reg.in_group_version(g, v), custom_schemas(reg, g, v));
            (path_key(g, v), Doc::new(&doc))
        })
        .collect()
}

/// `/openapi/v3`: one entry per served group version.
pub(crate) fn root(reg: &Registry) -> Value {
    let custom = custom_docs(reg);
    let paths: Map<String, Value> = v3_docs()
        .iter()
        .chain(custom.iter())
        .map(|(key, doc)| {
            let url = format!("/openapi/v3/{key}?hash={}", doc.hash);
            (key.clone(), json!({"serverRelativeURL": url}))
        })
        .collect();
    json!({"paths": paths})
}

/// `/openapi/v3/api/v1` or `/openapi/v3/apis/{g}/{v}`.
pub(crate) fn group_version_doc(reg: &Registry, path: &str) -> Option<Bytes> {
    v3_docs()
        .get(path)
        .map(|d| d.body.clone())
        .or_else(|| custom_docs(reg).remove(path).map(|d| d.body))
}

/// A custom kind's schema name, as the real server publishes it: the group reversed, then version and kind
/// (`io.istio.networking.v1.DestinationRule`).
fn custom_schema_name(k: &Kind) -> String {
    let mut parts: Vec<&str> = k.group.split('.').collect();
    parts.reverse();
    format!("{}.{}.{}", parts.join("."), k.version, k.kind)
}

/// The custom kinds' schemas with their metadata typed as ObjectMeta, as the real server publishes them.
fn custom_schemas(reg: &Registry, g: &str, v: &str) -> Value {
    let mut out = Map::new();
    for k in reg.in_group_version(g, v) {
        let Some(custom) = k.custom else { continue };
        let mut schema = custom.schema.clone();
        if let Some(props) = schema["properties"].as_object_mut() {
            props.insert(
                "metadata".into(),
                json!({"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}),
            );
        }
        schema["x-kubernetes-group-version-kind"] = json!([{"group": g, "version": v, "kind": k.kind}]);
        out.insert(custom_schema_name(k), schema);
    }
    static META: OnceLock<Option<Value>> = OnceLock::new();
    if let Some(meta) = META.get_or_init(v3_meta_schema) {
        out.insert(
            "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta".into(),
            meta.clone(),
        );
    }
    Value::Object(out)
}

/// ObjectMeta's schema from the core document (its nested references are inlined there as well).
fn v3_meta_schema() -> Option<Value> {
    let core = v3_docs().get("api/v1")?;
    let doc: Value = serde_json::from_slice(&core.body).ok()?;
    let schemas = &doc["components"]["schemas"];
    let mut meta = schemas["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"].clone();
    // Nested meta types are left untyped here: explain needs the top-level fields only.
    if let Some(props) = meta["properties"].as_object_mut() {
        for p in props.values_mut() {
            strip_refs(p);
        }
    }
    Some(meta)
}

fn strip_refs(v: &mut Value) {
    match v {
        Value::Object(m) => {
            if m.contains_key("$ref") || m.contains_key("allOf") {
                m.remove("$ref");
                m.remove("allOf");
                m.insert("type".into(), json!("object"));
            }
            for x in m.values_mut() {
                strip_refs(x);
            }
        }
        Value::Array(a) => a.iter_mut().for_each(strip_refs),
        _ => {}
    }
}

/// The protobuf form of `/openapi/v2`, the only one client-go asks for.
pub(crate) const V2_PROTOBUF: &str = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf";

/// `/openapi/v2` for a request's `Accept` header: protobuf when asked for, else JSON; 406 for anything else.
pub(crate) fn v2(accept: &str) -> Result<(&'static str, Bytes), Error> {
    static DOCS: OnceLock<(Bytes, Bytes)> = OnceLock::new();
    let (json, proto) = DOCS.get_or_init(|| {
        // No `x-kubernetes-group-version-kind` here: kubectl would look kinds up in this document to compute
        // strategic merge patches, and these schemas lack the patch merge keys; without it kubectl uses its
        // compiled-in types. `explain` reads the v3 documents.
        let definitions = schemas::definitions(Dialect::V2, kinds::KINDS.iter(), false);
        let doc = json!({
            "swagger": "2.0",
            "info": {"title": "Kubernetes", "version": "v1.33.0"},
            "paths": {},
            "definitions": definitions,
        });
        (
            Bytes::from(serde_json::to_vec(&doc).unwrap_or_default()),
            Bytes::from(proto_v2::encode(&doc)),
        )
    });
    let types: Vec<&str> = accept
        .split(',')
        .map(|a| a.split(';').next().unwrap_or_default().trim())
        .collect();
    if types.contains(&V2_PROTOBUF) {
        // The real server labels it so: the `@` in the requested type is not valid in a Content-Type.
        Ok(("application/octet-stream", proto.clone()))
    } else if accept.is_empty()
        || types
            .iter()
            .any(|a| matches!(*a, "application/json" | "application/*" | "*/*"))
    {
        Ok(("application/json", json.clone()))
    } else {
        Err(Error::NotAcceptable(format!(
            "only the following media types are accepted: application/json, {V2_PROTOBUF}"
        )))
    }
}

/// One group version's document: item paths with a PATCH operation per kind, plus the kinds' schemas.
///
/// kubectl only probes PATCH operations for `fieldValidation`, so create-only kinds (TokenReview) get one too;
/// without it kubectl would insist on client-side validation.
fn v3_group_version(g: &str, v: &str) -> Value {
    let schemas = Value::Object(schemas::definitions(
        Dialect::V3,
        kinds::in_group_version(g, v),
        true,
    ));
    v3_document(g, v, kinds::in_group_version(g, v), schemas)
}

fn v3_document<'a>(g: &str, v: &str, kinds: impl Iterator<Item = &'a Kind>, schemas: Value) -> Value {
    let query =
        |name: &str| json!({"name": name, "in": "query", "schema": {"type": "string", "uniqueItems": true}});
    let params: Vec<Value> = ["dryRun", "fieldManager", "fieldValidation", "force"]
        .into_iter()
        .map(query)
        .collect();
    let mut paths = Map::new();
    for k in kinds {
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
    json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.33.0"},
        "paths": paths,
        "components": {"schemas": schemas},
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_served_kind_has_a_schema() {
        for k in kinds::KINDS {
            assert!(schemas::has_schema(k), "{}", k.kind);
        }
    }

    #[test]
    fn documents_carry_kinds_and_resolvable_refs() {
        let doc: Value =
            serde_json::from_slice(&group_version_doc(&Registry::default(), "api/v1").unwrap()).unwrap();
        let schemas = &doc["components"]["schemas"];
        let pod = &schemas["io.k8s.api.core.v1.Pod"];
        assert_eq!(
            pod["x-kubernetes-group-version-kind"],
            json!([{"group": "", "version": "v1", "kind": "Pod"}])
        );
        let spec_ref = pod["properties"]["spec"]["allOf"][0]["$ref"].as_str().unwrap();
        assert_eq!(spec_ref, "#/components/schemas/io.k8s.api.core.v1.PodSpec");
        assert!(schemas["io.k8s.api.core.v1.Container"].is_object());
        let text = serde_json::to_string(&doc).unwrap();
        assert!(!text.contains("#/definitions/"));
        let v2: Value = serde_json::from_slice(&v2("application/json").unwrap().1).unwrap();
        let spec = &v2["definitions"]["io.k8s.api.core.v1.Pod"]["properties"]["spec"]["$ref"];
        assert_eq!(spec, "#/definitions/io.k8s.api.core.v1.PodSpec");
    }

    #[test]
    fn v2_media_types() {
        assert_eq!(v2(V2_PROTOBUF).unwrap().0, "application/octet-stream");
        assert_eq!(v2("application/json, */*").unwrap().0, "application/json");
        assert_eq!(v2("").unwrap().0, "application/json");
        assert!(v2("application/yaml").is_err());
    }

    #[test]
    fn index_hashes_name_the_documents() {
        let root = root(&Registry::default());
        let url = root["paths"]["apis/apps/v1"]["serverRelativeURL"]
            .as_str()
            .unwrap();
        assert!(url.starts_with("/openapi/v3/apis/apps/v1?hash="), "{url}");
    }

    #[test]
    fn custom_kinds_get_documents_with_their_schemas() {
        let mut crd = json!({
            "metadata": {"name": "widgets.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced", "names": {"plural": "widgets", "kind": "Widget"},
                     "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema":
                        {"type": "object", "properties": {"spec": {"type": "object", "properties": {"host": {"type": "string"}}}}}}}]},
        });
        crate::crd::admit_definition(&mut crd, None).unwrap();
        crate::crd::definition_status(&mut crd, &[]);
        let reg = Registry::build([&crd].into_iter());
        let root = root(&reg);
        assert!(
            root["paths"]["apis/example.com/v1"]["serverRelativeURL"].is_string(),
            "{root}"
        );
        assert!(root["paths"]["api/v1"].is_object());
        let doc: Value =
            serde_json::from_slice(&group_version_doc(&reg, "apis/example.com/v1").unwrap()).unwrap();
        let schemas = &doc["components"]["schemas"];
        let widget = &schemas["com.example.v1.Widget"];
        assert_eq!(
            widget["x-kubernetes-group-version-kind"],
            json!([{"group": "example.com", "version": "v1", "kind": "Widget"}])
        );
        assert_eq!(
            widget["properties"]["spec"]["properties"]["host"]["type"],
            "string"
        );
        let meta_ref = widget["properties"]["metadata"]["$ref"].as_str().unwrap();
        assert!(schemas[meta_ref.trim_start_matches("#/components/schemas/")].is_object());
        assert!(
            doc["paths"]["/apis/example.com/v1/namespaces/{namespace}/widgets/{name}"]["patch"].is_object()
        );
        assert!(group_version_doc(&Registry::default(), "apis/example.com/v1").is_none());
    }
}
