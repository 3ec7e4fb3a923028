//! Server-side apply and field ownership (`metadata.managedFields`), generic over JSON objects: every
//! create, update and patch records what its manager changed; apply merges a configuration, drops what the
//! same manager stopped applying, and answers 409 when it would change another manager's field.

mod fieldset;
mod managed;
mod merge;
mod schema;

use serde_json::Value;

use super::error::Error;
use super::kinds::Kind;
use super::object::{now_secs, rfc3339};
use fieldset::{Set, path_string};
use managed::{Entry, Operation};
use merge::{Comparison, compare, config_set};
use schema::{BuiltIn, Schema, Untyped};

/// Who writes, as the request names it (`fieldManager`, else the User-Agent's product).
#[derive(Debug, Clone)]
pub(crate) struct Writer {
    pub(crate) manager: String,
    /// `status` for writes to the status subresource.
    pub(crate) subresource: Option<&'static str>,
}

/// The longest `fieldManager` the real server accepts.
pub(crate) const MAX_MANAGER_LEN: usize = 128;

fn schema_for(kind: &Kind) -> &'static dyn Schema {
    if kind.custom.is_some() { &Untyped } else { &BuiltIn }
}

/// The fields a write may own: metadata the server sets is never owned, and the main resource and the
/// status subresource each leave the other's part alone (the strategies' reset fields).
fn ownable(kind: &Kind, writer: &Writer, set: &Set) -> Set {
    let mut set = managed::strip_meta(set);
    let status = managed::fields(&["status"]);
    if writer.subresource == Some("status") {
        set = set.only(&status[0]);
    } else if kind.status {
        set.remove_tree(&status);
    }
    set
}

fn entry(kind: &Kind, writer: &Writer, operation: Operation, set: Set, time: Option<String>) -> Entry {
    Entry {
        manager: writer.manager.clone(),
        operation,
        api_version: kind.api_version(),
        time,
        subresource: writer.subresource.unwrap_or_default().to_string(),
        set,
    }
}

fn take_managed(obj: &mut Value) -> Option<Value> {
    obj.get_mut("metadata")?.as_object_mut()?.remove("managedFields")
}

fn put_managed(obj: &mut Value, entries: Vec<Entry>) {
    if let (Some(list), Some(meta)) = (managed::encode(entries), obj["metadata"].as_object_mut()) {
        meta.insert("managedFields".into(), list);
    }
}

/// Records a create or update (`old` is `None` for a create) in `new`'s managedFields. A request may set
/// managedFields itself (kept when valid; `[]` or `[{}]` resets them); objects without any are not
/// tracked again until applied to, as the real server.
pub(crate) fn track_update(kind: &Kind, old: Option<&Value>, new: &mut Value, writer: &Writer) {
    let schema = schema_for(kind);
    let requested = take_managed(new);
    let mut old_clean = old.cloned().unwrap_or_else(|| Value::Object(Default::default()));
    let live = take_managed(&mut old_clean);
    let live_entries = || managed::decode(live.as_ref()).unwrap_or_default();
    let mut entries = if writer.subresource.is_some() {
        live_entries()
    } else if managed::is_reset(requested.as_ref()) {
        Vec::new()
    } else {
        match managed::decode(requested.as_ref()) {
            Ok(e) if !e.is_empty() => e,
            _ => live_entries(),
        }
    };
    if entries.is_empty() && old.is_some() {
        return;
    }
    let cmp = compare(schema, &old_clean, new);
    let changed = ownable(kind, writer, &cmp.changed());
    let removed = ownable(kind, writer, &cmp.removed);
    let me = entry(kind, writer, Operation::Update, changed, None);
    for e in entries.iter_mut() {
        e.set = e.set.difference(&removed).difference(&me.set);
    }
    if !me.set.is_empty() {
        let now = Some(rfc3339(now_secs()));
        match entries.iter_mut().find(|e| e.same_manager(&me)) {
            Some(previous) => {
                previous.set = previous.set.union(&me.set);
                previous.time = now;
            }
            None => entries.push(Entry { time: now, ..me }),
        }
    }
    put_managed(new, entries);
}

