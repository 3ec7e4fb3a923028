"""docs/traffic-management.md's worked examples run as written, and their pasted output is what the
binaries print now.

Each ``console`` block marked ``<!-- docs-test: traffic -->`` is a sequence of ``$ command`` lines
(backslash continuations and ``<<'EOF'`` here-documents included), each followed by its output. The
blocks run in document order, by bash, in one scratch folder whose ``TMPDIR`` is the sandbox's state
parent (so ``meshd &`` starts a sandbox of its own, on free ports if the default ones are taken, and
``meshctl`` finds it), with the test's Python (grpcio) first on ``PATH`` and standing in for the
throwaway grpcio venv (``docs_session.OFFLINE``). A background command (its first
line ends with ``&``) is started and the next command waits for the sandbox meshd to be ready; ``export NAME=value`` sets the variable for the commands after it; every
other command must print exactly the pasted output (stdout and stderr). ``meshctl`` reads are retried
for a few seconds, since config applied with kubectl reaches meshd asynchronously. ``UPDATE_GOLDENS=1``
rewrites the pasted output with what the commands print. (``tests/e2e/test_docs_commands.py`` skips
marked blocks: they are run here.)"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from docs_session import offline
from meshd_proc import BIN_DIR, KUBECTL, REPO

DOC = REPO / "docs" / "traffic-management.md"
UPDATE = os.environ.get("UPDATE_GOLDENS") == "1"
MARKER = "<!-- docs-test: traffic -->"


BLOCK = re.compile(re.escape(MARKER) + r"\n```console\n(.*?)^```", re.M | re.S)


def steps(text: str) -> list[tuple[str, str]]:
    """(command, pasted output) of every marked block, in order."""
    return [s for block in BLOCK.finditer(text) for s in block_steps(block[1])]


def block_steps(body: str) -> list[tuple[str, str]]:
    out = []
    lines = body.splitlines()
    i = 0
    while i < len(lines):
        assert lines[i].startswith("$ "), f"expected a command, got {lines[i]!r}"
        cmd = lines[i][2:]
        i += 1
        while cmd.endswith("\\"):
            cmd += "\n" + lines[i]
            i += 1
        heredoc = re.search(r"<<'?(\w+)'?", cmd)
        if heredoc:
            while lines[i] != heredoc[1]:
                cmd += "\n" + lines[i]
                i += 1
            cmd += "\n" + lines[i]
            i += 1
        output = []
        while i < len(lines) and not lines[i].startswith("$ "):
            output.append(lines[i])
            i += 1
        out.append((cmd, "\n".join(output).rstrip()))
    return out


def normalized(text: str) -> str:
    # kubectl 1.33+ says `"x" deleted from <ns> namespace` where older versions say `"x" deleted`.
    return "\n".join(
        re.sub(r'" deleted from \S+ namespace$', '" deleted', line.rstrip())
        for line in text.strip("\n").splitlines()
    )


def test_the_doc_has_worked_examples():
    got = steps(DOC.read_text())
    assert len(got) >= 10, got
    assert any(cmd.startswith("meshd") and cmd.endswith("&") for cmd, _ in got)


def test_worked_examples_run_as_written(tmp_path):
    kubectl = shutil.which(KUBECTL)
    assert kubectl, f"no kubectl ({KUBECTL})"
    env = {"PATH": f"{Path(sys.executable).parent}:{BIN_DIR}:{Path(kubectl).parent}:{os.environ['PATH']}", "HOME": str(tmp_path),
           "TMPDIR": str(tmp_path), "KUBECTL": kubectl}
    # The docs call it `kubectl`; tests/run.sh's copy may be named kubectl-1.34.
    if Path(kubectl).name != "kubectl":
        (tmp_path / "bin").mkdir()
        (tmp_path / "bin" / "kubectl").symlink_to(kubectl)
        env["PATH"] = f"{tmp_path / 'bin'}:{env['PATH']}"
    background: list[subprocess.Popen] = []
    printed: list[str] = []
    try:
        for shown_cmd, want in steps(DOC.read_text()):
            cmd = offline(shown_cmd)
            if cmd.startswith("export "):
                name = cmd.split()[1].split("=")[0]
                env[name] = subprocess.run(["bash", "-c", f'{cmd}; printf %s "${name}"'], env=env, cwd=tmp_path,
                                           capture_output=True, text=True, check=True).stdout
                printed.append(want)
                continue
            first, _, rest = cmd.partition("\n")
            if first.rstrip().endswith("&"):
                script = first.rstrip()[:-1] + ("\n" + rest if rest else "")
                background.append(subprocess.Popen(["bash", "-c", script], cwd=tmp_path, env=env,
                                                   stdout=open(tmp_path / f"bg{len(background)}.log", "w"),
                                                   stderr=subprocess.STDOUT, start_new_session=True))
                wait_ready(env, tmp_path)
                printed.append(want)
                continue
            retry = cmd.startswith("meshctl")
            if retry and UPDATE:
                time.sleep(2)  # what meshd shows once the commands before have taken effect
            deadline = time.monotonic() + (15 if retry else 0)
            while True:
                out = subprocess.run(["bash", "-c", cmd], cwd=tmp_path, env=env, capture_output=True, text=True,
                                     timeout=60)
                got = normalized(out.stdout + out.stderr)
                if got == normalized(want) or time.monotonic() > deadline or UPDATE:
                    break
                time.sleep(0.2)
            printed.append(got)
            if not UPDATE:
                assert got == normalized(want), f"$ {cmd}\n--- documented\n{want}\n--- now\n{got}"
    finally:
        for p in background:
            os.killpg(p.pid, signal.SIGTERM)
            p.wait(timeout=20)
    if UPDATE:
        DOC.write_text(rewritten(DOC.read_text(), printed))


def rewritten(text: str, outputs: list[str]) -> str:
    """``text`` with each marked block's outputs replaced, in order, by ``outputs``."""
    it = iter(outputs)

    def block(m: re.Match) -> str:
        body = "".join(f"$ {cmd}\n" + (f"{out}\n" if out else "") for cmd, _ in block_steps(m[1])
                       for out in [next(it)])
        return f"{MARKER}\n```console\n{body}```"

    return BLOCK.sub(block, text)


def wait_ready(env: dict, cwd: Path, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        out = subprocess.run(["meshctl", "remote-clusters"], cwd=cwd, env=env, capture_output=True, text=True)
        if out.returncode == 0 and out.stdout.count("synced") >= 2:
            return
        time.sleep(0.2)
    pytest.fail("the sandbox meshd did not become ready")
