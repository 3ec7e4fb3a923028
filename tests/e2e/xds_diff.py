"""The xDS output diff between meshd and istiod (issue 28 §2): the same raw ADS client asks both servers
for what one node gets, both watching the same config on the same API server, and the answers are
compared field by field.

``fetch`` walks the xDS graph as the client would: a sidecar asks CDS and LDS for everything, then EDS
for every EDS cluster and RDS for every route configuration its listeners name; a proxyless gRPC client
asks LDS for the targets it dials (``host:port``), then RDS, then CDS for the clusters the routes name,
then EDS. Each resource becomes plain JSON (``to_py``: field names as in the .proto, enums by name, every
``Any`` unpacked when xds-protos knows its type, else its type URL and a digest of its bytes).

``normalise`` keys list elements by what identifies them (a name, an endpoint's address, a locality, a
filter chain's match: Envoy picks a chain by its match), so order differences that mean nothing do not
show; order that means something (routes, filters) stays. Versions and nonces are not part of resources
and never compared.

``diff`` gives one entry per differing leaf, ``{"type", "resource", "path", "istiod", "meshd"}``, with
``"<absent>"`` for a side that lacks it; a subtree only one side has is one entry with a summary of it.
"""

from __future__ import annotations

import base64
import hashlib
import importlib
import importlib.util
import json
import queue
import time
from pathlib import Path

import grpc
from google.protobuf import descriptor_pool, json_format, message_factory
from google.protobuf.descriptor import FieldDescriptor

from xdsharness import CDS, EDS, LDS, RDS, Ads, decode

TYPES = {CDS: "CDS", EDS: "EDS", LDS: "LDS", RDS: "RDS"}
ABSENT = "<absent>"
HCM = "envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager"
WELL_KNOWN = {"google.protobuf.Struct", "google.protobuf.Value", "google.protobuf.ListValue",
              "google.protobuf.Duration", "google.protobuf.Timestamp", "google.protobuf.FieldMask",
              "google.protobuf.Empty"} | {f"google.protobuf.{w}Value" for w in
                                           ("Bool", "Int32", "Int64", "UInt32", "UInt64", "Float", "Double",
                                            "String", "Bytes")}


# --------------------------------------------------------------------------- fetching


def _exchange(ads: Ads, type_url: str, names: list[str], timeout: float) -> dict:
    """Asks for ``type_url`` (``names``; empty: wildcard) and returns the first answer of that type, ACKed."""
    ads.send(type_url, node=ads.node if not ads.sent_node else None, resource_names=names)
    ads.sent_node = True
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"no {TYPES[type_url]} answer for {names or 'wildcard'}")
        try:
            resp = ads.recv(timeout=left)
        except queue.Empty:
            continue
        ads.ack(resp, names if resp.type_url == type_url else ads.asked.get(resp.type_url, []))
        if resp.type_url == type_url:
            ads.asked[type_url] = names
            return decode(resp)


def hcm_of(listener) -> list:
    """The HttpConnectionManagers of a listener (its API listener and its filter chains')."""
    from envoy.extensions.filters.network.http_connection_manager.v3 import http_connection_manager_pb2 as hcm_pb2

    out = []
    anys = [listener.api_listener.api_listener] if listener.HasField("api_listener") else []
    chains = list(listener.filter_chains) + ([listener.default_filter_chain]
                                             if listener.HasField("default_filter_chain") else [])
    anys += [f.typed_config for ch in chains for f in ch.filters if f.HasField("typed_config")]
    for a in anys:
        if a.type_url.endswith("/" + HCM):
            m = hcm_pb2.HttpConnectionManager()
            a.Unpack(m)
            out.append(m)
    return out


def route_clusters(rc) -> set[str]:
    out = set()
    for vh in rc.virtual_hosts:
        for r in vh.routes:
            if r.route.cluster:
                out.add(r.route.cluster)
            out.update(w.name for w in r.route.weighted_clusters.clusters)
    return out


def eds_names(clusters: dict) -> list[str]:
    from envoy.config.cluster.v3 import cluster_pb2

    return sorted((c.eds_cluster_config.service_name or c.name) for c in clusters.values()
                  if c.type == cluster_pb2.Cluster.EDS)


