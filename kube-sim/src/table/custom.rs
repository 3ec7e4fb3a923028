//! Tables of custom resources: NAME plus the version's `additionalPrinterColumns` (simple JSONPath), or
//! NAME and AGE when it declares none, as apiextensions' table convertor prints them.

use serde_json::{Value, json};

use super::{AGE, NAME, Printer, age, col, name};
use crate::crd::{Custom, PrinterColumn};
use crate::object::{human_age, parse_rfc3339};

/// NAME and CREATED AT: how the real server prints CustomResourceDefinitions (its default convertor).
pub(crate) static CUSTOM_RESOURCE_DEFINITION: Printer = Printer {
    columns: &[
        NAME,
        col(
            "Created At",
            "date",
            "CreationTimestamp is a timestamp representing the server time when this object was created.",
        ),
    ],
    cells: |o, _| vec![name(o), o["metadata"]["creationTimestamp"].clone()],
};

pub(super) fn column_definitions(custom: &Custom) -> Value {
    let named = |c: &super::Column| json!({"name": c.name, "type": c.kind, "format": c.format, "description": c.description, "priority": c.priority});
    if custom.columns.is_empty() {
        return json!([named(&NAME), named(&AGE)]);
    }
    let mut cols = vec![named(&NAME)];
    cols.extend(custom.columns.iter().map(|c| {
        json!({"name": c.name, "type": c.kind, "format": c.format, "description": c.description, "priority": c.priority})
    }));
    Value::Array(cols)
}

pub(super) fn cells(custom: &Custom, o: &Value, now: i64) -> Vec<Value> {
    if custom.columns.is_empty() {
        return vec![name(o), age(o, now)];
    }
    let mut cells = vec![name(o)];
    cells.extend(custom.columns.iter().map(|c| cell(c, o, now)));
    cells
}

/// The value at a simple JSONPath (`.spec.hosts`, `.spec.ports[0].number`), if present.
fn lookup<'a>(o: &'a Value, path: &str) -> Option<&'a Value> {
    let mut cur = o;
    for part in path.trim_start_matches('.').split('.').filter(|p| !p.is_empty()) {
        let (field, rest) = part.split_once('[').unwrap_or((part, ""));
        if !field.is_empty() {
            cur = cur.get(field)?;
        }
        for index in rest.split('[').filter(|s| !s.is_empty()) {
            let i: usize = index.trim_end_matches(']').parse().ok()?;
            cur = cur.get(i)?;
        }
    }
    (!cur.is_null()).then_some(cur)
}

fn cell(c: &PrinterColumn, o: &Value, now: i64) -> Value {
    let Some(v) = lookup(o, &c.json_path) else {
        return Value::Null;
    };
    match (c.kind.as_str(), v) {
        ("string", Value::String(s)) => json!(s),
        // JSONPath prints lists and objects as JSON.
        ("string", other) => json!(other.to_string()),
        ("date", Value::String(s)) => {
            json!(parse_rfc3339(s).map_or_else(|| "<invalid>".to_string(), |t| human_age(now - t)))
        }
        ("integer", Value::Number(n)) => json!(n.as_i64()),
        ("number", Value::Number(n)) => json!(n),
        ("boolean", Value::Bool(b)) => json!(b),
        _ => Value::Null,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_paths_and_cell_types() {
        let o = json!({"spec": {"host": "h", "hosts": ["a", "b"], "ports": [{"number": 80}], "on": true}});
        let column = |kind: &str, path: &str| PrinterColumn {
            name: "X".into(),
            kind: kind.into(),
            format: String::new(),
            description: String::new(),
            priority: 0,
            json_path: path.into(),
        };
        let cases = [
            ("string", ".spec.host", json!("h")),
            ("string", ".spec.hosts", json!("[\"a\",\"b\"]")),
            ("integer", ".spec.ports[0].number", json!(80)),
            ("boolean", ".spec.on", json!(true)),
            ("string", ".spec.missing", Value::Null),
            ("integer", ".spec.host", Value::Null),
        ];
        for (kind, path, want) in cases {
            assert_eq!(cell(&column(kind, path), &o, 0), want, "{kind} {path}");
        }
    }
}
