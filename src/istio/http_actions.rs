//! The VirtualService HTTP actions besides forwarding — `redirect`, `directResponse`,
//! `mirror`/`mirrors`, `corsPolicy` — and istiod's rules for them (`validateHTTPRedirect`,
//! `validateHTTPDirectResponse`, `validateHTTPMirrors`, `validateCORSPolicy`).

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{
    common::{Percent, StringMatch},
    validate::{self, Report},
    virtual_service::Destination,
};

/// Istio's `HTTPRedirect`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HttpRedirect {
    /// The path the redirect points to.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub uri: String,
    /// The authority the redirect points to.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub authority: String,
    /// The port the redirect points to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port: Option<u32>,
    /// `FROM_PROTOCOL_DEFAULT` or `FROM_REQUEST_PORT`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub derive_port: Option<String>,
    /// `http` or `https`.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub scheme: String,
    /// A 3xx status (301 by default).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub redirect_code: Option<u32>,
}

/// Istio's `HTTPDirectResponse`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HttpDirectResponse {
    /// The status returned.
    pub status: u32,
    /// The body returned.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub body: Option<HttpBody>,
}

/// Istio's `HTTPBody`: text or base64 bytes.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HttpBody {
    /// A text body.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub string: Option<String>,
    /// A binary body, base64 in JSON.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bytes: Option<String>,
}

/// Istio's `HTTPMirrorPolicy`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HttpMirrorPolicy {
    /// Where copies go.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub destination: Option<Destination>,
    /// The share of requests copied.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub percentage: Option<Percent>,
}

/// Istio's `CorsPolicy`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct CorsPolicy {
    /// Origins allowed, as string matches.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub allow_origins: Vec<StringMatch>,
    /// Origins allowed (deprecated exact form).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub allow_origin: Vec<String>,
    /// Methods allowed.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub allow_methods: Vec<String>,
    /// Request headers allowed.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub allow_headers: Vec<String>,
    /// Response headers exposed.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub expose_headers: Vec<String>,
    /// How long a preflight answer is cached (whole seconds).
    #[serde(
        skip_serializing_if = "Option::is_none",
        with = "crate::config::duration::option"
    )]
    pub max_age: Option<Duration>,
    /// Whether credentials are allowed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allow_credentials: Option<bool>,
    /// `FORWARD` or `IGNORE` for preflights that match no origin.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unmatched_preflights: Option<String>,
}

/// Methods CORS may allow (Go's `net/http` methods and `*`).
const CORS_METHODS: &[&str] = &[
    "GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "CONNECT", "OPTIONS", "TRACE", "*",
];

/// Largest direct-response body istiod admits; above a tenth of it, a warning.
const MAX_DIRECT_BODY: usize = 1024 * 1024;

/// istiod's `validateHTTPRedirect`.
pub(crate) fn redirect(rd: &HttpRedirect, f: &str, r: &mut Report) {
    if rd.uri.is_empty()
        && rd.authority.is_empty()
        && rd.port.is_none()
        && rd.derive_port.is_none()
        && rd.scheme.is_empty()
    {
        r.error(f, "a redirect must set uri, authority, scheme or port");
    }
    if let Some(code) = rd.redirect_code.filter(|c| *c != 0 && !(300..=399).contains(c)) {
        r.error(
            format!("{f}.redirectCode"),
            format!("{code} is not a 3xx redirect code"),
        );
    }
    if !rd.scheme.is_empty() && rd.scheme != "http" && rd.scheme != "https" {
        r.error(format!("{f}.scheme"), "the scheme must be `http` or `https`");
    }
    if let Some(p) = rd.port.filter(|p| *p > 0) {
        validate::port(p, &format!("{f}.port"), r);
    }
    if let Some(d) = rd.derive_port.as_deref()
        && !matches!(d, "FROM_PROTOCOL_DEFAULT" | "FROM_REQUEST_PORT")
    {
        r.error(format!("{f}.derivePort"), format!("unknown derivePort {d:?}"));
    }
}

