"""The official Python `kubernetes` client against `meshctl sandbox serve` on the default topology.

The client's models validate required fields when they deserialize, so a typed list, a watch or a write
that comes back without one (a Pod's `containerStatuses[].imageID`, a Node's `nodeInfo.bootID`) raises.
Every kind in clusters/ manifests, plus Node and Namespace, is listed, watched, created, patched and deleted.
"""

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest
from kubernetes import client, config, watch

BIN_DIR = Path(os.environ.get("MESHD_BIN_DIR", "target/debug"))
CLUSTERS = Path(__file__).resolve().parents[2] / "clusters"
NS = "pyclient"


@pytest.fixture(scope="module")
def api(tmp_path_factory):
    state = tmp_path_factory.mktemp("state")
    proc = subprocess.Popen(
        [str(BIN_DIR / "meshctl"), "sandbox", "serve", "--clusters", str(CLUSTERS), "--state-dir", str(state)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    line = proc.stdout.readline()
    assert line, f"meshctl exited early: {proc.stderr.read()}"
    ready = json.loads(line)
    api_client = config.new_client_from_config(config_file=ready["clusters"]["cluster1"]["kubeconfig"])
    yield api_client
    api_client.close()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=10) == 0


@pytest.fixture(scope="module")
def core(api):
    return client.CoreV1Api(api)


@pytest.fixture(scope="module")
def discovery(api):
    return client.DiscoveryV1Api(api)


@pytest.fixture(scope="module")
def test_ns(core):
    ns = core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=NS)))
    assert ns.metadata.labels["kubernetes.io/metadata.name"] == NS
    assert ns.spec.finalizers == ["kubernetes"]
    assert ns.status.phase == "Active"
    return NS


def test_typed_lists_of_the_manifests(core, discovery):
    pods = core.list_pod_for_all_namespaces().items
    assert pods, "the default topology has pods"
    for pod in pods:
        assert pod.spec.containers and pod.spec.restart_policy == "Always"
        assert pod.spec.service_account_name
        for status in pod.status.container_statuses or []:
            assert isinstance(status.image_id, str) and isinstance(status.name, str)
    sample = core.list_namespaced_pod("sample").items
    assert sample and all(p.metadata.namespace == "sample" for p in sample)

    nodes = core.list_node().items
    assert nodes
    for node in nodes:
        info = node.status.node_info
        assert isinstance(info.boot_id, str) and isinstance(info.machine_id, str)
        assert isinstance(info.system_uuid, str) and info.kubelet_version.startswith("v")
        assert node.status.allocatable

    services = core.list_service_for_all_namespaces().items
    assert services
    for svc in services:
        assert svc.spec.session_affinity == "None"
        for port in svc.spec.ports or []:
            assert port.protocol in ("TCP", "UDP", "SCTP") and port.target_port is not None
    assert core.list_service_account_for_all_namespaces().items
    assert {"default", "sample", "istio-system"} <= {n.metadata.name for n in core.list_namespace().items}
    slices = discovery.list_endpoint_slice_for_all_namespaces().items
    assert slices and all(s.address_type in ("IPv4", "IPv6", "FQDN") for s in slices)


def test_watch_yields_typed_objects(core):
    w = watch.Watch()
    seen = []
    for event in w.stream(core.list_namespaced_pod, namespace="sample", timeout_seconds=5):
        assert event["type"] == "ADDED"
        assert isinstance(event["object"], client.V1Pod)
        seen.append(event["object"].metadata.name)
        if len(seen) == 3:
            w.stop()
    assert len(seen) == 3


def _meta(name, namespaced=True):
    return client.V1ObjectMeta(name=name, namespace=NS if namespaced else None, labels={"from": "python"})


# kind -> (make object, create, read, patch, delete, list) for the namespaced ones `ns` is the test namespace.
def _kinds(core, discovery):
    return {
        "Pod": (
            lambda: client.V1Pod(
                metadata=_meta("py-pod"),
                spec=client.V1PodSpec(
                    containers=[client.V1Container(name="app", image="nginx", ports=[client.V1ContainerPort(container_port=80)])]
                ),
            ),
            core.create_namespaced_pod,
            core.read_namespaced_pod,
            core.patch_namespaced_pod,
            core.delete_namespaced_pod,
            core.list_namespaced_pod,
        ),
        "Service": (
            lambda: client.V1Service(
                metadata=_meta("py-svc"),
                spec=client.V1ServiceSpec(selector={"app": "py"}, ports=[client.V1ServicePort(port=8080)]),
            ),
            core.create_namespaced_service,
            core.read_namespaced_service,
            core.patch_namespaced_service,
            core.delete_namespaced_service,
            core.list_namespaced_service,
        ),
        "ServiceAccount": (
            lambda: client.V1ServiceAccount(metadata=_meta("py-sa")),
            core.create_namespaced_service_account,
            core.read_namespaced_service_account,
            core.patch_namespaced_service_account,
            core.delete_namespaced_service_account,
            core.list_namespaced_service_account,
        ),
        "EndpointSlice": (
            lambda: client.V1EndpointSlice(
                metadata=_meta("py-slice"),
                address_type="IPv4",
                endpoints=[client.V1Endpoint(addresses=["10.10.0.99"])],
                ports=[client.DiscoveryV1EndpointPort(port=8080, name="http")],
            ),
            discovery.create_namespaced_endpoint_slice,
            discovery.read_namespaced_endpoint_slice,
            discovery.patch_namespaced_endpoint_slice,
            discovery.delete_namespaced_endpoint_slice,
            discovery.list_namespaced_endpoint_slice,
        ),
    }


