"""The simulator against what a real kube-apiserver answers.

Each tests/e2e/conformance/<area>.yaml is a table of rows run in order against one fresh simulated cluster
(`meshctl sandbox serve`), once per stock kubectl in $KUBECTL_VERSIONS (colon-separated paths; tests/run.sh
installs 1.32 and 1.34) or else $KUBECTL. A row is a kubectl command or a raw HTTP request (admin bearer
token) plus what the real server answers: exit code, output patterns, JSON subset, status, reason, headers.
A table is a list of rows, or a mapping {sandbox_args: [...], rows: [...]}. `${NAME}` in a row is replaced
by a value an earlier row saved (`save: {NAME: dotted.path}` from its JSON) or by SERVER / ADMIN_TOKEN.
"""

import base64
import json
import os
import re
import signal
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import yaml

BIN_DIR = Path(os.environ.get("MESHD_BIN_DIR", "target/debug"))
TABLES = Path(__file__).parent / "conformance"
ROW_KEYS = {"row", "kubectl", "http", "stdin", "expect", "retry", "save"}
EXPECT_KEYS = {"exit", "stdout", "stderr", "not_stdout", "json", "status", "reason", "headers"}


def kubectls():
    paths = [p for p in os.environ.get("KUBECTL_VERSIONS", "").split(":") if p]
    return paths or [os.environ.get("KUBECTL", "/usr/bin/kubectl")]


def kubectl_version(path):
    out = subprocess.run([path, "version", "--client", "-o", "json"], capture_output=True, text=True, check=True)
    info = json.loads(out.stdout)["clientVersion"]
    return f"{info['major']}.{info['minor'].rstrip('+')}"


def load_table(path):
    doc = yaml.safe_load(path.read_text())
    table = doc if isinstance(doc, dict) else {"rows": doc}
    rows = table.get("rows") or []
    names = [r.get("row") for r in rows]
    assert all(names) and len(set(names)) == len(names), f"{path.name}: every row needs a unique `row`"
    for r in rows:
        assert set(r) <= ROW_KEYS, f"{path.name}: {r['row']}: unknown keys {set(r) - ROW_KEYS}"
        assert ("kubectl" in r) != ("http" in r), f"{path.name}: {r['row']}: exactly one of kubectl/http"
        assert set(r.get("expect") or {}) <= EXPECT_KEYS, f"{path.name}: {r['row']}: unknown expect keys"
    return table.get("sandbox_args") or [], rows


def cases():
    for path in sorted(TABLES.glob("*.yaml")):
        for kubectl in kubectls():
            yield pytest.param(path, kubectl, id=f"{path.stem}-kubectl{kubectl_version(kubectl)}")


