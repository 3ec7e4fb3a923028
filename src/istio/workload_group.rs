//! `WorkloadGroup` (networking.istio.io): the template auto-registered WorkloadEntries are made from,
//! and the health probe their agents run.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{
    common::Labels,
    validate::{self, Report},
    workload_entry::{self, WorkloadEntry},
};

/// Istio's `WorkloadGroup`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct WorkloadGroup {
    /// Labels and annotations copied onto each generated WorkloadEntry.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<GroupMeta>,
    /// The WorkloadEntry spec each member starts from (`address` comes from the workload).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub template: Option<WorkloadEntry>,
    /// Readiness probe the workloads' agents run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub probe: Option<ReadinessProbe>,
}

/// Istio's `WorkloadGroup.ObjectMeta`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct GroupMeta {
    /// Labels for the generated entries.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: Labels,
    /// Annotations for the generated entries.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

/// Istio's `ReadinessProbe` (one of `httpGet`, `tcpSocket`, `exec`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ReadinessProbe {
    /// Seconds before the first probe.
    pub initial_delay_seconds: i32,
    /// Seconds before a probe times out.
    pub timeout_seconds: i32,
    /// Seconds between probes.
    pub period_seconds: i32,
    /// Successes in a row to be ready.
    pub success_threshold: i32,
    /// Failures in a row to be unready.
    pub failure_threshold: i32,
    /// An HTTP GET probe.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub http_get: Option<HttpHealthCheck>,
    /// A TCP connect probe.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tcp_socket: Option<TcpHealthCheck>,
    /// A command probe.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exec: Option<ExecHealthCheck>,
}

/// Istio's `HTTPHealthCheckConfig`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HttpHealthCheck {
    /// Request path.
    pub path: String,
    /// Port probed.
    pub port: u32,
    /// Host to connect to (default: the workload).
    pub host: String,
    /// `HTTP` or `HTTPS`.
    pub scheme: String,
    /// Extra request headers.
    pub http_headers: Vec<HttpHeader>,
}

/// Istio's `HTTPHeader`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HttpHeader {
    /// Header name.
    pub name: String,
    /// Header value.
    pub value: String,
}

/// Istio's `TCPHealthCheckConfig`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TcpHealthCheck {
    /// Host to connect to.
    pub host: String,
    /// Port to connect to.
    pub port: u32,
}

/// Istio's `ExecHealthCheckConfig`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ExecHealthCheck {
    /// Command and arguments.
    pub command: Vec<String>,
}

/// istiod's `ValidateWorkloadGroup`: a template is required and valid (without an address, which each
/// workload brings, so one set is only warned about), metadata labels are valid, probe fields are non-negative with one probe method.
pub(crate) fn validate(wg: &WorkloadGroup, r: &mut Report) {
    match &wg.template {
        None => r.error("spec.template", "template is required"),
        Some(t) => {
            if !t.address.is_empty() {
                r.warn(
                    "spec.template.address",
                    "ignored: each workload brings its own address",
                );
            }
            // The template's address comes from each workload: check the rest with a stand-in.
            let filled = WorkloadEntry {
                address: "127.0.0.1".into(),
                ..t.clone()
            };
            if !t.is_unix() {
                workload_entry::validate(&filled, "spec.template", r);
            }
        }
    }
    if let Some(meta) = &wg.metadata {
        validate::labels(&meta.labels, "spec.metadata.labels", r);
    }
    if let Some(p) = &wg.probe {
        for (name, v) in [
            ("initialDelaySeconds", p.initial_delay_seconds),
            ("timeoutSeconds", p.timeout_seconds),
            ("periodSeconds", p.period_seconds),
            ("successThreshold", p.success_threshold),
            ("failureThreshold", p.failure_threshold),
        ] {
            if v < 0 {
                r.error(format!("spec.probe.{name}"), format!("{v} is negative"));
            }
        }
        let methods = [p.http_get.is_some(), p.tcp_socket.is_some(), p.exec.is_some()];
        match methods.iter().filter(|m| **m).count() {
            0 => r.error("spec.probe", "one of httpGet, tcpSocket or exec is required"),
            1 => {}
            _ => r.error("spec.probe", "only one of httpGet, tcpSocket or exec may be set"),
        }
        if let Some(h) = &p.http_get {
            validate::port(h.port, "spec.probe.httpGet.port", r);
            if !matches!(h.scheme.as_str(), "" | "HTTP" | "HTTPS") {
                r.error("spec.probe.httpGet.scheme", "the scheme must be HTTP or HTTPS");
            }
            for (i, header) in h.http_headers.iter().enumerate() {
                let f = format!("spec.probe.httpGet.httpHeaders[{i}]");
                validate::probe_header_name(&header.name, &format!("{f}.name"), r);
                validate::header_value(&header.value, &format!("{f}.value"), r);
            }
        }
        if let Some(t) = &p.tcp_socket {
            validate::port(t.port, "spec.probe.tcpSocket.port", r);
        }
        if p.exec.as_ref().is_some_and(|e| e.command.is_empty()) {
            r.error("spec.probe.exec.command", "command is required");
        }
    }
}
