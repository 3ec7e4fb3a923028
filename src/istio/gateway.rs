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
    /// Certificate revocation list file (checked, not acted on by meshd).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub ca_crl: String,
    /// Several secrets (checked, not acted on by meshd).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub credential_names: Vec<String>,
    /// Several certificate files (checked, not acted on by meshd).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tls_certificates: Vec<TlsCertificate>,
}

/// Istio's `ServerTLSSettings.TLSCertificate`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TlsCertificate {
    /// Server certificate file.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub server_certificate: String,
    /// Private key file.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub private_key: String,
    /// CA bundle file.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub ca_certificates: String,
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

/// istiod's `ValidateGateway`: a DNS-1123 label name, servers with hosts, a named port (names
/// unique), a bind address, TLS that fits the port's protocol.
pub(crate) fn validate(gw: &Gateway, name: &str, r: &mut Report) {
    if !validate::is_dns1123_label(name) {
        r.error(
            "metadata.name",
            format!("{name:?} is not a valid gateway name (a DNS-1123 label, no dots)"),
        );
    }
    if gw.servers.is_empty() {
        r.error("spec.servers", "at least one server is required");
    }
    validate::labels(&gw.selector, "spec.selector", r);
    let mut port_names = std::collections::BTreeSet::new();
    let mut names = std::collections::BTreeSet::new();
    for (i, s) in gw.servers.iter().enumerate() {
        let f = format!("spec.servers[{i}]");
        if s.hosts.is_empty() {
            r.error(format!("{f}.hosts"), "at least one host is required");
        }
        for (j, h) in s.hosts.iter().enumerate() {
            host(h, &format!("{f}.hosts[{j}]"), r);
        }
        server_port(s, &f, r);
        if !port_names.insert(s.port.name.as_str()) {
            r.error(
                format!("{f}.port.name"),
                format!(
                    "port names must be unique across servers: {:?} is used before",
                    s.port.name
                ),
            );
        }
        if !s.name.is_empty() && !names.insert(s.name.as_str()) {
            r.warn(format!("{f}.name"), format!("duplicate server name {:?}", s.name));
        }
        let (tls_port, http_port) = (
            validate::is_tls(&s.port.protocol),
            validate::is_http(&s.port.protocol),
        );
        match &s.tls {
            None if tls_port => r.error(format!("{f}.tls"), "an HTTPS or TLS server needs tls settings"),
            None => {}
            Some(tls) => {
                let tf = format!("{f}.tls");
                server_tls(tls, &tf, r);
                let passthrough = matches!(
                    tls.mode,
                    ServerTlsMode::Passthrough | ServerTlsMode::AutoPassthrough
                );
                let certs = [&tls.ca_certificates, &tls.private_key, &tls.server_certificate];
                if !tls_port && http_port && (!passthrough || certs.iter().any(|c| !c.is_empty())) {
                    r.error(
                        &tf,
                        "a plain-text HTTP server takes no TLS settings but httpsRedirect",
                    );
                } else if !tls_port && !http_port {
                    r.error(&tf, "TLS settings need an HTTPS or TLS port");
                }
                if tls.https_redirect && !http_port {
                    r.warn(
                        format!("{tf}.httpsRedirect"),
                        "httpsRedirect is only for HTTP servers",
                    );
                }
            }
        }
        r.unsupported(format!("{f}.defaultEndpoint"), !s.default_endpoint.is_empty());
    }
}

/// istiod's `ValidateNamespaceSlashWildcardHostname` for a gateway: `[namespace/]host`, the
/// namespace `*`, `.` or a label, the host a fully qualified (optionally `*.`) name or an IP.
fn host(h: &str, f: &str, r: &mut Report) {
    let host = match h.split_once('/') {
        None => h,
        Some((ns, host)) => {
            if ns.is_empty() || host.is_empty() {
                r.error(f, "namespace and host must not be empty");
            } else if !matches!(ns, "*" | ".") && !validate::is_dns1123_label(ns) {
                r.error(f, format!("{ns:?} is not `*`, `.` or a namespace name"));
            }
            host
        }
    };
    if host.is_empty() || host.parse::<std::net::IpAddr>().is_ok() {
        return;
    }
    if host != "*" && !host.contains('.') {
        r.error(
            f,
            format!("{host:?}: short names (not fully qualified) are not allowed"),
        );
    }
    if host.contains('*') && host != "*" && !host.starts_with("*.") {
        r.error(f, format!("{host:?}: a partial wildcard is not allowed"));
    } else {
        validate::wildcard_domain(host, f, r);
    }
}

