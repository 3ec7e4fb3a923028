"""Ingress gateways on the sandbox (issue 32 items 1 and 2), with a raw ADS client as the gateway's Envoy.

The sandbox's ingress gateway in cluster1 (as Istio's chart installs it: ServiceAccount, the
``istio-ingressgateway-sds`` Role that lets it read Secrets in its namespace, a Service 80 → 8080,
443 → 8443, 31400, its pod) gets a ``kubernetes.io/tls`` Secret and Istio's documentation examples
bound to it with kubectl (replacing the sandbox's own Gateway and VirtualService): HTTP and HTTPS (SIMPLE, ``credentialName``) for helloworld, MUTUAL for another host, TLS
PASSTHROUGH by SNI to reviews, and a TCP route to echo's ``tcp-echo`` port. A router node
(``router~…``, the labels the Gateway selects) then gets, on 15010: one listener per port, the HTTP
routes, and the clusters its routes name with split-horizon endpoints (helloworld is also in cluster2
on network2: through network2's east-west gateway). On 15012, authenticated by the gateway service
account's token, SDS serves the certificate and its CA; another namespace's identity, and one of the
gateway's namespace without the RBAC grant, get nothing but the public CA. A rotated Secret is pushed;
a change to any other Secret pushes nothing; no debug view shows the key.
"""

from __future__ import annotations

import datetime
import json
import textwrap

import grpc
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from envoy.extensions.transport_sockets.tls.v3 import secret_pb2, tls_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import http_connection_manager_pb2 as hcm_pb2
from envoy.extensions.filters.network.tcp_proxy.v3 import tcp_proxy_pb2

from meshd_proc import Meshd, eventually
from xdsharness import CDS, EDS, LDS, RDS, Ads, decode, sidecar_node

SDS = "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret"
GW_IP = "10.10.0.30"
GW_SA = "istio-ingressgateway-service-account"
HELLO = "outbound|5000||helloworld.sample.svc.cluster.local"
NETWORK2_GATEWAY = "198.51.100.10"


def certificate(cn: str) -> tuple[str, str]:
    """A self-signed certificate and its key, PEM."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now)
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(cn)]), critical=False)
            .sign(key, hashes.SHA256()))
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    return cert.public_bytes(serialization.Encoding.PEM).decode(), key_pem.decode()


def tls_secret(name: str, cert: str, key: str, ca: str | None = None) -> str:
    data = {"tls.crt": cert, "tls.key": key} | ({"ca.crt": ca} if ca else {})
    return json.dumps({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
                       "metadata": {"name": name, "namespace": "istio-system"}, "stringData": data})


# The sandbox's own ingress gateway (clusters/cluster1/25-ingressgateway.yaml: its ServiceAccount, the
# `istio-ingressgateway-sds` Role, a Service 80 → 8080, 443 → 8443, 31400, its pod at GW_IP) is the one
# used; the test adds an identity of its namespace without the Role.
GATEWAY_INSTALL = """
apiVersion: v1
kind: ServiceAccount
metadata: {name: no-secrets, namespace: istio-system}
"""

ROUTING = """
apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {name: ingress, namespace: istio-system}
spec:
  selector: {istio: ingressgateway}
  servers:
  - port: {number: 80, name: http, protocol: HTTP}
    hosts: [helloworld.example.com]
  - port: {number: 443, name: https, protocol: HTTPS}
    tls: {mode: SIMPLE, credentialName: httpbin-credential}
    hosts: [helloworld.example.com]
  - port: {number: 443, name: https-mtls, protocol: HTTPS}
    tls: {mode: MUTUAL, credentialName: httpbin-credential}
    hosts: [mtls.example.com]
  - port: {number: 443, name: tls-passthrough, protocol: TLS}
    tls: {mode: PASSTHROUGH}
    hosts: [reviews.example.com]
  - port: {number: 31400, name: tcp, protocol: TCP}
    hosts: ['*']
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: helloworld-ingress, namespace: sample}
spec:
  hosts: [helloworld.example.com, mtls.example.com]
  gateways: [istio-system/ingress]
  http:
  - match: [{uri: {prefix: /hello}}]
    route: [{destination: {host: helloworld, port: {number: 5000}}}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: reviews-passthrough, namespace: sample}
