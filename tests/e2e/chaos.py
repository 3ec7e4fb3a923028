"""The chaos suite: a seeded, replayable run of every chaos kind against the embedded sandbox (cluster1
primary on network1, cluster2 remote on network2, east-west gateways), checking one invariant at
every quiet point:

    every long-lived client holds exactly what a fresh client with the same node gets
    (CDS and EDS, SotW and delta, proxyless gRPC and Envoy sidecars, both networks),
    and that agrees with what the simulators' objects say
    (split horizon, Sidecar scope, PeerAuthentication).

Chaos kinds (each switchable with ``--kinds``):

- ``endpoints``: the ``chaos`` Deployments (v1/v2, sidecar-injected pods) scaled 0–3 in both clusters;
- ``config``: DestinationRule (subsets, tls), VirtualService (weights), Sidecar (egress hosts),
  PeerAuthentication (STRICT/PERMISSIVE/DISABLE), ServiceEntry + WorkloadEntry on network2, each
  applied, changed or deleted in the primary;
- ``secret``: the remote Secret deleted, re-created or rotated;
- ``faults``: the API servers compact (410), drop or silence their watches, answer 5xx/429, or hang;
- ``reconnect``: long-lived clients close their stream and come back (delta with
  ``initial_resource_versions``), as proxies do when meshd or the network restarts.

A negative control, a client that drops removals (keeps a cluster the server no longer lists), runs
beside them and must be caught by the same check; a run whose control is never caught fails.

    tests/.venv/bin/python tests/e2e/chaos.py --seed 7 --seconds 1200      # the long run
    MESHD_CHAOS_SEED=7 MESHD_CHAOS_SECONDS=40 pytest tests/e2e/test_chaos.py  # what CI runs

The seed, the kinds and every event are printed, so a failing run replays with the same flags.
"""

from __future__ import annotations

import argparse
import base64
import copy
import os
import queue
import random
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from envoy.config.cluster.v3 import cluster_pb2  # noqa: E402
from meshd_proc import KubeApi, Meshd  # noqa: E402
from xdsharness import CDS, EDS, Ads, decode, grpc_node, sidecar_node  # noqa: E402

KINDS = ("endpoints", "config", "secret", "faults", "reconnect")
NS = "sample"
SYSTEM = "istio-system"
CHAOS_HOST = f"chaos.{NS}.svc.cluster.local"
HOSTS = [CHAOS_HOST, *(f"{s}.{NS}.svc.cluster.local" for s in ("helloworld", "details", "reviews", "ratings"))]
PORTS = {CHAOS_HOST: 7070}
GATEWAYS = {"network1": "192.0.2.10", "network2": "198.51.100.10"}
CLUSTER_NETWORK = {"cluster1": "network1", "cluster2": "network2"}
WATCH_TIMEOUT = 2  # --watch-timeout: a silenced watch is given up after 7 s
SETTLE = 2.5  # seconds without a response before a client is taken as up to date
PLURALS = {
    "Deployment": "deployments", "DestinationRule": "destinationrules", "VirtualService": "virtualservices",
    "Sidecar": "sidecars", "PeerAuthentication": "peerauthentications", "ServiceEntry": "serviceentries",
    "WorkloadEntry": "workloadentries",
}


def path(obj: dict, named: bool = True) -> str:
    api, kind = obj["apiVersion"], obj["kind"]
    if kind not in PLURALS:
        return KubeApi.path(obj, named)
    base = f"/api/{api}" if "/" not in api else f"/apis/{api}"
    p = f"{base}/namespaces/{obj['metadata']['namespace']}/{PLURALS[kind]}"
    return f"{p}/{obj['metadata']['name']}" if named else p


def apply(api: KubeApi, obj: dict) -> int:
    """Creates or replaces ``obj``; the status (a faulted server may refuse: the caller logs it)."""
    status, _ = api.request("PUT", path(obj), obj)
    if status == 404:
        status, _ = api.request("POST", path(obj, named=False), obj)
    return status


def delete(api: KubeApi, obj: dict) -> int:
    return api.request("DELETE", path(obj))[0]


def istio(kind: str, name: str, spec: dict, group: str = "networking.istio.io") -> dict:
    return {"apiVersion": f"{group}/v1", "kind": kind, "metadata": {"name": name, "namespace": NS}, "spec": spec}