/// istiod's `validateServerPort` and `validateServerBind`.
fn server_port(s: &Server, f: &str, r: &mut Report) {
    let unix = s.bind.strip_prefix(super::workload_entry::UNIX_PREFIX);
    if s.port.number > 0 || unix.is_none() {
        validate::port(s.port.number, &format!("{f}.port.number"), r);
    }
    validate::protocol(&s.port.protocol, &format!("{f}.port.protocol"), r);
    if s.port.target_port > 0 {
        r.error(
            format!("{f}.port.targetPort"),
            "targetPort has no effect on Gateways",
        );
    }
    if s.port.name.is_empty() {
        r.error(format!("{f}.port.name"), "port name is required");
    }
    match unix {
        Some(path) => {
            super::workload_entry::unix_path(path, &format!("{f}.bind"), r);
            if s.port.number != 0 {
                r.error(
                    format!("{f}.port.number"),
                    "a unix domain socket bind needs port 0",
                );
            }
        }
        None if !s.bind.is_empty() && s.bind.parse::<std::net::IpAddr>().is_err() => {
            r.error(
                format!("{f}.bind"),
                format!("{:?} is not an IP address or unix:// path", s.bind),
            );
        }
        None => {}
    }
}

/// The cipher suites istiod accepts in `cipherSuites` (its `security.ValidCipherSuites`: BoringSSL's,
/// without PSK).
const CIPHER_SUITES: &[&str] = &[
    "ECDHE-ECDSA-AES128-GCM-SHA256",
    "ECDHE-RSA-AES128-GCM-SHA256",
    "ECDHE-ECDSA-AES256-GCM-SHA384",
    "ECDHE-RSA-AES256-GCM-SHA384",
    "ECDHE-ECDSA-CHACHA20-POLY1305",
    "ECDHE-RSA-CHACHA20-POLY1305",
    "ECDHE-ECDSA-AES128-SHA",
    "ECDHE-RSA-AES128-SHA",
    "ECDHE-ECDSA-AES256-SHA",
    "ECDHE-RSA-AES256-SHA",
    "AES128-GCM-SHA256",
    "AES256-GCM-SHA384",
    "AES128-SHA",
    "AES256-SHA",
    "DES-CBC3-SHA",
];

/// istiod's `IsValidCipherSuite`: a known suite, empty, `ALL`, or an expression (`-X`, `+X`, `!X`) it
/// does not parse.
fn known_cipher(cs: &str) -> bool {
    cs.is_empty()
        || cs == "ALL"
        || !cs.starts_with(|c: char| c.is_alphanumeric())
        || CIPHER_SUITES.contains(&cs)
}

/// istiod's cipher-suite warnings: unknown suites and repeated ones are ignored (sorted, Go's `[a b]`).
fn cipher_suites(suites: &[String], f: &str, r: &mut Report) {
    let mut unknown = std::collections::BTreeSet::new();
    let mut seen = std::collections::BTreeSet::new();
    let mut repeated = std::collections::BTreeSet::new();
    for cs in suites {
        if !known_cipher(cs) {
            unknown.insert(cs.as_str());
        } else if !seen.insert(cs.as_str()) {
            repeated.insert(cs.as_str());
        }
    }
    let list = |set: &std::collections::BTreeSet<&str>| set.iter().copied().collect::<Vec<_>>().join(" ");
    if !unknown.is_empty() {
        r.warn(f, format!("ignoring invalid cipher suites: [{}]", list(&unknown)));
    }
    if !repeated.is_empty() {
        r.warn(
            f,
            format!("ignoring duplicate cipher suites: [{}]", list(&repeated)),
        );
    }
}

