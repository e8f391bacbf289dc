"""Envoy on delta xDS (``DELTA_GRPC``): only what changed travels, a removed pool is removed and
comes back when added again, and a reconnect re-sends only what differs."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from e2e.stack import EchoStack, echo_stack, eventually
from e2e.two_pools import two_pool_config

XDS_COUNTERS = (
    "cluster.chat.update_success",
    "cluster.extra.update_attempt",
    "cluster_manager.cds.update_attempt",
    "listener_manager.lds.update_attempt",
    "http.gateway.rds.gateway.update_attempt",
)
"""Envoy's own count of updates per subscription: EDS per cluster, CDS, LDS, RDS."""


@pytest.fixture
async def stack(tmp_path: Path) -> AsyncIterator[EchoStack]:
    stack = echo_stack(tmp_path, ads="delta")
    try:
        yield stack
    finally:
        await stack.close()


async def responses(stack: EchoStack) -> dict[str, float]:
    metrics = await stack.control_plane.metrics()
    found = re.findall(r'xds_control_ads_responses_total\{type="(\w+)"\} ([0-9.]+)', metrics)
    return {kind: float(value) for kind, value in found}


async def streamed(stack: EchoStack) -> dict[str, dict[str, object]]:
    [stream] = await stack.control_plane.get_json("/v1/streams")
    assert stream["ads"] == "delta"
    return {t["type"]: t for t in stream["types"]}


async def weights(stack: EchoStack, pool: str) -> list[int]:
    return [h.weight for h in await stack.envoys[0].cluster_hosts(pool)]


async def test_one_pool_weight_change_sends_one_resource(stack: EchoStack) -> None:
    await stack.start(two_pool_config(stack, chat=10, extra=10))
    envoy = stack.envoys[0]
    stats_before, sent_before = await envoy.stats(), await responses(stack)

    stack.write_config(two_pool_config(stack, chat=20, extra=10))

    async def applied() -> bool:
        return await weights(stack, "chat") == [20]

    await eventually(applied, what="the new chat weight")
    stats, sent = await envoy.stats(), await responses(stack)
    changed = {name: stats[name] - stats_before[name] for name in XDS_COUNTERS}
    assert changed == dict.fromkeys(XDS_COUNTERS, 0) | {"cluster.chat.update_success": 1}
    assert {k: sent[k] - sent_before.get(k, 0) for k in sent} == {
        "CDS": 0,
        "EDS": 1,
        "LDS": 0,
        "RDS": 0,
    }
    assert (await streamed(stack))["EDS"]["resources"] == ["chat", "extra"]


async def test_removed_pool_goes_and_is_sent_again_when_added_back(stack: EchoStack) -> None:
    await stack.start(two_pool_config(stack, chat=10, extra=10))

    stack.write_config(two_pool_config(stack, chat=10, extra=None))

    async def removed() -> bool:
        eds = (await streamed(stack))["EDS"]
        return await weights(stack, "extra") == [] and eds["resources"] == ["chat"]

    await eventually(removed, what="Envoy to drop pool extra and unsubscribe its endpoints")

    # The same pool again, byte for byte: Envoy subscribes again and gets it again.
    stack.write_config(two_pool_config(stack, chat=10, extra=10))

    async def back() -> bool:
        return await weights(stack, "extra") == [10]

    await eventually(back, what="pool extra back with its endpoint")
    assert (await stack.envoys[0].stats())["cluster_manager.warming_clusters"] == 0


async def test_reconnect_sends_only_what_changed_meanwhile(stack: EchoStack) -> None:
    await stack.start(two_pool_config(stack, chat=10, extra=10))
    envoy = stack.envoys[0]
    await stack.control_plane.stop()
    stack.write_config(two_pool_config(stack, chat=10, extra=25))
    before = await envoy.stats()

    await stack.restart_control_plane()

    async def applied() -> bool:
        return await weights(stack, "extra") == [25]

    await eventually(applied, timeout=30, what="the weight changed while the server was down")
    # Envoy named its versions (initial_resource_versions): only extra's assignment differed.
    types = await streamed(stack)
    assert {k: t["responses"] for k, t in types.items()} == {
        "CDS": 0,
        "EDS": 1,
        "LDS": 0,
        "RDS": 0,
    }
    stats = await envoy.stats()
    assert stats["cluster.chat.update_success"] == before["cluster.chat.update_success"]
    assert (
        stats["cluster_manager.cds.update_success"] == before["cluster_manager.cds.update_success"]
    )
