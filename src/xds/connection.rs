//! One ADS stream: reads requests, follows snapshots, answers.
//!
//! Owns: the stream loop shared by both protocols (through [`Protocol`]) and the per-stream state (the
//! proxy, the protocol state machine, the snapshot it serves and hence what a newer one changes for
//! it). The loop is a future its response body polls ([`super::wire::ResponseBody`]), so it runs in
//! hyper's task for the HTTP/2 stream and hands each message over without a channel or a wake-up of
//! another task. The state machine sits behind a mutex only the stream writes, so debug readers can
//! look at it when they ask (see [`super::status`]). Does NOT: decide protocol rules (see [`super::sotw`],
//! [`super::delta`]) or build resources (generators).

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::Arc,
};

use futures::stream;
use parking_lot::Mutex;
use tokio::time::Instant;
use tokio_stream::{StreamExt, wrappers::WatchStream};
use tracing::{debug, info, warn};

use crate::traffic::SidecarScope;

use super::{
    Error, Resource,
    generate::generate,
    protocol::{Decision, Ignored, Mode, Protocol, TypeStatus, truncate_message},
    push::{Push, PushScope, Recipient, Snapshot, decide, scope},
    shared::{Caller, Shared},
    status::{ConnectionStatus, StatusHandle, Watches},
    wire::{Outbox, Requests},
    woken::Woken,
};
use crate::envoy::{
    Context, Mesh, NetworkView, Proxy, ScopedMesh, XdsType, cds, scope_of, service_targets::Served,
};

/// Most encoded bytes of EDS or RDS resources put in one delta response. Delta clients take these types
/// in any number of responses (only LDS and CDS carry the whole set) and acknowledge each with a few
/// bytes, so a sidecar watching every cluster of a big mesh gets its config in bounded messages it
/// can apply as they come, far below gRPC clients' default 4 MiB receive limit.
const MAX_RESPONSE_BYTES: usize = 128 << 10;

/// A stream's protocol state: written by the stream only, read by debug readers.
struct State<P>(Mutex<P>);

impl<P: Protocol> Watches for State<P> {
    fn watches(&self) -> BTreeMap<XdsType, TypeStatus> {
        self.0.lock().status()
    }
}

/// The state a stream owns.
struct Stream<P: Protocol> {
    shared: Arc<Shared>,
    proxy: Proxy,
    view: NetworkView,
    state: Arc<State<P>>,
    /// The snapshot served: responses are built from it, and a newer one's change set applies only
    /// if it follows this one.
    snapshot: Arc<dyn Snapshot>,
    /// What the proxy sees of `snapshot` (its Sidecar scope); a push compares it with the next one's.
    scope: Arc<SidecarScope>,
    /// The proxy's service targets in `snapshot` (sidecars): a push compares them with the next one's.
    served: Option<Served>,
    status: StatusHandle,
    out: Outbox,
    /// Responses sent on the current push version and not yet recorded for push_status, per type.
    pushed: BTreeMap<XdsType, u64>,
    /// The push version this stream was last counted in push_status's `proxiesPushed` for.
    counted: u64,
    /// Who is on the other end (SDS reads its verified identity).
    caller: Caller,
    /// Whether the loop ended (and said why); a stream dropped before did not see its end.
    ended: bool,
}

/// A stream ends here however it ends, also when hyper drops it mid-way (the client reset the stream,
/// the connection ended): the gauge of open streams falls, and the log says so.
impl<P: Protocol> Drop for Stream<P> {
    fn drop(&mut self) {
        self.shared.metrics.stream_closed();
        if !self.ended {
            info!(node = %self.proxy.id, "xDS stream closed: reset by the client or its connection ended");
        }
    }
}

