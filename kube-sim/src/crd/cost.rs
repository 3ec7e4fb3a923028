//! What a rule may cost, as kube-apiserver caps it: estimated from the schema's bounds when the CRD is
//! written (a rule that could run too long refuses the CRD), and from the object's actual sizes before
//! a rule runs (past the per-call limit it is an error, never a hang). One unit per variable read, field
//! selected and function called, a comprehension times the elements it walks, string functions a tenth
//! of a unit per character read (cel-go's model, simplified).

use cel::common::ast::{EntryExpr, Expr, IdedExpr};
use serde_json::Value;

/// kube-apiserver's `StaticEstimatedCostLimit`: one rule's estimate when the CRD is written.
pub(crate) const STATIC_LIMIT: f64 = 10_000_000.0;
/// kube-apiserver's `PerCallLimit`: one rule's actual cost on one value.
pub(crate) const PER_CALL_LIMIT: f64 = 1_000_000.0;
/// kube-apiserver's `RuntimeCELCostBudget`: every rule on one object together.
pub(crate) const RUNTIME_BUDGET: f64 = 10_000_000.0;

/// kube-apiserver's request cap, which bounds what no `max*` does.
const MAX_REQUEST_BYTES: f64 = 3.0 * 1024.0 * 1024.0;

/// Elements of anything not bounded at all: the request cap over the smallest element (`1,`).
const UNBOUNDED: f64 = MAX_REQUEST_BYTES / 2.0;

/// The fewest bytes a value of `schema` serializes to, as kube-apiserver's estimator counts them.
fn min_serialized(schema: &Value) -> f64 {
    match schema["type"].as_str() {
        Some("string") => 2.0 + schema["minLength"].as_f64().unwrap_or(0.0),
        Some("boolean") => 4.0,
        Some("integer" | "number") => 1.0,
        // `{}`, `[]`, and anything typeless.
        _ => 2.0,
    }
}

/// A step from `self` to what an expression reads.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Seg {
    Field(String),
    /// Any element of a list (or value of a map).
    Each,
}

/// Where sizes come from: the schema's bounds, or the object itself.
pub(crate) enum Sizes<'a> {
    Schema(&'a Value),
    Data(&'a Value),
}

impl Sizes<'_> {
    /// The most elements (characters for a string) what `path` names can have.
    fn size(&self, path: &[Seg]) -> f64 {
        match self {
            Sizes::Schema(s) => schema_size(s, path),
            Sizes::Data(v) => data_size(v, path),
        }
    }

    /// Characters of a string `path` names, when that counts (unbounded strings are not priced
    /// statically: kube-apiserver accepts Istio's per-key `contains` over 4096-entry maps).
    fn chars(&self, path: Option<&[Seg]>) -> f64 {
        match (self, path) {
            (Sizes::Data(_), Some(p)) => self.size(p),
            (Sizes::Schema(s), Some(p)) => {
                let sub = schema_at(s, p);
                sub.and_then(|s| s["maxLength"].as_f64()).unwrap_or(0.0)
            }
            _ => 0.0,
        }
    }
}

fn schema_at<'a>(schema: &'a Value, path: &[Seg]) -> Option<&'a Value> {
    let Some((first, rest)) = path.split_first() else {
        return Some(schema);
    };
    let sub = match first {
        Seg::Field(f) => schema["properties"].get(f).or_else(|| {
            schema["additionalProperties"]
                .as_object()
                .map(|_| &schema["additionalProperties"])
        }),
        Seg::Each if schema["items"].is_object() => Some(&schema["items"]),
        Seg::Each => schema["additionalProperties"]
            .as_object()
            .map(|_| &schema["additionalProperties"]),
    }?;
    schema_at(sub, rest)
}

fn schema_size(schema: &Value, path: &[Seg]) -> f64 {
    let Some(s) = schema_at(schema, path) else {
        return UNBOUNDED;
    };
    if let Some(max) = ["maxItems", "maxProperties", "maxLength"]
        .iter()
        .find_map(|k| s[*k].as_f64())
    {
        return max;
    }
    // What fits in one request: each item and a comma, each entry with `"":` and a comma.
    if s["items"].is_object() {
        MAX_REQUEST_BYTES / (min_serialized(&s["items"]) + 1.0)
    } else if s["additionalProperties"].is_object() {
        MAX_REQUEST_BYTES / (min_serialized(&s["additionalProperties"]) + 4.0)
    } else if s["type"] == "string" {
        MAX_REQUEST_BYTES
    } else {
        UNBOUNDED
    }
}

fn data_size(v: &Value, path: &[Seg]) -> f64 {
    match path.split_first() {
        None => match v {
            Value::Array(a) => a.len() as f64,
            Value::Object(o) => o.len() as f64,
            Value::String(s) => s.chars().count() as f64,
            _ => 1.0,
        },
        Some((Seg::Field(f), rest)) => v.get(f).map_or(0.0, |v| data_size(v, rest)),
        Some((Seg::Each, rest)) => {
            let each: Box<dyn Iterator<Item = &Value>> = match v {
                Value::Array(a) => Box::new(a.iter()),
                Value::Object(o) => Box::new(o.values()),
                _ => Box::new(std::iter::empty()),
            };
            // A map's comprehension walks its keys: count their length too.
            let keys = match (v, rest.is_empty()) {
                (Value::Object(o), true) => o.keys().map(|k| k.chars().count() as f64).fold(0.0, f64::max),
                _ => 0.0,
            };
            each.map(|e| data_size(e, rest)).fold(keys, f64::max)
        }
    }
}