spec:
  hosts: [reviews.example.com]
  gateways: [istio-system/ingress]
  tls:
  - match: [{port: 443, sniHosts: [reviews.example.com]}]
    route: [{destination: {host: reviews, port: {number: 9080}}}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: echo-tcp, namespace: sample}
spec:
  hosts: ['*']
  gateways: [istio-system/ingress]
  tcp:
  - match: [{port: 31400}]
    route: [{destination: {host: echo.sample.svc.cluster.local, port: {number: 9090}}}]
"""


def gateway_node(ns: str = "istio-system", sa: str = GW_SA, cluster: str = "cluster1"):
    return sidecar_node(f"router~{GW_IP}~istio-ingressgateway-7d4b.{ns}~{ns}.svc.cluster.local",
                        NAMESPACE=ns, CLUSTER_ID=cluster, NETWORK="network1", INSTANCE_IPS=GW_IP,
                        SERVICE_ACCOUNT=sa, LABELS={"app": "istio-ingressgateway", "istio": "ingressgateway"})


@pytest.fixture(scope="module")
def mesh(tmp_path_factory):
    m = Meshd(tmp_path_factory.mktemp("ingress"))
    cert, key = certificate("helloworld.example.com")
    ca, _ = certificate("client-ca.example.com")
    m.kubectl("cluster1", "apply", "-f", "-", stdin=GATEWAY_INSTALL)
    m.kubectl("cluster1", "apply", "-f", "-", stdin=tls_secret("httpbin-credential", cert, key, ca))
    m.kubectl("cluster1", "apply", "-f", "-", stdin=ROUTING)
    eventually("the gateway's Service in registryz", lambda: any(
        s["hostname"] == "istio-ingressgateway.istio-system.svc.cluster.local" for s in m.json("/debug/registryz")))
    yield m, {"cert": cert, "key": key, "ca": ca}
    assert m.stop() == 0, m.log()


def answer(m: Meshd, type_url: str, names=(), node=None) -> dict:
    ads = Ads(f"127.0.0.1:{m.grpc}")
    try:
        ads.send(type_url, node=node or gateway_node(), resource_names=list(names))
        return decode(ads.recv(timeout=10))
    finally:
        ads.close()


def typed(any_msg, cls):
    out = cls()
    any_msg.Unpack(out)
    return out


def chains(listener) -> list[tuple[list[str], object]]:
    """Each filter chain's SNI names and its (decoded) first filter."""
    out = []
    for ch in listener.filter_chains:
        cfg = ch.filters[0].typed_config
        cls = hcm_pb2.HttpConnectionManager if cfg.type_url.endswith("HttpConnectionManager") else tcp_proxy_pb2.TcpProxy
        out.append((list(ch.filter_chain_match.server_names), typed(cfg, cls), ch))
    return out


