"""The docs print what the binaries print: every ``console`` block of README.md, helm/meshd/README.md and
docs/*.md runs in one fresh sandbox session, and every ``$ command`` must print the output shown after it
(rules: ``docs_session``; a line ``…`` abridges, timestamps, loopback ports and content hashes are
normalized).

The session runs docs/debugging.md first (its "Try a proxy" starts the sandbox, ``meshd &``, and connects
the proxyless grpcio client every sample was taken with), then every other doc in ``DOCS`` order. Per doc,
in order:

* every ``console`` block not marked for another test (``docs-test: traffic`` blocks run in
  ``test_traffic_docs.py``, ``docs-test: sandbox N`` blocks in ``test_docs_commands.py``): each ``$ command``
  (backslash continuations and here-documents included); a command ending in ``&`` runs in the background
  (a sandbox ``meshd &`` is waited for until both clusters are synced; shown output must appear in its log),
  and ``kill %N`` ends job N, numbered as bash numbers them (the docs run in one shell, in this order);
* ``sh`` blocks marked ``<!-- docs-test: session -->``, whole, as setup steps (a block whose last line ends
  in ``&`` runs in the background).

``OFFLINE`` rewrites the few commands that would download (the throwaway grpcio venv is the suite's
``tests/.venv``, whose grpcio pin must be the doc's); each rule must be used. ``sh`` blocks' other
commands are run or parsed by ``test_docs_commands.py``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from docs_session import SESSION_SECONDS, matches, offline
from meshd_proc import BIN_DIR, KUBECTL, REPO
from test_docs_commands import DOCS, fenced_blocks, netns_works
from test_traffic_docs import block_steps

FIRST = REPO / "docs" / "debugging.md"
# A command line that ends in `&` (and maybe a comment) runs in the background.
BACKGROUND = re.compile(r"(?<!&)&[ \t]*(#[^\n]*)?$")


def session_steps() -> list[dict]:
    steps = []
    for path in [FIRST, *(d for d in DOCS if d != FIRST)]:
        for lang, body, marker, line in fenced_blocks(path.read_text()):
            where = f"{path.relative_to(REPO)}:{line}"
            if lang == "console" and marker is None:
                for cmd, shown in block_steps(body):
                    first, _, rest = cmd.partition("\n")
                    bg = BACKGROUND.search(first)
                    background = bg is not None
                    script = first[:bg.start()] + ("\n" + rest if rest else "") if bg else cmd
                    steps.append({"where": where, "cmd": cmd, "script": script, "shown": shown,
                                  "background": background})
            elif lang in ("sh", "bash") and marker == "session":
                bg = BACKGROUND.search(body.rstrip())
                steps.append({"where": where, "cmd": body, "script": body.rstrip()[:bg.start()] if bg else body,
                              "shown": "", "background": bg is not None})
    return steps


@pytest.mark.parametrize("shown,live,same", [
    ("NAME  STATUS\na     synced", "NAME      STATUS\na         synced\n", True),
    ("NAME  STATUS\na     synced", "NAME  STATUS\na     error", False),
    ("a\n…\nz", "a\nb\nc\nz", True),
    ("a\n…\nz", "a\nb\nc", False),
    ("x … z", "x y y z", True),
    ("x … z", "x y y", False),
    ('[{"a":1,\n  "b": …}]', '[{"a":1,"b":{"c":[2]}}]', True),
    ('{"a":1, …}', '{"b":1,"a":1}', False),
    ("at 2026-11-22T04:16:13Z from 127.0.0.1:55296", "at 2027-01-01T00:00:00Z from 127.0.0.1:1234", True),
    ("version 66568c76f68658e1", "version 3013c978ad9b986a", True),
    ("version 1", "version 2", False),
    ("wrote /tmp/meshd-sandbox/x", "wrote /scratch/t/meshd-sandbox/x", False),
    ("", "something", False),
])
def test_the_comparison_rules(shown, live, same):
    """Abridging, blanks and VOLATILE parts are all that may differ (the session's TMPDIR, here not
    given, would read as /tmp)."""
    assert matches(shown, live) is same


def test_every_console_block_is_run():
    steps = session_steps()
    docs = {s["where"].split(":")[0] for s in steps}
    assert {"docs/debugging.md", "docs/install-primary-remote.md", "docs/security.md"} <= docs, docs
    assert steps[0]["cmd"].startswith("meshd") and steps[0]["background"], steps[0]
    assert sum(bool(s["shown"]) for s in steps) >= 25
    # Every download rule is used, and grpcio's pin in the docs is the suite's.
    offline("\n".join(s["script"] for s in steps), check_used=True)


def test_the_docs_print_what_they_show(tmp_path):
    if not netns_works():
        pytest.skip("no unprivileged network namespaces (unshare -rn)")
    kubectl = shutil.which(KUBECTL)
    assert kubectl, f"no kubectl ({KUBECTL})"
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "kubectl").symlink_to(kubectl)  # tests/run.sh's copy may be named kubectl-1.34
    for d in ("tmp", "home", "work"):
        (tmp_path / d).mkdir()
    env = {"PATH": f"{tmp_path / 'bin'}:{BIN_DIR}:{Path(sys.executable).parent}:{os.environ['PATH']}",
           "HOME": str(tmp_path / "home"), "TMPDIR": str(tmp_path / "tmp"), "LANG": "C.UTF-8"}
    steps = [s | {"script": offline(s["script"])} for s in session_steps()]
    request, results = tmp_path / "steps.json", tmp_path / "results.json"
    request.write_text(json.dumps({"steps": steps, "cwd": str(tmp_path / "work"), "env": env}))
    runner = Path(__file__).with_name("docs_session.py")
    try:
        out = subprocess.run(["unshare", "-rn", "bash", "-c", 'ip link set lo up && exec "$@"', "bash",
                              sys.executable, str(runner), str(request), str(results)],
                             capture_output=True, text=True, timeout=SESSION_SECONDS + 100)
    finally:  # what a killed runner left running
        pids = tmp_path / "pids"
        for pid in pids.read_text().split() if pids.exists() else []:
            try:
                os.killpg(int(pid), signal.SIGKILL)
            except ProcessLookupError:
                pass
    assert out.returncode == 0, out.stdout + out.stderr
    failed = [r for r in json.loads(results.read_text()) if not r["ok"]]
    assert not failed, "\n\n".join(
        f"{r['where']}: $ {r['cmd']}\n--- shown\n{r['shown'][:3000]}\n"
        f"--- printed (exit {r.get('code', '-')})\n{r['got'][:3000]}" for r in failed)
