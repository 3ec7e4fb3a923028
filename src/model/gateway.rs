//! Network gateways: how endpoints on another network are reached (split-horizon EDS).

use serde::Serialize;

use super::{ClusterId, ExternalAddress, NetworkId};

/// A gateway into `network`, from meshNetworks (a fixed address, or the external address of a
/// registry service in `cluster`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NetworkGateway {
    /// The network it leads into.
    pub network: NetworkId,
    /// The cluster whose service provided it; `None` for a fixed meshNetworks address.
    pub cluster: Option<ClusterId>,
    /// Where to send traffic.
    pub address: ExternalAddress,
    /// The gateway's mTLS port (15443 by convention).
    pub port: u16,
}
