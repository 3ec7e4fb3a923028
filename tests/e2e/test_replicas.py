"""More than one replica: replicas are stateless readers, each serving its own proxies; the duties that
write (creating the CA Secret, publishing the mesh root) run only on the holder of the `meshd-leader`
Lease, and the lease moves when the leader dies. Serving never depends on being leader."""

from __future__ import annotations

import base64
import datetime
import json
import signal
import subprocess
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from meshd_proc import BIN_DIR, KUBECTL, REPO, Meshd, eventually
from xdsharness import CDS, EDS, Ads, decode, grpc_node

CLUSTER = "outbound|5000||helloworld.sample.svc.cluster.local"


def plugged_in_ca(folder):
    """A self-signed root in Istio's cacerts layout (``--ca-dir``)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "cluster.local")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                         content_commitment=False, key_encipherment=False,
                                         data_encipherment=False, key_agreement=False,
                                         encipher_only=False, decipher_only=False), critical=True)
            .sign(key, hashes.SHA256()))
    folder.mkdir()
    pem = cert.public_bytes(serialization.Encoding.PEM)
    for f in ("ca-cert.pem", "root-cert.pem", "cert-chain.pem"):
        (folder / f).write_bytes(pem)
    (folder / "ca-key.pem").write_bytes(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    return folder


def endpoints(replica: Meshd) -> list[str]:
    """What a sidecar-style client sees for helloworld from this replica, through the raw ADS client."""
    ads = Ads(f"127.0.0.1:{replica.grpc}")
    try:
        ads.send(CDS, node=grpc_node(NAMESPACE="sample", CLUSTER_ID="cluster1", NETWORK="network1"))
        cds = ads.recv()
        ads.ack(cds)
        ads.send(EDS, resource_names=[CLUSTER])
        cla = decode(ads.recv())[CLUSTER]
        return sorted(f"{e.endpoint.address.socket_address.address}:{e.endpoint.address.socket_address.port_value}"
                      f"/{e.load_balancing_weight.value}"
                      for loc in cla.endpoints for e in loc.lb_endpoints)
    finally:
        ads.close()


class SandboxHost:
    """The simulated clusters alone (``meshctl sandbox serve``): no meshd of its own takes part in the
    election, so the replicas are the only participants."""

    def __init__(self, state: Path):
        self.proc = subprocess.Popen(
            [str(BIN_DIR / "meshctl"), "sandbox", "serve", "--clusters", str(REPO / "clusters"),
             "--state-dir", str(state)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        assert line, f"sandbox exited: {self.proc.stderr.read()}"
        self.kubeconfigs = {name: Path(c["kubeconfig"]) for name, c in json.loads(line)["clusters"].items()}

    def kubeconfig(self, cluster: str) -> Path:
        return self.kubeconfigs[cluster]

    def kubectl(self, cluster: str, *args: str) -> str:
        out = subprocess.run([KUBECTL, "--kubeconfig", str(self.kubeconfig(cluster)), *args],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, f"kubectl {' '.join(args)}: {out.stderr}"
        return out.stdout

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=20)


def lease_holder(host: SandboxHost) -> str:
    out = subprocess.run([KUBECTL, "--kubeconfig", str(host.kubeconfig("cluster1")), "get", "lease", "-n",
                          "istio-system", "meshd-leader", "-o", "json"], capture_output=True, text=True, timeout=60)
    return json.loads(out.stdout)["spec"].get("holderIdentity", "") if out.returncode == 0 else ""


def published_root(host: SandboxHost) -> str:
    """``root-cert.pem`` of the ``istio-ca-root-cert`` ConfigMap in ``sample``, if there."""
    out = subprocess.run([KUBECTL, "--kubeconfig", str(host.kubeconfig("cluster1")), "get", "configmap", "-n",
                          "sample", "istio-ca-root-cert", "-o", "json"], capture_output=True, text=True, timeout=60)
    return json.loads(out.stdout).get("data", {}).get("root-cert.pem", "") if out.returncode == 0 else ""


@pytest.fixture(scope="module")
def host(tmp_path_factory):
    if not (BIN_DIR / "meshctl").exists():
        pytest.skip(f"{BIN_DIR / 'meshctl'} not built")
    h = SandboxHost(tmp_path_factory.mktemp("replicas") / "sandbox")
    yield h
    h.stop()


def test_one_leader_creates_the_ca_secret_and_the_lease_moves_when_it_dies(host, tmp_path):
    args = ["--kubeconfig", str(host.kubeconfig("cluster1")), "--cluster-id", "cluster1"]
    replicas = {name: Meshd(tmp_path / name, args, env={"POD_NAME": name}) for name in ("replica-a", "replica-b")}
    try:
        holder = eventually("a lease holder", lambda: lease_holder(host), timeout=30)
        leader = next(n for n in replicas if holder.startswith(n + "_"))
        follower = next(n for n in replicas if n != leader)
        secret = json.loads(host.kubectl("cluster1", "get", "secret", "-n", "istio-system", "istio-ca-secret",
                                         "-o", "json"))
        assert secret["type"] == "istio.io/ca-root"
        assert "generated a self-signed mesh root" in replicas[leader].log()
        assert "generated a self-signed mesh root" not in replicas[follower].log()
        root = base64.b64decode(secret["data"].get("root-cert.pem") or secret["data"]["ca-cert.pem"]).decode()
        eventually("the leader publishes the mesh root", lambda: published_root(host) == root, timeout=30)

        before = endpoints(replicas[leader])
        assert before and before == endpoints(replicas[follower]), "both replicas serve identical EDS"

        replicas[leader].kill()
        new_holder = eventually("the follower takes the lease", lambda: lease_holder(host).startswith(follower),
                                timeout=45, interval=0.5)
        assert new_holder
        assert endpoints(replicas[follower]) == before, "serving did not depend on leadership"
        again = json.loads(host.kubectl("cluster1", "get", "secret", "-n", "istio-system", "istio-ca-secret",
                                        "-o", "json"))
        assert again["metadata"]["uid"] == secret["metadata"]["uid"], "the CA Secret was created once"
    finally:
        for r in replicas.values():
            r.kill()
