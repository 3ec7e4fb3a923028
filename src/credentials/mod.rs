//! Gateway certificates (issue 32): the Kubernetes Secrets Gateways name in `credentialName`, served
//! over SDS to the gateway proxies that may read them (istiod's `pilot/pkg/credentials/kube` and
//! `xds/sds.go`).
//!
//! Who may read (`filterAuthorizedResources`): only a caller with a verified identity (a 15012 stream);
//! only Secrets in that identity's namespace; the certificate and key only when a SubjectAccessReview
//! in the proxy's cluster says its service account may `list secrets` there (cached: a grant 5
//! minutes, a refusal 1 minute), a `-cacert` CA always (public). Where from: the proxy's cluster
//! (`CLUSTER_ID`; remotes through the secret controller's clients), by a watch of that one Secret
//! (`metadata.name` field selector), started the first time an allowed proxy asks for a name some
//! Gateway references and stopped once no Gateway does: meshd never lists every Secret, and a change
//! to any other Secret wakes nothing. A change to a watched one bumps [`Credentials`]' version, and
//! every SDS stream re-sends what changed for it. Secret data is never logged or shown: errors name
//! keys, never values, and `SecretData`'s `Debug` is redacted.

pub mod extract;

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::Arc,
    time::Duration,
};

use futures::{StreamExt, future::BoxFuture};
use k8s_openapi::api::{
    authorization::v1::{ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec},
    core::v1::Secret,
};
use kube::{Api, api::PostParams, runtime::watcher::Event};
use parking_lot::Mutex;
use tokio::{sync::watch, time::Instant};
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

pub use extract::{ExtractError, SecretData};

use crate::{
    auth::token::ClusterClients,
    drain::Tasks,
    envoy::{Mesh, Resource, sds},
    istio::{Kind, Spec},
    xds::{SecretRequest, SecretSource},
};

/// How long a SubjectAccessReview's grant is trusted (istiod: 5 minutes).
const GRANT_TTL: Duration = Duration::from_secs(300);
/// How long a refusal is (istiod: 1 minute).
const REFUSAL_TTL: Duration = Duration::from_secs(60);
/// Longest an SDS answer waits for a Secret's first listing.
const FIRST_LISTING: Duration = Duration::from_secs(5);

/// A service account in a namespace of a cluster: what a SubjectAccessReview grant is for.
type Grantee = (String, String, String);

/// One watched Secret.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Key {
    cluster: String,
    namespace: String,
    name: String,
}

/// What a watch knows of its Secret.
#[derive(Debug, Clone, PartialEq)]
enum State {
    /// Not listed yet.
    Pending,
    /// Listed: there is no such Secret.
    Absent,
    /// Its data (the keys certificates use).
    Present(Arc<SecretData>),
}

struct Watch {
    state: State,
    stop: CancellationToken,
}

/// The gateway certificates meshd serves (see the module doc). Cheap to clone.
#[derive(Clone)]
pub struct Credentials {
    inner: Arc<Inner>,
}

struct Inner {
    clients: Arc<dyn ClusterClients>,
    /// The cluster of a proxy that names none.
    config_cluster: String,
    watch_timeout: u32,
    tasks: Tasks,
    watches: Mutex<BTreeMap<Key, Watch>>,
    version: watch::Sender<u64>,
    /// Grants and refusals, with when they were learned.
    grants: Mutex<BTreeMap<Grantee, (bool, Instant)>>,
}