/// istiod's `validateTLSOptions` (gateway servers and Sidecar ingress listeners).
pub(crate) fn server_tls(tls: &ServerTlsSettings, f: &str, r: &mut Report) {
    let old = matches!(tls.min_protocol_version.as_str(), "TLSV1_0" | "TLSV1_1");
    if old && tls.cipher_suites.is_empty() {
        r.warn(
            format!("{f}.minProtocolVersion"),
            "TLS versions below 1.2 need cipherSuites set: the defaults no longer include compatible ones",
        );
    }
    cipher_suites(&tls.cipher_suites, &format!("{f}.cipherSuites"), r);
    let cert_fields = [
        ("serverCertificate", !tls.server_certificate.is_empty()),
        ("privateKey", !tls.private_key.is_empty()),
        ("caCertificates", !tls.ca_certificates.is_empty()),
        ("tlsCertificates", !tls.tls_certificates.is_empty()),
        ("credentialName", !tls.credential_name.is_empty()),
        ("credentialNames", !tls.credential_names.is_empty()),
    ];
    match tls.mode {
        ServerTlsMode::IstioMutual => {
            for (name, _) in cert_fields.iter().filter(|(_, set)| *set) {
                r.error(
                    format!("{f}.{name}"),
                    "ISTIO_MUTUAL uses the workload certificate: not allowed",
                );
            }
            return;
        }
        ServerTlsMode::Passthrough | ServerTlsMode::AutoPassthrough
            if cert_fields.iter().any(|(_, set)| *set) || !tls.ca_crl.is_empty() =>
        {
            r.warn(f, "passthrough modes use no certificates: they are ignored");
        }
        _ => {}
    }
    let sources = [
        !tls.server_certificate.is_empty() && !tls.private_key.is_empty(),
        !tls.credential_name.is_empty(),
        !tls.credential_names.is_empty(),
        !tls.tls_certificates.is_empty(),
    ];
    if sources.iter().filter(|s| **s).count() > 1 {
        r.error(
            f,
            "only one of credentialName, credentialNames, serverCertificate/privateKey, tlsCertificates",
        );
    }
    let terminating = matches!(
        tls.mode,
        ServerTlsMode::Simple | ServerTlsMode::Mutual | ServerTlsMode::OptionalMutual
    );
    let remote = !tls.credential_name.is_empty() || !tls.credential_names.is_empty();
    if terminating && !remote {
        if tls.mode != ServerTlsMode::Simple && tls.ca_certificates.is_empty() {
            r.error(
                format!("{f}.caCertificates"),
                "required for MUTUAL without credentialName",
            );
        }
        if tls.tls_certificates.len() > 2 {
            r.warn(
                format!("{f}.tlsCertificates"),
                "at most 2 server certificates are supported",
            );
        }
        let files: Vec<(String, &str, &str)> = if tls.tls_certificates.is_empty() {
            vec![(f.to_owned(), &tls.server_certificate, &tls.private_key)]
        } else {
            tls.tls_certificates
                .iter()
                .enumerate()
                .map(|(i, c)| {
                    (
                        format!("{f}.tlsCertificates[{i}]"),
                        &*c.server_certificate,
                        &*c.private_key,
                    )
                })
                .collect()
        };
        for (cf, cert, key) in files {
            if cert.is_empty() {
                r.error(
                    format!("{cf}.serverCertificate"),
                    "required without credentialName",
                );
            }
            if key.is_empty() {
                r.error(format!("{cf}.privateKey"), "required without credentialName");
            }
        }
    }
    if !tls.ca_crl.is_empty() {
        if !tls.credential_name.is_empty() {
            r.error(
                format!("{f}.caCrl"),
                "with credentialName, the CRL belongs in the credential",
            );
        }
        if tls.mode == ServerTlsMode::Simple {
            r.error(format!("{f}.caCrl"), "a CRL needs MUTUAL TLS");
        }
    }
    for (name, set) in [
        ("caCrl", !tls.ca_crl.is_empty()),
        ("credentialNames", !tls.credential_names.is_empty()),
        ("tlsCertificates", !tls.tls_certificates.is_empty()),
    ] {
        r.unsupported(format!("{f}.{name}"), set);
    }
}