def chaos_service() -> dict:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "chaos", "namespace": NS},
            "spec": {"selector": {"app": "chaos"},
                     "ports": [{"name": "grpc", "port": 7070, "targetPort": 17070, "appProtocol": "grpc"}]}}


def deployment(version: str, replicas: int) -> dict:
    labels = {"app": "chaos", "version": version, "security.istio.io/tlsMode": "istio"}
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": f"chaos-{version}", "namespace": NS},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "chaos", "version": version}},
                     "template": {"metadata": {"labels": labels},
                                  "spec": {"containers": [{"name": "app", "image": "chaos",
                                                           "ports": [{"containerPort": 17070}]}]}}}}


# --- clients ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Node:
    """Who a client is: its node ID and metadata, and how it speaks."""
    kind: str  # "grpc" | "sidecar"
    namespace: str
    network: str
    delta: bool
    n: int

    @property
    def id(self) -> str:
        return f"sidecar~10.9.{self.n}.1~chaos-{self.n}.{self.namespace}~{self.namespace}.svc.cluster.local"

    def proto(self):
        meta = {"NAMESPACE": self.namespace, "NETWORK": self.network,
                "CLUSTER_ID": "cluster1" if self.network == "network1" else "cluster2"}
        return grpc_node(self.id, **meta) if self.kind == "grpc" else sidecar_node(self.id, **meta)

    def __str__(self) -> str:
        return f"#{self.n} {self.kind}/{'delta' if self.delta else 'sotw'}/{self.namespace}/{self.network}"


def grpc_names() -> list[str]:
    """What a proxyless client watches by name: every service's cluster and its subsets' (present or not)."""
    out = []
    for h in HOSTS:
        port = PORTS.get(h, 9080 if "helloworld" not in h else 5000)
        out += [f"outbound|{port}|{s}|{h}" for s in ("", "v1", "v2", "v3")]
    return out


class Client:
    """An ADS client that follows CDS → EDS as its proxy would (CDS wildcard for a sidecar, by name for
    gRPC; then EDS for every EDS cluster it holds) and keeps exactly what it was told: name → the
    resource's bytes. ``drops_removals`` is the negative control: it never forgets a cluster."""

    def __init__(self, addr: str, node: Node, drops_removals: bool = False):
        self.addr, self.node, self.drops_removals = addr, node, drops_removals
        self.held: dict[str, dict[str, bytes]] = {CDS: {}, EDS: {}}
        self.versions: dict[str, dict[str, str]] = {CDS: {}, EDS: {}}
        self.eds_names: set[str] = set()
        self.last_response = time.monotonic()
        self.lock = threading.Lock()
        self.connect(resume=False)

    def connect(self, resume: bool) -> None:
        self.ads = Ads(self.addr, delta=self.node.delta)
        self.first = True
        names = grpc_names() if self.node.kind == "grpc" else []
        initial = {}
        if resume and self.node.delta:
            initial = {CDS: dict(self.versions[CDS]), EDS: dict(self.versions[EDS])}
        if not resume:
            self.held = {CDS: {}, EDS: {}}
        if self.node.delta:
            self.ads.send(CDS, node=self.node.proto(), resource_names_subscribe=names,
                          initial_resource_versions=initial.get(CDS, {}))
        else:
            self.ads.send(CDS, node=self.node.proto(), resource_names=names)
        self.eds_names = set()
        if resume:
            self.subscribe_eds(self.eds_clusters(), initial.get(EDS, {}))

    def reconnect(self) -> None:
        self.ads.close()
        self.connect(resume=True)

    def eds_clusters(self) -> set[str]:
        out = set()
        for name, raw in self.held[CDS].items():
            c = cluster_pb2.Cluster.FromString(raw)
            if c.type == cluster_pb2.Cluster.EDS:
                out.add(c.eds_cluster_config.service_name or name)
        return out

    def subscribe_eds(self, names: set[str], initial: dict | None = None) -> None:
        if self.node.delta:
            sub, unsub = sorted(names - self.eds_names), sorted(self.eds_names - names)
            if sub or unsub or initial:
                self.ads.send(EDS, resource_names_subscribe=sub, resource_names_unsubscribe=unsub,
                              initial_resource_versions=initial or {})
        elif names != self.eds_names:
            self.ads.send(EDS, resource_names=sorted(names))
        for gone in self.eds_names - names:
            self.held[EDS].pop(gone, None)
            self.versions[EDS].pop(gone, None)
        self.eds_names = set(names)

    def pump(self) -> None:
        """Applies every response waiting, ACKs it, and follows CDS with the EDS subscription."""
        while True:
            try:
                resp = self.ads.responses.get_nowait()
            except queue.Empty:
                return
            if isinstance(resp, Exception):
                # The stream ended (meshd's new-stream limit, or a reset): come back as a proxy would.
                time.sleep(0.2)
                self.connect(resume=True)
                continue
            self.last_response = time.monotonic()
            self.apply(resp)

    def apply(self, resp) -> None:
        ty = resp.type_url
        held, versions = self.held[ty], self.versions[ty]
        # Like Envoy and gRPC: an assignment for a cluster no longer watched (a response that crossed
        # the unsubscribe) is dropped.
        watched = (lambda name: name in self.eds_names) if ty == EDS else (lambda name: True)
        if self.node.delta:
            for r in resp.resources:
                if watched(r.name):
                    held[r.name] = r.resource.value
                    versions[r.name] = r.version
            if not self.drops_removals:
                for name in resp.removed_resources:
                    held.pop(name, None)
                    versions.pop(name, None)
            self.ads.ack(resp)
        else:
            got = {name: decoded for name, decoded in decode(resp).items()}
            raw = {name: a.value for name, a in zip(got, resp.resources) if watched(name)}
            if ty == CDS and not self.drops_removals:
                held.clear()
            held.update(raw)
            self.ads.ack(resp, sorted(self.eds_names) if ty == EDS else
                         (grpc_names() if self.node.kind == "grpc" else []))
        if ty == CDS:
            self.subscribe_eds(self.eds_clusters())

    def quiet_for(self) -> float:
        return time.monotonic() - self.last_response

    def snapshot(self) -> dict[str, dict[str, bytes]]:
        return {ty: dict(v) for ty, v in self.held.items()}

    def close(self) -> None:
        self.ads.close()


