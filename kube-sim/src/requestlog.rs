//! Opt-in request log: one JSON line per resource request naming who asked for what, in RBAC's terms
//! (user, verb, API group, resource, subresource, namespace, name). Off unless a file is given, so
//! normal runs keep nothing; on, it is appended to disk and never held in memory.
//!
//! `tests/e2e/test_rbac.py` derives from it the permissions meshd and meshctl use and compares them
//! with the RBAC the Helm chart grants.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use http::Method;
use parking_lot::Mutex;
use serde::Serialize;

use super::auth::Identity;
use super::kinds::Kind;
use super::routes::Target;

/// An append-only JSON-lines file shared by every simulated cluster of a process.
#[derive(Debug)]
pub struct RequestLog {
    file: Mutex<File>,
    /// A failed write is reported once, not per request.
    failed: AtomicBool,
}

/// One request, as an RBAC rule would match it.
#[derive(Debug, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Entry<'a> {
    pub(crate) cluster: &'a str,
    pub(crate) user: &'a str,
    pub(crate) groups: &'a [String],
    pub(crate) verb: &'static str,
    pub(crate) api_group: &'static str,
    pub(crate) resource: &'static str,
    pub(crate) subresource: &'a str,
    pub(crate) namespace: &'a str,
    pub(crate) name: &'a str,
}

impl RequestLog {
    /// Opens (creating or appending to) `path`.
    pub fn open(path: &Path) -> std::io::Result<RequestLog> {
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        Ok(RequestLog {
            file: Mutex::new(file),
            failed: AtomicBool::new(false),
        })
    }

    /// Appends one request.
    pub(crate) fn record(&self, entry: &Entry<'_>) {
        let mut line = serde_json::to_vec(entry).unwrap_or_default();
        line.push(b'\n');
        let written = self.file.lock().write_all(&line);
        if let Err(e) = written
            && !self.failed.swap(true, Ordering::Relaxed)
        {
            tracing::warn!(error = %e, "cannot write the sandbox request log; later failures are not reported");
        }
    }
}

/// The RBAC verb of a request on `target` (a subresource is authorised by its HTTP method).
pub(crate) fn rbac_verb(method: &Method, target: &Target, watch: bool) -> &'static str {
    match (method, target.name.is_some()) {
        (&Method::GET | &Method::HEAD, false) if watch => "watch",
        (&Method::GET | &Method::HEAD, false) => "list",
        (&Method::GET | &Method::HEAD, true) => "get",
        (&Method::POST, _) => "create",
        (&Method::PUT, _) => "update",
        (&Method::PATCH, _) => "patch",
        (&Method::DELETE, false) => "deletecollection",
        (&Method::DELETE, true) => "delete",
        _ => "unknown",
    }
}

/// The entry for `identity`'s `verb` on `target` in `cluster`.
pub(crate) fn entry<'a>(
    cluster: &'a str,
    identity: &'a Identity,
    verb: &'static str,
    kind: &'static Kind,
    target: &'a Target,
) -> Entry<'a> {
    Entry {
        cluster,
        user: &identity.username,
        groups: &identity.groups,
        verb,
        api_group: kind.group,
        resource: kind.plural,
        subresource: target.sub.as_deref().unwrap_or_default(),
        namespace: target.namespace.as_deref().unwrap_or_default(),
        name: target.name.as_deref().unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kinds;

    fn target(name: Option<&str>, sub: Option<&str>) -> Target {
        Target {
            kind: kinds::by_resource("", "v1", "secrets").unwrap(),
            namespace: Some("istio-system".into()),
            name: name.map(str::to_owned),
            sub: sub.map(str::to_owned),
        }
    }

    #[test]
    fn verbs_follow_kubernetes_authorization() {
        let cases = [
            (Method::GET, None, None, false, "list"),
            (Method::GET, None, None, true, "watch"),
            (Method::GET, Some("a"), None, false, "get"),
            (Method::POST, None, None, false, "create"),
            (Method::POST, Some("a"), Some("token"), false, "create"),
            (Method::PUT, Some("a"), None, false, "update"),
            (Method::PUT, Some("a"), Some("status"), false, "update"),
            (Method::PATCH, Some("a"), None, false, "patch"),
            (Method::DELETE, Some("a"), None, false, "delete"),
            (Method::DELETE, None, None, false, "deletecollection"),
        ];
        for (method, name, sub, watch, want) in cases {
            assert_eq!(
                rbac_verb(&method, &target(name, sub), watch),
                want,
                "{method} {name:?} {sub:?}"
            );
        }
    }

    #[test]
    fn entries_are_appended_as_json_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("requests.jsonl");
        let log = RequestLog::open(&path).unwrap();
        let id = Identity {
            username: "system:serviceaccount:istio-system:meshd".into(),
            groups: vec!["system:authenticated".into()],
            ..Identity::default()
        };
        let t = target(Some("istio-ca-secret"), None);
        log.record(&entry("cluster1", &id, "get", t.kind, &t));
        log.record(&entry("cluster1", &id, "update", t.kind, &t));
        let lines: Vec<serde_json::Value> = std::fs::read_to_string(&path)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0]["user"], "system:serviceaccount:istio-system:meshd");
        assert_eq!(lines[0]["apiGroup"], "");
        assert_eq!(lines[0]["resource"], "secrets");
        assert_eq!(lines[0]["namespace"], "istio-system");
        assert_eq!(lines[1]["verb"], "update");
        assert_eq!(lines[1]["name"], "istio-ca-secret");
    }
}
