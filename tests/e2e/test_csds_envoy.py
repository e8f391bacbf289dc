"""CSDS on the xDS port with a real Envoy: every resource SYNCED once Envoy ACKs it; a route
table Envoy rejects shows ERROR / NACKED with Envoy's own words and when, while the others stay
SYNCED; the same on either xDS variant."""

from __future__ import annotations

import time

import grpc
from envoy.admin.v3 import config_dump_shared_pb2 as dump
from envoy.service.status.v3 import csds_pb2
from envoy.type.matcher.v3 import node_pb2, string_pb2

from e2e.stack import BOTH_PROTOCOLS, EchoStack, eventually, weighted_config
from xds_control.xds import type_urls as urls

OVERSIZED = "(tenant|team|org)-[a-z0-9]{1,40}-(prod|staging|dev){1,3}"
"""Valid RE2 whose compiled program is over Envoy's default limit: Envoy NACKs the route."""

Row = tuple[str, str, str, str, float]


async def csds(stack: EchoStack, node_id: str = "envoy-0") -> dict[tuple[str, str], Row]:
    """(type, name) -> (config status, client status, version, NACK text, NACK time) for
    ``node_id``."""
    request = csds_pb2.ClientStatusRequest(
        node_matchers=[node_pb2.NodeMatcher(node_id=string_pb2.StringMatcher(exact=node_id))]
    )
    async with grpc.aio.insecure_channel(f"127.0.0.1:{stack.control_plane.xds_port}") as channel:
        fetch = channel.unary_unary(
            "/envoy.service.status.v3.ClientStatusDiscoveryService/FetchClientStatus",
            request_serializer=csds_pb2.ClientStatusRequest.SerializeToString,
            response_deserializer=csds_pb2.ClientStatusResponse.FromString,
        )
        response = await fetch(request)
    [config] = response.config
    assert config.node.id == node_id
    return {
        (urls.SHORT_NAMES[r.type_url], r.name): (
            csds_pb2.ConfigStatus.Name(r.config_status),
            dump.ClientResourceStatus.Name(r.client_status),
            r.version_info,
            r.error_state.details,
            r.error_state.last_update_attempt.ToNanoseconds() / 1e9,
        )
        for r in config.generic_xds_configs
    }


@BOTH_PROTOCOLS
async def test_csds_reports_synced_then_nacked_with_envoys_words(stack: EchoStack) -> None:
    await stack.start(weighted_config(stack, [10, 10]))

    async def all_synced() -> bool:
        rows = await csds(stack)
        return bool(rows) and all(r[:2] == ("SYNCED", "ACKED") for r in rows.values())

    await eventually(all_synced, what="every resource SYNCED")
    rows = await csds(stack)
    assert {kind for kind, _ in rows} == {"CDS", "EDS", "LDS", "RDS"}
    assert rows["EDS", "chat"][2]  # the version Envoy ACKed

    match = {"headers": [{"name": "x-tenant", "regex": OVERSIZED}]}
    edited_at = time.time()
    stack.write_config(weighted_config(stack, [10, 10], match=match))

    async def route_nacked() -> bool:
        return any(
            r[1] == "NACKED" for (kind, _), r in (await csds(stack)).items() if kind == "RDS"
        )

    await eventually(route_nacked, what="the route table NACKED in CSDS")
    rows = await csds(stack)
    [nacked] = [r for (kind, _), r in rows.items() if kind == "RDS"]
    assert nacked[0] == "ERROR"
    assert "max program size" in nacked[3], nacked
    assert edited_at <= nacked[4] <= time.time()  # when Envoy refused it
    others = {key: r for key, r in rows.items() if key[0] != "RDS"}
    assert all(r[0] == "SYNCED" for r in others.values()), others


async def test_csds_of_an_unknown_node_is_empty(stack: EchoStack) -> None:
    await stack.start(weighted_config(stack, [10, 10]))
    request = csds_pb2.ClientStatusRequest(
        node_matchers=[node_pb2.NodeMatcher(node_id=string_pb2.StringMatcher(exact="nobody"))]
    )
    async with grpc.aio.insecure_channel(f"127.0.0.1:{stack.control_plane.xds_port}") as channel:
        fetch = channel.unary_unary(
            "/envoy.service.status.v3.ClientStatusDiscoveryService/FetchClientStatus",
            request_serializer=csds_pb2.ClientStatusRequest.SerializeToString,
            response_deserializer=csds_pb2.ClientStatusResponse.FromString,
        )
        assert list((await fetch(request)).config) == []
