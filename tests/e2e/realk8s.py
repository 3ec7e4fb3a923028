"""A real Kubernetes control plane on loopback for the end-to-end tests: etcd, kube-apiserver and (when
built) kube-controller-manager, from the binaries tests/peers/build.sh puts in tests/.cache/bin (or
$ETCD, $KUBE_APISERVER, $KUBE_CONTROLLER_MANAGER).

Each :class:`RealCluster` has its own folder: a CA it generates (the serving certificate is signed by
it, so clients verify TLS), a static token file with an admin in ``system:masters``, ServiceAccount
signing keys (TokenRequest and TokenReview are the real ones), free loopback ports, and an admin
kubeconfig. ``--authorization-mode=Node,RBAC``. Several run side by side (a primary and a remote).

No kubelet and no scheduler run: pods stay Pending. kube-controller-manager brings the controllers a
cluster has (namespace lifecycle, garbage collector, ServiceAccounts and ``kube-root-ca.crt``,
EndpointSlices for selector Services, Deployments/ReplicaSets, ClusterRole aggregation, node IPAM).

The multi-cluster tests run each scenario on two backends, :func:`two_clusters`: two real clusters, or
the two kube-sim clusters of ``meshctl sandbox serve --enforce-rbac`` (:class:`SimCluster`, the same client
surface), with :class:`Env` saying how each backend ends watches, compacts and restarts.
"""

from __future__ import annotations

import base64
import contextlib
import datetime
import ipaddress
import json
import os
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import yaml

from meshd_proc import BIN_DIR, KUBECTL, eventually

REPO = Path(__file__).resolve().parents[2]
CACHE_BIN = REPO / "tests" / ".cache" / "bin"
SERVICE_CIDR = "10.96.0.0/12"
CLUSTER_CIDR = "10.244.0.0/16"
ISSUER = "https://kubernetes.default.svc.cluster.local"
# Seconds: meshd's --watch-timeout in the two-cluster tests, so a real server ends every watch this often.
WATCH_TIMEOUT = 3


def binary(env: str, name: str) -> Path | None:
    """The peer binary named by ``$env``, else tests/.cache/bin/<name>; None when neither exists."""
    path = Path(os.environ.get(env) or CACHE_BIN / name)
    return path if path.is_file() and os.access(path, os.X_OK) else None


def missing() -> str | None:
    """Why a real cluster cannot start here, or None."""
    absent = [n for e, n in (("ETCD", "etcd"), ("KUBE_APISERVER", "kube-apiserver")) if binary(e, n) is None]
    if absent:
        return (f"no {' or '.join(absent)} (set ETCD/KUBE_APISERVER or run tests/peers/build.sh, which needs Go): "
                "the real-API-server tests skip")
    return None


def skip_unless_available():
    """pytest.skip with the reason when the binaries are missing."""
    import pytest

    reason = missing()
    if reason:
        pytest.skip(reason)


