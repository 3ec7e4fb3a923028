"""The sandbox keeps its clusters in the state folder: what kubectl applied, the mesh CA and the API
server ports survive Ctrl-C and a restart on the same ``--state-dir`` (the banner says it restored them),
``--fresh`` starts empty, and a SIGKILL in the middle of writes loses no write that was answered."""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import threading
from pathlib import Path

import yaml

from meshd_proc import KUBECTL, REPO, KubeApi, Meshd, eventually


def destination_rule(name: str) -> dict:
    return {"apiVersion": "networking.istio.io/v1", "kind": "DestinationRule",
            "metadata": {"name": name, "namespace": "sample"},
            "spec": {"host": "details.sample.svc.cluster.local",
                     "subsets": [{"name": "v1", "labels": {"version": "v1"}}]}}


def interrupt(m: Meshd) -> int:
    """Ctrl-C, as a user stops the sandbox."""
    m.proc.send_signal(signal.SIGINT)
    return m.proc.wait(timeout=30)


def state_line(m: Meshd) -> str:
    """The banner's ``state:`` line (the banner is printed just after /ready turns 200)."""
    def line():
        return next((l.strip() for l in m.stdout().splitlines() if l.strip().startswith("state:")), None)
    return eventually("the banner's state line", line, timeout=10)


def servers(m: Meshd) -> dict[str, str]:
    return {c: yaml.safe_load(m.kubeconfig(c).read_text())["clusters"][0]["cluster"]["server"]
            for c in ("cluster1", "cluster2")}


def rule_names(m: Meshd) -> set[str]:
    out = json.loads(m.kubectl("cluster1", "get", "destinationrules", "-n", "sample", "-o", "json"))
    return {o["metadata"]["name"] for o in out["items"]}


def in_configz(m: Meshd, name: str) -> bool:
    objects = m.json("/debug/configz")["istioConfig"]["objects"]
    return any(o["kind"] == "DestinationRule" and o["name"] == name for o in objects)


def test_applied_objects_the_ca_and_the_ports_survive_a_restart_and_fresh_forgets_them(tmp_path):
    state = tmp_path / "state"
    root_cert = state / "certs" / "root-cert.pem"
    m = Meshd(state)
    try:
        assert state_line(m).startswith(f"state: started fresh in {state}"), m.stdout()
        m.kubectl("cluster1", "apply", "-f", "-", stdin=json.dumps(destination_rule("kept")))
        eventually("meshd sees the applied rule", lambda: in_configz(m, "kept"))
        root, ports = root_cert.read_bytes(), servers(m)
    finally:
        assert interrupt(m) == 0, m.log()

    m = Meshd(state)
    try:
        line = state_line(m)
        restored = re.fullmatch(rf"state: restored (\d+) objects from {re.escape(str(state))} \(.*\)", line)
        assert restored and int(restored.group(1)) > 100, m.stdout()
        assert "kept" in rule_names(m)
        eventually("meshd serves the restored rule", lambda: in_configz(m, "kept"))
        assert root_cert.read_bytes() == root, "the same mesh root, not a new one over certs/"
        assert servers(m) == ports, "the API servers are back on their ports"
        # Still a working cluster: revisions go on, new writes land.
        m.kubectl("cluster1", "apply", "-f", "-", stdin=json.dumps(destination_rule("after-restart")))
        assert {"kept", "after-restart"} <= rule_names(m)
    finally:
        assert interrupt(m) == 0, m.log()

    m = Meshd(state, ["--fresh"])
    try:
        assert state_line(m).startswith(f"state: started fresh in {state}"), m.stdout()
        assert rule_names(m) == set(), "--fresh forgets what was applied"
        assert root_cert.read_bytes() != root, "--fresh mints a new mesh root"
    finally:
        assert interrupt(m) == 0, m.log()


