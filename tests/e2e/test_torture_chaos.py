"""Chaos convergence: a sandboxed meshd with a primary and two remotes, while raw ADS clients (state of
the world and delta) and a grpcio xDS client stay connected, a seeded random schedule restarts and
partitions the remote API servers, forces 410s (compaction + dropped watches) and 500s, rotates and
deletes/re-adds remote Secrets, adds/removes an east-west gateway and churns endpoints.

At every quiet point (faults cleared) and at the end, every raw client's EDS view must equal the ground
truth computed from the simulators' own contents — nothing lost, stale or resurrected — and the grpcio
client, calling a stable service in the primary throughout, must never fail.

``MESHD_CHAOS_SECONDS`` (default 40) and ``MESHD_CHAOS_SEED`` (default 10) make longer or different
runs reproducible; the event log is printed on failure.
"""

from __future__ import annotations

import base64
import copy
import os
import queue
import random
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from meshd_proc import KubeApi, Meshd, endpoint_slice, namespace, service, topology
from xdsharness import EDS, Ads, EchoBackend, bootstrap, decode, grpc_node, routable

NS = "chaos"
SERVICES = ("alpha", "beta")
REMOTES = ("remote1", "remote2")
SECRET_NS = "istio-system"
SECONDS = float(os.environ.get("MESHD_CHAOS_SECONDS", "40"))
SEED = int(os.environ.get("MESHD_CHAOS_SEED", "10"))
HERE = Path(__file__).resolve().parent


def cla_name(svc: str) -> str:
    return f"outbound|7070||{svc}.{NS}.svc.cluster.local"


class View:
    """What one raw ADS client has been told: CLA name → endpoint addresses. ACKs every response."""

    def __init__(self, addr: str, delta: bool):
        self.ads = Ads(addr, delta=delta)
        self.delta = delta
        self.eds: dict[str, set[str]] = {}
        names = [cla_name(s) for s in SERVICES]
        if delta:
            self.ads.send(EDS, node=grpc_node(), resource_names_subscribe=names)
        else:
            self.ads.send(EDS, node=grpc_node(), resource_names=names)
        self.names = names

    def drain(self) -> None:
        while True:
            try:
                resp = self.ads.recv(timeout=0.05)
            except queue.Empty:
                return
            for name, cla in decode(resp).items():
                self.eds[name] = routable(cla)
            for name in getattr(resp, "removed_resources", []):
                self.eds.pop(name, None)
            self.ads.ack(resp, self.names)