def kubectl(kubeconfig: Path | str, *args: str, stdin: str | None = None,
            check: bool = True) -> subprocess.CompletedProcess:
    """``kubectl --kubeconfig <kubeconfig> <args>`` ($KUBECTL); fails the test unless it succeeds when
    ``check``."""
    out = subprocess.run([KUBECTL, "--kubeconfig", str(kubeconfig), *args], input=stdin,
                         capture_output=True, text=True, timeout=120)
    if check:
        assert out.returncode == 0, f"kubectl {' '.join(args)}: {out.stderr}"
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Certs:
    """A CA and a serving certificate signed by it, and the ServiceAccount signing key (PEM files)."""

    def __init__(self, d: Path, name: str):
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec, rsa
        from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

        d.mkdir(parents=True, exist_ok=True)
        now = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(minutes=5)
        later = now + datetime.timedelta(days=2)

        def pem_key(key) -> bytes:
            return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                     serialization.NoEncryption())

        ca_key = ec.generate_private_key(ec.SECP256R1())
        ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"meshd-test-{name}-ca")])
        ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
              .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
              .not_valid_before(now).not_valid_after(later)
              .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
              .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                           content_commitment=False, key_encipherment=False,
                                           data_encipherment=False, key_agreement=False,
                                           encipher_only=False, decipher_only=False), critical=True)
              .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
              .sign(ca_key, hashes.SHA256()))
        service_ip = next(ipaddress.ip_network(SERVICE_CIDR).hosts())
        sans = [x509.DNSName(n) for n in ("localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
                                          "kubernetes.default.svc.cluster.local")]
        sans += [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.IPAddress(service_ip)]
        key = ec.generate_private_key(ec.SECP256R1())
        cert = (x509.CertificateBuilder()
                .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-apiserver")]))
                .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
                .not_valid_before(now).not_valid_after(later)
                .add_extension(x509.SubjectAlternativeName(sans), critical=False)
                .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
                .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
                .sign(ca_key, hashes.SHA256()))
        sa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)

        self.ca = d / "ca.crt"
        self.ca_key = d / "ca.key"
        self.cert = d / "apiserver.crt"
        self.key = d / "apiserver.key"
        self.sa_key = d / "sa.key"
        self.sa_pub = d / "sa.pub"
        self.ca.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
        self.ca_key.write_bytes(pem_key(ca_key))
        self.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        self.key.write_bytes(pem_key(key))
        self.sa_key.write_bytes(pem_key(sa_key))
        self.sa_pub.write_bytes(sa_key.public_key().public_bytes(serialization.Encoding.PEM,
                                                                 serialization.PublicFormat.SubjectPublicKeyInfo))
        for p in (self.ca_key, self.key, self.sa_key):
            p.chmod(0o600)


