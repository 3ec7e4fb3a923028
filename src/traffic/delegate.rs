//! Delegate VirtualServices merged into their roots as istiod merges them
//! (`model/virtualservice.go`: `mergeVirtualServicesIfNeeded`, `mergeHTTPRoute`,
//! `mergeHTTPMatchRequests`, `hasConflict`): a root route with `delegate` is replaced by the
//! delegate's routes, each narrowed by the root's matches and filling what it leaves unset from
//! the root route. A delegate that does not exist or is not exported to the root's namespace drops
//! only that root route; a delegate route whose matches conflict with the root's is dropped.

use std::collections::BTreeMap;

use crate::istio::{
    StringMatch,
    virtual_service::{HttpMatchRequest, HttpRoute, VirtualService},
};

use super::visibility::Visibility;

/// The delegate VirtualServices (no `hosts`) by `(namespace, name)`, with their `exportTo`.
pub type Delegates<'c> = BTreeMap<(&'c str, &'c str), (&'c VirtualService, Visibility)>;

/// The root's HTTP routes with every delegating route replaced by its delegate's merged routes.
pub fn merge(root: &VirtualService, root_ns: &str, delegates: &Delegates) -> Vec<HttpRoute> {
    let mut out = Vec::new();
    for route in &root.http {
        let Some(d) = &route.delegate else {
            out.push(route.clone());
            continue;
        };
        let ns = if d.namespace.is_empty() {
            root_ns
        } else {
            &d.namespace
        };
        let Some((vs, visibility)) = delegates.get(&(ns, d.name.as_str())) else {
            continue;
        };
        if !visibility.visible_in(root_ns) {
            continue;
        }
        out.extend(vs.http.iter().filter_map(|sub| merge_route(route, sub)));
    }
    // A delegate cannot delegate again (validation rejects it): nothing to follow.
    out.retain(|r| r.delegate.is_none());
    out
}

/// istiod's `mergeHTTPRoute`: `None` when the delegate route's matches conflict with the root's.
fn merge_route(root: &HttpRoute, delegate: &HttpRoute) -> Option<HttpRoute> {
    let mut out = delegate.clone();
    out.matches = merge_matches(&root.matches, &delegate.matches)?;
    out.name = joined(&root.name, &delegate.name);
    macro_rules! inherit {
        ($($f:ident),*) => {$(
            if out.$f.is_none() {
                out.$f = root.$f.clone();
            }
        )*};
    }
    inherit!(
        rewrite,
        direct_response,
        timeout,
        retries,
        fault,
        mirror,
        mirror_percent,
        mirror_percentage,
        cors_policy,
        mirrors,
        headers
    );
    Some(out)
}

/// `root-delegate`, or whichever is set.
fn joined(root: &str, delegate: &str) -> String {
    match (root.is_empty(), delegate.is_empty()) {
        (_, true) => root.to_owned(),
        (true, false) => delegate.to_owned(),
        (false, false) => format!("{root}-{delegate}"),
    }
}

/// istiod's `mergeHTTPMatchRequests`: each delegate match merged with every root match it does not
/// conflict with; `None` when one delegate match fits no root match.
fn merge_matches(root: &[HttpMatchRequest], delegate: &[HttpMatchRequest]) -> Option<Vec<HttpMatchRequest>> {
    if root.is_empty() {
        return Some(delegate.to_vec());
    }
    if delegate.is_empty() {
        return Some(root.to_vec());
    }
    let mut out = Vec::new();
    for sub in delegate {
        let before = out.len();
        out.extend(
            root.iter()
                .filter(|r| !conflicts(r, sub))
                .map(|r| merge_match(r, sub)),
        );
        if out.len() == before {
            return None;
        }
    }
    Some(out)
}

