//! One ADS stream, owned by its task: reads requests, follows pushes, answers.
//!
//! Owns: the stream loop shared by both protocols (through [`Protocol`]), the per-stream state (the
//! proxy, the protocol state machine, the snapshot it serves) and publishing its status. Does NOT:
//! decide protocol rules (see [`super::sotw`], [`super::delta`]) or build resources (generators).

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::Arc,
    time::Instant,
};

use envoy_types::pb::envoy::config::core::v3::Node;
use serde::Serialize;
use tokio::sync::mpsc;
use tokio_stream::StreamExt;
use tonic::Status;
use tracing::{debug, info, warn};

use super::{
    Error, Proxy, XdsType,
    generator::{Context, NetworkView, cds},
    push::{Push, PushScope},
    resource::{Resource, Subscription},
    server::{Caller, Shared},
    status::{ConnectionStatus, Held, StatusHandle},
};

/// Longest NACK message kept for debug.
const MAX_NACK_MESSAGE: usize = 4096;

/// What to do with a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Decision {
    /// Answer with the current state of the subscription.
    Respond,
    /// The client rejected our last response: recorded, not answered.
    Nack,
    /// Nothing to send.
    Ignore(Ignored),
}

/// Why a request gets no response (for logs and metrics).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ignored {
    /// An ACK that adds nothing to the subscription.
    Ack,
    /// It answers a response that is no longer the latest (SotW).
    StaleNonce,
    /// It names more resources than a stream may subscribe to.
    TooManyNames,
}

/// Why a response is being built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Answering a request: send the subscription's resources even if the client may have them.
    Requested,
    /// Following a snapshot change: send only if something the client watches changed.
    Pushed,
}

/// A rejected response, kept for debug.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Nack {
    /// The rejected response's nonce.
    pub nonce: String,
    /// The rejected response's version.
    pub version: String,
    /// `error_detail.code`.
    pub code: i32,
    /// `error_detail.message` (truncated).
    pub message: String,
}

/// One type's state, for debug.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TypeStatus {
    /// What is subscribed.
    pub subscription: Subscription,
    /// The nonce of the last response.
    pub nonce_sent: Option<String>,
    /// The nonce the client last ACKed (equal to `nonce_sent` when in sync).
    pub nonce_acked: Option<String>,
    /// The version of the last response.
    pub version_sent: String,
    /// The last version the client ACKed.
    pub version_acked: String,
    /// How many resources the client holds.
    pub resources_sent: usize,
    /// The last NACK, until the next ACK.
    pub last_nack: Option<Nack>,
}

pub(crate) fn truncate_message(m: &str) -> String {
    let mut end = m.len().min(MAX_NACK_MESSAGE);
    while !m.is_char_boundary(end) {
        end -= 1;
    }
    m[..end].to_owned()
}

/// The protocol-specific half of a stream: SotW or delta.
pub(crate) trait Protocol: Default + Send + 'static {
    type Request: Send + 'static;
    type Response: Send + 'static;
    fn type_url(req: &Self::Request) -> &str;
    fn node(req: &Self::Request) -> Option<&Node>;
    fn on_request(&mut self, ty: XdsType, req: &Self::Request) -> Decision;
    fn subscription(&self, ty: XdsType) -> Option<&Subscription>;
    fn response(
        &mut self,
        ty: XdsType,
        resources: Vec<Arc<Resource>>,
        version: &str,
        mode: Mode,
    ) -> Option<Self::Response>;
    fn status(&self) -> BTreeMap<XdsType, TypeStatus>;
}

type Outbox<R> = mpsc::Sender<Result<R, Status>>;

/// The state a stream task owns.
struct Stream<P: Protocol> {
    shared: Arc<Shared>,
    proxy: Proxy,
    view: NetworkView,
    state: P,
    push: Arc<Push>,
    status: StatusHandle,
    out: Outbox<P::Response>,
    /// What the client holds, per type (for config_dump).
    held: BTreeMap<XdsType, Held>,
    /// Responses sent for the push being processed, per type (for push_status).
    pushed: BTreeMap<XdsType, u64>,
}

