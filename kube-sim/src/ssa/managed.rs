//! `metadata.managedFields` bookkeeping: decoding and encoding the entries, the manager identities, the
//! real server's ordering, and the cap on update managers.

use serde_json::{Value, json};

use super::fieldset::{Pe, Set};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Operation {
    Apply,
    Update,
}

impl Operation {
    fn as_str(self) -> &'static str {
        match self {
            Operation::Apply => "Apply",
            Operation::Update => "Update",
        }
    }
}

/// One managedFields entry.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    pub(crate) manager: String,
    pub(crate) operation: Operation,
    pub(crate) api_version: String,
    pub(crate) time: Option<String>,
    pub(crate) subresource: String,
    pub(crate) set: Set,
}

/// Update managers kept before the oldest are folded into one, as the real server does.
const MAX_UPDATE_MANAGERS: usize = 10;
const ANCIENT: &str = "ancient-changes";

impl Entry {
    /// Same manager as the server sees it: appliers are one manager across API versions.
    pub(crate) fn same_manager(&self, other: &Entry) -> bool {
        self.manager == other.manager
            && self.operation == other.operation
            && self.subresource == other.subresource
            && (self.operation == Operation::Apply || self.api_version == other.api_version)
    }

    /// How conflicts name the manager: `"mgr"`, `"mgr" with subresource "status"`, `"mgr" using apps/v1`.
    pub(crate) fn display(&self) -> String {
        let mut s = format!("{:?}", self.manager);
        if !self.subresource.is_empty() {
            s.push_str(&format!(" with subresource {:?}", self.subresource));
        }
        if self.operation == Operation::Update {
            s.push_str(&format!(" using {}", self.api_version));
        }
        s
    }

    fn to_json(&self) -> Value {
        let mut e = json!({
            "manager": self.manager,
            "operation": self.operation.as_str(),
            "apiVersion": self.api_version,
            "fieldsType": "FieldsV1",
            "fieldsV1": self.set.to_fields(),
        });
        if let Some(t) = &self.time {
            e["time"] = json!(t);
        }
        if !self.subresource.is_empty() {
            e["subresource"] = json!(self.subresource);
        }
        e
    }

    fn from_json(i: usize, v: &Value) -> Result<Entry, String> {
        let text = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
        let operation = match v.get("operation").and_then(Value::as_str) {
            Some("Apply") => Operation::Apply,
            Some("Update") => Operation::Update,
            _ => return Err("operation must be `Apply` or `Update`".into()),
        };
        let api_version = text("apiVersion");
        if api_version.is_empty() {
            return Err("apiVersion must not be empty".into());
        }
        match v.get("fieldsType").and_then(Value::as_str) {
            Some("FieldsV1") => {}
            None | Some("") => return Err(format!("missing fieldsType in managed fields entry {i}")),
            Some(other) => {
                return Err(format!(
                    "invalid fieldsType {other:?} in managed fields entry {i}"
                ));
            }
        }
        let set = match v.get("fieldsV1") {
            None | Some(Value::Null) => Set::default(),
            Some(f) => Set::from_fields(f)?,
        };
        Ok(Entry {
            manager: text("manager"),
            operation,
            api_version,
            time: v.get("time").and_then(Value::as_str).map(str::to_string),
            subresource: text("subresource"),
            set,
        })
    }
}

/// Decodes `metadata.managedFields`; an absent list is no entries.
pub(crate) fn decode(list: Option<&Value>) -> Result<Vec<Entry>, String> {
    match list {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => {
            let mut out: Vec<Entry> = Vec::with_capacity(items.len());
            for (i, item) in items.iter().enumerate() {
                let e = Entry::from_json(i, item)?;
                // Later duplicates of one identity replace earlier ones, as the decoder's map does.
                out.retain(|o| !o.same_manager(&e));
                out.push(e);
            }
            Ok(out)
        }
        Some(_) => Err("managedFields must be a list".into()),
    }
}

/// A request that sets `managedFields` to `[]` or `[{}]` asks for them to be reset.
pub(crate) fn is_reset(list: Option<&Value>) -> bool {
    match list {
        Some(Value::Array(items)) => {
            items.is_empty() || (items.len() == 1 && items[0].as_object().is_some_and(|m| m.is_empty()))
        }
        _ => false,
    }
}

/// Encodes the entries in the real server's order: Apply before Update, then by time, manager, version.
pub(crate) fn encode(mut entries: Vec<Entry>) -> Option<Value> {
    entries.retain(|e| !e.set.is_empty());
    if entries.is_empty() {
        return None;
    }
    cap_update_managers(&mut entries);
    entries.sort_by(|p, q| {
        (p.operation, &p.time, &p.manager, &p.api_version, &p.subresource).cmp(&(
            q.operation,
            &q.time,
            &q.manager,
            &q.api_version,
            &q.subresource,
        ))
    });
    Some(Value::Array(entries.iter().map(Entry::to_json).collect()))
}

