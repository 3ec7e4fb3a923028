"""Torture case 39 (reliability-security.md §6, F): hostile split-horizon inputs against a sandboxed meshd
with two clusters on two networks, watched by raw SotW ADS clients on net1, net2 and net3 (a network
with no workloads of its own, e.g. VMs).

Every test changes the simulators through their API and a ``World`` model of what it wrote; what each
client must hold is computed from that model by ``World.expected`` (istiod's ``EndpointsByNetworkFilter``
rules, restated below), never read back from meshd:

- an endpoint on the client's network, or on a network that has no gateway, is sent as is;
- any other endpoint is replaced by its network's gateways (those of its own cluster if it has any,
  else all of that network's), and only if it takes Istio mTLS and is ready — never as its pod IP;
- with no gateway at all, multi-network is off and everything is sent as is;
- every weight is multiplied by the LCM of the gateway group sizes; a gateway carries the sum of the
  shares of the endpoints it stands for; a gateway with nothing healthy behind it is not sent.

On top of the final views, every response any client got is checked: weights ≥ 1, locality weight = sum
of its endpoints (gRPC and Envoy need both), and the primary's pod IPs never reach a client outside net1
(net1 always has a gateway).
"""

from __future__ import annotations

import json
import math
import queue
import random
import time
from collections import Counter
from dataclasses import dataclass, field

import pytest
from envoy.config.core.v3 import base_pb2, health_check_pb2
from google.protobuf import struct_pb2

from meshd_proc import KubeApi, Meshd, eventually, namespace, topology
from xdsharness import EDS, Ads, decode

NS = "sh"
SYS = "istio-system"
GW = "istio-eastwestgateway"
CLA = f"outbound|7070||hello.{NS}.svc.cluster.local"
POD_PORT = 17070
GW_PORT = 15443
CLUSTERS = ("primary", "remote1")
CLIENT_CLUSTER = {"net1": "primary", "net2": "remote1", "net3": "primary"}
LABEL_NET = "topology.istio.io/network"
# A network that always has a gateway must never have its pod IPs sent to another network's client.
PRIMARY_POD_PREFIX = "10.1."


@dataclass
class Pod:
    name: str
    cluster: str
    ip: str
    network: str | None  # its own topology.istio.io/network label
    mtls: bool = True
    ready: bool = True


@dataclass
class World:
    """What the test wrote to the simulators and the meshNetworks file: the ground truth."""

    pods: dict[str, Pod]
    system_network: dict[str, str | None]  # the istio-system namespace label, per cluster
    # The labelled east-west gateway Service of each cluster: its network label and addresses.
    gateway_network: dict[str, str | None]
    gateway_ips: dict[str, list[str]]
    gateway_hostname: dict[str, str | None] = field(default_factory=dict)  # never resolves here
    # meshNetworks in force: network -> (fromRegistry cluster or None, fixed gateway addresses).
    mesh_networks: dict[str, tuple[str | None, list[str]]] = field(default_factory=dict)

    def network(self, pod: Pod) -> str | None:
        """istiod's endpointNetwork: pod label, system namespace label, then meshNetworks fromRegistry."""
        registry = [n for n, (reg, _) in sorted(self.mesh_networks.items()) if reg == pod.cluster]
        return pod.network or self.system_network[pod.cluster] or (registry[0] if registry else None)

    def gateways(self) -> list[tuple[str, str | None, str]]:
        """(network, cluster, ip) of every usable gateway (a hostname that fails DNS gives none)."""
        out = {(net, None, ip) for net, (_, ips) in self.mesh_networks.items() for ip in ips}
        for cluster, net in self.gateway_network.items():
            if net:
                out |= {(net, cluster, ip) for ip in self.gateway_ips[cluster]}
        return sorted(out, key=lambda g: (g[0], g[1] or "", g[2]))

    def expected(self, client_network: str) -> list[tuple[str, int, int, str]]:
        """Sorted (address, port, weight, health) of every endpoint a client on that network must hold."""
        gws = self.gateways()
        by_net: dict[str, list] = {}
        by_net_cluster: dict[tuple[str, str], list] = {}
        for g in gws:
            by_net.setdefault(g[0], []).append(g)
            if g[1]:
                by_net_cluster.setdefault((g[0], g[1]), []).append(g)
        scale = math.lcm(1, *(len(v) for v in (*by_net.values(), *by_net_cluster.values())))
        out, through = [], Counter()
        for pod in self.pods.values():
            net = self.network(pod)
            health = "HEALTHY" if pod.ready else "UNHEALTHY"
            if net == client_network or net not in by_net:
                out.append((pod.ip, POD_PORT, scale, health))
                continue
            via = by_net_cluster.get((net, pod.cluster)) or by_net[net]
            if pod.mtls and pod.ready:
                for g in via:
                    through[g[2]] += scale // len(via)
        out += [(ip, GW_PORT, w, "HEALTHY") for ip, w in through.items()]
        return sorted(out)

    def mesh_networks_yaml(self) -> str:
        nets = {}
        for net, (registry, ips) in self.mesh_networks.items():
            nets[net] = {"endpoints": [{"fromRegistry": registry}] if registry else [],
                         "gateways": [{"address": ip, "port": GW_PORT} for ip in ips]}
        return json.dumps({"networks": nets})  # JSON is YAML