impl Credentials {
    /// Credentials read with `clients` (an absent `CLUSTER_ID` is `config_cluster`), watches on `tasks`.
    pub fn new(
        clients: Arc<dyn ClusterClients>,
        config_cluster: &str,
        watch_timeout: u32,
        tasks: Tasks,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                clients,
                config_cluster: config_cluster.to_owned(),
                watch_timeout,
                tasks,
                watches: Mutex::new(BTreeMap::new()),
                version: watch::channel(0).0,
                grants: Mutex::new(BTreeMap::new()),
            }),
        }
    }

    /// Stops the watches of Secrets no Gateway of `mesh` references any more.
    fn retain(&self, referenced: &BTreeSet<String>) {
        self.inner.watches.lock().retain(|k, w| {
            let keep = referenced.contains(k.name.strip_suffix(sds_ca_suffix()).unwrap_or(&k.name));
            if !keep {
                w.stop.cancel();
            }
            keep
        });
    }

    /// The Secret `key` as its watch knows it, starting the watch the first time.
    fn lookup(&self, key: &Key) -> State {
        let mut watches = self.inner.watches.lock();
        if let Some(w) = watches.get(key) {
            return w.state.clone();
        }
        let Some(client) = self.inner.clients.client(&key.cluster) else {
            warn!(cluster = %key.cluster, "a gateway asked for a certificate from an unknown cluster");
            return State::Absent;
        };
        let stop = self.inner.tasks.token().child_token();
        watches.insert(
            key.clone(),
            Watch {
                state: State::Pending,
                stop: stop.clone(),
            },
        );
        let api: Api<Secret> = Api::namespaced(client, &key.namespace);
        let config = crate::kube_watch::config(self.inner.watch_timeout)
            .fields(&format!("metadata.name={}", key.name));
        let this = self.clone();
        let key = key.clone();
        self.inner.tasks.spawn("gateway-secret-watch", async move {
            let events = crate::kube_watch::watch(api, config);
            tokio::pin!(events);
            let mut listing: Option<State> = None;
            // The first failure of a run is a warning (a reader without `list secrets` says so once);
            // the retries after it are not.
            let mut failing = false;
            loop {
                let event = tokio::select! {
                    _ = stop.cancelled() => return,
                    e = events.next() => e,
                };
                if matches!(event, Some(Ok(_))) {
                    failing = false;
                }
                match event {
                    None => return,
                    Some(Err(e)) => {
                        let error = crate::kube_errors::describe(&e, &key.cluster);
                        if std::mem::replace(&mut failing, true) {
                            debug!(cluster = %key.cluster, namespace = %key.namespace, name = %key.name, %error, "gateway secret watch");
                        } else {
                            warn!(cluster = %key.cluster, namespace = %key.namespace, name = %key.name, %error, "cannot watch a gateway's certificate Secret: gateways of that cluster get no certificate from it");
                        }
                    }
                    Some(Ok(Event::Init)) => listing = Some(State::Absent),
                    Some(Ok(Event::InitApply(s))) => listing = Some(state_of(&s)),
                    Some(Ok(Event::InitDone)) => {
                        let s = listing.take().unwrap_or(State::Absent);
                        this.set(&key, s);
                    }
                    Some(Ok(Event::Apply(s))) => this.set(&key, state_of(&s)),
                    Some(Ok(Event::Delete(_))) => this.set(&key, State::Absent),
                }
            }
        });
        State::Pending
    }

    fn set(&self, key: &Key, state: State) {
        let changed = match self.inner.watches.lock().get_mut(key) {
            Some(w) if w.state != state => {
                w.state = state;
                true
            }
            _ => false,
        };
        if changed {
            debug!(cluster = %key.cluster, namespace = %key.namespace, name = %key.name, "gateway secret changed");
            self.inner.version.send_modify(|v| *v += 1);
        }
    }

    /// Whether `sa` in `namespace` may list Secrets there, by a SubjectAccessReview in `cluster`.
    async fn authorized(&self, cluster: &str, namespace: &str, sa: &str) -> bool {
        let key = (cluster.to_owned(), namespace.to_owned(), sa.to_owned());
        if let Some((ok, at)) = self.inner.grants.lock().get(&key).copied() {
            let ttl = if ok { GRANT_TTL } else { REFUSAL_TTL };
            if at.elapsed() < ttl {
                return ok;
            }
        }
        let Some(client) = self.inner.clients.client(cluster) else {
            return false;
        };
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                resource_attributes: Some(ResourceAttributes {
                    namespace: Some(namespace.to_owned()),
                    verb: Some("list".to_owned()),
                    resource: Some("secrets".to_owned()),
                    ..Default::default()
                }),
                user: Some(format!("system:serviceaccount:{namespace}:{sa}")),
                ..Default::default()
            },
            ..Default::default()
        };
        let api: Api<SubjectAccessReview> = Api::all(client);
        let ok = match api.create(&PostParams::default(), &review).await {
            Ok(r) => r.status.is_some_and(|s| s.allowed),
            Err(e) => {
                warn!(%cluster, %namespace, service_account = %sa, error = %e, "SubjectAccessReview for a gateway's certificates failed, so it gets none (meshd's identity in that cluster needs create subjectaccessreviews)");
                return false;
            }
        };
        self.inner.grants.lock().insert(key, (ok, Instant::now()));
        ok
    }

    async fn secrets(&self, req: SecretRequest<'_>) -> Vec<Arc<Resource>> {
        let referenced = referenced(req.mesh);
        self.retain(&referenced);
        let Some((ns, sa)) = req.identity else {
            if !req.names.is_empty() {
                warn!(node = %req.proxy.id, "SDS asked on a stream without a verified identity: connect on the secure port");
            }
            return Vec::new();
        };
        let cluster = req
            .proxy
            .cluster_id
            .as_deref()
            .unwrap_or(&self.inner.config_cluster)
            .to_owned();
        let mut grant: Option<bool> = None;
        let mut denied = Vec::new();
        let mut allowed = Vec::new();
        for name in req.names {
            let Some(r) = sds::parse(&name, ns) else {
                denied.push(name.to_string());
                continue;
            };
            // Cross-namespace references are never allowed; certificates need the grant, CAs do not.
            let mut ok = referenced.contains(&r.name) && r.namespace == ns;
            if ok && !r.ca {
                ok = match grant {
                    Some(g) => g,
                    None => *grant.insert(self.authorized(&cluster, ns, sa).await),
                };
            }
            if ok {
                allowed.push((r, name));
            } else {
                denied.push(name.to_string());
            }
        }
        if !denied.is_empty() {
            warn!(node = %req.proxy.id, names = ?denied, "a gateway was refused certificates: another namespace's, not referenced by any Gateway, or its service account may not list Secrets in its namespace");
        }
        // A watch just started answers within moments: wait for its listing rather than answer
        // nothing and push a moment later.
        let mut versions = self.inner.version.subscribe();
        let deadline = tokio::time::Instant::now() + FIRST_LISTING;
        loop {
            let mut pending = false;
            let mut out = Vec::new();
            for (r, name) in &allowed {
                match self.build(&cluster, r, name.clone()) {
                    Built::Ready(res) => out.push(Arc::new(res)),
                    Built::Pending => pending = true,
                    Built::Unusable => {}
                }
            }
            if !pending
                || tokio::time::timeout_at(deadline, versions.changed())
                    .await
                    .is_err()
            {
                return out;
            }
        }
    }

    /// The resource `name` from its Secret(s): for a CA `<name>-cacert`, else `<name>`'s CA keys.
    fn build(&self, cluster: &str, r: &sds::SecretRef, name: Arc<str>) -> Built {
        let key = |n: &str| Key {
            cluster: cluster.to_owned(),
            namespace: r.namespace.clone(),
            name: n.to_owned(),
        };
        let result = if r.ca {
            let own = self.lookup(&key(&format!("{}{}", r.name, sds_ca_suffix())));
            let base = self.lookup(&key(&r.name));
            match (own, base) {
                (State::Present(d), _) | (State::Absent, State::Present(d)) => {
                    d.root().map(|(ca, crl)| sds::ca_secret(name, ca, crl))
                }
                (State::Absent, State::Absent) => return Built::Unusable,
                _ => return Built::Pending,
            }
        } else {
            match self.lookup(&key(&r.name)) {
                State::Present(d) => d.cert().map(|(cert, key)| sds::tls_secret(name, cert, key)),
                State::Absent => return Built::Unusable,
                State::Pending => return Built::Pending,
            }
        };
        match result {
            Ok(res) => Built::Ready(res),
            Err(e) => {
                warn!(namespace = %r.namespace, name = %r.name, error = %e, "a gateway's certificate Secret cannot be used");
                Built::Unusable
            }
        }
    }
}

