//! Impersonation headers (`kubectl --as`, `--as-group`, `--as-uid`): the requester must be allowed the
//! `impersonate` verb on each user, group, ServiceAccount, uid and extra value it asks for; the request
//! then runs as that identity, for authorization, reviews and the request log alike.
//!
//! Without `enforce_rbac` the simulator authorizes as kube-apiserver with the AlwaysAllow authorizer:
//! everyone may impersonate anyone.

use std::collections::BTreeMap;

use http::HeaderMap;

use super::auth::{AUTHENTICATED, Identity};
use super::error::Error;
use super::rbac::{self, Attributes};
use super::store::Store;

const USER: &str = "impersonate-user";
const GROUP: &str = "impersonate-group";
const UID: &str = "impersonate-uid";
const EXTRA_PREFIX: &str = "impersonate-extra-";
const ANONYMOUS: &str = "system:anonymous";
const UNAUTHENTICATED: &str = "system:unauthenticated";
/// Headers beyond this many impersonation requests are refused rather than checked one by one.
const MAX_REQUESTS: usize = 100;

/// One thing asked to be impersonated, as the authorizer checks it.
struct Ask {
    group: &'static str,
    resource: &'static str,
    subresource: String,
    namespace: String,
    name: String,
}

/// The identity the request runs as: the requester's own, or the impersonated one if allowed.
pub(crate) fn apply(
    store: &Store,
    enforce: bool,
    requester: Identity,
    headers: &HeaderMap,
) -> Result<Identity, Error> {
    let values = |name: &str| -> Vec<String> {
        headers
            .get_all(name)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .map(str::to_owned)
            .collect()
    };
    let user = values(USER).into_iter().find(|u| !u.is_empty());
    let groups = values(GROUP);
    let uid = values(UID).into_iter().find(|u| !u.is_empty());
    let mut extra: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (name, value) in headers {
        if let Some(key) = name.as_str().strip_prefix(EXTRA_PREFIX) {
            let key = percent_decode(key).to_lowercase();
            let value = value.to_str().unwrap_or_default().to_owned();
            extra.entry(key).or_default().push(value);
        }
    }
    let Some(username) = user else {
        if groups.is_empty() && extra.is_empty() && uid.is_none() {
            return Ok(requester);
        }
        return Err(Error::Internal(
            "requested uid, groups or user-extra without impersonating a user".into(),
        ));
    };
    let mut asks = Vec::new();
    let service_account = split_service_account(&username);
    let mut new_groups = Vec::new();
    match service_account {
        Some((ns, name)) => {
            asks.push(ask("", "serviceaccounts", "", ns, name));
            if groups.is_empty() {
                new_groups = vec![
                    "system:serviceaccounts".to_owned(),
                    format!("system:serviceaccounts:{ns}"),
                ];
            }
        }
        None => asks.push(ask("", "users", "", "", &username)),
    }
    for g in &groups {
        asks.push(ask("", "groups", "", "", g));
        new_groups.push(g.clone());
    }
    for (key, vals) in &extra {
        for v in vals {
            asks.push(ask("authentication.k8s.io", "userextras", key, "", v));
        }
    }
    if let Some(uid) = &uid {
        asks.push(ask("authentication.k8s.io", "uids", "", "", uid));
    }
    if asks.len() > MAX_REQUESTS {
        return Err(Error::BadRequest(format!(
            "too many impersonation headers: at most {MAX_REQUESTS}"
        )));
    }
    if enforce {
        for a in &asks {
            let attrs = Attributes {
                verb: "impersonate",
                api_group: a.group,
                resource: a.resource,
                subresource: &a.subresource,
                namespace: &a.namespace,
                name: &a.name,
                path: None,
            };
            let decision = rbac::decide(store, (&requester).into(), &attrs);
            if !decision.allowed {
                return Err(rbac::forbidden(&requester.username, &attrs, &decision.reason));
            }
        }
    }
    let marked = new_groups
        .iter()
        .any(|g| g == AUTHENTICATED || g == UNAUTHENTICATED);
    if groups.is_empty() && username != ANONYMOUS && !marked {
        new_groups.push(AUTHENTICATED.to_owned());
    }
    Ok(Identity {
        username,
        uid: uid.unwrap_or_default(),
        groups: new_groups,
        extra,
    })
}

fn ask(group: &'static str, resource: &'static str, sub: &str, ns: &str, name: &str) -> Ask {
    Ask {
        group,
        resource,
        subresource: sub.to_owned(),
        namespace: ns.to_owned(),
        name: name.to_owned(),
    }
}

/// `system:serviceaccount:<ns>:<name>` into its namespace and name.
fn split_service_account(user: &str) -> Option<(&str, &str)> {
    let (ns, name) = user.strip_prefix("system:serviceaccount:")?.split_once(':')?;
    (!ns.is_empty() && !name.is_empty() && !name.contains(':')).then_some((ns, name))
}

/// Extra keys are percent-encoded in header names (`Impersonate-Extra-example.com%2fscopes`).
fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn service_account_usernames_split_into_namespace_and_name() {
        assert_eq!(
            split_service_account("system:serviceaccount:default:x"),
            Some(("default", "x"))
        );
        for not_sa in [
            "alice",
            "system:serviceaccount:default",
            "system:serviceaccount::x",
        ] {
            assert_eq!(split_service_account(not_sa), None, "{not_sa}");
        }
    }

    #[test]
    fn extra_keys_are_percent_decoded() {
        assert_eq!(percent_decode("example.com%2fscopes"), "example.com/scopes");
        assert_eq!(percent_decode("plain"), "plain");
        assert_eq!(percent_decode("bad%zz"), "bad%zz");
    }
}
