//! `Gateway` (networking.istio.io): the servers (port, hosts, TLS) a gateway deployment exposes,
//! bound to it by `selector`.

use serde::{Deserialize, Serialize};

use super::{
    common::Labels,
    service_entry::ServicePort,
    validate::{self, Report},
};

/// Istio's `Gateway`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Gateway {
    /// The servers.
    pub servers: Vec<Server>,
    /// Labels of the gateway pods this applies to.
    pub selector: Labels,
}

/// Istio's `Server`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Server {
    /// The listening port.
    pub port: ServicePort,
    /// Address to bind.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub bind: String,
    /// Hosts served, optionally `namespace/host`.
    pub hosts: Vec<String>,
    /// TLS termination or passthrough.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls: Option<ServerTlsSettings>,
    /// Server name (unique in the gateway).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// Where traffic goes (not implemented by meshd).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub default_endpoint: String,
}

/// Istio's `ServerTLSSettings`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ServerTlsSettings {
    /// Redirect HTTP to HTTPS.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub https_redirect: bool,
    /// The mode.
    pub mode: ServerTlsMode,
    /// Server certificate file.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub server_certificate: String,
    /// Private key file.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub private_key: String,
    /// CA bundle for client certificates.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub ca_certificates: String,
    /// Secret holding certificate, key and CA.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub credential_name: String,
    /// SANs client certificates must carry.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub subject_alt_names: Vec<String>,
    /// Lowest TLS version.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub min_protocol_version: String,
    /// Highest TLS version.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub max_protocol_version: String,
    /// Allowed cipher suites.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub cipher_suites: Vec<String>,
}

/// Istio's `ServerTLSSettings.TLSmode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ServerTlsMode {
    /// Forward TLS by SNI without terminating (the protobuf default).
    #[default]
    Passthrough,
    /// Terminate TLS.
    Simple,
    /// Terminate mTLS.
    Mutual,
    /// SNI-routed passthrough to the cluster the SNI names (east-west gateways).
    AutoPassthrough,
    /// Terminate Istio mTLS.
    IstioMutual,
    /// Terminate TLS, client certificate optional.
    OptionalMutual,
}

/// istiod's `ValidateGateway`.
pub(crate) fn validate(gw: &Gateway, r: &mut Report) {
    if gw.servers.is_empty() {
        r.error("spec.servers", "at least one server is required");
    }
    validate::labels(&gw.selector, "spec.selector", r);
    let mut names = std::collections::BTreeSet::new();
    for (i, s) in gw.servers.iter().enumerate() {
        let f = format!("spec.servers[{i}]");
        validate::port(s.port.number, &format!("{f}.port.number"), r);
        validate::protocol(&s.port.protocol, &format!("{f}.port.protocol"), r);
        if s.hosts.is_empty() {
            r.error(format!("{f}.hosts"), "at least one host is required");
        }
        for (j, h) in s.hosts.iter().enumerate() {
            let hf = format!("{f}.hosts[{j}]");
            let (ns, host) = h.split_once('/').unwrap_or((".", h));
            if !matches!(ns, "*" | ".") && !validate::is_dns1123_label(ns) {
                r.error(&hf, format!("{ns:?} is not `*`, `.` or a namespace name"));
            }
            validate::wildcard_domain(host, &hf, r);
        }
        if !s.name.is_empty() && !names.insert(s.name.as_str()) {
            r.error(format!("{f}.name"), format!("duplicate server name {:?}", s.name));
        }
        let tls_port = validate::is_tls(&s.port.protocol);
        match &s.tls {
            None if tls_port => r.error(format!("{f}.tls"), "an HTTPS or TLS server needs tls settings"),
            Some(tls) if !tls.https_redirect || tls_port => server_tls(tls, &format!("{f}.tls"), r),
            _ => {}
        }
        r.unsupported(format!("{f}.defaultEndpoint"), !s.default_endpoint.is_empty());
    }
}

/// SIMPLE and MUTUAL need a credential or a certificate and key; MUTUAL also a CA.
fn server_tls(tls: &ServerTlsSettings, f: &str, r: &mut Report) {
    if matches!(
        tls.mode,
        ServerTlsMode::Simple | ServerTlsMode::Mutual | ServerTlsMode::OptionalMutual
    ) && tls.credential_name.is_empty()
    {
        if tls.server_certificate.is_empty() {
            r.error(
                format!("{f}.serverCertificate"),
                "required without credentialName",
            );
        }
        if tls.private_key.is_empty() {
            r.error(format!("{f}.privateKey"), "required without credentialName");
        }
        if tls.mode != ServerTlsMode::Simple && tls.ca_certificates.is_empty() {
            r.error(
                format!("{f}.caCertificates"),
                "required for MUTUAL without credentialName",
            );
        }
    }
}
