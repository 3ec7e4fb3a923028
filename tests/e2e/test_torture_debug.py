"""Torture list C (#24, #25) and B #20 against a sandboxed meshd: debug responses and logs never carry
credentials, the debug server survives floods, slowloris and huge query strings without slowing xDS,
and a client connecting during start-up never gets an empty or partial config."""

from __future__ import annotations

import base64
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import grpc
import pytest
import yaml

from meshd_proc import Meshd, eventually
from xdsharness import EDS, Ads, decode, grpc_node

CLA = "outbound|7070||echo.sample.svc.cluster.local"


# A short header timeout so slowloris connections are cut within the test (default 10 s). Set through
# the environment, so a meshd without the timeout still starts and the test fails on the assertion.
HEADER_TIMEOUT = 2.0


@pytest.fixture(scope="module")
def meshd(tmp_path_factory):
    m = Meshd(tmp_path_factory.mktemp("debug"), env={"MESHD_HTTP_HEADER_TIMEOUT": f"{HEADER_TIMEOUT}s"})
    yield m
    assert m.stop() == 0, m.log()[-4000:]


def secrets_of(meshd: Meshd) -> list[str]:
    """Every credential meshd holds in the sandbox: admin tokens, reader tokens from the remote
    secrets, private keys."""
    out = []
    for cluster in ("cluster1", "cluster2"):
        kc = yaml.safe_load(meshd.kubeconfig(cluster).read_text())
        out.append(kc["users"][0]["user"]["token"])
    raw = meshd.kubectl("cluster1", "get", "secret", "-n", "istio-system", "istio-remote-secret-cluster2",
                        "-o", "jsonpath={.data.cluster2}")
    remote = yaml.safe_load(base64.b64decode(raw))
    out.append(remote["users"][0]["user"]["token"])
    key = (meshd.state / "certs" / "key.pem").read_text()
    out.append("".join(key.splitlines()[1:3]))  # a distinctive slice of the base64 body
    return [s for s in out if s and len(s) > 16]


def test_c24_no_credentials_in_any_debug_response_or_log(meshd):
    """#24: every /debug endpoint's body and the whole log contain no bearer token, reader token or
    private key; clusterz shows only id, secret name and status."""
    index = meshd.json("/debug")["endpoints"]
    bodies = [meshd.get(e["path"])[1] for e in index] + [meshd.get("/metrics")[1]]
    assert len(bodies) >= 5
    for secret in secrets_of(meshd):
        for body in bodies + [meshd.log(), meshd.stdout()]:
            assert secret not in body, f"a credential leaked ({secret[:6]}…)"
    for row in meshd.json("/debug/clusterz"):
        assert set(row) <= {"id", "secretName", "syncStatus", "lastError"}, row


def xds_latency(meshd: Meshd) -> float:
    ads = Ads(f"127.0.0.1:{meshd.grpc}")
    start = time.monotonic()
    ads.send(EDS, node=grpc_node(), resource_names=[CLA])
    assert CLA in decode(ads.recv(timeout=10))
    ads.close()
    return time.monotonic() - start


def test_c25_debug_floods_do_not_slow_xds(meshd):
    """#25: 2,000 concurrent debug requests, 200 slowloris connections and a 1 MiB query string: the
    debug server answers or refuses each, meshd's RSS stays bounded and xDS answers within 2 s."""
    before = meshd.rss_kib()
    slow = []
    for _ in range(200):
        s = socket.create_connection(("127.0.0.1", meshd.monitoring))
        s.sendall(b"GET /debug/registryz HTTP/1.1\r\nHost: x\r\nX-Slow: ")
        slow.append(s)
    stop = threading.Event()
    latencies = []

    def probe():
        while not stop.is_set():
            latencies.append(xds_latency(meshd))

    t = threading.Thread(target=probe)
    t.start()
    with ThreadPoolExecutor(64) as pool:
        codes = list(pool.map(lambda _: meshd.get("/debug/registryz")[0], range(2000)))
    status, _ = meshd.get("/debug/registryz?" + "a" * (1 << 20))
    stop.set()
    t.join()
    assert set(codes) <= {200, 429, 503} and codes.count(200) > 0
    assert status in (200, 400, 414, 431)
    assert latencies and max(latencies) < 2.0, latencies
    assert meshd.rss_kib() - before < 128 * 1024
    for s in slow:
        s.close()
    assert meshd.get("/ready", meshd.http)[0] == 200