/// Runs one stream to completion. Errors are sent to the client as its final status.
pub(crate) async fn run<P: Protocol>(
    shared: Arc<Shared>,
    caller: Caller,
    peer: Option<String>,
    requests: Requests<tonic::body::Body, P::Request>,
    out: Outbox,
    protocol: &'static str,
) where
    P::Request: prost::Message + Default,
{
    // Every source the loop selects over is polled only when it woke the task (see [`Woken`]).
    let mut stop = Woken::new(stream::once(Box::pin(shared.tasks.cancelled())));
    let mut requests = Woken::new(requests);
    let first = tokio::select! {
        _ = stop.next() => Err(Error::ShuttingDown),
        r = requests.next() => match r {
            None => return,
            Some(Err(status)) => Err(Error::Receive(status)),
            Some(Ok(req)) => Ok(req),
        },
    };
    // Subscribed before loading, so a snapshot published in between still wakes the stream.
    let mut versions = shared.snapshots.versions();
    versions.borrow_and_update();
    let start = first.and_then(|req| {
        let proxy = Proxy::from_node(P::node(&req))?;
        caller.authorize(&proxy)?;
        if shared.gate.get().is_some_and(|ready| !ready.is_ready()) {
            return Err(Error::NotReady);
        }
        let snapshot = shared.snapshots.load().ok_or(Error::NotReady)?;
        Ok((req, proxy, snapshot))
    });
    let (first, proxy, snapshot) = match start {
        Ok(s) => s,
        Err(e) => {
            debug!(error = %e, "stream refused");
            out.send(Err(e.into())).await;
            return;
        }
    };
    shared.cache.advance(&*snapshot);
    let state = Arc::new(State(Mutex::new(P::default())));
    let held = state.0.lock().held().clone();
    let status = shared.connections.register(
        ConnectionStatus {
            id: String::new(),
            protocol,
            peer,
            identities: caller.identities.clone(),
            connected_at: humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
            proxy: Some(proxy.clone()),
            push_version: Some(snapshot.mesh().version()),
            watches: BTreeMap::new(),
            sent: held,
        },
        state.clone(),
    );
    info!(node = %proxy.id, kind = %proxy.kind, protocol, "xDS stream connected");
    shared.push_log.begin(&*snapshot);
    shared.metrics.stream_opened();
    shared.metrics.config_in_force(snapshot.mesh().traffic());
    let mut stream = Stream::<P> {
        view: NetworkView::of(&proxy),
        scope: scope_of(snapshot.mesh(), &proxy),
        served: Served::of(snapshot.mesh(), &proxy),
        shared: shared.clone(),
        proxy,
        state,
        snapshot,
        status,
        out,
        pushed: BTreeMap::new(),
        counted: 0,
        caller,
        ended: false,
    };
    // Each watch is waited on by one future for the stream's life: one re-created on every turn of the
    // loop would enter and leave the watch's waiter list (locks every stream shares) for every ACK.
    let mut versions = Woken::new(WatchStream::from_changes(versions));
    // Secrets change on their own clock: a stream re-sends its SDS resources when the source says so.
    let mut secret_versions = shared
        .secrets
        .get()
        .map(|s| Woken::new(WatchStream::from_changes(s.versions())));
    let mut next = Some(first);
    let end = loop {
        if let Some(req) = next.take() {
            if let Err(e) = stream.on_request(req).await {
                break Some(e);
            }
            continue;
        }
        tokio::select! {
            biased;
            _ = stop.next() => break Some(Error::ShuttingDown),
            r = requests.next() => match r {
                None => break None,
                Some(Err(status)) => break Some(Error::Receive(status)),
                Some(Ok(req)) => next = Some(req),
            },
            changed = versions.next() => {
                if changed.is_none() { break Some(Error::ShuttingDown) }
                if let Some(snapshot) = shared.snapshots.load()
                    && let Err(e) = stream.on_snapshot(snapshot).await
                {
                    break Some(e);
                }
            }
            Ok(()) = secret_changed(&mut secret_versions) => {
                if let Err(e) = stream.respond(XdsType::Secret, Mode::Pushed, None).await {
                    break Some(e);
                }
            }
        }
    };
    stream.ended = true;
    match &end {
        Some(e) => info!(node = %stream.proxy.id, error = %e, "xDS stream closed"),
        None => info!(node = %stream.proxy.id, "xDS stream closed by the client"),
    }
    if let Some(e) = end {
        stream.out.send(Err(e.into())).await;
    }
}

type StepResult = Result<(), Error>;

/// The next change of the secret source's version; never, without a source (or once it is gone).
async fn secret_changed(versions: &mut Option<Woken<WatchStream<u64>>>) -> Result<(), ()> {
    match versions {
        Some(v) => match v.next().await {
            Some(_) => Ok(()),
            None => {
                *versions = None;
                Err(())
            }
        },
        None => std::future::pending().await,
    }
}

impl<P: Protocol> Stream<P> {
    async fn on_request(&mut self, req: P::Request) -> StepResult {
        let Some(ty) = XdsType::from_url(P::type_url(&req)) else {
            debug!(type_url = %truncate_message(P::type_url(&req)), "ignoring a type meshd does not serve");
            return Ok(());
        };
        let decision = self.state.0.lock().on_request(ty, &req);
        match decision {
            Decision::Respond => {
                self.respond(ty, Mode::Requested, None).await?;
                self.record_pushed();
            }
            Decision::Nack => {
                self.shared.metrics.rejected(ty);
                self.shared.push_log.nacked(ty);
                let nack = self.state.watches().remove(&ty).and_then(|s| s.last_nack);
                match nack {
                    Some(n) => {
                        warn!(node = %self.proxy.id, %ty, version = %n.version, nonce = %n.nonce, code = n.code, error = %n.message, "config rejected by proxy")
                    }
                    None => warn!(node = %self.proxy.id, %ty, "config rejected by proxy"),
                }
            }
            Decision::Ignore(reason) => {
                if reason == Ignored::StaleNonce {
                    self.shared.metrics.expired_nonce(ty);
                }
                debug!(node = %self.proxy.id, %ty, ?reason, "no response");
            }
        }
        Ok(())
    }

