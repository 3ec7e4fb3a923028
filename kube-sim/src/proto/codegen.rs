//! Generates `generated.rs` (the JSON rendering of every k8s-pb message the simulator decodes) from the
//! sources of k8s-pb (field names, message types) and k8s-openapi v1_33 (JSON names, which fields have
//! no `omitempty`). The test fails when the checked-in file differs; `KUBE_SIM_REGENERATE=1` rewrites it.
// Test support only (also gated where the module is declared): a panic here fails a test, not the server.
#![cfg(test)]

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::{Path, PathBuf};

/// The kinds decoded from protobuf: (apiVersion, kind, k8s-pb type); apiVersion `*` matches any (typed
/// clients send DeleteOptions under their own group version).
#[rustfmt::skip]
pub(super) const ROOTS: &[(&str, &str, &str)] = &[
    ("v1", "ConfigMap", "api::core::v1::ConfigMap"),
    ("v1", "Endpoints", "api::core::v1::Endpoints"),
    ("v1", "Event", "api::core::v1::Event"),
    ("v1", "Namespace", "api::core::v1::Namespace"),
    ("v1", "Node", "api::core::v1::Node"),
    ("v1", "PersistentVolume", "api::core::v1::PersistentVolume"),
    ("v1", "PersistentVolumeClaim", "api::core::v1::PersistentVolumeClaim"),
    ("v1", "Pod", "api::core::v1::Pod"),
    ("v1", "ReplicationController", "api::core::v1::ReplicationController"),
    ("v1", "ResourceQuota", "api::core::v1::ResourceQuota"),
    ("v1", "Secret", "api::core::v1::Secret"),
    ("v1", "Service", "api::core::v1::Service"),
    ("v1", "ServiceAccount", "api::core::v1::ServiceAccount"),
    ("*", "DeleteOptions", "apimachinery::pkg::apis::meta::v1::DeleteOptions"),
    ("apps/v1", "ControllerRevision", "api::apps::v1::ControllerRevision"),
    ("apps/v1", "DaemonSet", "api::apps::v1::DaemonSet"),
    ("apps/v1", "Deployment", "api::apps::v1::Deployment"),
    ("apps/v1", "ReplicaSet", "api::apps::v1::ReplicaSet"),
    ("apps/v1", "StatefulSet", "api::apps::v1::StatefulSet"),
    ("authentication.k8s.io/v1", "SelfSubjectReview", "api::authentication::v1::SelfSubjectReview"),
    ("authentication.k8s.io/v1", "TokenRequest", "api::authentication::v1::TokenRequest"),
    ("authentication.k8s.io/v1", "TokenReview", "api::authentication::v1::TokenReview"),
    ("authorization.k8s.io/v1", "LocalSubjectAccessReview", "api::authorization::v1::LocalSubjectAccessReview"),
    ("authorization.k8s.io/v1", "SelfSubjectAccessReview", "api::authorization::v1::SelfSubjectAccessReview"),
    ("authorization.k8s.io/v1", "SelfSubjectRulesReview", "api::authorization::v1::SelfSubjectRulesReview"),
    ("authorization.k8s.io/v1", "SubjectAccessReview", "api::authorization::v1::SubjectAccessReview"),
    ("autoscaling/v1", "Scale", "api::autoscaling::v1::Scale"),
    ("autoscaling/v2", "HorizontalPodAutoscaler", "api::autoscaling::v2::HorizontalPodAutoscaler"),
    ("batch/v1", "CronJob", "api::batch::v1::CronJob"),
    ("batch/v1", "Job", "api::batch::v1::Job"),
    ("coordination.k8s.io/v1", "Lease", "api::coordination::v1::Lease"),
    ("discovery.k8s.io/v1", "EndpointSlice", "api::discovery::v1::EndpointSlice"),
    ("networking.k8s.io/v1", "Ingress", "api::networking::v1::Ingress"),
    ("policy/v1", "Eviction", "api::policy::v1::Eviction"),
    ("policy/v1", "PodDisruptionBudget", "api::policy::v1::PodDisruptionBudget"),
    ("rbac.authorization.k8s.io/v1", "ClusterRole", "api::rbac::v1::ClusterRole"),
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "api::rbac::v1::ClusterRoleBinding"),
    ("rbac.authorization.k8s.io/v1", "Role", "api::rbac::v1::Role"),
    ("rbac.authorization.k8s.io/v1", "RoleBinding", "api::rbac::v1::RoleBinding"),
    ("scheduling.k8s.io/v1", "PriorityClass", "api::scheduling::v1::PriorityClass"),
];

