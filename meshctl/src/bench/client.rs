//! Load-generating ADS clients, delta or state of the world, subscribing as a sidecar does: wildcard
//! CDS, then EDS for every EDS cluster CDS returns (whatever the control plane names them), ACKing
//! every response.
//!
//! Owns: the client side of both protocols and what a client observes (when it was fully configured,
//! which endpoint changes it has seen, what it was sent). Does NOT: decode EDS resources in the hot
//! path: a resource is a world service by its name ([`super::names::Directory`], which decodes a
//! name's first assignment only), and a change is recognised by its wire marker
//! ([`super::world::wire_marker`]) in the resource bytes.

use std::{
    collections::{BTreeMap, BTreeSet, HashMap},
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use envoy_types::pb::{
    envoy::{
        config::core::v3::Node,
        service::discovery::v3::{
            DeltaDiscoveryRequest, DeltaDiscoveryResponse, DiscoveryRequest, DiscoveryResponse,
            aggregated_discovery_service_client::AggregatedDiscoveryServiceClient,
        },
    },
    google::protobuf::Any,
};
use memchr::memmem::Finder;
use parking_lot::{Mutex, RwLock};
use prost::Message;
use tokio::{sync::mpsc, time::Instant};
use tokio_stream::{StreamExt, wrappers::ReceiverStream};
use tonic::{Code, Status, transport::Channel};

use meshd::xds::{CLUSTER_TYPE, ENDPOINT_TYPE};

use super::{
    names::{self, Directory},
    world::{self, Change},
};

/// How long a refused or failed stream waits before retrying (plus jitter up to the same again).
const RETRY_BACKOFF: Duration = Duration::from_millis(200);
/// Requests a client may have queued for its stream.
const REQUEST_QUEUE: usize = 16;

/// Which protocol a client speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Flavor {
    /// Incremental xDS.
    Delta,
    /// State of the world.
    Sotw,
}

/// One endpoint change the clients watch for.
pub(super) struct Event {
    /// Finds the added address's wire marker in an assignment of the service.
    marker: Finder<'static>,
    pub(super) written: Instant,
    /// When, after the churn started.
    pub(super) at: Duration,
    pub(super) cluster: usize,
    pub(super) service: usize,
    /// Per client that saw it: how long after `written`.
    pub(super) seen: Mutex<Vec<Duration>>,
}

impl Event {
    /// The event of `change`, written at `written`, `at` after the churn started.
    pub(super) fn new(change: &Change, written: Instant, at: Duration) -> Self {
        Self {
            marker: Finder::new(&world::wire_marker(change.added)).into_owned(),
            written,
            at,
            cluster: change.cluster,
            service: change.service,
            seen: Mutex::default(),
        }
    }
}

/// Every change written so far, indexed by world service. Clients read it; the churn loop appends.
#[derive(Default)]
pub(super) struct EventLog {
    inner: RwLock<LogInner>,
}

#[derive(Default)]
struct LogInner {
    events: Vec<Arc<Event>>,
    by_service: HashMap<usize, Vec<usize>>,
}

impl EventLog {
    pub(super) fn push(&self, event: Event) {
        let mut inner = self.inner.write();
        let id = inner.events.len();
        inner.by_service.entry(event.service).or_default().push(id);
        inner.events.push(Arc::new(event));
    }

    pub(super) fn events(&self) -> Vec<Arc<Event>> {
        self.inner.read().events.clone()
    }

    /// Records `now` for every event of `service` this client had not seen and whose marker `body`
    /// (an assignment of that service) holds.
    fn observe(&self, service: usize, body: &[u8], seen: &mut BTreeSet<usize>, now: Instant) {
        let inner = self.inner.read();
        let Some(ids) = inner.by_service.get(&service) else {
            return;
        };
        for &id in ids {
            let e = &inner.events[id];
            if !seen.contains(&id) && e.marker.find(body).is_some() {
                seen.insert(id);
                e.seen.lock().push(now.saturating_duration_since(e.written));
            }
        }
    }
}

/// Traffic counters shared by every client.
#[derive(Default)]
pub(super) struct Traffic {
    pub(super) responses: AtomicU64,
    pub(super) bytes: AtomicU64,
    pub(super) resources: AtomicU64,
}

