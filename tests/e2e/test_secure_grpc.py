"""The secure gRPC port (15012) from a real grpcio client with ``grpc.ssl_channel_credentials``.

Starts the meshd binary in sandbox mode (``MESHD_BIN_DIR``, default ``target/debug``), which writes a
ready root and a sample workload certificate under ``<state-dir>/certs``, and checks who is admitted
to ``istio.v1.auth.IstioCertificateService/CreateCertificate``:

* the sample workload certificate → admitted; the issued chain names its SPIFFE ID and ends at the root;
* no client certificate and no token → UNAUTHENTICATED;
* a certificate from another root → refused (TLS failure or UNAUTHENTICATED);
* a CSR for another identity → PERMISSION_DENIED.

The two protobuf messages are encoded by hand (three fields), so no generated code is needed.
"""

from __future__ import annotations

import datetime

import grpc
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from meshd_proc import Meshd

METHOD = "/istio.v1.auth.IstioCertificateService/CreateCertificate"
SAMPLE = "spiffe://cluster.local/ns/sample/sa/default"


def varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def encode_request(csr_pem: str, validity_secs: int = 3600) -> bytes:
    csr = csr_pem.encode()
    return b"\x0a" + varint(len(csr)) + csr + b"\x18" + varint(validity_secs)


def decode_response(data: bytes) -> list[str]:
    """Field 1 (repeated string) of IstioCertificateResponse; other fields are skipped."""
    chain, i = [], 0
    while i < len(data):
        key = data[i]
        i += 1
        assert key & 7 == 2, f"unexpected wire type in {key}"
        length, shift = 0, 0
        while True:
            b = data[i]
            i += 1
            length |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                break
        if key >> 3 == 1:
            chain.append(data[i : i + length].decode())
        i += length
    return chain


def make_csr(uri: str) -> str:
    key = ec.generate_private_key(ec.SECP256R1())
    csr = (
        x509.CertificateSigningRequestBuilder()
        .subject_name(x509.Name([]))
        .add_extension(x509.SubjectAlternativeName([x509.UniformResourceIdentifier(uri)]), critical=False)
        .sign(key, hashes.SHA256())
    )
    return csr.public_bytes(serialization.Encoding.PEM).decode()


def foreign_client_cert() -> tuple[bytes, bytes]:
    """A workload certificate for the sample identity, but from a root meshd does not trust."""
    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "foreign root")])
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.UniformResourceIdentifier(SAMPLE)]), critical=True)
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return cert.public_bytes(serialization.Encoding.PEM), key_pem


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory):
    m = Meshd(tmp_path_factory.mktemp("state"))
    yield m
    assert m.stop() == 0, m.log()


@pytest.fixture(scope="module")
def meshd(sandbox):
    return {"addr": f"localhost:{sandbox.secure}", "certs": sandbox.state / "certs"}


def call(meshd, csr: str, cert_chain: bytes | None = None, key: bytes | None = None,
         metadata: tuple = ()) -> list[str]:
    root = (meshd["certs"] / "root-cert.pem").read_bytes()
    creds = grpc.ssl_channel_credentials(root_certificates=root, private_key=key, certificate_chain=cert_chain)
    with grpc.secure_channel(meshd["addr"], creds) as channel:
        rpc = channel.unary_unary(METHOD, request_serializer=None, response_deserializer=None)
        return decode_response(rpc(encode_request(csr), timeout=10, metadata=metadata))


def sample_creds(meshd) -> tuple[bytes, bytes]:
    return (meshd["certs"] / "cert-chain.pem").read_bytes(), (meshd["certs"] / "key.pem").read_bytes()


def test_sample_certificate_is_admitted_and_gets_its_own_identity(meshd):
    chain, key = sample_creds(meshd)
    issued = call(meshd, make_csr(SAMPLE), chain, key)
    root = (meshd["certs"] / "root-cert.pem").read_text()
    assert issued[-1] == root, "the chain ends with the mesh root"
    leaf = x509.load_pem_x509_certificate(issued[0].encode())
    sans = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sans.get_values_for_type(x509.UniformResourceIdentifier) == [SAMPLE]
    leaf.verify_directly_issued_by(x509.load_pem_x509_certificate(root.encode()))


def test_no_certificate_and_no_token_is_unauthenticated(meshd):
    with pytest.raises(grpc.RpcError) as err:
        call(meshd, make_csr(SAMPLE))
    assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert "no client certificate and no bearer token" in err.value.details()


def test_certificate_from_another_root_is_refused(meshd):
    chain, key = foreign_client_cert()
    with pytest.raises(grpc.RpcError) as err:
        call(meshd, make_csr(SAMPLE), chain, key)
    assert err.value.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.UNAUTHENTICATED)


def test_csr_for_another_identity_is_permission_denied(meshd):
    chain, key = sample_creds(meshd)
    with pytest.raises(grpc.RpcError) as err:
        call(meshd, make_csr("spiffe://cluster.local/ns/sample/sa/admin"), chain, key)
    assert err.value.code() == grpc.StatusCode.PERMISSION_DENIED
    assert "may only request its own identity" in err.value.details()


def remote_token(sandbox) -> str:
    """A service-account token issued by the remote cluster (cluster2) for the mesh CA audience."""
    return sandbox.kubectl("cluster2", "create", "token", "default", "-n", "sample", "--audience", "istio-ca").strip()


def test_token_from_a_remote_cluster_is_reviewed_by_that_cluster(sandbox, meshd):
    token = remote_token(sandbox)
    issued = call(meshd, make_csr(SAMPLE), metadata=(("authorization", f"Bearer {token}"), ("clusterid", "cluster2")))
    leaf = x509.load_pem_x509_certificate(issued[0].encode())
    sans = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sans.get_values_for_type(x509.UniformResourceIdentifier) == [SAMPLE]


def test_token_reviewed_by_the_wrong_or_an_unknown_cluster_is_refused(sandbox, meshd):
    token = remote_token(sandbox)
    for cluster, detail in (("cluster1", ""), ("cluster9", "cluster9")):
        with pytest.raises(grpc.RpcError) as err:
            call(meshd, make_csr(SAMPLE), metadata=(("authorization", f"Bearer {token}"), ("clusterid", cluster)))
        assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED, (cluster, err.value.details())
        assert detail in err.value.details()
