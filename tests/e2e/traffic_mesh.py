"""A two-cluster sandbox for traffic-policy tests with real gRPC traffic: cluster1 (primary, config
cluster, region us-east1) and cluster2 (remote, region eu-west1) on one network, so every endpoint is
reached directly. Each pod is a gRPC echo backend the test runs on its own loopback address; the pod's
named container port ``grpc`` is the backend's port, so the Services' ``targetPort: grpc`` resolves per
pod and the simulator's EndpointSlice controller writes the slices (readiness follows the pod's Ready
condition, as in a real cluster).

Services in namespace ``traffic`` (port 7070):

- ``echo``: ``v1`` in cluster1 (us-east1-a), ``v2`` in cluster2 (eu-west1-a): the canary;
- ``fo``: two pods in cluster1 (us-east1-a) and one in cluster2 (eu-west1-a): locality failover.

The client is a proxyless gRPC client in ``traffic`` on cluster1, in ``us-east1/us-east1-a``."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import proxyless
from meshd_proc import Meshd, eventually, namespace, topology
from xdsharness import EchoBackend

HERE = Path(__file__).resolve().parent
NS = "traffic"
LOCALITY = {"us-east1": "us-east1-a", "eu-west1": "eu-west1-a"}
CLUSTER_REGION = {"cluster1": "us-east1", "cluster2": "eu-west1"}


@dataclass(frozen=True)
class Pod:
    name: str
    app: str
    version: str
    cluster: str
    ip: str

    @property
    def region(self) -> str:
        return CLUSTER_REGION[self.cluster]


PODS = [
    Pod("echo-v1-0", "echo", "v1", "cluster1", "127.0.0.11"),
    Pod("echo-v2-0", "echo", "v2", "cluster2", "127.0.0.12"),
    Pod("fo-local-0", "fo", "v1", "cluster1", "127.0.0.21"),
    Pod("fo-local-1", "fo", "v1", "cluster1", "127.0.0.22"),
    Pod("fo-remote-0", "fo", "v1", "cluster2", "127.0.0.23"),
]


def host(app: str) -> str:
    return f"{app}.{NS}.svc.cluster.local"


def target(app: str) -> str:
    return f"xds:///{host(app)}:7070"


def service(app: str) -> dict:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": app, "namespace": NS},
            "spec": {"selector": {"app": app},
                     "ports": [{"name": "grpc", "port": 7070, "targetPort": "grpc", "appProtocol": "grpc"}]}}


def ready_condition(ready: bool) -> dict:
    return {"type": "Ready", "status": "True" if ready else "False"}


def pod(p: Pod, port: int) -> dict:
    """A running pod whose status is written here (the simulated kubelet leaves such pods alone)."""
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": p.name, "namespace": NS, "labels": {
            "app": p.app, "version": p.version,
            "topology.istio.io/locality": f"{p.region}.{LOCALITY[p.region]}"}},
        "spec": {"containers": [{"name": "app", "image": "echo",
                                 "ports": [{"name": "grpc", "containerPort": port}]}]},
        "status": {"phase": "Running", "podIP": p.ip, "podIPs": [{"ip": p.ip}],
                   "conditions": [ready_condition(True)]},
    }


class TrafficMesh:
    """meshd on the two-cluster sandbox above, with a running echo backend per pod."""

    def __init__(self, tmp: Path, args: list[str] = ()):
        self.backends = {p.name: EchoBackend(p.name, host=p.ip) for p in PODS}
        objects = {}
        for cluster in ("cluster1", "cluster2"):
            objects[cluster] = [namespace("istio-system"), namespace(NS), service("echo"), service("fo")]
            objects[cluster] += [pod(p, self.backends[p.name].port) for p in PODS if p.cluster == cluster]
        self.meshd = Meshd(tmp / "state", ["--sandbox", str(topology(tmp / "clusters", objects)), *args])
        self.tmp = tmp
        for app in ("echo", "fo"):
            want = {p.ip for p in PODS if p.app == app}
            eventually(f"{app}'s endpoints in both clusters", lambda: self.endpoint_ips(app) == want, timeout=30)

    def endpoint_ips(self, app: str) -> set[str]:
        shards = self.meshd.json("/debug/endpointz").get(host(app), {}).get(NS, {}).get("Shards", {})
        return {e["address"] for eps in shards.values() for e in eps}

    def apply(self, *objects: dict) -> float:
        """``kubectl apply`` on the config cluster; returns the wall-clock time just before it ran."""
        t = time.time()
        self.meshd.kubectl("cluster1", "apply", "-f", "-", stdin="\n---\n".join(json.dumps(o) for o in objects))
        return t

    def delete(self, kind: str, name: str) -> None:
        self.meshd.kubectl("cluster1", "delete", "--ignore-not-found", "-n", NS, kind, name)

    def set_ready(self, pod_name: str, ready: bool) -> None:
        """Flips a pod's Ready condition with kubectl, as a failing readiness probe would."""
        cluster = next(p.cluster for p in PODS if p.name == pod_name)
        self.meshd.kubectl(cluster, "patch", "pod", "-n", NS, pod_name, "--subresource=status", "--type=merge",
                           "-p", json.dumps({"status": {"conditions": [ready_condition(ready)]}}))

    def bootstrap(self, node_name: str = "client", providers: bool = False) -> str:
        boot = {
            "xds_servers": [{"server_uri": f"127.0.0.1:{self.meshd.grpc}", "channel_creds": [{"type": "insecure"}],
                             "server_features": ["xds_v3"]}],
            "node": {"id": f"sidecar~127.0.0.1~{node_name}.{NS}~{NS}.svc.cluster.local",
                     "locality": {"region": "us-east1", "zone": "us-east1-a"},
                     "metadata": {"GENERATOR": "grpc", "NAMESPACE": NS, "CLUSTER_ID": "cluster1"}},
        }
        if providers:  # for clusters with Istio mTLS: the sandbox's mesh certificates
            certs = self.meshd.state / "certs"
            provider = {"plugin_name": "file_watcher", "config": {
                "certificate_file": str(certs / "cert-chain.pem"), "private_key_file": str(certs / "key.pem"),
                "ca_certificate_file": str(certs / "root-cert.pem"), "refresh_interval": "600s"}}
            boot["certificate_providers"] = {"default": provider, "ROOTCA": provider}
        return json.dumps(boot)

    def env(self, **kw) -> dict:
        return dict(os.environ, GRPC_XDS_BOOTSTRAP_CONFIG=self.bootstrap(**kw), GRPC_VERBOSITY="ERROR")

    def report(self, app: str, count: int, *metadata: str, kind: str = "grpcio") -> tuple[Counter, Counter]:
        """``count`` RPCs from a fresh client (grpcio, or another of proxyless.py's ``kind``s):
        (per-backend, per-status) counts."""
        args = [a for kv in metadata for a in ("--metadata", kv)]
        out = subprocess.run(proxyless.command(kind, target(app), "--report", "--count", str(count),
                                               "--timeout", "5", *args),
                             env=proxyless.env(kind, self.env()), capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        got = json.loads(out.stdout)
        return Counter(got["backends"]), Counter(got["statuses"])

    def stream(self, app: str, interval: float = 0.005, node_name: str = "client", kind: str = "grpcio") -> "Stream":
        return Stream(subprocess.Popen(
            proxyless.command(kind, target(app), "--stream", "--forever", "--timeout", "5",
                              "--interval", str(interval)),
            env=proxyless.env(kind, self.env(node_name=node_name)), stdout=subprocess.PIPE, text=True))

    def close(self) -> None:
        for b in self.backends.values():
            b.stop()
        assert "panicked" not in self.meshd.log()
        assert self.meshd.stop() == 0, self.meshd.log()[-4000:]


class Stream:
    """A long-lived client (one channel, one xDS stream) reporting every RPC as it happens."""

    def __init__(self, proc: subprocess.Popen):
        self.proc = proc

    def next(self) -> dict:
        line = self.proc.stdout.readline()
        assert line, "the streaming client exited"
        return json.loads(line)

    def until(self, what: str, done, timeout: float = 20) -> list[dict]:
        """Reads RPC records until ``done(records)`` holds; returns them all."""
        seen: list[dict] = []
        deadline = time.monotonic() + timeout
        while not done(seen):
            assert time.monotonic() < deadline, f"timed out waiting for {what}; last: {seen[-5:]}"
            seen.append(self.next())
        return seen

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()


def last_run(records: list[dict], n: int, pred) -> bool:
    """Whether the last ``n`` records all satisfy ``pred``."""
    return len(records) >= n and all(pred(r) for r in records[-n:])