class Sandbox:
    def __init__(self, state, args):
        self.proc = subprocess.Popen(
            [str(BIN_DIR / "meshctl"), "sandbox", "serve", "--clusters", "east", "--state-dir", str(state), *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        line = self.proc.stdout.readline()
        assert line, f"meshctl sandbox serve exited early: {self.proc.stderr.read()}"
        east = json.loads(line)["clusters"]["east"]
        self.kubeconfig = east["kubeconfig"]
        config = yaml.safe_load(Path(self.kubeconfig).read_text())
        self.server = config["clusters"][0]["cluster"]["server"]
        self.token = config["users"][0]["user"]["token"]
        ca = Path(state) / "ca.pem"
        ca.write_bytes(base64.b64decode(config["clusters"][0]["cluster"]["certificate-authority-data"]))
        self.tls = ssl.create_default_context(cafile=str(ca))

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        assert self.proc.wait(timeout=20) == 0


def substitute(value, saved):
    """Replaces ${NAME} in every string of a row."""
    if isinstance(value, str):
        return re.sub(r"\$\{(\w+)\}", lambda m: str(saved[m.group(1)]), value)
    if isinstance(value, list):
        return [substitute(v, saved) for v in value]
    if isinstance(value, dict):
        return {k: substitute(v, saved) for k, v in value.items()}
    return value


def contains(actual, expected, path="$"):
    """Whether `actual` holds `expected`: dicts recursively, each expected list item in some actual item."""
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return f"{path}: expected an object, got {json.dumps(actual)[:200]}"
        for k, v in expected.items():
            if k not in actual:
                return f"{path}.{k}: missing (have {sorted(actual)})"
            err = contains(actual[k], v, f"{path}.{k}")
            if err:
                return err
        return None
    if isinstance(expected, list):
        if not isinstance(actual, list):
            return f"{path}: expected a list, got {json.dumps(actual)[:200]}"
        for i, item in enumerate(expected):
            if all(contains(a, item, f"{path}[{i}]") for a in actual):
                return f"{path}: no item matches {json.dumps(item)[:200]} in {json.dumps(actual)[:400]}"
        return None
    return None if actual == expected else f"{path}: {json.dumps(actual)[:200]} != {json.dumps(expected)[:200]}"


def dig(doc, dotted):
    for part in dotted.split("."):
        doc = doc[int(part)] if isinstance(doc, list) else doc[part]
    return doc


def run_kubectl(kubectl, sandbox, row):
    res = subprocess.run(
        [kubectl, "--kubeconfig", sandbox.kubeconfig, *map(str, row["kubectl"])],
        input=row.get("stdin"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    return {"exit": res.returncode, "stdout": res.stdout, "stderr": res.stderr}


def run_http(sandbox, row):
    spec = row["http"]
    body = spec.get("body")
    content_type = spec.get("content_type", "application/json")
    data = None
    if body is not None:
        data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
    headers = {"Authorization": f"Bearer {sandbox.token}", "Accept": "application/json"}
    if data is not None:
        headers["Content-Type"] = content_type
    headers.update({k: str(v) for k, v in (spec.get("headers") or {}).items()})
    req = urllib.request.Request(sandbox.server + spec["path"], data=data, method=spec.get("method", "GET"), headers=headers)
    try:
        with urllib.request.urlopen(req, context=sandbox.tls, timeout=30) as resp:
            status, text, resp_headers = resp.status, resp.read().decode(), resp.headers
    except urllib.error.HTTPError as e:
        status, text, resp_headers = e.code, e.read().decode(), e.headers
    return {"status": status, "stdout": text, "headers": resp_headers}


def check(row, got):
    """The first way `got` differs from the row's expectations, or None."""
    want = row.get("expect") or {}
    if "kubectl" in row and got["exit"] != want.get("exit", 0):
        return f"exit {got['exit']} != {want.get('exit', 0)}; stderr: {got['stderr'][-800:]}"
    for stream in ("stdout", "stderr"):
        for pattern in want.get(stream, []):
            if not re.search(pattern, got.get(stream, ""), re.MULTILINE):
                return f"{stream} does not match {pattern!r}: {got.get(stream, '')[-1500:]}"
    for pattern in want.get("not_stdout", []):
        if re.search(pattern, got["stdout"], re.MULTILINE):
            return f"stdout matches {pattern!r}: {got['stdout'][-1500:]}"
    if "status" in want and got.get("status") != want["status"]:
        return f"HTTP {got.get('status')} != {want['status']}: {got['stdout'][:1500]}"
    for name, pattern in (want.get("headers") or {}).items():
        values = got["headers"].get_all(name) or []
        if not any(re.search(pattern, v) for v in values):
            return f"header {name} {values} does not match {pattern!r}"
    if "json" in want or "reason" in want or row.get("save"):
        try:
            doc = json.loads(got["stdout"])
        except ValueError:
            return f"not JSON: {got['stdout'][:1500]}"
        if "reason" in want and doc.get("reason") != want["reason"]:
            return f"reason {doc.get('reason')!r} != {want['reason']!r}: {got['stdout'][:1500]}"
        if "json" in want:
            return contains(doc, want["json"])
    return None


@pytest.mark.parametrize("table,kubectl", list(cases()))
def test_conformance(table, kubectl, tmp_path):
    sandbox_args, rows = load_table(table)
    sandbox = Sandbox(tmp_path, sandbox_args)
    saved = {"SERVER": sandbox.server, "ADMIN_TOKEN": sandbox.token}
    failures = []
    try:
        for raw in rows:
            row = substitute(raw, saved)
            deadline = time.monotonic() + float(row.get("retry", 0))
            while True:
                got = run_kubectl(kubectl, sandbox, row) if "kubectl" in row else run_http(sandbox, row)
                err = check(row, got)
                if err is None or time.monotonic() >= deadline:
                    break
                time.sleep(0.2)
            if err:
                failures.append(f"{row['row']}: {err}")
                continue
            for name, dotted in (row.get("save") or {}).items():
                saved[name] = dig(json.loads(got["stdout"]), dotted)
    finally:
        sandbox.stop()
    assert not failures, f"{len(failures)} of {len(rows)} rows differ from kube-apiserver:\n" + "\n".join(failures)


def test_contains_is_strict():
    """The comparison the table relies on fails where it must."""
    assert contains({"a": {"b": [1, 2]}}, {"a": {"b": [2]}}) is None
    assert contains({"a": {"b": [1]}}, {"a": {"b": [3]}})
    assert contains({"a": 1}, {"b": 1})
    assert contains({"items": [{"k": "x", "v": 1}]}, {"items": [{"k": "x", "v": 2}]})
    assert contains("s", {"a": 1})


def test_readme_cites_tests_that_exist():
    """Every test kube-sim/README.md names as proof exists (tables, test files and test functions)."""
    root = Path(__file__).resolve().parents[2]
    readme = (root / "kube-sim" / "README.md").read_text()
    cited = 0
    for table in re.findall(r"`conformance/([\w-]+\.yaml)`", readme):
        assert (TABLES / table).is_file(), table
        cited += 1
    for path, funcs in re.findall(r"`tests/((?:\w+/)*\w+\.rs)`(?: \(([^)]*)\))?", readme):
        source = (root / "kube-sim" / "tests" / path).read_text()
        for func in re.findall(r"`(\w+)`", funcs):
            assert re.search(rf"fn {func}\b", source), f"{path}: no fn {func}"
        cited += 1
    for path in re.findall(r"`tests/e2e/(\w+\.py)`", readme):
        assert (root / "tests" / "e2e" / path).is_file(), path
        cited += 1
    assert cited >= 20, f"only {cited} citations found"
