//! Watch streams: newline-delimited JSON events with history replay, selector transitions, bookmarks, the
//! streaming-list end marker, timeouts, and clean ends on lag, fault or shutdown.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use bytes::{BufMut, Bytes, BytesMut};
use http::{Response, StatusCode};
use serde_json::{Value, json};
use tokio::sync::broadcast::error::{RecvError, TryRecvError};
use tokio::time::{Instant, Interval};
use tokio_util::sync::CancellationToken;

use super::Ctx;
use super::error::Error;
use super::http::respond_bytes;
use super::kinds::Kind;
use super::object::Obj;
use super::selector::Filter;
use super::store::{Event, EventType, WatchFrom};
use super::table::{self, Include};

const BOOKMARK_EVERY: Duration = Duration::from_secs(1);
/// Initial events are batched into chunks of about this size; live events are flushed one by one.
const CHUNK: usize = 64 * 1024;

pub(crate) struct WatchRequest {
    pub(crate) kind: &'static Kind,
    pub(crate) filter: Filter,
    pub(crate) from: WatchFrom,
    pub(crate) bookmarks: bool,
    /// `sendInitialEvents=true`: mark the end of the initial ADDED events with an annotated BOOKMARK.
    pub(crate) initial_events_end: bool,
    pub(crate) timeout: Duration,
    /// Render each object as a one-row Table (`kubectl get -w`).
    pub(crate) table: Option<Include>,
}

struct WatchState {
    ctx: Arc<Ctx>,
    req: WatchRequest,
    queue: VecDeque<Bytes>,
    rx: tokio::sync::broadcast::Receiver<Arc<Event>>,
    bookmarks: Option<Interval>,
    deadline: Instant,
    dropped: CancellationToken,
    /// Cancelled when the watch must go silent (a blackhole fault).
    silenced: CancellationToken,
}

/// Starts a watch; a too-old resourceVersion is an ERROR event in a 200 response, as on a real server.
pub(crate) fn respond(ctx: Arc<Ctx>, req: WatchRequest) -> Response<Body> {
    let start = match ctx.store.watch(req.kind.id(), &req.filter, req.from) {
        Ok(start) => start,
        Err(err @ Error::Expired { .. }) => {
            let line = event_line("ERROR", &serde_json::to_vec(&err.to_status()).unwrap_or_default());
            return respond_bytes(StatusCode::OK, "application/json", line);
        }
        Err(err) => return super::http::respond_error(&err),
    };
    let mut state = WatchState {
        queue: VecDeque::new(),
        rx: start.rx,
        bookmarks: req
            .bookmarks
            .then(|| tokio::time::interval_at(Instant::now() + BOOKMARK_EVERY, BOOKMARK_EVERY)),
        deadline: Instant::now() + req.timeout,
        dropped: ctx.faults.watch_token(),
        silenced: ctx.faults.silence_token(),
        ctx,
        req,
    };
    for obj in &start.initial {
        state.push(EventType::Added, obj);
    }
    for ev in &start.replay {
        state.handle(ev);
    }
    if state.req.initial_events_end {
        state.push_bookmark(start.rv, true);
    }
    let stream = futures::stream::unfold(state, |mut st| async move {
        st.next_chunk().await.map(|c| (Ok::<_, Infallible>(c), st))
    });
    respond_bytes(StatusCode::OK, "application/json", Body::from_stream(stream))
}

fn event_line(etype: &str, object: &[u8]) -> Bytes {
    let mut buf = BytesMut::with_capacity(object.len() + 32);
    buf.put_slice(b"{\"type\":\"");
    buf.put_slice(etype.as_bytes());
    buf.put_slice(b"\",\"object\":");
    buf.put_slice(object);
    buf.put_slice(b"}\n");
    buf.freeze()
}

