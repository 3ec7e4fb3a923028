"""`/debug/config_dump` against real meshd on the sandbox: a real ADS client (xds-protos over grpcio) holds
helloworld's cluster, endpoints, listener and route; the dump is Envoy's admin `ConfigDump` in proto3 JSON,
equal to what the client decoded from the stream, and `meshctl proxy-config` tabulates it."""

from __future__ import annotations

import json
import subprocess

import pytest
from google.protobuf import json_format

from meshd_proc import BIN_DIR, Meshd, eventually
from xdsharness import CDS, EDS, LDS, RDS, Ads, decode, grpc_node

NODE = "sidecar~10.10.0.97~dump-0.sample~sample.svc.cluster.local"
HOST = "helloworld.sample.svc.cluster.local"
CLUSTER = f"outbound|5000||{HOST}"
LISTENER = f"{HOST}:5000"
ADMIN = "type.googleapis.com/envoy.admin.v3."
TLS = "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext"
# Proxyless gRPC gets Istio mTLS only from a DestinationRule (as with istiod): the dump shows its context.
DR = json.dumps({"apiVersion": "networking.istio.io/v1", "kind": "DestinationRule",
                 "metadata": {"name": "helloworld-mtls", "namespace": "sample"},
                 "spec": {"host": "helloworld", "trafficPolicy": {"tls": {"mode": "ISTIO_MUTUAL"}}}})


@pytest.fixture(scope="module")
def held(tmp_path_factory):
    """meshd, and a gRPC client on network1 that subscribed to and ACKed helloworld on every type; yields
    what it decoded per type."""
    m = Meshd(tmp_path_factory.mktemp("config-dump"))
    m.kubectl("cluster1", "apply", "-f", "-", stdin=DR)
    ads = Ads(f"127.0.0.1:{m.grpc}")
    got = {}
    try:
        node = grpc_node(NODE, NAMESPACE="sample", CLUSTER_ID="cluster1", NETWORK="network1")
        for ty, names in [(CDS, [CLUSTER]), (EDS, [CLUSTER]), (LDS, [LISTENER]), (RDS, [CLUSTER])]:
            ads.send(ty, node=node if ty == CDS else None, resource_names=names)
            resp = ads.recv(timeout=10)
            # The DestinationRule may reach the mesh after the first CDS response: take its push.
            while ty == CDS and not decode(resp)[CLUSTER].HasField("transport_socket"):
                ads.ack(resp, names)
                resp = ads.recv(timeout=10)
            assert resp.type_url == ty
            ads.ack(resp, names)
            got[ty] = decode(resp)
        yield m, got
    finally:
        ads.close()
        assert m.stop() == 0, m.log()


def dump(m: Meshd) -> dict:
    status, body = m.get(f"/debug/config_dump?proxyID={NODE.replace('~', '%7E')}")
    assert status == 200, body
    return json.loads(body)


def section(d: dict, kind: str) -> dict:
    (s,) = [c for c in d["configs"] if c["@type"] == ADMIN + kind]
    return s


def as_json(msg) -> dict:
    """The proto3 JSON of a decoded resource, with its `@type` as an expanded `Any` has it."""
    return {"@type": f"type.googleapis.com/{msg.DESCRIPTOR.full_name}",
            **json_format.MessageToDict(msg, preserving_proto_field_name=True)}


def test_config_dump_is_envoy_admin_config_dump_in_proto3_json(held):
    m, got = held
    d = eventually("the held routes in the dump",
                   lambda: (d := dump(m)) and section(d, "RoutesConfigDump").get("dynamic_route_configs") and d)
    assert [c["@type"] for c in d["configs"]] == [
        ADMIN + k for k in ("ClustersConfigDump", "ListenersConfigDump", "RoutesConfigDump", "EndpointsConfigDump")]

    clusters = section(d, "ClustersConfigDump")
    assert clusters["version_info"]
    (entry,) = clusters["dynamic_active_clusters"]
    cluster = entry["cluster"]
    assert cluster["name"] == CLUSTER and cluster["type"] == "EDS"
    # The mTLS context in clear text: the Any expanded with its @type.
    tls = [s["typed_config"] for s in
           [cluster.get("transport_socket", {})] + [t["transport_socket"] for t in cluster.get("transport_socket_matches", [])]
           if s.get("typed_config", {}).get("@type") == TLS]
    assert tls and "common_tls_context" in tls[0], cluster

    (eps,) = section(d, "EndpointsConfigDump")["dynamic_endpoint_configs"]
    cla = eps["endpoint_config"]
    assert cla["cluster_name"] == CLUSTER
    addresses = {lb["endpoint"]["address"]["socket_address"]["address"]
                 for loc in cla["endpoints"] for lb in loc["lb_endpoints"]}
    assert {"10.10.0.7", "10.10.2.4"} <= addresses, addresses

    (listener,) = section(d, "ListenersConfigDump")["dynamic_listeners"]
    assert listener["name"] == LISTENER and listener["active_state"]["listener"]["name"] == LISTENER
    (route,) = section(d, "RoutesConfigDump")["dynamic_route_configs"]
    assert route["route_config"]["name"] == CLUSTER
    assert route["route_config"]["virtual_hosts"][0]["name"] == LISTENER

    # The same resources the client decoded from the stream, field for field.
    assert cluster == as_json(got[CDS][CLUSTER])
    assert cla == as_json(got[EDS][CLUSTER])
    assert listener["active_state"]["listener"] == as_json(got[LDS][LISTENER])
    assert route["route_config"] == as_json(got[RDS][CLUSTER])


def test_config_dump_refuses_unknown_and_missing_proxies(held):
    m, _ = held
    assert m.get("/debug/config_dump")[0] == 400
    assert m.get("/debug/config_dump?proxyID=nobody")[0] == 404


def meshctl(m: Meshd, *args: str) -> str:
    out = subprocess.run([str(BIN_DIR / "meshctl"), "--meshd", f"http://127.0.0.1:{m.monitoring}", *args],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_meshctl_proxy_config_tables_and_raw_sections(held):
    m, _ = held
    eventually("routes held", lambda: section(dump(m), "RoutesConfigDump").get("dynamic_route_configs"))
    clusters = meshctl(m, "proxy-config", "clusters", NODE).splitlines()
    assert clusters[0].split() == ["SERVICE", "FQDN", "PORT", "SUBSET", "DIRECTION", "TYPE"]
    assert clusters[1].split() == [HOST, "5000", "-", "outbound", "EDS"]
    endpoints = meshctl(m, "proxy-config", "endpoints", NODE)
    assert any(line.split()[:2] == ["10.10.0.7:5000", "HEALTHY"] and line.split()[2] == CLUSTER
               for line in endpoints.splitlines()), endpoints
    listeners = meshctl(m, "proxy-config", "listeners", NODE).splitlines()
    assert listeners[1].split() == [LISTENER, "-", "-", "-", "Route:", CLUSTER]
    routes = meshctl(m, "proxy-config", "routes", NODE).splitlines()
    row = routes[1].split()
    assert row[:3] == [CLUSTER, LISTENER, LISTENER] and row[3].startswith("+") and row[-1] == "/*", routes
    raw = json.loads(meshctl(m, "proxy-config", "clusters", NODE, "-o", "json"))
    assert raw == section(dump(m), "ClustersConfigDump")
