//! Field sets as server-side apply tracks them: a tree of path elements (`f:` field, `k:` list-map key,
//! `v:` set value, `i:` index) whose nodes may be members, with the `FieldsV1` JSON encoding and the
//! `.spec.containers[name="app"].image` path notation the real server prints in conflicts.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

/// One step into an object. The derived order (field, key, value, index) is structured-merge-diff's.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Pe {
    Field(String),
    /// A list-map item: its key fields, sorted by name, each value as compact JSON.
    Key(Vec<(String, String)>),
    /// A set item, as compact JSON.
    Value(String),
    Index(usize),
}

impl Pe {
    fn encode(&self) -> String {
        match self {
            Pe::Field(f) => format!("f:{f}"),
            Pe::Key(kv) => {
                let inner: Vec<String> = kv
                    .iter()
                    .map(|(k, v)| format!("{}:{v}", Value::String(k.clone())))
                    .collect();
                format!("k:{{{}}}", inner.join(","))
            }
            Pe::Value(v) => format!("v:{v}"),
            Pe::Index(i) => format!("i:{i}"),
        }
    }

    fn decode(s: &str) -> Result<Pe, String> {
        let bad = || format!("invalid path element {s:?}");
        let (prefix, rest) = s.split_once(':').ok_or_else(bad)?;
        match prefix {
            "f" => Ok(Pe::Field(rest.to_string())),
            "i" => rest.parse().map(Pe::Index).map_err(|_| bad()),
            "v" => {
                let v: Value = serde_json::from_str(rest).map_err(|_| bad())?;
                Ok(Pe::Value(v.to_string()))
            }
            "k" => match serde_json::from_str::<Value>(rest) {
                Ok(Value::Object(m)) => {
                    let mut kv: Vec<(String, String)> =
                        m.into_iter().map(|(k, v)| (k, v.to_string())).collect();
                    kv.sort();
                    Ok(Pe::Key(kv))
                }
                _ => Err(bad()),
            },
            _ => Err(bad()),
        }
    }

    /// The form structured-merge-diff prints: `.name`, `[k=v,k2=v2]`, `[=v]`, `[3]`.
    fn display(&self) -> String {
        match self {
            Pe::Field(f) => format!(".{f}"),
            Pe::Key(kv) => {
                let inner: Vec<String> = kv.iter().map(|(k, v)| format!("{k}={v}")).collect();
                format!("[{}]", inner.join(","))
            }
            Pe::Value(v) => format!("[={v}]"),
            Pe::Index(i) => format!("[{i}]"),
        }
    }
}

pub(crate) type Path = Vec<Pe>;

/// `.spec.containers[name="app"].image`.
pub(crate) fn path_string(path: &[Pe]) -> String {
    path.iter().map(Pe::display).collect()
}

/// A set of paths as a tree; `member` marks that the path leading to this node is itself in the set.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Set {
    member: bool,
    children: BTreeMap<Pe, Set>,
}

/// Deepest nesting accepted when decoding `fieldsV1` from a request (real objects stay far below it).
const MAX_DEPTH: usize = 64;

impl Set {
    pub(crate) fn is_empty(&self) -> bool {
        !self.member && self.children.is_empty()
    }

    pub(crate) fn insert(&mut self, path: &[Pe]) {
        match path.split_first() {
            None => self.member = true,
            Some((first, rest)) => self.children.entry(first.clone()).or_default().insert(rest),
        }
    }

    pub(crate) fn has(&self, path: &[Pe]) -> bool {
        match path.split_first() {
            None => self.member,
            Some((first, rest)) => self.children.get(first).is_some_and(|c| c.has(rest)),
        }
    }

    /// Whether any member lies strictly below `path`.
    pub(crate) fn has_below(&self, path: &[Pe]) -> bool {
        match path.split_first() {
            None => !self.children.is_empty(),
            Some((first, rest)) => self.children.get(first).is_some_and(|c| c.has_below(rest)),
        }
    }

    /// Only the part of the set under the top-level element `first`.
    pub(crate) fn only(&self, first: &Pe) -> Set {
        let mut out = Set::default();
        if let Some(child) = self.children.get(first) {
            out.children.insert(first.clone(), child.clone());
        }
        out
    }

    pub(crate) fn union(&self, other: &Set) -> Set {
        let mut out = self.clone();
        out.member |= other.member;
        for (pe, child) in &other.children {
            let merged = match out.children.get(pe) {
                Some(mine) => mine.union(child),
                None => child.clone(),
            };
            out.children.insert(pe.clone(), merged);
        }
        out
    }

    pub(crate) fn difference(&self, other: &Set) -> Set {
        let mut out = Set {
            member: self.member && !other.member,
            children: BTreeMap::new(),
        };
        for (pe, child) in &self.children {
            let rest = match other.children.get(pe) {
                Some(theirs) => child.difference(theirs),
                None => child.clone(),
            };
            if !rest.is_empty() {
                out.children.insert(pe.clone(), rest);
            }
        }
        out
    }

    pub(crate) fn intersection(&self, other: &Set) -> Set {
        let mut out = Set {
            member: self.member && other.member,
            children: BTreeMap::new(),
        };
        for (pe, child) in &self.children {
            if let Some(theirs) = other.children.get(pe) {
                let both = child.intersection(theirs);
                if !both.is_empty() {
                    out.children.insert(pe.clone(), both);
                }
            }
        }
        out
    }