/// What one client reports, updated as it goes.
#[derive(Debug, Clone, Default)]
pub(super) struct Progress {
    /// From the first dial to the full initial config.
    pub(super) configured: Option<Duration>,
    /// From the stream being accepted to the full initial config.
    pub(super) configured_since_accept: Option<Duration>,
    /// Streams refused (rate limit) or broken before this one.
    pub(super) retries: u32,
    /// The last body of every EDS resource (only when verifying).
    pub(super) endpoints: BTreeMap<String, Vec<u8>>,
    /// Every cluster CDS named and the EDS resource it asks for (only when verifying).
    pub(super) clusters: BTreeMap<Arc<str>, Option<Arc<str>>>,
}

/// What a client needs from the run.
pub(super) struct ClientContext {
    pub(super) target: String,
    pub(super) events: Arc<EventLog>,
    /// Which world service each EDS resource is.
    pub(super) directory: Arc<Directory>,
    pub(super) traffic: Arc<Traffic>,
    /// Keep every EDS body for the final check against the truth.
    pub(super) verify: bool,
    /// The Sidecar scope that decides each client's namespace.
    pub(super) scope: Option<super::scope::Scope>,
}

/// One client: `id` names its node; a `stalled` client subscribes, then never reads again.
pub(super) async fn run(
    ctx: Arc<ClientContext>,
    id: usize,
    flavor: Flavor,
    stalled: bool,
    progress: Arc<Mutex<Progress>>,
) {
    let dialed = Instant::now();
    loop {
        let result = match flavor {
            Flavor::Delta => session::<DeltaWire>(&ctx, id, stalled, dialed, &progress).await,
            Flavor::Sotw => session::<SotwWire>(&ctx, id, stalled, dialed, &progress).await,
        };
        match result {
            // The server ended the stream: the run is over.
            Ok(()) => return,
            Err(status) if retriable(&status) => {
                progress.lock().retries += 1;
                let jitter = RETRY_BACKOFF.mul_f64(rand::random::<f64>());
                tokio::time::sleep(RETRY_BACKOFF + jitter).await;
            }
            Err(status) => {
                tracing::warn!(client = id, %status, "ADS client failed");
                return;
            }
        }
    }
}

fn retriable(s: &Status) -> bool {
    matches!(
        s.code(),
        Code::ResourceExhausted | Code::Unavailable | Code::Unknown
    )
}

/// A sidecar node in `ns`.
fn node(id: usize, ns: &str) -> Node {
    let ip = std::net::Ipv4Addr::from(u32::from_be_bytes([10, 64, 0, 0]) + id as u32);
    Node {
        id: format!("sidecar~{ip}~client-{id}.{ns}~{ns}.svc.cluster.local"),
        cluster: "bench-client".into(),
        ..Default::default()
    }
}

/// One protocol's requests and responses, reduced to what the client logic needs.
trait Wire {
    type Request: Send + 'static;
    type Response: Message + Default + Send + 'static;
    async fn open(
        client: &mut AggregatedDiscoveryServiceClient<Channel>,
        requests: ReceiverStream<Self::Request>,
    ) -> Result<tonic::Streaming<Self::Response>, Status>;
    /// A (re)subscription: the full wanted set, and what changed since the last one.
    fn subscribe(
        node: Option<Node>,
        type_url: &str,
        wanted: &BTreeSet<Arc<str>>,
        added: &[Arc<str>],
        removed: &[Arc<str>],
    ) -> Self::Request;
    fn ack(type_url: &str, nonce: String, version: String, wanted: &BTreeSet<Arc<str>>) -> Self::Request;
    fn received(resp: Self::Response) -> Received;
}

/// A response in protocol-neutral form.
struct Received {
    type_url: String,
    nonce: String,
    version: String,
    resources: Vec<(String, Any)>,
    removed: Vec<String>,
    /// True when `resources` is the whole set (SotW CDS).
    full_state: bool,
}

struct DeltaWire;

impl Wire for DeltaWire {
    type Request = DeltaDiscoveryRequest;
    type Response = DeltaDiscoveryResponse;

