//! Route rules that can never match, istiod's `analyzeUnreachable*Rules` (reported by istioctl as
//! IST0130 VirtualServiceUnreachableRule and IST0131 VirtualServiceIneffectiveMatch): a rule after
//! one without matches, a rule whose every match an earlier rule already has, a match repeated from
//! an earlier rule, and an HTTP prefix match an earlier, shorter prefix with the same conditions
//! covers.

use std::collections::BTreeMap;

use serde_json::Value;

use super::{Code, Input, Message};
use crate::istio::{
    ObjectRef, Spec, StringMatch,
    virtual_service::{HttpMatchRequest, VirtualService},
};

pub(super) fn analyze(input: &Input, out: &mut Vec<Message>) {
    for (c, vs) in input.each(|s| match s {
        Spec::VirtualService(v) => Some(v),
        _ => None,
    }) {
        let object = c.object_ref();
        http(&object, vs, out);
        for routes in [&vs.tcp, &vs.tls] {
            let rules: Vec<(String, Vec<(String, String)>)> = routes
                .iter()
                .enumerate()
                .map(|(n, r)| {
                    let matches = r["match"].as_array().map(Vec::as_slice).unwrap_or_default();
                    let keys = matches
                        .iter()
                        .enumerate()
                        .map(|(m, v)| (format!("#{m}"), v.to_string()))
                        .collect();
                    (format!("#{n}"), keys)
                })
                .collect();
            duplicates(&object, &rules, out);
        }
    }
}

/// Reports unreachable rules and repeated matches among `rules`: (rule name, [(match name, key)]).
fn duplicates(object: &ObjectRef, rules: &[(String, Vec<(String, String)>)], out: &mut Vec<Message>) {
    let mut seen: BTreeMap<&str, &str> = BTreeMap::new();
    let mut catch_all = false;
    for (rule, matches) in rules {
        if matches.is_empty() {
            if catch_all {
                out.push(unreachable(
                    object,
                    rule,
                    "only the last rule can have no matches",
                ));
            }
            catch_all = true;
            continue;
        }
        let mut repeated = 0;
        for (name, key) in matches {
            if catch_all {
                out.push(unreachable(object, rule, "route without matches defined before"));
                continue;
            }
            match seen.get(key.as_str()) {
                Some(earlier) => {
                    out.push(ineffective(object, rule, name, earlier));
                    repeated += 1;
                }
                None => {
                    seen.insert(key, rule);
                }
            }
        }
        if repeated == matches.len() {
            out.push(unreachable(object, rule, "all matches used by prior rules"));
        }
    }
}

fn unreachable(object: &ObjectRef, rule: &str, reason: &str) -> Message {
    Message::new(
        Code::VirtualServiceUnreachableRule,
        object,
        format!("VirtualService rule {rule} not used ({reason})."),
    )
}

fn ineffective(object: &ObjectRef, rule: &str, matchn: &str, dup: &str) -> Message {
    Message::new(
        Code::VirtualServiceIneffectiveMatch,
        object,
        format!(
            "VirtualService rule {rule} match {matchn} is not used (duplicate/overlapping match in rule {dup})."
        ),
    )
}

/// HTTP rules: duplicates, then prefix matches covered by an earlier prefix.
fn http(object: &ObjectRef, vs: &VirtualService, out: &mut Vec<Message>) {
    let name = |n: usize| match vs.http[n].name.as_str() {
        "" => format!("#{n}"),
        s => format!("{s:?}"),
    };
    let rules: Vec<(String, Vec<(String, String)>)> = vs
        .http
        .iter()
        .enumerate()
        .map(|(n, r)| {
            let keys = r
                .matches
                .iter()
                .enumerate()
                .map(|(m, req)| (request_name(req, m), key(req)))
                .collect();
            (name(n), keys)
        })
        .collect();
    duplicates(object, &rules, out);

    // istiod compares only distinct first occurrences of prefix matches, and only before a catch-all.
    let mut seen = std::collections::BTreeSet::new();
    let mut prefixes = Vec::new();
    for (n, r) in vs.http.iter().enumerate() {
        if r.matches.is_empty() {
            break;
        }
        for (m, req) in r.matches.iter().enumerate() {
            if seen.insert(key(req))
                && let Some(p) = Covering::of(req)
            {
                prefixes.push((name(n), request_name(req, m), p));
            }
        }
    }
    for (i, (rule_a, match_a, a)) in prefixes.iter().enumerate() {
        for (rule_b, match_b, b) in &prefixes[i + 1..] {
            if a.prefix != b.prefix && a.covers(b) {
                out.push(ineffective(
                    object,
                    rule_b,
                    &format!("{match_b} of prefix {}", b.prefix),
                    &format!("{match_a} of prefix {} on {rule_a}", a.prefix),
                ));
            }
        }
    }
}

fn request_name(req: &HttpMatchRequest, m: usize) -> String {
    match req.name.as_str() {
        "" => format!("#{m}"),
        s => format!("{s:?}"),
    }
}

/// A match without its name, serialized: two equal keys route the same requests.
fn key(req: &HttpMatchRequest) -> String {
    let mut anonymous = req.clone();
    anonymous.name.clear();
    serde_json::to_value(&anonymous)
        .unwrap_or(Value::Null)
        .to_string()
}

/// What istiod compares of a prefix match to find one covering another (`genMatchHTTPRoutes`).
struct Covering {
    prefix: String,
    port: Option<u32>,
    method: String,
    authority: String,
    headers: BTreeMap<String, String>,
    query: BTreeMap<String, String>,
    without: BTreeMap<String, String>,
}

impl Covering {
    fn of(req: &HttpMatchRequest) -> Option<Self> {
        let prefix = req.uri.as_ref()?.prefix.clone().filter(|p| !p.is_empty())?;
        let method = match exact_or_prefix(req.method.as_ref()) {
            m if m.is_empty() => "exact:GET".into(),
            m => m,
        };
        let map = |m: &BTreeMap<String, StringMatch>| {
            m.iter()
                .map(|(k, v)| (k.clone(), exact_or_prefix(Some(v))))
                .collect()
        };
        Some(Self {
            prefix,
            port: req.port,
            method,
            authority: exact_or_prefix(req.authority.as_ref()),
            headers: map(&req.headers),
            query: map(&req.query_params),
            without: map(&req.without_headers),
        })
    }

    /// istiod's `coveredValidation(self, later)`.
    fn covers(&self, later: &Covering) -> bool {
        let value = |a: &str, b: &str| a == b || a.starts_with(b);
        let maps = |a: &BTreeMap<String, String>, b: &BTreeMap<String, String>| {
            a.len() == b.len() && a.iter().all(|(k, v)| b.get(k).is_some_and(|w| value(v, w)))
        };
        later.prefix.starts_with(&self.prefix)
            && later.port == self.port
            && value(&self.method, &later.method)
            && value(&self.authority, &later.authority)
            && maps(&self.headers, &later.headers)
            && maps(&self.query, &later.query)
            && maps(&self.without, &later.without)
    }
}

fn exact_or_prefix(m: Option<&StringMatch>) -> String {
    match m {
        Some(StringMatch { exact: Some(e), .. }) if !e.is_empty() => format!("exact:{e}"),
        Some(StringMatch { prefix: Some(p), .. }) if !p.is_empty() => format!("prefix:{p}"),
        _ => String::new(),
    }
}
