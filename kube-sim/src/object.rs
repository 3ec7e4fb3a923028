//! Stored objects: the compact pre-serialized form the store keeps, plus the time and name rules for metadata.

use std::collections::BTreeMap;
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::{Map, Value};

use super::error::Error;
use super::kinds::{Kind, NameRule};
use super::typed::is_dns1123_label;

/// (namespace, name); the namespace is empty for cluster-scoped kinds.
pub(crate) type Key = (String, String);

/// One stored object version: the JSON bytes served as-is, plus the few fields selectors and tables need,
/// so listing 100k objects never re-parses them.
#[derive(Debug)]
pub(crate) struct Obj {
    pub(crate) key: Key,
    pub(crate) rv: u64,
    pub(crate) uid: String,
    pub(crate) labels: BTreeMap<String, String>,
    /// The kind's selectable field values (see `Kind::fields`), in its order.
    pub(crate) fields: Box<[String]>,
    /// `status.phase` and a Pod's `spec.nodeName`, which the scheduler and namespace lifecycle read.
    pub(crate) phase: Option<String>,
    pub(crate) node_name: Option<String>,
    /// A Service's `spec.clusterIP` (the allocator's view of what is taken).
    pub(crate) cluster_ip: Option<std::net::IpAddr>,
    /// The uids in `metadata.ownerReferences` (the garbage collector's index of dependents).
    pub(crate) owners: Vec<String>,
    /// A plain-map `spec.selector` (Services): which pods it selects, without re-parsing.
    pub(crate) selector: Option<BTreeMap<String, String>>,
    /// The object, `kind` and `apiVersion` first as the real server writes them.
    pub(crate) raw: Bytes,
    /// Length of the `"kind":…,"apiVersion":…,` run after the opening brace, which list items leave out.
    type_len: usize,
}

/// Serializes an object's members with `kind` and `apiVersion` first (Go's TypeMeta order), or only those.
struct TypeFirst<'a> {
    map: &'a Map<String, Value>,
    rest: bool,
}

impl Serialize for TypeFirst<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut out = s.serialize_map(None)?;
        for key in ["kind", "apiVersion"] {
            if let Some(v) = self.map.get(key) {
                out.serialize_entry(key, v)?;
            }
        }
        if self.rest {
            for (k, v) in self
                .map
                .iter()
                .filter(|(k, _)| *k != "kind" && *k != "apiVersion")
            {
                out.serialize_entry(k, v)?;
            }
        }
        out.end()
    }
}

impl Obj {
    /// Freezes a complete object (metadata already filled by the store).
    pub(crate) fn freeze(kind: &Kind, value: &Value) -> Result<Obj, Error> {
        let meta = &value["metadata"];
        let text = |v: &Value| v.as_str().map(str::to_string);
        let labels = meta["labels"]
            .as_object()
            .map(|m| {
                m.iter()
                    .filter_map(|(k, v)| Some((k.clone(), text(v)?)))
                    .collect()
            })
            .unwrap_or_default();
        let internal = |e: serde_json::Error| Error::Internal(e.to_string());
        let empty = Map::new();
        let map = value.as_object().unwrap_or(&empty);
        let raw = serde_json::to_vec(&TypeFirst { map, rest: true }).map_err(internal)?;
        let head = serde_json::to_vec(&TypeFirst { map, rest: false }).map_err(internal)?;
        // `{"kind":…,"apiVersion":…}` → the members plus their trailing comma, when other members follow.
        let members = head.len().saturating_sub(2);
        let type_len = if members > 0 && raw.get(members + 1) == Some(&b',') {
            members + 1
        } else {
            0
        };
        Ok(Obj {
            key: (
                text(&meta["namespace"]).unwrap_or_default(),
                text(&meta["name"]).unwrap_or_default(),
            ),
            rv: meta["resourceVersion"]
                .as_str()
                .and_then(|s| s.parse().ok())
                .unwrap_or_default(),
            uid: text(&meta["uid"]).unwrap_or_default(),
            labels,
            fields: kind.fields.extract(value),
            phase: text(&value["status"]["phase"]),
            node_name: text(&value["spec"]["nodeName"]),
            cluster_ip: value["spec"]["clusterIP"].as_str().and_then(|s| s.parse().ok()),
            owners: meta["ownerReferences"]
                .as_array()
                .map(|refs| refs.iter().filter_map(|r| text(&r["uid"])).collect())
                .unwrap_or_default(),
            selector: value["spec"]["selector"]
                .as_object()
                .filter(|m| !m.is_empty())
                .and_then(|m| m.iter().map(|(k, v)| Some((k.clone(), text(v)?))).collect()),
            raw: Bytes::from(raw),
            type_len,
        })
    }

