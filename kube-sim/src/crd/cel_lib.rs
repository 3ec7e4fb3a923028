//! CEL for `x-kubernetes-validations`: the environment kube-apiserver gives a rule (the standard library,
//! the strings extension and the Kubernetes `url`, `ip` and `cidr` libraries), compiled programs cached by
//! source, `self` built from the object as its schema types it, and evaluation errors in cel-go's words.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, LazyLock};

pub(crate) use cel::Value as Cel;
use cel::extractors::This;
use cel::objects::Opaque;
use cel::{Context, Env, ExecutionError, Program};
use parking_lot::Mutex;
use serde_json::Value;

/// A rule's evaluation context.
pub(crate) type Ctx = Context<'static, 'static>;

/// The environment every rule compiles and runs in.
static ENV: LazyLock<Arc<Env>> = LazyLock::new(|| {
    let mut env = Env::stdlib();
    // Declared once on a fresh stdlib environment: the extension's names cannot clash.
    let _ = env.add_extension(cel::extensions::strings);
    Arc::new(env)
});

/// The functions a rule may call besides the operators: the standard library, the strings extension
/// and the Kubernetes libraries added by [`context`] (what cel-go's checker would resolve).
const DECLARED: &[&str] = &[
    "size",
    "contains",
    "startsWith",
    "endsWith",
    "matches",
    "int",
    "uint",
    "double",
    "string",
    "bytes",
    "bool",
    "duration",
    "timestamp",
    "type",
    "dyn",
    "has",
    "all",
    "exists",
    "exists_one",
    "map",
    "filter",
    "in",
    "getHours",
    "getMinutes",
    "getSeconds",
    "getMilliseconds",
    "getFullYear",
    "getMonth",
    "getDayOfMonth",
    "getDayOfWeek",
    "getDayOfYear",
    "charAt",
    "indexOf",
    "lastIndexOf",
    "lowerAscii",
    "upperAscii",
    "replace",
    "split",
    "substring",
    "trim",
    "join",
    "format",
    "strings.quote",
    "reverse",
    "isURL",
    "url",
    "getScheme",
    "getHost",
    "getHostname",
    "getPort",
    "getEscapedPath",
    "getQuery",
    "isIP",
    "ip",
    "family",
    "isUnspecified",
    "isLoopback",
    "isCanonical",
    "isCIDR",
    "cidr",
    "containsIP",
    "prefixLength",
    "ip.isCanonical",
];

/// Compiled programs by source: a CRD's rules compile once per process, not once per request.
static PROGRAMS: LazyLock<Mutex<HashMap<String, Arc<Program>>>> = LazyLock::new(Mutex::default);

/// Most distinct programs kept; past it the cache starts over (memory stays bounded).
const MAX_PROGRAMS: usize = 4096;

/// Compiles `source`, naming a syntax error or a call to an undeclared function as cel-go's checker
/// does (`ERROR: <input>:1:12: ...`).
pub(crate) fn compile(source: &str) -> Result<Arc<Program>, String> {
    if let Some(p) = PROGRAMS.lock().get(source) {
        return Ok(p.clone());
    }
    let program = ENV.compile(source).map_err(|e| e.to_string())?;
    if let Some(f) = program
        .references()
        .functions()
        .into_iter()
        .find(|f| !is_operator(f) && !DECLARED.contains(f))
    {
        return Err(format!(
            "ERROR: <input>: undeclared reference to '{f}' (in container '')"
        ));
    }
    let program = Arc::new(program);
    let mut cache = PROGRAMS.lock();
    if cache.len() >= MAX_PROGRAMS {
        cache.clear();
    }
    cache.insert(source.to_string(), program.clone());
    Ok(program)
}

fn is_operator(f: &str) -> bool {
    f.starts_with(['_', '@', '!'])
}

/// Whether `source` reads `oldSelf` (a transition rule).
pub(crate) fn reads_old_self(program: &Program) -> bool {
    program.references().has_variable("oldSelf")
}

