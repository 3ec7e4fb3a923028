"""The xDS protocol rules, message by message, with a raw ADS client against meshd's ADS server
(``xds-fixture``): state of the world and delta. Needs the built binaries (``MESHD_BIN_DIR``)."""

from __future__ import annotations

import grpc
import pytest

from xdsharness import CDS, ECHO_SA, EDS, LDS, RDS, Ads, Fixture, decode, echo_service, grpc_node, sidecar_node

HOST = "echo.default.svc.cluster.local"
CLUSTER = f"outbound|7070||{HOST}"


@pytest.fixture
def fixture(tmp_path):
    f = Fixture(tmp_path, {"services": [echo_service([("127.0.0.1", 50051)])]})
    yield f
    f.close()


@pytest.fixture
def sotw(fixture):
    ads = Ads(fixture.addr)
    yield ads
    ads.close()


@pytest.fixture
def delta(fixture):
    ads = Ads(fixture.addr, delta=True)
    yield ads
    ads.close()


def test_missing_node_is_invalid_argument(sotw):
    sotw.send(LDS, resource_names=["x:1"])
    assert sotw.error().code() == grpc.StatusCode.INVALID_ARGUMENT


def test_malformed_metadata_names_the_field(fixture):
    ads = Ads(fixture.addr)
    node = grpc_node()
    node.metadata.fields["LABELS"].string_value = "app=echo"
    ads.send(LDS, node=node, resource_names=["x:1"])
    err = ads.error()
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "metadata.LABELS" in err.details()
    ads.close()


def test_sotw_chain_nonces_versions_and_acks(sotw):
    """LDS → RDS → CDS → EDS as gRPC walks it; each response has its own nonce; ACKs get no answer."""
    sotw.send(LDS, node=grpc_node(), resource_names=[f"{HOST}:7070"])
    lds = sotw.recv()
    listener = decode(lds)[f"{HOST}:7070"]
    assert lds.nonce and lds.version_info
    sotw.ack(lds, [f"{HOST}:7070"])
    sotw.expect_none()

    sotw.send(RDS, resource_names=[CLUSTER])
    rds = sotw.recv()
    vh = decode(rds)[CLUSTER].virtual_hosts[0]
    assert f"{HOST}:7070" in vh.domains and "echo:7070" in vh.domains
    assert vh.routes[0].route.cluster == CLUSTER
    sotw.ack(rds, [CLUSTER])

    sotw.send(CDS, resource_names=[CLUSTER])
    cds = sotw.recv()
    assert decode(cds)[CLUSTER].eds_cluster_config.service_name == CLUSTER
    sotw.ack(cds, [CLUSTER])

    sotw.send(EDS, resource_names=[CLUSTER])
    eds = sotw.recv()
    cla = decode(eds)[CLUSTER]
    assert cla.endpoints[0].load_balancing_weight.value == 1
    assert cla.endpoints[0].lb_endpoints[0].endpoint.address.socket_address.port_value == 50051
    sotw.ack(eds, [CLUSTER])
    sotw.expect_none()
    assert len({lds.nonce, rds.nonce, cds.nonce, eds.nonce}) == 4
    assert listener.api_listener.api_listener.type_url.endswith("HttpConnectionManager")


def test_short_listener_names_resolve_in_the_proxy_namespace(sotw):
    names = ["echo:7070", "echo.default:7070", "echo.default.svc:7070"]
    sotw.send(LDS, node=grpc_node(), resource_names=names)
    assert sorted(decode(sotw.recv())) == sorted(names)


def test_sotw_stale_nonce_ignored_and_nack_not_answered(sotw, fixture):
    sotw.send(CDS, node=sidecar_node(), resource_names=[CLUSTER])
    first = sotw.recv()
    sotw.send(CDS, resource_names=[CLUSTER], version_info="", response_nonce="not-a-nonce")
    sotw.expect_none()
    sotw.nack(first, [CLUSTER])
    sotw.expect_none()
    # Only a real change is pushed after a NACK (a new identity: the SANs of the sidecar's mTLS).
    fixture.set_mesh({"services": [echo_service([("127.0.0.1", 50051)], serviceAccount=ECHO_SA)]})
    pushed = sotw.recv()
    assert pushed.version_info != first.version_info
    assert ECHO_SA in str(decode(pushed)[CLUSTER].transport_socket_matches[0])


