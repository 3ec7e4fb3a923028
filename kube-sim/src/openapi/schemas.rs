//! Component schemas generated from the k8s-openapi type definitions (never hand-written), keyed by the names the
//! real server uses (`io.k8s.api.core.v1.Pod`), with `x-kubernetes-group-version-kind` on every served kind.

use k8s_openapi::api::{
    apps, authentication, authorization, autoscaling, batch, coordination, core, discovery, networking,
    policy, rbac,
};
use k8s_openapi::schemars::{JsonSchema, SchemaGenerator, generate::SchemaSettings};
use serde_json::{Map, Value, json};

use crate::kinds::Kind;

/// A top-level type: its group/version/kind and how to generate its schema into a generator.
struct Root {
    group: &'static str,
    version: &'static str,
    kind: &'static str,
    name: fn() -> std::borrow::Cow<'static, str>,
    generate: fn(&mut SchemaGenerator),
}

fn root<K: k8s_openapi::Resource + JsonSchema>() -> Root {
    Root {
        group: K::GROUP,
        version: K::VERSION,
        kind: K::KIND,
        name: K::schema_name,
        generate: |g| {
            g.subschema_for::<K>();
        },
    }
}

/// Every kind the simulator serves or may serve (entries not in the kind table are skipped).
fn roots() -> Vec<Root> {
    vec![
        root::<core::v1::Namespace>(),
        root::<core::v1::Service>(),
        root::<core::v1::Pod>(),
        root::<core::v1::Node>(),
        root::<core::v1::Secret>(),
        root::<core::v1::ConfigMap>(),
        root::<core::v1::ServiceAccount>(),
        root::<core::v1::Endpoints>(),
        root::<core::v1::Event>(),
        root::<core::v1::PersistentVolumeClaim>(),
        root::<core::v1::PersistentVolume>(),
        root::<core::v1::ReplicationController>(),
        root::<discovery::v1::EndpointSlice>(),
        root::<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition>(
        ),
        root::<authentication::v1::TokenReview>(),
        root::<authentication::v1::SelfSubjectReview>(),
        root::<authentication::v1::TokenRequest>(),
        root::<authorization::v1::SubjectAccessReview>(),
        root::<authorization::v1::SelfSubjectAccessReview>(),
        root::<authorization::v1::LocalSubjectAccessReview>(),
        root::<authorization::v1::SelfSubjectRulesReview>(),
        root::<coordination::v1::Lease>(),
        root::<rbac::v1::ClusterRole>(),
        root::<rbac::v1::ClusterRoleBinding>(),
        root::<rbac::v1::Role>(),
        root::<rbac::v1::RoleBinding>(),
        root::<apps::v1::Deployment>(),
        root::<apps::v1::ReplicaSet>(),
        root::<apps::v1::DaemonSet>(),
        root::<apps::v1::StatefulSet>(),
        root::<batch::v1::Job>(),
        root::<batch::v1::CronJob>(),
        root::<networking::v1::Ingress>(),
        root::<policy::v1::PodDisruptionBudget>(),
        root::<autoscaling::v2::HorizontalPodAutoscaler>(),
        root::<autoscaling::v1::Scale>(),
    ]
}

/// Which dialect to generate: OpenAPI v3 (`#/components/schemas/…`, `allOf` around described `$ref`s) or
/// Swagger 2.0 (`#/definitions/…`).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Dialect {
    V2,
    V3,
}

/// The schemas of `kinds` and everything they reference, by name; `gvk` marks the kinds' own schemas.
pub(crate) fn definitions<'a>(
    dialect: Dialect,
    kinds: impl IntoIterator<Item = &'a Kind>,
    gvk: bool,
) -> Map<String, Value> {
    let settings = match dialect {
        Dialect::V3 => SchemaSettings::openapi3(),
        // Swagger 2.0 keeps descriptions beside `$ref`s, as the real server's v2 document does.
        Dialect::V2 => SchemaSettings::draft07().with(|s| s.transforms.clear()),
    };
    let mut generator = settings.with(|s| s.meta_schema = None).into_generator();
    let all = roots();
    let mut named = Vec::new();
    for kind in kinds {
        if let Some(r) = all
            .iter()
            .find(|r| r.group == kind.group && r.version == kind.version && r.kind == kind.kind)
        {
            (r.generate)(&mut generator);
            named.push(r);
        }
    }
    let mut defs = generator.take_definitions(true);
    // k8s-openapi requires `metadata` (a non-optional Rust field); the real schemas do not.
    for r in &named {
        if let Some(Value::Array(required)) = defs
            .get_mut((r.name)().as_ref())
            .and_then(|s| s.get_mut("required"))
        {
            required.retain(|f| f != "metadata");
        }
    }
    // A type named by several served kinds (none today) would carry each group/version/kind, as on a real server.
    for r in named.into_iter().filter(|_| gvk) {
        if let Some(schema) = defs.get_mut((r.name)().as_ref()) {
            let gvk = json!({"group": r.group, "version": r.version, "kind": r.kind});
            match &mut schema["x-kubernetes-group-version-kind"] {
                Value::Array(list) => list.push(gvk),
                other => *other = json!([gvk]),
            }
        }
    }
    defs
}

/// Whether a kind has a generated schema (every served kind must).
#[cfg(test)]
pub(crate) fn has_schema(kind: &Kind) -> bool {
    roots()
        .iter()
        .any(|r| r.group == kind.group && r.version == kind.version && r.kind == kind.kind)
}