def settle(clients: list[Client], quiet: float, timeout: float) -> None:
    """Pumps until every client has heard nothing for ``quiet`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for c in clients:
            c.pump()
        if all(c.quiet_for() >= quiet for c in clients):
            return
        time.sleep(0.05)


def diff(a: dict[str, dict[str, bytes]], b: dict[str, dict[str, bytes]]) -> list[str]:
    out = []
    for ty in (CDS, EDS):
        short = "CDS" if ty == CDS else "EDS"
        for name in sorted(set(a[ty]) | set(b[ty])):
            if name not in b[ty]:
                out.append(f"{short} {name}: held, a fresh client is not sent it")
            elif name not in a[ty]:
                out.append(f"{short} {name}: missing (a fresh client gets it)")
            elif a[ty][name] != b[ty][name]:
                out.append(f"{short} {name}: stale bytes")
    return out


# --- what the simulators say -------------------------------------------------------------------------


@dataclass
class World:
    """The chaos side: the simulators, what was done to them, and the ground truth read back."""
    meshd: Meshd
    rng: random.Random
    kinds: set[str]
    events: list[str] = field(default_factory=list)
    faulted_until: dict[str, float] = field(default_factory=dict)

    def __post_init__(self):
        self.api = {c: KubeApi(self.meshd.kubeconfig(c)) for c in ("cluster1", "cluster2")}
        self.secret = self.api["cluster1"].get(f"/api/v1/namespaces/{SYSTEM}/secrets/istio-remote-secret-cluster2")
        self.joined = True
        self.faulted_until = {c: 0.0 for c in self.api}
        self.start = time.monotonic()
        for c, api in self.api.items():
            assert apply(api, chaos_service()) in (200, 201)
            for v in ("v1", "v2"):
                assert apply(api, deployment(v, 1)) in (200, 201)

    def log(self, what: str) -> None:
        self.events.append(f"{time.monotonic() - self.start:7.1f}s {what}")

    def healthy(self) -> list[str]:
        now = time.monotonic()
        return [c for c, until in self.faulted_until.items() if until < now]

    # The chaos kinds.
    def endpoints(self) -> None:
        cluster = self.rng.choice(self.healthy() or ["cluster1"])
        v, n = self.rng.choice(("v1", "v2")), self.rng.randint(0, 3)
        self.log(f"endpoints {cluster} chaos-{v} x{n}: {apply(self.api[cluster], deployment(v, n))}")

    def config(self) -> None:
        api = self.api["cluster1"]
        rng = self.rng
        what = rng.choice(("dr", "vs", "sidecar", "pa", "se"))
        if what == "dr":
            subsets = [{"name": v, "labels": {"version": v}} for v in ("v1", "v2", "v3") if rng.random() < 0.7]
            spec = {"host": "chaos", "subsets": subsets}
            if rng.random() < 0.5:
                spec["trafficPolicy"] = {"tls": {"mode": rng.choice(("ISTIO_MUTUAL", "DISABLE"))}}
            obj = istio("DestinationRule", "chaos", spec)
        elif what == "vs":
            w = rng.randint(0, 100)
            obj = istio("VirtualService", "chaos", {"hosts": ["chaos"], "http": [{"route": [
                {"destination": {"host": "chaos", "subset": "v1"}, "weight": w},
                {"destination": {"host": "chaos", "subset": "v2"}, "weight": 100 - w}]}]})
        elif what == "sidecar":
            hosts = [f"./{h}" for h in rng.sample(HOSTS, rng.randint(1, len(HOSTS)))]
            obj = istio("Sidecar", "default", {"egress": [{"hosts": hosts + [f"{SYSTEM}/*"]}]})
        elif what == "pa":
            obj = istio("PeerAuthentication", "default",
                        {"mtls": {"mode": rng.choice(("STRICT", "PERMISSIVE", "DISABLE"))}}, "security.istio.io")
        else:
            ip = f"10.202.9.{rng.randint(1, 200)}"
            we = istio("WorkloadEntry", "chaos-vm", {"address": ip, "network": "network2",
                                                     "labels": {"app": "chaos-ext", "security.istio.io/tlsMode": "istio"}})
            se = istio("ServiceEntry", "chaos-ext", {
                "hosts": ["chaos-ext.example.internal"], "location": "MESH_INTERNAL", "resolution": "STATIC",
                "ports": [{"number": 7070, "name": "grpc", "protocol": "GRPC"}],
                "workloadSelector": {"labels": {"app": "chaos-ext"}}})
            if rng.random() < 0.3:
                self.log(f"config delete ServiceEntry+WorkloadEntry: {delete(api, se)} {delete(api, we)}")
            else:
                self.log(f"config apply ServiceEntry+WorkloadEntry {ip}: {apply(api, se)} {apply(api, we)}")
            return
        if rng.random() < 0.25:
            self.log(f"config delete {obj['kind']}: {delete(api, obj)}")
        else:
            self.log(f"config apply {obj['kind']} {obj['spec']}: {apply(api, obj)}")

    def secret_change(self) -> None:
        primary = self.api["cluster1"]
        secret = copy.deepcopy(self.secret)
        for k in ("resourceVersion", "uid", "creationTimestamp", "managedFields"):
            secret["metadata"].pop(k, None)
        if self.joined and self.rng.random() < 0.4:
            status = primary.request("DELETE", KubeApi.path(secret))[0]
            self.log(f"secret deleted: {status}")
            # A faulted primary refuses (429, 5xx): the remote stays joined.
            self.joined = status not in (200, 202)
            return
        key = next(iter(secret["data"]))
        body = base64.b64decode(secret["data"][key]).decode() + f"\n# rotated {self.rng.random()}\n"
        secret["data"][key] = base64.b64encode(body.encode()).decode()
        status, _ = primary.request("PUT", KubeApi.path(secret), secret)
        if status == 404:
            status, _ = primary.request("POST", KubeApi.path(secret, named=False), secret)
        self.log(f"secret {'rotated' if self.joined else 're-created'}: {status}")
        self.joined = self.joined or status in (200, 201)

    def fault(self) -> None:
        cluster = self.rng.choice(self.healthy() or ["cluster2"])
        kind = self.rng.choice(("compact", "drop", "silence", "5xx", "429", "hang"))
        secs = round(self.rng.uniform(0.5, 3.0), 1)
        api = self.api[cluster]
        if kind == "compact":
            api.fault(compact=True, dropWatches=True)
            secs = 0
        elif kind == "drop":
            api.fault(dropWatches=True)
            secs = 0
        elif kind == "silence":
            api.fault(silenceWatches=True)
            secs = 0
        elif kind == "hang":
            api.fault(mode="hang", forSeconds=secs)
        else:
            api.fault(mode="error", status=429 if kind == "429" else self.rng.choice((500, 503)), forSeconds=secs)
        self.faulted_until[cluster] = time.monotonic() + secs + 0.3
        self.log(f"fault {cluster} {kind} {secs}s")

    def calm(self) -> None:
        time.sleep(max(0.0, max(self.faulted_until.values()) - time.monotonic()))
        for api in self.api.values():
            api.fault(mode="none")

    def probe(self, control: Client) -> None:
        """A removal every quiet point is sure to contain: a ServiceEntry in `default` appears in the
        negative control's CDS and is deleted again, so a client that drops removals still holds it."""
        api = self.api["cluster1"]
        host = f"probe-{len(self.events)}.example.internal"
        se = {"apiVersion": "networking.istio.io/v1", "kind": "ServiceEntry",
              "metadata": {"name": "chaos-probe", "namespace": "default"},
              "spec": {"hosts": [host], "location": "MESH_EXTERNAL", "resolution": "STATIC",
                       "ports": [{"number": 80, "name": "http", "protocol": "HTTP"}],
                       "endpoints": [{"address": "192.0.2.200"}]}}
        apply(api, se)
        deadline = time.monotonic() + 20
        while not any(n.endswith(f"|{host}") for n in control.held[CDS]) and time.monotonic() < deadline:
            control.pump()
            time.sleep(0.05)
        delete(api, se)
        self.log(f"probe {host} added and removed")

    def describe(self) -> str:
        """The objects chaos changes, as they are now (for failure reports)."""
        out = {"remote joined": self.joined, "chaos endpoints": self.chaos_ips()}
        for kind, plural, group in (("DestinationRule", "destinationrules", "networking.istio.io"),
                                    ("VirtualService", "virtualservices", "networking.istio.io"),
                                    ("Sidecar", "sidecars", "networking.istio.io"),
                                    ("PeerAuthentication", "peerauthentications", "security.istio.io")):
            status, body = self.api["cluster1"].request("GET", f"/apis/{group}/v1/namespaces/{NS}/{plural}")
            out[kind] = [o["spec"] for o in body.get("items", [])] if status == 200 else status
        return str(out)

    def sidecar_hosts(self) -> set[str] | None:
        """The hosts the `sample` Sidecar imports (None: there is none)."""
        status, body = self.api["cluster1"].request("GET", f"/apis/networking.istio.io/v1/namespaces/{NS}/sidecars/default")
        if status != 200:
            return None
        return {h.split("/", 1)[1] for e in body["spec"].get("egress", []) for h in e.get("hosts", [])
                if h.startswith("./")}

    def existing_hosts(self) -> set[str]:
        """The hosts of HOSTS with a Service in a cluster of the mesh (bookinfo's ratings lives only
        in cluster2, so it leaves the mesh with the remote's Secret)."""
        out = set()
        for cluster, api in self.api.items():
            if cluster == "cluster2" and not self.joined:
                continue
            for svc in api.get(f"/api/v1/namespaces/{NS}/services")["items"]:
                out.add(f"{svc['metadata']['name']}.{NS}.svc.cluster.local")
        return out & set(HOSTS)

    def dr_istio_mutual(self) -> bool:
        status, body = self.api["cluster1"].request(
            "GET", f"/apis/networking.istio.io/v1/namespaces/{NS}/destinationrules/chaos")
        return status == 200 and body["spec"].get("trafficPolicy", {}).get("tls", {}).get("mode") == "ISTIO_MUTUAL"

    def pa_disabled(self) -> bool:
        status, body = self.api["cluster1"].request(
            "GET", f"/apis/security.istio.io/v1/namespaces/{NS}/peerauthentications/default")
        return status == 200 and body["spec"].get("mtls", {}).get("mode") == "DISABLE"

    def chaos_ips(self) -> dict[str, set[str]]:
        """Ready endpoint IPs of the chaos service, per network, from the simulators' slices."""
        out = {net: set() for net in GATEWAYS}
        for cluster, api in self.api.items():
            if cluster == "cluster2" and not self.joined:
                continue
            items = api.get(f"/apis/discovery.k8s.io/v1/namespaces/{NS}/endpointslices"
                            "?labelSelector=kubernetes.io/service-name%3Dchaos")["items"]
            for sl in items:
                for e in sl.get("endpoints") or []:
                    if (e.get("conditions") or {}).get("ready", True):
                        out[CLUSTER_NETWORK[cluster]] |= set(e["addresses"])
        return out