/// Types with a hand-written JSON form in json.rs; the walk stops there.
const WELL_KNOWN: &[&str] = &[
    "api::authentication::v1::ExtraValue",
    "api::authorization::v1::ExtraValue",
    "apimachinery::pkg::api::resource::Quantity",
    "apimachinery::pkg::apis::meta::v1::FieldsV1",
    "apimachinery::pkg::apis::meta::v1::MicroTime",
    "apimachinery::pkg::apis::meta::v1::Time",
    "apimachinery::pkg::runtime::RawExtension",
    "apimachinery::pkg::util::intstr::IntOrString",
];

/// Scalar fields that are Go pointers (from k8s.io/api's types.go): neither crate records pointer-ness,
/// and for these the zero value is a value (`replicas: 0`, `automountServiceAccountToken: false`).
#[rustfmt::skip]
const POINTERS: &[(&str, &[&str])] = &[
    ("api::apps::v1::DaemonSetSpec", &["revisionHistoryLimit"]),
    ("api::apps::v1::DaemonSetStatus", &["collisionCount"]),
    ("api::apps::v1::DeploymentSpec", &["replicas", "revisionHistoryLimit", "progressDeadlineSeconds"]),
    ("api::apps::v1::DeploymentStatus", &["collisionCount", "terminatingReplicas"]),
    ("api::apps::v1::ReplicaSetSpec", &["replicas"]),
    ("api::apps::v1::ReplicaSetStatus", &["terminatingReplicas"]),
    ("api::apps::v1::RollingUpdateStatefulSetStrategy", &["partition"]),
    ("api::apps::v1::StatefulSetSpec", &["replicas", "revisionHistoryLimit"]),
    ("api::apps::v1::StatefulSetStatus", &["collisionCount"]),
    ("api::authentication::v1::TokenRequestSpec", &["expirationSeconds"]),
    ("api::autoscaling::v2::HPAScalingRules", &["stabilizationWindowSeconds", "selectPolicy"]),
    ("api::autoscaling::v2::HorizontalPodAutoscalerSpec", &["minReplicas"]),
    ("api::autoscaling::v2::HorizontalPodAutoscalerStatus", &["observedGeneration"]),
    ("api::batch::v1::CronJobSpec", &["timeZone", "startingDeadlineSeconds", "suspend", "successfulJobsHistoryLimit", "failedJobsHistoryLimit"]),
    ("api::batch::v1::JobSpec", &["parallelism", "completions", "activeDeadlineSeconds", "backoffLimit", "backoffLimitPerIndex", "maxFailedIndexes", "ttlSecondsAfterFinished", "manualSelector", "suspend", "completionMode", "podReplacementPolicy", "managedBy"]),
    ("api::batch::v1::JobStatus", &["failedIndexes", "ready", "terminating"]),
    ("api::batch::v1::PodFailurePolicyOnExitCodesRequirement", &["containerName"]),
    ("api::batch::v1::SuccessPolicyRule", &["succeededIndexes", "succeededCount"]),
    ("api::coordination::v1::LeaseSpec", &["holderIdentity", "leaseDurationSeconds", "leaseTransitions", "strategy", "preferredHolder"]),
    ("api::core::v1::AzureDiskVolumeSource", &["cachingMode", "fsType", "readOnly", "kind"]),
    ("api::core::v1::ClusterTrustBundleProjection", &["name", "signerName", "optional"]),
    ("api::core::v1::ContainerStatus", &["started", "stopSignal"]),
    ("api::core::v1::FCVolumeSource", &["lun"]),
    ("api::core::v1::ISCSIPersistentVolumeSource", &["initiatorName"]),
    ("api::core::v1::ISCSIVolumeSource", &["initiatorName"]),
    ("api::core::v1::Lifecycle", &["stopSignal"]),
    ("api::core::v1::LocalVolumeSource", &["fsType"]),
    ("api::core::v1::NodeFeatures", &["supplementalGroupsPolicy"]),
    ("api::core::v1::NodeRuntimeHandlerFeatures", &["recursiveReadOnlyMounts", "userNamespaces"]),
    ("api::core::v1::NodeSwapStatus", &["capacity"]),
    ("api::core::v1::PersistentVolumeClaimStatus", &["currentVolumeAttributesClassName"]),
    ("api::core::v1::PodResourceClaim", &["resourceClaimName", "resourceClaimTemplateName"]),
    ("api::core::v1::ClientIPConfig", &["timeoutSeconds"]),
    ("api::core::v1::ConfigMap", &["immutable"]),
    ("api::core::v1::ConfigMapEnvSource", &["optional"]),
    ("api::core::v1::ConfigMapKeySelector", &["optional"]),
    ("api::core::v1::ConfigMapProjection", &["optional"]),
    ("api::core::v1::ConfigMapVolumeSource", &["defaultMode", "optional"]),
    ("api::core::v1::Container", &["restartPolicy"]),
    ("api::core::v1::CSIVolumeSource", &["readOnly", "fsType"]),
    ("api::core::v1::DownwardAPIVolumeFile", &["mode"]),
    ("api::core::v1::DownwardAPIVolumeSource", &["defaultMode"]),
    ("api::core::v1::EndpointAddress", &["nodeName"]),
    ("api::core::v1::EndpointPort", &["appProtocol"]),
    ("api::core::v1::EphemeralContainerCommon", &["restartPolicy"]),
    ("api::core::v1::GRPCAction", &["service"]),
    ("api::core::v1::HostPathVolumeSource", &["type"]),
    ("api::core::v1::KeyToPath", &["mode"]),
    ("api::core::v1::LoadBalancerIngress", &["ipMode"]),
    ("api::core::v1::PersistentVolumeClaimSpec", &["storageClassName", "volumeMode", "volumeAttributesClassName"]),
    ("api::core::v1::PersistentVolumeSpec", &["volumeMode", "volumeAttributesClassName"]),
    ("api::core::v1::PodDNSConfigOption", &["value"]),
    ("api::core::v1::PodSecurityContext", &["runAsUser", "runAsGroup", "runAsNonRoot", "fsGroup", "fsGroupChangePolicy", "supplementalGroupsPolicy", "seLinuxChangePolicy"]),
    ("api::core::v1::PodSpec", &["terminationGracePeriodSeconds", "activeDeadlineSeconds", "automountServiceAccountToken", "shareProcessNamespace", "priority", "runtimeClassName", "enableServiceLinks", "preemptionPolicy", "setHostnameAsFQDN", "hostUsers"]),
    ("api::core::v1::Probe", &["terminationGracePeriodSeconds"]),
    ("api::core::v1::ProjectedVolumeSource", &["defaultMode"]),
    ("api::core::v1::ReplicationControllerSpec", &["replicas"]),
    ("api::core::v1::SeccompProfile", &["localhostProfile"]),
    ("api::core::v1::AppArmorProfile", &["localhostProfile"]),
    ("api::core::v1::Secret", &["immutable"]),
    ("api::core::v1::SecretEnvSource", &["optional"]),
    ("api::core::v1::SecretKeySelector", &["optional"]),
    ("api::core::v1::SecretProjection", &["optional"]),
    ("api::core::v1::SecretVolumeSource", &["defaultMode", "optional"]),
    ("api::core::v1::SecurityContext", &["privileged", "runAsUser", "runAsGroup", "runAsNonRoot", "readOnlyRootFilesystem", "allowPrivilegeEscalation", "procMount"]),
    ("api::core::v1::ServiceAccount", &["automountServiceAccountToken"]),
    ("api::core::v1::ServiceAccountTokenProjection", &["expirationSeconds"]),
    ("api::core::v1::ServicePort", &["appProtocol"]),
    ("api::core::v1::ServiceSpec", &["allocateLoadBalancerNodePorts", "loadBalancerClass", "internalTrafficPolicy", "ipFamilyPolicy", "trafficDistribution"]),
    ("api::core::v1::Toleration", &["tolerationSeconds"]),
    ("api::core::v1::TopologySpreadConstraint", &["minDomains", "nodeAffinityPolicy", "nodeTaintsPolicy"]),
    ("api::core::v1::TypedLocalObjectReference", &["apiGroup"]),
    ("api::core::v1::TypedObjectReference", &["apiGroup", "namespace"]),
    ("api::core::v1::VolumeMount", &["mountPropagation", "recursiveReadOnly"]),
    ("api::core::v1::WindowsSecurityContextOptions", &["gmsaCredentialSpecName", "gmsaCredentialSpec", "runAsUserName", "hostProcess"]),
    ("api::discovery::v1::Endpoint", &["hostname", "nodeName", "zone"]),
    ("api::discovery::v1::EndpointConditions", &["ready", "serving", "terminating"]),
    ("api::discovery::v1::EndpointPort", &["name", "protocol", "port", "appProtocol"]),
    ("api::networking::v1::HTTPIngressPath", &["pathType"]),
    ("api::networking::v1::IngressPortStatus", &["error"]),
    ("api::networking::v1::IngressSpec", &["ingressClassName"]),
    ("api::policy::v1::PodDisruptionBudgetSpec", &["unhealthyPodEvictionPolicy"]),
    ("apimachinery::pkg::apis::meta::v1::DeleteOptions", &["gracePeriodSeconds", "orphanDependents", "propagationPolicy", "ignoreStoreReadErrorWithClusterBreakingPotential"]),
    ("apimachinery::pkg::apis::meta::v1::ObjectMeta", &["deletionGracePeriodSeconds"]),
    ("apimachinery::pkg::apis::meta::v1::OwnerReference", &["controller", "blockOwnerDeletion"]),
    ("apimachinery::pkg::apis::meta::v1::Preconditions", &["uid", "resourceVersion"]),
    ("api::scheduling::v1::PriorityClass", &["preemptionPolicy"]),
];