/// `self` (and nothing else) bound for one evaluation.
pub(crate) fn context(this: Cel) -> Ctx {
    let mut ctx = Context::with_env(ENV.clone());
    ctx.add_variable_from_value("self", this);
    // The Kubernetes libraries: names no stdlib overload declares, so adding them cannot fail.
    let _ = ctx.add_function("isURL", |s: Arc<String>| parse_url(&s).is_ok());
    let _ = ctx.add_function("url", |s: Arc<String>| -> Result<Cel, ExecutionError> {
        parse_url(&s)
            .map(|u| Cel::Opaque(Arc::new(u)))
            .map_err(|e| ExecutionError::function_error("url", e))
    });
    let _ = ctx.add_function("getScheme", |This(u): This<Arc<dyn Opaque>>| {
        url_part(&u, |u| u.scheme.clone())
    });
    let _ = ctx.add_function("getHost", |This(u): This<Arc<dyn Opaque>>| {
        url_part(&u, |u| u.host.clone())
    });
    let _ = ctx.add_function("getHostname", |This(u): This<Arc<dyn Opaque>>| {
        url_part(&u, |u| {
            let h = u.host.rsplit_once(':').map_or(u.host.as_str(), |(h, p)| {
                if p.chars().all(|c| c.is_ascii_digit()) {
                    h
                } else {
                    u.host.as_str()
                }
            });
            h.trim_start_matches('[').trim_end_matches(']').to_string()
        })
    });
    let _ = ctx.add_function("getPort", |This(u): This<Arc<dyn Opaque>>| {
        url_part(&u, |u| match u.host.rsplit_once(':') {
            Some((_, p)) if p.chars().all(|c| c.is_ascii_digit()) => p.to_string(),
            _ => String::new(),
        })
    });
    let _ = ctx.add_function("getEscapedPath", |This(u): This<Arc<dyn Opaque>>| {
        url_part(&u, |u| u.path.clone())
    });
    let _ = ctx.add_function("getQuery", |This(u): This<Arc<dyn Opaque>>| {
        url_part(&u, |u| u.query.clone())
    });
    let _ = ctx.add_function("isIP", |s: Arc<String>| parse_ip(&s).is_ok());
    let _ = ctx.add_function("ip", |s: Arc<String>| -> Result<Cel, ExecutionError> {
        parse_ip(&s)
            .map(|ip| Cel::Opaque(Arc::new(Ip(ip))))
            .map_err(|e| ExecutionError::function_error("ip", e))
    });
    let _ = ctx.add_function("family", |This(ip): This<Arc<dyn Opaque>>| {
        ip_of(&ip).map(|ip| if ip.is_ipv4() { 4i64 } else { 6 })
    });
    let _ = ctx.add_function("isLoopback", |This(ip): This<Arc<dyn Opaque>>| {
        ip_of(&ip).map(|ip| ip.is_loopback())
    });
    let _ = ctx.add_function("isUnspecified", |This(ip): This<Arc<dyn Opaque>>| {
        ip_of(&ip).map(|ip| ip.is_unspecified())
    });
    let _ = ctx.add_function("isCIDR", |s: Arc<String>| parse_cidr(&s).is_ok());
    let _ = ctx.add_function("cidr", |s: Arc<String>| -> Result<Cel, ExecutionError> {
        parse_cidr(&s)
            .map(|c| Cel::Opaque(Arc::new(c)))
            .map_err(|e| ExecutionError::function_error("cidr", e))
    });
    let _ = ctx.add_function("prefixLength", |This(c): This<Arc<dyn Opaque>>| {
        cidr_of(&c).map(|c| i64::from(c.bits))
    });
    let _ = ctx.add_function(
        "containsIP",
        |This(c): This<Arc<dyn Opaque>>, ip: Arc<String>| -> Result<bool, ExecutionError> {
            let c = cidr_of(&c)?;
            let ip = parse_ip(&ip).map_err(|e| ExecutionError::function_error("containsIP", e))?;
            Ok(c.contains(ip))
        },
    );
    ctx
}

/// A URL as Go's `url.ParseRequestURI` splits it.
#[derive(Debug, PartialEq, Eq)]
struct Url {
    scheme: String,
    host: String,
    path: String,
    query: String,
}