def fetch(addr: str, node, grpc_targets: list[str] | None = None, timeout: float = 15) -> dict:
    """{type: {name: message}} that ``node`` gets from the ADS server at ``addr``, fetched as the client
    would on one fresh stream. ``grpc_targets``: a proxyless client dialling these ``host:port`` names
    (None: a sidecar, wildcard CDS and LDS)."""
    ads = Ads(addr)
    ads.node, ads.sent_node, ads.asked = node, False, {}
    try:
        out = {}
        if grpc_targets is None:
            out[CDS] = _exchange(ads, CDS, [], timeout)
            out[EDS] = _exchange(ads, EDS, eds_names(out[CDS]), timeout) if eds_names(out[CDS]) else {}
            out[LDS] = _exchange(ads, LDS, [], timeout)
            routes = sorted({h.rds.route_config_name for ln in out[LDS].values() for h in hcm_of(ln)
                             if h.HasField("rds")})
            out[RDS] = _exchange(ads, RDS, routes, timeout) if routes else {}
        else:
            out[LDS] = _exchange(ads, LDS, sorted(grpc_targets), timeout)
            routes = sorted({h.rds.route_config_name for ln in out[LDS].values() for h in hcm_of(ln)
                             if h.HasField("rds")})
            out[RDS] = _exchange(ads, RDS, routes, timeout) if routes else {}
            clusters = sorted(set().union(*[route_clusters(rc) for rc in out[RDS].values()]))
            out[CDS] = _exchange(ads, CDS, clusters, timeout) if clusters else {}
            names = eds_names(out[CDS])
            out[EDS] = _exchange(ads, EDS, names, timeout) if names else {}
        return out
    finally:
        ads.close()


# --------------------------------------------------------------------------- to JSON


_imported_packages: set[str] = set()


def _message_class(full_name: str):
    """The message class of ``full_name``, importing xds-protos' modules of its package on first need."""
    pool = descriptor_pool.Default()
    try:
        return message_factory.GetMessageClass(pool.FindMessageTypeByName(full_name))
    except KeyError:
        pass
    package = full_name.rsplit(".", 1)[0]
    if package in _imported_packages:
        return None
    _imported_packages.add(package)
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        return None
    for loc in spec.submodule_search_locations:
        for f in sorted(Path(loc).glob("*_pb2.py")):
            try:
                importlib.import_module(f"{package}.{f.stem}")
            except Exception:  # noqa: BLE001 — a module that does not import only means an unknown type
                pass
    try:
        return message_factory.GetMessageClass(pool.FindMessageTypeByName(full_name))
    except KeyError:
        return None


def _any(a) -> object:
    name = a.type_url.rsplit("/", 1)[-1]
    cls = _message_class(name)
    if cls is None:
        return {"@type": name, "@bytes": f"{len(a.value)}B sha256:{hashlib.sha256(a.value).hexdigest()[:12]}"}
    m = cls()
    m.ParseFromString(a.value)
    return {"@type": name, **to_py(m)}


def _scalar(field, v):
    if field.type == FieldDescriptor.TYPE_ENUM:
        ev = field.enum_type.values_by_number.get(v)
        return ev.name if ev else v
    if field.type == FieldDescriptor.TYPE_BYTES:
        return base64.b64encode(v).decode()
    return v


def _repeated(field) -> bool:
    r = getattr(field, "is_repeated", None)  # protobuf >= 6; older ones have only `label`
    return r if r is not None else field.label == FieldDescriptor.LABEL_REPEATED


def to_py(msg) -> object:
    """A message as plain JSON: set fields only (proto3 defaults are absent on both sides alike)."""
    full = msg.DESCRIPTOR.full_name
    if full == "google.protobuf.Any":
        return _any(msg)
    if full in WELL_KNOWN:
        return json_format.MessageToDict(msg, preserving_proto_field_name=True)
    out = {}
    for field, value in msg.ListFields():
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            vf = field.message_type.fields_by_name["value"]
            out[field.name] = {str(k): (to_py(v) if vf.message_type else _scalar(vf, v)) for k, v in value.items()}
        elif _repeated(field):
            out[field.name] = [to_py(v) if field.message_type else _scalar(field, v) for v in value]
        else:
            out[field.name] = to_py(value) if field.message_type else _scalar(field, value)
    return out


