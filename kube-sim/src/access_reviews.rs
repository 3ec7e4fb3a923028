//! authorization.k8s.io/v1 reviews, computed and never stored: SelfSubjectAccessReview (`kubectl auth
//! can-i`), SubjectAccessReview, LocalSubjectAccessReview and SelfSubjectRulesReview (`can-i --list`).
//!
//! They answer from the same evaluation as enforcement (`rbac::decide`, `rbac::rules_for`), and answer
//! the same whether or not `enforce_rbac` is on: they report what RBAC grants (the admin, in
//! `system:masters`, is allowed everything). A real server without RBAC (AlwaysAllow) would say yes to
//! everything instead.

use serde_json::{Value, json};

use super::auth::Identity;
use super::error::Error;
use super::kinds::Kind;
use super::rbac::{self, Attributes, Subject};
use super::store::Store;

/// The `status` of an access review of `obj` (already checked against `kind` and the URL's namespace).
pub(crate) fn access_review(
    store: &Store,
    kind: &Kind,
    namespace: &str,
    identity: &Identity,
    obj: &Value,
) -> Result<Value, Error> {
    let spec = &obj["spec"];
    let invalid = |field: &str, detail: &str| {
        Error::invalid(&format!("{}.{}", kind.kind, kind.group), "", field, detail)
    };
    let (resource, non_resource) = (&spec["resourceAttributes"], &spec["nonResourceAttributes"]);
    match (resource.is_object(), non_resource.is_object()) {
        (true, true) => {
            return Err(invalid(
                "spec.nonResourceAttributes",
                "Invalid value: \"object\": cannot be specified in combination with resourceAttributes",
            ));
        }
        (false, false) => {
            return Err(invalid(
                "spec.resourceAttributes",
                "Invalid value: \"null\": exactly one of nonResourceAttributes or resourceAttributes must be specified",
            ));
        }
        _ => {}
    }
    let groups: Vec<String> = rbac::strings(spec, "groups")
        .into_iter()
        .map(str::to_owned)
        .collect();
    let user = spec["user"].as_str().unwrap_or_default();
    let subject = match kind.kind {
        "SelfSubjectAccessReview" => Subject::from(identity),
        _ if user.is_empty() && groups.is_empty() => {
            return Err(invalid(
                "spec.user",
                "Invalid value: \"\": at least one of user or group must be specified",
            ));
        }
        _ => Subject {
            user,
            groups: &groups,
        },
    };
    let text = |v: &Value, field: &str| v[field].as_str().unwrap_or_default().to_owned();
    let attr_ns = text(resource, "namespace");
    if kind.kind == "LocalSubjectAccessReview" {
        if non_resource.is_object() {
            return Err(invalid(
                "spec.nonResourceAttributes",
                "Invalid value: \"object\": disallowed on this kind of request",
            ));
        }
        if attr_ns != namespace {
            return Err(invalid(
                "spec.resourceAttributes.namespace",
                &format!("Invalid value: {attr_ns:?}: must match metadata.namespace"),
            ));
        }
    }
    let (verb, path) = if non_resource.is_object() {
        (text(non_resource, "verb"), Some(text(non_resource, "path")))
    } else {
        (text(resource, "verb"), None)
    };
    let (group, plural, sub, name) = (
        text(resource, "group"),
        text(resource, "resource"),
        text(resource, "subresource"),
        text(resource, "name"),
    );
    let attrs = Attributes {
        verb: &verb,
        path: path.as_deref(),
        api_group: &group,
        resource: &plural,
        subresource: &sub,
        namespace: &attr_ns,
        name: &name,
    };
    let decision = rbac::decide(store, subject, &attrs);
    let mut status = json!({"allowed": decision.allowed});
    if !decision.reason.is_empty() {
        status["reason"] = json!(decision.reason);
    }
    Ok(status)
}

/// The `status` of a SelfSubjectRulesReview: the rules that apply to the requester in `spec.namespace`.
pub(crate) fn rules_review(store: &Store, identity: &Identity, obj: &Value) -> Result<Value, Error> {
    let namespace = obj["spec"]["namespace"].as_str().unwrap_or_default();
    if namespace.is_empty() {
        return Err(Error::BadRequest("no namespace on request".into()));
    }
    let (rules, errors) = rbac::rules_for(store, identity.into(), namespace);
    let pick = |rule: &Value, fields: &[&str]| {
        let mut out = json!({"verbs": rule["verbs"].as_array().cloned().unwrap_or_default()});
        for f in fields {
            if rule[*f].as_array().is_some_and(|a| !a.is_empty()) {
                out[*f] = rule[*f].clone();
            }
        }
        out
    };
    let has = |rule: &Value, field: &str| rule[field].as_array().is_some_and(|a| !a.is_empty());
    let resource_rules: Vec<Value> = rules
        .iter()
        .filter(|r| has(r, "resources"))
        .map(|r| pick(r, &["apiGroups", "resources", "resourceNames"]))
        .collect();
    let non_resource_rules: Vec<Value> = rules
        .iter()
        .filter(|r| has(r, "nonResourceURLs"))
        .map(|r| pick(r, &["nonResourceURLs"]))
        .collect();
    let mut status = json!({
        "resourceRules": resource_rules, "nonResourceRules": non_resource_rules, "incomplete": false,
    });
    if !errors.is_empty() {
        status["evaluationError"] = json!(errors.join(", "));
    }
    Ok(status)
}