def pod_object(p: Pod) -> dict:
    labels = {"app": "hello"}
    if p.mtls:
        labels["security.istio.io/tlsMode"] = "istio"
    if p.network:
        labels[LABEL_NET] = p.network
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": p.name, "namespace": NS, "labels": labels},
            "spec": {"containers": [{"name": "hello", "image": "hello"}]}}


def slice_object(world: World, cluster: str) -> dict:
    pods = [p for p in world.pods.values() if p.cluster == cluster]
    return {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": "hello-a", "namespace": NS, "labels": {"kubernetes.io/service-name": "hello"}},
            "addressType": "IPv4",
            "ports": [{"name": "grpc", "port": POD_PORT, "protocol": "TCP"}],
            "endpoints": [{"addresses": [p.ip], "conditions": {"ready": p.ready},
                           "targetRef": {"kind": "Pod", "name": p.name, "namespace": NS}} for p in pods]}


def gateway_object(world: World, cluster: str) -> dict:
    net = world.gateway_network[cluster]
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": GW, "namespace": SYS,
                         "labels": {"istio": "eastwestgateway", **({LABEL_NET: net} if net else {})}},
            "spec": {"type": "LoadBalancer", "selector": {"istio": "eastwestgateway"},
                     "ports": [{"name": "tls", "port": GW_PORT, "targetPort": GW_PORT}],
                     "externalIPs": list(world.gateway_ips[cluster])}}


def system_namespace(world: World, cluster: str) -> dict:
    net = world.system_network[cluster]
    return namespace(SYS, **({LABEL_NET: net} if net else {}))


def hello_service() -> dict:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "hello", "namespace": NS},
            "spec": {"selector": {"app": "hello"},
                     "ports": [{"name": "grpc", "port": 7070, "targetPort": POD_PORT, "appProtocol": "grpc"}]}}


def initial_world() -> World:
    pods = [
        Pod("p1a", "primary", "10.1.0.1", "net1"),
        Pod("p1b", "primary", "10.1.0.2", None),  # on net1 through its cluster's system namespace
        Pod("r1a", "remote1", "10.2.0.1", "net2"),
        Pod("r1b", "remote1", "10.2.0.2", None),  # follows remote1's system namespace
        Pod("r1c", "remote1", "10.2.0.3", "net2", ready=False),
        Pod("r1d", "remote1", "10.2.0.4", "net2", mtls=False),  # no sidecar: unreachable through a gateway
    ]
    return World(pods={p.name: p for p in pods},
                 system_network={"primary": "net1", "remote1": "net2"},
                 gateway_network={"primary": "net1", "remote1": "net2"},
                 gateway_ips={"primary": ["192.0.2.10"], "remote1": ["198.51.100.10"]})