impl Opaque for Url {
    fn runtime_type_name(&self) -> &str {
        "kubernetes.URL"
    }
}

/// Go's `url.ParseRequestURI`: an absolute URI or an absolute path, no fragment; its error wording.
fn parse_url(s: &str) -> Result<Url, String> {
    let fail = |why: &str| {
        format!(
            "URL parse error during conversion from string: parse {}: {why}",
            go_quote(s)
        )
    };
    if s.chars().any(|c| (c as u32) < 0x20 || c == '\u{7f}') {
        return Err(fail("net/url: invalid control character in URL"));
    }
    let (rest, query) = s.split_once('?').unwrap_or((s, ""));
    let (scheme, rest) = match rest.find(':') {
        Some(i)
            if rest[..i].starts_with(|c: char| c.is_ascii_alphabetic())
                && rest[..i]
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')) =>
        {
            (rest[..i].to_lowercase(), &rest[i + 1..])
        }
        Some(0) => return Err(fail("missing protocol scheme")),
        _ if rest.starts_with('/') => (String::new(), rest),
        _ => return Err(fail("invalid URI for request")),
    };
    // Go unescapes host and path at parse time: a `%` not followed by two hex digits fails.
    let bad_escape = rest.match_indices('%').map(|(i, _)| i).find(|&i| {
        let next: Vec<char> = rest[i + 1..].chars().take(2).collect();
        next.len() != 2 || !next.iter().all(char::is_ascii_hexdigit)
    });
    if let Some(i) = bad_escape {
        let bad: String = rest[i..].chars().take(3).collect();
        return Err(fail(&format!("invalid URL escape {bad:?}")));
    }
    let (host, path) = match rest.strip_prefix("//") {
        Some(auth) => {
            let end = auth.find('/').unwrap_or(auth.len());
            let (userinfo, host) = auth[..end].rsplit_once('@').unwrap_or(("", &auth[..end]));
            let userinfo_ok = |c: char| c.is_ascii_alphanumeric() || "-._:~!$&'()*+,;=%@".contains(c);
            if !userinfo.chars().all(userinfo_ok) {
                return Err(fail("net/url: invalid userinfo"));
            }
            (host.to_string(), auth[end..].to_string())
        }
        None if scheme.is_empty() || rest.starts_with('/') => (String::new(), rest.to_string()),
        // An opaque URI (`mailto:x`).
        None => (String::new(), String::new()),
    };
    if let Some((_, port)) = host.rsplit_once(':')
        && !host.ends_with(']')
        && !port.chars().all(|c| c.is_ascii_digit())
    {
        return Err(fail(&format!("invalid port {:?} after host", format!(":{port}"))));
    }
    if host.contains([' ', '<', '>', '"', '{', '}', '|', '\\', '^', '`']) {
        return Err(fail(&format!("invalid character {:?} in host name", " ")));
    }
    Ok(Url {
        scheme,
        host,
        path,
        query: query.to_string(),
    })
}