/// Runs one stream to completion. Errors are sent to the client as its final status.
pub(crate) async fn run<P: Protocol>(
    shared: Arc<Shared>,
    caller: Caller,
    peer: Option<String>,
    mut requests: tonic::Streaming<P::Request>,
    out: Outbox<P::Response>,
    protocol: &'static str,
) where
    P::Request: prost::Message + Default,
{
    let stop = shared.tasks.cancelled();
    tokio::pin!(stop);
    let first = tokio::select! {
        _ = &mut stop => Err(Error::ShuttingDown),
        r = requests.next() => match r {
            None => return,
            Some(Err(status)) => Err(Error::Receive(status)),
            Some(Ok(req)) => Ok(req),
        },
    };
    let start = first.and_then(|req| {
        let proxy = Proxy::from_node(P::node(&req))?;
        caller.authorize(&proxy)?;
        let push = shared.pushes.borrow().clone().ok_or(Error::NotReady)?;
        Ok((req, proxy, push))
    });
    let (first, proxy, push) = match start {
        Ok(s) => s,
        Err(e) => {
            debug!(error = %e, "stream refused");
            let _ = out.send(Err(e.into())).await;
            return;
        }
    };
    shared.cache.advance(push.version(), push.base, &push.scope);
    let status = shared.connections.register(ConnectionStatus {
        id: String::new(),
        protocol,
        peer,
        identities: caller.identities.clone(),
        connected_at: humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
        proxy: Some(proxy.clone()),
        push_version: Some(push.version()),
        watches: BTreeMap::new(),
        sent: BTreeMap::new(),
    });
    status.update(|s| s.id = format!("{}-{}", proxy.id, status.key()));
    info!(node = %proxy.id, kind = ?proxy.kind, protocol, "xDS stream connected");
    shared.push_log.begin(&push);
    shared.metrics.stream_opened();
    let mut pushes = shared.pushes.clone();
    pushes.borrow_and_update();
    let mut stream = Stream::<P> {
        view: NetworkView::of(&proxy),
        shared: shared.clone(),
        proxy,
        state: P::default(),
        push,
        status,
        out,
        held: BTreeMap::new(),
        pushed: BTreeMap::new(),
    };
    let mut next = Some(first);
    let end = loop {
        if let Some(req) = next.take() {
            if let Err(e) = stream.on_request(req).await {
                break e;
            }
            continue;
        }
        tokio::select! {
            biased;
            _ = &mut stop => break Some(Error::ShuttingDown),
            r = requests.next() => match r {
                None => break None,
                Some(Err(status)) => break Some(Error::Receive(status)),
                Some(Ok(req)) => next = Some(req),
            },
            changed = pushes.changed() => {
                if changed.is_err() { break Some(Error::ShuttingDown) }
                let push = pushes.borrow_and_update().clone();
                if let Some(push) = push
                    && let Err(e) = stream.on_push(push).await
                {
                    break e;
                }
            }
        }
    };
    shared.metrics.stream_closed();
    info!(node = %stream.proxy.id, reason = ?end, "xDS stream closed");
    if let Some(e) = end {
        let _ = stream.out.send(Err(e.into())).await;
    }
}

/// `Err(None)`: the client went away.
type StepResult = Result<(), Option<Error>>;

impl<P: Protocol> Stream<P> {
    async fn on_request(&mut self, req: P::Request) -> StepResult {
        let Some(ty) = XdsType::from_url(P::type_url(&req)) else {
            debug!(type_url = %truncate_message(P::type_url(&req)), "ignoring a type meshd does not serve");
            return Ok(());
        };
        match self.state.on_request(ty, &req) {
            Decision::Respond => self.respond(ty, Mode::Requested, None).await?,
            Decision::Nack => {
                self.shared.metrics.rejected(ty);
                self.shared.push_log.nacked(ty);
                let nack = self.state.status().get(&ty).and_then(|s| s.last_nack.clone());
                warn!(node = %self.proxy.id, %ty, ?nack, "config rejected by proxy");
            }
            Decision::Ignore(reason) => {
                if reason == Ignored::StaleNonce {
                    self.shared.metrics.expired_nonce(ty);
                }
                debug!(node = %self.proxy.id, %ty, ?reason, "no response");
            }
        }
        self.publish();
        Ok(())
    }