def sidecar(net: str) -> base_pb2.Node:
    meta = struct_pb2.Struct()
    meta.update({"NETWORK": net, "CLUSTER_ID": CLIENT_CLUSTER[net], "NAMESPACE": NS})
    return base_pb2.Node(id=f"sidecar~10.99.0.{net[-1]}~client-{net}.{NS}~{NS}.svc.cluster.local", metadata=meta)


def flatten(cla) -> tuple:
    """The (address, port, weight, health) of a CLA, after checking the weights are valid for Envoy/gRPC."""
    out = []
    for loc in cla.endpoints:
        weights = [lb.load_balancing_weight.value for lb in loc.lb_endpoints]
        assert all(w >= 1 for w in weights), f"a zero weight: {cla}"
        assert loc.load_balancing_weight.value == sum(weights), f"locality weight is not the sum: {cla}"
        out += [(lb.endpoint.address.socket_address.address, lb.endpoint.address.socket_address.port_value, w,
                 health_check_pb2.HealthStatus.Name(lb.health_status)) for lb, w in zip(loc.lb_endpoints, weights)]
    assert sum(w for *_, w, _ in out) < 2**32, f"weights overflow uint32: {cla}"
    return tuple(sorted(out))


class Client:
    """A raw SotW ADS client on one network, ACKing every response and keeping every view it got."""

    def __init__(self, meshd: Meshd, net: str):
        self.net = net
        self.ads = Ads(f"127.0.0.1:{meshd.grpc}")
        self.ads.send(EDS, node=sidecar(net), resource_names=[CLA])
        self.history: list[tuple] = []

    def drain(self) -> None:
        while True:
            try:
                resp = self.ads.recv(timeout=0.02)
            except queue.Empty:
                return
            cla = decode(resp).get(CLA)
            if cla is not None:
                self.history.append(flatten(cla))
            self.ads.ack(resp, [CLA])

    @property
    def view(self) -> tuple | None:
        return self.history[-1] if self.history else None

    def since(self, mark: int) -> list[tuple]:
        return self.history[mark:]


class Mesh:
    def __init__(self, meshd: Meshd, world: World, networks_file):
        self.meshd = meshd
        self.world = world
        self.networks_file = networks_file
        self.api = {c: KubeApi(meshd.kubeconfig(c)) for c in CLUSTERS}
        self.clients = {n: Client(meshd, n) for n in ("net1", "net2", "net3")}

    def drain(self) -> None:
        for c in self.clients.values():
            c.drain()

    def converge(self, why: str, timeout: float = 20) -> None:
        """Every client's latest view equals the ground truth."""
        deadline = time.monotonic() + timeout
        while True:
            self.drain()
            want = {n: tuple(self.world.expected(n)) for n in self.clients}
            got = {n: c.view for n, c in self.clients.items()}
            if got == want:
                return
            if time.monotonic() > deadline:
                diff = "\n".join(f"{n}: want {want[n]}\n      got  {got[n]}" for n in want if got[n] != want[n])
                raise AssertionError(f"{why}: not converged after {timeout}s\n{diff}\n{self.meshd.log()[-3000:]}")
            time.sleep(0.05)

    def marks(self) -> dict[str, int]:
        return {n: len(c.history) for n, c in self.clients.items()}

    def assert_never_raw(self, marks: dict[str, int], prefix: str, clients: tuple[str, ...]) -> None:
        for n in clients:
            leaked = [v for v in self.clients[n].since(marks[n]) if any(a.startswith(prefix) for a, *_ in v)]
            assert not leaked, f"{n} was sent raw pod IPs {prefix}*: {leaked[:3]}"

    # Writers: change the model and the simulator together.
    def put_pod(self, pod: Pod) -> None:
        self.world.pods[pod.name] = pod
        self.api[pod.cluster].apply(pod_object(pod))
        self.api[pod.cluster].apply(slice_object(self.world, pod.cluster))

    def put_gateway(self, cluster: str, network: str | None, ips: list[str]) -> None:
        self.world.gateway_network[cluster] = network
        self.world.gateway_ips[cluster] = list(ips)
        self.api[cluster].apply(gateway_object(self.world, cluster))

    def put_gateway_hostname(self, cluster: str, hostname: str | None) -> None:
        self.world.gateway_hostname[cluster] = hostname
        svc = self.api[cluster].get(f"/api/v1/namespaces/{SYS}/services/{GW}")
        svc["status"] = {"loadBalancer": {"ingress": [{"hostname": hostname}] if hostname else []}}
        status, body = self.api[cluster].request("PUT", f"/api/v1/namespaces/{SYS}/services/{GW}/status", svc)
        assert status == 200, body

    def put_system_network(self, cluster: str, network: str | None) -> None:
        self.world.system_network[cluster] = network
        self.api[cluster].apply(system_namespace(self.world, cluster))

    def put_mesh_networks(self, nets: dict[str, tuple[str | None, list[str]]]) -> None:
        self.world.mesh_networks = nets
        write_file(self.networks_file, self.world.mesh_networks_yaml())

    def reload_errors(self) -> float:
        status, body = self.meshd.get("/metrics")
        assert status == 200
        for line in body.splitlines():
            if line.startswith("meshd_config_reload_errors_total") and 'config="meshNetworks"' in line:
                return float(line.split()[-1])
        raise AssertionError("no meshNetworks reload error counter")