    async fn open(
        client: &mut AggregatedDiscoveryServiceClient<Channel>,
        requests: ReceiverStream<Self::Request>,
    ) -> Result<tonic::Streaming<Self::Response>, Status> {
        Ok(client.delta_aggregated_resources(requests).await?.into_inner())
    }

    fn subscribe(
        node: Option<Node>,
        type_url: &str,
        _wanted: &BTreeSet<Arc<str>>,
        added: &[Arc<str>],
        removed: &[Arc<str>],
    ) -> Self::Request {
        DeltaDiscoveryRequest {
            node,
            type_url: type_url.to_owned(),
            resource_names_subscribe: added.iter().map(|n| n.to_string()).collect(),
            resource_names_unsubscribe: removed.iter().map(|n| n.to_string()).collect(),
            ..Default::default()
        }
    }

    fn ack(type_url: &str, nonce: String, _version: String, _wanted: &BTreeSet<Arc<str>>) -> Self::Request {
        DeltaDiscoveryRequest {
            type_url: type_url.to_owned(),
            response_nonce: nonce,
            ..Default::default()
        }
    }

    fn received(resp: Self::Response) -> Received {
        Received {
            type_url: resp.type_url,
            nonce: resp.nonce,
            version: resp.system_version_info,
            resources: resp
                .resources
                .into_iter()
                .filter_map(|r| Some((r.name, r.resource?)))
                .collect(),
            removed: resp.removed_resources,
            full_state: false,
        }
    }
}

struct SotwWire;

impl Wire for SotwWire {
    type Request = DiscoveryRequest;
    type Response = DiscoveryResponse;

    async fn open(
        client: &mut AggregatedDiscoveryServiceClient<Channel>,
        requests: ReceiverStream<Self::Request>,
    ) -> Result<tonic::Streaming<Self::Response>, Status> {
        Ok(client.stream_aggregated_resources(requests).await?.into_inner())
    }

    fn subscribe(
        node: Option<Node>,
        type_url: &str,
        wanted: &BTreeSet<Arc<str>>,
        _added: &[Arc<str>],
        _removed: &[Arc<str>],
    ) -> Self::Request {
        DiscoveryRequest {
            node,
            type_url: type_url.to_owned(),
            resource_names: wanted.iter().map(|n| n.to_string()).collect(),
            ..Default::default()
        }
    }

    fn ack(type_url: &str, nonce: String, version: String, wanted: &BTreeSet<Arc<str>>) -> Self::Request {
        DiscoveryRequest {
            type_url: type_url.to_owned(),
            response_nonce: nonce,
            version_info: version,
            resource_names: wanted.iter().map(|n| n.to_string()).collect(),
            ..Default::default()
        }
    }

    fn received(resp: Self::Response) -> Received {
        let full_state = resp.type_url == CLUSTER_TYPE;
        Received {
            resources: resp
                .resources
                .into_iter()
                .map(|any| (resource_name(&resp.type_url, &any.value), any))
                .collect(),
            type_url: resp.type_url,
            nonce: resp.nonce,
            version: resp.version_info,
            removed: Vec::new(),
            full_state,
        }
    }
}

/// The name inside an encoded `Cluster` or `ClusterLoadAssignment`: both carry it as field 1.
fn resource_name(type_url: &str, body: &[u8]) -> String {
    #[derive(Message)]
    struct Named {
        #[prost(string, tag = "1")]
        name: String,
    }
    debug_assert!(type_url == CLUSTER_TYPE || type_url == ENDPOINT_TYPE);
    Named::decode(body).map(|n| n.name).unwrap_or_default()
}

/// What a client holds and wants.
#[derive(Default)]
struct State {
    /// CDS clusters and the EDS name each asks for (`None`: not an EDS cluster).
    clusters: BTreeMap<Arc<str>, Option<Arc<str>>>,
    /// Subscribed EDS names.
    eds: BTreeSet<Arc<str>>,
    /// EDS names received at least once.
    eds_received: BTreeSet<Arc<str>>,
    cds_received: bool,
    /// Events this client has seen.
    seen: BTreeSet<usize>,
}

