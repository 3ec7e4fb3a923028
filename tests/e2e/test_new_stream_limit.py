"""The new-stream limit on the real meshd binary (issue 34 §3): `--max-new-streams-per-second` reaches
the ADS server's limiter. grpcio ADS clients open a burst of streams on one connection; those beyond the
limit's burst are refused at once with RESOURCE_EXHAUSTED, the rest are served. The limit is 0.1/s, so
its burst is one stream and the next slot comes 10 s later: the count does not depend on how fast the
burst arrives."""

from __future__ import annotations

import grpc

from meshd_proc import Meshd
from xdsharness import CDS, Ads, sidecar_node


def burst(addr: str, streams: int) -> list:
    """Opens `streams` delta streams at once on one channel, each asking for CDS; what each got."""
    channel = grpc.insecure_channel(addr)
    calls = [Ads(addr, delta=True, channel=channel) for _ in range(streams)]
    for ads in calls:
        ads.send(CDS, node=sidecar_node())
    outcomes = []
    for ads in calls:
        try:
            ads.recv(timeout=20)
            outcomes.append("served")
        except grpc.RpcError as e:
            assert "next slot" in (e.details() or ""), e
            outcomes.append(e.code())
    channel.close()
    return outcomes


def test_streams_beyond_the_flags_limit_are_refused_resource_exhausted(tmp_path):
    meshd = Meshd(tmp_path / "meshd", args=["--max-new-streams-per-second", "0.1"])
    try:
        outcomes = burst(f"127.0.0.1:{meshd.grpc}", 4)
        assert sorted(outcomes, key=str) == sorted(["served"] + [grpc.StatusCode.RESOURCE_EXHAUSTED] * 3, key=str), outcomes
    finally:
        meshd.stop()