/// istiod's `validateHTTPDirectResponse`: a status in 200..=599, a body under 1 MiB.
pub(crate) fn direct_response(dr: &HttpDirectResponse, f: &str, r: &mut Report) {
    if !(200..=599).contains(&dr.status) {
        r.error(
            format!("{f}.status"),
            format!("{} is not an HTTP status in 200..599", dr.status),
        );
    }
    if let Some(body) = &dr.body {
        if let Some(b) = &body.bytes
            && base64::Engine::decode(&base64::engine::general_purpose::STANDARD, b).is_err()
        {
            r.error(format!("{f}.body.bytes"), "bytes must be base64");
        }
        let size = match (&body.string, &body.bytes) {
            (Some(s), _) => s.len(),
            // Base64: three bytes per four characters.
            (None, Some(b)) => b.len() / 4 * 3,
            (None, None) => 0,
        };
        if size > MAX_DIRECT_BODY {
            r.error(format!("{f}.body"), "a direct response body must be under 1MB");
        } else if size > MAX_DIRECT_BODY / 10 {
            r.warn(
                format!("{f}.body"),
                "large direct responses may impact control plane performance",
            );
        }
    }
}

/// istiod's `validateHTTPMirrors` (and the single `mirror`'s destination check).
pub(crate) fn mirrors(mirrors: &[HttpMirrorPolicy], f: &str, r: &mut Report) {
    for (i, m) in mirrors.iter().enumerate() {
        let mf = format!("{f}[{i}]");
        match &m.destination {
            None => r.error(format!("{mf}.destination"), "destination is required"),
            Some(d) => destination(d, &format!("{mf}.destination"), r),
        }
        if let Some(p) = m.percentage {
            validate::percent(p.value, &format!("{mf}.percentage.value"), r);
        }
    }
}

/// istiod's `validateDestination`: a host that is not `*`, a subset name, a port.
pub(crate) fn destination(d: &Destination, f: &str, r: &mut Report) {
    if d.host == "*" {
        r.error(format!("{f}.host"), "`*` is not a destination");
    } else {
        validate::wildcard_domain(&d.host, &format!("{f}.host"), r);
    }
    if !d.subset.is_empty() && !validate::is_dns1123_label(&d.subset) {
        r.error(
            format!("{f}.subset"),
            format!("{:?} is not a valid subset name", d.subset),
        );
    }
    if let Some(p) = d.port {
        validate::port(p.number, &format!("{f}.port.number"), r);
    }
}

/// istiod's `validateCORSPolicy`.
pub(crate) fn cors(c: &CorsPolicy, f: &str, r: &mut Report) {
    for (i, o) in c.allow_origins.iter().enumerate() {
        let of = format!("{f}.allowOrigins[{i}]");
        let value = o.exact.as_deref().or(o.prefix.as_deref()).or(o.regex.as_deref());
        if value.is_none_or(str::is_empty) {
            r.error(&of, "an allowed origin needs a non-empty exact, prefix or regex");
        }
        o.validate(&of, false, r);
    }
    for (i, m) in c.allow_methods.iter().enumerate() {
        if !CORS_METHODS.contains(&m.as_str()) {
            r.error(
                format!("{f}.allowMethods[{i}]"),
                format!("{m:?} is not a supported HTTP method"),
            );
        }
    }
    for (group, names) in [
        ("allowHeaders", &c.allow_headers),
        ("exposeHeaders", &c.expose_headers),
    ] {
        for (i, name) in names.iter().enumerate() {
            if name != "*" && !validate::is_header_name(name) {
                r.error(
                    format!("{f}.{group}[{i}]"),
                    format!("{name:?} is not a valid header name"),
                );
            }
        }
    }
    if let Some(age) = c.max_age {
        validate::duration(age, &format!("{f}.maxAge"), r);
        if age.subsec_nanos() != 0 {
            r.error(format!("{f}.maxAge"), "maxAge is accurate only to seconds");
        }
    }
    if let Some(u) = c.unmatched_preflights.as_deref()
        && !matches!(u, "UNSPECIFIED" | "FORWARD" | "IGNORE")
    {
        r.error(format!("{f}.unmatchedPreflights"), format!("unknown value {u:?}"));
    }
}
