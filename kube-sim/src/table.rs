//! Server-side `Table` rendering (what `kubectl get` prints): NAME, the kind's extra columns, AGE.

use serde_json::{Value, json};

use super::error::Error;
use super::kinds::Kind;
use super::object::{Obj, human_age, now_secs, parse_rfc3339};

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

fn column_definitions(kind: &Kind) -> Value {
    let col = |name: &str, format: &str, description: &str| json!({"name": name, "type": "string", "format": format, "description": description, "priority": 0});
    let mut cols = vec![col("Name", "name", "Name must be unique within a namespace.")];
    cols.extend(
        kind.columns
            .iter()
            .map(|(header, pointer)| col(header, "", pointer)),
    );
    cols.push(col(
        "Age",
        "",
        "CreationTimestamp is a timestamp representing the server time when this object was created.",
    ));
    Value::Array(cols)
}

fn row(kind: &Kind, obj: &Obj, include: Include, now: i64) -> Value {
    let value = obj.value();
    let mut cells = vec![json!(obj.key.1)];
    for (_, pointer) in kind.columns {
        cells.push(match value.pointer(pointer) {
            Some(Value::String(s)) if !s.is_empty() => json!(s),
            Some(v @ (Value::Number(_) | Value::Bool(_))) => json!(v.to_string()),
            _ => json!("<none>"),
        });
    }
    let created = value["metadata"]["creationTimestamp"]
        .as_str()
        .and_then(parse_rfc3339);
    cells.push(json!(
        created.map_or_else(|| "<unknown>".to_string(), |c| human_age(now - c))
    ));
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
        "columnDefinitions": column_definitions(kind), "rows": rows,
    })
}
