//! The value validations of a structural schema, in kube-openapi's words as kube-apiserver reports them:
//! string length, `pattern` and `format`; item and property counts; numeric bounds; the duplicates a
//! `x-kubernetes-list-type` of `set` or `map` forbids.
//!
//! Formats checked: the ones Istio's CRDs and common CRDs use (`date-time`, `date`, `byte`, `uuid`,
//! `ipv4`, `ipv6`, `cidr`, `hostname`); others (kube-openapi knows more, e.g. `email`, `isbn`) pass.

use std::collections::HashMap;
use std::sync::LazyLock;

use base64::Engine;
use parking_lot::Mutex;
use regex::Regex;
use serde_json::{Value, json};

use super::schema::{Outcome, shown};

/// A finding and whether it stops the CEL rules from running (kube-apiserver's "blocking" error types:
/// Required, NotSupported, TooLong, TooMany, TypeInvalid).
pub(super) fn push(out: &mut Outcome, path: &str, detail: String, blocking: bool) {
    out.errors.push((path.to_string(), detail));
    out.blocked |= blocking;
}

fn plural(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// maxLength, minLength and pattern report the first that fails (kube-openapi's string validator
/// returns there); `format` is checked apart.
pub(super) fn string(schema: &Value, s: &str, path: &str, out: &mut Outcome) {
    let chars = s.chars().count() as u64;
    if let Some(max) = schema["maxLength"].as_u64()
        && chars > max
    {
        let bytes = plural(max, "byte", "bytes");
        push(out, path, format!("Too long: may not be more than {bytes}"), true);
    } else if let Some(min) = schema["minLength"].as_u64()
        && chars < min
    {
        let detail = format!("Invalid value: {s:?}: {path} in body should be at least {min} chars long");
        push(out, path, detail, false);
    } else if let Some(pattern) = schema["pattern"].as_str()
        && matches(pattern, s) == Some(false)
    {
        let detail = format!("Invalid value: {s:?}: {path} in body should match '{pattern}'");
        push(out, path, detail, false);
    }
    if let Some(format) = schema["format"].as_str()
        && !format_ok(format, s)
    {
        let detail = format!("Invalid value: {s:?}: {path} in body must be of type {format}: {s:?}");
        push(out, path, detail, true);
    }
}

/// Whether `pattern` matches `s`; None when the pattern does not compile (the CRD check reports it).
fn matches(pattern: &str, s: &str) -> Option<bool> {
    static CACHE: LazyLock<Mutex<HashMap<String, Option<Regex>>>> = LazyLock::new(Mutex::default);
    let mut cache = CACHE.lock();
    if cache.len() > 4096 {
        cache.clear();
    }
    let re = cache
        .entry(pattern.to_string())
        .or_insert_with(|| Regex::new(pattern).ok());
    re.as_ref().map(|re| re.is_match(s))
}

fn format_ok(format: &str, s: &str) -> bool {
    static DATE: LazyLock<Option<Regex>> = LazyLock::new(|| Regex::new(r"^(\d{4})-(\d{2})-(\d{2})$").ok());
    static DATE_TIME: LazyLock<Option<Regex>> = LazyLock::new(|| {
        Regex::new(r"^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(\.\d+)?([Zz]|[+-]\d{2}:\d{2})?$")
            .ok()
    });
    static UUID: LazyLock<Option<Regex>> = LazyLock::new(|| {
        Regex::new(r"^(?i)[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$").ok()
    });
    let in_range = |re: &Option<Regex>| {
        re.as_ref().and_then(|re| re.captures(s)).is_some_and(|c| {
            let n = |i: usize| c.get(i).and_then(|m| m.as_str().parse::<u32>().ok());
            let date =
                n(2).is_some_and(|m| (1..=12).contains(&m)) && n(3).is_some_and(|d| (1..=31).contains(&d));
            let time = c.len() < 5 || (n(4) < Some(24) && n(5) < Some(60) && n(6) < Some(61));
            date && time
        })
    };
    match format {
        "date-time" | "datetime" => in_range(&DATE_TIME),
        "date" => in_range(&DATE),
        "byte" => base64::engine::general_purpose::STANDARD.decode(s).is_ok(),
        "uuid" => UUID.as_ref().is_some_and(|re| re.is_match(s)),
        "ipv4" => s.parse::<std::net::Ipv4Addr>().is_ok(),
        "ipv6" => s.parse::<std::net::Ipv6Addr>().is_ok(),
        "cidr" => s.split_once('/').is_some_and(|(ip, bits)| {
            let width = if ip.contains(':') { 128 } else { 32 };
            ip.parse::<std::net::IpAddr>().is_ok() && bits.parse::<u8>().is_ok_and(|b| b <= width)
        }),
        "hostname" => {
            s.len() <= 255
                && s.split('.').all(|l| {
                    !l.is_empty()
                        && l.len() <= 63
                        && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
                        && !l.starts_with('-')
                        && !l.ends_with('-')
                })
        }
        _ => true,
    }
}

/// minItems/maxItems and minProperties/maxProperties.
pub(super) fn counts(schema: &Value, v: &Value, path: &str, out: &mut Outcome) {
    let (n, min_key, max_key, what) = match v {
        Value::Array(a) => (a.len() as u64, "minItems", "maxItems", "items"),
        Value::Object(o) => (o.len() as u64, "minProperties", "maxProperties", "properties"),
        _ => return,
    };
    if let Some(max) = schema[max_key].as_u64()
        && n > max
    {
        let most = plural(max, "item", "items");
        push(
            out,
            path,
            format!("Too many: {n}: must have at most {most}"),
            true,
        );
    }
    if let Some(min) = schema[min_key].as_u64()
        && n < min
    {
        let detail = format!("Invalid value: {n}: {path} in body should have at least {min} {what}");
        push(out, path, detail, false);
    }
}

/// exclusiveMinimum/exclusiveMaximum (draft 4 booleans) and multipleOf; minimum/maximum themselves are
/// [`bounds`].
pub(super) fn bounds(schema: &Value, n: f64, v: &Value, path: &str, out: &mut Outcome) {
    let exclusive = |k: &str| schema[k] == true;
    if let Some(max) = schema["maximum"].as_f64() {
        let (past, words) = if exclusive("exclusiveMaximum") {
            (n >= max, "less than")
        } else {
            (n > max, "less than or equal to")
        };
        if past {
            let detail = format!(
                "Invalid value: {v}: {path} in body should be {words} {}",
                schema["maximum"]
            );
            push(out, path, detail, false);
        }
    }
    if let Some(min) = schema["minimum"].as_f64() {
        let (past, words) = if exclusive("exclusiveMinimum") {
            (n <= min, "greater than")
        } else {
            (n < min, "greater than or equal to")
        };
        if past {
            let detail = format!(
                "Invalid value: {v}: {path} in body should be {words} {}",
                schema["minimum"]
            );
            push(out, path, detail, false);
        }
    }
    if let Some(m) = schema["multipleOf"].as_f64()
        && m > 0.0
        && (n / m).fract() != 0.0
    {
        let detail = format!(
            "Invalid value: {v}: {path} in body should be a multiple of {}",
            schema["multipleOf"]
        );
        push(out, path, detail, false);
    }
}

/// The duplicates `x-kubernetes-list-type: set` (whole items) or `map` (the key fields) forbid.
pub(super) fn list_type(schema: &Value, items: &[Value], path: &str, out: &mut Outcome) {
    let keys: Vec<&str> = schema["x-kubernetes-list-map-keys"]
        .as_array()
        .map(|k| k.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let key_of = |item: &Value| -> Value {
        match schema["x-kubernetes-list-type"].as_str() {
            Some("map") => {
                let mut k = serde_json::Map::new();
                for f in &keys {
                    if let Some(v) = item.get(*f) {
                        k.insert((*f).to_string(), v.clone());
                    }
                }
                Value::Object(k)
            }
            _ => item.clone(),
        }
    };
    if !matches!(schema["x-kubernetes-list-type"].as_str(), Some("map" | "set")) {
        return;
    }
    let mut seen: Vec<Value> = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let key = key_of(item);
        if seen.contains(&key) {
            let shown = match &key {
                Value::Object(_) => key.to_string(),
                other => shown(other),
            };
            push(
                out,
                &format!("{path}[{i}]"),
                format!("Duplicate value: {shown}"),
                false,
            );
        } else {
            seen.push(key);
        }
    }
}

/// The CRD-time findings about value validations (kube-apiserver refuses `uniqueItems: true`).
pub(super) fn definition_problems(schema: &Value) -> Option<(&'static str, String)> {
    if schema["uniqueItems"] == true {
        return Some((
            "uniqueItems",
            "Forbidden: uniqueItems cannot be set to true since the runtime complexity becomes quadratic"
                .into(),
        ));
    }
    if let Some(p) = schema["pattern"].as_str()
        && Regex::new(p).is_err()
    {
        return Some((
            "pattern",
            format!("Invalid value: {}: must be a valid regular expression", json!(p)),
        ));
    }
    None
}
