//! The module's error type and its rendering as a Kubernetes `Status` object at the HTTP edge.

use http::StatusCode;
use serde_json::{Value, json};

/// Everything that can go wrong in the simulator; each variant knows its HTTP code and `Status` reason.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{0}")]
    BadRequest(String),
    #[error("Unauthorized")]
    Unauthorized,
    /// 403 (authorization, impersonation, RBAC escalation), worded as the API server's `NewForbidden`:
    /// `{resource.group} "{name}" is forbidden: {detail}`.
    #[error("{}", forbidden_message(group, resource, name, detail))]
    Forbidden {
        group: String,
        resource: String,
        name: String,
        detail: String,
    },
    /// 403 from admission (namespace lifecycle, service accounts): the real server's `NewForbidden` for an object.
    #[error("{}", denied_message(.resource, .name, .detail))]
    Denied {
        resource: String,
        name: String,
        detail: String,
        /// `details.causes` entries (e.g. `NamespaceTerminating`).
        causes: Vec<Value>,
    },
    #[error("{resource} \"{name}\" not found")]
    NotFound { resource: String, name: String },
    #[error("the server could not find the requested resource")]
    NoRoute,
    #[error("the server does not allow this method on the requested resource")]
    MethodNotAllowed,
    #[error("{resource} \"{name}\" already exists")]
    AlreadyExists { resource: String, name: String },
    #[error("Operation cannot be fulfilled on {resource} \"{name}\": {detail}")]
    Conflict {
        resource: String,
        name: String,
        detail: String,
    },
    /// 409 from server-side apply: fields owned by other managers; causes are (message, field).
    #[error("{message}")]
    ApplyConflict {
        message: String,
        causes: Vec<(String, String)>,
    },
    /// 410: a resourceVersion or continue token older than the kept history.
    #[error("{message}")]
    Expired {
        message: String,
        fresh_continue: Option<String>,
    },
    #[error("the request body is too large: limit is {0} bytes")]
    TooLarge(usize),
    #[error("{0}")]
    NotAcceptable(String),
    #[error("the body of the request was in an unknown format - accepted media types include: {0}")]
    UnsupportedMediaType(String),
    /// 422 with one cause per (field, detail); several are listed in brackets, as kube-apiserver does.
    #[error("{kind} \"{name}\" is invalid: {}", join_causes(causes))]
    Invalid {
        kind: String,
        name: String,
        causes: Vec<(String, String)>,
    },
    /// An injected fault: every API request answers with this code.
    #[error("the simulated cluster is failing requests (injected fault {0})")]
    Injected(u16),
    #[error("failed to start the API server: {0}")]
    Startup(String),
    /// The listen address is taken or not allowed.
    #[error("failed to start the API server: bind {addr}: {source}")]
    Bind {
        addr: std::net::SocketAddr,
        #[source]
        source: std::io::Error,
    },
    /// The store's folder could not be read or written.
    #[error("the store's folder: {0}")]
    Persist(#[from] crate::persist::PersistError),
    #[error("internal error: {0}")]
    Internal(String),
    /// A 500 the real server sends from a plain Go error: message only, no reason.
    #[error("{0}")]
    Unclassified(String),
}

impl Error {
    pub(crate) fn invalid(kind: &str, name: &str, field: &str, detail: impl Into<String>) -> Error {
        Error::Invalid {
            kind: kind.into(),
            name: name.into(),
            causes: vec![(field.into(), detail.into())],
        }
    }

