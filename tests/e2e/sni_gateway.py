"""A real SNI-routing east-west gateway for the end-to-end tests: Debian's HAProxy, configured from the
xDS meshd sends an east-west gateway node (nothing written by hand).

:func:`haproxy_config` turns the gateway's ``0.0.0.0_15443`` listener into HAProxy's: one backend per
filter chain, chosen when the ClientHello's SNI is one of the chain's ``server_names`` and one of its
ALPNs is one of the chain's ``application_protocols``; the backend's servers are the EDS endpoints of
the chain's ``tcp_proxy`` cluster. A connection no chain matches is closed, as in Envoy. TLS is passed
through, never terminated (AUTO_PASSTHROUGH). HAProxy logs every connection with the backend it chose
and the SNI and ALPNs it saw (:meth:`Gateway.connections`), so a test can check what crossed the proxy.

The binary comes from the pinned Debian package tests/run.sh unpacks into tests/.cache/haproxy (or
``$HAPROXY``, a directory holding usr/sbin/haproxy and its libraries)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from envoy.extensions.filters.network.tcp_proxy.v3 import tcp_proxy_pb2

from xdsharness import EDS, LDS, fetch

REPO = Path(__file__).resolve().parents[2]
ROOT = Path(os.environ.get("HAPROXY") or REPO / "tests" / ".cache" / "haproxy")
BINARY = ROOT / "usr" / "sbin" / "haproxy"
LIBS = ROOT / "usr" / "lib" / "x86_64-linux-gnu"
EAST_WEST_LISTENER = "0.0.0.0_15443"


def missing() -> str | None:
    """Why HAProxy cannot run here, or None."""
    if not BINARY.is_file():
        return f"HAProxy is not unpacked at {BINARY} (tests/run.sh does it from Debian's package)"
    return None


def chains(listener) -> list[dict]:
    """Each filter chain of an xDS listener as ``{"server_names", "alpns", "cluster"}``."""
    out = []
    for fc in listener.filter_chains:
        proxy = tcp_proxy_pb2.TcpProxy()
        assert len(fc.filters) == 1 and fc.filters[0].typed_config.Unpack(proxy), fc
        out.append({"server_names": list(fc.filter_chain_match.server_names),
                    "alpns": list(fc.filter_chain_match.application_protocols),
                    "cluster": proxy.cluster})
    return out


def servers(assignment) -> list[tuple[str, int]]:
    """The healthy (or unknown-health) endpoints of a ClusterLoadAssignment."""
    return [(e.endpoint.address.socket_address.address, e.endpoint.address.socket_address.port_value)
            for loc in assignment.endpoints for e in loc.lb_endpoints
            if e.health_status in (0, 1)]  # UNKNOWN, HEALTHY


LOG_TAG = "conn"


def haproxy_config(bind: tuple[str, int], listener, assignments: dict) -> str:
    """HAProxy's configuration for the gateway listener; ``assignments`` maps cluster name to its
    ClusterLoadAssignment."""
    lines = [
        "global", "  maxconn 512", "  log stdout format raw local0",
        "defaults", "  mode tcp", "  log global", "  timeout connect 2s", "  timeout client 30s",
        "  timeout server 30s",
        "frontend eastwest", f"  bind {bind[0]}:{bind[1]}",
        f"  log-format \"{LOG_TAG} %b %s %[capture.req.hdr(0)] %[capture.req.hdr(1)]\"",
        "  tcp-request inspect-delay 5s",
        "  tcp-request content capture req.ssl_sni len 255",  # before the accept, which ends the rules
        "  tcp-request content capture req.ssl_alpn len 255",
        "  tcp-request content accept if { req.ssl_hello_type 1 }",
    ]
    backends = []
    for i, c in enumerate(chains(listener)):
        cond = ""
        if c["server_names"]:
            cond += " { req.ssl_sni -m str " + " ".join(c["server_names"]) + " }"
        if c["alpns"]:
            cond += " { req.ssl_alpn -m str " + " ".join(c["alpns"]) + " }"
        lines.append(f"  use_backend chain{i} if{cond}" if cond else f"  default_backend chain{i}")
        backends += ["", f"backend chain{i}", f"  # {c['cluster']}"]
        backends += [f"  server s{j} {ip}:{port}" for j, (ip, port) in enumerate(servers(assignments[c["cluster"]]))]
    # No chain matched: HAProxy has no backend, so it closes the connection (Envoy does the same).
    return "\n".join(lines + backends) + "\n"


def config_from(xds_addr: str, node, bind: tuple[str, int]) -> str:
    """HAProxy's configuration from what meshd at ``xds_addr`` sends the gateway ``node``: its
    ``0.0.0.0_15443`` listener and the EDS of every cluster the listener names."""
    listener = fetch(xds_addr, LDS, node)[EAST_WEST_LISTENER]
    names = [c["cluster"] for c in chains(listener)]
    return haproxy_config(bind, listener, fetch(xds_addr, EDS, node, names))


class Gateway:
    """HAProxy listening on ``bind`` with ``config``; :meth:`reload` swaps the configuration."""

    def __init__(self, tmp: Path, bind: tuple[str, int], config: str):
        self.tmp, self.bind = tmp, bind
        self.cfg = tmp / "haproxy.cfg"
        self.proc: subprocess.Popen | None = None
        self.reload(config)

    def reload(self, config: str) -> None:
        self.cfg.write_text(config)
        check = self._run(["-c", "-f", str(self.cfg)])
        assert check.returncode == 0, f"HAProxy refuses the configuration:\n{check.stdout}{check.stderr}\n{config}"
        self.stop()
        since = self.log_size()
        self.proc = subprocess.Popen([str(BINARY), "-db", "-f", str(self.cfg)], env=self._env(),
                                     stdout=open(self.tmp / "haproxy.log", "a"), stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 10
        import socket
        while True:
            try:
                socket.create_connection(self.bind, timeout=0.5).close()
                break
            except OSError:
                assert self.proc.poll() is None, (self.tmp / "haproxy.log").read_text()
                assert time.monotonic() < deadline, "HAProxy did not start listening"
                time.sleep(0.05)
        # The probe is a connection too, logged when HAProxy has seen it close: wait for its line, so
        # that a test's later log_size() never counts it as traffic (under load it came a moment late).
        while not self.connections(since):
            assert time.monotonic() < deadline, "HAProxy did not log the readiness probe"
            time.sleep(0.02)

    def log_size(self) -> int:
        """Where the log ends now: :meth:`connections` ``since`` this reads only later connections."""
        log = self.tmp / "haproxy.log"
        return log.stat().st_size if log.exists() else 0

    def connections(self, since: int = 0) -> list[dict]:
        """Each connection HAProxy logged after byte ``since`` of its log: ``backend`` (``chain<i>``
        for the listener's i-th filter chain, the frontend's name ``eastwest`` when none matched),
        ``server`` (``<NOSRV>`` when none), ``sni`` and ``alpn`` (what HAProxy read from the
        ClientHello, ``-`` when absent). A connection is logged when it closes."""
        with open(self.tmp / "haproxy.log", "rb") as f:
            f.seek(since)
            text = f.read().decode(errors="replace")
        out = []
        for line in text.splitlines():
            parts = line.split(" ")
            if len(parts) == 5 and parts[0] == LOG_TAG:
                out.append(dict(zip(("backend", "server", "sni", "alpn"), parts[1:])))
        return out

    def _env(self) -> dict:
        return dict(os.environ, LD_LIBRARY_PATH=str(LIBS))

    def _run(self, args: list[str]) -> subprocess.CompletedProcess:
        return subprocess.run([str(BINARY), *args], env=self._env(), capture_output=True, text=True, timeout=20)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None