/// A k8s-pb message field.
#[derive(Debug, Clone)]
struct PbField {
    rust: String,
    /// The k8s-pb path of the message type, for message-typed fields.
    message: Option<String>,
    /// A single optional scalar, the only kind whose zero value matters.
    scalar: bool,
}

/// A k8s-openapi field: JSON name, and whether it is required (no `omitempty` in Go).
type OpenApiField = (String, bool);

/// The host's target triple: `cargo metadata --offline` resolves only its packages then, so it works
/// on a machine that fetched just what this platform builds with.
fn host_triple() -> String {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let out = std::process::Command::new(rustc)
        .arg("-vV")
        .output()
        .expect("rustc -vV runs");
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .find_map(|l| l.strip_prefix("host: "))
        .expect("rustc -vV names the host")
        .to_owned()
}

fn crate_dir(name: &str) -> PathBuf {
    let out = std::process::Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args([
            "metadata",
            "--format-version",
            "1",
            "--offline",
            "--filter-platform",
        ])
        .arg(host_triple())
        .arg("--manifest-path")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml"))
        .output()
        .expect("cargo metadata runs");
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).expect("cargo metadata is JSON");
    let manifest = meta["packages"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| p["name"] == name)
        .and_then(|p| p["manifest_path"].as_str())
        .unwrap_or_else(|| panic!("{name} is a dependency"));
    Path::new(manifest).parent().expect("a crate dir").to_path_buf()
}