class RealCluster:
    """etcd + kube-apiserver (+ kube-controller-manager) in ``root``; ``start()`` waits for /readyz.

    ``server``, ``token`` (admin, group system:masters), ``kubeconfig`` (admin, with the CA) and ``tls``
    (an ssl context trusting the CA) are what a client needs. ``controller_manager``: start it when the
    binary exists (True), never (False), or require it ("required")."""

    def __init__(self, root: Path, name: str = "primary", controller_manager: bool | str = True,
                 extra_apiserver_args: list[str] = ()):
        self.root = Path(root)
        self.name = name
        self.root.mkdir(parents=True, exist_ok=True)
        self.etcd_bin = binary("ETCD", "etcd")
        self.apiserver_bin = binary("KUBE_APISERVER", "kube-apiserver")
        self.kcm_bin = binary("KUBE_CONTROLLER_MANAGER", "kube-controller-manager") if controller_manager else None
        if controller_manager == "required" and self.kcm_bin is None:
            raise RuntimeError("kube-controller-manager is required but not built (tests/peers/build.sh)")
        self.extra_apiserver_args = list(extra_apiserver_args)
        self.token = secrets.token_hex(16)
        self.port = free_port()
        self.server = f"https://127.0.0.1:{self.port}"
        self.kubeconfig = self.root / "admin.kubeconfig"
        self.procs: dict[str, subprocess.Popen] = {}
        self.tls: ssl.SSLContext | None = None

    # --- life cycle ---

    def start(self, timeout: float = 120) -> "RealCluster":
        if self.etcd_bin is None or self.apiserver_bin is None:
            raise RuntimeError(missing() or "no etcd/kube-apiserver")
        self.certs = Certs(self.root / "pki", self.name)
        self.tls = ssl.create_default_context(cafile=str(self.certs.ca))
        tokens = self.root / "tokens.csv"
        tokens.write_text(f'{self.token},admin,admin-uid,"system:masters"\n')
        tokens.chmod(0o600)
        self._write_kubeconfig()
        try:
            self._start_etcd(timeout)
            self._start_apiserver(timeout)
            if self.kcm_bin is not None:
                self._start_controller_manager(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def __enter__(self) -> "RealCluster":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def _spawn(self, name: str, args: list[str]) -> subprocess.Popen:
        log = open(self.root / f"{name}.log", "wb")
        proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
        log.close()
        self.procs[name] = proc
        return proc

    def log(self, name: str, tail: int = 4000) -> str:
        path = self.root / f"{name}.log"
        return path.read_text(errors="replace")[-tail:] if path.exists() else ""

    def _wait(self, what: str, proc_name: str, ok, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            proc = self.procs[proc_name]
            if proc.poll() is not None:
                raise RuntimeError(f"{proc_name} exited {proc.returncode} before {what}:\n{self.log(proc_name)}")
            try:
                if ok():
                    return
            except OSError as e:
                last = e
            time.sleep(0.2)
        raise RuntimeError(f"{self.name}: no {what} after {timeout}s ({last}):\n{self.log(proc_name)}")

    def _start_etcd(self, timeout: float) -> None:
        self.etcd_port, peer = free_port(), free_port()
        self.etcd_url = f"http://127.0.0.1:{self.etcd_port}"
        data = self.root / "etcd-data"
        shutil.rmtree(data, ignore_errors=True)
        self._spawn("etcd", [
            str(self.etcd_bin), "--name", self.name, "--data-dir", str(data),
            "--listen-client-urls", self.etcd_url, "--advertise-client-urls", self.etcd_url,
            "--listen-peer-urls", f"http://127.0.0.1:{peer}",
            "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
            "--initial-cluster", f"{self.name}=http://127.0.0.1:{peer}",
            "--listen-metrics-urls", f"http://127.0.0.1:{free_port()}",
            # A test store: no fsync (fast on a busy disk), quiet logs.
            "--unsafe-no-fsync", "--log-level", "warn",
        ])

        def healthy() -> bool:
            with urllib.request.urlopen(self.etcd_url + "/health", timeout=2) as r:
                return json.loads(r.read()).get("health") == "true"

        self._wait("etcd /health", "etcd", healthy, timeout)

    def apiserver_args(self) -> list[str]:
        c = self.certs
        return [
            str(self.apiserver_bin),
            "--etcd-servers", self.etcd_url,
            "--bind-address", "127.0.0.1", "--secure-port", str(self.port),
            # The default/kubernetes endpoints may not be loopback; this address is only published there.
            "--advertise-address", "192.0.2.1",
            "--cert-dir", str(self.root / "serving"),
            "--tls-cert-file", str(c.cert), "--tls-private-key-file", str(c.key),
            "--client-ca-file", str(c.ca),
            "--token-auth-file", str(self.root / "tokens.csv"),
            "--authorization-mode", "Node,RBAC",
            "--service-account-issuer", ISSUER,
            "--service-account-key-file", str(c.sa_pub),
            "--service-account-signing-key-file", str(c.sa_key),
            "--service-cluster-ip-range", SERVICE_CIDR,
            "--allow-privileged=true",
            "--profiling=false",
            "--v=1",
            *self.extra_apiserver_args,
        ]

    def _start_apiserver(self, timeout: float) -> None:
        self._spawn("kube-apiserver", self.apiserver_args())
        self._wait("kube-apiserver /readyz", "kube-apiserver", lambda: self.request("GET", "/readyz")[0] == 200,
                   timeout)

    def _start_controller_manager(self, timeout: float) -> None:
        c = self.certs
        self._spawn("kube-controller-manager", [
            str(self.kcm_bin),
            "--kubeconfig", str(self.kubeconfig),
            "--authentication-kubeconfig", str(self.kubeconfig),
            "--authorization-kubeconfig", str(self.kubeconfig),
            "--bind-address", "127.0.0.1", "--secure-port", str(free_port()),
            "--cert-dir", str(self.root / "kcm-serving"),
            "--leader-elect=false",
            "--use-service-account-credentials=true",
            "--service-account-private-key-file", str(c.sa_key),
            "--root-ca-file", str(c.ca),
            "--cluster-signing-cert-file", str(c.ca), "--cluster-signing-key-file", str(c.ca_key),
            "--allocate-node-cidrs=true", "--cluster-cidr", CLUSTER_CIDR,
            "--service-cluster-ip-range", SERVICE_CIDR,
            "--cluster-name", self.name,
            "--controllers", "*,-cloud-node-lifecycle-controller,-service-lb-controller,-node-route-controller",
            "--profiling=false",
            "--v=1",
        ])

        # Ready when the ServiceAccount and root-CA controllers have filled the default namespace.
        def ready() -> bool:
            return (self.request("GET", "/api/v1/namespaces/default/serviceaccounts/default")[0] == 200
                    and self.request("GET", "/api/v1/namespaces/default/configmaps/kube-root-ca.crt")[0] == 200)

        self._wait("kube-controller-manager (default ServiceAccount, kube-root-ca.crt)", "kube-controller-manager",
                   ready, timeout)

    def stop(self, timeout: float = 20) -> None:
        """SIGTERM, in reverse start order; SIGKILL what is still running after ``timeout``."""
        for name in reversed(list(self.procs)):
            proc = self.procs[name]
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=timeout)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        self.procs.clear()

    def restart_apiserver(self, timeout: float = 120) -> None:
        """Stops kube-apiserver and starts it again on the same port and store (etcd keeps running)."""
        proc = self.procs.pop("kube-apiserver")
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        self._start_apiserver(timeout)

    # --- clients ---

    def _write_kubeconfig(self) -> None:
        ca = base64.b64encode(self.certs.ca.read_bytes()).decode()
        self.kubeconfig.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": self.name,
            "clusters": [{"name": self.name, "cluster": {"server": self.server, "certificate-authority-data": ca}}],
            "users": [{"name": f"{self.name}-admin", "user": {"token": self.token}}],
            "contexts": [{"name": self.name, "context": {"cluster": self.name, "user": f"{self.name}-admin"}}],
        }))
        self.kubeconfig.chmod(0o600)

    def request(self, method: str, path: str, body=None, token: str | None = None, timeout: float = 10,
                content_type: str = "application/json", headers: dict | None = None) -> tuple[int, object]:
        """One HTTPS request as the admin (or ``token``): (status, JSON body or text)."""
        data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
        headers = {"Authorization": f"Bearer {token or self.token}", "Accept": "application/json", **(headers or {})}
        if data is not None:
            headers["Content-Type"] = content_type
        req = urllib.request.Request(self.server + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, context=self.tls, timeout=timeout) as r:
                status, raw = r.status, r.read()
        except urllib.error.HTTPError as e:
            status, raw = e.code, e.read()
        try:
            return status, json.loads(raw or b"null")
        except ValueError:
            return status, raw.decode(errors="replace")

    def install_crds(self, path: Path = REPO / "helm" / "meshd" / "crds", timeout: str = "60s") -> None:
        """Applies CRD manifests (default: the chart's Istio CRDs) and waits until they are established."""
        out = self.kubectl("apply", "-f", str(path))
        names = [line.split()[0] for line in out.stdout.splitlines() if line.startswith("customresourcedefinition")]
        if names:
            self.kubectl("wait", "--for=condition=established", f"--timeout={timeout}", *names)

    def kubectl(self, *args: str, stdin: str | None = None, check: bool = True) -> subprocess.CompletedProcess:
        return kubectl(self.kubeconfig, *args, stdin=stdin, check=check)


