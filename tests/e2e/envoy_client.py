"""What an Envoy sidecar does, at the transport level, with the xDS meshd sends it: the end-to-end tests
have no Envoy, so this client reads the sidecar's RDS, CDS and EDS answers (raw ADS) and opens the
connections Envoy would open, through real peers (the HAProxy east-west gateway, TLS servers with mesh
certificates). Nothing here is configured by hand: the route's weights, the cluster's SNI and ALPNs and
the endpoints all come from meshd's answers.

Envoy's choices, reduced to what the tests exercise:

- a route's ``weighted_clusters`` pick the cluster in proportion to their weights;
- the endpoint comes from the first priority that has a healthy endpoint (UNKNOWN or HEALTHY; the tests
  make a priority wholly healthy or wholly not, so Envoy's partial spill-over never applies), in
  proportion to its ``load_balancing_weight``;
- the connection is TLS with the cluster's Istio-mTLS transport socket: its ``sni``, its ALPNs, the mesh
  certificate, the server verified against the mesh root (by chain, not by host name: Istio checks the
  SPIFFE identity)."""

from __future__ import annotations

import random
import socket
import ssl
from pathlib import Path

from envoy.extensions.filters.network.http_connection_manager.v3 import http_connection_manager_pb2 as hcm_pb2
from envoy.extensions.transport_sockets.tls.v3 import tls_pb2

HEALTHY = (0, 1)  # UNKNOWN, HEALTHY


def route_config_name(listener) -> str:
    """The RDS name an HTTP listener's HttpConnectionManager asks for."""
    hcm = hcm_pb2.HttpConnectionManager()
    assert len(listener.filter_chains) >= 1, listener.name
    assert listener.filter_chains[0].filters[0].typed_config.Unpack(hcm), listener.name
    return hcm.rds.route_config_name


def route_weights(route_config, domain: str) -> dict[str, int]:
    """cluster → weight of the catch-all route of the virtual host serving ``domain``."""
    vhost = next(vh for vh in route_config.virtual_hosts if domain in vh.domains)
    action = vhost.routes[-1].route
    if action.HasField("weighted_clusters"):
        return {c.name: c.weight.value for c in action.weighted_clusters.clusters}
    return {action.cluster: 1}


def upstream_tls(cluster) -> tuple[str, list[str]]:
    """The SNI and ALPNs of a cluster's Istio-mTLS transport socket (a match or the default socket)."""
    tls = tls_pb2.UpstreamTlsContext()
    sockets = [m.transport_socket for m in cluster.transport_socket_matches] + [cluster.transport_socket]
    assert any(t.typed_config.Unpack(tls) for t in sockets if t.name), f"{cluster.name}: no Istio mTLS socket"
    return tls.sni, list(tls.common_tls_context.alpn_protocols)


def active_priority(assignment) -> list[tuple[tuple[str, int], int]]:
    """The healthy endpoints of the first priority that has one, as ``((ip, port), weight)``."""
    by_priority: dict[int, list] = {}
    for loc in assignment.endpoints:
        for e in loc.lb_endpoints:
            if e.health_status in HEALTHY:
                addr = e.endpoint.address.socket_address
                weight = e.load_balancing_weight.value or 1
                by_priority.setdefault(loc.priority, []).append(((addr.address, addr.port_value), weight))
    return by_priority[min(by_priority)] if by_priority else []


def pick(rng: random.Random, weighted: dict | list):
    """One key of ``{key: weight}`` (or of ``[(key, weight)]``), in proportion to the weights."""
    items = list(weighted.items()) if isinstance(weighted, dict) else list(weighted)
    assert items, "nothing to pick from"
    return rng.choices([k for k, _ in items], weights=[w for _, w in items])[0]


def connect(addr: tuple[str, int], sni: str | None, alpns: list[str], certs: Path) -> str:
    """One mTLS connection as a sidecar opens it; what the server answers (its name), or what failed."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False  # Istio verifies the SPIFFE identity, not a host name
    ctx.load_verify_locations(certs / "root-cert.pem")
    ctx.load_cert_chain(certs / "cert-chain.pem", certs / "key.pem")
    ctx.set_alpn_protocols(alpns)
    try:
        with socket.create_connection(addr, timeout=5) as raw, ctx.wrap_socket(raw, server_hostname=sni) as tls:
            return tls.recv(100).decode() or "closed"
    except (OSError, ssl.SSLError) as e:
        return f"refused: {type(e).__name__}"