    /// Moves to a newer snapshot and pushes what it changed for this stream: its change set if the
    /// stream served the version that set applies to (narrowed to what the proxy's scope sees, before
    /// or after), else everything. A change the proxy cannot see costs it nothing.
    async fn on_snapshot(&mut self, snapshot: Arc<dyn Snapshot>) -> StepResult {
        let (served, version) = (self.snapshot.mesh().version(), snapshot.mesh().version());
        if version <= served {
            return Ok(());
        }
        let changes = scope(&*snapshot, Some(served));
        self.shared.push_log.begin(&*snapshot);
        self.shared.cache.advance(&*snapshot);
        // Endpoints alone change no scope: keep it rather than rebuild it for every endpoint change.
        let new_scope = match &changes {
            PushScope::Endpoints(_) => self.scope.clone(),
            PushScope::Full | PushScope::Partial(_) => scope_of(snapshot.mesh(), &self.proxy),
        };
        let served = self.served.as_ref().and_then(|old| match &changes {
            PushScope::Full => Served::of(snapshot.mesh(), &self.proxy),
            PushScope::Endpoints(hosts) => Some(old.after(snapshot.mesh(), &self.proxy, hosts)),
            PushScope::Partial(c) => {
                let hosts = c.endpoints.union(&c.services).cloned().collect();
                Some(old.after(snapshot.mesh(), &self.proxy, &hosts))
            }
        });
        let recipient = Recipient {
            kind: self.proxy.kind,
            namespace: self.proxy.namespace.as_deref().unwrap_or(""),
            root: &snapshot.mesh().traffic().settings.root_namespace,
            inbound_moved: served != self.served,
            mesh: snapshot.mesh(),
        };
        self.served = served;
        let push = decide(&changes, recipient, &self.scope, &new_scope);
        if !matches!(changes, PushScope::Endpoints(_)) {
            // Also on connect: the gauges follow the snapshot proxies are served.
            self.shared.metrics.config_in_force(snapshot.mesh().traffic());
        }
        self.snapshot = snapshot;
        self.scope = new_scope;
        if push == Push::None {
            self.status.pushed(version);
            return Ok(());
        }
        for ty in XdsType::PUSH_ORDER {
            match &push {
                Push::Full => self.respond(ty, Mode::Pushed, None).await?,
                Push::Listeners(_) if ty == XdsType::Listener => self.respond(ty, Mode::Pushed, None).await?,
                Push::Listeners(_) | Push::Clusters(_) if ty == XdsType::Cluster => {
                    self.respond(ty, Mode::Pushed, None).await?
                }
                Push::Endpoints(hosts) | Push::Listeners(hosts) | Push::Clusters(hosts)
                    if ty == XdsType::Endpoint =>
                {
                    let only = self.watched_clusters_of(hosts);
                    if !only.is_empty() {
                        self.respond(ty, Mode::Pushed, Some(&only)).await?;
                    }
                }
                Push::Endpoints(_) | Push::Listeners(_) | Push::Clusters(_) | Push::None => {}
            }
        }
        if let Some(changed_at) = self.snapshot.changed_at() {
            self.shared.metrics.converged(changed_at.elapsed());
        }
        self.record_pushed();
        self.status.pushed(version);
        Ok(())
    }

    /// EDS names this stream watches that belong to one of `hosts`: looked up per changed service
    /// port (its default, subset and SNI-DNAT clusters for this proxy), so a push costs what changed,
    /// not what the stream subscribes to.
    fn watched_clusters_of(&self, hosts: &BTreeSet<crate::model::Hostname>) -> BTreeSet<Arc<str>> {
        let state = self.state.0.lock();
        let Some(sub) = state.subscription(XdsType::Endpoint) else {
            return BTreeSet::new();
        };
        let mesh = ScopedMesh::new(self.snapshot.mesh(), &self.scope);
        hosts
            .iter()
            .filter_map(|host| mesh.service(host))
            .flat_map(|s| {
                s.ports
                    .iter()
                    .flat_map(|p| cds::port_cluster_names(&mesh, &self.proxy, s, p.port))
            })
            .filter_map(|name| sub.names.get(name.as_str()).cloned())
            .collect()
    }

