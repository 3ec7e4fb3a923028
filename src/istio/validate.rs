//! istiod's shared validation helpers (`pkg/config/validation`, `pkg/config/labels`): names, hosts,
//! labels, selectors, ports, `exportTo`, addresses. Each check appends to a [`Report`] under a field
//! path; the kinds' `validate` functions compose them.

use std::{collections::BTreeSet, net::IpAddr};

use ipnet::IpNet;

use super::{FieldError, ObjectMeta, Warning, common::Labels};
pub(crate) use crate::model::is_dns1123_label;

/// The errors and warnings found in one object, with field paths.
#[derive(Debug, Default)]
pub(crate) struct Report {
    errors: Vec<FieldError>,
    warnings: Vec<Warning>,
}

impl Report {
    /// A broken rule: the object is rejected.
    pub(crate) fn error(&mut self, field: impl Into<String>, message: impl Into<String>) {
        self.errors.push(FieldError {
            field: field.into(),
            message: message.into(),
        });
    }

    /// Admitted, with a warning.
    pub(crate) fn warn(&mut self, field: impl Into<String>, message: impl Into<String>) {
        self.warnings.push(Warning {
            field: field.into(),
            message: message.into(),
        });
    }

    /// Errors and warnings, in the order found.
    pub(crate) fn finish(self) -> (Vec<FieldError>, Vec<Warning>) {
        (self.errors, self.warnings)
    }

    /// Warns that `field` is read but not acted on by meshd, when it is set.
    pub(crate) fn unsupported(&mut self, field: impl Into<String>, set: bool) {
        if set {
            self.warn(field, "not implemented by meshd; ignored");
        }
    }
}

/// `metadata`: a DNS-1123 subdomain name, a DNS-1123 label namespace, valid labels.
pub(crate) fn metadata(meta: &ObjectMeta, r: &mut Report) {
    if !is_dns1123_subdomain(&meta.name) {
        r.error(
            "metadata.name",
            format!("{:?} is not a valid DNS-1123 subdomain", &*meta.name),
        );
    }
    if !is_dns1123_label(&meta.namespace) {
        r.error(
            "metadata.namespace",
            format!("{:?} is not a valid DNS-1123 label", &*meta.namespace),
        );
    }
    labels(&meta.labels, "metadata.labels", r);
    for (key, why) in RESERVED_ANNOTATIONS {
        if meta.annotations.contains_key(*key) {
            r.error(format!("metadata.annotations.{key}"), *why);
        }
    }
}

/// Annotations istiod's `validateMetadata` refuses on the kinds meshd reads.
const RESERVED_ANNOTATIONS: &[(&str, &str)] = &[
    (
        "istio.io/dry-run",
        "dry-run is only supported on AuthorizationPolicy; remove the annotation",
    ),
    (
        "internal.istio.io/webhook-always-reject",
        "this annotation asks for the object to be rejected",
    ),
    (
        "internal.istio.io/parents",
        "an internal annotation: it may not be set by users",
    ),
];

/// A DNS-1123 subdomain: dot-separated labels, at most 253 characters.
pub(crate) fn is_dns1123_subdomain(s: &str) -> bool {
    s.len() <= 253 && s.split('.').all(is_dns1123_label)
}

/// A DNS name (istiod's `ValidateDNS1123Labels`): labels of letters, digits and `-`, case-insensitive,
/// at most 255 characters; a trailing dot is allowed.
pub(crate) fn is_dns_name(s: &str) -> bool {
    let s = s.strip_suffix('.').unwrap_or(s);
    !s.is_empty() && s.len() <= 255 && s.split('.').all(|l| is_dns1123_label(&l.to_ascii_lowercase()))
}

/// istiod's `ValidateWildcardDomain`: a DNS name whose first label may be `*` or start with `*`
/// (`*.example.com`, `*`).
pub(crate) fn wildcard_domain(host: &str, field: &str, r: &mut Report) {
    if host.is_empty() {
        r.error(field, "host must not be empty");
        return;
    }
    if host.len() > 255 {
        r.error(field, "host is longer than 255 characters");
        return;
    }
    let (first, rest) = host.split_once('.').unwrap_or((host, ""));
    let first_ok = if let Some(tail) = first.strip_prefix('*') {
        tail.is_empty() || is_dns1123_label(&tail.to_ascii_lowercase())
    } else {
        is_dns1123_label(&first.to_ascii_lowercase())
    };
    if !first_ok || (!rest.is_empty() && !is_dns_name(rest)) {
        r.error(
            field,
            format!("{host:?} is not a valid host (DNS name, optionally with a leading `*`)"),
        );
    }
}

/// istiod's `ValidateFQDN`: a DNS name with at least two labels and no wildcard.
pub(crate) fn is_fqdn(host: &str) -> bool {
    !host.contains('*') && host.trim_end_matches('.').contains('.') && is_dns_name(host)
}