class Chaos:
    """The simulators (through their admin API) plus the ground truth meshd must converge to."""

    def __init__(self, meshd: Meshd, rng: random.Random):
        self.rng = rng
        self.api = {c: KubeApi(meshd.kubeconfig(c)) for c in ("primary", *REMOTES)}
        self.secrets = {r: self.api["primary"].get(
            f"/api/v1/namespaces/{SECRET_NS}/secrets/istio-remote-secret-{r}") for r in REMOTES}
        self.joined = set(REMOTES)
        # When each remote's current fault ends by itself (a faulted simulator refuses our writes too).
        self.faulted_until = {r: 0.0 for r in REMOTES}
        self.next_ip = 10
        self.events: list[str] = []

    def log(self, what: str) -> None:
        self.events.append(f"{time.monotonic():.1f} {what}")

    def truth(self) -> dict[str, set[str]]:
        """Ready endpoint addresses per CLA, read from the simulators of the clusters in the mesh."""
        out = {cla_name(s): set() for s in SERVICES}
        for cluster in ("primary", *sorted(self.joined)):
            items = self.api[cluster].get(f"/apis/discovery.k8s.io/v1/namespaces/{NS}/endpointslices")["items"]
            for sl in items:
                svc = sl["metadata"]["labels"]["kubernetes.io/service-name"]
                if svc in SERVICES:
                    out[cla_name(svc)] |= {a for e in sl.get("endpoints") or []
                                           if (e.get("conditions") or {}).get("ready", True)
                                           for a in e["addresses"]}
        return out

    def healthy(self) -> list[str]:
        now = time.monotonic()
        return ["primary", *[r for r in REMOTES if self.faulted_until[r] < now]]

    def churn(self) -> None:
        cluster = self.rng.choice(self.healthy())
        svc = self.rng.choice(SERVICES)
        api = self.api[cluster]
        path = f"/apis/discovery.k8s.io/v1/namespaces/{NS}/endpointslices/{svc}-a"
        status, current = api.request("GET", path)
        addrs = {e["addresses"][0] for e in current.get("endpoints") or []} if status == 200 else set()
        if addrs and self.rng.random() < 0.5:
            addrs.discard(self.rng.choice(sorted(addrs)))
        else:
            self.next_ip += 1
            octet = 1 + ("primary", *REMOTES).index(cluster)
            addrs.add(f"10.{octet}.{self.next_ip // 250}.{self.next_ip % 250 + 1}")
        api.apply(endpoint_slice(svc, NS, addrs))
        self.log(f"churn {cluster}/{svc} -> {len(addrs)} endpoints")

    def fault(self) -> None:
        remotes = [r for r in self.healthy() if r != "primary"]
        if not remotes:
            return
        remote = self.rng.choice(remotes)
        kind = self.rng.choice(("restart", "hang", "500", "410"))
        api = self.api[remote]
        secs = self.rng.uniform(0.5, 2.5)
        if kind == "restart":
            api.fault(mode="refuse", forSeconds=secs, dropWatches=True)
        elif kind == "hang":
            api.fault(mode="hang", forSeconds=secs)
        elif kind == "500":
            api.fault(mode="error", status=self.rng.choice((500, 503, 429)), forSeconds=secs, dropWatches=True)
        else:
            api.fault(compact=True, dropWatches=True)
            secs = 0
        self.faulted_until[remote] = time.monotonic() + secs + 0.3
        self.log(f"fault {remote} {kind} {secs:.1f}s")

    def secret(self) -> None:
        remote = self.rng.choice(REMOTES)
        primary = self.api["primary"]
        secret = copy.deepcopy(self.secrets[remote])
        for k in ("resourceVersion", "uid", "creationTimestamp", "managedFields"):
            secret["metadata"].pop(k, None)
        if remote in self.joined and self.rng.random() < 0.4:
            primary.delete(secret)
            self.joined.discard(remote)
            self.log(f"secret {remote} deleted")
        else:
            # Rotation: same credentials, different bytes (a trailing comment), or a re-add.
            key = next(iter(secret["data"]))
            body = base64.b64decode(secret["data"][key]).decode() + f"\n# rotated {self.rng.random()}\n"
            secret["data"][key] = base64.b64encode(body.encode()).decode()
            primary.apply(secret)
            self.log(f"secret {remote} {'rotated' if remote in self.joined else 're-added'}")
            self.joined.add(remote)

    def gateway(self) -> None:
        remotes = [r for r in self.healthy() if r != "primary"]
        if not remotes:
            return
        remote = self.rng.choice(remotes)
        gw = service("istio-eastwestgateway", SECRET_NS, port=15443, target=15443)
        gw["metadata"]["labels"] = {"istio": "eastwestgateway", "topology.istio.io/network": f"net-{remote}"}
        gw["spec"]["type"] = "LoadBalancer"
        api = self.api[remote]
        if api.request("GET", KubeApi.path(gw))[0] == 200:
            api.delete(gw)
            self.log(f"gateway {remote} removed")
        else:
            api.apply(gw)
            self.log(f"gateway {remote} added")

    def calm(self) -> None:
        """A quiet point: wait for the timed faults to end, then make sure every fault is off."""
        time.sleep(max(0.0, max(self.faulted_until.values()) - time.monotonic()))
        for remote in REMOTES:
            self.api[remote].fault(mode="none")


