"""Torture list A #1–#3 on 15012 and G #40: meshd (sandbox) with a plugged-in CA folder (``--ca-dir``)
that this test owns, so it can mint every kind of bad client certificate and rotate roots. ADS over
15012 is driven by grpcio with ``ssl_channel_credentials``."""

from __future__ import annotations

import datetime
import socket
import ssl
import time

import grpc
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from meshd_proc import Meshd, eventually
from xdsharness import EDS, Ads, grpc_node

TD = "cluster.local"
SAMPLE = f"spiffe://{TD}/ns/sample/sa/default"
CLA = "outbound|7070||echo.sample.svc.cluster.local"
NOW = datetime.datetime.now(datetime.timezone.utc)
PEM = serialization.Encoding.PEM


class Ca:
    def __init__(self, name: str):
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.name = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, TD),
                               x509.NameAttribute(NameOID.COMMON_NAME, name)])
        self.cert = (x509.CertificateBuilder().subject_name(self.name).issuer_name(self.name)
                     .public_key(self.key.public_key()).serial_number(x509.random_serial_number())
                     .not_valid_before(NOW - datetime.timedelta(days=1))
                     .not_valid_after(NOW + datetime.timedelta(days=365))
                     .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                     .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False),
                                    critical=True)
                     .sign(self.key, hashes.SHA256()))
        self.pem = self.cert.public_bytes(PEM)

    def write(self, folder, roots: list[bytes]) -> None:
        key = self.key.private_bytes(PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
        for name, data in (("ca-key.pem", key), ("ca-cert.pem", self.pem), ("root-cert.pem", b"".join(roots)),
                           ("cert-chain.pem", self.pem)):
            tmp = folder / f".{name}.tmp"
            tmp.write_bytes(data)
            tmp.replace(folder / name)

    def leaf(self, uris=(SAMPLE,), days=(-1, 1), is_ca=False, eku=True) -> tuple[bytes, bytes]:
        key = ec.generate_private_key(ec.SECP256R1())
        b = (x509.CertificateBuilder().subject_name(x509.Name([])).issuer_name(self.name)
             .public_key(key.public_key()).serial_number(x509.random_serial_number())
             .not_valid_before(NOW + datetime.timedelta(days=days[0]))
             .not_valid_after(NOW + datetime.timedelta(days=days[1]))
             .add_extension(x509.BasicConstraints(ca=is_ca, path_length=None), critical=True))
        if uris:
            b = b.add_extension(x509.SubjectAlternativeName([x509.UniformResourceIdentifier(u) for u in uris]),
                                critical=True)
        if eku:
            b = b.add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH,
                                                       ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        cert = b.sign(self.key, hashes.SHA256())
        return cert.public_bytes(PEM), key.private_bytes(PEM, serialization.PrivateFormat.PKCS8,
                                                         serialization.NoEncryption())


@pytest.fixture(scope="module")
def mesh(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("certs")
    cadir = tmp / "cacerts"
    cadir.mkdir()
    ca = Ca("torture root 1")
    ca.write(cadir, [ca.pem])
    m = Meshd(tmp / "state", ["--ca-dir", str(cadir)])
    m.ca, m.cadir = ca, cadir
    yield m
    assert "panicked" not in m.log()
    assert m.stop() == 0, m.log()[-4000:]


class Stream:
    """An ADS stream (kept open) over 15012 with a client certificate, asking for the echo EDS."""

    def __init__(self, mesh: Meshd, cert: tuple[bytes, bytes] | None, roots: bytes, namespace="sample"):
        creds = grpc.ssl_channel_credentials(root_certificates=roots, private_key=cert and cert[1],
                                             certificate_chain=cert and cert[0])
        self.ads = Ads("", channel=grpc.secure_channel(f"localhost:{mesh.secure}", creds))
        node = grpc_node(node_id=f"sidecar~127.0.0.1~x.{namespace}~{namespace}.svc.cluster.local",
                         NAMESPACE=namespace)
        self.ads.send(EDS, node=node, resource_names=[CLA])

    def first(self):
        return self.ads.recv(timeout=10)

    def close(self):
        self.ads.close()


def roots(mesh: Meshd) -> bytes:
    return (mesh.cadir / "root-cert.pem").read_bytes()


def connections(mesh: Meshd) -> list:
    return mesh.json("/debug/connections")


def test_a2_good_certificate_is_served(mesh):
    s = Stream(mesh, mesh.ca.leaf(), roots(mesh))
    assert s.first().type_url == EDS
    s.close()


@pytest.mark.parametrize("variant", ["foreign-ca", "expired", "not-yet-valid", "ca-leaf", "no-uri",
                                     "two-uris", "not-spiffe", "wrong-trust-domain"])
def test_a2_bad_client_certificates_are_refused_before_any_state(mesh, variant):
    """#2: each is refused at TLS (UNAVAILABLE) or with UNAUTHENTICATED before a stream is registered."""
    ca = mesh.ca
    cert = {
        "foreign-ca": lambda: Ca("foreign").leaf(),
        "expired": lambda: ca.leaf(days=(-10, -1)),
        "not-yet-valid": lambda: ca.leaf(days=(1, 10)),
        "ca-leaf": lambda: ca.leaf(is_ca=True),
        "no-uri": lambda: ca.leaf(uris=()),
        "two-uris": lambda: ca.leaf(uris=(SAMPLE, f"spiffe://{TD}/ns/other/sa/x")),
        "not-spiffe": lambda: ca.leaf(uris=("https://example.com/ns/sample/sa/default",)),
        "wrong-trust-domain": lambda: ca.leaf(uris=("spiffe://evil.org/ns/sample/sa/default",)),
    }[variant]()
    s = Stream(mesh, cert, roots(mesh))
    with pytest.raises(grpc.RpcError) as err:
        s.first()
    assert err.value.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.UNAUTHENTICATED), err.value
    assert connections(mesh) == []
    s.close()


def test_a3_identity_mismatch_is_permission_denied(mesh):
    """#3: a certificate for ns/sample claiming namespace ``other`` in node metadata → PERMISSION_DENIED."""
    s = Stream(mesh, mesh.ca.leaf(), roots(mesh), namespace="other")
    with pytest.raises(grpc.RpcError) as err:
        s.first()
    assert err.value.code() == grpc.StatusCode.PERMISSION_DENIED, err.value
    assert connections(mesh) == []
    s.close()


def test_a1_handshake_abuse_on_15012(mesh):
    """#1 (15012): 1,000 connections that never send a ClientHello, garbage and an HTTP/1.1 request on
    the TLS port: a good client is still served at once (found a bug: 256 silent connections filled
    every handshake slot, so legitimate clients waited out the 10 s handshake timeout)."""
    silent = [socket.create_connection(("127.0.0.1", mesh.secure)) for _ in range(1000)]
    junk = socket.create_connection(("127.0.0.1", mesh.secure))
    junk.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    garbage = socket.create_connection(("127.0.0.1", mesh.secure))
    garbage.sendall(b"\x16\x03\x01\xff\xff" + b"\x00" * 100)
    start = time.monotonic()
    s = Stream(mesh, mesh.ca.leaf(), roots(mesh))
    assert s.first().type_url == EDS
    assert time.monotonic() - start < 5
    s.close()
    for c in [*silent, junk, garbage]:
        c.close()


def served_issuer(mesh: Meshd) -> str:
    ctx = ssl.create_default_context()
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    with socket.create_connection(("127.0.0.1", mesh.secure)) as raw, ctx.wrap_socket(raw) as tls:
        der = tls.getpeercert(binary_form=True)
    return x509.load_der_x509_certificate(der).issuer.rfc4514_string()


H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])  # + empty SETTINGS