def test_the_gateway_gets_a_listener_per_port_as_istiod_merges_servers(mesh):
    m, _ = mesh
    listeners = eventually("three gateway listeners", lambda: (
        ls if set(ls := answer(m, LDS)) == {"0.0.0.0_8080", "0.0.0.0_8443", "0.0.0.0_31400"} else None), timeout=30)
    [(sni, http, _)] = chains(listeners["0.0.0.0_8080"])
    assert sni == [] and http.rds.route_config_name == "http.8080"
    by_sni = {tuple(s): (f, ch) for s, f, ch in chains(listeners["0.0.0.0_8443"])}
    assert set(by_sni) == {("helloworld.example.com",), ("mtls.example.com",), ("reviews.example.com",)}
    simple, simple_chain = by_sni[("helloworld.example.com",)]
    assert simple.rds.route_config_name == "https.443.https.ingress.istio-system"
    ctx = typed(simple_chain.transport_socket.typed_config, tls_pb2.DownstreamTlsContext)
    assert [s.name for s in ctx.common_tls_context.tls_certificate_sds_secret_configs] == [
        "kubernetes://httpbin-credential"]
    assert not ctx.require_client_certificate.value
    mutual, mutual_chain = by_sni[("mtls.example.com",)]
    ctx = typed(mutual_chain.transport_socket.typed_config, tls_pb2.DownstreamTlsContext)
    assert ctx.require_client_certificate.value
    assert (ctx.common_tls_context.combined_validation_context.validation_context_sds_secret_config.name
            == "kubernetes://httpbin-credential-cacert")
    passthrough, pt_chain = by_sni[("reviews.example.com",)]
    assert passthrough.cluster == "outbound|9080||reviews.sample.svc.cluster.local"
    assert not pt_chain.HasField("transport_socket"), "passthrough does not terminate TLS"
    [(_, tcp, _)] = chains(listeners["0.0.0.0_31400"])
    assert tcp.cluster == "outbound|9090||echo.sample.svc.cluster.local"


def test_routes_come_from_the_virtual_services_bound_to_the_gateway(mesh):
    m, _ = mesh
    routes = answer(m, RDS, ["http.8080", "https.443.https.ingress.istio-system"])
    for name, port in (("http.8080", 80), ("https.443.https.ingress.istio-system", 443)):
        [vh] = routes[name].virtual_hosts
        assert (vh.name, list(vh.domains)) == (f"helloworld.example.com:{port}", ["helloworld.example.com"])
        assert [(r.match.prefix, r.route.cluster) for r in vh.routes] == [("/hello", HELLO)]
    # Mesh-bound routing is kept apart: a sidecar's helloworld route is still the default one.
    sidecar = sidecar_node("sidecar~10.10.0.7~helloworld-v1.sample~sample.svc.cluster.local",
                           NAMESPACE="sample", CLUSTER_ID="cluster1", NETWORK="network1")
    port_5000 = answer(m, RDS, ["5000"], node=sidecar)["5000"]
    [hello] = [vh for vh in port_5000.virtual_hosts if vh.name.startswith("helloworld.sample")]
    assert [r.name for r in hello.routes] == ["default"]


def test_the_gateway_reaches_another_network_through_split_horizon(mesh):
    m, _ = mesh
    assert HELLO in answer(m, CDS)
    cla = answer(m, EDS, [HELLO])[HELLO]
    addresses = {e.endpoint.address.socket_address.address for group in cla.endpoints for e in group.lb_endpoints}
    assert "10.10.0.7" in addresses, addresses  # cluster1's ready helloworld pod, directly
    assert NETWORK2_GATEWAY in addresses, addresses  # cluster2's, behind network2's east-west gateway
    assert not any(a.startswith("10.20.") for a in addresses), "never network2's pod addresses"


def token(m: Meshd, ns: str, sa: str) -> str:
    return m.kubectl("cluster1", "create", "token", sa, "-n", ns, "--audience", "istio-ca").strip()


def secure_ads(m: Meshd, ns: str, sa: str) -> Ads:
    root = (m.state / "certs" / "root-cert.pem").read_bytes()
    creds = grpc.composite_channel_credentials(grpc.ssl_channel_credentials(root_certificates=root),
                                               grpc.access_token_call_credentials(token(m, ns, sa)))
    return Ads("", channel=grpc.secure_channel(f"localhost:{m.secure}", creds))


def sds(ads: Ads, names: list[str], node) -> tuple[object, dict]:
    ads.send(SDS, node=node, resource_names=names)
    resp = ads.recv(timeout=15)
    assert resp.type_url == SDS
    got = {}
    for a in resp.resources:
        s = secret_pb2.Secret()
        a.Unpack(s)
        got[s.name] = s
    return resp, got


CERT, CA = "kubernetes://httpbin-credential", "kubernetes://httpbin-credential-cacert"


