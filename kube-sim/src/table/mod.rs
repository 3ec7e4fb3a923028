//! Server-side `Table` rendering (what `kubectl get` prints): each kind has a printer with the real server's
//! columns (pkg/printers/internalversion). Every column is always sent; kubectl shows priority-1 columns
//! only with `-o wide`. Objects are parsed only when a Table is requested.

mod cluster;
mod core;
mod custom;
mod workloads;

use serde_json::{Map, Value, json};

use super::error::Error;
use super::kinds::Kind;
use super::object::{Obj, human_age, now_secs, parse_rfc3339};

pub(crate) use cluster::{
    CLUSTER_ROLE, ENDPOINT_SLICE, HORIZONTAL_POD_AUTOSCALER, INGRESS, LEASE, POD_DISRUPTION_BUDGET,
    ROLE_BINDING,
};
pub(crate) use core::{
    CONFIG_MAP, ENDPOINTS, EVENT, NAMESPACE, NODE, PERSISTENT_VOLUME, PERSISTENT_VOLUME_CLAIM, POD, SECRET,
    SERVICE, SERVICE_ACCOUNT,
};
pub(crate) use custom::CUSTOM_RESOURCE_DEFINITION;
pub(crate) use workloads::{CRON_JOB, DAEMON_SET, DEPLOYMENT, JOB, REPLICAS, STATEFUL_SET};

/// What each row carries besides its cells (`includeObject`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Include {
    None,
    Metadata,
    Object,
}

impl Include {
    pub(crate) fn parse(v: Option<&str>) -> Result<Include, Error> {
        match v {
            None | Some("Metadata") => Ok(Include::Metadata),
            Some("None") => Ok(Include::None),
            Some("Object") => Ok(Include::Object),
            Some(other) => Err(Error::BadRequest(format!("invalid includeObject {other:?}"))),
        }
    }
}

/// One column definition, as the real server declares it.
#[derive(Debug)]
pub(crate) struct Column {
    name: &'static str,
    kind: &'static str,
    format: &'static str,
    /// 0: always shown; 1: shown by `kubectl get -o wide` only.
    priority: u8,
    description: &'static str,
}

const fn col(name: &'static str, kind: &'static str, description: &'static str) -> Column {
    Column {
        name,
        kind,
        format: "",
        priority: 0,
        description,
    }
}

/// A `-o wide` column.
const fn wide(name: &'static str, description: &'static str) -> Column {
    Column {
        name,
        kind: "string",
        format: "",
        priority: 1,
        description,
    }
}

const NAME: Column = Column {
    name: "Name",
    kind: "string",
    format: "name",
    priority: 0,
    description: "Name must be unique within a namespace. Is required when creating resources, although some \
        resources may allow a client to request the generation of an appropriate name automatically. Name is \
        primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: \
        https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names",
};

const AGE: Column = col(
    "Age",
    "string",
    "CreationTimestamp is a timestamp representing the server time when this object was created. It is not \
     guaranteed to be set in happens-before order across separate operations. Clients may not set this value. \
     It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. \
     More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata",
);

/// A kind's columns and how one object fills them (in column order, NAME included).
#[derive(Debug)]
pub(crate) struct Printer {
    columns: &'static [Column],
    cells: fn(&Value, i64) -> Vec<Value>,
}

/// NAME and AGE only: kinds the real server prints with its default table convertor.
pub(crate) static DEFAULT: Printer = Printer {
    columns: &[NAME, AGE],
    cells: |o, now| vec![name(o), age(o, now)],
};

fn column_definitions(printer: &Printer) -> Value {
    let cols: Vec<Value> = printer
        .columns
        .iter()
        .map(|c| {
            json!({"name": c.name, "type": c.kind, "format": c.format, "description": c.description,
                   "priority": c.priority})
        })
        .collect();
    Value::Array(cols)
}

fn row(kind: &Kind, obj: &Obj, include: Include, now: i64) -> Value {
    let value = obj.value();
    let cells = match kind.custom {
        Some(c) => custom::cells(c, &value, now),
        None => (kind.printer.cells)(&value, now),
    };
    let mut row = json!({"cells": cells});
    match include {
        Include::None => {}
        Include::Metadata => {
            row["object"] = json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": value["metadata"]});
        }
        Include::Object => row["object"] = value,
    }
    row
}