def wait_converged(views: list[View], chaos: Chaos, timeout: float, why: str) -> None:
    deadline = time.monotonic() + timeout
    while True:
        truth = chaos.truth()
        for v in views:
            v.drain()
        if all(v.eds == truth for v in views):
            return
        if time.monotonic() > deadline:
            diffs = [f"{'delta' if v.delta else 'sotw'}: {v.eds}" for v in views if v.eds != truth]
            events = "\n".join(chaos.events[-30:])
            raise AssertionError(f"{why}: not converged after {timeout}s\ntruth: {truth}\n"
                                 + "\n".join(diffs) + f"\nlast events:\n{events}")
        time.sleep(0.2)


@pytest.fixture
def mesh(tmp_path):
    backend = EchoBackend("stable")
    objects = {c: [namespace(SECRET_NS), namespace(NS),
                   *[service(s, NS) for s in SERVICES],
                   *[endpoint_slice(s, NS, {f"10.{i + 1}.0.{j + 1}" for j in range(2)}) for s in SERVICES]]
               for i, c in enumerate(("primary", *REMOTES))}
    # A stable service in the primary that the grpcio client calls throughout.
    objects["primary"] += [service("echo", NS), endpoint_slice("echo", NS, {"127.0.0.1"}, port=backend.port)]
    root = topology(tmp_path / "clusters", objects)
    m = Meshd(tmp_path / "state", ["--sandbox", str(root)])
    yield m
    backend.stop()
    assert m.stop() == 0, m.log()[-4000:]


def test_chaos_every_client_converges_to_the_simulators(mesh):
    rng = random.Random(SEED)
    chaos = Chaos(mesh, rng)
    views = [View(f"127.0.0.1:{mesh.grpc}", delta=False), View(f"127.0.0.1:{mesh.grpc}", delta=True)]
    wait_converged(views, chaos, 20, "initial state")

    env = dict(os.environ, GRPC_XDS_BOOTSTRAP_CONFIG=bootstrap(mesh.grpc, NS),
               GRPC_VERBOSITY="ERROR")
    duration = SECONDS + 30
    grpcio = subprocess.Popen(
        [sys.executable, str(HERE / "grpc_xds_client.py"), f"xds:///echo.{NS}.svc.cluster.local:7070",
         "--count", "1000000", "--duration", str(duration), "--interval", "0.2"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    actions = [chaos.churn] * 5 + [chaos.fault] * 3 + [chaos.secret] * 2 + [chaos.gateway]
    end = time.monotonic() + SECONDS
    quiet_points = 0
    max_rss = mesh.rss_kib()
    next_quiet = time.monotonic() + 10
    while time.monotonic() < end:
        rng.choice(actions)()
        for v in views:
            v.drain()
        time.sleep(rng.uniform(0.05, 0.4))
        if time.monotonic() >= next_quiet:
            chaos.calm()
            wait_converged(views, chaos, 30, f"quiet point {quiet_points + 1}")
            quiet_points += 1
            next_quiet = time.monotonic() + 10
            max_rss = max(max_rss, mesh.rss_kib())
    chaos.calm()
    wait_converged(views, chaos, 30, "end of the run")

    out, err = grpcio.communicate(timeout=duration + 30)
    assert grpcio.returncode == 0, f"the grpcio client failed during chaos: {err}"
    assert set(out.split()) == {"stable"} and len(out.split()) > 10
    # Events are logged as "<t> churn ...", "<t> fault <remote> <kind> ...", "<t> secret <remote> <what>"
    # and "<t> gateway <remote> <what>": count churn, and the others by what happened.
    kinds = Counter(w[1] if w[1] == "churn" else f"{w[1]} {w[3]}" for w in map(str.split, chaos.events))
    assert {"churn", "fault", "secret"} <= {k.split()[0] for k in kinds}, chaos.events
    rss = mesh.rss_kib()
    print(f"chaos: seed {SEED}, {SECONDS:.0f}s, {len(chaos.events)} events {dict(sorted(kinds.items()))}, "
          f"{quiet_points} quiet points, converged at each; RSS {rss // 1024} MiB (max sampled {max_rss // 1024} MiB)")
    assert "panicked" not in mesh.log()
    assert rss < 512 * 1024, "meshd RSS above 512 MiB after the chaos run"
