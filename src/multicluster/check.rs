//! ★ `meshctl remote-clusters --check` (`/debug/clusterz/check`): whether each remote cluster works, one
//! line per check, as Solo's `meshctl check` and `linkerd multicluster check` do (istioctl has none).
//! meshd runs the checks itself, with each remote's own credentials, which never leave it.
//!
//! Per running remote: sync state, age of its last watch event, expiry of its kubeconfig's credentials
//! (a bearer token's JWT `exp`, a client certificate's notAfter), the RBAC it grants against [`NEEDED`]
//! (one SelfSubjectAccessReview per verb, asked of the remote), and the endpoints served from it while it
//! is not synced (stale). Per network gateway: its DNS name resolves, and a TCP connection to its address
//! and port succeeds within [`CONNECT_TIMEOUT`]. The verdicts are pure functions (`check_tests.rs`).

use std::{
    collections::BTreeSet,
    net::SocketAddr,
    time::{Duration, SystemTime},
};

use axum::{Json, routing::get};
use base64::Engine;
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};
use kube::{Api, api::PostParams};
use serde::{Deserialize, Serialize};

use super::{
    kubeconfig::{self, InsecureOption},
    stale::Staleness,
    status::{Clusters, SyncStatus},
};
use crate::{
    admin,
    aggregate::{MeshSnapshot, Snapshots},
    model::{NetworkGateway, ShardKey, StaleAction},
};

/// How long a gateway may take to accept a TCP connection.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// How long the reviews of one remote may take in all.
const REVIEW_TIMEOUT: Duration = Duration::from_secs(10);
/// Credentials expiring sooner than this are a warning.
pub const EXPIRY_WARNING: Duration = Duration::from_secs(7 * 24 * 3600);

/// A permission meshd needs in every remote cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Permission {
    /// API group (`""` for core).
    pub group: &'static str,
    /// Resource (plural).
    pub resource: &'static str,
    /// Verbs.
    pub verbs: &'static [&'static str],
}

const READ: &[&str] = &["list", "watch"];

/// What meshd needs in a remote: read what its registry watches, review tokens of its workloads, keep
/// `istio-ca-root-cert` in its namespaces (the leader), and serve a gateway there its `credentialName`
/// certificate (watch that Secret by name, ask a SubjectAccessReview first; istiod's reader ClusterRole
/// grants both too). `meshctl add-cluster` grants exactly this; the Helm chart's `remote` profile grants
/// the same (tests/e2e/test_rbac.py).
pub const NEEDED: &[Permission] = &[
    Permission {
        group: "",
        resource: "namespaces",
        verbs: READ,
    },
    Permission {
        group: "",
        resource: "services",
        verbs: READ,
    },
    Permission {
        group: "",
        resource: "pods",
        verbs: READ,
    },
    Permission {
        group: "",
        resource: "nodes",
        verbs: READ,
    },
    Permission {
        group: "discovery.k8s.io",
        resource: "endpointslices",
        verbs: READ,
    },
    Permission {
        group: "authentication.k8s.io",
        resource: "tokenreviews",
        verbs: &["create"],
    },
    Permission {
        group: "",
        resource: "configmaps",
        verbs: &["list", "watch", "create", "update"],
    },
    Permission {
        group: "",
        resource: "secrets",
        verbs: READ,
    },
    Permission {
        group: "authorization.k8s.io",
        resource: "subjectaccessreviews",
        verbs: &["create"],
    },
];

/// A check's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// Fine.
    Ok,
    /// Works now, needs attention soon (credentials about to expire, no event yet).
    Warning,
    /// A problem: `--check` exits non-zero.
    Fail,
}

/// One line of the check.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckRow {
    /// The remote cluster, or the gateway's (`-` for a meshNetworks gateway).
    pub cluster: String,
    /// `sync`, `last event`, `credentials`, `rbac`, `stale endpoints`, `gateway`.
    pub check: String,
    /// The verdict.
    pub result: Outcome,
    /// What was found, in words.
    pub detail: String,
}

fn row(cluster: &str, check: &str, result: Outcome, detail: String) -> CheckRow {
    CheckRow {
        cluster: cluster.to_owned(),
        check: check.to_owned(),
        result,
        detail,
    }
}

/// Adds `/debug/clusterz/check`.
pub fn routes(debug: admin::Debug, clusters: Clusters, snapshots: Snapshots) -> admin::Debug {
    debug.route(
        "/debug/clusterz/check",
        "checks every remote cluster (sync, credentials, RBAC, gateways, stale endpoints); slow",
        get(move || {
            let (clusters, snapshots) = (clusters.clone(), snapshots.clone());
            async move { Json(run(&clusters, &snapshots.load()).await) }
        }),
    )
}