    /// The object as a JSON value, for writes and per-object rendering.
    pub(crate) fn value(&self) -> Value {
        serde_json::from_slice(&self.raw).unwrap_or(Value::Null)
    }

    /// The object as a list item: without `kind` and `apiVersion`, as the real server's lists carry them.
    pub(crate) fn item(&self) -> [&[u8]; 2] {
        match self.type_len {
            0 => [&self.raw, b""],
            n => [b"{", self.raw.get(1 + n..).unwrap_or_default()],
        }
    }
}

pub(crate) fn now_secs() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or_default()
}

/// Formats unix seconds as RFC 3339 UTC (`2025-01-02T03:04:05Z`), the form Kubernetes uses for metadata times.
pub(crate) fn rfc3339(secs: i64) -> String {
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil-from-days (H. Hinnant): days since 1970-01-01 to y-m-d.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Parses the RFC 3339 UTC form [`rfc3339`] writes (fractional seconds and offsets are not produced here).
pub(crate) fn parse_rfc3339(s: &str) -> Option<i64> {
    let num = |r: std::ops::Range<usize>| s.get(r)?.parse::<i64>().ok();
    let (y, m, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hh, mm, ss) = (num(11..13)?, num(14..16)?, num(17..19)?);
    // Days-from-civil, the inverse of the algorithm above.
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    Some((era * 146_097 + doe - 719_468) * 86_400 + hh * 3600 + mm * 60 + ss)
}

/// kubectl's short age format (`45s`, `3m10s`, `5h`, `12d`).
pub(crate) fn human_age(secs: i64) -> String {
    let s = secs.max(0);
    let (m, h, d) = (s / 60, s / 3600, s / 86_400);
    match s {
        _ if s < 120 => format!("{s}s"),
        _ if s < 600 && s % 60 != 0 => format!("{m}m{}s", s % 60),
        _ if s < 3 * 3600 => format!("{m}m"),
        _ if s < 8 * 3600 && m % 60 != 0 => format!("{h}h{}m", m % 60),
        _ if s < 48 * 3600 => format!("{h}h"),
        _ if s < 8 * 86_400 && h % 24 != 0 => format!("{d}d{}h", h % 24),
        _ if s < 2 * 365 * 86_400 => format!("{d}d"),
        _ if s < 8 * 365 * 86_400 && d % 365 != 0 => format!("{}y{}d", d / 365, d % 365),
        _ => format!("{}y", d / 365),
    }
}

/// Checks a name against the kind's rule, with the real server's messages.
pub(crate) fn validate_name(kind: &Kind, name: &str) -> Result<(), Error> {
    let problem = match kind.names {
        NameRule::PathSegment => (name == "." || name == ".." || name.contains('/') || name.contains('%'))
            .then(|| "may not be '.' or '..' and may not contain '/' or '%'".to_string()),
        NameRule::Label => (!is_dns1123_label(name) || name.len() > 63).then(crate::typed::dns1123_label_msg),
        NameRule::Subdomain => (name.len() > 253 || !name.split('.').all(is_dns1123_label))
            .then(crate::typed::dns1123_subdomain_msg),
    };
    match problem {
        Some(msg) => Err(Error::invalid(
            kind.kind,
            name,
            "metadata.name",
            format!("Invalid value: {name:?}: {msg}"),
        )),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_round_trips() {
        for secs in [0, 951_782_400, 1_700_000_000, 4_102_444_799] {
            assert_eq!(parse_rfc3339(&rfc3339(secs)), Some(secs), "{}", rfc3339(secs));
        }
        assert_eq!(rfc3339(1_700_000_000), "2023-11-14T22:13:20Z");
    }

    #[test]
    fn list_items_leave_out_the_type() {
        let kind = crate::kinds::by_resource("", "v1", "configmaps").unwrap();
        let cm = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {}});
        let obj = Obj::freeze(kind, &cm).unwrap();
        assert!(obj.raw.starts_with(br#"{"kind":"ConfigMap","apiVersion":"v1","#));
        assert_eq!(obj.item().concat(), br#"{"data":{},"metadata":{"name":"c"}}"#);
        let bare = Obj::freeze(kind, &serde_json::json!({"metadata": {"name": "c"}})).unwrap();
        assert_eq!(bare.item().concat(), &bare.raw[..]);
    }

    #[test]
    fn ages_read_like_kubectl() {
        for (secs, want) in [
            (5, "5s"),
            (119, "119s"),
            (190, "3m10s"),
            (3600, "60m"),
            (4 * 3600, "4h"),
            (86_400 * 3, "3d"),
            (86_400 * 800, "2y70d"),
            (86_400 * 365 * 9, "9y"),
        ] {
            assert_eq!(human_age(secs), want);
        }
    }
}
