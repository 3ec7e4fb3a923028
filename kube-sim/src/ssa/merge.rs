//! The JSON side of server-side apply: merging an applied configuration into the live object, the field
//! set a configuration declares, the added / modified / removed sets between two versions, and removing
//! owned-by-nobody fields. All of it follows the list and object semantics a [`Schema`] gives.

use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value};

use super::fieldset::{Path, Pe, Set, path_string};
use super::schema::{ListType, Schema};

/// Field-name path from the root (list items skipped), for schema look-ups.
type Names = Vec<String>;

/// The path elements of a non-atomic list's items, or `None` when an item has no usable key.
fn item_pes(schema: &dyn Schema, names: &[String], items: &[Value]) -> Result<Vec<Pe>, String> {
    match schema.list_type(names) {
        ListType::Atomic => Err("atomic".into()),
        ListType::Set => items
            .iter()
            .map(|v| match v {
                Value::Object(_) | Value::Array(_) => Err("a set item must be a scalar".to_string()),
                scalar => Ok(Pe::Value(scalar.to_string())),
            })
            .collect(),
        ListType::Map(keys) => items
            .iter()
            .enumerate()
            .map(|(i, item)| {
                let mut kv = Vec::with_capacity(keys.len());
                for key in &keys {
                    let value = match item.get(*key) {
                        Some(v) if !v.is_null() => v.clone(),
                        _ => schema.key_default(names, key).ok_or_else(|| {
                            format!(
                                "element {i}: associative list with keys has an element that omits key field \
                                 {key:?} (and doesn't have default value)"
                            )
                        })?,
                    };
                    kv.push((key.to_string(), value.to_string()));
                }
                kv.sort();
                Ok(Pe::Key(kv))
            })
            .collect(),
    }
}

fn names_of(path_names: &[String]) -> String {
    path_names.iter().map(|n| format!(".{n}")).collect()
}

/// Checks an applied configuration's lists (keys present, no duplicates), as the real server does
/// before merging.
pub(crate) fn check_config(schema: &dyn Schema, config: &Value) -> Result<(), String> {
    fn walk(schema: &dyn Schema, v: &Value, names: &mut Names) -> Result<(), String> {
        match v {
            Value::Object(m) if !schema.atomic_object(names) => {
                for (k, child) in m {
                    names.push(k.clone());
                    walk(schema, child, names)?;
                    names.pop();
                }
            }
            Value::Array(items) if schema.list_type(names) != ListType::Atomic => {
                let pes = item_pes(schema, names, items).map_err(|e| format!("{}: {e}", names_of(names)))?;
                let mut seen = HashSet::new();
                for pe in &pes {
                    if !seen.insert(pe) {
                        return Err(format!(
                            "{}: duplicate entries for key {}",
                            names_of(names),
                            path_string(std::slice::from_ref(pe))
                        ));
                    }
                }
                for item in items {
                    walk(schema, item, names)?;
                }
            }
            _ => {}
        }
        Ok(())
    }
    walk(schema, config, &mut Vec::new())
}

/// Merges `config` into `live`: objects field by field, lists by their type, everything else replaced.
/// A `null` in the configuration removes the field.
pub(crate) fn merge(schema: &dyn Schema, live: Option<&Value>, config: &Value) -> Value {
    fn go(schema: &dyn Schema, live: Option<&Value>, config: &Value, names: &mut Names) -> Value {
        match (live, config) {
            (live, Value::Object(c)) if !schema.atomic_object(names) => {
                let empty = Map::new();
                let l = match live {
                    Some(Value::Object(l)) => l,
                    _ => &empty,
                };
                let mut out = l.clone();
                for (k, cv) in c {
                    if cv.is_null() {
                        out.remove(k);
                        continue;
                    }
                    names.push(k.clone());
                    let merged = go(schema, l.get(k), cv, names);
                    names.pop();
                    out.insert(k.clone(), merged);
                }
                Value::Object(out)
            }
            (Some(Value::Array(l)), Value::Array(c)) => {
                match (item_pes(schema, names, l), item_pes(schema, names, c)) {
                    (Ok(lpe), Ok(cpe)) => {
                        Value::Array(merge_items(l, &lpe, c, &cpe, |lv, cv| go(schema, lv, cv, names)))
                    }
                    _ => config.clone(),
                }
            }
            _ => config.clone(),
        }
    }
    go(schema, live, config, &mut Vec::new())
}