/// Runs every check: the remotes' (in table order), then the gateways'.
pub async fn run(clusters: &Clusters, snap: &MeshSnapshot) -> Vec<CheckRow> {
    let now = SystemTime::now();
    let remotes = clusters.remotes().into_iter().map(|r| async move {
        let denied = match &r.client {
            Some(client) => tokio::time::timeout(REVIEW_TIMEOUT, denied(client))
                .await
                .unwrap_or_else(|_| Err(format!("no answer within {REVIEW_TIMEOUT:?}"))),
            None => Err("no client (its kubeconfig was refused)".into()),
        };
        let healthy = r.status == SyncStatus::Synced && r.last_error.is_none();
        vec![
            sync_row(&r.id, &r.status, r.last_error.as_deref()),
            event_row(&r.id, r.last_event, now),
            credentials_row(&r.id, &r.credentials, now),
            rbac_row(&r.id, &denied),
            stale_row(
                &r.id,
                healthy,
                endpoints_of(snap, &r.id),
                r.staleness.as_ref(),
                now,
            ),
        ]
    });
    let gateways = snap.gateways.iter().map(|g| async move {
        let addr = SocketAddr::new(g.address, g.port);
        let reached = tokio::time::timeout(CONNECT_TIMEOUT, tokio::net::TcpStream::connect(addr))
            .await
            .map_err(|_| format!("no answer within {CONNECT_TIMEOUT:?}"))
            .and_then(|r| r.map(drop).map_err(|e| e.to_string()));
        gateway_row(g, &reached)
    });
    let names = snap.gateway_hostnames.iter().map(|name| async move {
        let found = tokio::net::lookup_host((&**name, 0))
            .await
            .map(|addrs| addrs.map(|a| a.ip()).collect::<BTreeSet<_>>())
            .map_err(|e| e.to_string());
        name_row(name, &found)
    });
    let mut rows: Vec<CheckRow> = futures::future::join_all(remotes)
        .await
        .into_iter()
        .flatten()
        .collect();
    rows.extend(futures::future::join_all(names).await);
    rows.extend(futures::future::join_all(gateways).await);
    rows
}

/// The endpoints the latest snapshot serves from cluster `id`'s registry.
fn endpoints_of(snap: &MeshSnapshot, id: &str) -> usize {
    let shard = ShardKey::kubernetes(crate::model::ClusterId::from(id));
    snap.endpoints
        .values()
        .filter_map(|s| s.shards.get(&shard))
        .map(|eps| eps.len())
        .sum()
}

/// The `verb resource` pairs of [`NEEDED`] the remote denies its own credentials.
async fn denied(client: &kube::Client) -> Result<Vec<String>, String> {
    let api: Api<SelfSubjectAccessReview> = Api::all(client.clone());
    let asks = NEEDED.iter().flat_map(|p| p.verbs.iter().map(move |v| (p, *v)));
    let answers = futures::future::join_all(asks.map(|(p, verb)| {
        let api = api.clone();
        async move {
            let review = SelfSubjectAccessReview {
                spec: SelfSubjectAccessReviewSpec {
                    resource_attributes: Some(ResourceAttributes {
                        group: Some(p.group.into()),
                        resource: Some(p.resource.into()),
                        verb: Some(verb.into()),
                        ..Default::default()
                    }),
                    ..Default::default()
                },
                ..Default::default()
            };
            let answer = api.create(&PostParams::default(), &review).await;
            (permission_name(p, verb), answer)
        }
    }))
    .await;
    let mut missing = Vec::new();
    for (name, answer) in answers {
        let allowed = answer
            .map_err(|e| format!("asking for {name}: {e}"))?
            .status
            .is_some_and(|s| s.allowed);
        if !allowed {
            missing.push(name);
        }
    }
    Ok(missing)
}

/// `verb resource[.group]`, as `kubectl auth can-i` spells it.
fn permission_name(p: &Permission, verb: &str) -> String {
    match p.group {
        "" => format!("{verb} {}", p.resource),
        g => format!("{verb} {}.{g}", p.resource),
    }
}

/// The sync line: only synced and not failing passes.
pub fn sync_row(id: &str, status: &SyncStatus, last_error: Option<&str>) -> CheckRow {
    let (result, detail) = match (status, last_error) {
        (SyncStatus::Synced, None) => (Outcome::Ok, "synced".to_owned()),
        (SyncStatus::Synced, Some(e)) => (
            Outcome::Fail,
            format!("synced once, failing now (its last synced state is served): {e}"),
        ),
        (other, e) => (
            Outcome::Fail,
            format!(
                "not synced: {other}{}",
                e.map(|e| format!("; last error: {e}")).unwrap_or_default()
            ),
        ),
    };
    row(id, "sync", result, detail)
}