    async fn respond(&mut self, ty: XdsType, mode: Mode, only: Option<&BTreeSet<Arc<str>>>) -> StepResult {
        let Some(sub) = self.state.0.lock().subscription(ty).cloned() else {
            return Ok(());
        };
        // Pushes hold a permit while they build (the CPU-bound part), not while they send: a client
        // that stops reading blocks only its own stream, never the permits everyone else needs.
        let permit = match mode {
            Mode::Pushed => Some(
                self.shared
                    .permits
                    .acquire()
                    .await
                    .map_err(|_| Error::ShuttingDown)?,
            ),
            Mode::Requested => None,
        };
        let built = Instant::now();
        let ctx = Context {
            mesh: self.snapshot.mesh(),
            proxy: &self.proxy,
            view: &self.view,
            endpoints: &*self.shared.endpoints,
            scope: &self.scope,
        };
        let resources = match (ty, self.shared.secrets.get()) {
            (XdsType::Secret, None) => Vec::new(),
            (XdsType::Secret, Some(source)) => {
                let req = super::SecretRequest {
                    mesh: self.snapshot.mesh(),
                    proxy: &self.proxy,
                    identity: self.caller.verified(),
                    names: sub.names.iter().cloned().collect(),
                };
                source.secrets(req).await
            }
            _ => generate(&ctx, &self.shared.cache, ty, &sub, only),
        };
        drop(permit);
        let build_time = built.elapsed();
        let version = self.snapshot.mesh().version().to_string();
        let mut answered = false;
        for batch in batches(ty, &resources, P::SPLITS_LARGE_SETS) {
            let Some(frame) = self.state.0.lock().response(ty, batch, &version, mode) else {
                continue;
            };
            let limit = self.shared.limits.max_response_bytes;
            if frame.message_len() > limit {
                return Err(Error::ResponseTooLarge {
                    ty,
                    bytes: frame.message_len(),
                    limit,
                });
            }
            let sent = Instant::now();
            self.out.send(Ok(frame)).await;
            self.shared.metrics.pushed(ty, build_time, sent.elapsed());
            debug!(node = %self.proxy.id, %ty, version, ?mode, "sent");
            answered = true;
        }
        if !answered {
            return Ok(());
        }
        *self.pushed.entry(ty).or_default() += 1;
        Ok(())
    }

    /// Records what was sent on the current push version in push_status. A proxy served on request
    /// (it connected after the push, the usual case) counts as pushed as much as one pushed to.
    fn record_pushed(&mut self) {
        if self.pushed.is_empty() {
            return;
        }
        let version = self.snapshot.mesh().version();
        let new_proxy = std::mem::replace(&mut self.counted, version) != version;
        self.shared
            .push_log
            .pushed(version, new_proxy, &std::mem::take(&mut self.pushed));
    }
}

/// `resources` in responses of at most `MAX_RESPONSE_BYTES` when `split` (LDS and CDS whole): always
/// at least one, possibly empty, so a request is still answered.
fn batches(ty: XdsType, resources: &[Arc<Resource>], split: bool) -> Vec<&[Arc<Resource>]> {
    if ty.is_full_state() || !split {
        return vec![resources];
    }
    let mut out = Vec::new();
    let (mut start, mut bytes) = (0, 0);
    for (i, r) in resources.iter().enumerate() {
        let size = r.any().len();
        if bytes + size > MAX_RESPONSE_BYTES && bytes > 0 {
            out.push(&resources[start..i]);
            (start, bytes) = (i, 0);
        }
        bytes += size;
    }
    out.push(&resources[start..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resource(name: &str, size: usize) -> Arc<Resource> {
        Arc::new(Resource::with_version(
            XdsType::Endpoint,
            name.into(),
            vec![0; size],
            1,
        ))
    }

    #[test]
    fn large_endpoint_sets_go_out_in_bounded_batches() {
        // Each encoded `Any` is its value plus ~70 bytes of type URL and header.
        let half = MAX_RESPONSE_BYTES / 2 - 100;
        let rs = vec![
            resource("a", half),
            resource("b", half),
            resource("c", 1),
            resource("d", 3 * half),
        ];
        let sizes: Vec<Vec<String>> = batches(XdsType::Endpoint, &rs, true)
            .iter()
            .map(|b| b.iter().map(|r| r.name.to_string()).collect())
            .collect();
        assert_eq!(sizes, [vec!["a", "b"], vec!["c"], vec!["d"]]);
        assert_eq!(
            batches(XdsType::Cluster, &rs, true).len(),
            1,
            "CDS is one state of the world"
        );
        assert_eq!(
            batches(XdsType::Endpoint, &rs, false).len(),
            1,
            "SotW EDS is one response"
        );
        assert_eq!(
            batches(XdsType::Endpoint, &[], true),
            vec![&[] as &[Arc<Resource>]]
        );
    }
}