# --- two clusters, either backend ---


def etcd_post(c: RealCluster, path: str, body: dict) -> dict:
    """etcd's v3 JSON gateway."""
    req = urllib.request.Request(c.etcd_url + path, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read())


def compact_etcd(c: RealCluster) -> int:
    """Compacts ``c``'s etcd at its current revision; returns it."""
    revision = int(etcd_post(c, "/v3/kv/range", {"key": base64.b64encode(b"/").decode()})["header"]["revision"])
    etcd_post(c, "/v3/kv/compaction", {"revision": str(revision), "physical": True})
    return revision


class SimCluster:
    """A kube-sim cluster of ``meshctl sandbox serve``, with :class:`RealCluster`'s client surface."""

    def __init__(self, name: str, kubeconfig: Path, server: str):
        self.name, self.kubeconfig, self.server = name, kubeconfig, server
        kc = yaml.safe_load(kubeconfig.read_text())
        self.token = kc["users"][0]["user"]["token"]
        ca = base64.b64decode(kc["clusters"][0]["cluster"]["certificate-authority-data"]).decode()
        self.tls = ssl.create_default_context(cadata=ca)
        self.tls.check_hostname = False

    def request(self, method: str, path: str, body=None, token: str | None = None) -> tuple[int, object]:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.server + path, data=data, method=method, headers={
            "Authorization": f"Bearer {token or self.token}", "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=10, context=self.tls) as r:
                return r.status, json.loads(r.read() or b"null")
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"null")

    def kubectl(self, *args: str, stdin: str | None = None, check: bool = True) -> subprocess.CompletedProcess:
        return kubectl(self.kubeconfig, *args, stdin=stdin, check=check)

    def install_crds(self) -> None:
        """kube-sim serves the Istio kinds without CRDs."""

    def fault(self, **req) -> None:
        status, body = self.request("POST", "/sandbox/v1/faults", req)
        assert status == 200, body