    pub(crate) fn code(&self) -> StatusCode {
        match self {
            Error::BadRequest(_) => StatusCode::BAD_REQUEST,
            Error::Unauthorized => StatusCode::UNAUTHORIZED,
            Error::Forbidden { .. } | Error::Denied { .. } => StatusCode::FORBIDDEN,
            Error::NotFound { .. } | Error::NoRoute => StatusCode::NOT_FOUND,
            Error::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            Error::AlreadyExists { .. } | Error::Conflict { .. } | Error::ApplyConflict { .. } => {
                StatusCode::CONFLICT
            }
            Error::Expired { .. } => StatusCode::GONE,
            Error::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            Error::NotAcceptable(_) => StatusCode::NOT_ACCEPTABLE,
            Error::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Error::Invalid { .. } => StatusCode::UNPROCESSABLE_ENTITY,
            Error::Injected(code) => StatusCode::from_u16(*code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
            Error::Startup(_)
            | Error::Bind { .. }
            | Error::Persist(_)
            | Error::Internal(_)
            | Error::Unclassified(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    fn reason(&self) -> &'static str {
        match self {
            Error::BadRequest(_) => "BadRequest",
            Error::Unauthorized => "Unauthorized",
            Error::Forbidden { .. } | Error::Denied { .. } => "Forbidden",
            Error::NotFound { .. } | Error::NoRoute => "NotFound",
            Error::MethodNotAllowed => "MethodNotAllowed",
            Error::AlreadyExists { .. } => "AlreadyExists",
            Error::Conflict { .. } | Error::ApplyConflict { .. } => "Conflict",
            Error::Expired { .. } => "Expired",
            Error::TooLarge(_) => "RequestEntityTooLarge",
            Error::NotAcceptable(_) => "NotAcceptable",
            Error::UnsupportedMediaType(_) => "UnsupportedMediaType",
            Error::Invalid { .. } => "Invalid",
            Error::Injected(429) => "TooManyRequests",
            Error::Injected(_)
            | Error::Startup(_)
            | Error::Bind { .. }
            | Error::Persist(_)
            | Error::Internal(_) => "InternalError",
            Error::Unclassified(_) => "",
        }
    }

    /// The `details` block: `kind` is the resource (plural) for lookups and the Kind for validation.
    fn details(&self) -> Option<Value> {
        match self {
            Error::NotFound { resource, name }
            | Error::AlreadyExists { resource, name }
            | Error::Conflict { resource, name, .. } => Some(resource_details(resource, name)),
            Error::Invalid { kind, name, causes } => {
                let causes: Vec<Value> = causes
                    .iter()
                    .map(|(field, detail)| {
                        json!({"reason": cause_reason(detail), "message": detail, "field": field})
                    })
                    .collect();
                let mut details = json!({"name": name, "kind": kind, "causes": causes});
                // `PatchOptions.meta.k8s.io` names a kind in a group: details split them.
                if let Some((kind, group)) = kind.split_once('.') {
                    details["kind"] = json!(kind);
                    details["group"] = json!(group);
                }
                Some(details)
            }
            Error::ApplyConflict { causes, .. } => Some(json!({
                "causes": causes.iter().map(|(message, field)| json!({
                    "type": "FieldManagerConflict", "message": message, "field": field,
                })).collect::<Vec<_>>(),
            })),
            Error::Forbidden {
                group,
                resource,
                name,
                ..
            } => {
                let mut d = json!({});
                for (field, v) in [("name", name), ("group", group), ("kind", resource)] {
                    if !v.is_empty() {
                        d[field] = json!(v);
                    }
                }
                Some(d)
            }
            Error::Denied {
                resource,
                name,
                causes,
                ..
            } => {
                let mut details = resource_details(resource, name);
                if !causes.is_empty() {
                    details["causes"] = json!(causes);
                }
                Some(details)
            }
            Error::Injected(429) => Some(json!({"retryAfterSeconds": 1})),
            _ => None,
        }
    }

    /// The `Status` object the real API server would send for this error.
    pub(crate) fn to_status(&self) -> Value {
        let mut status = json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": self.to_string(), "reason": self.reason(), "code": self.code().as_u16(),
        });
        if let Some(details) = self.details() {
            status["details"] = details;
        }
        if self.reason().is_empty() {
            // StatusReasonUnknown is "" and omitted.
            status.as_object_mut().map(|s| s.remove("reason"));
        }
        if let Error::Expired {
            fresh_continue: Some(token),
            ..
        } = self
        {
            status["metadata"]["continue"] = json!(token);
        }
        status
    }
}

/// `a: x` alone, `[a: x, b: y]` for several, as field.ErrorList's aggregate prints them.
fn join_causes(causes: &[(String, String)]) -> String {
    let each: Vec<String> = causes.iter().map(|(f, d)| format!("{f}: {d}")).collect();
    match each.as_slice() {
        [one] => one.clone(),
        _ => format!("[{}]", each.join(", ")),
    }
}

/// The cause reason field.Error types carry, recognised from the detail's leading words.
fn cause_reason(detail: &str) -> &'static str {
    const REASONS: [(&str, &str); 6] = [
        ("Required value", "FieldValueRequired"),
        ("Duplicate value", "FieldValueDuplicate"),
        ("Forbidden", "FieldValueForbidden"),
        ("Unsupported value", "FieldValueNotSupported"),
        ("Too long", "FieldValueTooLong"),
        ("Too many", "FieldValueTooMany"),
    ];
    REASONS
        .iter()
        .find(|(prefix, _)| detail.starts_with(prefix))
        .map_or("FieldValueInvalid", |(_, reason)| reason)
}

fn forbidden_message(group: &str, resource: &str, name: &str, detail: &str) -> String {
    let qualified = match group {
        "" => resource.to_owned(),
        g => format!("{resource}.{g}"),
    };
    match (resource, name) {
        ("", _) => format!("forbidden: {detail}"),
        (_, "") => format!("{qualified} is forbidden: {detail}"),
        _ => format!("{qualified} {name:?} is forbidden: {detail}"),
    }
}

fn denied_message(resource: &str, name: &str, detail: &str) -> String {
    if name.is_empty() {
        format!("{resource} is forbidden: {detail}")
    } else {
        format!("{resource} \"{name}\" is forbidden: {detail}")
    }
}

/// Splits `leases.coordination.k8s.io` into Status details `{kind: leases, group: coordination.k8s.io}`.
fn resource_details(resource: &str, name: &str) -> Value {
    let mut details = match resource.split_once('.') {
        Some((plural, group)) => json!({"name": name, "group": group, "kind": plural}),
        None => json!({"name": name, "kind": resource}),
    };
    if name.is_empty() {
        details.as_object_mut().map(|d| d.remove("name"));
    }
    details
}