/// Folds the oldest update managers into `ancient-changes` until at most ten remain.
fn cap_update_managers(entries: &mut Vec<Entry>) {
    let updates = entries
        .iter()
        .filter(|e| e.operation == Operation::Update)
        .count();
    if updates <= MAX_UPDATE_MANAGERS {
        return;
    }
    let mut order: Vec<usize> = (0..entries.len())
        .filter(|&i| entries[i].operation == Operation::Update)
        .collect();
    order.sort_by(|&a, &b| entries[a].time.cmp(&entries[b].time));
    let first = order[0];
    let mut bucket = Entry {
        manager: ANCIENT.into(),
        operation: Operation::Update,
        api_version: entries[first].api_version.clone(),
        time: entries[first].time.clone(),
        subresource: String::new(),
        set: entries[first].set.clone(),
    };
    let mut folded = vec![first];
    for &i in &order[1..] {
        if updates - (folded.len() - 1) <= MAX_UPDATE_MANAGERS {
            break;
        }
        bucket.set = bucket.set.union(&entries[i].set);
        bucket.time = entries[i].time.clone();
        folded.push(i);
    }
    let mut i = 0;
    entries.retain(|_| {
        i += 1;
        !folded.contains(&(i - 1))
    });
    match entries.iter_mut().find(|e| e.same_manager(&bucket)) {
        Some(existing) => {
            existing.set = existing.set.union(&bucket.set);
            existing.time = bucket.time;
        }
        None => entries.push(bucket),
    }
}

/// Metadata the server sets, never owned by anyone.
pub(crate) fn strip_meta(set: &Set) -> Set {
    let mut strip = Set::default();
    for path in [vec!["apiVersion"], vec!["kind"], vec!["metadata"]] {
        strip.insert(&fields(&path));
    }
    for f in [
        "name",
        "namespace",
        "creationTimestamp",
        "selfLink",
        "uid",
        "clusterName",
        "generation",
        "managedFields",
        "resourceVersion",
    ] {
        strip.insert(&fields(&["metadata", f]));
    }
    set.difference(&strip)
}

pub(crate) fn fields(names: &[&str]) -> Vec<Pe> {
    names.iter().map(|n| Pe::Field(n.to_string())).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(manager: &str, op: Operation, time: &str) -> Entry {
        let mut set = Set::default();
        set.insert(&fields(&["data", manager]));
        Entry {
            manager: manager.into(),
            operation: op,
            api_version: "v1".into(),
            time: Some(time.into()),
            subresource: String::new(),
            set,
        }
    }

    #[test]
    fn entries_sort_apply_first_then_by_time() {
        let list = encode(vec![
            entry("b", Operation::Update, "2025-01-01T00:00:02Z"),
            entry("a", Operation::Update, "2025-01-01T00:00:03Z"),
            entry("z", Operation::Apply, "2025-01-01T00:00:09Z"),
        ])
        .unwrap();
        let managers: Vec<&str> = list
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["manager"].as_str().unwrap())
            .collect();
        assert_eq!(managers, ["z", "b", "a"]);
        let decoded = decode(Some(&list)).unwrap();
        assert_eq!(decoded.len(), 3);
        assert_eq!(decoded[0].display(), "\"z\"");
        assert_eq!(decoded[1].display(), "\"b\" using v1");
    }

    #[test]
    fn invalid_entries_are_rejected() {
        for (bad, why) in [
            (
                json!([{"manager": "m", "operation": "Patch", "apiVersion": "v1", "fieldsType": "FieldsV1"}]),
                "operation",
            ),
            (
                json!([{"manager": "m", "operation": "Apply", "fieldsType": "FieldsV1"}]),
                "apiVersion",
            ),
            (
                json!([{"manager": "m", "operation": "Apply", "apiVersion": "v1"}]),
                "missing fieldsType",
            ),
            (
                json!([{"manager": "m", "operation": "Apply", "apiVersion": "v1", "fieldsType": "X"}]),
                "invalid fieldsType",
            ),
        ] {
            let err = decode(Some(&bad)).unwrap_err();
            assert!(err.contains(why), "{err}");
        }
        assert!(is_reset(Some(&json!([]))));
        assert!(is_reset(Some(&json!([{}]))));
        assert!(!is_reset(None));
    }

    #[test]
    fn update_managers_are_capped_at_ten() {
        let entries: Vec<Entry> = (0..13)
            .map(|i| {
                entry(
                    &format!("m{i:02}"),
                    Operation::Update,
                    &format!("2025-01-01T00:00:{i:02}Z"),
                )
            })
            .collect();
        let list = encode(entries).unwrap();
        let decoded = decode(Some(&list)).unwrap();
        assert_eq!(decoded.len(), 10);
        let ancient = decoded.iter().find(|e| e.manager == ANCIENT).unwrap();
        assert_eq!(ancient.set.paths().len(), 4, "m00..m03 folded");
        assert_eq!(ancient.time.as_deref(), Some("2025-01-01T00:00:03Z"));
    }
}