/// A port number in 1..=65535.
pub(crate) fn port(number: u32, field: &str, r: &mut Report) {
    if !(1..=65535).contains(&number) {
        r.error(field, format!("port {number} is not in 1..65535"));
    }
}

/// istiod's `ValidatePortName`: a DNS-1123 label.
pub(crate) fn port_name(name: &str, field: &str, r: &mut Report) {
    if !is_dns1123_label(name) {
        r.error(
            field,
            format!("invalid port name {name:?} (must be a DNS-1123 label)"),
        );
    }
}

/// Protocols istiod's `protocol.Parse` knows (case-insensitive); empty means sniffed.
const PROTOCOLS: &[&str] = &[
    "TCP",
    "UDP",
    "GRPC",
    "GRPC-WEB",
    "HTTP",
    "HTTP_PROXY",
    "HTTP2",
    "HTTPS",
    "TLS",
    "MONGO",
    "REDIS",
    "MYSQL",
];

/// istiod's `ValidateProtocol`.
pub(crate) fn protocol(name: &str, field: &str, r: &mut Report) {
    if !name.is_empty() && !PROTOCOLS.iter().any(|p| p.eq_ignore_ascii_case(name)) {
        r.error(field, format!("unsupported protocol {name:?}"));
    }
}

/// Whether a port of `protocol` is HTTP-family (HTTP, HTTP2, gRPC, gRPC-Web, HTTP_PROXY).
pub(crate) fn is_http(protocol: &str) -> bool {
    ["HTTP", "HTTP2", "GRPC", "GRPC-WEB", "HTTP_PROXY"]
        .iter()
        .any(|p| p.eq_ignore_ascii_case(protocol))
}

/// Whether a port of `protocol` carries TLS (HTTPS, TLS).
pub(crate) fn is_tls(protocol: &str) -> bool {
    ["HTTPS", "TLS"].iter().any(|p| p.eq_ignore_ascii_case(protocol))
}

/// A Kubernetes label key: optional DNS-1123 subdomain prefix and `/`, then a 1–63 character name of
/// alphanumerics, `-`, `_`, `.`, alphanumeric at both ends.
fn is_label_key(key: &str) -> bool {
    let (prefix, name) = match key.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    prefix.is_none_or(is_dns1123_subdomain) && !name.is_empty() && is_label_value(name)
}

/// A Kubernetes label value: empty, or 1–63 of alphanumerics, `-`, `_`, `.`, alphanumeric at both ends.
fn is_label_value(v: &str) -> bool {
    v.is_empty()
        || (v.len() <= 63
            && v.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
            && v.starts_with(|c: char| c.is_ascii_alphanumeric())
            && v.ends_with(|c: char| c.is_ascii_alphanumeric()))
}

/// istiod's `labels.Instance.Validate`.
pub(crate) fn labels(labels: &Labels, field: &str, r: &mut Report) {
    for (k, v) in labels {
        if !is_label_key(k) {
            r.error(format!("{field}.{k}"), format!("invalid label key {k:?}"));
        } else if !is_label_value(v) {
            r.error(format!("{field}.{k}"), format!("invalid label value {v:?}"));
        }
    }
}

/// A workload selector's labels: valid, with no wildcard and no empty key (istiod's
/// `validateWorkloadSelector`).
pub(crate) fn selector(labels: &Labels, field: &str, r: &mut Report) {
    for (k, v) in labels {
        if k.is_empty() {
            r.error(field, "empty key is not supported in selector");
        } else if k.contains('*') || v.contains('*') {
            r.error(format!("{field}.{k}"), "wildcard is not supported in selector");
        }
    }
    self::labels(labels, field, r);
}

/// `exportTo` (istiod's `validateExportTo`): `.`, `*`, namespace names and, for ServiceEntries only,
/// `~`; no duplicates; `*` and `~` only alone.
pub(crate) fn export_to(values: &[String], namespace: &str, allow_none: bool, field: &str, r: &mut Report) {
    let mut seen = BTreeSet::new();
    for (i, v) in values.iter().enumerate() {
        let f = format!("{field}[{i}]");
        // `.` and the own namespace name the same thing.
        let key = if v == "." { namespace } else { v.as_str() };
        if !seen.insert(key) {
            r.error(&f, format!("duplicate entry {v:?}"));
        }
        match v.as_str() {
            "." | "*" => {}
            "~" if allow_none => {}
            "~" => r.error(&f, "`~` is only allowed in a ServiceEntry's exportTo"),
            ns if !is_dns1123_label(ns) => r.error(&f, format!("{ns:?} is not a namespace name, `.` or `*`")),
            _ => {}
        }
    }
    for only in ["*", "~"] {
        if values.len() > 1 && values.iter().any(|v| v == only) {
            r.error(field, format!("`{only}` must be the only entry"));
        }
    }
}

