"""Make-before-break on a live edit that adds a pool and a route to it: the route goes live
only once its cluster is warm, so no request meets a route without its cluster (both xDS
variants)."""

from __future__ import annotations

import asyncio

from e2e.stack import BOTH_PROTOCOLS, EchoStack, eventually
from e2e.two_pools import keep_sending, two_pool_config, watch


@BOTH_PROTOCOLS
async def test_adding_a_pool_and_its_route_never_routes_to_a_cold_cluster(
    stack: EchoStack,
) -> None:
    await stack.start(two_pool_config(stack, extra=None))
    envoy = stack.envoys[0]
    done = asyncio.Event()
    watcher = asyncio.create_task(watch(envoy, done))
    sender = asyncio.create_task(keep_sending(stack, "/fresh/v1/completions", done))
    await asyncio.sleep(0.5)

    stack.write_config(two_pool_config(stack, extra=None, fresh=7))
    fresh = stack.backends.address(1)

    async def serving() -> bool:
        return [h.weight for h in await envoy.cluster_hosts("fresh")] == [7]

    await eventually(serving, what="pool fresh in Envoy")
    await asyncio.sleep(1.0)
    done.set()
    seen, answers = await watcher, await sender

    assert seen.polls > 10, seen
    assert seen.emptied == [], seen
    # /fresh went to chat (the catch-all) until its own route took over: never a 503.
    assert set(answers) == {stack.backends.address(0), fresh}, answers
    # The route table went out only after Envoy had ACKed the new cluster's endpoints.
    [stream] = await stack.control_plane.get_json("/v1/streams")
    acked_at = {t["type"]: t["acked_at"] for t in stream["types"]}
    assert acked_at["RDS"] > acked_at["EDS"] > acked_at["CDS"], acked_at
    stats = await envoy.stats()
    assert stats["http.gateway.no_cluster"] == 0
    assert stats["cluster_manager.warming_clusters"] == 0