def _check_defaults(kind, obj):
    """What the server filled in, read through the typed model."""
    if kind == "Pod":
        c = obj.spec.containers[0]
        assert (c.image_pull_policy, c.termination_message_policy) == ("Always", "File")
        assert c.ports[0].protocol == "TCP"
        assert (obj.spec.dns_policy, obj.spec.service_account_name) == ("ClusterFirst", "default")
        assert obj.status.phase == "Pending" and obj.status.qos_class == "BestEffort"
    elif kind == "Service":
        p = obj.spec.ports[0]
        assert (p.protocol, p.target_port) == ("TCP", 8080)
        assert obj.spec.cluster_ip.startswith("10.") and obj.spec.cluster_ips == [obj.spec.cluster_ip]
        assert obj.spec.ip_families == ["IPv4"] and obj.spec.internal_traffic_policy == "Cluster"
    elif kind == "EndpointSlice":
        assert obj.ports[0].protocol == "TCP"


@pytest.mark.parametrize("kind", ["Pod", "Service", "ServiceAccount", "EndpointSlice"])
def test_namespaced_create_patch_delete_and_watch(core, discovery, test_ns, kind):
    make, create, read, patch, delete, list_fn = _kinds(core, discovery)[kind]
    rv = list_fn(test_ns).metadata.resource_version
    created = create(test_ns, make())
    name = created.metadata.name
    assert created.metadata.uid and created.metadata.labels == {"from": "python"}
    _check_defaults(kind, created)
    patched = patch(name, test_ns, {"metadata": {"labels": {"patched": "yes"}}})
    assert patched.metadata.labels == {"from": "python", "patched": "yes"}
    assert read(name, test_ns).metadata.resource_version == patched.metadata.resource_version
    resp = delete(name, test_ns, _preload_content=False)
    assert resp.status in (200, 202)

    events = []
    w = watch.Watch()
    for event in w.stream(list_fn, namespace=test_ns, resource_version=rv, timeout_seconds=5):
        if event["object"].metadata.name == name:
            events.append((event["type"], event["object"].metadata.labels.get("patched")))
        if events and events[-1][0] == "DELETED":
            w.stop()
    assert events[0] == ("ADDED", None) and events[-1][0] == "DELETED"
    assert ("MODIFIED", "yes") in events


@pytest.mark.parametrize("kind", ["Node", "Namespace"])
def test_cluster_scoped_create_patch_delete_and_watch(core, kind):
    if kind == "Node":
        make = lambda: client.V1Node(metadata=_meta("py-node", namespaced=False))  # noqa: E731
        create, read, patch, delete, list_fn = core.create_node, core.read_node, core.patch_node, core.delete_node, core.list_node
    else:
        make = lambda: client.V1Namespace(metadata=_meta("py-ns", namespaced=False))  # noqa: E731
        create, read, patch = core.create_namespace, core.read_namespace, core.patch_namespace
        delete, list_fn = core.delete_namespace, core.list_namespace
    rv = list_fn().metadata.resource_version
    created = create(make())
    name = created.metadata.name
    assert created.metadata.labels["from"] == "python"
    patched = patch(name, {"metadata": {"labels": {"patched": "yes"}}})
    assert patched.metadata.labels["patched"] == "yes"
    assert read(name).metadata.labels["patched"] == "yes"
    assert delete(name, _preload_content=False).status in (200, 202)

    types = []
    w = watch.Watch()
    for event in w.stream(list_fn, resource_version=rv, timeout_seconds=5):
        if event["object"].metadata.name == name:
            types.append(event["type"])
        if types and types[-1] == "DELETED":
            w.stop()
    assert types[0] == "ADDED" and types[-1] == "DELETED" and "MODIFIED" in types


def test_an_invalid_object_is_a_typed_api_exception(core, test_ns):
    pod = client.V1Pod(metadata=_meta("py-bad"), spec=client.V1PodSpec(containers=[]))
    with pytest.raises(client.ApiException) as err:
        core.create_namespaced_pod(test_ns, pod)
    assert err.value.status == 422
    status = json.loads(err.value.body)
    assert status["reason"] == "Invalid"
    assert status["details"]["causes"] == [{"reason": "FieldValueRequired", "message": "Required value", "field": "spec.containers"}]
