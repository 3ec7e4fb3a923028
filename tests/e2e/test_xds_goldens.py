"""Golden wire output of the generators: every resource meshd sends for a small mesh, per proxy kind
and type, as proto3 JSON under ``tests/testdata/xds/``. ``UPDATE_GOLDENS=1`` rewrites them (review the
diff)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from google.protobuf import json_format, struct_pb2

from xdsharness import CDS, EDS, LDS, RDS, REPO, Ads, Fixture, base_pb2, decode, grpc_node

GOLDEN = REPO / "tests" / "testdata" / "xds"
SA = "spiffe://cluster.local/ns/default/sa/echo"
MESH = {
    "services": [
        {
            "name": "echo", "namespace": "default", "ports": [["grpc", 7070, "GRPC"], ["http", 8080, "HTTP"]],
            "endpoints": [
                {"address": "10.0.0.2", "ports": {"grpc": 17070, "http": 18080}, "tlsModeIstio": True,
                 "serviceAccount": SA, "locality": ["us-east", "us-east-1b"]},
                {"address": "10.0.0.1", "ports": {"grpc": 17070, "http": 18080}, "tlsModeIstio": True,
                 "serviceAccount": SA, "locality": ["us-east", "us-east-1a"], "cluster": "cluster-2"},
                {"address": "10.0.0.3", "ports": {"grpc": 17070}, "tlsModeIstio": True, "serviceAccount": SA,
                 "locality": ["us-east", "us-east-1a"], "unhealthy": True},
            ],
        },
        {
            "name": "db", "namespace": "data", "ports": [["tcp", 5432, "TCP"]],
            "endpoints": [{"address": "10.0.1.1", "ports": {"tcp": 5432}}],
        },
    ]
}
ECHO = "outbound|7070||echo.default.svc.cluster.local"
ECHO_HTTP = "outbound|8080||echo.default.svc.cluster.local"
DB = "outbound|5432||db.data.svc.cluster.local"


def sidecar_node():
    meta = struct_pb2.Struct()
    meta.update({"NAMESPACE": "default", "ISTIO_VERSION": "1.24.0", "CLUSTER_ID": "cluster-1"})
    return base_pb2.Node(id="sidecar~10.0.0.9~client.default~default.svc.cluster.local", metadata=meta)


CASES = [
    ("grpc", CDS, []),
    ("grpc", EDS, [ECHO, DB]),
    ("grpc", LDS, ["echo.default.svc.cluster.local:7070", "echo:7070", "db.data:5432"]),
    ("grpc", RDS, [ECHO]),
    ("sidecar", CDS, []),
    ("sidecar", EDS, [ECHO_HTTP]),
    ("sidecar", LDS, []),
    ("sidecar", RDS, ["8080"]),
]


@pytest.fixture(scope="module")
def fixture(tmp_path_factory):
    f = Fixture(tmp_path_factory.mktemp("golden"), MESH)
    yield f
    f.close()


@pytest.mark.parametrize("kind,type_url,names", CASES, ids=[f"{k}-{t.rsplit('.', 1)[1]}" for k, t, _ in CASES])
def test_golden(fixture, kind, type_url, names):
    ads = Ads(fixture.addr)
    ads.send(type_url, node=grpc_node() if kind == "grpc" else sidecar_node(), resource_names=names)
    resources = decode(ads.recv())
    ads.close()
    got = {name: json_format.MessageToDict(msg) for name, msg in sorted(resources.items())}
    text = json.dumps(got, indent=2, sort_keys=True) + "\n"
    path = GOLDEN / f"{kind}-{type_url.rsplit('.', 1)[1]}.json"
    if os.environ.get("UPDATE_GOLDENS"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert path.exists(), f"missing golden {path}; run with UPDATE_GOLDENS=1"
    assert text == path.read_text(), f"{path} differs; rerun with UPDATE_GOLDENS=1 and review the diff"