    /// Removes `path` and everything below it.
    pub(crate) fn remove_tree(&mut self, path: &[Pe]) {
        if let Some((first, rest)) = path.split_first() {
            if rest.is_empty() {
                self.children.remove(first);
            } else if let Some(child) = self.children.get_mut(first) {
                child.remove_tree(rest);
                if child.is_empty() {
                    self.children.remove(first);
                }
            }
        }
    }

    /// Every member path, in order.
    pub(crate) fn paths(&self) -> Vec<Path> {
        let mut out = Vec::new();
        self.collect(&mut Vec::new(), &mut out);
        out
    }

    fn collect(&self, prefix: &mut Path, out: &mut Vec<Path>) {
        for (pe, child) in &self.children {
            prefix.push(pe.clone());
            if child.member {
                out.push(prefix.clone());
            }
            child.collect(prefix, out);
            prefix.pop();
        }
    }

    /// The `fieldsV1` JSON: `{"f:spec": {"f:replicas": {}}, "k:{\"name\":\"a\"}": {".": {}, ...}}`.
    pub(crate) fn to_fields(&self) -> Value {
        let mut m = Map::new();
        if self.member && !self.children.is_empty() {
            m.insert(".".into(), Value::Object(Map::new()));
        }
        for (pe, child) in &self.children {
            m.insert(pe.encode(), child.to_fields());
        }
        Value::Object(m)
    }

    pub(crate) fn from_fields(v: &Value) -> Result<Set, String> {
        let mut set = Set::default();
        set.read_children(v, 0)?;
        Ok(set)
    }

    fn read_children(&mut self, v: &Value, depth: usize) -> Result<(), String> {
        if depth > MAX_DEPTH {
            return Err("fieldsV1 nests too deeply".into());
        }
        let Value::Object(m) = v else {
            return Err("fieldsV1 must be an object".into());
        };
        for (k, child) in m {
            if k == "." {
                continue;
            }
            let pe = Pe::decode(k)?;
            let mut node = Set::default();
            node.read_children(child, depth + 1)?;
            // A leaf (`{}`) or an explicit `.` marks the path itself as a member.
            node.member = node.children.is_empty() || child.get(".").is_some();
            self.children.insert(pe, node);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn f(name: &str) -> Pe {
        Pe::Field(name.into())
    }

    fn key(name: &str) -> Pe {
        Pe::Key(vec![("name".into(), Value::String(name.into()).to_string())])
    }

    #[test]
    fn fields_v1_round_trips() {
        let fields = json!({
            "f:metadata": {"f:labels": {".": {}, "f:app": {}}},
            "f:spec": {
                "f:containers": {"k:{\"name\":\"app\"}": {".": {}, "f:image": {}, "f:name": {}}},
                "f:ports": {"k:{\"port\":80,\"protocol\":\"TCP\"}": {".": {}, "f:port": {}}},
                "f:finalizers": {"v:\"x\"": {}},
                "f:args": {"i:0": {}},
            },
        });
        let set = Set::from_fields(&fields).unwrap();
        assert_eq!(set.to_fields(), fields);
        assert!(set.has(&[f("spec"), f("containers"), key("app")]));
        assert!(set.has(&[f("spec"), f("containers"), key("app"), f("image")]));
        assert!(!set.has(&[f("spec"), f("containers")]));
        assert!(set.has(&[f("metadata"), f("labels")]));
    }

    #[test]
    fn bad_fields_are_errors() {
        for bad in [
            json!({"x:y": {}}),
            json!({"i:no": {}}),
            json!({"k:[1]": {}}),
            json!([]),
        ] {
            assert!(Set::from_fields(&bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn set_operations() {
        let mut a = Set::default();
        a.insert(&[f("spec"), f("replicas")]);
        a.insert(&[f("spec"), f("paused")]);
        let mut b = Set::default();
        b.insert(&[f("spec"), f("replicas")]);
        b.insert(&[f("data"), f("k")]);
        let paths = |s: &Set| s.paths().iter().map(|p| path_string(p)).collect::<Vec<_>>();
        assert_eq!(paths(&a.intersection(&b)), [".spec.replicas"]);
        assert_eq!(paths(&a.difference(&b)), [".spec.paused"]);
        assert_eq!(paths(&a.union(&b)), [".data.k", ".spec.paused", ".spec.replicas"]);
        assert!(a.difference(&a).is_empty());
        let mut c = a.clone();
        c.remove_tree(&[f("spec")]);
        assert!(c.is_empty());
    }

    #[test]
    fn paths_print_like_the_real_server() {
        let ports = Pe::Key(vec![
            ("containerPort".into(), "80".into()),
            ("protocol".into(), "\"TCP\"".into()),
        ]);
        let cases = [
            (vec![f("spec"), f("replicas")], ".spec.replicas"),
            (
                vec![f("spec"), f("containers"), key("app"), f("image")],
                ".spec.containers[name=\"app\"].image",
            ),
            (
                vec![f("ports"), ports],
                ".ports[containerPort=80,protocol=\"TCP\"]",
            ),
            (
                vec![f("finalizers"), Pe::Value("\"x\"".into())],
                ".finalizers[=\"x\"]",
            ),
            (vec![f("args"), Pe::Index(2)], ".args[2]"),
        ];
        for (path, want) in cases {
            assert_eq!(path_string(&path), want);
        }
    }
}
