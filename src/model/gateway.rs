//! Network gateways: how endpoints on another network are reached (split-horizon EDS).

use std::{net::IpAddr, sync::Arc};

use serde::Serialize;

use super::{ClusterId, NetworkId};

/// A resolved gateway into `network` (istiod's `NetworkGateway`): one address and port. A gateway
/// Service with several load-balancer addresses, or a DNS name resolving to several IPs, is several
/// gateways.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NetworkGateway {
    /// The network it leads into.
    pub network: NetworkId,
    /// The cluster whose Service provided it; `None` for a fixed meshNetworks `address`.
    pub cluster: Option<ClusterId>,
    /// Where to send traffic.
    pub address: IpAddr,
    /// The gateway's mTLS (AUTO_PASSTHROUGH) port, 15443 by convention.
    pub port: u16,
    /// The DNS name `address` was resolved from, if any (for `/debug/networkz`).
    pub hostname: Option<Arc<str>>,
}