impl WatchState {
    fn push(&mut self, etype: EventType, obj: &Obj) {
        let converted = crate::crd::served(self.req.kind, obj);
        let obj = converted.as_ref().unwrap_or(obj);
        let line = match self.req.table {
            None => event_line(etype.as_str(), &obj.raw),
            Some(include) => {
                let meta = json!({"resourceVersion": obj.rv.to_string()});
                let t = table::table(self.req.kind, [obj], include, meta);
                event_line(etype.as_str(), &serde_json::to_vec(&t).unwrap_or_default())
            }
        };
        self.queue.push_back(line);
    }

    fn push_bookmark(&mut self, rv: u64, initial_end: bool) {
        let mut meta = json!({"resourceVersion": rv.to_string()});
        if initial_end {
            meta["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        let obj: Value =
            json!({"kind": self.req.kind.kind, "apiVersion": self.req.kind.api_version(), "metadata": meta});
        self.queue.push_back(event_line(
            "BOOKMARK",
            &serde_json::to_vec(&obj).unwrap_or_default(),
        ));
    }

    /// Queues what this watcher sees of a store event: selectors turn updates into ADDED/DELETED when an
    /// object enters or leaves the selection.
    fn handle(&mut self, ev: &Event) {
        if ev.kind != self.req.kind.id() {
            return;
        }
        let f = &self.req.filter;
        let now = f.matches(&ev.obj);
        let before = ev.prev.as_ref().is_some_and(|p| f.matches(p));
        let seen = match (ev.etype, before, now) {
            (EventType::Added, _, true) => Some(EventType::Added),
            (EventType::Deleted, _, true) => Some(EventType::Deleted),
            (EventType::Modified, true, true) => Some(EventType::Modified),
            (EventType::Modified, false, true) => Some(EventType::Added),
            (EventType::Modified, true, false) => Some(EventType::Deleted),
            _ => None,
        };
        if let Some(etype) = seen {
            self.push(etype, &ev.obj);
        }
    }

    fn take_chunk(&mut self) -> Option<Bytes> {
        let first = self.queue.pop_front()?;
        if self
            .queue
            .front()
            .is_none_or(|next| first.len() + next.len() > CHUNK)
        {
            return Some(first);
        }
        let mut buf = BytesMut::from(&first[..]);
        while let Some(next) = self.queue.front().filter(|n| buf.len() + n.len() <= CHUNK) {
            buf.put_slice(next);
            self.queue.pop_front();
        }
        Some(buf.freeze())
    }

    /// The next bytes to send, or `None` to end the response (timeout, lag, dropped, shutdown).
    async fn next_chunk(&mut self) -> Option<Bytes> {
        loop {
            if let Some(chunk) = self.take_chunk() {
                return Some(chunk);
            }
            let tick = async {
                match self.bookmarks.as_mut() {
                    Some(interval) => interval.tick().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                received = self.rx.recv() => match received {
                    Ok(ev) => self.handle(&ev),
                    Err(RecvError::Lagged(n)) => {
                        tracing::debug!(missed = n, "closing a watch that fell behind");
                        return None;
                    }
                    Err(RecvError::Closed) => return None,
                },
                _ = tick => if !self.bookmark_now() {
                    return None;
                },
                _ = tokio::time::sleep_until(self.deadline) => return None,
                _ = self.dropped.cancelled() => return None,
                _ = self.silenced.cancelled() => {
                    // Blackholed: hold the response open, send nothing, until the client gives up.
                    self.ctx.shutdown.cancelled().await;
                    return None;
                }
                _ = self.ctx.shutdown.cancelled() => return None,
            }
        }
    }

    /// A BOOKMARK at the current revision, after every event up to it has been queued (so a client resuming
    /// from the bookmark misses nothing). `false` when the watcher fell behind and must close.
    fn bookmark_now(&mut self) -> bool {
        let rv = self.ctx.store.revision();
        loop {
            match self.rx.try_recv() {
                Ok(ev) => self.handle(&ev),
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Lagged(_) | TryRecvError::Closed) => return false,
            }
        }
        self.push_bookmark(rv, false);
        true
    }
}
