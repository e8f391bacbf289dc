"""The event ring hears what happens on a stream as it happens (no periodic look at streams),
and an idle stream adds nothing."""

from __future__ import annotations

from pathlib import Path

from envoy.config.core.v3 import base_pb2
from envoy.service.discovery.v3 import discovery_pb2
from google.rpc import status_pb2

from xds_control.admin.events import EventLog
from xds_control.admin.recorder import Recorder
from xds_control.cache import DEFAULT_GROUP, MemorySnapshotCache
from xds_control.config import parse_config
from xds_control.control import LoopState, ReconcileInputs, reconcile_once
from xds_control.discovery import to_endpoints
from xds_control.server import AdsStream, StreamRegistry
from xds_control.xds import type_urls as urls

CONFIG = parse_config(
    text="""
pools:
  - {name: chat, endpoints: [{address: 127.0.0.1:8001}]}
listeners:
  - {name: gw, address: 127.0.0.1:10000, routes: [{name: chat, pool: chat}]}
"""
)


def _cds(
    node_id: str, *, version: str = "", nonce: str = "", error: str | None = None
) -> discovery_pb2.DiscoveryRequest:
    request = discovery_pb2.DiscoveryRequest(
        node=base_pb2.Node(id=node_id),
        type_url=urls.CLUSTER,
        version_info=version,
        response_nonce=nonce,
    )
    if error is not None:
        request.error_detail.CopyFrom(status_pb2.Status(code=3, message=error))
    return request


def test_stream_events_arrive_as_they_happen() -> None:
    cache = MemorySnapshotCache()
    endpoints = {pool.name: to_endpoints(pool.endpoints) for pool in CONFIG.pools}
    cache.set_snapshot(
        DEFAULT_GROUP, reconcile_once(ReconcileInputs(config=CONFIG, endpoints=endpoints))
    )
    registry = StreamRegistry()
    events = EventLog()
    Recorder(
        events=events,
        state=LoopState(config=CONFIG, config_path=Path("x.yaml")),
        cache=cache,
        registry=registry,
    )

    def connect(stream_id: int) -> AdsStream:
        stream = AdsStream(
            stream_id=stream_id,
            snapshot_of=cache.snapshot,
            changed_names=cache.changed_names,
            events=registry,
        )
        registry.add(stream, peer="ipv4:127.0.0.1:5000")
        return stream

    def send(stream: AdsStream, request: discovery_pb2.DiscoveryRequest) -> list[str]:
        out = stream.on_request(request, group=DEFAULT_GROUP, now=1.0)
        return [discovery_pb2.DiscoveryResponse.FromString(raw).nonce for raw in out]

    good = connect(1)
    [nonce] = send(good, _cds("good"))
    version = cache.snapshot(DEFAULT_GROUP).clusters.version  # type: ignore[union-attr]
    send(good, _cds("good", version=version, nonce=nonce))
    kinds = [(e.kind, e.node_id, e.type) for e in events.since()]
    assert kinds == [("connect", "good", ""), ("push", "good", "CDS"), ("ack", "good", "CDS")]
    assert events.since()[0].message == "sotw ipv4:127.0.0.1:5000"
    assert events.since()[1].version == version

    seen = len(events.since())
    assert good.on_snapshot(now=1.0) == []  # nothing changed: an idle stream records nothing
    assert len(events.since()) == seen

    bad = connect(2)
    [nonce] = send(bad, _cds("bad"))
    send(bad, _cds("bad", nonce=nonce, error="cluster chat: bad thing"))
    nack = events.since()[-1]
    assert (nack.kind, nack.node_id, nack.type) == ("nack", "bad", "CDS")
    assert (nack.version, nack.message) == (version, "cluster chat: bad thing")

    registry.remove(bad)
    assert (events.since()[-1].kind, events.since()[-1].node_id) == ("disconnect", "bad")