def truth_problems(world: World, client: Client) -> list[str]:
    """What the simulators' objects say the client must (not) hold."""
    from envoy.config.endpoint.v3 import endpoint_pb2

    problems = []
    held = client.held
    hosts = {name.rsplit("|", 1)[-1] for name in held[CDS] if name.startswith("outbound|")}
    scope = world.sidecar_hosts() if client.node.namespace == NS else None
    existing = world.existing_hosts()
    visible = existing if scope is None else existing & scope
    hidden = {h for h in hosts if scope is not None and h not in scope
              and not h.endswith(f".{SYSTEM}.svc.cluster.local")}
    if hidden:
        problems.append(f"Sidecar scope {sorted(scope)} but CDS holds {sorted(hidden)}")
    missing = visible - hosts
    if missing:
        problems.append(f"CDS lacks {sorted(missing)}, which its scope ({'Sidecar' if scope else 'none'}) sees")
    name = f"outbound|7070||{CHAOS_HOST}"
    if name in held[EDS]:
        cla = endpoint_pb2.ClusterLoadAssignment.FromString(held[EDS][name])
        got = {lb.endpoint.address.socket_address.address for loc in cla.endpoints for lb in loc.lb_endpoints}
        ips = world.chaos_ips()
        own = client.node.network
        other = next(n for n in GATEWAYS if n != own)
        direct = got - set(GATEWAYS.values())
        # Split horizon: endpoints of the client's own network directly, every ready one; another
        # network's never directly.
        if direct != ips[own]:
            problems.append(f"EDS {name}: direct endpoints {sorted(direct)}, the simulators' ready "
                            f"endpoints on {own}: {sorted(ips[own])}")
        # PeerAuthentication DISABLE: no endpoint takes mTLS, so none is reached through a gateway;
        # unless the DestinationRule says ISTIO_MUTUAL, which decides first (istiod's checkMtlsEnabled).
        if world.pa_disabled() and not world.dr_istio_mutual() and GATEWAYS[other] in got:
            problems.append(f"EDS {name}: PeerAuthentication DISABLE, yet {other}'s gateway is an endpoint")
    return problems


