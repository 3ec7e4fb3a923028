//! Typed objects for the built-in kinds: every write is decoded into its `k8s-openapi` type, defaulted,
//! validated and re-serialized from the typed value, so the stored object is what kube-apiserver would
//! serialize (required fields present, unknown fields dropped, defaults filled).

mod decode;
mod defaults;
mod meta;
mod pod;
mod rules;
mod validate;

use std::sync::Arc;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{
    ConfigMap, Endpoints, Event, Namespace, Node, Pod, Secret, Service, ServiceAccount,
};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use parking_lot::Mutex;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::error::Error;
use crate::kinds::Kind;

pub(crate) use validate::{Errs, dns1123_label_msg, dns1123_subdomain_msg, is_dns1123_label};

/// The `fieldValidation` query parameter: what to do with unknown or duplicate fields in a body.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum FieldValidation {
    /// 400 BadRequest listing them (kubectl's default).
    Strict,
    /// Drop them and say so in `Warning` headers (the server's default).
    #[default]
    Warn,
    /// Drop them silently.
    Ignore,
}

impl FieldValidation {
    pub(crate) fn parse(value: Option<&str>) -> Result<FieldValidation, Error> {
        match value {
            None | Some("Warn") => Ok(FieldValidation::Warn),
            Some("Strict") => Ok(FieldValidation::Strict),
            Some("Ignore") => Ok(FieldValidation::Ignore),
            Some(other) => Err(Error::BadRequest(format!(
                "fieldValidation parameter unsupported: {other}"
            ))),
        }
    }
}

/// How a write treats field problems, and where it leaves the warnings for the response headers.
#[derive(Debug, Clone, Default)]
pub(crate) struct FieldCheck {
    pub(crate) mode: FieldValidation,
    pub(crate) warnings: Arc<Mutex<Vec<String>>>,
}

impl FieldCheck {
    pub(crate) fn new(mode: FieldValidation) -> FieldCheck {
        FieldCheck {
            mode,
            warnings: Arc::default(),
        }
    }

    /// Applies the mode to the strict-decoding problems found (`unknown field "spec.foo"`).
    pub(crate) fn report(&self, kind: &Kind, problems: Vec<String>) -> Result<(), Error> {
        match self.mode {
            _ if problems.is_empty() => Ok(()),
            FieldValidation::Strict => Err(decode::cannot_handle(
                kind,
                &format!("strict decoding error: {}", problems.join(", ")),
            )),
            FieldValidation::Warn => {
                let mut warnings = self.warnings.lock();
                for p in problems {
                    if !warnings.contains(&p) {
                        warnings.push(p);
                    }
                }
                Ok(())
            }
            FieldValidation::Ignore => Ok(()),
        }
    }
}

/// One built-in kind's server-side rules on top of its `k8s-openapi` type.
trait Typed: DeserializeOwned + Serialize {
    /// The API server's defaulting (and the admission plugins that always run).
    fn default_fields(&mut self) {}
    /// Validation on create and update.
    fn validate(&self, errs: &mut Errs);
    /// Extra rules on update: immutable fields.
    fn validate_update(&self, _old: &Self, _errs: &mut Errs) {}
}

/// Decodes, defaults, validates and re-serializes `obj` when its kind is a built-in one; other kinds pass
/// through unchanged. `prev` is the stored object on update.
pub(crate) fn admit(
    kind: &Kind,
    obj: &mut Value,
    prev: Option<&Value>,
    fields: &FieldCheck,
) -> Result<(), Error> {
    macro_rules! dispatch {
        ($($group:literal $name:literal => $ty:ty),* $(,)?) => {
            match (kind.group, kind.kind) {
                $(($group, $name) => process::<$ty>(kind, obj, prev, fields),)*
                _ => Ok(()),
            }
        };
    }
    dispatch! {
        "" "Namespace" => Namespace,
        "" "Service" => Service,
        "" "Pod" => Pod,
        "" "Node" => Node,
        "" "Secret" => Secret,
        "" "ConfigMap" => ConfigMap,
        "" "ServiceAccount" => ServiceAccount,
        "" "Endpoints" => Endpoints,
        "" "Event" => Event,
        "discovery.k8s.io" "EndpointSlice" => EndpointSlice,
        "coordination.k8s.io" "Lease" => Lease,
        "rbac.authorization.k8s.io" "ClusterRole" => ClusterRole,
        "rbac.authorization.k8s.io" "ClusterRoleBinding" => ClusterRoleBinding,
        "rbac.authorization.k8s.io" "Role" => Role,
        "rbac.authorization.k8s.io" "RoleBinding" => RoleBinding,
        "apps" "Deployment" => Deployment,
        "policy" "PodDisruptionBudget" => PodDisruptionBudget,
        "autoscaling" "HorizontalPodAutoscaler" => HorizontalPodAutoscaler,
    }
}

fn process<T: Typed>(
    kind: &Kind,
    obj: &mut Value,
    prev: Option<&Value>,
    fields: &FieldCheck,
) -> Result<(), Error> {
    let mut typed = decode::decode::<T>(kind, obj)?;
    typed.default_fields();
    let name = obj["metadata"]["name"].as_str().unwrap_or_default().to_string();
    let mut errs = Errs::default();
    typed.validate(&mut errs);
    if let Some(prev) = prev {
        // The stored object was written through here, so it decodes; a failure means no update rules.
        if let Ok(old) = decode::decode::<T>(kind, prev) {
            typed.validate_update(&old, &mut errs);
        }
    }
    let typed = serde_json::to_value(&typed).map_err(|e| Error::Internal(e.to_string()))?;
    // Defaults only add fields, so whatever of the input is missing from the result was not understood.
    if fields.mode != FieldValidation::Ignore {
        fields.report(kind, decode::unknown_fields(obj, &typed))?;
    }
    // 422s name the kind with its group (`Deployment.apps`); the Status details split them again.
    let qualified = match kind.group {
        "" => kind.kind.to_string(),
        group => format!("{}.{group}", kind.kind),
    };
    errs.into_result(&qualified, &name)?;
    *obj = typed;
    Ok(())
}

#[cfg(test)]
#[path = "admit_tests.rs"]
mod tests;