def closed_after(s: socket.socket, trickle: bytes = b"") -> float | None:
    """Seconds until meshd closes `s` (EOF or reset; an error response first is fine), or None if it
    is still open after 3 header timeouts. Sends `trickle` one byte every 0.5 s meanwhile."""
    start = time.monotonic()
    s.settimeout(0.5)
    while time.monotonic() - start < 3 * HEADER_TIMEOUT:
        if trickle:
            try:
                s.sendall(trickle[:1])
            except OSError:
                return time.monotonic() - start
            trickle = trickle[1:]
        try:
            while s.recv(4096):
                pass
            return time.monotonic() - start
        except TimeoutError:
            continue
        except OSError:
            return time.monotonic() - start
    return None


def test_c25_slowloris_connections_are_closed_by_the_header_timeout(meshd):
    """#25: a client that connects and goes silent, sends half a request line, half the headers, or
    trickles the headers one byte at a time is disconnected once the header timeout passes, on both
    admin addresses; a keep-alive connection idle that long is closed too."""
    partial = {
        "silent": b"",
        "half request line": b"GET /debug/regis",
        "half headers": b"GET /debug/registryz HTTP/1.1\r\nHost: x\r\nX-Slow: ",
    }
    for port in (meshd.http, meshd.monitoring):
        conns = []
        for what, data in partial.items():
            s = socket.create_connection(("127.0.0.1", port))
            s.sendall(data)
            conns.append((what, s, b""))
        s = socket.create_connection(("127.0.0.1", port))
        conns.append(("trickled headers", s, b"GET /ready HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 64))
        results = {}

        def watch(what, s, trickle):
            results[what] = closed_after(s, trickle)
            s.close()

        threads = [threading.Thread(target=watch, args=c) for c in conns]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for what, took in results.items():
            assert took is not None, f"port {port}: {what} connection still open after {3 * HEADER_TIMEOUT} s"
            assert took < HEADER_TIMEOUT + 2, f"port {port}: {what} closed after {took:.1f} s"
        # An idle keep-alive connection is closed the same way; it got its answer first.
        with socket.create_connection(("127.0.0.1", port)) as s:
            s.sendall(b"GET /ready HTTP/1.1\r\nHost: x\r\n\r\n")
            s.settimeout(5)
            assert s.recv(4096).startswith(b"HTTP/1.1 200")
            assert closed_after(s) is not None, f"port {port}: idle keep-alive connection still open"
    assert meshd.get("/ready", meshd.http)[0] == 200


def test_b20_no_empty_config_before_sync(tmp_path):
    """#20: clients hammering ADS from the moment meshd starts get either UNAVAILABLE (not ready yet),
    RESOURCE_EXHAUSTED (the new-stream rate limit: retry with backoff) or the full endpoints — never an
    empty or partial EDS."""
    m = Meshd(tmp_path / "state", ready_timeout=None)
    seen, errors = [], []
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            try:
                ads = Ads(f"127.0.0.1:{m.grpc}")
                ads.send(EDS, node=grpc_node(), resource_names=[CLA])
                r = ads.recv(timeout=3)
                seen.append(sum(len(loc.lb_endpoints) for loc in decode(r)[CLA].endpoints))
                ads.close()
                if m.get("/ready", m.http)[0] == 200:
                    break
            except grpc.RpcError as e:
                errors.append(e.code())
            except Exception:
                time.sleep(0.05)
        assert seen, "never served"
        assert set(errors) <= {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.RESOURCE_EXHAUSTED}, errors
        assert grpc.StatusCode.UNAVAILABLE in errors, "never refused before ready: the test raced nothing"
        assert min(seen) == max(seen) > 0, f"partial or empty EDS before sync: {seen}"
    finally:
        m.stop()