/// Ordered merge of two keyed lists: shared items follow the configuration's order, live-only items keep
/// their place, new items come where the configuration puts them.
fn merge_items(
    lhs: &[Value],
    lpe: &[Pe],
    rhs: &[Value],
    rpe: &[Pe],
    mut merge_item: impl FnMut(Option<&Value>, &Value) -> Value,
) -> Vec<Value> {
    let mut lmap: HashMap<&Pe, &Value> = HashMap::new();
    for (pe, v) in lpe.iter().zip(lhs) {
        lmap.entry(pe).or_insert(v);
    }
    let rset: HashSet<&Pe> = rpe.iter().collect();
    let shared: Vec<&Pe> = rpe.iter().filter(|pe| lmap.contains_key(pe)).collect();
    let mut next = 0usize;
    let mut done: HashSet<&Pe> = HashSet::new();
    let mut out = Vec::with_capacity(lhs.len() + rhs.len());
    let (mut li, mut ri) = (0, 0);
    while li < lhs.len() || ri < rhs.len() {
        if li < lhs.len() && ri < rhs.len() {
            let pe = &lpe[li];
            if *pe == rpe[ri] {
                done.insert(pe);
                out.push(merge_item(lmap.get(pe).copied(), &rhs[ri]));
                li += 1;
                ri += 1;
                next += 1;
                continue;
            }
            if rset.contains(pe) && shared.get(next).is_some_and(|s| *s != pe) {
                li += 1;
                continue;
            }
        }
        if li < lhs.len() {
            let pe = &lpe[li];
            if !rset.contains(pe) {
                out.push(lhs[li].clone());
                li += 1;
                continue;
            }
            if done.contains(pe) {
                li += 1;
                continue;
            }
        }
        if ri < rhs.len() {
            let pe = &rpe[ri];
            if !done.insert(pe) {
                ri += 1;
                continue;
            }
            out.push(merge_item(lmap.get(pe).copied(), &rhs[ri]));
            ri += 1;
            if shared.get(next).is_some_and(|s| *s == pe) {
                next += 1;
            }
        }
    }
    out
}

/// The fields an applied configuration declares: leaves, list items, atomic values and empty objects.
pub(crate) fn config_set(schema: &dyn Schema, config: &Value) -> Set {
    fn go(schema: &dyn Schema, v: &Value, names: &mut Names, path: &mut Path, set: &mut Set) {
        match v {
            Value::Object(m) if !m.is_empty() && !schema.atomic_object(names) => {
                for (k, child) in m {
                    names.push(k.clone());
                    path.push(Pe::Field(k.clone()));
                    go(schema, child, names, path, set);
                    path.pop();
                    names.pop();
                }
            }
            Value::Array(items) => match item_pes(schema, names, items) {
                Ok(pes) => {
                    for (pe, item) in pes.into_iter().zip(items) {
                        path.push(pe);
                        set.insert(path);
                        go_item(schema, item, names, path, set);
                        path.pop();
                    }
                }
                Err(_) => set.insert(path),
            },
            _ => set.insert(path),
        }
    }
    fn go_item(schema: &dyn Schema, item: &Value, names: &mut Names, path: &mut Path, set: &mut Set) {
        if let Value::Object(m) = item {
            for (k, child) in m {
                names.push(k.clone());
                path.push(Pe::Field(k.clone()));
                go(schema, child, names, path, set);
                path.pop();
                names.pop();
            }
        }
    }
    let mut set = Set::default();
    if let Value::Object(m) = config {
        let mut names = Vec::new();
        let mut path = Vec::new();
        for (k, child) in m {
            names.push(k.clone());
            path.push(Pe::Field(k.clone()));
            go(schema, child, &mut names, &mut path, &mut set);
            path.pop();
            names.pop();
        }
    }
    set
}

/// What changed between two versions of an object.
#[derive(Debug, Default)]
pub(crate) struct Comparison {
    pub(crate) added: Set,
    pub(crate) modified: Set,
    pub(crate) removed: Set,
}

impl Comparison {
    pub(crate) fn changed(&self) -> Set {
        self.added.union(&self.modified)
    }
}

/// Compares two versions of an object the way structured-merge-diff does: a path present on one side only
/// is added or removed together with everything below it; differing leaves are modified.
pub(crate) fn compare(schema: &dyn Schema, old: &Value, new: &Value) -> Comparison {
    let mut c = Comparison::default();
    let mut names = Vec::new();
    let mut path = Vec::new();
    compare_children(schema, old, new, &mut names, &mut path, &mut c);
    c
}

fn compare_children(
    schema: &dyn Schema,
    old: &Value,
    new: &Value,
    names: &mut Names,
    path: &mut Path,
    c: &mut Comparison,
) {
    let empty = Map::new();
    let (o, n) = (
        old.as_object().unwrap_or(&empty),
        new.as_object().unwrap_or(&empty),
    );
    for (k, nv) in n {
        names.push(k.clone());
        path.push(Pe::Field(k.clone()));
        match o.get(k) {
            Some(ov) => compare_at(schema, ov, nv, names, path, c),
            None if nv.is_object() && schema.zero_struct(names) => {
                compare_at(schema, &Value::Object(Map::new()), nv, names, path, c)
            }
            None => mark(schema, nv, names, path, &mut c.added),
        }
        path.pop();
        names.pop();
    }
    for (k, ov) in o {
        if !n.contains_key(k) {
            names.push(k.clone());
            path.push(Pe::Field(k.clone()));
            mark(schema, ov, names, path, &mut c.removed);
            path.pop();
            names.pop();
        }
    }
}