/// The last-event line: informational once an event came.
pub fn event_row(id: &str, last: Option<SystemTime>, now: SystemTime) -> CheckRow {
    match last {
        Some(t) => row(
            id,
            "last event",
            Outcome::Ok,
            format!("{} ago", ago(now.duration_since(t).unwrap_or_default())),
        ),
        None => row(
            id,
            "last event",
            Outcome::Warning,
            "no watch event received yet".into(),
        ),
    }
}

fn ago(d: Duration) -> humantime::FormattedDuration {
    humantime::format_duration(Duration::from_secs(d.as_secs()))
}

/// What a kubeconfig authenticates with, as far as its expiry goes (never the secret itself).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Credentials {
    /// A bearer token; its JWT `exp`, if it is a JWT that has one.
    Token(Option<SystemTime>),
    /// A client certificate's notAfter.
    Certificate(SystemTime),
    /// Something whose expiry the kubeconfig does not say (OIDC, exec, a token file, none).
    Unknown(&'static str),
    /// Not readable: the reason.
    Unreadable(String),
}

/// Reads what `kubeconfig`'s user authenticates with (after the same sanitising as the client's).
pub fn credentials(bytes: &[u8], allowed: &BTreeSet<InsecureOption>) -> Credentials {
    let kc = match kubeconfig::sanitize(bytes, allowed) {
        Ok(kc) => kc,
        Err(e) => return Credentials::Unreadable(e.to_string()),
    };
    let Some(user) = kc.auth_infos.first().and_then(|u| u.auth_info.as_ref()) else {
        return Credentials::Unknown("no user");
    };
    // kube-rs keeps the token as a secret string; the user's serialisation is the one way to read it.
    let token = serde_json::to_value(user)
        .ok()
        .and_then(|u| u.get("token")?.as_str().map(str::to_owned));
    if let Some(token) = token {
        return Credentials::Token(jwt_expiry(&token));
    }
    if let Some(data) = &user.client_certificate_data {
        return certificate_expiry(data).map_or_else(Credentials::Unreadable, Credentials::Certificate);
    }
    Credentials::Unknown(if user.auth_provider.is_some() {
        "an auth-provider"
    } else if user.exec.is_some() {
        "an exec plugin"
    } else if user.token_file.is_some() {
        "a token file"
    } else {
        "no token or client certificate"
    })
}

/// A JWT's `exp` (unverified: only to tell when the remote will refuse it).
fn jwt_expiry(token: &str) -> Option<SystemTime> {
    let payload = token.split('.').nth(1)?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload.trim_end_matches('='))
        .ok()?;
    let claims: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    let exp = claims.get("exp")?.as_u64()?;
    SystemTime::UNIX_EPOCH.checked_add(Duration::from_secs(exp))
}

/// The notAfter of the first certificate in base64 PEM `data`.
fn certificate_expiry(data: &str) -> Result<SystemTime, String> {
    use x509_parser::prelude::FromDer;
    let pem = base64::engine::general_purpose::STANDARD
        .decode(data.trim())
        .map_err(|e| format!("client-certificate-data is not base64: {e}"))?;
    let (_, block) = x509_parser::pem::parse_x509_pem(&pem)
        .map_err(|e| format!("client-certificate-data is not a PEM certificate: {e}"))?;
    let (_, cert) = x509_parser::certificate::X509Certificate::from_der(&block.contents)
        .map_err(|e| format!("client certificate does not parse: {e}"))?;
    let secs = u64::try_from(cert.validity().not_after.timestamp()).unwrap_or_default();
    Ok(SystemTime::UNIX_EPOCH + Duration::from_secs(secs))
}