/// Field names compared across the crates: `r#type`/`type_`, `cluster_ips`.
fn normalize(rust: &str) -> String {
    rust.trim_start_matches("r#").replace('_', "").to_lowercase()
}

/// Resolves a k8s-pb type path written in module `module` (`super::super::core::v1::X`, `X`).
fn resolve(module: &[&str], ty: &str) -> String {
    let mut path: Vec<&str> = module.to_vec();
    let mut rest = ty;
    while let Some(r) = rest.strip_prefix("super::") {
        path.pop();
        rest = r;
    }
    path.push(rest);
    path.join("::")
}

/// The structs of one k8s-pb module file: name → fields.
fn pb_module(root: &Path, module: &[&str]) -> BTreeMap<String, Vec<PbField>> {
    let file = root.join("src").join(module.join("/")).join("mod.rs");
    let text = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let mut out = BTreeMap::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        let Some(name) = line
            .strip_prefix("pub struct ")
            .and_then(|l| l.strip_suffix(" {"))
        else {
            continue;
        };
        let mut fields = Vec::new();
        let mut attr = String::new();
        let mut decl = String::new();
        for line in lines.by_ref() {
            if line == "}" {
                break;
            }
            let line = line.trim();
            if line.starts_with("#[prost(") {
                attr = line.to_string();
            } else if line.starts_with("pub ") || !decl.is_empty() {
                decl.push_str(line);
                if decl.ends_with(',') && decl.matches('<').count() == decl.matches('>').count() {
                    let (rust, ty) = decl["pub ".len()..].split_once(':').expect("a field declaration");
                    let ty: String = ty.chars().filter(|c| !c.is_whitespace()).collect();
                    let is_message =
                        attr.starts_with("#[prost(message") || attr.contains("\"string, message\"");
                    let message = is_message.then(|| {
                        let inner = ty
                            .split(['<', '>', ','])
                            .rfind(|s| !s.is_empty() && !s.starts_with("::"))
                            .unwrap_or_else(|| panic!("a message type in {ty}"));
                        resolve(module, inner)
                    });
                    let scalar = !is_message && attr.contains("optional") && !attr.contains("bytes");
                    fields.push(PbField {
                        rust: rust.to_string(),
                        message,
                        scalar,
                    });
                    decl.clear();
                }
            }
        }
        out.insert(name.to_string(), fields);
    }
    out
}

