"""Runs the docs' ``console`` blocks in one sandbox session and compares each command's shown output with
what it prints (``tests/e2e/test_docs_output.py`` is the test; this module is its runner and its rules).

The session runs inside a network namespace of its own (so the documented default ports, e.g.
``localhost:15014``, are the sandbox meshd's), with a fresh ``TMPDIR`` and ``HOME`` (so a fresh sandbox
state folder), in one scratch folder. Run as a script (``python docs_session.py STEPS.json OUT.json``) it
is the part inside the namespace: it runs the steps and writes one result per step.

How shown output is compared (``matches``), after both sides went through ``VOLATILE``:

* a shown line that is only ``…`` (or ``...``) stands for any number of lines, and ``…`` inside a line for
  any text: that is how a doc abridges;
* output that is JSON is compared without whitespace (a doc may wrap and indent it), ``…`` standing for
  any text;
* other output is compared line by line with runs of blanks as one (column widths follow the values);
* a command must exit 0, except one whose shown output starts with ``error:``, which must fail.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

# (pattern, replacement, why): parts of the output that differ from run to run, the same on both sides.
VOLATILE = [
    (r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z", "<time>", "timestamps (connectedAt, start)"),
    (r"\b(127\.0\.0\.1|localhost):\d+", r"\1:<port>",
     "loopback ports: a client's ephemeral port, the simulated API servers' free ports"),
    (r"\b[0-9a-f]{16}\b", "<hash>", "resource versions, which are content hashes"),
    (r'" deleted from \S+ namespace$', '" deleted', "kubectl 1.33+ names the namespace, older ones do not"),
]
ELLIPSIS = re.compile(r"…|\.\.\.")
# A step is retried until its output matches (or this many seconds pass) when it only reads: config
# applied before reaches meshd asynchronously.
RETRY_SECONDS = 15
# The whole session (about 5 s when every output matches at once).
SESSION_SECONDS = 300
REQUIREMENTS = Path(__file__).resolve().parents[1] / "requirements.txt"
READS = re.compile(r"^(meshctl (remote-clusters|proxy-status|proxy-config|pc|explain|adsz|networks|analyze)\b|curl )")


def normalized(text: str, tmpdir: str | None = None) -> str:
    """``text`` with every ``VOLATILE`` part replaced, trailing blanks and blank end lines dropped; the
    session's ``TMPDIR`` reads as ``/tmp`` (the docs are written for an unset ``TMPDIR``)."""
    if tmpdir:
        text = text.replace(tmpdir.rstrip("/"), "/tmp")
    for pattern, replacement, _ in VOLATILE:
        text = re.sub(pattern, replacement, text, flags=re.M)
    return "\n".join(line.rstrip() for line in text.strip("\n").splitlines())


def is_json(text: str) -> bool:
    try:
        json.loads(text)
        return True
    except ValueError:
        return False


def pattern(shown: str, json_mode: bool) -> re.Pattern:
    """The regular expression a live output must match fully for ``shown`` (already normalized)."""
    if json_mode:
        compact = re.sub(r"\s+", "", shown)
        return re.compile(".*?".join(re.escape(p) for p in ELLIPSIS.split(compact)), re.S)
    parts = []
    for line in shown.splitlines():
        line = re.sub(r"\s+", " ", line).strip()
        if ELLIPSIS.fullmatch(line):
            parts.append(r"(?:[^\n]*\n)*?")
        else:
            parts.append("[^\n]*?".join(re.escape(p) for p in ELLIPSIS.split(line)) + r"\n")
    return re.compile("".join(parts))


def matches(shown: str, live: str, tmpdir: str | None = None) -> bool:
    shown, live = normalized(shown), normalized(live, tmpdir)
    if live and is_json(live):
        return pattern(shown, json_mode=True).fullmatch(re.sub(r"\s+", "", live)) is not None
    lines = "".join(re.sub(r"\s+", " ", line).strip() + "\n" for line in live.splitlines())
    return pattern(shown, json_mode=False).fullmatch(lines) is not None


# (pattern, replacement, why): commands the docs give that would download, as the tests run them.
OFFLINE = [
    (r"python3 -m venv (\S+) && \1/bin/pip install (grpcio==[0-9.]+)\n?", "",
     "installs grpcio from PyPI: the tests use the suite's tests/.venv, whose grpcio pin is the doc's"),
    (r"/tmp/grpc-venv/bin/python", sys.executable, "the throwaway venv's python is the suite's"),
]


def offline(script: str, check_used: bool = False) -> str:
    """``script`` with every ``OFFLINE`` rule applied. The grpcio a doc pins must be the suite's
    (tests/requirements.txt); with ``check_used``, every rule must have matched."""
    pinned = set(re.findall(r"^grpcio==[0-9.]+$", REQUIREMENTS.read_text(), re.M))
    for doc_pin in re.findall(OFFLINE[0][0], script):
        assert {doc_pin[1]} == pinned, f"the docs pin {doc_pin[1]}, tests/requirements.txt {pinned}"
    for rule, replacement, _ in OFFLINE:
        script, n = re.subn(rule, replacement, script)
        assert n or not check_used, f"OFFLINE rule {rule!r} matches no doc command"
    return script