/// Loop variables in scope: name and the path of what it ranges over (`None`: not from `self`).
type Scope = Vec<(String, Option<Vec<Seg>>)>;

/// The cost bound of `expr` given `sizes`.
pub(crate) fn estimate(expr: &IdedExpr, sizes: &Sizes) -> f64 {
    cost(expr, sizes, &mut Vec::new())
}

/// The path from `self` an expression reads, if it is one.
fn path_of(expr: &IdedExpr, scope: &Scope) -> Option<Vec<Seg>> {
    match &expr.expr {
        Expr::Ident(name) if name == "self" => Some(Vec::new()),
        Expr::Ident(name) => scope.iter().rev().find(|(n, _)| n == name)?.1.clone(),
        Expr::Select(sel) if !sel.test => {
            let mut p = path_of(&sel.operand, scope)?;
            p.push(Seg::Field(sel.field.clone()));
            Some(p)
        }
        _ => None,
    }
}

/// The most elements a comprehension's range can have.
fn range_size(expr: &IdedExpr, sizes: &Sizes, scope: &Scope) -> f64 {
    if let Some(p) = path_of(expr, scope) {
        return sizes.size(&p);
    }
    match &expr.expr {
        Expr::List(l) => l.elements.len() as f64,
        Expr::Map(m) => m.entries.len() as f64,
        // `has(self.x) ? self.x : []`: the larger branch.
        Expr::Call(c) if c.func_name == "_?_:_" && c.args.len() == 3 => {
            range_size(&c.args[1], sizes, scope).max(range_size(&c.args[2], sizes, scope))
        }
        _ => match sizes {
            Sizes::Schema(_) => UNBOUNDED,
            // Something computed from the object: no longer than the object's largest part.
            Sizes::Data(v) => serde_json::to_string(v).map_or(UNBOUNDED, |s| s.len() as f64),
        },
    }
}

/// String functions whose work grows with the string they read.
const STRING_WORK: &[&str] = &[
    "contains",
    "startsWith",
    "endsWith",
    "matches",
    "substring",
    "indexOf",
    "lastIndexOf",
    "split",
    "lowerAscii",
    "upperAscii",
    "replace",
    "trim",
    "_+_",
    "_==_",
    "_!=_",
    "isURL",
    "url",
    "int",
    "duration",
    "isIP",
    "isCIDR",
];

fn cost(expr: &IdedExpr, sizes: &Sizes, scope: &mut Scope) -> f64 {
    match &expr.expr {
        Expr::Unspecified | Expr::Literal(_) => 0.0,
        Expr::Ident(_) => 1.0,
        Expr::Select(sel) => 1.0 + cost(&sel.operand, sizes, scope),
        Expr::List(l) => 10.0 + l.elements.iter().map(|e| cost(e, sizes, scope)).sum::<f64>(),
        Expr::Map(m) => 30.0 + entries(&m.entries, sizes, scope),
        Expr::Struct(s) => 40.0 + entries(&s.entries, sizes, scope),
        Expr::Call(call) => {
            let mut total = 1.0;
            let mut read = 0.0f64;
            for arg in call.target.iter().map(|t| &**t).chain(call.args.iter()) {
                total += cost(arg, sizes, scope);
                read = read.max(sizes.chars(path_of(arg, scope).as_deref()));
            }
            if STRING_WORK.contains(&call.func_name.as_str()) {
                total += (read * 0.1).ceil();
            }
            total
        }
        Expr::Comprehension(c) => {
            let n = range_size(&c.iter_range, sizes, scope);
            let mut total = cost(&c.iter_range, sizes, scope) + cost(&c.accu_init, sizes, scope);
            let mut each = path_of(&c.iter_range, scope);
            if let Some(p) = each.as_mut() {
                p.push(Seg::Each);
            }
            scope.push((c.iter_var.clone(), each));
            let body = cost(&c.loop_cond, sizes, scope) + cost(&c.loop_step, sizes, scope);
            scope.pop();
            total += n * body;
            total + cost(&c.result, sizes, scope)
        }
    }
}

fn entries(entries: &[cel::common::ast::IdedEntryExpr], sizes: &Sizes, scope: &mut Scope) -> f64 {
    entries
        .iter()
        .map(|e| match &e.expr {
            EntryExpr::StructField(f) => cost(&f.value, sizes, scope),
            EntryExpr::MapEntry(m) => cost(&m.key, sizes, scope) + cost(&m.value, sizes, scope),
        })
        .sum()
}

/// kube-apiserver's wording of how far past the static limit an estimate is.
pub(crate) fn factor(estimate: f64) -> String {
    let f = estimate / STATIC_LIMIT;
    if f > 100.0 {
        "more than 100x".into()
    } else {
        format!("{f:.1}x")
    }
}