/// The structs of one k8s-openapi module dir: lowercase name → normalized field → (JSON name, required).
fn openapi_module(root: &Path, module: &[&str]) -> BTreeMap<String, BTreeMap<String, OpenApiField>> {
    let dir = root.join("src/v1_33").join(module.join("/"));
    let mut out = BTreeMap::new();
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return out;
    };
    for entry in entries.flatten() {
        let text = std::fs::read_to_string(entry.path()).expect("a readable k8s-openapi file");
        let Some(start) = text.find("pub struct ") else {
            continue;
        };
        let rest = &text[start + "pub struct ".len()..];
        let Some(name) = rest.split([' ', '(', ';']).next() else {
            continue;
        };
        let body = rest.split_once("\n}").map_or("", |(b, _)| b);
        let required: BTreeSet<String> = body
            .lines()
            .filter_map(|l| l.trim().strip_prefix("pub ")?.split_once(": "))
            .filter(|(_, ty)| !ty.starts_with("Option<"))
            .map(|(f, _)| normalize(f))
            .collect();
        let mut fields = BTreeMap::new();
        let mut current = String::new();
        for line in text.lines() {
            if let Some(f) = line.trim().strip_prefix("if let Some(value) = &self.") {
                current = f.trim_end_matches(" {").to_string();
            } else if let Some((_, rest)) = line.split_once("serialize_field(&mut state, \"") {
                let (json, tail) = rest.split_once('"').expect("a quoted JSON name");
                let field = tail
                    .split_once("&self.")
                    .map_or(current.as_str(), |(_, f)| f.trim_end_matches(")?;"));
                let key = normalize(field);
                let req = required.contains(&key);
                fields.insert(key, (json.to_string(), req));
            }
        }
        out.insert(name.to_lowercase(), fields);
    }
    out
}

type PbCache = BTreeMap<String, BTreeMap<String, Vec<PbField>>>;
type OpenApiCache = BTreeMap<String, BTreeMap<String, BTreeMap<String, OpenApiField>>>;

fn pb_struct(cache: &mut PbCache, root: &Path, path: &str) -> Vec<PbField> {
    let (module, name) = path.rsplit_once("::").expect("a type path");
    let segments: Vec<&str> = module.split("::").collect();
    let structs = cache
        .entry(module.to_string())
        .or_insert_with(|| pb_module(root, &segments));
    structs
        .get(name)
        .cloned()
        .unwrap_or_else(|| panic!("k8s-pb has no {path}"))
}

fn openapi_struct(
    cache: &mut OpenApiCache,
    root: &Path,
    path: &str,
) -> Option<BTreeMap<String, OpenApiField>> {
    let (module, name) = path.rsplit_once("::").expect("a type path");
    let segments: Vec<&str> = module.split("::").collect();
    let structs = cache
        .entry(module.to_string())
        .or_insert_with(|| openapi_module(root, &segments));
    // Type names differ in case only (k8s-pb `PodDnsConfig`, k8s-openapi `PodDNSConfig`).
    structs.get(&name.to_lowercase()).cloned()
}