def test_a_sigkill_during_writes_loses_no_answered_write(tmp_path):
    state = tmp_path / "state"
    m = Meshd(state)
    answered: list[str] = []
    stop = threading.Event()

    def writer(api: KubeApi) -> None:
        i = 0
        while not stop.is_set():
            name = f"w-{i:04d}"
            try:
                status, _ = api.request("POST", KubeApi.path(destination_rule(name), named=False),
                                        destination_rule(name), timeout=2)
            except OSError:
                return  # the server is gone: this write was not answered
            if status == 201:
                answered.append(name)
            i += 1

    thread = threading.Thread(target=writer, args=(KubeApi(m.kubeconfig("cluster1")),))
    try:
        thread.start()
        eventually("writes under way", lambda: len(answered) >= 50, timeout=60)
        m.proc.send_signal(signal.SIGKILL)
        m.proc.wait(timeout=10)
    finally:
        stop.set()
        thread.join(timeout=30)
        m.kill()
    assert not thread.is_alive()

    m = Meshd(state)
    try:
        assert state_line(m).startswith("state: restored "), m.stdout()
        names = {n for n in rule_names(m) if n.startswith("w-")}
        lost = set(answered) - names
        assert not lost, f"answered writes lost: {sorted(lost)}"
        # At most the write in flight when the process died made it to disk unanswered.
        assert len(names - set(answered)) <= 1, sorted(names - set(answered))
    finally:
        assert interrupt(m) == 0, m.log()


def test_the_store_folders_are_the_clusters_own(tmp_path):
    """What the state folder holds, so an operator knows what to back up or remove."""
    state = tmp_path / "state"
    m = Meshd(state)
    try:
        for cluster in ("cluster1", "cluster2"):
            store = Path(state / cluster / "store")
            assert {p.name for p in store.iterdir()} >= {"wal", "snapshot", "authority.json"}, list(store.iterdir())
            assert (store / "authority.json").stat().st_mode & 0o077 == 0, "the CA key is owner-only"
    finally:
        assert interrupt(m) == 0, m.log()


def test_a_damaged_store_stops_start_up_naming_the_file_and_the_way_out(tmp_path):
    """Nothing known is dropped silently: a snapshot that does not check out is an error, not an empty
    cluster; --fresh is the way to start anyway."""
    state = tmp_path / "state"
    m = Meshd(state)
    assert interrupt(m) == 0, m.log()
    snapshot = state / "cluster1" / "store" / "snapshot"
    damaged = bytearray(snapshot.read_bytes())
    damaged[len(damaged) // 2] ^= 1
    snapshot.write_bytes(bytes(damaged))

    m = Meshd(state, ready_timeout=None)
    assert m.proc.wait(timeout=60) != 0
    log = m.log()
    assert f"{snapshot}: a frame whose checksum does not match" in log, log
    assert "meshd --fresh starts it empty" in log, log

    m = Meshd(state, ["--fresh"])
    try:
        assert state_line(m).startswith(f"state: started fresh in {state}"), m.stdout()
    finally:
        assert interrupt(m) == 0, m.log()


def test_a_restored_cluster_whose_folder_changed_says_so_and_fresh_loads_it(tmp_path):
    clusters = tmp_path / "clusters"
    shutil.copytree(REPO / "clusters", clusters)
    state = tmp_path / "state"
    m = Meshd(state, ["--sandbox", str(clusters)])
    assert interrupt(m) == 0, m.log()
    added = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "added-later", "namespace": "sample"}}
    (clusters / "cluster2" / "99-added.yaml").write_text(json.dumps(added))

    m = Meshd(state, ["--sandbox", str(clusters)])
    try:
        assert state_line(m).startswith("state: restored "), m.stdout()
        assert "cluster2: its folder's manifests changed since they were loaded; --fresh loads them" in m.stdout()
        assert "cluster1: its folder" not in m.stdout()
        gone = subprocess.run([KUBECTL, "--kubeconfig", str(m.kubeconfig("cluster2")), "get", "configmap",
                               "-n", "sample", "added-later"], capture_output=True, text=True, timeout=60)
        assert gone.returncode != 0 and "NotFound" in gone.stderr, "the store is not overwritten"
    finally:
        assert interrupt(m) == 0, m.log()

    m = Meshd(state, ["--sandbox", str(clusters), "--fresh"])
    try:
        assert state_line(m).startswith("state: started fresh"), m.stdout()
        assert "manifests changed" not in m.stdout()
        m.kubectl("cluster2", "get", "configmap", "-n", "sample", "added-later")
    finally:
        assert interrupt(m) == 0, m.log()