    async fn on_push(&mut self, push: Arc<Push>) -> StepResult {
        let incremental = push.base.is_some() && push.base == Some(self.push.version());
        let full = PushScope::Full;
        let scope = if incremental { &push.scope } else { &full };
        self.push = push.clone();
        self.shared.push_log.begin(&push);
        self.shared.cache.advance(push.version(), push.base, &push.scope);
        for ty in XdsType::PUSH_ORDER {
            match scope {
                PushScope::Full => self.respond(ty, Mode::Pushed, None).await?,
                PushScope::Endpoints(hosts) if ty == XdsType::Endpoint => {
                    let only = self.watched_clusters_of(hosts);
                    if !only.is_empty() {
                        self.respond(ty, Mode::Pushed, Some(&only)).await?;
                    }
                }
                PushScope::Endpoints(_) => {}
            }
        }
        self.shared.metrics.converged(push.changed_at.elapsed());
        self.shared
            .push_log
            .pushed(push.version(), &std::mem::take(&mut self.pushed));
        self.status.update(|s| s.push_version = Some(push.version()));
        self.publish();
        Ok(())
    }

    /// EDS names this stream watches that belong to one of `hosts`: looked up per changed service
    /// port, so a push costs what changed, not what the stream subscribes to.
    fn watched_clusters_of(&self, hosts: &BTreeSet<crate::model::Hostname>) -> BTreeSet<Arc<str>> {
        let Some(sub) = self.state.subscription(XdsType::Endpoint) else {
            return BTreeSet::new();
        };
        let mesh = &*self.push.mesh;
        hosts
            .iter()
            .filter_map(|host| mesh.service(host))
            .flat_map(|s| s.ports.iter().map(|p| cds::cluster_name(p.port, &s.hostname)))
            .filter_map(|name| sub.names.get(name.as_str()).cloned())
            .collect()
    }

    async fn respond(&mut self, ty: XdsType, mode: Mode, only: Option<&BTreeSet<Arc<str>>>) -> StepResult {
        let Some(sub) = self.state.subscription(ty).cloned() else {
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
                    .map_err(|_| Some(Error::ShuttingDown))?,
            ),
            Mode::Requested => None,
        };
        let built = Instant::now();
        let ctx = Context {
            mesh: &*self.push.mesh,
            proxy: &self.proxy,
            view: &self.view,
            endpoints: &*self.shared.endpoints,
            cache: &self.shared.cache,
        };
        let resources = ctx.generate(ty, &sub, only);
        let version = self.push.version().to_string();
        let response = self.state.response(ty, resources.clone(), &version, mode);
        drop(permit);
        let Some(resp) = response else {
            return Ok(());
        };
        let build_time = built.elapsed();
        let sent = Instant::now();
        self.out.send(Ok(resp)).await.map_err(|_| None)?;
        self.shared.metrics.pushed(ty, build_time, sent.elapsed());
        if mode == Mode::Pushed {
            *self.pushed.entry(ty).or_default() += 1;
        }
        self.hold(ty, &sub, resources, only.is_some());
        debug!(node = %self.proxy.id, %ty, version, ?mode, "sent");
        Ok(())
    }

    /// Records what the client now holds of `ty`: a partial (endpoint-only) answer adds to it, any
    /// other answer is the whole subscription.
    fn hold(&mut self, ty: XdsType, sub: &Subscription, resources: Vec<Arc<Resource>>, partial: bool) {
        let held = Arc::make_mut(self.held.entry(ty).or_default());
        if !partial {
            held.clear();
        }
        held.extend(resources.into_iter().map(|r| (r.name.clone(), r)));
        held.retain(|name, _| sub.wildcard || sub.names.contains(name));
    }

    fn publish(&self) {
        let watches = self.state.status();
        let sent = self.held.clone();
        self.status.update(|s| {
            s.watches = watches;
            s.sent = sent;
        });
    }
}
