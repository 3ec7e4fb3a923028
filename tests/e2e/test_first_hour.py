"""A new user's first hour on a shared machine: a second sandbox on the same state folder refuses and
touches nothing, a taken port fails start-up naming its flag before any state is written, taken default
ports move to free ones in the sandbox (and meshctl still finds it), every meshctl command the banner
suggests works as printed, and Ctrl-C stops it without an error or warning."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import textwrap

import pytest

from meshd_proc import BIN_DIR, Meshd, free_port
from test_docs_commands import isolated, netns_works


def meshd_once(*args: str, timeout: float = 30) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN_DIR / "meshd"), *args], capture_output=True, text=True, timeout=timeout)


def free_addrs() -> list[str]:
    return [arg for flag in ("--grpc-addr", "--secure-grpc-addr", "--http-addr", "--monitoring-addr")
            for arg in (flag, f"127.0.0.1:{free_port()}")]


def test_a_second_sandbox_on_the_same_state_folder_refuses_and_touches_nothing(tmp_path):
    first = Meshd(tmp_path / "state")
    try:
        # The clusters' store folders change as the first meshd writes (its lease renewals): not compared.
        files = sorted(p for p in first.state.rglob("*") if p.is_file() and p.suffix != ".log"
                       and p.name != "meshd.out" and p.parent.name != "store")
        before = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in files}
        assert first.kubeconfig("cluster2") in before

        second = meshd_once("--state-dir", str(first.state), *free_addrs())
        assert second.returncode != 0
        assert (f"another meshd sandbox (pid {first.proc.pid}) is using the state folder {first.state}"
                in second.stderr), second.stderr
        assert "--state-dir" in second.stderr
        assert {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in files} == before
        assert first.get("/ready", first.http)[0] == 200, "the first one keeps serving"
    finally:
        assert first.stop() == 0, first.log()


def test_a_taken_port_names_its_flag_before_any_state_is_written(tmp_path):
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        addrs = free_addrs()
        addrs[addrs.index("--monitoring-addr") + 1] = f"127.0.0.1:{port}"
        state = tmp_path / "state"
        out = meshd_once("--state-dir", str(state), *addrs)
    assert out.returncode != 0
    assert f"cannot listen on 127.0.0.1:{port} (--monitoring-addr): " in out.stderr, out.stderr
    assert "pass --monitoring-addr with a free address" in out.stderr, out.stderr
    # Nothing at all: no kubeconfig, certificate or address file, and the released lock removed.
    assert sorted(p.name for p in state.iterdir()) == []


@pytest.mark.skipif(not netns_works(), reason="no unprivileged network namespaces (unshare -rn)")
def test_taken_default_ports_move_and_the_banner_commands_work_as_printed(tmp_path):
    """In a network namespace of its own (so the default ports are ours to take): 8080 and 15014 are
    held by another process; `meshd` with no flags still starts, says where it serves, and every meshctl
    line of its banner runs as printed; Ctrl-C then ends it cleanly."""
    state = tmp_path / "state"
    script = f"""
    python3 -c 'import socket, time
    held = []
    for port in (8080, 15014):
        s = socket.socket(); s.bind(("127.0.0.1", port)); s.listen(); held.append(s)
    open("{tmp_path}/held", "w").close()
    time.sleep(120)' &
    holder=$!
    # meshd starts only once both ports are held (a slow start of the holder would lose them to meshd).
    for i in $(seq 1 300); do [ -e {tmp_path}/held ] && break; sleep 0.1; done
    export MESHD_STATE_DIR={state} PATH={BIN_DIR}:$PATH
    meshd > {tmp_path}/out 2> {tmp_path}/err &
    pid=$!
    for i in $(seq 1 300); do grep -q '^  try:' {tmp_path}/out 2>/dev/null && break; sleep 0.2; done
    sed -n '/^  try:/,$p' {tmp_path}/out | grep -E '^    (MESHD_STATE_DIR=[^ ]+ )?meshctl ' > {tmp_path}/try
    while read -r line; do
      echo "\\$ $line"
      bash -c "$line" || echo "FAILED($?): $line"
    done < {tmp_path}/try
    cp {state}/addresses.json {tmp_path}/addresses.json
    kill -INT $pid
    wait $pid
    echo "meshd exit $?"
    kill $holder
    """
    code, out = isolated([], cwd=tmp_path, timeout=120, script=textwrap.dedent(script))
    banner = (tmp_path / "out").read_text()
    log = (tmp_path / "err").read_text()
    assert code == 0, f"{out}\n{banner}\n{log}"

    addresses = json.loads((tmp_path / "addresses.json").read_text())  # as it was while meshd ran
    assert not (state / "addresses.json").exists() and not (state / "meshd.lock").exists(), "left after a clean exit"
    assert addresses["http"] != "127.0.0.1:8080" and addresses["monitoring"] != "127.0.0.1:15014", addresses
    assert addresses["xds"] == "127.0.0.1:15010", addresses
    assert f"monitoring             http://{addresses['monitoring']}" in banner, banner

    tried = (tmp_path / "try").read_text().splitlines()
    assert [re.search(r"meshctl (\S+)", t).group(1) for t in tried] == ["remote-clusters", "proxy-status", "explain"]
    assert "FAILED" not in out, out
    assert re.search(r"cluster2\s+istio-system/istio-remote-secret-cluster2\s+synced", out), out
    assert "(not connected: what it would be sent)" in out and "sent:" in out, out
    assert "meshd exit 0" in out, out

    # The only warnings: the two moved ports. Shutdown adds none (the simulators outlive the drain).
    problems = [line for line in log.splitlines() if re.search(r"\b(WARN|ERROR)\b", line)]
    assert len(problems) == 2 and all("default port taken" in p for p in problems), problems
    assert "drained" in log