/// istiod's `mergeHTTPMatchRequest`: the delegate's conditions, the root's where it has none; maps
/// merged (the delegate's entries win).
fn merge_match(root: &HttpMatchRequest, delegate: &HttpMatchRequest) -> HttpMatchRequest {
    let mut out = delegate.clone();
    out.name = joined(&root.name, &delegate.name);
    for (o, r) in [
        (&mut out.uri, &root.uri),
        (&mut out.scheme, &root.scheme),
        (&mut out.method, &root.method),
        (&mut out.authority, &root.authority),
    ] {
        if o.is_none() {
            o.clone_from(r);
        }
    }
    let under = |r: &BTreeMap<String, StringMatch>, d: &BTreeMap<String, StringMatch>| {
        let mut m = r.clone();
        m.extend(d.iter().map(|(k, v)| (k.clone(), v.clone())));
        m
    };
    out.headers = under(&root.headers, &delegate.headers);
    out.without_headers = under(&root.without_headers, &delegate.without_headers);
    out.query_params = under(&root.query_params, &delegate.query_params);
    if out.port.is_none_or(|p| p == 0) {
        out.port = root.port;
    }
    let mut labels = root.source_labels.clone();
    labels.extend(delegate.source_labels.iter().map(|(k, v)| (k.clone(), v.clone())));
    out.source_labels = labels;
    if out.source_namespace.is_empty() {
        out.source_namespace.clone_from(&root.source_namespace);
    }
    if out.gateways.is_empty() {
        out.gateways.clone_from(&root.gateways);
    }
    out
}

/// istiod's `hasConflict`: the delegate match must narrow the root's.
fn conflicts(root: &HttpMatchRequest, leaf: &HttpMatchRequest) -> bool {
    let pairs = [
        (&root.uri, &leaf.uri),
        (&root.scheme, &leaf.scheme),
        (&root.method, &leaf.method),
        (&root.authority, &leaf.authority),
    ];
    if pairs.iter().any(|(r, l)| string_conflict(r.as_ref(), l.as_ref())) {
        return true;
    }
    let map_conflict = |r: &BTreeMap<String, StringMatch>, l: &BTreeMap<String, StringMatch>| {
        l.iter().any(|(k, v)| string_conflict(r.get(k), Some(v)))
    };
    if map_conflict(&root.headers, &leaf.headers)
        || map_conflict(&root.without_headers, &leaf.without_headers)
        || map_conflict(&root.query_params, &leaf.query_params)
    {
        return true;
    }
    if root.ignore_uri_case != leaf.ignore_uri_case {
        return true;
    }
    if let (Some(r), Some(l)) = (root.port, leaf.port)
        && r > 0
        && l > 0
        && r != l
    {
        return true;
    }
    if !root.source_namespace.is_empty() && leaf.source_namespace != root.source_namespace {
        return true;
    }
    if leaf
        .source_labels
        .iter()
        .any(|(k, v)| root.source_labels.get(k).is_some_and(|rv| rv != v))
    {
        return true;
    }
    !root.gateways.is_empty()
        && !leaf.gateways.is_empty()
        && (root.gateways.len() < leaf.gateways.len()
            || leaf.gateways.iter().any(|g| !root.gateways.contains(g)))
}

/// istiod's `stringMatchConflict`: unset on either side never conflicts; a regex on one side
/// conflicts with any condition on the other; an exact root needs the same exact leaf; a prefix
/// root needs a leaf under it; any other root (a presence match) conflicts.
fn string_conflict(root: Option<&StringMatch>, leaf: Option<&StringMatch>) -> bool {
    let (Some(root), Some(leaf)) = (root, leaf) else {
        return false;
    };
    let set = |v: &Option<String>| v.as_deref().is_some_and(|s| !s.is_empty());
    let any = |m: &StringMatch| set(&m.regex) || set(&m.prefix) || set(&m.exact);
    if (set(&root.regex) && any(leaf)) || (set(&leaf.regex) && any(root)) {
        return true;
    }
    if let Some(exact) = root.exact.as_deref().filter(|e| !e.is_empty()) {
        return set(&leaf.prefix) || leaf.exact.as_deref().unwrap_or_default() != exact;
    }
    if let Some(prefix) = root.prefix.as_deref().filter(|p| !p.is_empty()) {
        if let Some(lp) = leaf.prefix.as_deref().filter(|p| !p.is_empty()) {
            return !lp.starts_with(prefix);
        }
        if let Some(le) = leaf.exact.as_deref().filter(|e| !e.is_empty()) {
            return !le.starts_with(prefix);
        }
    }
    true
}

#[cfg(test)]
#[path = "delegate_tests.rs"]
mod tests;
