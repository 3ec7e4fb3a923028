//! What the SotW and delta state machines have in common: the [`Protocol`] a stream drives, the
//! decisions it returns, nonces, and the per-type exchange (sent, acknowledged, rejected) both record
//! for debug.

use std::{collections::BTreeMap, sync::Arc};

use envoy_types::pb::{envoy::config::core::v3::Node, google::rpc::Status};
use serde::Serialize;

use super::{Resource, Subscription, XdsType, held::Held, wire::Frame};

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

impl Decision {
    /// A request that passed the protocol's checks: answered when it subscribes to something new,
    /// otherwise a plain ACK.
    pub(crate) fn subscribes_more(more: bool) -> Self {
        if more {
            Self::Respond
        } else {
            Self::Ignore(Ignored::Ack)
        }
    }
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

/// What both protocols track about one type's responses and the client's answers to them: the
/// nonce and version of the last response, the last ACK and the last NACK.
#[derive(Debug, Default)]
pub(crate) struct Exchange {
    nonce: Option<String>,
    nonce_acked: Option<String>,
    version_sent: String,
    version_acked: String,
    nack: Option<Nack>,
}

impl Exchange {
    /// Whether `nonce` is that of the latest response.
    pub(crate) fn is_latest(&self, nonce: &str) -> bool {
        self.nonce.as_deref() == Some(nonce)
    }

    /// A response with `nonce` goes out at `version`.
    pub(crate) fn sent(&mut self, nonce: String, version: &str) {
        self.nonce = Some(nonce);
        version.clone_into(&mut self.version_sent);
    }

    /// The client accepted the response `nonce`; it now runs `version`.
    pub(crate) fn acked(&mut self, nonce: &str, version: &str) {
        self.nack = None;
        // Into the previous ACK's buffer: every response is acknowledged, mostly with a nonce as long.
        match &mut self.nonce_acked {
            Some(acked) => nonce.clone_into(acked),
            None => self.nonce_acked = Some(nonce.to_owned()),
        }
        version.clone_into(&mut self.version_acked);
    }

    /// The client acknowledged the latest response (delta: ACKs carry no version, so it is ours).
    pub(crate) fn acked_latest(&mut self, nonce: &str) {
        let version = std::mem::take(&mut self.version_sent);
        self.acked(nonce, &version);
        self.version_sent = version;
    }

    /// The client rejected the response `nonce` with `error`.
    pub(crate) fn nacked(&mut self, nonce: &str, error: &Status) {
        self.nack = Some(Nack {
            nonce: nonce.to_owned(),
            version: self.version_sent.clone(),
            code: error.code,
            message: truncate_message(&error.message),
        });
    }

    /// The version the client last reported running (SotW NACKs carry it too).
    pub(crate) fn set_version_acked(&mut self, version: &str) {
        version.clone_into(&mut self.version_acked);
    }

    /// The debug view of this type.
    pub(crate) fn status(&self, subscription: &Subscription, resources_sent: usize) -> TypeStatus {
        TypeStatus {
            subscription: subscription.clone(),
            nonce_sent: self.nonce.clone(),
            nonce_acked: self.nonce_acked.clone(),
            version_sent: self.version_sent.clone(),
            version_acked: self.version_acked.clone(),
            resources_sent,
            last_nack: self.nack.clone(),
        }
    }
}

/// Nonces unique within a stream.
#[derive(Debug, Default)]
pub(crate) struct Nonces(u64);

impl Nonces {
    pub(crate) fn next(&mut self) -> String {
        self.0 += 1;
        self.0.to_string()
    }
}

pub(crate) fn truncate_message(m: &str) -> String {
    let mut end = m.len().min(MAX_NACK_MESSAGE);
    while !m.is_char_boundary(end) {
        end -= 1;
    }
    m[..end].to_owned()
}

/// The protocol-specific half of a stream: SotW or delta. Responses come out as [`Frame`]s referencing
/// the shared encoded resources.
pub(crate) trait Protocol: Default + Send + 'static {
    type Request: prost::Message + Default + Send + 'static;
    /// Whether large EDS/RDS sets go out in several bounded responses (the stream splits them).
    const SPLITS_LARGE_SETS: bool;
    fn type_url(req: &Self::Request) -> &str;
    fn node(req: &Self::Request) -> Option<&Node>;
    fn on_request(&mut self, ty: XdsType, req: &Self::Request) -> Decision;
    fn subscription(&self, ty: XdsType) -> Option<&Subscription>;
    fn response(
        &mut self,
        ty: XdsType,
        resources: &[Arc<Resource>],
        version: &str,
        mode: Mode,
    ) -> Option<Frame>;
    fn status(&self) -> BTreeMap<XdsType, TypeStatus>;
    /// What the client holds, as this state machine recorded it (shared with `/debug/config_dump`).
    fn held(&self) -> &Held;
}
