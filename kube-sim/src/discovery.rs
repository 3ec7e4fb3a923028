//! Discovery documents generated from the kind table: `/version`, `/api`, `/apis`, resource lists, and the
//! aggregated (apidiscovery.k8s.io/v2) form kubectl asks for first.

use serde_json::{Value, json};

use super::crd::Registry;
use super::kinds::{Kind, group_version};

pub(crate) const AGGREGATED_CONTENT_TYPE: &str =
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

pub(crate) fn version() -> Value {
    json!({
        "major": "1", "minor": "33", "gitVersion": "v1.33.0", "gitCommit": "meshd-sandbox",
        "gitTreeState": "clean", "buildDate": "2025-04-23T00:00:00Z", "goVersion": "go1.24.2",
        "compiler": "gc", "platform": "linux/amd64",
    })
}

/// Whether the Accept header prefers aggregated discovery.
pub(crate) fn wants_aggregated(accept: &str) -> bool {
    accept.contains("as=APIGroupDiscoveryList") && accept.contains("v=v2")
}

/// `/api`: the legacy core group's versions.
pub(crate) fn core_versions(server_address: &str) -> Value {
    json!({
        "kind": "APIVersions", "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
    })
}

fn named_groups(reg: &Registry) -> Vec<&'static str> {
    let mut groups: Vec<&str> = Vec::new();
    for (g, _) in reg.group_versions() {
        if !g.is_empty() && !groups.contains(&g) {
            groups.push(g);
        }
    }
    groups
}

fn api_group(reg: &Registry, name: &str) -> Value {
    let versions: Vec<Value> = reg
        .group_versions()
        .into_iter()
        .filter(|(g, _)| *g == name)
        .map(|(g, v)| json!({"groupVersion": group_version(g, v), "version": v}))
        .collect();
    json!({"kind": "APIGroup", "apiVersion": "v1", "name": name, "preferredVersion": versions[0], "versions": versions})
}

/// `/apis/{group}`, if the group exists.
pub(crate) fn group(reg: &Registry, name: &str) -> Option<Value> {
    named_groups(reg).contains(&name).then(|| api_group(reg, name))
}

/// `/apis`: every named group.
pub(crate) fn group_list(reg: &Registry) -> Value {
    let groups: Vec<Value> = named_groups(reg).into_iter().map(|g| api_group(reg, g)).collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `/api/v1` or `/apis/{group}/{version}`, if served.
pub(crate) fn resource_list(reg: &Registry, group: &str, version: &str) -> Option<Value> {
    let mut resources = Vec::new();
    for k in reg.in_group_version(group, version) {
        let mut r = json!({
            "name": k.plural, "singularName": k.singular, "namespaced": k.namespaced,
            "kind": k.kind, "verbs": k.verbs,
        });
        if !k.short_names.is_empty() {
            r["shortNames"] = json!(k.short_names);
        }
        if !k.categories.is_empty() {
            r["categories"] = json!(k.categories);
        }
        resources.push(r);
        for (sub, sub_kind, verbs) in subresources(k) {
            let mut s = json!({"name": format!("{}/{sub}", k.plural), "singularName": "", "namespaced": k.namespaced,
                "kind": sub_kind["kind"], "verbs": verbs});
            if sub_kind["group"] != k.group {
                s["group"] = sub_kind["group"].clone();
                s["version"] = sub_kind["version"].clone();
            }
            resources.push(s);
        }
    }
    (!resources.is_empty()).then(|| {
        json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version(group, version), "resources": resources})
    })
}

/// A kind's subresources as (name, responseKind, verbs): `status` plus the table's extras.
fn subresources(k: &Kind) -> Vec<(&'static str, Value, &'static [&'static str])> {
    let mut subs = Vec::new();
    if k.status {
        subs.push((
            "status",
            json!({"group": k.group, "version": k.version, "kind": k.kind}),
            &["get", "patch", "update"][..],
        ));
    }
    for s in k.subresources {
        subs.push((
            s.name,
            json!({"group": s.group, "version": s.version, "kind": s.kind}),
            s.verbs,
        ));
    }
    subs
}

/// The aggregated document for `/api` (core only) or `/apis` (named groups).
pub(crate) fn aggregated(reg: &Registry, core: bool) -> Value {
    let groups: Vec<&str> = if core { vec![""] } else { named_groups(reg) };
    let items: Vec<Value> = groups
        .into_iter()
        .map(|g| {
            let versions: Vec<Value> = reg
                .group_versions()
                .into_iter()
                .filter(|(gg, _)| *gg == g)
                .map(|(_, v)| json!({"version": v, "resources": reg.in_group_version(g, v).map(aggregated_resource).collect::<Vec<_>>(), "freshness": "Current"}))
                .collect();
            json!({"metadata": {"name": g, "creationTimestamp": null}, "versions": versions})
        })
        .collect();
    json!({"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2", "metadata": {}, "items": items})
}

fn aggregated_resource(k: &Kind) -> Value {
    let subs: Vec<Value> = subresources(k)
        .into_iter()
        .map(|(name, kind, verbs)| json!({"subresource": name, "responseKind": kind, "verbs": verbs}))
        .collect();
    let mut r = json!({
        "resource": k.plural, "singularResource": k.singular,
        "responseKind": {"group": k.group, "version": k.version, "kind": k.kind},
        "scope": if k.namespaced { "Namespaced" } else { "Cluster" }, "verbs": k.verbs,
    });
    for (field, list) in [("shortNames", k.short_names), ("categories", k.categories)] {
        if !list.is_empty() {
            r[field] = json!(list);
        }
    }
    if !subs.is_empty() {
        r["subresources"] = json!(subs);
    }
    r
}