/// Go's `%q` of a string (`\b`, `\x1f`, not Rust's `\u{8}`).
fn go_quote(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn url_part(u: &Arc<dyn Opaque>, part: impl Fn(&Url) -> String) -> Result<Cel, ExecutionError> {
    u.downcast_ref::<Url>()
        .map(|u| Cel::from(part(u)))
        .ok_or_else(|| ExecutionError::function_error("url", "not a URL"))
}

#[derive(Debug, PartialEq, Eq)]
struct Ip(IpAddr);

impl Opaque for Ip {
    fn runtime_type_name(&self) -> &str {
        "net.IP"
    }
}

/// An IP address as the Kubernetes `ip` library takes it: no zone, no IPv4-mapped IPv6.
fn parse_ip(s: &str) -> Result<IpAddr, String> {
    let ip: IpAddr = s.parse().map_err(|_| {
        format!(
            "IP Address {s:?} parse error during conversion from string: ParseAddr({s:?}): unable to parse IP"
        )
    })?;
    if let IpAddr::V6(v6) = ip
        && v6.to_ipv4_mapped().is_some()
    {
        return Err(format!("IPv4-mapped IPv6 address {s:?} is not allowed"));
    }
    Ok(ip)
}

fn ip_of(ip: &Arc<dyn Opaque>) -> Result<IpAddr, ExecutionError> {
    ip.downcast_ref::<Ip>()
        .map(|ip| ip.0)
        .ok_or_else(|| ExecutionError::function_error("ip", "not an IP"))
}

#[derive(Debug, PartialEq, Eq)]
struct Cidr {
    ip: IpAddr,
    bits: u8,
}

impl Cidr {
    fn contains(&self, ip: IpAddr) -> bool {
        let (net, ip, width) = match (self.ip, ip) {
            (IpAddr::V4(n), IpAddr::V4(i)) => (u128::from(u32::from(n)), u128::from(u32::from(i)), 32),
            (IpAddr::V6(n), IpAddr::V6(i)) => (u128::from(n), u128::from(i), 128),
            _ => return false,
        };
        let shift = width - u32::from(self.bits);
        shift >= 128 || (net >> shift) == (ip >> shift)
    }
}

impl Opaque for Cidr {
    fn runtime_type_name(&self) -> &str {
        "net.IPPrefix"
    }
}

fn parse_cidr(s: &str) -> Result<Cidr, String> {
    let fail = || {
        format!(
            "network address {s:?} parse error during conversion from string: netip.ParsePrefix({s:?}): bad prefix"
        )
    };
    let (ip, bits) = s.split_once('/').ok_or_else(fail)?;
    let ip = parse_ip(ip).map_err(|_| fail())?;
    let bits: u8 = bits.parse().map_err(|_| fail())?;
    if bits > if ip.is_ipv4() { 32 } else { 128 } {
        return Err(fail());
    }
    Ok(Cidr { ip, bits })
}

fn cidr_of(c: &Arc<dyn Opaque>) -> Result<&Cidr, ExecutionError> {
    c.downcast_ref::<Cidr>()
        .ok_or_else(|| ExecutionError::function_error("cidr", "not a CIDR"))
}

/// `v` as CEL sees it under `schema`: `number` fields are doubles even when integral, `integer` ints.
pub(crate) fn to_cel(schema: &Value, v: &Value) -> Cel {
    match v {
        Value::Null => Cel::Null,
        Value::Bool(b) => Cel::Bool(*b),
        Value::Number(n) if schema["type"] == "number" => Cel::Float(n.as_f64().unwrap_or_default()),
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => Cel::Int(i),
            (None, Some(u)) => Cel::UInt(u),
            _ => Cel::Float(n.as_f64().unwrap_or_default()),
        },
        Value::String(s) => Cel::from(s.clone()),
        Value::Array(items) => Cel::from(
            items
                .iter()
                .map(|i| to_cel(&schema["items"], i))
                .collect::<Vec<_>>(),
        ),
        Value::Object(map) => {
            let fields: HashMap<String, Cel> = map
                .iter()
                .map(|(k, v)| {
                    let sub = schema["properties"]
                        .get(k)
                        .unwrap_or(&schema["additionalProperties"]);
                    (k.clone(), to_cel(sub, v))
                })
                .collect();
            Cel::from(fields)
        }
    }
}

/// An evaluation error as cel-go words it (`no such key: value`, `division by zero`, ...).
pub(crate) fn error_text(e: &ExecutionError) -> String {
    match e {
        ExecutionError::NoSuchKey(k) => format!("no such key: {k}"),
        ExecutionError::DivisionByZero(_) => "division by zero".into(),
        ExecutionError::RemainderByZero(_) => "modulus by zero".into(),
        ExecutionError::FunctionError { function, message } => match function.as_str() {
            "int" => "type conversion error from 'string' to 'int'".into(),
            "duration" => "type conversion error from 'string' to 'google.protobuf.Duration'".into(),
            _ => message.clone(),
        },
        other => other.to_string(),
    }
}

#[cfg(test)]
#[path = "cel_lib_tests.rs"]
mod tests;