# --------------------------------------------------------------------------- normalising and diffing


def _element_key(parent: str, e: object) -> str | None:
    """What identifies a list element regardless of its position; None: position matters."""
    if not isinstance(e, dict):
        return None
    if parent in ("routes", "filters", "http_filters", "clusters"):
        # Order is meaning (first match wins; filters run in order); weighted clusters by name.
        return f"name={e['name']}" if parent == "clusters" and "name" in e else None
    if "name" in e and isinstance(e["name"], str):
        return f"name={e['name']}"
    if parent == "filter_chains" and "filter_chain_match" in e:
        # Envoy picks a chain by its match, whatever the order.
        return f"match={json.dumps(e['filter_chain_match'], sort_keys=True, separators=(',', ':'))}"
    if parent == "lb_endpoints":
        sa = e.get("endpoint", {}).get("address", {}).get("socket_address", {})
        return f"addr={sa.get('address')}:{sa.get('port_value')}"
    if parent == "endpoints" and ("lb_endpoints" in e or "locality" in e):
        loc = e.get("locality", {})
        return f"locality={loc.get('region', '')}/{loc.get('zone', '')}/{loc.get('sub_zone', '')}" \
               f"/p{e.get('priority', 0)}"
    return None


# Filter lists: order is meaning, but one inserted filter must not shift every later one into a
# difference: keyed by name, with their order as one ``@order`` entry.
BY_NAME_WITH_ORDER = {"http_filters", "filters", "listener_filters"}
# Lists that are sets (Envoy matches any element): one ``[value]: true`` per element, so a difference
# is the elements one side lacks.
SETS = {"domains"}


def normalise(value: object, parent: str = "") -> object:
    """Lists whose elements have an identity become maps keyed by it (``[key]``); the rest stay lists."""
    if isinstance(value, dict):
        return {k: normalise(v, k) for k, v in value.items()}
    if isinstance(value, list) and parent in SETS and all(isinstance(v, str) for v in value):
        return {f"[{v}]": True for v in sorted(value)}
    if isinstance(value, list) and parent in BY_NAME_WITH_ORDER:
        items = [normalise(v, parent) for v in value]
        names = [e.get("name") if isinstance(e, dict) else None for e in items]
        if items and all(isinstance(n, str) for n in names) and len(set(names)) == len(names):
            return {"@order": names, **{f"[name={n}]": e for n, e in zip(names, items)}}
        return items
    if isinstance(value, list):
        items = [normalise(v, parent) for v in value]
        keys = [_element_key(parent, e) for e in items]
        if items and all(keys) and len(set(keys)) == len(keys):
            return {f"[{k}]": e for k, e in zip(keys, items)}
        return [*items]
    return value


def summary(value: object) -> object:
    """A short stand-in for a subtree only one side has."""
    s = json.dumps(value, sort_keys=True)
    if len(s) <= 160:
        return value
    if isinstance(value, dict):
        head = {k: value[k] for k in ("@type", "name", "@order") if k in value}
        return {**head, "@summary": f"{len(s)} chars, keys {sorted(k for k in value if k != '@order')[:12]}"}
    names = [e.get("name") for e in value if isinstance(e, dict) and "name" in e]
    return f"@summary: {type(value).__name__} of {len(value)}, {len(s)} chars" + (f", names {names}" if names else "")


def _walk(a: object, b: object, path: str, out: list):
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            p = f"{path}{k}" if k.startswith("[") else f"{path}.{k}" if path else k
            if k not in a:
                out.append((p, ABSENT, summary(b[k])))
            elif k not in b:
                out.append((p, summary(a[k]), ABSENT))
            else:
                _walk(a[k], b[k], p, out)
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            _walk(x, y, f"{path}[{i}]", out)
    elif isinstance(a, list) and isinstance(b, list):
        n = min(len(a), len(b))
        for i in range(n):
            _walk(a[i], b[i], f"{path}[{i}]", out)
        for i in range(n, len(a)):
            out.append((f"{path}[{i}]", summary(a[i]), ABSENT))
        for i in range(n, len(b)):
            out.append((f"{path}[{i}]", ABSENT, summary(b[i])))
    elif a != b:
        out.append((path, summary(a), summary(b)))