# --- the run -----------------------------------------------------------------------------------------


@dataclass
class Result:
    seed: int
    kinds: list[str]
    seconds: float
    checks: int = 0
    compared: int = 0
    control_caught: int = 0
    events: list[str] = field(default_factory=list)

    def summary(self) -> str:
        counts: dict[str, int] = {}
        for e in self.events:
            k = e.split()[1]
            counts[k] = counts.get(k, 0) + 1
        return (f"chaos: seed {self.seed}, kinds {','.join(self.kinds)}, {self.seconds:.0f}s, "
                f"{len(self.events)} events {counts}, {self.checks} quiet points, {self.compared} client "
                f"comparisons with fresh clients, negative control caught {self.control_caught}x")


def nodes(count: int) -> list[Node]:
    out = []
    combos = [(k, d, net, ns) for k in ("grpc", "sidecar") for d in (False, True)
              for net in ("network1", "network2") for ns in (NS, "default")]
    for i in range(count):
        k, d, net, ns = combos[i % len(combos)]
        out.append(Node(k, ns, net, d, i))
    return out


def check(world: World, clients: list[Client], control: Client, result: Result, timeout: float) -> None:
    """The invariant, at a quiet point: retried until ``timeout`` while meshd may still converge."""
    world.calm()
    world.probe(control)
    deadline = time.monotonic() + timeout
    addr = f"127.0.0.1:{world.meshd.grpc}"
    while True:
        settle(clients + [control], SETTLE, timeout=max(5.0, deadline - time.monotonic()))
        problems = []
        fresh = [Client(addr, c.node) for c in clients]
        settle(fresh, SETTLE, timeout=30)
        for c, f in zip(clients, fresh):
            for d in diff(c.snapshot(), f.snapshot()):
                problems.append(f"{c.node}: {d}")
            for p in truth_problems(world, f):
                problems.append(f"{c.node} (fresh): {p}")
        control_fresh = Client(addr, control.node)
        settle([control_fresh], SETTLE, timeout=30)
        control_differs = bool(diff(control.snapshot(), control_fresh.snapshot()))
        for f in fresh + [control_fresh]:
            f.close()
        if not problems:
            result.checks += 1
            result.compared += len(clients)
            result.control_caught += control_differs
            return
        if time.monotonic() > deadline:
            raise AssertionError(
                f"seed {result.seed}: quiet point {result.checks + 1} not converged after {timeout:.0f}s:\n"
                + "\n".join(problems[:40]) + f"\nworld: {world.describe()}\nlast events:\n"
                + "\n".join(world.events[-40:]))
        time.sleep(1)


