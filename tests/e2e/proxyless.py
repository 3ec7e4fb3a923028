"""The three real proxyless gRPC xDS clients the end-to-end suite runs meshd against, behind one command
line (grpc_xds_client.py's: ``target --count N --timeout S --xds-creds --forever --duration S
--interval S --metadata K=V --report|--stream``):

- ``grpcio``: tests/e2e/grpc_xds_client.py (Python grpcio, tests/requirements.txt);
- ``grpc-js``: tests/e2e/grpc_js_xds_client.js (@grpc/grpc-js-xds, tests/package.json), when node and
  tests/node_modules are there; its own CLI (count positional, interval in ms, no --duration) is
  translated here;
- ``grpc-go``: tests/peers/grpcgo (google.golang.org/grpc/xds, pinned in its go.mod), the binary
  ``$GRPC_GO_XDS_CLIENT`` or tests/.cache/bin/grpc-go-xds-client (tests/peers/grpcgo/build.sh builds it).

``params()`` gives pytest parameters over the clients, each skipping with its reason where the client is
missing; ``command(kind, target, *args)`` and ``env(kind, base)`` run one; ``bootstrap(...)`` is the
xDS bootstrap of a proxyless client or server (grpc_xds_server.py) with the mesh certificates."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
CLIENTS = ("grpcio", "grpc-js", "grpc-go")
# The Python CLI's flags that take a value.
VALUED = {"--count", "--timeout", "--duration", "--interval", "--metadata"}


def node_modules() -> Path | None:
    nm = REPO / "tests" / "node_modules"
    return nm if (nm / "@grpc" / "grpc-js-xds").is_dir() and shutil.which("node") else None


def grpc_go() -> Path | None:
    path = Path(os.environ.get("GRPC_GO_XDS_CLIENT") or REPO / "tests" / ".cache" / "bin" / "grpc-go-xds-client")
    return path if path.is_file() and os.access(path, os.X_OK) else None


def missing(kind: str) -> str | None:
    """Why ``kind`` cannot run here, or None."""
    if kind == "grpc-js" and node_modules() is None:
        return "node or tests/node_modules (tests/run.sh installs them) missing"
    if kind == "grpc-go" and grpc_go() is None:
        return ("grpc-go xDS client not built: $GRPC_GO_XDS_CLIENT or tests/.cache/bin/grpc-go-xds-client "
                "(tests/peers/grpcgo/build.sh builds it where go is installed)")
    return None


def params(*kinds: str, unsupported: dict[str, str] | None = None) -> list:
    """pytest parameters over ``kinds`` (default: all three), each skipped with its reason when its client
    is missing, or with ``unsupported[kind]`` when the scenario needs what that client lacks."""
    out = []
    for kind in kinds or CLIENTS:
        reason = (unsupported or {}).get(kind) or missing(kind)
        out.append(pytest.param(kind, id=kind, marks=[pytest.mark.skip(reason=reason)] if reason else []))
    return out


def _node_args(target: str, args: tuple[str, ...]) -> list[str]:
    """grpc_xds_client.py's flags as grpc_js_xds_client.js takes them."""
    out, count, i = [target], "4", 0
    while i < len(args):
        a = args[i]
        v = args[i + 1] if a in VALUED and i + 1 < len(args) else None
        if a == "--count":
            count = v
        elif a == "--interval":
            out += ["--interval", str(int(float(v) * 1000))]
        elif a in ("--metadata", "--timeout"):
            out += [a, v]
        elif a in ("--report", "--stream", "--forever", "--xds-creds"):
            out.append(a)
        elif a == "--duration":
            raise ValueError("grpc_js_xds_client.js has no --duration")
        else:
            raise ValueError(f"grpc_js_xds_client.js has no {a}")
        i += 2 if v is not None else 1
    return out[:1] + [count] + out[1:]


def command(kind: str, target: str, *args: str) -> list[str]:
    """The command running client ``kind`` with grpc_xds_client.py's arguments."""
    if kind == "grpcio":
        return [sys.executable, str(HERE / "grpc_xds_client.py"), target, *args]
    if kind == "grpc-js":
        return ["node", str(HERE / "grpc_js_xds_client.js"), *_node_args(target, args)]
    if kind == "grpc-go":
        path = grpc_go()
        assert path is not None, missing(kind)
        return [str(path), target, *args]
    raise ValueError(kind)


def env(kind: str, base: dict | None = None) -> dict:
    """``base`` (default: this process's environment) plus what client ``kind`` needs; the bootstrap
    variables (GRPC_XDS_BOOTSTRAP or GRPC_XDS_BOOTSTRAP_CONFIG) are read by all three."""
    e = dict(os.environ if base is None else base)
    e.setdefault("GRPC_VERBOSITY", "ERROR")
    if kind == "grpc-js":
        e["NODE_PATH"] = str(node_modules())
    return e


def bootstrap(grpc_port: int, certs: Path, node_id: str, namespace: str, cluster: str, labels: dict | None = None,
              locality: tuple[str, str] | None = None, **metadata: str) -> str:
    """A bootstrap (``GRPC_XDS_BOOTSTRAP_CONFIG``) for meshd's plaintext xDS port: the node (generator
    ``grpc``, its namespace, cluster, ``LABELS``, locality and any other ``metadata`` such as
    ``NETWORK``), file_watcher certificate providers ``default`` and ``ROOTCA`` over the sandbox's mesh
    certificates in ``certs``, and istiod's server listener template."""
    provider = {"plugin_name": "file_watcher", "config": {
        "certificate_file": str(certs / "cert-chain.pem"), "private_key_file": str(certs / "key.pem"),
        "ca_certificate_file": str(certs / "root-cert.pem"), "refresh_interval": "600s"}}
    node = {"id": node_id, "metadata": {"GENERATOR": "grpc", "NAMESPACE": namespace, "CLUSTER_ID": cluster,
                                        "LABELS": labels or {}, **metadata}}
    if locality:
        node["locality"] = {"region": locality[0], "zone": locality[1]}
    return json.dumps({
        "xds_servers": [{"server_uri": f"127.0.0.1:{grpc_port}", "channel_creds": [{"type": "insecure"}],
                         "server_features": ["xds_v3"]}],
        "node": node,
        "certificate_providers": {"default": provider, "ROOTCA": provider},
        "server_listener_resource_name_template": "xds.istio.io/grpc/lds/inbound/%s",
    })