/// Server-side apply of `config` onto `live` (`None`: the object does not exist yet). Returns the merged
/// object carrying its new managedFields, or 409 listing the fields other managers own.
pub(crate) fn apply(
    kind: &Kind,
    live: Option<&Value>,
    config: &Value,
    writer: &Writer,
    force: bool,
) -> Result<Value, Error> {
    let schema = schema_for(kind);
    if !config.is_object() {
        return Err(Error::BadRequest(
            "the applied configuration must be an object".into(),
        ));
    }
    let patch_version = config["apiVersion"].as_str().unwrap_or_default();
    if patch_version != kind.api_version() {
        return Err(Error::BadRequest(format!(
            "Incorrect version specified in apply patch. Specified patch version: {patch_version}, expected: {}",
            kind.api_version()
        )));
    }
    if !config["metadata"]["managedFields"].is_null() {
        return Err(Error::BadRequest("metadata.managedFields must be nil".into()));
    }
    let errs = merge::check_config(schema, config);
    if !errs.is_empty() {
        let meta = &config["metadata"];
        let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
        let detail = match errs.as_slice() {
            [one] => one.clone(),
            many => format!("errors:\n  {}", many.join("\n  ")),
        };
        // Not a Status error in the real server: a 500 without a reason.
        return Err(Error::Unclassified(format!(
            "failed to create typed patch object ({}/{}; {}/{}, Kind={}): {detail}",
            text(&meta["namespace"]),
            text(&meta["name"]),
            kind.group,
            kind.version,
            text(&config["kind"]),
        )));
    }
    let mut live_clean = live.cloned().unwrap_or_else(|| Value::Object(Default::default()));
    let mut entries = managed::decode(take_managed(&mut live_clean).as_ref()).unwrap_or_default();
    let mut merged = merge::merge(schema, Some(&live_clean), config);
    let me = entry(
        kind,
        writer,
        Operation::Apply,
        ownable(kind, writer, &config_set(schema, config)),
        None,
    );
    let position = entries.iter().position(|e| e.same_manager(&me));
    let last = position.map(|i| entries.remove(i));
    // Prune: what this manager applied before and nobody owns now.
    if let Some(last) = &last {
        let owned = entries.iter().fold(me.set.clone(), |acc, e| acc.union(&e.set));
        merge::prune(schema, &mut merged, &last.set, &owned);
    }
    let cmp: Comparison = compare(schema, &live_clean, &merged);
    let changed = ownable(kind, writer, &cmp.changed());
    // `kubectl apply --server-side` over `kubectl apply`: fields of the last-applied annotation may be
    // taken without a conflict (the upgrade path from client-side apply).
    let allowed = if writer.manager == KUBECTL {
        last_applied(&live_clean)
            .map(|v| config_set(schema, &v))
            .unwrap_or_default()
    } else {
        Set::default()
    };
    let mut conflicts = Vec::new();
    for e in &entries {
        for path in e.set.intersection(&changed).paths() {
            if !allowed.has(&path) {
                conflicts.push((e.display(), path_string(&path)));
            }
        }
    }
    if !conflicts.is_empty() && !force {
        return Err(conflict_error(conflicts));
    }
    let removed = ownable(kind, writer, &cmp.removed);
    for e in entries.iter_mut() {
        e.set = e.set.difference(&changed).difference(&removed);
    }
    let time = if merged != live_clean || live.is_none() {
        Some(rfc3339(now_secs()))
    } else {
        last.and_then(|l| l.time)
    };
    entries.push(Entry { time, ..me });
    put_managed(&mut merged, entries);
    if writer.manager == KUBECTL && last_applied(&live_clean).is_some() {
        sync_last_applied(&mut merged, config);
    }
    Ok(merged)
}

/// The manager name `kubectl apply --server-side` uses; only it upgrades from client-side apply.
const KUBECTL: &str = "kubectl";
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

fn last_applied(obj: &Value) -> Option<Value> {
    let text = obj["metadata"]["annotations"][LAST_APPLIED].as_str()?;
    serde_json::from_str(text).ok()
}

/// Keeps the client-side apply annotation in step with what `kubectl` applied server-side.
fn sync_last_applied(merged: &mut Value, config: &Value) {
    let mut applied = config.clone();
    if let Some(annotations) = applied["metadata"]["annotations"].as_object_mut() {
        annotations.remove(LAST_APPLIED);
        if annotations.is_empty() {
            applied["metadata"]
                .as_object_mut()
                .map(|m| m.remove("annotations"));
        }
    }
    if let Some(annotations) = merged["metadata"]["annotations"].as_object_mut() {
        annotations.insert(LAST_APPLIED.into(), Value::String(format!("{applied}\n")));
    }
}

/// The real server's 409: `Apply failed with 1 conflict: conflict with "m" using v1: .data.k`.
fn conflict_error(mut conflicts: Vec<(String, String)>) -> Error {
    conflicts.sort();
    let message = if let [(manager, path)] = conflicts.as_slice() {
        format!("Apply failed with 1 conflict: conflict with {manager}: {path}")
    } else {
        let mut lines = Vec::new();
        let mut current = None;
        for (manager, path) in &conflicts {
            if current != Some(manager) {
                lines.push(format!("conflicts with {manager}:"));
                current = Some(manager);
            }
            lines.push(format!("- {path}"));
        }
        format!(
            "Apply failed with {} conflicts: {}",
            conflicts.len(),
            lines.join("\n")
        )
    };
    Error::ApplyConflict {
        message,
        causes: conflicts
            .into_iter()
            .map(|(manager, field)| (format!("conflict with {manager}"), field))
            .collect(),
    }
}

#[cfg(test)]
#[path = "ssa_tests.rs"]
mod tests;