def test_sds_serves_the_gateway_its_certificate_over_15012_and_rotates_it(mesh):
    m, pem = mesh
    ads = secure_ads(m, "istio-system", GW_SA)
    try:
        resp, got = sds(ads, [CERT, CA], gateway_node())
        assert set(got) == {CERT, CA}
        assert got[CERT].tls_certificate.certificate_chain.inline_bytes.decode() == pem["cert"]
        assert got[CERT].tls_certificate.private_key.inline_bytes.decode() == pem["key"]
        assert got[CA].validation_context.trusted_ca.inline_bytes.decode() == pem["ca"]
        ads.ack(resp, [CERT, CA])
        # Secrets no Gateway references change: nothing is pushed.
        for i in range(5):
            m.kubectl("cluster1", "apply", "-f", "-",
                      stdin=tls_secret(f"unrelated-{i}", *certificate(f"u{i}.example.com")))
        ads.expect_none(wait=2)
        # The referenced one rotates: pushed.
        cert2, key2 = certificate("helloworld.example.com")
        m.kubectl("cluster1", "apply", "-f", "-", stdin=tls_secret("httpbin-credential", cert2, key2, pem["ca"]))
        pushed = decode_secrets(ads.recv(timeout=15))
        assert pushed[CERT].tls_certificate.certificate_chain.inline_bytes.decode() == cert2
        pem.update(cert=cert2, key=key2)
    finally:
        ads.close()


def decode_secrets(resp) -> dict:
    out = {}
    for a in resp.resources:
        s = secret_pb2.Secret()
        a.Unpack(s)
        out[s.name] = s
    return out


def test_sds_refuses_other_namespaces_and_identities_without_the_grant(mesh):
    m, _ = mesh
    # Another namespace's identity (its node must be of its namespace): never another namespace's Secret.
    ads = secure_ads(m, "sample", "default")
    try:
        _, got = sds(ads, ["kubernetes://istio-system/httpbin-credential", CERT, CA], gateway_node("sample", "default"))
        assert got == {}
    finally:
        ads.close()
    # The gateway's namespace, but no RBAC grant to read Secrets: only the (public) CA.
    ads = secure_ads(m, "istio-system", "no-secrets")
    try:
        _, got = sds(ads, [CERT, CA], gateway_node(sa="no-secrets"))
        assert set(got) == {CA}
    finally:
        ads.close()
    # The plaintext port has no verified identity: nothing.
    assert answer(m, SDS, [CERT, CA]) == {}


def test_no_debug_view_shows_the_private_key(mesh):
    """As test_operator.py's secret-material test, on the SDS path: with a gateway holding its certificate,
    no debug endpoint (every one /debug lists, the gateway's config_dump and explain), /metrics or log line
    shows the private key."""
    m, pem = mesh
    ads = secure_ads(m, "istio-system", GW_SA)
    try:
        resp, got = sds(ads, [CERT], gateway_node())
        assert got[CERT].tls_certificate.private_key.inline_bytes.decode() == pem["key"]
        ads.ack(resp, [CERT])
        key_lines = pem["key"].splitlines()[1:-1]
        assert key_lines and all(len(line) > 20 for line in key_lines)
        node_id = gateway_node().id
        paths = [e["path"] for e in m.json("/debug")["endpoints"]]
        assert "/debug/config_dump" in paths
        paths += [f"/debug/config_dump?proxyID={node_id}",
                  f"/debug/explain?proxyID={node_id}&service=helloworld.sample", "/metrics", "/debug"]
        for path in paths:
            status, body = m.get(path.replace("~", "%7E"))
            assert status in (200, 400), f"{path}: {status}"
            for line in key_lines:
                assert line not in body, f"{path} shows the private key"
        status, body = m.get(f"/debug/config_dump?proxyID={node_id}".replace("~", "%7E"))
        assert status == 200 and json.loads(body)["configs"], body
        log = m.log() + m.stdout()
        assert not any(line in log for line in key_lines), "the log shows the private key"
    finally:
        ads.close()