/// The credentials line: expired fails, expiring within [`EXPIRY_WARNING`] warns.
pub fn credentials_row(id: &str, credentials: &Credentials, now: SystemTime) -> CheckRow {
    let expiry = |what: &str, at: SystemTime| {
        let when = humantime::format_rfc3339_seconds(at);
        match at.duration_since(now) {
            Err(past) => (
                Outcome::Fail,
                format!("{what} expired at {when} ({} ago)", ago(past.duration())),
            ),
            Ok(left) if left < EXPIRY_WARNING => (
                Outcome::Warning,
                format!("{what} expires at {when} (in {})", ago(left)),
            ),
            Ok(left) => (
                Outcome::Ok,
                format!("{what} expires at {when} (in {})", ago(left)),
            ),
        }
    };
    let (result, detail) = match credentials {
        Credentials::Token(Some(at)) => expiry("bearer token", *at),
        Credentials::Token(None) => (Outcome::Ok, "bearer token with no expiry".into()),
        Credentials::Certificate(at) => expiry("client certificate", *at),
        Credentials::Unknown(what) => (
            Outcome::Ok,
            format!("authenticates with {what}: expiry not known from the kubeconfig"),
        ),
        Credentials::Unreadable(e) => (Outcome::Fail, format!("kubeconfig unusable: {e}")),
    };
    row(id, "credentials", result, detail)
}

/// The RBAC line, from the permissions the remote denied (or why it could not be asked).
pub fn rbac_row(id: &str, denied: &Result<Vec<String>, String>) -> CheckRow {
    let total: usize = NEEDED.iter().map(|p| p.verbs.len()).sum();
    let (result, detail) = match denied {
        Ok(d) if d.is_empty() => (Outcome::Ok, format!("grants all {total} permissions meshd needs")),
        Ok(d) => (
            Outcome::Fail,
            format!(
                "missing {} of {total} permissions meshd needs: {} (meshctl add-cluster or the chart's remote profile grants them)",
                d.len(),
                d.join(", ")
            ),
        ),
        Err(e) => (Outcome::Fail, format!("cannot review its permissions: {e}")),
    };
    row(id, "rbac", result, detail)
}

/// The stale-endpoints line: endpoints still served from a remote that is not synced and healthy. Its
/// stale-remotes policy ([`super::stale`]) in force softens it: dropped endpoints are not served (ok),
/// deprioritised ones only when nothing else is healthy (warning).
pub fn stale_row(
    id: &str,
    healthy: bool,
    endpoints: usize,
    staleness: Option<&Staleness>,
    now: SystemTime,
) -> CheckRow {
    let since = staleness
        .and_then(|s| s.unreachable_since)
        .map(|t| {
            format!(
                "; its API server unreachable for {}",
                ago(now.duration_since(t).unwrap_or_default())
            )
        })
        .unwrap_or_default();
    let (result, detail) = match (healthy, endpoints, staleness.and_then(Staleness::enforced)) {
        (true, n, _) => (Outcome::Ok, format!("none ({n} endpoints, all current)")),
        (false, 0, _) => (Outcome::Ok, "none (no endpoints served from it)".into()),
        (false, n, Some(StaleAction::Drop)) => (
            Outcome::Ok,
            format!("{n} endpoints of its last synced state, not served (stale policy: drop){since}"),
        ),
        (false, n, Some(_)) => (
            Outcome::Warning,
            format!(
                "{n} endpoints of its last synced state, served behind every other endpoint (stale policy: deprioritize){since}"
            ),
        ),
        (false, n, None) => (
            Outcome::Fail,
            format!("{n} endpoints served from its last synced state, which may be out of date{since}"),
        ),
    };
    row(id, "stale endpoints", result, detail)
}

/// A gateway's line, from whether it accepted a TCP connection.
pub fn gateway_row(g: &NetworkGateway, reached: &Result<(), String>) -> CheckRow {
    let name = g
        .hostname
        .as_deref()
        .map(|h| format!(" ({h})"))
        .unwrap_or_default();
    let target = format!(
        "network {} gateway {}{name}",
        g.network,
        SocketAddr::new(g.address, g.port)
    );
    let (result, detail) = match reached {
        Ok(()) => (Outcome::Ok, format!("{target} accepts connections")),
        Err(e) => (Outcome::Fail, format!("{target} unreachable from meshd: {e}")),
    };
    row(g.cluster.as_deref().unwrap_or("-"), "gateway", result, detail)
}

/// A gateway DNS name's line, from what it resolved to.
pub fn name_row(name: &str, found: &Result<BTreeSet<std::net::IpAddr>, String>) -> CheckRow {
    let (result, detail) = match found {
        Ok(ips) if !ips.is_empty() => (
            Outcome::Ok,
            format!(
                "gateway name {name} resolves to {}",
                ips.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
            ),
        ),
        Ok(_) => (
            Outcome::Fail,
            format!("gateway name {name} resolves to no address"),
        ),
        Err(e) => (
            Outcome::Fail,
            format!("gateway name {name} does not resolve: {e}"),
        ),
    };
    row("-", "gateway", result, detail)
}

#[cfg(test)]
#[path = "check_tests.rs"]
mod tests;
