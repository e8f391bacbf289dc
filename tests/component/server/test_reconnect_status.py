"""What the status views say of an Envoy that reconnects with what it already has (after a
control-plane restart): nothing is sent, and every type is SYNCED with the served version in
``/v1/streams`` (what ``xdsctl status`` and ListStreams show) and in CSDS, on either variant;
what Envoy holds in an older version is not called SYNCED before it ACKs the new one."""

from __future__ import annotations

from typing import Any

import pytest
from envoy.admin.v3 import config_dump_shared_pb2 as dump
from envoy.config.core.v3 import base_pb2
from envoy.service.discovery.v3 import discovery_pb2
from envoy.service.status.v3 import csds_pb2

from two_pools import ROUTE_TABLE, snapshot
from xds_control.admin.sync import streams_view
from xds_control.cache import DEFAULT_GROUP, MemorySnapshotCache
from xds_control.server import AdsStream, DeltaStream, StreamRegistry, XdsStream
from xds_control.server.csds import client_config
from xds_control.xds import Snapshot
from xds_control.xds import type_urls as urls

NOW = 1_700_000_000.0
NAMES = {urls.CLUSTER: (), urls.ENDPOINT: ("a", "b"), urls.LISTENER: (), urls.ROUTE: (ROUTE_TABLE,)}
"""What Envoy asks for per type: CDS and LDS by wildcard, EDS and RDS by name."""
NODE = base_pb2.Node(id="envoy-1")


class Reconnected:
    """A stream of a new control-plane process, and an Envoy that held ``held`` before it."""

    def __init__(self, *, variant: str, served: Snapshot | None) -> None:
        self.cache = MemorySnapshotCache()
        if served is not None:
            self.cache.set_snapshot(DEFAULT_GROUP, served)
        self.registry = StreamRegistry()
        kind = DeltaStream if variant == "delta" else AdsStream
        self.stream: XdsStream = kind(
            stream_id=1, snapshot_of=self.cache.snapshot, changed_names=self.cache.changed_names
        )
        self.registry.add(self.stream)
        self.delta = variant == "delta"

    def ask(self, type_url: str, *, held: Snapshot, nonce: str = "") -> list[bytes]:
        """Envoy's first request for ``type_url`` on the new stream (or, with ``nonce``, its
        ACK), naming what it holds of ``held``."""
        resources = held.resource_set(type_url)
        if self.delta:
            request = discovery_pb2.DeltaDiscoveryRequest(
                node=NODE,
                type_url=type_url,
                resource_names_subscribe=() if nonce else NAMES[type_url],  # an ACK names none
                response_nonce=nonce,
            )
            if not nonce:
                for name, prepared in resources.resources.items():
                    request.initial_resource_versions[name] = prepared.digest
            assert isinstance(self.stream, DeltaStream)
            return self.stream.on_request(request, group=DEFAULT_GROUP, now=NOW)
        sotw = discovery_pb2.DiscoveryRequest(
            node=NODE,
            type_url=type_url,
            resource_names=NAMES[type_url],
            version_info=resources.version,
            response_nonce=nonce,
        )
        assert isinstance(self.stream, AdsStream)
        return self.stream.on_request(sotw, group=DEFAULT_GROUP, now=NOW)

    def views(self) -> dict[str, dict[str, Any]]:
        """Type -> the stream's type as ``/v1/streams`` shows it."""
        [view] = streams_view(registry=self.registry, cache=self.cache)
        return {t["type"]: t for t in view["types"]}

    def csds(self) -> csds_pb2.ClientConfig:
        """The stream's CSDS ``ClientConfig``."""
        return client_config(self.stream, self.cache.snapshot(DEFAULT_GROUP))


def assert_synced(envoy: Reconnected, served: Snapshot, *, at: float) -> None:
    views = envoy.views()
    assert set(views) == {"CDS", "EDS", "LDS", "RDS"}
    for type_url in urls.ORDER:
        view = views[urls.SHORT_NAMES[type_url]]
        version = served.resource_set(type_url).version
        assert view["sync"] == "SYNCED", view
        assert view["acked_version"] == view["sent_version"] == version, view
        assert (view["acked_at"], view["responses"]) == (at, 0), view
    configs = envoy.csds().generic_xds_configs
    assert len(configs) == sum(len(served.resource_set(t).resources) for t in urls.ORDER)
    for config in configs:
        assert config.config_status == csds_pb2.SYNCED, config
        assert config.client_status == dump.ACKED, config
        assert config.version_info == served.resource_set(config.type_url).version, config
        assert config.last_updated.ToNanoseconds() == int(at * 1e9)


@pytest.mark.parametrize("variant", ["sotw", "delta"])
def test_a_reconnect_with_what_is_served_is_synced_with_it(variant: str) -> None:
    served = snapshot()
    envoy = Reconnected(variant=variant, served=served)
    for type_url in urls.ORDER:
        assert envoy.ask(type_url, held=served) == []  # nothing is sent again
    assert_synced(envoy, served, at=NOW)


def test_a_delta_reconnect_before_the_first_snapshot_is_synced_once_it_is_published() -> None:
    # A restarted control plane takes streams before its first publication.
    served = snapshot()
    envoy = Reconnected(variant="delta", served=None)
    for type_url in urls.ORDER:
        assert envoy.ask(type_url, held=served) == []
    assert envoy.views()["CDS"]["sync"] == "NOT SENT"  # nothing to judge against yet
    envoy.cache.set_snapshot(DEFAULT_GROUP, served)
    assert envoy.stream.on_snapshot(now=NOW + 1) == []
    assert_synced(envoy, served, at=NOW + 1)


@pytest.mark.parametrize("variant", ["sotw", "delta"])
def test_what_envoy_holds_in_an_older_version_is_stale_until_it_acks(variant: str) -> None:
    held, served = snapshot(a=10), snapshot(a=20)  # one assignment differs
    envoy = Reconnected(variant=variant, served=served)
    out = {t: envoy.ask(t, held=held) for t in urls.ORDER}
    assert [t for t, sent in out.items() if sent] == [urls.ENDPOINT]
    assert envoy.views()["EDS"]["sync"] == "STALE"
    assert {v["sync"] for t, v in envoy.views().items() if t != "EDS"} == {"SYNCED"}
    [response] = out[urls.ENDPOINT]
    if variant == "delta":
        nonce = discovery_pb2.DeltaDiscoveryResponse.FromString(response).nonce
    else:
        nonce = discovery_pb2.DiscoveryResponse.FromString(response).nonce
    assert envoy.ask(urls.ENDPOINT, held=served, nonce=nonce) == []
    eds = envoy.views()["EDS"]
    assert (eds["sync"], eds["acked_version"]) == ("SYNCED", served.load_assignments.version)