/// A Table of objects; `meta` is the list metadata (resourceVersion, continue).
pub(crate) fn table<'a>(
    kind: &Kind,
    objs: impl IntoIterator<Item = &'a Obj>,
    include: Include,
    meta: Value,
) -> Value {
    let now = now_secs();
    let rows: Vec<Value> = objs.into_iter().map(|o| row(kind, o, include, now)).collect();
    json!({
        "kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": meta,
        "columnDefinitions": match kind.custom {
            Some(c) => custom::column_definitions(c),
            None => column_definitions(kind.printer),
        },
        "rows": rows,
    })
}

// Cell helpers shared by the printers.

fn name(o: &Value) -> Value {
    json!(text(&o["metadata"]["name"]))
}

fn age(o: &Value, now: i64) -> Value {
    json!(since(&o["metadata"]["creationTimestamp"], now))
}

/// `5m` since an RFC 3339 time, or `<unknown>` (as the real printer for a zero time).
fn since(t: &Value, now: i64) -> String {
    t.as_str()
        .and_then(parse_rfc3339)
        .map_or_else(|| "<unknown>".to_string(), |t| human_age(now - t))
}

fn text(v: &Value) -> &str {
    v.as_str().unwrap_or_default()
}

/// A string, or `or` when missing or empty.
fn text_or<'a>(v: &'a Value, or: &'a str) -> &'a str {
    v.as_str().filter(|s| !s.is_empty()).unwrap_or(or)
}

fn int(v: &Value) -> i64 {
    v.as_i64().unwrap_or_default()
}

fn items(v: &Value) -> &[Value] {
    v.as_array().map(Vec::as_slice).unwrap_or_default()
}

fn len(v: &Value) -> i64 {
    match v {
        Value::Array(a) => a.len() as i64,
        Value::Object(m) => m.len() as i64,
        _ => 0,
    }
}

/// `a=b,c=d` for a label map (sorted), `<none>` when empty.
fn labels(v: &Value) -> String {
    let Some(m) = v.as_object().filter(|m| !m.is_empty()) else {
        return "<none>".to_string();
    };
    let mut pairs: Vec<String> = m.iter().map(|(k, v)| format!("{k}={}", text(v))).collect();
    pairs.sort();
    pairs.join(",")
}

/// A `LabelSelector` in the selector syntax (`app=web,tier in (a,b)`), as labels.Selector's String.
fn selector(v: &Value) -> String {
    let mut reqs: Vec<(String, String)> = v["matchLabels"]
        .as_object()
        .unwrap_or(&Map::new())
        .iter()
        .map(|(k, val)| (k.clone(), format!("{k}={}", text(val))))
        .collect();
    for e in items(&v["matchExpressions"]) {
        let key = text(&e["key"]).to_string();
        let mut values: Vec<&str> = items(&e["values"]).iter().map(text).collect();
        values.sort_unstable();
        let req = match text(&e["operator"]) {
            "In" => format!("{key} in ({})", values.join(",")),
            "NotIn" => format!("{key} notin ({})", values.join(",")),
            "Exists" => key.clone(),
            _ => format!("!{key}"),
        };
        reqs.push((key, req));
    }
    reqs.sort();
    reqs.into_iter().map(|(_, r)| r).collect::<Vec<_>>().join(",")
}

/// The CONTAINERS and IMAGES cells of a pod template.
fn containers_images(template: &Value) -> [Value; 2] {
    let cs = items(&template["spec"]["containers"]);
    let join = |field: &str| cs.iter().map(|c| text(&c[field])).collect::<Vec<_>>().join(",");
    [json!(join("name")), json!(join("image"))]
}

/// Load-balancer ingress points: IPs or host names, comma-separated.
fn ingress_points(lb: &Value) -> String {
    items(&lb["ingress"])
        .iter()
        .filter_map(|i| {
            i["ip"]
                .as_str()
                .or(i["hostname"].as_str())
                .filter(|s| !s.is_empty())
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// An int-or-string value as printed (`2`, `50%`).
fn int_or_string(v: &Value) -> Option<String> {
    match v {
        Value::Number(n) => Some(n.to_string()),
        Value::String(s) => Some(s.clone()),
        _ => None,
    }
}

/// Up to three entries, then ` + N more...`; `<unset>` when empty.
fn list_with_more(list: Vec<String>, count: usize) -> String {
    const MAX: usize = 3;
    let shown = list.into_iter().take(MAX).collect::<Vec<_>>().join(",");
    if count > MAX {
        format!("{shown} + {} more...", count - MAX)
    } else if shown.is_empty() {
        "<unset>".to_string()
    } else {
        shown
    }
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