def tls_context(cert: tuple[bytes, bytes], roots: bytes, version: ssl.TLSVersion, tmp) -> ssl.SSLContext:
    """A client context for one TLS version (sessions can only be offered again from the same one)."""
    chain, key = tmp / f"client-{version.name}.pem", tmp / f"client-{version.name}.key"
    chain.write_bytes(cert[0])
    key.write_bytes(cert[1])
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ctx.maximum_version = version
    ctx.load_verify_locations(cadata=roots.decode())
    ctx.load_cert_chain(chain, key)
    ctx.set_alpn_protocols(["h2"])
    return ctx


def tls_attempt(mesh: Meshd, ctx: ssl.SSLContext, session: ssl.SSLSession | None = None):
    """A raw TLS connection to 15012 offering ``session`` for resumption: (admitted — the server
    answered the HTTP/2 preface —, the session was resumed, the session)."""
    reused = False
    try:
        with socket.create_connection(("localhost", mesh.secure), timeout=5) as raw, \
                ctx.wrap_socket(raw, server_hostname="localhost", session=session) as tls:
            reused = tls.session_reused
            tls.sendall(H2_PREFACE)
            return bool(tls.recv(9)), reused, tls.session
    except (ssl.SSLError, ConnectionError, TimeoutError):
        return False, reused, None


def test_g40_root_rotation_without_restart(mesh, tmp_path):
    """#40: a new CA with both roots trusted → new handshakes get a serving cert from the new CA while
    old-root clients still connect and an established stream keeps working; removing the old root →
    old-root client certificates are refused on new connections, also when offering a TLS 1.2 or 1.3
    session from before (never resumed); the established stream survives."""
    old, new = mesh.ca, Ca("torture root 2")
    old_client = old.leaf()
    established = Stream(mesh, old_client, old.pem + new.pem)
    assert established.first().type_url == EDS
    new.write(mesh.cadir, [new.pem, old.pem])
    eventually("the serving cert from the new CA", lambda: "torture root 2" in served_issuer(mesh), timeout=30)
    s = Stream(mesh, old_client, old.pem + new.pem)
    assert s.first().type_url == EDS, "old-root clients still admitted while both roots are trusted"
    s.close()
    # No session resumption at all (no tickets, no cache): a resumed session would skip the client
    # certificate check after the root is gone (Envoy CVE-2022-21654).
    sessions = {}
    for v in (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3):
        ctx = tls_context(old_client, old.pem + new.pem, v, tmp_path)
        admitted, reused, session = tls_attempt(mesh, ctx)
        assert admitted and not reused and session is not None, v
        sessions[ctx] = session
        admitted, reused, _ = tls_attempt(mesh, ctx, session)
        assert admitted and not reused, f"{v}: a session was resumed"
    new.write(mesh.cadir, [new.pem])
    mesh.ca = new

    def old_refused():
        s = Stream(mesh, old_client, old.pem + new.pem)
        try:
            s.first()
            return False
        except grpc.RpcError as e:
            return e.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.UNAUTHENTICATED)
        finally:
            s.close()

    eventually("old-root clients refused", old_refused, timeout=30)
    for ctx, session in sessions.items():
        admitted, reused, _ = tls_attempt(mesh, ctx, session)
        assert not admitted and not reused, f"{ctx.maximum_version}: an old-root session got in after the root was removed"
    fresh = Stream(mesh, new.leaf(), new.pem)
    assert fresh.first().type_url == EDS
    fresh.close()
    # The stream established under the old root still answers a new subscription.
    established.ads.send(EDS, resource_names=[CLA, "outbound|9080||reviews.sample.svc.cluster.local"])
    assert established.first().type_url == EDS, "the established stream was cut"
    established.close()