fn compare_at(
    schema: &dyn Schema,
    old: &Value,
    new: &Value,
    names: &mut Names,
    path: &mut Path,
    c: &mut Comparison,
) {
    match (old, new) {
        (Value::Object(o), Value::Object(n))
            if !(schema.atomic_object(names) || o.is_empty() && n.is_empty()) =>
        {
            compare_children(schema, old, new, names, path, c)
        }
        (Value::Array(o), Value::Array(n)) => {
            match (item_pes(schema, names, o), item_pes(schema, names, n)) {
                (Ok(ope), Ok(npe)) => {
                    let omap: HashMap<&Pe, &Value> = ope.iter().zip(o).collect();
                    let nmap: HashMap<&Pe, &Value> = npe.iter().zip(n).collect();
                    for (pe, nv) in npe.iter().zip(n) {
                        path.push(pe.clone());
                        match omap.get(pe) {
                            Some(ov) => compare_item(schema, ov, nv, names, path, c),
                            None => mark_item(schema, nv, names, path, &mut c.added),
                        }
                        path.pop();
                    }
                    for (pe, ov) in ope.iter().zip(o) {
                        if !nmap.contains_key(pe) {
                            path.push(pe.clone());
                            mark_item(schema, ov, names, path, &mut c.removed);
                            path.pop();
                        }
                    }
                }
                _ if old != new => c.modified.insert(path),
                _ => {}
            }
        }
        _ if old != new => c.modified.insert(path),
        _ => {}
    }
}

fn compare_item(
    schema: &dyn Schema,
    old: &Value,
    new: &Value,
    names: &mut Names,
    path: &mut Path,
    c: &mut Comparison,
) {
    match (old, new) {
        (Value::Object(_), Value::Object(_)) => compare_children(schema, old, new, names, path, c),
        _ if old != new => c.modified.insert(path),
        _ => {}
    }
}

/// Inserts `path` and every path below it in `v`.
fn mark(schema: &dyn Schema, v: &Value, names: &mut Names, path: &mut Path, set: &mut Set) {
    set.insert(path);
    match v {
        Value::Object(m) if !schema.atomic_object(names) => {
            for (k, child) in m {
                names.push(k.clone());
                path.push(Pe::Field(k.clone()));
                mark(schema, child, names, path, set);
                path.pop();
                names.pop();
            }
        }
        Value::Array(items) => {
            if let Ok(pes) = item_pes(schema, names, items) {
                for (pe, item) in pes.into_iter().zip(items) {
                    path.push(pe);
                    mark_item(schema, item, names, path, set);
                    path.pop();
                }
            }
        }
        _ => {}
    }
}

fn mark_item(schema: &dyn Schema, item: &Value, names: &mut Names, path: &mut Path, set: &mut Set) {
    set.insert(path);
    if let Value::Object(m) = item {
        for (k, child) in m {
            names.push(k.clone());
            path.push(Pe::Field(k.clone()));
            mark(schema, child, names, path, set);
            path.pop();
            names.pop();
        }
    }
}

/// Removes the value at `path`; objects left empty by the removal go too (Go drops empty maps, and a
/// struct nobody owns any field of is pruned whole).
pub(crate) fn remove_path(schema: &dyn Schema, v: &mut Value, path: &[Pe]) {
    fn go(schema: &dyn Schema, v: &mut Value, path: &[Pe], names: &mut Names) -> bool {
        let Some((first, rest)) = path.split_first() else {
            return false;
        };
        match (first, v) {
            (Pe::Field(f), Value::Object(m)) => {
                if rest.is_empty() {
                    m.remove(f);
                } else if let Some(child) = m.get_mut(f) {
                    names.push(f.clone());
                    let emptied = go(schema, child, rest, names);
                    names.pop();
                    if emptied {
                        m.remove(f);
                    }
                }
                m.is_empty()
            }
            (pe, Value::Array(items)) => {
                let Ok(pes) = item_pes(schema, names, items) else {
                    return false;
                };
                let Some(i) = pes.iter().position(|p| p == pe).or(match pe {
                    Pe::Index(i) if *i < items.len() => Some(*i),
                    _ => None,
                }) else {
                    return false;
                };
                if rest.is_empty() {
                    items.remove(i);
                } else {
                    go(schema, &mut items[i], rest, names);
                }
                false
            }
            _ => false,
        }
    }
    go(schema, v, path, &mut Vec::new());
}

#[cfg(test)]
#[path = "merge_tests.rs"]
mod tests;