def write_file(path, text: str) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    tmp.replace(path)


@pytest.fixture(scope="module")
def mesh(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("split-horizon")
    world = initial_world()
    objects = {c: [system_namespace(world, c), namespace(NS), hello_service(), gateway_object(world, c),
                   *[pod_object(p) for p in world.pods.values() if p.cluster == c], slice_object(world, c)]
               for c in CLUSTERS}
    networks_file = tmp / "mesh-networks.yaml"
    write_file(networks_file, world.mesh_networks_yaml())
    meshd = Meshd(tmp / "state", ["--sandbox", str(topology(tmp / "clusters", objects)),
                                  "--mesh-networks", str(networks_file), "--config-poll", "100ms"])
    # The clients connect the moment meshd is ready: their very first view is checked too.
    m = Mesh(meshd, world, networks_file)
    yield m
    m.drain()
    m.assert_never_raw({n: 0 for n in m.clients}, PRIMARY_POD_PREFIX, ("net2", "net3"))
    assert "panicked" not in meshd.log()
    assert meshd.stop() == 0, meshd.log()[-4000:]


def test_39_each_network_reaches_the_other_through_its_gateway(mesh):
    mesh.converge("initial state")
    # Stated explicitly once (the other tests rely on World.expected): net1 holds its own two pods and
    # remote1's gateway weighted by remote1's two ready mTLS pods; r1c (not ready) and r1d (no sidecar)
    # cannot be reached through a gateway and are dropped.
    assert mesh.clients["net1"].view == (
        ("10.1.0.1", POD_PORT, 1, "HEALTHY"), ("10.1.0.2", POD_PORT, 1, "HEALTHY"),
        ("198.51.100.10", GW_PORT, 2, "HEALTHY"))
    assert mesh.clients["net2"].view == (
        ("10.2.0.1", POD_PORT, 1, "HEALTHY"), ("10.2.0.2", POD_PORT, 1, "HEALTHY"),
        ("10.2.0.3", POD_PORT, 1, "UNHEALTHY"), ("10.2.0.4", POD_PORT, 1, "HEALTHY"),
        ("192.0.2.10", GW_PORT, 2, "HEALTHY"))
    assert mesh.clients["net3"].view == (("192.0.2.10", GW_PORT, 2, "HEALTHY"),
                                         ("198.51.100.10", GW_PORT, 2, "HEALTHY"))
    # From the first response on, no client was sent the other network's pod IPs.
    mesh.assert_never_raw({n: 0 for n in mesh.clients}, "10.2.", ("net1", "net3"))


def test_39_flapping_gateway_never_exposes_pod_ips(mesh):
    """remote1's gateway Service flaps (addresses appear, change, multiply and vanish; its network label
    comes and goes) as fast as the API takes it, while meshNetworks keeps a fixed fallback gateway for
    net2: net2's pods must reach other networks only ever through a gateway."""
    mesh.put_mesh_networks({"net2": (None, ["203.0.113.2"])})
    mesh.converge("fallback gateway added")
    marks = mesh.marks()
    rng = random.Random(39)
    choices = [[], ["198.51.100.10"], ["198.51.100.11"], ["198.51.100.10", "198.51.100.12"],
               ["198.51.100.12", "198.51.100.13", "198.51.100.14"]]
    for _ in range(40):
        mesh.put_gateway("remote1", rng.choice(["net2", "net2", None]), rng.choice(choices))
        mesh.drain()
        time.sleep(rng.uniform(0, 0.05))
    mesh.converge("after the flapping")
    mesh.assert_never_raw(marks, "10.2.", ("net1", "net3"))
    # The last state, then the gateway back to normal and the fallback gone.
    mesh.put_gateway("remote1", "net2", ["198.51.100.10"])
    mesh.put_mesh_networks({})
    mesh.converge("gateway restored")


def test_39_gateway_hostname_failing_dns_is_no_gateway(mesh):
    """A gateway whose only address is a DNS name that never resolves leads nowhere: with a meshNetworks
    fallback, net2 goes through the fallback; without one net2 has no gateway and istiod's rule sends its
    endpoints as they are (nothing else could reach them)."""
    mesh.put_mesh_networks({"net2": (None, ["203.0.113.2"])})
    mesh.put_gateway("remote1", "net2", [])
    mesh.put_gateway_hostname("remote1", "gw.invalid")
    mesh.converge("hostname gateway with a fallback")
    marks = mesh.marks()
    eventually("the DNS failure logged", lambda: "gw.invalid" in mesh.meshd.log())
    mesh.converge("still through the fallback after the DNS failure")
    mesh.assert_never_raw(marks, "10.2.", ("net1", "net3"))

    mesh.put_mesh_networks({})
    mesh.converge("no usable gateway for net2: direct")
    assert any(a.startswith("10.2.") for a, *_ in mesh.clients["net1"].view)

    mesh.put_gateway_hostname("remote1", None)
    mesh.put_gateway("remote1", "net2", ["198.51.100.10"])
    mesh.converge("gateway restored")


def test_39_network_label_changes_move_endpoints(mesh):
    """A pod's own label, the system namespace label (the cluster's network) and meshNetworks
    fromRegistry decide an endpoint's network, in that order; each change is recomputed for every
    client."""
    w = mesh.world
    # A pod leaves for net3, which has no gateway: sent as is to everyone, direct for net3.
    mesh.put_pod(Pod("r1a", "remote1", "10.2.0.1", "net3"))
    mesh.converge("r1a on net3")
    # ... then joins net1: net1 sends to it directly, net2 and net3 through net1's gateway.
    mesh.put_pod(Pod("r1a", "remote1", "10.2.0.1", "net1"))
    mesh.converge("r1a on net1")
    # remote1's cluster network moves to net4 (no gateway): the unlabelled r1b goes with it.
    mesh.put_system_network("remote1", "net4")
    mesh.converge("remote1 on net4")
    # The label goes: meshNetworks fromRegistry names remote1's network instead.
    mesh.put_mesh_networks({"net2": ("remote1", [])})
    mesh.put_system_network("remote1", None)
    mesh.converge("remote1 on net2 by fromRegistry")
    assert w.network(w.pods["r1b"]) == "net2"
    # The pod loses its mTLS label while on a network behind a gateway: it is dropped for the others.
    mesh.put_pod(Pod("r1b", "remote1", "10.2.0.2", None, mtls=False))
    mesh.converge("r1b without mTLS")
    # Back to the start.
    mesh.put_pod(Pod("r1a", "remote1", "10.2.0.1", "net2"))
    mesh.put_pod(Pod("r1b", "remote1", "10.2.0.2", None))
    mesh.put_system_network("remote1", "net2")
    mesh.put_mesh_networks({})
    mesh.converge("labels restored")


def test_39_mesh_networks_bad_reload_keeps_the_last_good(mesh):
    """meshNetworks gains a network with two gateways and no endpoints (no client gets those gateways,
    but the weight scale becomes 2); a broken file then changes nothing; a good one applies."""
    mesh.put_mesh_networks({"net9": (None, ["203.0.113.91", "203.0.113.92"]), "net2": (None, ["203.0.113.2"])})
    mesh.converge("net9 and a net2 fallback")
    assert {g["Addr"] for g in mesh.meshd.json("/debug/networkz")} >= {"203.0.113.91", "203.0.113.92", "203.0.113.2"}
    assert not any(a.startswith("203.0.113.9") for c in mesh.clients.values() for a, *_ in c.view)

    for bad in ("networks: {net2: {gateways: [{address: 203.0.113.3, port: 15443, bogus: 1}]}}",
                "networks: [", "\x00\x01\x02", "networks: {net2: {gateways: [{port: 15443}]}}"):
        before = mesh.reload_errors()
        views = {n: c.view for n, c in mesh.clients.items()}
        write_file(mesh.networks_file, bad)
        eventually(f"the bad meshNetworks {bad!r} rejected", lambda: mesh.reload_errors() > before)
        mesh.converge(f"last good meshNetworks kept after {bad!r}")
        assert {n: c.view for n, c in mesh.clients.items()} == views

    mesh.put_mesh_networks({})
    mesh.converge("meshNetworks emptied")


def test_39_no_weightless_gateway_when_nothing_behind_it_is_healthy(mesh):
    """Every remote1 pod becomes unready: the other networks get no gateway at all for them (a gateway
    with weight 0 is invalid, one with weight 1 would draw traffic to nothing); net2 still sees its own
    pods, unhealthy."""
    names = [p.name for p in mesh.world.pods.values() if p.cluster == "remote1"]
    ready = {n: mesh.world.pods[n].ready for n in names}
    for n in names:
        mesh.world.pods[n].ready = False
    mesh.api["remote1"].apply(slice_object(mesh.world, "remote1"))
    mesh.converge("remote1 all unready")
    assert not any(a == "198.51.100.10" for a, *_ in mesh.clients["net1"].view)
    for n in names:
        mesh.world.pods[n].ready = ready[n]
    mesh.api["remote1"].apply(slice_object(mesh.world, "remote1"))
    mesh.converge("remote1 ready again")


def test_39_gateway_counts_whose_lcm_overflows_keep_weights_valid_and_in_proportion(mesh):
    """Ten gateway-only networks with 2, 3, 5, ..., 29 gateways: the LCM scale (6,469,693,230) alone is
    over uint32. Weights must stay valid (each ≥ 1, every sum < 2³²: Envoy rejects more) and keep their
    proportions: remote1's gateway stands for two pods, each of net1's pods for one."""
    primes = (2, 3, 5, 7, 11, 13, 17, 19, 23, 29)
    nets = {f"lcm{p}": (None, [f"100.64.{p}.{i + 1}" for i in range(p)]) for p in primes}
    write_file(mesh.networks_file, json.dumps(
        {"networks": {n: {"gateways": [{"address": ip, "port": GW_PORT} for ip in ips]} for n, (_, ips) in nets.items()}}))
    want = {"10.1.0.1", "10.1.0.2", "198.51.100.10"}

    def scaled():
        mesh.drain()  # every response is checked by flatten()
        view = mesh.clients["net1"].view
        return view if {a for a, *_ in view} == want and view[0][2] > 1 else None

    view = eventually("the hostile meshNetworks applied", scaled)
    w = {a: weight for a, _, weight, _ in view}
    assert w["10.1.0.1"] == w["10.1.0.2"]
    assert w["198.51.100.10"] / w["10.1.0.1"] == pytest.approx(2, rel=1e-6)
    mesh.put_mesh_networks({})
    mesh.converge("meshNetworks emptied")
