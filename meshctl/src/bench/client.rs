//! Load-generating ADS clients, delta or state of the world, subscribing as a sidecar does: wildcard
//! CDS, then EDS for every EDS cluster CDS returns (whatever the control plane names them), ACKing
//! every response.
//!
//! Owns: the client side of both protocols and what a client observes (when it was fully configured,
//! which endpoint changes it has seen, what it was sent). Does NOT: decode EDS resources in the hot
//! path: responses are read by [`super::ads`] (names and bodies are slices of the receive buffer), a
//! resource is a world service by its name ([`super::names::Directory`], which decodes a name's
//! first assignment only), and a change is recognised by its wire marker ([`super::world::wire_marker`])
//! in the resource bytes. The clients share the machine with the control plane they measure, so their
//! cost per received byte is kept to a name lookup and a byte search.

use std::{
    collections::{BTreeMap, BTreeSet, HashMap, HashSet},
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use bytes::Bytes;
use envoy_types::pb::envoy::{
    config::core::v3::Node,
    service::discovery::v3::{DeltaDiscoveryRequest, DiscoveryRequest},
};
use memchr::memmem::Finder;
use parking_lot::{Mutex, RwLock};
use tokio::{sync::mpsc, time::Instant};
use tokio_stream::{StreamExt, wrappers::ReceiverStream};
use tonic::{
    Code, Status, Streaming,
    transport::{Channel, Endpoint},
};

use meshd::xds::{CLUSTER_TYPE, ENDPOINT_TYPE};

use super::{
    ads::{self, DeltaResponse, Framed, SotwResponse},
    names::{self, Directory},
    world::{self, Change},
};

/// How long a refused or failed stream waits before retrying (plus jitter up to the same again).
const RETRY_BACKOFF: Duration = Duration::from_millis(200);
/// Requests a client may have queued for its stream.
const REQUEST_QUEUE: usize = 16;
/// HTTP/2 stream and connection receive windows of a reading client: Envoy's defaults (256 MiB, what
/// the control plane meets in a mesh), larger than any response, so a client that reads never makes
/// the server wait for a WINDOW_UPDATE. Stalled clients keep hyper's small defaults (2 MiB stream,
/// 5 MiB connection): they exist to show the server is not blocked by a full window.
const READER_WINDOW: u32 = 256 * 1024 * 1024;

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
    fn observe(&self, service: usize, body: &[u8], seen: &mut HashSet<usize>, now: Instant) {
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
    /// When the current stream had its first CDS and EDS answers (a reconnect's resync).
    pub(super) synced: Option<Instant>,
    /// The last body of every EDS resource (only when verifying).
    pub(super) endpoints: BTreeMap<String, Bytes>,
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
    /// Keep what the client holds across streams and resume with `initial_resource_versions` (delta),
    /// as Envoy does on reconnect; otherwise each stream starts from nothing.
    pub(super) resume: bool,
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
    let mut state = State::default();
    loop {
        if !ctx.resume {
            state = State::default();
        }
        let result = match flavor {
            Flavor::Delta => session::<DeltaWire>(&ctx, id, stalled, dialed, &progress, &mut state).await,
            Flavor::Sotw => session::<SotwWire>(&ctx, id, stalled, dialed, &progress, &mut state).await,
        };
        match result {
            // The server ended the stream: the run is over, unless clients resume as Envoy does
            // (they redial whatever ended the stream: a killed server's may end cleanly).
            Ok(()) if !ctx.resume => return,
            Err(status) if !ctx.resume && !retriable(&status) => {
                tracing::warn!(client = id, %status, "ADS client failed");
                return;
            }
            _ => {
                progress.lock().retries += 1;
                let jitter = RETRY_BACKOFF.mul_f64(rand::random::<f64>());
                tokio::time::sleep(RETRY_BACKOFF + jitter).await;
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
    type Response: Send + 'static;
    async fn open(
        channel: Channel,
        requests: ReceiverStream<Self::Request>,
    ) -> Result<Streaming<Framed<Self::Response>>, Status>;
    /// A (re)subscription: the full wanted set, and what changed since the last one.
    fn subscribe(
        node: Option<Node>,
        type_url: &str,
        wanted: &BTreeSet<Arc<str>>,
        added: &[Arc<str>],
        removed: &[Arc<str>],
    ) -> Self::Request;
    /// A new stream's first request of a type when resuming: `added` plus what the client holds
    /// (delta's `initial_resource_versions`; SotW has no per-resource versions and asks afresh).
    fn resume(
        node: Option<Node>,
        type_url: &str,
        wanted: &BTreeSet<Arc<str>>,
        added: &[Arc<str>],
        _held: &HashMap<Arc<str>, Bytes>,
    ) -> Self::Request {
        Self::subscribe(node, type_url, wanted, added, &[])
    }
    fn ack(type_url: &str, nonce: String, version: String, wanted: &BTreeSet<Arc<str>>) -> Self::Request;
    fn received(resp: Self::Response) -> Received;
}

/// A response in protocol-neutral form.
struct Received {
    type_url: String,
    nonce: String,
    version: String,
    /// Each resource's version, in `resources`' order (delta only; empty for SotW).
    versions: Vec<Bytes>,
    /// Name and body of each resource, slices of the receive buffer (a name is checked as UTF-8 when
    /// read: see [`ads::utf8`]).
    resources: Vec<(Bytes, Bytes)>,
    removed: Vec<String>,
    /// True when `resources` is the whole set (SotW CDS).
    full_state: bool,
}

struct DeltaWire;

impl Wire for DeltaWire {
    type Request = DeltaDiscoveryRequest;
    type Response = DeltaResponse;

    async fn open(
        channel: Channel,
        requests: ReceiverStream<Self::Request>,
    ) -> Result<Streaming<Framed<Self::Response>>, Status> {
        ads::delta(channel, requests).await
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

    fn resume(
        node: Option<Node>,
        type_url: &str,
        wanted: &BTreeSet<Arc<str>>,
        added: &[Arc<str>],
        held: &HashMap<Arc<str>, Bytes>,
    ) -> Self::Request {
        let initial_resource_versions = held
            .iter()
            .filter_map(|(name, v)| Some((name.to_string(), ads::utf8(v)?.to_owned())))
            .collect();
        DeltaDiscoveryRequest {
            initial_resource_versions,
            ..Self::subscribe(node, type_url, wanted, added, &[])
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
        let (mut resources, mut versions) = (Vec::new(), Vec::new());
        for r in resp.resources {
            if let Some(body) = r.resource {
                resources.push((r.name, body.value));
                versions.push(r.version);
            }
        }
        Received {
            type_url: resp.type_url,
            nonce: resp.nonce,
            version: resp.system_version_info,
            versions,
            resources,
            removed: resp.removed_resources,
            full_state: false,
        }
    }
}

struct SotwWire;

impl Wire for SotwWire {
    type Request = DiscoveryRequest;
    type Response = SotwResponse;

    async fn open(
        channel: Channel,
        requests: ReceiverStream<Self::Request>,
    ) -> Result<Streaming<Framed<Self::Response>>, Status> {
        ads::sotw(channel, requests).await
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
        debug_assert!(resp.type_url == CLUSTER_TYPE || resp.type_url == ENDPOINT_TYPE);
        Received {
            resources: resp
                .resources
                .into_iter()
                .map(|any| (ads::resource_name(&any.value), any.value))
                .collect(),
            full_state: resp.type_url == CLUSTER_TYPE,
            type_url: resp.type_url,
            nonce: resp.nonce,
            version: resp.version_info,
            versions: Vec::new(),
            removed: Vec::new(),
        }
    }
}

/// What a client holds and wants.
#[derive(Default)]
struct State {
    /// CDS clusters and the EDS name each asks for (`None`: not an EDS cluster).
    clusters: BTreeMap<Arc<str>, Option<Arc<str>>>,
    /// Subscribed EDS names.
    eds: BTreeSet<Arc<str>>,
    /// Subscribed EDS names not received yet (or removed since): empty once configured, so a
    /// configured client's responses cost no set update.
    eds_pending: HashSet<Arc<str>>,
    cds_received: bool,
    /// Events this client has seen.
    seen: HashSet<usize>,
    /// Versions of what it holds, CDS and EDS (only when resuming).
    held: [HashMap<Arc<str>, Bytes>; 2],
    /// Types answered on the current stream: CDS, EDS.
    answered: [bool; 2],
}

/// The client's connection: a reading client gets large HTTP/2 windows ([`READER_WINDOW`]).
async fn connect(target: &str, stalled: bool) -> Result<Channel, Status> {
    let endpoint = Endpoint::from_shared(format!("http://{target}"))
        .map_err(|e| Status::invalid_argument(e.to_string()))?;
    let endpoint = if stalled {
        endpoint
    } else {
        endpoint
            .initial_stream_window_size(READER_WINDOW)
            .initial_connection_window_size(READER_WINDOW)
    };
    endpoint
        .connect()
        .await
        .map_err(|e| Status::unavailable(e.to_string()))
}

/// One stream from dial to end. `Ok` when the server closed it cleanly or the run stopped it. With
/// [`ClientContext::resume`] and a `state` from an earlier stream, resubscribes to both types at once
/// with what it holds, as Envoy does.
async fn session<W: Wire>(
    ctx: &ClientContext,
    id: usize,
    stalled: bool,
    dialed: Instant,
    progress: &Mutex<Progress>,
    state: &mut State,
) -> Result<(), Status> {
    let channel = connect(&ctx.target, stalled).await?;
    let (tx, rx) = mpsc::channel(REQUEST_QUEUE);
    let none = BTreeSet::new();
    let wildcard = [Arc::<str>::from("*")];
    let node = node(id, &super::scope::namespace(ctx.scope.as_ref(), id));
    let [held_cds, held_eds] = &state.held;
    tx.send(W::resume(Some(node), CLUSTER_TYPE, &none, &wildcard, held_cds))
        .await
        .map_err(|_| Status::cancelled("request queue closed"))?;
    if !state.eds.is_empty() {
        let eds: Vec<Arc<str>> = state.eds.iter().cloned().collect();
        send(&tx, W::resume(None, ENDPOINT_TYPE, &state.eds, &eds, held_eds)).await?;
    }
    state.answered = [false; 2];
    let mut responses = W::open(channel, ReceiverStream::new(rx)).await?;
    let accepted = Instant::now();
    if stalled {
        // Hold the stream open and never read it: the server must neither grow nor wait for it.
        std::future::pending::<()>().await;
    }
    while let Some(resp) = responses.next().await {
        let Framed { len, message } = resp?;
        let now = Instant::now();
        let mut r = W::received(message);
        ctx.traffic.responses.fetch_add(1, Ordering::Relaxed);
        ctx.traffic.bytes.fetch_add(len as u64, Ordering::Relaxed);
        ctx.traffic
            .resources
            .fetch_add(r.resources.len() as u64, Ordering::Relaxed);
        let type_url = std::mem::take(&mut r.type_url);
        let (nonce, version) = (std::mem::take(&mut r.nonce), std::mem::take(&mut r.version));
        let kind = usize::from(type_url != CLUSTER_TYPE);
        if ctx.resume {
            state.hold(kind, &r);
        }
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
        if !state.answered[kind] {
            state.answered[kind] = true;
            if state.answered == [true; 2] {
                progress.lock().synced = Some(now);
            }
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
    /// Records the versions of what `r` sent and forgets what it removed (`kind` 0: CDS, 1: EDS).
    fn hold(&mut self, kind: usize, r: &Received) {
        let held = &mut self.held[kind];
        for ((name, _), version) in r.resources.iter().zip(&r.versions) {
            if let Some(name) = ads::utf8(name) {
                held.insert(name.into(), version.clone());
            }
        }
        for gone in &r.removed {
            held.remove(gone.as_str());
        }
    }

    /// Applies a CDS response; returns the EDS names to add and drop, if they changed.
    fn on_clusters(&mut self, r: Received) -> Option<EdsChange> {
        if r.full_state {
            self.clusters.clear();
        }
        for (name, body) in &r.resources {
            let Some(name) = ads::utf8(name) else {
                continue;
            };
            let eds = names::eds_name(name, body);
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
        let added: Vec<Arc<str>> = wanted.difference(&self.eds).cloned().collect();
        let removed: Vec<Arc<str>> = self.eds.difference(&wanted).cloned().collect();
        for name in &removed {
            self.eds_pending.remove(name);
        }
        self.eds_pending.extend(added.iter().cloned());
        self.eds = wanted;
        Some((added, removed))
    }

    fn on_endpoints(&mut self, ctx: &ClientContext, r: Received, now: Instant, progress: &Mutex<Progress>) {
        for (name, body) in r.resources {
            let Some(name) = ads::utf8(&name) else {
                continue;
            };
            if let Some(service) = ctx.directory.service(name, &body) {
                ctx.events.observe(service, &body, &mut self.seen, now);
            }
            if !self.eds_pending.is_empty() {
                self.eds_pending.remove(name);
            }
            if ctx.verify {
                progress.lock().endpoints.insert(name.to_owned(), body);
            }
        }
        for name in r.removed {
            if let Some(n) = self.eds.get(name.as_str()) {
                self.eds_pending.insert(n.clone());
            }
            if ctx.verify {
                progress.lock().endpoints.remove(&name);
            }
        }
    }

    fn configured(&self) -> bool {
        self.cds_received && !self.eds.is_empty() && self.eds_pending.is_empty()
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
            versions: Vec::new(),
            resources: resources
                .into_iter()
                .map(|(name, value)| (Bytes::copy_from_slice(name.as_bytes()), value.into()))
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
            resume: false,
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

        // A delta removal of a subscribed name: not configured until it comes back.
        let mut gone = received(ENDPOINT_TYPE, vec![], false);
        gone.removed = vec!["web-eds".into(), "never-subscribed".into()];
        state.on_endpoints(&ctx, gone, Instant::now(), &progress);
        assert!(!state.configured());
        let back = vec![("web-eds", assignment("web-eds", &[[10, 0, 0, 1]]))];
        state.on_endpoints(
            &ctx,
            received(ENDPOINT_TYPE, back, false),
            Instant::now(),
            &progress,
        );
        assert!(state.configured());
    }
}