/// One SDS resource, or why there is none yet.
enum Built {
    Ready(Resource),
    /// Its Secret's watch has not listed yet.
    Pending,
    /// No such Secret, or none with usable keys.
    Unusable,
}

fn sds_ca_suffix() -> &'static str {
    crate::envoy::gateway_listeners::CA_SUFFIX
}

fn state_of(s: &Secret) -> State {
    State::Present(Arc::new(SecretData::of(s)))
}

/// Every `credentialName` a Gateway in `mesh` references (the Secret names; namespaces are the
/// proxies').
fn referenced(mesh: &dyn Mesh) -> BTreeSet<String> {
    mesh.traffic()
        .config
        .of_kind(Kind::Gateway)
        .filter_map(|c| match &c.spec {
            Spec::Gateway(g) => Some(g),
            _ => None,
        })
        .flat_map(|g| g.servers.iter().filter_map(|s| s.tls.as_ref()))
        .filter(|t| !t.credential_name.is_empty())
        .map(|t| {
            let n = t
                .credential_name
                .strip_prefix(crate::envoy::gateway_listeners::SECRET_PREFIX)
                .unwrap_or(&t.credential_name);
            n.rsplit('/').next().unwrap_or(n).to_owned()
        })
        .collect()
}

impl SecretSource for Credentials {
    fn versions(&self) -> watch::Receiver<u64> {
        self.inner.version.subscribe()
    }

    fn secrets<'a>(&'a self, req: SecretRequest<'a>) -> BoxFuture<'a, Vec<Arc<Resource>>> {
        Box::pin(Credentials::secrets(self, req))
    }
}