/// One stream from dial to end. `Ok` when the server closed it cleanly or the run stopped it.
async fn session<W: Wire>(
    ctx: &ClientContext,
    id: usize,
    stalled: bool,
    dialed: Instant,
    progress: &Mutex<Progress>,
) -> Result<(), Status> {
    let channel = Channel::from_shared(format!("http://{}", ctx.target))
        .map_err(|e| Status::invalid_argument(e.to_string()))?
        .connect()
        .await
        .map_err(|e| Status::unavailable(e.to_string()))?;
    let mut client = AggregatedDiscoveryServiceClient::new(channel).max_decoding_message_size(usize::MAX);
    let (tx, rx) = mpsc::channel(REQUEST_QUEUE);
    let none = BTreeSet::new();
    let wildcard = [Arc::<str>::from("*")];
    let node = node(id, &super::scope::namespace(ctx.scope.as_ref(), id));
    tx.send(W::subscribe(Some(node), CLUSTER_TYPE, &none, &wildcard, &[]))
        .await
        .map_err(|_| Status::cancelled("request queue closed"))?;
    let mut responses = W::open(&mut client, ReceiverStream::new(rx)).await?;
    let accepted = Instant::now();
    if stalled {
        // Hold the stream open and never read it: the server must neither grow nor wait for it.
        std::future::pending::<()>().await;
    }
    let mut state = State::default();
    while let Some(resp) = responses.next().await {
        let resp = resp?;
        let now = Instant::now();
        let size = resp.encoded_len() as u64;
        let r = W::received(resp);
        ctx.traffic.responses.fetch_add(1, Ordering::Relaxed);
        ctx.traffic.bytes.fetch_add(size, Ordering::Relaxed);
        ctx.traffic
            .resources
            .fetch_add(r.resources.len() as u64, Ordering::Relaxed);
        let type_url = r.type_url.clone();
        let (nonce, version) = (r.nonce.clone(), r.version.clone());
        let resubscribe = if type_url == CLUSTER_TYPE {
            let resubscribe = state.on_clusters(r);
            if ctx.verify {
                progress.lock().clusters = state.clusters.clone();
            }
            resubscribe
        } else if type_url == ENDPOINT_TYPE {
            state.on_endpoints(ctx, r, now, progress);
            None
        } else {
            None
        };
        let wanted = if type_url == CLUSTER_TYPE {
            &none
        } else {
            &state.eds
        };
        send(&tx, W::ack(&type_url, nonce, version, wanted)).await?;
        if let Some((added, removed)) = resubscribe {
            send(
                &tx,
                W::subscribe(None, ENDPOINT_TYPE, &state.eds, &added, &removed),
            )
            .await?;
        }
        if state.configured() {
            let mut p = progress.lock();
            if p.configured.is_none() {
                p.configured = Some(dialed.elapsed());
                p.configured_since_accept = Some(accepted.elapsed());
            }
        }
    }
    Ok(())
}

async fn send<R>(tx: &mpsc::Sender<R>, req: R) -> Result<(), Status> {
    tx.send(req)
        .await
        .map_err(|_| Status::cancelled("request queue closed"))
}

/// EDS names to add and to drop.
type EdsChange = (Vec<Arc<str>>, Vec<Arc<str>>);

impl State {
    /// Applies a CDS response; returns the EDS names to add and drop, if they changed.
    fn on_clusters(&mut self, r: Received) -> Option<EdsChange> {
        if r.full_state {
            self.clusters.clear();
        }
        for (name, body) in r.resources {
            let eds = names::eds_name(&name, &body.value);
            self.clusters.insert(name.into(), eds);
        }
        for gone in &r.removed {
            self.clusters.remove(gone.as_str());
        }
        self.cds_received = true;
        let wanted: BTreeSet<Arc<str>> = self.clusters.values().flatten().cloned().collect();
        if wanted == self.eds {
            return None;
        }
        let added = wanted.difference(&self.eds).cloned().collect();
        let removed: Vec<Arc<str>> = self.eds.difference(&wanted).cloned().collect();
        for name in &removed {
            self.eds_received.remove(name);
        }
        self.eds = wanted;
        Some((added, removed))
    }