def run(state: Path, seed: int, seconds: float, kinds: list[str], clients: int = 20,
        quiet_every: float = 15, meshd: Meshd | None = None) -> Result:
    own = meshd is None
    meshd = meshd or Meshd(state, ["--watch-timeout", f"{WATCH_TIMEOUT}s"])
    rng = random.Random(seed)
    result = Result(seed, kinds, seconds)
    world = World(meshd, rng, set(kinds))
    result.events = world.events
    addr = f"127.0.0.1:{meshd.grpc}"
    long_lived = [Client(addr, n) for n in nodes(clients)]
    control = Client(addr, Node("sidecar", "default", "network1", False, 99), drops_removals=True)
    try:
        check(world, long_lived, control, result, timeout=60)
        actions = {"endpoints": [world.endpoints] * 4, "config": [world.config] * 4,
                   "secret": [world.secret_change], "faults": [world.fault] * 2,
                   "reconnect": [lambda: reconnect(world, long_lived)]}
        schedule = [a for k in kinds for a in actions[k]]
        end = time.monotonic() + seconds
        next_quiet = time.monotonic() + quiet_every
        while time.monotonic() < end:
            if schedule:
                rng.choice(schedule)()
            for c in long_lived + [control]:
                c.pump()
            time.sleep(rng.uniform(0.05, 0.5))
            if time.monotonic() >= next_quiet:
                check(world, long_lived, control, result, timeout=60)
                next_quiet = time.monotonic() + quiet_every
        check(world, long_lived, control, result, timeout=60)
        assert "panicked" not in meshd.log(), meshd.log()[-4000:]
        return result
    finally:
        for c in long_lived + [control]:
            c.close()
        if own:
            assert meshd.stop() == 0, meshd.log()[-4000:]


