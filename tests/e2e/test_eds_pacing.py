"""Paced endpoint debounce on the real meshd binary, seen by a raw delta ADS client (grpcio, xds-protos)
(issue 34 §2): during a storm of endpoint changes written to the simulated API server, meshd publishes
endpoint-only changes `--eds-settle` after the first and then at most once per `--debounce-after`, so
the client follows the storm instead of waiting for it to end; with `--eds-debounce quiet` (istiod's
rule) nothing is published until the changes pause for `--debounce-after`.

Behaviour, not time, is asserted: the writes' own gaps are measured, and under the quiet rule every
publish during the storm must follow a gap of at least `--debounce-after` (none on a quiet machine),
while the paced rule must publish several times however the writes were spaced. Both end with the
client holding the last write's endpoint."""

from __future__ import annotations

import threading
import time

from meshd_proc import KubeApi, Meshd, eventually
from xdsharness import EDS, Ads, decode, grpc_node

DEBOUNCE = 0.3
STORM_S = 3.0
WRITE_EVERY = 0.05
CLUSTER = "outbound|7070||storm.sample.svc.cluster.local"
SERVICE = {
    "apiVersion": "v1", "kind": "Service", "metadata": {"name": "storm", "namespace": "sample"},
    "spec": {"ports": [{"name": "grpc", "port": 7070, "appProtocol": "grpc"}]},
}


def endpoint_slice(address: str) -> dict:
    return {
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": "storm-a", "namespace": "sample", "labels": {"kubernetes.io/service-name": "storm"}},
        "addressType": "IPv4",
        "endpoints": [{"addresses": [address], "conditions": {"ready": True}}],
        "ports": [{"name": "grpc", "port": 7070, "protocol": "TCP"}],
    }


class Follower:
    """A delta EDS client of the storm's cluster: ACKs every response, notes when each arrived and the
    addresses it carried."""

    def __init__(self, addr: str):
        self.ads = Ads(addr, delta=True)
        self.seen: list[tuple[float, list[str]]] = []
        self.ads.send(EDS, node=grpc_node(), resource_names_subscribe=[CLUSTER])
        self.stop = False
        self.thread = threading.Thread(target=self._follow, daemon=True)
        self.thread.start()

    def _follow(self):
        while not self.stop:
            try:
                resp = self.ads.recv(timeout=0.2)
            except Exception:  # queue.Empty between pushes; the stream's end shows as a missing push
                continue
            self.ads.ack(resp)
            cla = decode(resp).get(CLUSTER)
            if cla is not None:
                addrs = [e.endpoint.address.socket_address.address for lb in cla.endpoints for e in lb.lb_endpoints]
                self.seen.append((time.monotonic(), addrs))

    def holds(self) -> list[str] | None:
        return self.seen[-1][1] if self.seen else None

    def close(self):
        self.stop = True
        self.thread.join(timeout=5)
        self.ads.close()


def storm(api: KubeApi) -> tuple[list[float], str]:
    """Flaps the slice's address every WRITE_EVERY for STORM_S; the write times and the last address."""
    times, address = [], ""
    start = time.monotonic()
    i = 0
    while time.monotonic() - start < STORM_S:
        i += 1
        address = f"10.99.{i // 250}.{i % 250 + 1}"
        api.apply(endpoint_slice(address))
        times.append(time.monotonic())
        time.sleep(WRITE_EVERY)
    return times, address


def run(tmp_path, rule: str):
    meshd = Meshd(tmp_path / "meshd", args=[
        "--debounce-after", f"{int(DEBOUNCE * 1000)}ms", "--debounce-max", "10s",
        "--eds-debounce", rule, "--eds-settle", "10ms"])
    try:
        api = KubeApi(meshd.kubeconfig("cluster1"))
        api.apply(SERVICE)
        api.apply(endpoint_slice("10.98.0.1"))
        client = Follower(f"127.0.0.1:{meshd.grpc}")
        try:
            eventually("the first endpoint", lambda: client.holds() == ["10.98.0.1"])
            time.sleep(DEBOUNCE * 2)  # nothing pending when the storm starts
            times, last = storm(api)
            during = [t for t, _ in client.seen if times[0] < t <= times[-1]]
            eventually("the last write's endpoint", lambda: client.holds() == [last], timeout=15)
            gaps = [b - a for a, b in zip(times, times[1:])]
            return during, gaps, len(times)
        finally:
            client.close()
    finally:
        meshd.stop()


def test_paced_rule_publishes_while_the_endpoints_keep_changing(tmp_path):
    during, gaps, writes = run(tmp_path, "paced")
    assert writes >= 10, f"the storm wrote only {writes} changes"
    # ≈ STORM_S / DEBOUNCE publishes (10); at least 3 whatever the machine's load did to the writes.
    assert len(during) >= 3, f"{len(during)} pushes during {writes} writes (gaps up to {max(gaps):.3f} s)"


def test_quiet_rule_waits_for_the_storm_to_pause(tmp_path):
    during, gaps, writes = run(tmp_path, "quiet")
    assert writes >= 10, f"the storm wrote only {writes} changes"
    # Each publish inside the storm needs a pause of at least --debounce-after between two writes.
    pauses = sum(1 for g in gaps if g >= DEBOUNCE)
    assert len(during) <= pauses, f"{len(during)} pushes during the storm with {pauses} pauses ≥ {DEBOUNCE} s"