def test_sotw_wildcard_removal_and_unsubscribe(sotw, fixture):
    sotw.send(CDS, node=grpc_node())
    cds = sotw.recv()
    assert list(decode(cds)) == [CLUSTER]
    sotw.ack(cds)
    sotw.send(EDS, resource_names=[CLUSTER])
    eds = sotw.recv()
    sotw.ack(eds, [CLUSTER])
    # Unsubscribe EDS; then a new service: CDS (full state) is pushed, EDS is not.
    sotw.send(EDS, resource_names=[], version_info=eds.version_info, response_nonce=eds.nonce)
    sotw.expect_none()
    other = echo_service([("127.0.0.1", 50052)], name="other")
    fixture.set_mesh({"services": [echo_service([("127.0.0.1", 50051)]), other]})
    cds2 = sotw.recv()
    assert cds2.type_url == CDS and len(decode(cds2)) == 2
    sotw.ack(cds2)
    sotw.expect_none()
    # Removal in SotW is omission.
    fixture.set_mesh({"services": [other]})
    cds3 = sotw.recv()
    assert list(decode(cds3)) == ["outbound|7070||other.default.svc.cluster.local"]


def test_endpoint_change_pushes_eds_only_to_watchers(fixture):
    watcher, bystander = Ads(fixture.addr), Ads(fixture.addr)
    for ads in (watcher, bystander):
        ads.send(CDS, node=grpc_node(), resource_names=[CLUSTER])
        ads.ack(ads.recv(), [CLUSTER])
    watcher.send(EDS, resource_names=[CLUSTER])
    watcher.ack(watcher.recv(), [CLUSTER])
    fixture.set_mesh({"services": [echo_service([("127.0.0.1", 50051), ("127.0.0.1", 50052)])]})
    eds = watcher.recv()
    assert eds.type_url == EDS
    assert len(decode(eds)[CLUSTER].endpoints[0].lb_endpoints) == 2
    watcher.expect_none()
    bystander.expect_none()
    watcher.close()
    bystander.close()


def test_cds_is_pushed_before_eds(sotw, fixture):
    sotw.send(CDS, node=sidecar_node(), resource_names=[CLUSTER])
    sotw.ack(sotw.recv(), [CLUSTER])
    sotw.send(EDS, resource_names=[CLUSTER])
    sotw.ack(sotw.recv(), [CLUSTER])
    fixture.set_mesh({"services": [echo_service([("127.0.0.1", 50053)], serviceAccount=ECHO_SA)]})
    assert [sotw.recv().type_url, sotw.recv().type_url] == [CDS, EDS]


def test_delta_wildcard_ack_and_removal(delta, fixture):
    delta.send(CDS, node=grpc_node())
    r = delta.recv()
    assert [x.name for x in r.resources] == [CLUSTER] and r.resources[0].version
    delta.ack(r)
    delta.expect_none()
    fixture.set_mesh({"services": []})
    r = delta.recv()
    assert list(r.removed_resources) == [CLUSTER] and not r.resources


def test_delta_named_missing_is_removed_and_appears_later(delta, fixture):
    other = "outbound|7070||other.default.svc.cluster.local"
    delta.send(CDS, node=grpc_node(), resource_names_subscribe=[other])
    r = delta.recv()
    assert list(r.removed_resources) == [other]
    delta.ack(r)
    fixture.set_mesh({"services": [echo_service([]), echo_service([], name="other")]})
    r = delta.recv()
    assert [x.name for x in r.resources] == [other]


def test_delta_stale_nonce_still_changes_subscription(delta):
    delta.send(EDS, node=grpc_node(), resource_names_subscribe=[])
    delta.send(EDS, resource_names_subscribe=[CLUSTER], response_nonce="stale")
    r = delta.recv()
    assert [x.name for x in r.resources] == [CLUSTER]


def test_delta_reconnect_with_initial_versions(fixture):
    first = Ads(fixture.addr, delta=True)
    first.send(CDS, node=grpc_node())
    r = first.recv()
    known = {x.name: x.version for x in r.resources}
    first.close()

    again = Ads(fixture.addr, delta=True)
    initial = dict(known, **{"outbound|1||deleted.default.svc.cluster.local": "0"})
    again.send(CDS, node=grpc_node(), initial_resource_versions=initial)
    r = again.recv()
    assert not r.resources, "unchanged resources are not resent"
    assert list(r.removed_resources) == ["outbound|1||deleted.default.svc.cluster.local"]
    again.close()


def test_delta_eds_never_gets_removed_resources(delta, fixture):
    delta.send(EDS, node=grpc_node(), resource_names_subscribe=[CLUSTER, "outbound|1||nope.default.svc.cluster.local"])
    r = delta.recv()
    assert [x.name for x in r.resources] == [CLUSTER] and not r.removed_resources
    delta.ack(r)
    fixture.set_mesh({"services": []})
    delta.expect_none()