# --------------------------------------------------------------------------- the part in the namespace


def wait_ready(env: dict, cwd: Path, timeout: float = 60) -> bool:
    """Whether the sandbox meshd of the session's state folder answered, with both clusters synced."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        out = subprocess.run(["meshctl", "remote-clusters"], cwd=cwd, env=env, capture_output=True, text=True)
        if out.returncode == 0 and out.stdout.count("synced") >= 2:
            return True
        time.sleep(0.2)
    return False


def once(script: str, shown: str, cwd: Path, env: dict) -> dict:
    try:
        out = subprocess.run(["bash", "-c", script], cwd=cwd, env=env, capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired as e:
        return {"got": f"{e.stdout or ''}(still running after 60 s)", "ok": False}
    got = out.stdout + out.stderr
    ok = matches(shown, got, env["TMPDIR"]) and (out.returncode != 0) == shown.startswith("error:")
    return {"got": got, "ok": ok, "code": out.returncode}


def start(step: dict, cwd: Path, env: dict, jobs: dict[int, subprocess.Popen]) -> dict:
    """Starts a background step as the next job, numbered as bash numbers jobs (one past the highest
    running); its pid goes to ``cwd/../pids`` so the test can end it if this runner is killed. A sandbox
    ``meshd`` is waited for; shown output must appear in the step's log."""
    log = cwd / f"background-{len(list(cwd.glob('background-*.log')))}.log"
    with open(log, "w") as out:
        job = subprocess.Popen(["bash", "-c", step["script"]], cwd=cwd, env=env, stdout=out,
                               stderr=subprocess.STDOUT, start_new_session=True)
    jobs[max(jobs, default=0) + 1] = job
    with open(cwd.parent / "pids", "a") as pids:
        pids.write(f"{job.pid}\n")
    if step["cmd"].split()[0] == "meshd" and "--kubeconfig" not in step["cmd"] and not wait_ready(env, cwd):
        return {"got": f"the sandbox meshd did not become ready:\n{log.read_text()}", "ok": False, "fatal": True}
    if not step["shown"]:
        return {"got": "", "ok": True}
    deadline = time.monotonic() + RETRY_SECONDS
    while not matches(step["shown"], got := log.read_text(), env["TMPDIR"]):
        if time.monotonic() > deadline:
            return {"got": got, "ok": False}
        time.sleep(0.2)
    return {"got": got, "ok": True}


def stop(jobs: list[subprocess.Popen]) -> None:
    for p in jobs:
        try:
            os.killpg(p.pid, signal.SIGTERM)
            p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def kill_job(step: dict, jobs: dict[int, subprocess.Popen]) -> dict | None:
    """``kill %N`` ends job N, as the shell that ran the doc's commands in order would: the docs run in
    one shell, so their job numbers are the session's. ``None``: not a ``kill %N``."""
    m = re.fullmatch(r"kill %(\d+)", re.sub(r"\s+#.*$", "", step["cmd"]).strip())
    if m is None:
        return None
    if int(m[1]) not in jobs:
        return {"got": f"no job %{m[1]}: the running jobs are {sorted(jobs)}", "ok": False}
    stop([jobs.pop(int(m[1]))])
    return {"got": "", "ok": not step["shown"]}


def run(steps: list[dict], cwd: Path, env: dict) -> list[dict]:
    """Runs each step's ``script`` (``cmd`` as the doc shows it, with ``OFFLINE`` applied) by bash, in the
    background when ``background``; returns the steps with what they printed (``got``) and ``ok``. A
    sandbox meshd that does not start, or the session's time running out, ends it: the rest are not run."""
    jobs: dict[int, subprocess.Popen] = {}
    results = []
    session_deadline = time.monotonic() + SESSION_SECONDS
    try:
        for step in steps:
            if results and results[-1].get("fatal") or time.monotonic() > session_deadline:
                results.append(step | {"got": "(not run: the session ended before)", "ok": False})
                continue
            if step["background"]:
                results.append(step | start(step, cwd, env, jobs))
                continue
            if (killed := kill_job(step, jobs)) is not None:
                results.append(step | killed)
                continue
            deadline = time.monotonic() + (RETRY_SECONDS if READS.match(step["cmd"]) else 0)
            while True:
                result = once(step["script"], step["shown"], cwd, env)
                if result["ok"] or time.monotonic() > deadline:
                    break
                time.sleep(0.2)
            results.append(step | result)
    finally:
        stop(list(jobs.values()))
    return results


if __name__ == "__main__":
    request = json.loads(Path(sys.argv[1]).read_text())
    out = run(request["steps"], Path(request["cwd"]), request["env"])
    Path(sys.argv[2]).write_text(json.dumps(out))