    fn on_endpoints(&mut self, ctx: &ClientContext, r: Received, now: Instant, progress: &Mutex<Progress>) {
        for (name, body) in r.resources {
            if let Some(service) = ctx.directory.service(&name, &body.value) {
                ctx.events.observe(service, &body.value, &mut self.seen, now);
            }
            if let Some(n) = self.eds.get(name.as_str()) {
                self.eds_received.insert(n.clone());
            }
            if ctx.verify {
                progress.lock().endpoints.insert(name, body.value);
            }
        }
        for name in r.removed {
            self.eds_received.remove(name.as_str());
            if ctx.verify {
                progress.lock().endpoints.remove(&name);
            }
        }
    }

    fn configured(&self) -> bool {
        self.cds_received && !self.eds.is_empty() && self.eds_received.len() == self.eds.len()
    }
}

#[cfg(test)]
mod tests {
    use envoy_types::pb::envoy::config::cluster::v3::cluster::{ClusterDiscoveryType, DiscoveryType};

    use super::*;
    use crate::bench::names::tests::{assignment, cluster};

    fn received(type_url: &str, resources: Vec<(&str, Vec<u8>)>, full_state: bool) -> Received {
        Received {
            type_url: type_url.into(),
            nonce: String::new(),
            version: String::new(),
            resources: resources
                .into_iter()
                .map(|(name, value)| {
                    let any = Any {
                        type_url: type_url.into(),
                        value,
                    };
                    (name.to_owned(), any)
                })
                .collect(),
            removed: Vec::new(),
            full_state,
        }
    }

    /// A control plane that names nothing `outbound|…`: EDS clusters by `service_name` or their own
    /// name, assignments known by their addresses, changes seen once.
    #[test]
    fn follows_any_cds_and_sees_changes_by_address() {
        let ctx = ClientContext {
            target: String::new(),
            events: Arc::default(),
            directory: Arc::new(Directory::new([
                ([10, 0, 0, 1].into(), 0),
                ([10, 0, 0, 2].into(), 1),
            ])),
            traffic: Arc::default(),
            verify: false,
            scope: None,
        };
        let eds = || Some(ClusterDiscoveryType::Type(DiscoveryType::Eds as i32));
        let static_ = Some(ClusterDiscoveryType::Type(DiscoveryType::Static as i32));
        let mut state = State::default();
        let cds = vec![
            ("web", cluster("web", eds(), Some("web-eds"))),
            ("api", cluster("api", eds(), None)),
            ("blackhole", cluster("blackhole", static_, None)),
        ];
        let (added, removed) = state
            .on_clusters(received(CLUSTER_TYPE, cds, true))
            .expect("subscribes");
        assert_eq!(added, [Arc::from("api"), Arc::from("web-eds")]);
        assert!(removed.is_empty() && !state.configured());

        let change = Change {
            cluster: 0,
            service: 0,
            added: [10, 0, 0, 9].into(),
        };
        ctx.directory.add(change.added, change.service);
        ctx.events
            .push(Event::new(&change, Instant::now(), Duration::ZERO));
        let progress = Mutex::default();
        for _ in 0..2 {
            let eds = vec![
                ("web-eds", assignment("web-eds", &[[10, 0, 0, 1], [10, 0, 0, 9]])),
                ("api", assignment("api", &[[10, 0, 0, 2]])),
            ];
            state.on_endpoints(
                &ctx,
                received(ENDPOINT_TYPE, eds, false),
                Instant::now(),
                &progress,
            );
        }
        assert!(state.configured());
        assert_eq!(
            ctx.events.events()[0].seen.lock().len(),
            1,
            "seen once, by service 0's resource"
        );

        // The state of the world without `api`: dropped, and the client is still configured.
        let cds = vec![("web", cluster("web", eds(), Some("web-eds")))];
        let (added, removed) = state
            .on_clusters(received(CLUSTER_TYPE, cds, true))
            .expect("unsubscribes");
        assert!(added.is_empty());
        assert_eq!(removed, [Arc::from("api")]);
        assert!(state.configured());
    }
}