/// An IP address or CIDR (istiod's `ValidateIPSubnet`); returns whether it is a CIDR covering more
/// than one address.
pub(crate) fn ip_or_cidr(addr: &str, field: &str, r: &mut Report) -> bool {
    if addr.parse::<IpAddr>().is_ok() {
        return false;
    }
    match addr.parse::<IpNet>() {
        Ok(net) => net.prefix_len() < net.max_prefix_len(),
        Err(_) => {
            r.error(field, format!("{addr:?} is not an IP address or CIDR"));
            false
        }
    }
}

/// A regular expression as Envoy's RE2 takes it: at most 1,024 characters, valid syntax.
pub(crate) fn regex(re: &str, field: &str, r: &mut Report) {
    if re.len() > 1024 {
        r.error(field, "regex is longer than 1024 characters");
    } else if let Err(e) = regex_syntax::Parser::new().parse(re) {
        let first = e.to_string().lines().last().unwrap_or_default().to_owned();
        r.error(field, format!("invalid regex {re:?}: {first}"));
    }
}

/// A percentage in 0..=100.
pub(crate) fn percent(value: f64, field: &str, r: &mut Report) {
    if !(0.0..=100.0).contains(&value) {
        r.error(field, format!("percentage {value} is not in 0..100"));
    }
}

/// istiod's `ValidateDuration`: at least 1ms, in whole milliseconds (what Envoy's protos carry).
pub(crate) fn duration(d: std::time::Duration, field: &str, r: &mut Report) {
    if d < std::time::Duration::from_millis(1) {
        r.error(field, format!("duration {d:?} must be at least 1ms"));
    } else if !d.subsec_nanos().is_multiple_of(1_000_000) {
        r.error(
            field,
            format!("duration {d:?}: only millisecond precision is supported"),
        );
    }
}

/// An RFC 7230 token character (istiod's `tchars`).
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// istiod's `validHeaderNameRegex`: a non-empty RFC 7230 token.
pub(crate) fn is_header_name(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(is_tchar)
}

/// istiod's `ValidateProbeHeaderName` (Kubernetes' rule): letters, digits and `-`.
pub(crate) fn probe_header_name(name: &str, field: &str, r: &mut Report) {
    if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') {
        r.error(
            field,
            format!("{name:?} is not a valid probe header name (letters, digits and `-`)"),
        );
    }
}

/// istiod's `ValidateHTTPHeaderValue`: no control characters but tab, and Envoy's `%` formatting
/// well formed (`%%` for a literal `%`, `%VAR%`, `%VAR(args)%`, `%VAR(["a", "b"])%`), as
/// Envoy's header parser reads it.
pub(crate) fn header_value(value: &str, field: &str, r: &mut Report) {
    if value.bytes().any(|b| (b < 0x20 && b != b'\t') || b == 0x7f) {
        r.error(field, format!("header value {value:?} has a control character"));
    } else if let Err(why) = header_format(value.as_bytes()) {
        r.error(field, format!("header value {value:?}: {why}"));
    }
}

/// Where Envoy's header-value parser is (istiod's `validateHeaderValue`).
#[derive(Clone, Copy, PartialEq)]
enum Fmt {
    Literal,
    Name,
    ExpectArray,
    ExpectString,
    InString,
    ExpectDelimiter,
    ExpectArgsEnd,
    ExpectEnd,
}

fn header_format(v: &[u8]) -> Result<(), &'static str> {
    let mut state = Fmt::Literal;
    let mut pos = 0;
    while let Some(&c) = v.get(pos) {
        let next = v.get(pos + 1).copied();
        state = match (state, c) {
            (Fmt::Literal, b'%') => match next {
                None => return Err("an unescaped `%` (write `%%`)"),
                Some(b'%') => {
                    pos += 1;
                    Fmt::Literal
                }
                Some(_) => Fmt::Name,
            },
            (Fmt::Literal, _) => Fmt::Literal,
            (Fmt::Name, b'%') | (Fmt::ExpectEnd, b'%') => Fmt::Literal,
            (Fmt::Name, b'(') => Fmt::ExpectArray,
            (Fmt::Name, _) => Fmt::Name,
            (Fmt::ExpectArray, b'[') => Fmt::ExpectString,
            (Fmt::ExpectArray, b' ') => Fmt::ExpectArray,
            (Fmt::ExpectArray, _) => Fmt::InString,
            (Fmt::ExpectDelimiter, b',') => Fmt::ExpectString,
            (Fmt::ExpectDelimiter, b']') => Fmt::ExpectArgsEnd,
            (Fmt::ExpectDelimiter, b' ') => Fmt::ExpectDelimiter,
            (Fmt::ExpectDelimiter, _) => return Err("expected `,`, `]` or a space"),
            (Fmt::ExpectString, b'"') => Fmt::InString,
            (Fmt::ExpectString, b' ') => Fmt::ExpectString,
            (Fmt::ExpectString, _) => return Err("expected `\"`"),
            (Fmt::InString, b'\\') => {
                if next.is_none() {
                    return Err("an unterminated backslash");
                }
                pos += 1;
                Fmt::InString
            }
            (Fmt::InString, b')') => Fmt::ExpectEnd,
            (Fmt::InString, b'"') => Fmt::ExpectDelimiter,
            (Fmt::InString, _) => Fmt::InString,
            (Fmt::ExpectArgsEnd, b')') => Fmt::ExpectEnd,
            (Fmt::ExpectArgsEnd, b' ') => Fmt::ExpectArgsEnd,
            (Fmt::ExpectArgsEnd, _) => return Err("expected `)`"),
            (Fmt::ExpectEnd, b' ') => Fmt::ExpectEnd,
            (Fmt::ExpectEnd, _) => return Err("expected `%`"),
        };
        pos += 1;
    }
    if state == Fmt::Literal {
        Ok(())
    } else {
        Err("an unterminated `%VARIABLE%`")
    }
}