def reconnect(world: World, clients: list[Client]) -> None:
    c = world.rng.choice(clients)
    world.log(f"reconnect {c.node}")
    c.reconnect()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seed", type=int, default=int(os.environ.get("MESHD_CHAOS_SEED", "1")))
    p.add_argument("--seconds", type=float, default=float(os.environ.get("MESHD_CHAOS_SECONDS", "60")))
    p.add_argument("--kinds", default=",".join(KINDS), help=f"comma-separated, of {','.join(KINDS)}")
    p.add_argument("--clients", type=int, default=20)
    p.add_argument("--state", type=Path, default=None, help="meshd's state folder (default: a temporary one)")
    a = p.parse_args()
    kinds = [k for k in a.kinds.split(",") if k]
    unknown = set(kinds) - set(KINDS)
    if unknown:
        p.error(f"unknown chaos kinds {sorted(unknown)}; known: {','.join(KINDS)}")
    import tempfile
    state = a.state or Path(tempfile.mkdtemp(prefix="meshd-chaos-"))
    print(f"chaos: seed {a.seed}, kinds {','.join(kinds)}, {a.seconds:.0f}s, state {state}", flush=True)
    try:
        r = run(state, a.seed, a.seconds, kinds, a.clients)
    except AssertionError as e:
        print(f"FAILED (replay: --seed {a.seed} --kinds {','.join(kinds)}):\n{e}", flush=True)
        return 1
    print(r.summary())
    if not r.control_caught:
        print("FAILED: the negative control (a client that drops removals) was never caught")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