def as_json(fetched: dict) -> dict:
    """{"CDS": {name: normalised JSON}, ...}."""
    return {TYPES[t]: {n: normalise(to_py(m)) for n, m in sorted(res.items())} for t, res in fetched.items()}


def diff(istiod: dict, meshd: dict) -> list[dict]:
    """Field-by-field differences between two ``as_json`` results, sorted."""
    out = []
    for t in sorted(set(istiod) | set(meshd)):
        a, b = istiod.get(t, {}), meshd.get(t, {})
        for name in sorted(set(a) | set(b)):
            if name not in a or name not in b:
                # A resource only one side sends: its size and a digest, so a change in it still shows.
                def present(r):
                    s = json.dumps(r, sort_keys=True)
                    return f"present, {len(s)} chars, sha256:{hashlib.sha256(s.encode()).hexdigest()[:12]}"
                out.append({"type": t, "resource": name, "path": "",
                            "istiod": present(a[name]) if name in a else ABSENT,
                            "meshd": present(b[name]) if name in b else ABSENT})
                continue
            found: list = []
            _walk(a[name], b[name], "", found)
            out += [{"type": t, "resource": name, "path": p, "istiod": x, "meshd": y} for p, x, y in found]
    return out


def key(entry: dict) -> str:
    return json.dumps(entry, sort_keys=True)


def check(name: str, got: dict, expected_dir: Path) -> list[str]:
    """Compares the differences of ``got`` ({node: {"istiod": as_json, "meshd": as_json}}) with
    ``expected_dir/<name>.json``: one ``NEW`` or ``GONE`` line per difference that changed.
    ``ISTIOD_DIFF_UPDATE=1`` rewrites the file; ``ISTIOD_DIFF_OUT=DIR`` keeps both answers there."""
    import os

    actual = {node: diff(a["istiod"], a["meshd"]) for node, a in got.items()}
    if os.environ.get("ISTIOD_DIFF_OUT"):
        out = Path(os.environ["ISTIOD_DIFF_OUT"])
        out.mkdir(parents=True, exist_ok=True)
        (out / f"{name}.json").write_text(json.dumps(got, indent=1, sort_keys=True))
    path = expected_dir / f"{name}.json"
    if os.environ.get("ISTIOD_DIFF_UPDATE") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(actual, indent=1, sort_keys=True) + "\n")
    expected = json.loads(path.read_text()) if path.exists() else {}
    problems = []
    for node in sorted(set(actual) | set(expected)):
        want = {key(e) for e in expected.get(node, [])}
        have = {key(e) for e in actual.get(node, [])}
        problems += [f"NEW  {node}: {k}" for k in sorted(have - want)]
        problems += [f"GONE {node}: {k}" for k in sorted(want - have)]
    return problems


def failure(path: Path, problems: list[str]) -> str:
    return (f"{len(problems)} xDS differences changed (ISTIOD_DIFF_UPDATE=1 rewrites {path}):\n"
            + "\n".join(p[:600] for p in problems[:60]))


# --------------------------------------------------------------------------- waiting for both


def settled(addr: str, node, grpc_targets, want, timeout: float = 60, quiet: float = 1.0) -> dict:
    """``as_json`` of what ``node`` gets from ``addr`` once ``want(json)`` holds and two fetches
    ``quiet`` seconds apart agree."""
    deadline = time.monotonic() + timeout
    last, why = None, "nothing fetched"
    while time.monotonic() < deadline:
        try:
            cur = as_json(fetch(addr, node, grpc_targets))
        except (TimeoutError, grpc.RpcError) as e:  # a server still starting: retry
            cur, why = None, f"{type(e).__name__}: {e}"
        if cur is not None:
            if not want(cur):
                why = f"condition not met; got {json.dumps({t: sorted(r) for t, r in cur.items()})}"
            elif cur == last:
                return cur
        last = cur if cur is not None and want(cur) else None
        time.sleep(quiet)
    raise AssertionError(f"{addr}: no settled answer after {timeout}s: {why}")