/// The generated file's text.
fn generate() -> String {
    let pb_root = crate_dir("k8s-pb");
    let openapi_root = crate_dir("k8s-openapi");
    // Keyed case-insensitively: the list uses Go's type names (`GRPCAction`, k8s-pb's `GrpcAction`).
    let pointers: BTreeMap<String, &[&str]> = POINTERS.iter().map(|(t, f)| (t.to_lowercase(), *f)).collect();
    let mut pb_cache = PbCache::new();
    let mut openapi_cache = OpenApiCache::new();
    let mut used_pointers = BTreeSet::new();
    let mut seen = BTreeSet::new();
    let mut well_known = BTreeSet::new();
    // (k8s-pb type, the k8s-openapi type holding its JSON names: itself, or the type it is inlined in).
    let mut queue: VecDeque<(String, String)> =
        ROOTS.iter().map(|r| (r.2.to_string(), r.2.to_string())).collect();
    let mut impls = BTreeMap::new();
    while let Some((path, json_path)) = queue.pop_front() {
        if WELL_KNOWN.contains(&path.as_str()) {
            well_known.insert(path);
            continue;
        }
        // A type both embedded and used on its own (LocalObjectReference) is checked under each JSON source.
        if !seen.insert((path.clone(), json_path.clone())) {
            continue;
        }
        let fields = pb_struct(&mut pb_cache, &pb_root, &path);
        let json_fields = openapi_struct(&mut openapi_cache, &openapi_root, &json_path)
            .unwrap_or_else(|| panic!("k8s-openapi v1_33 has no {json_path}"));
        let mut line = format!("message!(k8s_pb::{path} {{");
        let mut first = true;
        for field in &fields {
            let Some((json, required)) = json_fields.get(&normalize(&field.rust)) else {
                // Go's `json:",inline"` embeds (VolumeSource in Volume): the parent's JSON has their fields.
                if let Some(inner) = &field.message {
                    let inner_fields = pb_struct(&mut pb_cache, &pb_root, inner);
                    if inner_fields
                        .iter()
                        .any(|f| json_fields.contains_key(&normalize(&f.rust)))
                    {
                        line.push_str(if first { " " } else { ", " });
                        line.push_str(&format!("{} \"\" inline", field.rust));
                        first = false;
                        queue.push_back((inner.clone(), json_path.clone()));
                    }
                }
                // Otherwise a field that Kubernetes 1.33 does not know: ignored, as its API server would.
                continue;
            };
            let pointer = pointers
                .get(&path.to_lowercase())
                .is_some_and(|p| p.contains(&json.as_str()));
            if pointer {
                assert!(
                    field.scalar,
                    "{path}.{json} is listed as a pointer but is not a scalar"
                );
                used_pointers.insert((path.to_lowercase(), json.clone()));
            }
            let keep = if field.scalar && (pointer || *required) {
                " keep"
            } else {
                ""
            };
            line.push_str(if first { " " } else { ", " });
            line.push_str(&format!("{} {json:?}{keep}", field.rust));
            first = false;
            if let Some(message) = &field.message {
                queue.push_back((message.clone(), message.clone()));
            }
        }
        line.push_str(if first { "});" } else { " });" });
        if let Some(other) = impls.insert(path.clone(), line.clone()) {
            assert_eq!(other, line, "{path} renders differently where it is inlined");
        }
    }
    for ty in WELL_KNOWN {
        assert!(well_known.contains(*ty), "{ty} is not part of a decoded message");
    }
    for (ty, names) in POINTERS {
        for name in *names {
            assert!(
                used_pointers.contains(&(ty.to_lowercase(), name.to_string())),
                "pointer {ty}.{name} is not a field of a decoded message"
            );
        }
    }
    let mut out = String::from(
        "// @generated by proto/codegen.rs from k8s-pb and k8s-openapi (v1_33); do not edit.\n\
         // Regenerate: KUBE_SIM_REGENERATE=1 cargo test -p kube-sim --features testing generated_code_is_current\n\n\
         use serde_json::Value;\n\nuse super::json::message;\nuse super::to_json;\nuse crate::error::Error;\n\n\
         /// Decodes the `raw` bytes of an object of the given apiVersion and kind; None for kinds not decoded.\n\
         pub(super) fn decode(api_version: &str, kind: &str, raw: &[u8]) -> Option<Result<Value, Error>> {\n    \
         Some(match (api_version, kind) {\n",
    );
    for (api_version, kind, path) in ROOTS {
        let api_version = match *api_version {
            "*" => "_".to_string(),
            v => format!("{v:?}"),
        };
        out.push_str(&format!(
            "        ({api_version}, {kind:?}) => to_json::<k8s_pb::{path}>(raw),\n"
        ));
    }
    out.push_str("        _ => return None,\n    })\n}\n\n");
    for line in impls.values() {
        out.push_str(line);
        out.push('\n');
    }
    out
}

#[test]
fn generated_code_is_current() {
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/proto/generated.rs");
    let fresh = generate();
    if std::env::var_os("KUBE_SIM_REGENERATE").is_some() {
        std::fs::write(&file, &fresh).expect("generated.rs is writable");
    }
    let current = std::fs::read_to_string(&file).unwrap_or_default();
    assert!(
        current == fresh,
        "src/proto/generated.rs is stale: rerun with KUBE_SIM_REGENERATE=1"
    );
}