/// istiod's `host.Name.Matches`: whether two hosts, each possibly `*`-prefixed, overlap.
pub(crate) fn hosts_overlap(a: &str, b: &str) -> bool {
    match (a.strip_prefix('*'), b.strip_prefix('*')) {
        (Some(sa), Some(sb)) => sa.ends_with(sb) || sb.ends_with(sa),
        (Some(sa), None) => b.ends_with(sa),
        (None, Some(sb)) => a.ends_with(sb),
        (None, None) => a == b,
    }
}

/// istiod's `host.Name.SubsetOf`: whether every name `a` covers is covered by `b`.
pub(crate) fn host_subset_of(a: &str, b: &str) -> bool {
    match (a.strip_prefix('*'), b.strip_prefix('*')) {
        (Some(sa), Some(sb)) => sa.ends_with(sb),
        (None, Some(sb)) => a.ends_with(sb),
        (Some(_), None) => false,
        (None, None) => a == b,
    }
}

/// istiod's `validateGatewayNames`: `namespace/name` with two DNS-1123 labels, or a legacy name
/// (a DNS name, `name.namespace` warned about); `mesh` is the sidecars' gateway.
pub(crate) fn gateway_names(names: &[String], field: &str, r: &mut Report) {
    for (i, name) in names.iter().enumerate() {
        let f = format!("{field}[{i}]");
        match name.split_once('/') {
            None => {
                if let Some((gw, ns)) = name.split_once('.') {
                    let ns = ns.split('.').next().unwrap_or_default();
                    r.warn(
                        &f,
                        format!("legacy gateway name {name:?}; prefer namespace/name: \"{ns}/{gw}\""),
                    );
                }
                if !is_dns_name(name) {
                    r.error(&f, format!("{name:?} is not a valid gateway name"));
                }
            }
            Some((ns, gw)) => {
                if ns.is_empty() || gw.is_empty() {
                    r.error(&f, "namespace and gateway name must not be empty");
                } else {
                    if !is_dns1123_label(ns) {
                        r.error(&f, format!("{ns:?} is not a valid namespace"));
                    }
                    if !is_dns1123_label(gw) {
                        r.error(&f, format!("{gw:?} is not a valid gateway name"));
                    }
                }
            }
        }
    }
}

/// A port in 1..=65535, when set (`0` is unset, as in istiod's `if port != 0` checks).
pub(crate) fn port_if_set(number: u32, field: &str, r: &mut Report) {
    if number != 0 {
        port(number, field, r);
    }
}

/// Decodes a field meshd keeps as JSON because it does not act on it into `T`, istiod's shape of
/// it, so istiod's rules can check it: a shape error is reported at `field`, fields `T` does not
/// know as warnings.
pub(crate) fn typed<T: serde::de::DeserializeOwned>(
    value: &serde_json::Value,
    field: &str,
    r: &mut Report,
) -> Option<T> {
    let mut unknown = Vec::new();
    let at = |path: &str| {
        if path.is_empty() || path == "." {
            field.to_owned()
        } else if path.starts_with('[') {
            format!("{field}{path}")
        } else {
            format!("{field}.{path}")
        }
    };
    match crate::config::deserialize_tracked(value, &mut |p| unknown.push(p)) {
        Ok(v) => {
            for p in unknown {
                r.warn(at(&p), "unknown field, ignored");
            }
            Some(v)
        }
        Err(e) => {
            let path = e.path().to_string();
            r.error(at(&path), e.into_inner().to_string());
            None
        }
    }
}