class Env:
    """The two clusters of one backend, and how each backend ends watches, compacts and restarts."""

    def __init__(self, backend: str, c1, c2):
        self.backend, self.c1, self.c2 = backend, c1, c2
        self.restarts: list[tuple[float, float]] = []  # wall-clock windows of API server restarts

    def end_watches(self, c) -> None:
        """Ends every open watch on ``c`` (a real server: its watches time out, ``--watch-timeout``)."""
        if self.backend == "real":
            time.sleep(WATCH_TIMEOUT + 2)
        else:
            c.fault(dropWatches=True)

    def compact(self, c) -> None:
        """Compacts ``c``'s history at its current revision."""
        if self.backend == "real":
            compact_etcd(c)
        else:
            c.fault(compact=True)

    def restart(self, c) -> None:
        """Restarts ``c``'s API server, store kept (kube-sim: refuses connections for 3 s)."""
        start = time.time()
        if self.backend == "real":
            c.restart_apiserver()  # returns once /readyz answers 200
        else:
            c.fault(mode="refuse", forSeconds=3)
            time.sleep(3)
            def serving() -> bool:
                try:
                    return c.request("GET", "/api/v1/namespaces")[0] == 200
                except OSError:
                    return False

            eventually("kube-sim serving again", serving, timeout=10)
        self.restarts.append((start, time.time() + 2))


@contextlib.contextmanager
def real_env(root: Path):
    skip_unless_available()
    # cluster2 serves watches from etcd (no watch cache) and never compacts on its own: the 410 test
    # compacts it when it means to.
    with RealCluster(root / "cluster1", name="cluster1", controller_manager=False) as c1, \
            RealCluster(root / "cluster2", name="cluster2", controller_manager=False,
                        extra_apiserver_args=["--watch-cache=false", "--etcd-compaction-interval=0"]) as c2:
        yield Env("real", c1, c2)


@contextlib.contextmanager
def sim_env(root: Path):
    """``meshctl sandbox serve --enforce-rbac`` with two empty clusters (RBAC decided by the stored roles)."""
    for name in ("cluster1", "cluster2"):
        (root / "clusters" / name).mkdir(parents=True)
    proc = subprocess.Popen([str(BIN_DIR / "meshctl"), "sandbox", "serve", "--clusters", str(root / "clusters"),
                             "--state-dir", str(root / "sandbox"), "--enforce-rbac"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert line, f"sandbox exited: {proc.stderr.read()}"
        c = json.loads(line)["clusters"]
        yield Env("kube-sim", *(SimCluster(n, Path(c[n]["kubeconfig"]), c[n]["url"]) for n in ("cluster1", "cluster2")))
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=20)


@contextlib.contextmanager
def two_clusters(request, tmp_path_factory, prefix: str):
    """cluster1 and cluster2 (an :class:`Env`, its folder ``env.root``) of the backend a fixture's
    ``request.param`` names, ``real`` or ``kube-sim``; skips without meshctl or the real binaries."""
    if not (BIN_DIR / "meshctl").exists():
        import pytest

        pytest.skip(f"{BIN_DIR / 'meshctl'} not built")
    root = tmp_path_factory.mktemp(f"{prefix}-{request.param}")
    with (real_env if request.param == "real" else sim_env)(root) as env:
        env.root = root
        yield env
